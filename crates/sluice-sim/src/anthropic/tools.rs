//! Anthropic tool-call answers: a `tool_use` block with `stop_reason: "tool_use"`, and
//! streamed as `content_block_start` (`tool_use`), `input_json_delta` fragments and
//! `content_block_stop`.

use serde_json::{Value, json};

use crate::flow::Prepared;
use crate::pacer::{Render, event};
use crate::tools::{Fragments, ToolCall};

/// The `toolu_...` id of the tool call of message `id`.
fn tool_id(id: &str) -> String {
    format!("toolu_{}", id.trim_start_matches("msg_"))
}

/// The `tool_use` block of `call` in message `id`, with its whole `input`.
#[must_use]
pub fn block(call: &ToolCall, id: &str) -> Value {
    json!({"type": "tool_use", "id": tool_id(id), "name": call.name, "input": call.input()})
}

/// Renders one streamed tool call.
#[derive(Debug)]
pub struct ToolStream {
    id: String,
    model: String,
    usage: serde_json::Value,
    call: ToolCall,
    fragments: Fragments,
    /// Thinking blocks streamed first; the call's index follows them.
    thinking: Vec<Value>,
}

impl ToolStream {
    /// A renderer of `call` for `prepared`, streaming `output` tokens.
    #[must_use]
    pub fn new(id: String, prepared: &Prepared, call: ToolCall, output: u64) -> Self {
        let fragments = Fragments::new(&call, output, prepared.model.latency.chunk_tokens);
        let model = prepared.model.config.name.clone();
        Self { id, model, usage: super::usage_of(prepared, 1), call, fragments, thinking: Vec::new() }
    }

    /// The same stream, opened by `thinking` blocks ([`super::thinking::blocks`]).
    #[must_use]
    pub fn after(self, thinking: Vec<Value>) -> Self {
        Self { thinking, ..self }
    }

    fn partial(&self, out: &mut Vec<u8>, part: &str) {
        let delta = json!({"type": "input_json_delta", "partial_json": part});
        let index = self.thinking.len();
        event(out, "content_block_delta", &json!({"type": "content_block_delta", "index": index, "delta": delta}));
    }
}

impl Render for ToolStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        let usage = &self.usage;
        let message = json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage});
        event(out, "message_start", &json!({"type": "message_start", "message": message}));
        super::thinking::stream(&self.thinking, out);
        let mut block = block(&self.call, &self.id);
        block["input"] = json!({});
        let index = self.thinking.len();
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        );
        event(out, "ping", &json!({"type": "ping"}));
        self.partial(out, "");
    }

    fn chunk(&mut self, _text: &str, out: &mut Vec<u8>) {
        if let Some(part) = self.fragments.next_part().filter(|p| !p.is_empty()) {
            self.partial(out, &part);
        }
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let rest = self.fragments.rest();
        if !rest.is_empty() {
            self.partial(out, &rest);
        }
        event(out, "content_block_stop", &json!({"type": "content_block_stop", "index": self.thinking.len()}));
        let delta = json!({"stop_reason": "tool_use", "stop_sequence": null});
        event(
            out,
            "message_delta",
            &json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": output}}),
        );
        event(out, "message_stop", &json!({"type": "message_stop"}));
    }
}
