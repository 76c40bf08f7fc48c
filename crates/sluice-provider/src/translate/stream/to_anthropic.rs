//! [`OpenAiToAnthropicStream`]: an OpenAI chat-completion stream as Anthropic message events.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

use super::pipe::{Pipe, Translator, data_object, write_event};
use crate::protocol::Protocol;
use crate::sse::Event;
use crate::translate::gemini::{anthropic_signature, object_signature as signature};
use crate::translate::json::{Object, object};
use crate::translate::mapping;
use crate::usage::{RawUsage, Usage};

/// What a client gets when the upstream stream breaks off (the gateway relay's wording).
const INTERRUPTION: &[u8] = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the provider's stream was interrupted\"}}\n\n";
/// The id used if the upstream chunk carried none.
const FALLBACK_ID: &str = "msg_sluice";

/// Translates an OpenAI chat-completion SSE stream (sent with
/// `stream_options.include_usage`, as [`anthropic_to_openai_request`] asks) into Anthropic
/// message events.
///
/// The first chunk → `message_start` (input usage 0: OpenAI reports usage only at the
/// end); `delta.content` (and `delta.refusal`) → a text block (`content_block_start`,
/// `text_delta`s, `content_block_stop`); each `delta.tool_calls` index → a `tool_use`
/// block whose argument fragments are `input_json_delta`s; `delta.reasoning_content` → a
/// `thinking` block (`thinking_delta`s), which a Gemini thought signature (the
/// `extra_content` of a delta or a tool call) closes with a `signature_delta` before the
/// block of its part (a block of its own when no reasoning came); `finish_reason` closes the open
/// block; `data: [DONE]` → `message_delta` (`stop_reason`, full usage, `output_tokens`
/// included) and `message_stop`. An upstream error chunk becomes an `event: error` and
/// ends the stream. Only choice 0 is read (a translated request asks for one).
///
/// [`anthropic_to_openai_request`]: crate::anthropic_to_openai_request
#[derive(Debug)]
pub struct OpenAiToAnthropicStream {
    pipe: Pipe<State>,
}

impl OpenAiToAnthropicStream {
    /// A translator answering as `model` (the name the client asked for). Anthropic streams
    /// always carry usage, so there is no `include_usage` switch.
    #[must_use]
    pub fn new(model: &str) -> Self {
        let state = State {
            model: model.to_owned(),
            started: false,
            next_block: 0,
            open: Open::None,
            calls_seen: Vec::new(),
            finish: None,
            refused: false,
            usage: None,
            ended: false,
            completed: false,
        };
        Self { pipe: Pipe::new(state) }
    }

    /// Feeds upstream bytes; returns the client bytes for every event they completed.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.pipe.push(chunk)
    }

    /// Ends the stream: translates a last unterminated event, then, if the upstream never
    /// sent `data: [DONE]` (nor an error), appends an Anthropic `event: error`.
    pub fn finish(&mut self) -> Bytes {
        self.pipe.finish()
    }

    /// The usage seen, as OpenAI reported it (its final usage chunk): what the gateway
    /// settles against the upstream deployment.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.pipe.inner.usage
    }

    /// Whether the upstream's `data: [DONE]` arrived.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.pipe.inner.completed
    }
}

/// The content block currently open on the client side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    None,
    Text,
    /// A `thinking` block: the reasoning, then the signature that closes it.
    Thinking,
    /// The `tool_use` block of this OpenAI tool-call index.
    Tool(u64),
}

#[derive(Debug)]
struct State {
    model: String,
    started: bool,
    /// Index of the next content block.
    next_block: u64,
    open: Open,
    /// Tool-call indices already given a block (a fragment for a closed one cannot be
    /// placed: Anthropic blocks do not interleave).
    calls_seen: Vec<u64>,
    finish: Option<&'static str>,
    refused: bool,
    usage: Option<Usage>,
    ended: bool,
    completed: bool,
}

impl Translator for State {
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>) {
        if event.data.as_deref().map(str::trim) == Some("[DONE]") {
            return self.done(out);
        }
        let Some(chunk) = data_object(event) else {
            return;
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return self.error(error, out);
        }
        self.start(&chunk, out);
        if let Some(raw) = chunk.get("usage").filter(|u| u.is_object()).and_then(|u| RawUsage::deserialize(u).ok()) {
            self.usage = Some(raw.into_usage(Protocol::OpenAiChat));
        }
        let choices = chunk.get("choices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let first = choices
            .iter()
            .filter_map(Value::as_object)
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        if let Some(choice) = first {
            self.choice(choice, out);
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn interrupt(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(INTERRUPTION);
        self.ended = true;
    }
}

impl State {
    /// Sends `message_start` once, with the first chunk's id.
    fn start(&mut self, chunk: &Object, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let id = chunk.get("id").and_then(Value::as_str).map_or_else(|| FALLBACK_ID.to_owned(), mapping::anthropic_id);
        let usage = object([("input_tokens", Value::from(0)), ("output_tokens", Value::from(0))]);
        let message = object([
            ("id", Value::from(id)),
            ("type", Value::from("message")),
            ("role", Value::from("assistant")),
            ("model", Value::from(self.model.as_str())),
            ("content", Value::Array(Vec::new())),
            ("stop_reason", Value::Null),
            ("stop_sequence", Value::Null),
            ("usage", Value::Object(usage)),
        ]);
        emit(out, "message_start", [("message", Value::Object(message))]);
    }

    fn choice(&mut self, choice: &Object, out: &mut Vec<u8>) {
        if let Some(delta) = choice.get("delta").and_then(Value::as_object) {
            let text = |key| delta.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
            if let Some(reasoning) = text("reasoning_content") {
                self.thinking(reasoning, out);
            }
            if let Some(signature) = signature(delta) {
                self.signature(signature, out);
            }
            if let Some(content) = text("content") {
                self.text(content, out);
            }
            if let Some(refusal) = text("refusal") {
                self.refused = true;
                self.text(refusal, out);
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                self.tool_fragment(call, out);
                if self.ended {
                    return;
                }
            }
        }
        if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(mapping::stop_reason(Some(finish)));
            self.close(out);
        }
    }

    fn thinking(&mut self, thinking: &str, out: &mut Vec<u8>) {
        if self.open != Open::Thinking {
            self.open_thinking(out);
        }
        let delta = object([("type", Value::from("thinking_delta")), ("thinking", Value::from(thinking))]);
        self.delta(delta, out);
    }

    /// A Gemini thought signature: it closes the open thinking block (or one of its own),
    /// just before the block of the part that carried it.
    fn signature(&mut self, signature: &str, out: &mut Vec<u8>) {
        if self.open != Open::Thinking {
            self.open_thinking(out);
        }
        let signature = Value::from(anthropic_signature(signature));
        self.delta(object([("type", Value::from("signature_delta")), ("signature", signature)]), out);
        self.close(out);
    }

    fn open_thinking(&mut self, out: &mut Vec<u8>) {
        let block =
            object([("type", Value::from("thinking")), ("thinking", Value::from("")), ("signature", Value::from(""))]);
        self.open_block(Open::Thinking, block, out);
    }

    fn text(&mut self, text: &str, out: &mut Vec<u8>) {
        if self.open != Open::Text {
            self.open_block(Open::Text, object([("type", Value::from("text")), ("text", Value::from(""))]), out);
        }
        let delta = object([("type", Value::from("text_delta")), ("text", Value::from(text))]);
        self.delta(delta, out);
    }

    /// One `delta.tool_calls[]` entry: opens its block on first sight, then forwards its
    /// argument fragment.
    fn tool_fragment(&mut self, call: &Value, out: &mut Vec<u8>) {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let function = call.get("function");
        if self.open != Open::Tool(index) {
            if self.calls_seen.contains(&index) {
                return self.interrupt(out);
            }
            self.calls_seen.push(index);
            if let Some(signature) = call.as_object().and_then(signature) {
                self.signature(signature, out);
            }
            let name = function.and_then(|f| f.get("name")).cloned().unwrap_or_else(|| Value::from(""));
            let id = call.get("id").cloned().unwrap_or_else(|| Value::from(format!("toolu_sluice_{index}")));
            let block = object([
                ("type", Value::from("tool_use")),
                ("id", id),
                ("name", name),
                ("input", Value::Object(Object::new())),
            ]);
            self.open_block(Open::Tool(index), block, out);
        }
        let fragment = function.and_then(|f| f.get("arguments")).and_then(Value::as_str).filter(|s| !s.is_empty());
        if let Some(fragment) = fragment {
            let delta = object([("type", Value::from("input_json_delta")), ("partial_json", Value::from(fragment))]);
            self.delta(delta, out);
        }
    }

    fn open_block(&mut self, open: Open, block: Object, out: &mut Vec<u8>) {
        self.close(out);
        self.open = open;
        emit(
            out,
            "content_block_start",
            [("index", Value::from(self.next_block)), ("content_block", Value::Object(block))],
        );
    }

    fn delta(&self, delta: Object, out: &mut Vec<u8>) {
        emit(out, "content_block_delta", [("index", Value::from(self.next_block)), ("delta", Value::Object(delta))]);
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if self.open != Open::None {
            emit(out, "content_block_stop", [("index", Value::from(self.next_block))]);
            self.next_block += 1;
            self.open = Open::None;
        }
    }

    /// `data: [DONE]`: closes the message with its stop reason and usage.
    fn done(&mut self, out: &mut Vec<u8>) {
        self.start(&Object::new(), out);
        self.close(out);
        let stop_reason = if self.refused { "refusal" } else { self.finish.unwrap_or("end_turn") };
        let delta = object([("stop_reason", Value::from(stop_reason)), ("stop_sequence", Value::Null)]);
        let usage = mapping::anthropic_usage(&self.usage.unwrap_or_default());
        emit(out, "message_delta", [("delta", Value::Object(delta)), ("usage", usage)]);
        emit(out, "message_stop", []);
        self.ended = true;
        self.completed = true;
    }

    /// An OpenAI error chunk as an Anthropic `error` event.
    fn error(&mut self, error: &Value, out: &mut Vec<u8>) {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("the provider reported an error");
        let body = object([("type", Value::from("api_error")), ("message", Value::from(message))]);
        emit(out, "error", [("error", Value::Object(body))]);
        self.ended = true;
    }
}

/// Writes `event: <kind>` with data `{"type": <kind>, ..fields}`.
fn emit<const N: usize>(out: &mut Vec<u8>, kind: &str, fields: [(&str, Value); N]) {
    let mut data = object([("type", Value::from(kind))]);
    data.extend(fields.into_iter().map(|(k, v)| (k.to_owned(), v)));
    write_event(out, Some(kind), &Value::Object(data));
}
