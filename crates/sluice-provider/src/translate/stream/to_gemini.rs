//! [`OpenAiToGeminiStream`]: the road's OpenAI chat chunks as a Gemini
//! `streamGenerateContent` answer (<https://ai.google.dev/api/generate-content#method:-models.streamgeneratecontent>):
//! server-sent events of whole `GenerateContentResponse`s with `?alt=sse`, else one JSON
//! array of them, streamed element by element.

use bytes::Bytes;
use serde_json::{Value, json};

use super::pipe::{Pipe, Translator, data_object};
use crate::sse::Event;
use crate::translate::gemini::{
    block_signature, extra_content_signature, function_call_part, gemini_finish_reason, gemini_usage_of,
    openai_error_to_gemini, text_part,
};

/// What a Gemini client gets when the stream breaks off before its end.
const INTERRUPTED: &[u8] =
    br#"{"error":{"message":"the provider's stream was interrupted","code":"upstream_stream_interrupted"}}"#;

/// How the responses are framed for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeminiFraming {
    /// `?alt=sse`: `data: {…}` events.
    Sse,
    /// No `alt`: a JSON array, `[{…},\r\n{…}]`.
    JsonArray,
}

/// Translates an OpenAI chat-completion stream (with its usage chunk, as
/// [`gemini_to_openai_request`](crate::gemini_to_openai_request) asks) into Gemini
/// `GenerateContentResponse` chunks.
///
/// `delta.content` → a text part at once (with the delta's
/// `extra_content.google.thought_signature` as its `thoughtSignature`); `delta.reasoning_content` → a
/// `thought: true` part, and each whole block of `delta.thinking_blocks` (Claude's, which
/// comes when its signature does) an empty one carrying the block in its `thoughtSignature`; tool-call fragments are gathered and go out as whole
/// `functionCall` parts (Gemini streams complete calls) with the last chunk, which also
/// carries `finishReason` and `usageMetadata` (from the usage chunk), when `data: [DONE]`
/// comes. An error chunk → a Google error object (`{"error": {"code", "message",
/// "status"}}`, which google-genai raises as its `APIError`) and the end; a stream that
/// stops short ends with the same error for its interruption.
#[derive(Debug)]
pub struct OpenAiToGeminiStream {
    pipe: Pipe<State>,
}

#[derive(Debug)]
struct State {
    model: String,
    framing: GeminiFraming,
    id: Option<String>,
    /// Tool calls by stream index: the first fragment's entry, arguments appended.
    calls: Vec<(u64, Value, String)>,
    finish: Option<String>,
    usage: Option<Value>,
    written: bool,
    ended: bool,
}

impl OpenAiToGeminiStream {
    /// A translator answering as `model`, framed as `framing`.
    #[must_use]
    pub fn new(model: &str, framing: GeminiFraming) -> Self {
        let state = State {
            model: model.to_owned(),
            framing,
            id: None,
            calls: Vec::new(),
            finish: None,
            usage: None,
            written: false,
            ended: false,
        };
        Self { pipe: Pipe::new(state) }
    }

    /// Feeds OpenAI stream bytes; returns the client bytes for every event they completed.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.pipe.push(chunk)
    }

    /// Ends the stream: the interruption error when `data: [DONE]` never came, and the
    /// closing `]` of a JSON array.
    pub fn finish(&mut self) -> Bytes {
        self.pipe.finish()
    }
}

impl State {
    fn write(&mut self, out: &mut Vec<u8>, value: &Value) {
        let body = serde_json::to_vec(value).unwrap_or_default();
        match self.framing {
            GeminiFraming::Sse => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n\r\n");
            }
            GeminiFraming::JsonArray => {
                out.extend_from_slice(if self.written { b",\r\n" } else { b"[" });
                out.extend_from_slice(&body);
            }
        }
        self.written = true;
    }

    fn end(&mut self, out: &mut Vec<u8>) {
        if self.framing == GeminiFraming::JsonArray {
            out.extend_from_slice(if self.written { b"]" } else { b"[]" });
        }
        self.ended = true;
    }

    fn response(&self, parts: Vec<Value>) -> Value {
        let mut response = json!({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}], "modelVersion": self.model});
        if let Some(id) = &self.id {
            response["responseId"] = Value::from(id.as_str());
        }
        response
    }

    fn delta(&mut self, delta: &Value, out: &mut Vec<u8>) {
        // A signed block comes whole when its signature arrives, after its text came as
        // `reasoning_content` deltas: it goes out as one more (empty) thought part carrying
        // the block, which is what the client's replay needs.
        let mut parts = Vec::new();
        if let Some(thought) = delta.get("reasoning_content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            parts.push(json!({"text": thought, "thought": true}));
        }
        for block in delta.get("thinking_blocks").and_then(Value::as_array).into_iter().flatten() {
            parts.push(json!({"text": "", "thought": true, "thoughtSignature": block_signature(block)}));
        }
        let text = delta.get("content").and_then(Value::as_str).unwrap_or_default();
        let signature = extra_content_signature(delta);
        if !text.is_empty() || signature.is_some() {
            parts.push(text_part(text, signature));
        }
        for fragment in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            self.gather(fragment);
        }
        if !parts.is_empty() {
            let response = self.response(parts);
            self.write(out, &response);
        }
    }

    /// One tool-call fragment, gathered under its index.
    fn gather(&mut self, fragment: &Value) {
        let index = fragment.get("index").and_then(Value::as_u64).unwrap_or(0);
        let arguments = fragment.get("function").and_then(|f| f.get("arguments")).and_then(Value::as_str);
        match self.calls.iter_mut().find(|(i, _, _)| *i == index) {
            Some((_, entry, held)) => {
                held.push_str(arguments.unwrap_or_default());
                if let (Some(signature), None) = (extra_content_signature(fragment), extra_content_signature(entry)) {
                    entry["extra_content"] = json!({"google": {"thought_signature": signature}});
                }
            }
            None => self.calls.push((index, fragment.clone(), arguments.unwrap_or_default().to_owned())),
        }
    }

    fn done(&mut self, out: &mut Vec<u8>) {
        let parts: Vec<Value> = std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(_, mut entry, arguments)| {
                entry["function"]["arguments"] = Value::from(arguments);
                function_call_part(&entry)
            })
            .collect();
        let mut last = self.response(parts);
        last["candidates"][0]["finishReason"] = Value::from(gemini_finish_reason(self.finish.as_deref()));
        if let Some(usage) = &self.usage {
            last["usageMetadata"] = gemini_usage_of(usage);
        }
        self.write(out, &last);
        self.end(out);
    }

    fn error(&mut self, data: &[u8], out: &mut Vec<u8>) {
        let error: Value = serde_json::from_slice(&openai_error_to_gemini(500, data, None)).unwrap_or_default();
        self.write(out, &error);
        self.end(out);
    }
}

impl Translator for State {
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>) {
        if event.data.as_deref().map(str::trim) == Some("[DONE]") {
            return self.done(out);
        }
        let Some(chunk) = data_object(event) else { return };
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return self.error(&serde_json::to_vec(&chunk).unwrap_or_default(), out);
        }
        if self.id.is_none() {
            self.id = chunk.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else { return };
        if let Some(delta) = choice.get("delta") {
            self.delta(delta, out);
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn interrupt(&mut self, out: &mut Vec<u8>) {
        self.error(INTERRUPTED, out);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::{GeminiFraming, OpenAiToGeminiStream};

    const UPSTREAM: &str = concat!(
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":\"weather\",\"arguments\":\"{\\\"ci\"},\"extra_content\":{\"google\":{\"thought_signature\":\"c2ln\"}}}]}}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"ty\\\":\\\"Oslo\\\"}\"}}]}}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: {\"id\":\"chatcmpl-7\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7,\"total_tokens\":12}}\n\n",
        "data: [DONE]\n\n",
    );

    fn run(framing: GeminiFraming, input: &str, cut: usize) -> String {
        let mut stream = OpenAiToGeminiStream::new("gemini", framing);
        let mut out = Vec::new();
        for piece in input.as_bytes().chunks(cut) {
            out.extend_from_slice(&stream.push(piece));
        }
        out.extend_from_slice(&stream.finish());
        String::from_utf8(out).unwrap()
    }

    fn events(text: &str) -> Vec<Value> {
        text.split("\r\n\r\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn text_streams_at_once_and_calls_finish_and_usage_come_last_whatever_the_cuts() {
        for cut in [1, 7, 4096] {
            let all = events(&run(GeminiFraming::Sse, UPSTREAM, cut));
            let text: String =
                all.iter().filter_map(|e| e["candidates"][0]["content"]["parts"][0]["text"].as_str()).collect();
            assert_eq!(text, "Hello");
            let last = all.last().unwrap();
            assert_eq!(
                last["candidates"][0]["content"]["parts"],
                json!([{"functionCall": {"id": "call_0", "name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"}])
            );
            assert_eq!(last["candidates"][0]["finishReason"], "STOP");
            assert_eq!(
                last["usageMetadata"],
                json!({"promptTokenCount": 5, "candidatesTokenCount": 7, "totalTokenCount": 12})
            );
            assert_eq!(all[0]["responseId"], "chatcmpl-7");
        }
    }

    #[test]
    fn without_alt_sse_the_answer_is_one_json_array() {
        let text = run(GeminiFraming::JsonArray, UPSTREAM, 5);
        let array: Vec<Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(array.len(), 3);
        assert_eq!(array[2]["usageMetadata"]["totalTokenCount"], 12);
        assert_eq!(run(GeminiFraming::JsonArray, "data: [DONE]\n\n", 5).chars().next(), Some('['));
    }

    #[test]
    fn errors_and_interruptions_end_with_a_google_error() {
        let error = "data: {\"error\":{\"message\":\"deadline passed\",\"type\":\"timeout\",\"code\":\"deadline_exceeded\"}}\n\n";
        let all = events(&run(GeminiFraming::Sse, error, 9));
        assert_eq!(all.len(), 1);
        assert_eq!(all[0]["error"]["message"], "deadline passed");
        assert_eq!(all[0]["error"]["details"][0]["reason"], "deadline_exceeded");
        let cut = run(GeminiFraming::Sse, &UPSTREAM[..200], 9);
        let last = events(&cut).pop().unwrap();
        assert_eq!(last["error"]["details"][0]["reason"], "upstream_stream_interrupted");
        assert!(cut.ends_with("\r\n\r\n"));
        let array: Vec<Value> = serde_json::from_str(&run(GeminiFraming::JsonArray, &UPSTREAM[..200], 9)).unwrap();
        assert!(array.last().unwrap().get("error").is_some());
    }
}
