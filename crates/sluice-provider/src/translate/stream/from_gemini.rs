//! [`GeminiToOpenAiStream`]: a Gemini `streamGenerateContent?alt=sse` stream as OpenAI chat
//! chunks.

use bytes::Bytes;
use serde_json::{Value, json};

use super::pipe::{Pipe, Translator, data_object, write_event};
use super::to_openai::INTERRUPTION;
use crate::sse::Event;
use crate::translate::gemini::{extra_content, finish_reason, is_thought, openai_usage_of, part_signature, tool_call};

/// Translates a Gemini SSE stream (each event a whole `GenerateContentResponse`) into OpenAI
/// chat-completion chunks.
///
/// The first event → a chunk with `delta.role = "assistant"`; text parts → `delta.content`
/// (thought summaries, `thought: true`, → `delta.reasoning_content`); a `functionCall` part → one complete `delta.tool_calls`
/// entry; a part's `thoughtSignature` → `extra_content.google.thought_signature` on its tool
/// call entry, or on the delta of its text (a delta of its own when the text is empty), as
/// the non-stream answer carries it; the event carrying `finishReason` → a chunk with `finish_reason`, then a usage
/// chunk (`choices: []`, from the last `usageMetadata`) and `data: [DONE]`. Gemini has no
/// terminal event: a stream that closes without a `finishReason` was cut, and ends with the
/// OpenAI interruption chunk. An `error` event becomes an OpenAI error chunk.
///
/// The usage chunk is always written: the gateway's tap hides it from a client that did
/// not ask for `stream_options.include_usage`, after reading it for settling.
#[derive(Debug)]
pub struct GeminiToOpenAiStream {
    pipe: Pipe<State>,
}

#[derive(Debug)]
struct State {
    model: String,
    created: u64,
    id: Option<String>,
    tool_calls: usize,
    usage: Option<Value>,
    ended: bool,
}

impl GeminiToOpenAiStream {
    /// A translator answering as `model` (the name the client asked for), each chunk
    /// `created` at this Unix time.
    #[must_use]
    pub fn new(model: &str, created: u64) -> Self {
        let state = State { model: model.to_owned(), created, id: None, tool_calls: 0, usage: None, ended: false };
        Self { pipe: Pipe::new(state) }
    }

    /// Feeds upstream bytes; returns the client bytes for every event they completed.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.pipe.push(chunk)
    }

    /// Ends the stream: the interruption chunk when no `finishReason` came.
    pub fn finish(&mut self) -> Bytes {
        self.pipe.finish()
    }
}

impl State {
    fn chunk(&self, choices: Value) -> Value {
        let id = format!("chatcmpl-{}", self.id.as_deref().unwrap_or("sluice"));
        json!({"id": id, "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": choices})
    }

    fn delta(&self, out: &mut Vec<u8>, delta: &Value, finish: Option<&str>) {
        write_event(
            out,
            None,
            &self.chunk(json!([{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}])),
        );
    }

    fn parts(&mut self, parts: &[Value], out: &mut Vec<u8>) {
        for part in parts {
            if is_thought(part) {
                if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    self.delta(out, &json!({"reasoning_content": text}), None);
                }
                continue;
            }
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                let mut delta = json!({"content": text});
                if let Some(signature) = part_signature(part) {
                    if text.is_empty() {
                        delta = json!({});
                    }
                    delta["extra_content"] = extra_content(signature);
                }
                self.delta(out, &delta, None);
            } else if part.get("functionCall").is_some() {
                let mut entry = tool_call((self.tool_calls, part));
                entry["index"] = Value::from(self.tool_calls);
                self.tool_calls += 1;
                self.delta(out, &json!({"tool_calls": [entry]}), None);
            }
        }
    }

    fn finish(&mut self, reason: Option<&str>, out: &mut Vec<u8>) {
        let finish = finish_reason(reason, self.tool_calls > 0);
        self.delta(out, &json!({}), Some(finish));
        if let Some(usage) = &self.usage {
            let mut chunk = self.chunk(json!([]));
            chunk["usage"] = openai_usage_of(usage);
            write_event(out, None, &chunk);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
        self.ended = true;
    }
}

impl Translator for State {
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>) {
        let Some(data) = data_object(event) else { return };
        if let Some(error) = data.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("the provider reported an error");
            let status = error.get("status").cloned().unwrap_or(Value::Null);
            write_event(out, None, &json!({"error": {"message": message, "type": "server_error", "code": status}}));
            self.ended = true;
            return;
        }
        if self.id.is_none() {
            self.id = Some(data.get("responseId").and_then(Value::as_str).unwrap_or("sluice").to_owned());
            self.delta(out, &json!({"role": "assistant", "content": ""}), None);
        }
        if let Some(usage) = data.get("usageMetadata") {
            self.usage = Some(usage.clone());
        }
        let candidate = data.get("candidates").and_then(Value::as_array).and_then(|c| c.first());
        let parts = candidate.and_then(|c| c.get("content")?.get("parts")?.as_array());
        self.parts(parts.map_or(&[][..], Vec::as_slice), out);
        let blocked = candidate.is_none() && data.get("promptFeedback").and_then(|f| f.get("blockReason")).is_some();
        match candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str) {
            Some(reason) => self.finish(Some(reason), out),
            None if blocked => self.finish(Some("SAFETY"), out),
            None => {}
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

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::Value;

    use super::GeminiToOpenAiStream;

    fn chunks(text: &str) -> Vec<Value> {
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn a_whole_stream_ends_with_finish_usage_and_done_whatever_the_cuts() {
        let upstream = concat!(
            "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]}}],\"usageMetadata\":{\"promptTokenCount\":5},\"responseId\":\"r9\"}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":3}}\r\n\r\n",
        );
        let mut stream = GeminiToOpenAiStream::new("flash", 1);
        let mut out = Vec::new();
        for piece in upstream.as_bytes().chunks(7) {
            out.extend_from_slice(&stream.push(piece));
        }
        out.extend_from_slice(&stream.finish());
        let text = String::from_utf8(out).unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
        let all = chunks(&text);
        let content: String = all.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
        assert_eq!(content, "Hello");
        assert_eq!(all[0]["id"], "chatcmpl-r9");
        assert_eq!(all.iter().find_map(|c| c["choices"][0]["finish_reason"].as_str()), Some("stop"));
        let usage = &all.last().unwrap()["usage"];
        assert_eq!((usage["prompt_tokens"].as_u64(), usage["completion_tokens"].as_u64()), (Some(5), Some(5)));
    }

    #[test]
    fn thought_signatures_ride_on_their_tool_call_and_text_deltas() {
        let upstream = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"weather\",\"args\":{}},\"thoughtSignature\":\"c2ln\"}]}}]}\r\n\r\n",
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\",\"thoughtSignature\":\"dGV4dA==\"}]},\"finishReason\":\"STOP\"}]}\r\n\r\n",
        );
        let mut stream = GeminiToOpenAiStream::new("flash", 1);
        let mut out = stream.push(upstream.as_bytes()).to_vec();
        out.extend_from_slice(&stream.finish());
        let all = chunks(&String::from_utf8(out).unwrap());
        let call = all.iter().find_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0)).unwrap();
        assert_eq!(call["extra_content"]["google"]["thought_signature"], "c2ln");
        let signed = all.iter().find(|c| c["choices"][0]["delta"].get("extra_content").is_some()).unwrap();
        assert_eq!(
            signed["choices"][0]["delta"],
            serde_json::json!({"extra_content": {"google": {"thought_signature": "dGV4dA=="}}})
        );
    }

    #[test]
    fn a_stream_closed_without_a_finish_reason_is_an_interruption() {
        let mut stream = GeminiToOpenAiStream::new("flash", 1);
        stream.push(b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hel\"}]}}]}\r\n\r\n");
        let tail = String::from_utf8(stream.finish().to_vec()).unwrap();
        assert!(tail.contains("upstream_stream_interrupted"), "{tail}");
        assert!(!tail.contains("[DONE]"));
    }
}
