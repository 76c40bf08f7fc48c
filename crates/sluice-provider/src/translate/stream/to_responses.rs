//! Anthropic stream events out as Responses API events, in two stages: Anthropic events to
//! chat chunks ([`AnthropicToOpenAiStream`], usage included), then chat chunks to the
//! Responses events (`response.created` … `response.output_text.delta` /
//! `response.function_call_arguments.delta` … `response.completed`).

use bytes::Bytes;
use serde_json::{Value, json};

use super::pipe::{Pipe, Translator, data_object, write_event};
use super::to_openai::AnthropicToOpenAiStream;
use crate::sse::Event;
use crate::translate::responses_messages::{ResponseObject, item_id};
use crate::usage::Usage;

/// A Responses client's view of an Anthropic stream.
#[derive(Debug)]
pub struct AnthropicToResponsesStream {
    chat: AnthropicToOpenAiStream,
    pipe: Pipe<State>,
}

impl AnthropicToResponsesStream {
    /// A translator answering as `model`, `created` the Unix time of the response.
    #[must_use]
    pub fn new(model: &str, created: u64) -> Self {
        let object = ResponseObject { created_at: created, model: model.to_owned(), ..ResponseObject::default() };
        let state = State { object, sequence: 0, text: None, calls: Vec::new(), started: false, ended: false };
        Self { chat: AnthropicToOpenAiStream::new(model, true, created), pipe: Pipe::new(state) }
    }

    /// Feeds upstream bytes; returns the client bytes for every event they completed.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        let chat = self.chat.push(chunk);
        self.pipe.push(&chat)
    }

    /// Ends the stream; a stream the upstream did not finish ends with the Responses
    /// protocol's error event.
    pub fn finish(&mut self) -> Bytes {
        let chat = self.chat.finish();
        let mut out = self.pipe.push(&chat).to_vec();
        out.extend_from_slice(&self.pipe.finish());
        Bytes::from(out)
    }

    /// The usage seen, as Anthropic reported it.
    #[must_use]
    pub fn usage(&self) -> Option<Usage> {
        self.chat.usage()
    }

    /// Whether the upstream's `message_stop` arrived.
    #[must_use]
    pub fn completed(&self) -> bool {
        self.chat.completed()
    }
}

/// A function call being streamed.
#[derive(Debug)]
struct Call {
    id: String,
    call_id: String,
    name: String,
    arguments: String,
}

#[derive(Debug)]
struct State {
    object: ResponseObject,
    sequence: u64,
    /// The message item's text, once text started.
    text: Option<String>,
    calls: Vec<Call>,
    started: bool,
    ended: bool,
}

impl Translator for State {
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>) {
        if event.data.as_deref().map(str::trim) == Some("[DONE]") {
            return self.complete(out);
        }
        let Some(chunk) = data_object(event).map(Value::Object) else { return };
        if let Some(error) = chunk.get("error") {
            let message = error["message"].as_str().unwrap_or("the provider reported an error");
            return self.fail(error["code"].as_str().unwrap_or("upstream_error"), message, out);
        }
        self.start(&chunk, out);
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.object.usage =
                Some((usage["prompt_tokens"].as_u64().unwrap_or(0), usage["completion_tokens"].as_u64().unwrap_or(0)));
        }
        let choice = &chunk["choices"][0];
        if let Some(text) = choice["delta"]["content"].as_str().filter(|t| !t.is_empty()) {
            self.text_delta(text, out);
        }
        for call in choice["delta"]["tool_calls"].as_array().into_iter().flatten() {
            self.call_delta(call, out);
        }
        if choice["finish_reason"] == "length" {
            self.object.truncated = true;
        }
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn interrupt(&mut self, out: &mut Vec<u8>) {
        self.fail("upstream_stream_interrupted", "the provider's stream was interrupted", out);
    }
}

impl State {
    fn emit(&mut self, out: &mut Vec<u8>, name: &str, mut fields: Value) {
        fields["type"] = json!(name);
        fields["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        write_event(out, Some(name), &fields);
    }

    fn start(&mut self, chunk: &Value, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let id = chunk["id"].as_str().unwrap_or_default().trim_start_matches("chatcmpl-");
        self.object.id = format!("resp_{id}");
        let response = self.object.to_value("in_progress");
        self.emit(out, "response.created", json!({"response": response}));
        self.emit(out, "response.in_progress", json!({"response": response}));
    }

    fn message_id(&self) -> String {
        item_id("msg", &self.object.id, 0)
    }

    fn text_delta(&mut self, text: &str, out: &mut Vec<u8>) {
        let item_id = self.message_id();
        if self.text.is_none() {
            self.text = Some(String::new());
            let item =
                json!({"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
            self.emit(out, "response.output_item.added", json!({"output_index": 0, "item": item}));
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            let at = json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": part});
            self.emit(out, "response.content_part.added", at);
        }
        if let Some(all) = &mut self.text {
            all.push_str(text);
        }
        let delta = json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": text});
        self.emit(out, "response.output_text.delta", delta);
    }

    fn output_index(&self, call: usize) -> usize {
        call + usize::from(self.text.is_some())
    }

    fn call_delta(&mut self, delta: &Value, out: &mut Vec<u8>) {
        let index = delta["index"].as_u64().and_then(|i| usize::try_from(i).ok()).unwrap_or(self.calls.len());
        if index >= self.calls.len() {
            let call = Call {
                id: item_id("fc", &self.object.id, self.calls.len()),
                call_id: delta["id"].as_str().unwrap_or_default().to_owned(),
                name: delta["function"]["name"].as_str().unwrap_or_default().to_owned(),
                arguments: String::new(),
            };
            let item = json!({"id": call.id, "type": "function_call", "status": "in_progress",
                "call_id": call.call_id, "name": call.name, "arguments": ""});
            self.calls.push(call);
            let output_index = self.output_index(self.calls.len() - 1);
            self.emit(out, "response.output_item.added", json!({"output_index": output_index, "item": item}));
        }
        let Some(arguments) = delta["function"]["arguments"].as_str().filter(|a| !a.is_empty()) else { return };
        let last = self.calls.len() - 1;
        let (item_id, output_index) = (self.calls[last].id.clone(), self.output_index(last));
        self.calls[last].arguments.push_str(arguments);
        let delta = json!({"item_id": item_id, "output_index": output_index, "delta": arguments});
        self.emit(out, "response.function_call_arguments.delta", delta);
    }

    /// Closes the open items and ends with `response.completed` (or `.incomplete`).
    fn complete(&mut self, out: &mut Vec<u8>) {
        if let Some(text) = self.text.take() {
            let item_id = self.message_id();
            let at = |extra: Value| {
                let mut v = json!({"item_id": item_id, "output_index": 0, "content_index": 0});
                if let (Value::Object(map), Value::Object(extra)) = (&mut v, extra) {
                    map.extend(extra);
                }
                v
            };
            self.emit(out, "response.output_text.done", at(json!({"text": text})));
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            self.emit(out, "response.content_part.done", at(json!({"part": part})));
            let item = json!({"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]});
            self.emit(out, "response.output_item.done", json!({"output_index": 0, "item": item.clone()}));
            self.object.output.push(item);
        }
        let first = self.object.output.len();
        for (n, call) in std::mem::take(&mut self.calls).into_iter().enumerate() {
            let at = json!({"item_id": call.id, "output_index": first + n, "arguments": call.arguments});
            self.emit(out, "response.function_call_arguments.done", at);
            let item = json!({"id": call.id, "type": "function_call", "status": "completed",
                "call_id": call.call_id, "name": call.name, "arguments": call.arguments});
            self.emit(out, "response.output_item.done", json!({"output_index": first + n, "item": item.clone()}));
            self.object.output.push(item);
        }
        let status = self.object.final_status();
        let name = if status == "completed" { "response.completed" } else { "response.incomplete" };
        let response = self.object.to_value(status);
        self.emit(out, name, json!({"response": response}));
        self.ended = true;
    }

    fn fail(&mut self, code: &str, message: &str, out: &mut Vec<u8>) {
        let error = json!({"code": code, "message": message, "param": null});
        self.emit(out, "error", error);
        self.ended = true;
    }
}
