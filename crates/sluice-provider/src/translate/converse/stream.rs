//! ConverseStream's AWS event-stream frames as Anthropic SSE (the gateway), and Anthropic
//! SSE as event-stream frames (the simulator). Framing (prelude, CRCs) is the maintained
//! `aws-smithy-eventstream` crate's.

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};
use serde_json::{Value, json};

use super::names::{stop_to_anthropic, stop_to_converse};
use super::response::{usage_to_anthropic, usage_to_converse};

/// One event-stream frame: an `event` of `event_type` with a JSON payload, or (when
/// `exception` is set) an exception of that type.
#[must_use]
pub fn converse_frame(event_type: &str, payload: &Value, exception: bool) -> Vec<u8> {
    let (message_type, type_header) =
        if exception { ("exception", ":exception-type") } else { ("event", ":event-type") };
    let headers = vec![
        Header::new(":message-type", HeaderValue::String(message_type.into())),
        Header::new(type_header, HeaderValue::String(event_type.to_owned().into())),
        Header::new(":content-type", HeaderValue::String("application/json".into())),
    ];
    let message = Message::new_from_parts(headers, serde_json::to_vec(payload).unwrap_or_default());
    let mut out = Vec::new();
    // Writing to a Vec fails only for a header or payload beyond the format's size limits.
    if write_message_to(&message, &mut out).is_err() {
        out.clear();
    }
    out
}

fn sse(out: &mut Vec<u8>, event: &str, data: &Value) {
    out.extend_from_slice(format!("event: {event}\ndata: {data}\n\n").as_bytes());
}

/// One base64 text of the bytes of several base64 pieces (one piece goes as it is).
fn joined_base64(mut pieces: Vec<String>) -> String {
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or_default();
    }
    let parts: Option<Vec<Vec<u8>>> = pieces.iter().map(|p| aws_smithy_types::base64::decode(p).ok()).collect();
    let bytes = parts.map(|parts| parts.concat());
    bytes.map_or_else(|| pieces.concat(), aws_smithy_types::base64::encode)
}

fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    let found = message.headers().iter().find(|h| h.name().as_str() == name)?;
    match found.value() {
        HeaderValue::String(s) => Some(s.as_str()),
        _ => None,
    }
}

/// Reads ConverseStream's event-stream bytes (any chunking) and writes the Anthropic SSE
/// events of the same answer: `message_start`, `content_block_*`, then `message_delta`
/// (stop reason and the usage of `metadata`) and `message_stop`. An exception frame
/// (throttling, a model stream error) becomes Anthropic's `error` event, worded by the
/// gateway (the exception's type, never AWS's text); a frame that breaks the framing ends
/// the stream the same way.
#[derive(Debug)]
pub struct ConverseToAnthropicStream {
    buf: BytesMut,
    decoder: MessageFrameDecoder,
    id: String,
    model: String,
    open: Vec<u64>,
    stop: Option<&'static str>,
    ended: bool,
    /// A `redactedContent` block's pieces (its index and base64 pieces): Anthropic's
    /// `redacted_thinking` block is opened whole, so it goes out when the block stops.
    redacted: Option<(u64, Vec<String>)>,
    /// InvokeModelWithResponseStream: each `chunk` frame carries one Anthropic event.
    invoke: bool,
}

impl ConverseToAnthropicStream {
    /// A translator of the answer of `model`, its message named `id`.
    #[must_use]
    pub fn new(model: &str, id: &str) -> Self {
        let (id, model) = (id.to_owned(), model.to_owned());
        Self {
            buf: BytesMut::new(),
            decoder: MessageFrameDecoder::new(),
            id,
            model,
            open: Vec::new(),
            stop: None,
            ended: false,
            redacted: None,
            invoke: false,
        }
    }

    /// A reader of InvokeModelWithResponseStream (Anthropic models): its `chunk` frames'
    /// base64 `bytes` are Anthropic's own events, passed on as SSE; exceptions as above.
    #[must_use]
    pub fn invoke(model: &str) -> Self {
        Self { invoke: true, ..Self::new(model, "") }
    }

    /// Anthropic SSE bytes for the frames `chunk` completes.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while !self.ended {
            match self.decoder.decode_frame(&mut self.buf) {
                Ok(DecodedFrame::Complete(message)) => self.frame(&message, &mut out),
                Ok(DecodedFrame::Incomplete) => break,
                Err(_) => self.error(&mut out, "api_error", "the provider's event stream was malformed"),
            }
        }
        Bytes::from(out)
    }

    /// The closing events when `messageStop` came but no `metadata` followed.
    pub fn finish(&mut self) -> Bytes {
        let mut out = Vec::new();
        if let (false, Some(stop)) = (self.ended, self.stop) {
            sse(
                &mut out,
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 0}}),
            );
            sse(&mut out, "message_stop", &json!({"type": "message_stop"}));
            self.ended = true;
        }
        Bytes::from(out)
    }

    fn frame(&mut self, message: &Message, out: &mut Vec<u8>) {
        let payload: Value = serde_json::from_slice(message.payload()).unwrap_or(Value::Null);
        if header(message, ":message-type") == Some("exception") {
            let kind = header(message, ":exception-type").unwrap_or("internalServerException");
            let (anthropic, text) = match kind {
                "throttlingException" | "serviceQuotaExceededException" => {
                    ("rate_limit_error", "Bedrock throttled the stream")
                }
                "serviceUnavailableException" | "modelNotReadyException" => {
                    ("overloaded_error", "Bedrock is unavailable")
                }
                _ => ("api_error", "Bedrock ended the stream with an error"),
            };
            return self.error(out, anthropic, &format!("{text} ({kind})"));
        }
        if self.invoke {
            return self.chunk(&payload, out);
        }
        let index = payload.get("contentBlockIndex").and_then(Value::as_u64).unwrap_or(0);
        match header(message, ":event-type").unwrap_or_default() {
            "messageStart" => {
                let message = json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                    "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 0, "output_tokens": 0}});
                sse(out, "message_start", &json!({"type": "message_start", "message": message}));
            }
            "contentBlockStart" => {
                let call = payload.get("start").and_then(|s| s.get("toolUse"));
                let block = json!({"type": "tool_use", "id": call.and_then(|c| c.get("toolUseId")), "name": call.and_then(|c| c.get("name")), "input": {}});
                self.open_block(index, block, out);
            }
            "contentBlockDelta" => self.delta(index, payload.get("delta").unwrap_or(&Value::Null), out),
            "contentBlockStop" => {
                if let Some((at, pieces)) = self.redacted.take_if(|(at, _)| *at == index) {
                    self.open_block(at, json!({"type": "redacted_thinking", "data": joined_base64(pieces)}), out);
                }
                self.open.retain(|i| *i != index);
                sse(out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
            }
            "messageStop" => {
                self.stop =
                    Some(payload.get("stopReason").and_then(Value::as_str).map_or("end_turn", stop_to_anthropic))
            }
            "metadata" => self.metadata(&payload, out),
            _ => {}
        }
    }

    fn chunk(&mut self, payload: &Value, out: &mut Vec<u8>) {
        let decoded =
            payload.get("bytes").and_then(Value::as_str).and_then(|b| aws_smithy_types::base64::decode(b).ok());
        let Some(event) = decoded.and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()) else { return };
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        sse(out, &kind, &event);
        self.ended = kind == "message_stop";
    }

    fn open_block(&mut self, index: u64, block: Value, out: &mut Vec<u8>) {
        self.open.push(index);
        sse(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
    }

    fn delta(&mut self, index: u64, delta: &Value, out: &mut Vec<u8>) {
        let anthropic = if let Some(text) = delta.get("text") {
            if !self.open.contains(&index) {
                self.open_block(index, json!({"type": "text", "text": ""}), out);
            }
            json!({"type": "text_delta", "text": text})
        } else if let Some(input) = delta.get("toolUse").and_then(|t| t.get("input")) {
            json!({"type": "input_json_delta", "partial_json": input})
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            return self.reasoning(index, reasoning, out);
        } else {
            return;
        };
        sse(out, "content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": anthropic}));
    }

    /// A `reasoningContent` delta (one of `text`, `signature`, `redactedContent`): Anthropic's
    /// `thinking_delta` and `signature_delta` on a `thinking` block, or the pieces of a
    /// `redacted_thinking` block.
    fn reasoning(&mut self, index: u64, reasoning: &Value, out: &mut Vec<u8>) {
        if let Some(data) = reasoning.get("redactedContent").and_then(Value::as_str) {
            match &mut self.redacted {
                Some((at, pieces)) if *at == index => pieces.push(data.to_owned()),
                _ => self.redacted = Some((index, vec![data.to_owned()])),
            }
            return;
        }
        if !self.open.contains(&index) {
            self.open_block(index, json!({"type": "thinking", "thinking": "", "signature": ""}), out);
        }
        let delta = |d: Value| json!({"type": "content_block_delta", "index": index, "delta": d});
        if let Some(text) = reasoning.get("text") {
            sse(out, "content_block_delta", &delta(json!({"type": "thinking_delta", "thinking": text})));
        }
        if let Some(signature) = reasoning.get("signature") {
            sse(out, "content_block_delta", &delta(json!({"type": "signature_delta", "signature": signature})));
        }
    }

    fn metadata(&mut self, payload: &Value, out: &mut Vec<u8>) {
        let usage = usage_to_anthropic(payload.get("usage").unwrap_or(&Value::Null));
        let stop = self.stop.unwrap_or("end_turn");
        sse(
            out,
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage}),
        );
        sse(out, "message_stop", &json!({"type": "message_stop"}));
        self.ended = true;
    }

    fn error(&mut self, out: &mut Vec<u8>, kind: &str, message: &str) {
        sse(out, "error", &json!({"type": "error", "error": {"type": kind, "message": message}}));
        self.ended = true;
    }
}

/// The InvokeModelWithResponseStream frame of one Anthropic SSE event (`data`): a
/// `chunk` whose `bytes` is the event's JSON in base64 (an `error` event is an exception).
/// InvokeModelWithResponseStream:
/// <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModelWithResponseStream.html>.
#[must_use]
pub fn anthropic_event_to_invoke(event: &str, data: &Value) -> Vec<u8> {
    if event == "error" {
        return exception_frame(data);
    }
    let bytes = aws_smithy_types::base64::encode(serde_json::to_vec(data).unwrap_or_default());
    converse_frame("chunk", &json!({"bytes": bytes}), false)
}

/// Anthropic SSE bytes (any chunking) re-framed as ConverseStream's AWS event-stream
/// messages, or (`invoke`) as InvokeModelWithResponseStream's `chunk`s, as the events come:
/// the simulator's Bedrock answers, and the gateway's answers to Bedrock clients. Converse's
/// events (`messageStart`, `contentBlockStart` for a tool call, `contentBlockDelta` with
/// `text`, `toolUse.input`, `reasoningContent.text` / `.signature` / `.redactedContent`,
/// `contentBlockStop`, `messageStop`, `metadata` with the usage and `metrics.latencyMs`)
/// are ConverseStream's output union
/// (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>,
/// `API_runtime_ConverseStreamOutput.html`); an Anthropic `error` event becomes the
/// exception of its kind (`throttlingException`, `serviceUnavailableException`,
/// `modelStreamErrorException`). Framing:
/// <https://docs.aws.amazon.com/transcribe/latest/dg/event-stream.html> (the encoding every
/// AWS event stream uses).
#[derive(Debug, Default)]
pub struct AnthropicToConverseStream {
    held: Vec<u8>,
    /// The usage counted so far (`message_start`'s, updated by `message_delta`'s).
    usage: Value,
    invoke: bool,
    latency_ms: u64,
}

impl AnthropicToConverseStream {
    /// Frames of ConverseStream, or (`invoke`) of InvokeModelWithResponseStream.
    #[must_use]
    pub fn new(invoke: bool) -> Self {
        Self { invoke, ..Self::default() }
    }

    /// The latency `metadata` reports (`metrics.latencyMs`; 0 until set).
    pub fn set_latency_ms(&mut self, latency_ms: u64) {
        self.latency_ms = latency_ms;
    }

    /// The frames of the events `chunk` completes.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.held.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(len) = crate::sse::event_len(&self.held, from) {
            let event: Vec<u8> = self.held.drain(..len).collect();
            from = 0;
            let text = String::from_utf8_lossy(&event);
            let parsed = crate::sse::Event::parse(&text);
            let (Some(kind), Some(data)) = (parsed.name, parsed.data) else { continue };
            let data: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            if self.invoke {
                out.extend(anthropic_event_to_invoke(kind, &data));
            } else {
                out.extend(self.event(kind, &data));
            }
        }
        Bytes::from(out)
    }

    /// The event-stream frames of one Anthropic SSE event (`event`, its `data`).
    fn event(&mut self, event: &str, data: &Value) -> Vec<u8> {
        let index = data.get("index").cloned().unwrap_or(Value::from(0));
        match event {
            "message_start" => {
                self.usage = data.get("message").and_then(|m| m.get("usage")).cloned().unwrap_or(Value::Null);
                converse_frame("messageStart", &json!({"role": "assistant"}), false)
            }
            "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                let block = &data["content_block"];
                let start = json!({"toolUse": {"toolUseId": block.get("id"), "name": block.get("name")}});
                converse_frame("contentBlockStart", &json!({"start": start, "contentBlockIndex": index}), false)
            }
            // Converse opens no reasoning block: its redacted content comes as one delta.
            "content_block_start" if data["content_block"]["type"] == "redacted_thinking" => {
                let delta = json!({"reasoningContent": {"redactedContent": data["content_block"].get("data")}});
                converse_frame("contentBlockDelta", &json!({"delta": delta, "contentBlockIndex": index}), false)
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                let converse = match delta.get("type").and_then(Value::as_str) {
                    Some("input_json_delta") => json!({"toolUse": {"input": delta.get("partial_json")}}),
                    Some("thinking_delta") => json!({"reasoningContent": {"text": delta.get("thinking")}}),
                    Some("signature_delta") => json!({"reasoningContent": {"signature": delta.get("signature")}}),
                    _ => json!({"text": delta.get("text")}),
                };
                converse_frame("contentBlockDelta", &json!({"delta": converse, "contentBlockIndex": index}), false)
            }
            "content_block_stop" => converse_frame("contentBlockStop", &json!({"contentBlockIndex": index}), false),
            "message_delta" => {
                // The final counts: output always, input and cache counts when the answer
                // states them only here (a stream translated from another protocol).
                if let Some(counted) = data.get("usage").and_then(Value::as_object) {
                    if !self.usage.is_object() {
                        self.usage = json!({});
                    }
                    if let Some(object) = self.usage.as_object_mut() {
                        for (key, n) in counted.iter().filter(|(_, n)| n.is_u64()) {
                            object.insert(key.clone(), n.clone());
                        }
                    }
                }
                let stop =
                    data["delta"].get("stop_reason").and_then(Value::as_str).map_or("end_turn", stop_to_converse);
                converse_frame("messageStop", &json!({"stopReason": stop}), false)
            }
            "message_stop" => {
                let metadata =
                    json!({"usage": usage_to_converse(&self.usage), "metrics": {"latencyMs": self.latency_ms}});
                converse_frame("metadata", &metadata, false)
            }
            "error" => exception_frame(data),
            _ => Vec::new(),
        }
    }
}

/// The exception frame of an Anthropic `error` event: its kind by the error's type, its
/// message as the event words it.
fn exception_frame(data: &Value) -> Vec<u8> {
    let kind = match data["error"].get("type").and_then(Value::as_str) {
        Some("rate_limit_error") => "throttlingException",
        Some("overloaded_error") => "serviceUnavailableException",
        _ => "modelStreamErrorException",
    };
    converse_frame(kind, &json!({"message": data["error"].get("message")}), true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Anthropic SSE text of `(event, data)` pairs.
    fn sse_of(events: &[(&str, Value)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (event, data) in events {
            sse(&mut out, event, data);
        }
        out
    }

    /// ConverseStream frames of `(event, data)` pairs.
    fn converse_frames(events: &[(&str, Value)]) -> Vec<u8> {
        AnthropicToConverseStream::new(false).push(&sse_of(events)).to_vec()
    }

    fn frames() -> Vec<u8> {
        let events = [
            ("message_start", json!({"message": {"usage": {"input_tokens": 12, "output_tokens": 1}}})),
            ("content_block_start", json!({"index": 0, "content_block": {"type": "text", "text": ""}})),
            ("content_block_delta", json!({"index": 0, "delta": {"type": "text_delta", "text": "Hel"}})),
            ("content_block_delta", json!({"index": 0, "delta": {"type": "text_delta", "text": "lo"}})),
            ("content_block_stop", json!({"index": 0})),
            ("message_delta", json!({"delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 2}})),
            ("message_stop", json!({})),
        ];
        converse_frames(&events)
    }

    #[test]
    fn converse_frames_read_as_anthropic_events_in_any_chunking() {
        let bytes = frames();
        let mut whole = ConverseToAnthropicStream::new("m", "msg_1");
        let expected = String::from_utf8_lossy(&whole.push(&bytes)).into_owned();
        assert!(expected.starts_with("event: message_start\n"), "{expected}");
        assert!(expected.contains(r#""delta":{"text":"Hel","type":"text_delta"}"#), "{expected}");
        assert!(expected.contains(r#""stop_reason":"max_tokens""#), "{expected}");
        assert!(expected.contains(r#""input_tokens":12"#) && expected.contains(r#""output_tokens":2"#), "{expected}");
        assert!(expected.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        let mut bytewise = ConverseToAnthropicStream::new("m", "msg_1");
        let pieces: Vec<u8> = bytes.iter().flat_map(|b| bytewise.push(&[*b]).to_vec()).collect();
        assert_eq!(String::from_utf8_lossy(&pieces), expected);
    }

    #[test]
    fn invoke_model_chunks_are_anthropic_events_passed_on() {
        let events = [
            ("message_start", json!({"type": "message_start", "message": {"usage": {"input_tokens": 3}}})),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
            ),
            ("message_stop", json!({"type": "message_stop"})),
        ];
        let bytes: Vec<u8> = events.iter().flat_map(|(e, d)| anthropic_event_to_invoke(e, d)).collect();
        let mut stream = ConverseToAnthropicStream::invoke("m");
        let out = String::from_utf8_lossy(&stream.push(&bytes)).into_owned();
        assert!(out.starts_with("event: message_start\ndata: {"), "{out}");
        assert!(out.contains(r#""text":"hi""#), "{out}");
        assert!(out.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), "{out}");
    }

    #[test]
    fn a_throttling_exception_mid_stream_ends_it_with_an_error_event_in_the_gateways_words() {
        let mut bytes = frames();
        bytes.truncate(bytes.len() / 2);
        let mut stream = ConverseToAnthropicStream::new("m", "msg_1");
        let _ = stream.push(&bytes);
        let mut fresh = ConverseToAnthropicStream::new("m", "msg_1");
        let _ = fresh.push(&converse_frames(&[("message_start", json!({"message": {}}))]));
        let exception =
            converse_frame("throttlingException", &json!({"message": "Too many tokens, secret AKIA..."}), true);
        let out = String::from_utf8_lossy(&fresh.push(&exception)).into_owned();
        assert!(out.starts_with("event: error\n") && out.contains("rate_limit_error"), "{out}");
        assert!(!out.contains("AKIA"), "AWS's text is not passed on: {out}");
        assert!(fresh.push(b"more").is_empty(), "nothing after the error");
    }

    /// The Anthropic events of an SSE text, as (event, data) pairs.
    fn events(sse: &str) -> Vec<(String, Value)> {
        sse.split("\n\n")
            .filter_map(|e| {
                let (head, data) = e.split_once("\ndata: ")?;
                Some((head.trim_start_matches("event: ").to_owned(), serde_json::from_str(data).ok()?))
            })
            .collect()
    }

    #[test]
    fn reasoning_deltas_and_their_signature_reach_the_client_in_order() {
        let anthropic = [
            ("message_start", json!({"message": {"usage": {"input_tokens": 5}}})),
            (
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "redacted_thinking", "data": "RU5D"}}),
            ),
            ("content_block_stop", json!({"index": 0})),
            (
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            ("content_block_delta", json!({"index": 1, "delta": {"type": "thinking_delta", "thinking": "Let me "}})),
            ("content_block_delta", json!({"index": 1, "delta": {"type": "thinking_delta", "thinking": "think."}})),
            ("content_block_delta", json!({"index": 1, "delta": {"type": "signature_delta", "signature": "c2lnLTE="}})),
            ("content_block_stop", json!({"index": 1})),
            ("content_block_start", json!({"index": 2, "content_block": {"type": "text", "text": ""}})),
            ("content_block_delta", json!({"index": 2, "delta": {"type": "text_delta", "text": "Hi"}})),
            ("content_block_stop", json!({"index": 2})),
            ("message_delta", json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}})),
            ("message_stop", json!({})),
        ];
        let bytes = converse_frames(&anthropic);
        let mut bytewise = ConverseToAnthropicStream::new("m", "msg_1");
        let pieces: Vec<u8> = bytes.iter().flat_map(|b| bytewise.push(&[*b]).to_vec()).collect();
        let out = events(&String::from_utf8_lossy(&pieces));
        let starts: Vec<&Value> =
            out.iter().filter(|(e, _)| e == "content_block_start").map(|(_, d)| &d["content_block"]).collect();
        assert_eq!(starts[0], &json!({"type": "redacted_thinking", "data": "RU5D"}));
        assert_eq!(starts[1]["type"], "thinking");
        assert_eq!(starts[2]["type"], "text");
        let deltas: Vec<&Value> =
            out.iter().filter(|(e, _)| e == "content_block_delta").map(|(_, d)| &d["delta"]).collect();
        assert_eq!(
            deltas,
            [
                &json!({"type": "thinking_delta", "thinking": "Let me "}),
                &json!({"type": "thinking_delta", "thinking": "think."}),
                &json!({"type": "signature_delta", "signature": "c2lnLTE="}),
                &json!({"type": "text_delta", "text": "Hi"}),
            ]
        );
        let stops: Vec<&Value> =
            out.iter().filter(|(e, _)| e == "content_block_stop").map(|(_, d)| &d["index"]).collect();
        assert_eq!(stops, [&json!(0), &json!(1), &json!(2)], "each block closed once, in order");
    }

    #[test]
    fn redacted_content_in_pieces_is_one_block_with_all_its_bytes() {
        let frame = |data: &str| {
            let delta = json!({"reasoningContent": {"redactedContent": data}});
            converse_frame("contentBlockDelta", &json!({"delta": delta, "contentBlockIndex": 0}), false)
        };
        let mut stream = ConverseToAnthropicStream::new("m", "msg_1");
        let mut bytes = frame(&aws_smithy_types::base64::encode(b"secret "));
        bytes.extend(frame(&aws_smithy_types::base64::encode(b"reasoning")));
        bytes.extend(converse_frame("contentBlockStop", &json!({"contentBlockIndex": 0}), false));
        let out = events(&String::from_utf8_lossy(&stream.push(&bytes)));
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].1["content_block"]["data"], aws_smithy_types::base64::encode(b"secret reasoning"));
        assert_eq!(out[1].0, "content_block_stop");
    }
}
