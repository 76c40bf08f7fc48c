//! The `response` object of `POST /v1/responses` and its stream of events.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::flow::Prepared;
use crate::pacer::{Render, event};
use crate::sim::Sim;

/// What the body of one response is built from.
#[derive(Debug, Clone)]
pub struct ResponseFrame {
    id: String,
    message_id: String,
    created_at: u64,
    model: String,
    input: u64,
    cached: u64,
    cap: u64,
    /// The request's input items, kept with the response.
    items: Vec<Value>,
}

impl ResponseFrame {
    /// The frame of response `id` answering `prepared`.
    #[must_use]
    pub fn new(id: String, created_at: u64, prepared: &Prepared) -> Self {
        let message_id = format!("msg_{}", id.trim_start_matches("resp_"));
        Self {
            id,
            message_id,
            created_at,
            model: prepared.model.config.name.clone(),
            input: prepared.input,
            cached: prepared.cached,
            cap: prepared.ask.cap,
            items: Vec::new(),
        }
    }

    /// The frame with the request's `input` kept as its input items.
    #[must_use]
    pub fn with_input(mut self, input: Option<&Value>) -> Self {
        self.items = super::responses_store::input_items(input, &self.id);
        self
    }

    /// Keeps the finished `response` (of `output` tokens) for reads and continuations.
    pub fn keep(&self, sim: &Sim, response: &Value, output: u64) {
        sim.responses.finished(&self.id, response.clone(), self.items.clone(), self.input + output);
    }

    /// Keeps a background response: answered `queued` now, finished as `done` by the next read.
    #[must_use]
    pub fn keep_queued(&self, sim: &Sim, done: &Value, output: u64) -> Value {
        let mut queued = self.object("queued", json!([]), Value::Null, Value::Null);
        queued["background"] = json!(true);
        let mut done = done.clone();
        done["background"] = json!(true);
        sim.responses.queued(&self.id, queued.clone(), self.items.clone(), done, self.input + output);
        queued
    }

    /// The `response` object whose output is a call to a tool.
    #[must_use]
    pub fn tool_call(&self, call: &crate::tools::ToolCall, output: u64) -> Value {
        let stem = self.id.trim_start_matches("resp_");
        let item = json!({
            "id": format!("fc_{stem}"), "type": "function_call", "status": "completed",
            "call_id": format!("call_{stem}"), "name": call.name, "arguments": call.arguments,
        });
        self.object("completed", json!([item]), self.usage(output), Value::Null)
    }

    /// The response's id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `usage` of `output` tokens generated.
    fn usage(&self, output: u64) -> Value {
        json!({
            "input_tokens": self.input,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.input + output,
        })
    }

    /// The assistant message item holding `text` (`in_progress` while streaming).
    fn message(&self, text: Option<&str>) -> Value {
        let (status, content) = match text {
            Some(text) => ("completed", json!([output_text(text)])),
            None => ("in_progress", json!([])),
        };
        json!({"id": self.message_id, "type": "message", "status": status, "role": "assistant", "content": content})
    }

    /// The `response` object: `text` and `output` once done (`None` while in progress).
    #[must_use]
    pub fn response(&self, done: Option<(&str, u64)>) -> Value {
        let (status, output, usage, incomplete) = match done {
            Some((text, output)) if output >= self.cap => (
                "incomplete",
                json!([self.message(Some(text))]),
                self.usage(output),
                json!({"reason": "max_output_tokens"}),
            ),
            Some((text, output)) => ("completed", json!([self.message(Some(text))]), self.usage(output), Value::Null),
            None => ("in_progress", json!([]), Value::Null, Value::Null),
        };
        self.object(status, output, usage, incomplete)
    }

    fn object(&self, status: &str, output: Value, usage: Value, incomplete: Value) -> Value {
        json!({
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "error": null, "incomplete_details": incomplete, "instructions": null, "metadata": {},
            "model": self.model, "output": output, "parallel_tool_calls": true, "temperature": 1.0,
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "max_output_tokens": self.cap,
            "previous_response_id": null, "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": usage,
        })
    }
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// Renders one streamed response as the Responses API's typed events; a completed one
/// leaves its context in `sim` for a continuation.
pub struct ResponsesStream {
    frame: ResponseFrame,
    text: String,
    sequence: u64,
    sim: Arc<Sim>,
}

impl ResponsesStream {
    /// A renderer for `frame`.
    #[must_use]
    pub fn new(frame: ResponseFrame, sim: Arc<Sim>) -> Self {
        Self { frame, text: String::new(), sequence: 0, sim }
    }

    /// Writes event `name` with `fields` plus its `type` and `sequence_number`.
    fn emit(&mut self, out: &mut Vec<u8>, name: &str, mut fields: Value) {
        if let Value::Object(map) = &mut fields {
            map.insert("type".into(), json!(name));
            map.insert("sequence_number".into(), json!(self.sequence));
        }
        self.sequence += 1;
        event(out, name, &fields);
    }

    /// Fields locating the text part: item, output and content indexes.
    fn at(&self, mut extra: Value) -> Value {
        if let Value::Object(map) = &mut extra {
            map.insert("item_id".into(), json!(self.frame.message_id));
            map.insert("output_index".into(), json!(0));
            map.insert("content_index".into(), json!(0));
        }
        extra
    }
}

impl Render for ResponsesStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        let response = self.frame.response(None);
        self.emit(out, "response.created", json!({"response": response}));
        self.emit(out, "response.in_progress", json!({"response": response}));
        let item = self.frame.message(None);
        self.emit(out, "response.output_item.added", json!({"output_index": 0, "item": item}));
        let part = self.at(json!({"part": output_text("")}));
        self.emit(out, "response.content_part.added", part);
    }

    fn chunk(&mut self, text: &str, out: &mut Vec<u8>) {
        self.text.push_str(text);
        let delta = self.at(json!({"delta": text, "logprobs": []}));
        self.emit(out, "response.output_text.delta", delta);
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let text = std::mem::take(&mut self.text);
        let done = self.at(json!({"text": text, "logprobs": []}));
        self.emit(out, "response.output_text.done", done);
        let part = self.at(json!({"part": output_text(&text)}));
        self.emit(out, "response.content_part.done", part);
        let item = self.frame.message(Some(&text));
        self.emit(out, "response.output_item.done", json!({"output_index": 0, "item": item}));
        let response = self.frame.response(Some((&text, output)));
        self.frame.keep(&self.sim, &response, output);
        let name = if output >= self.frame.cap { "response.incomplete" } else { "response.completed" };
        self.emit(out, name, json!({"response": response}));
    }
}
