//! OpenAI tool-call answers: `message.tool_calls` with `finish_reason: "tool_calls"`, and
//! streamed as `delta.tool_calls` chunks carrying argument fragments.

use serde_json::{Value, json};

use super::response::{ChatUsage, FINGERPRINT};
use crate::flow::Prepared;
use crate::pacer::{Render, data};
use crate::tools::{Fragments, ToolCall};

/// The `call_...` id of the tool call of completion `id`.
fn call_id(id: &str) -> String {
    format!("call_{}", id.trim_start_matches("chatcmpl-"))
}

/// The `chat.completion` body of a tool call that took `output` tokens.
#[must_use]
pub fn completion_body(prepared: &Prepared, call: &ToolCall, id: &str, created: u64, output: u64) -> Vec<u8> {
    let tool_call = json!({"id": call_id(id), "type": "function",
        "function": {"name": call.name, "arguments": call.arguments}});
    let message = json!({"role": "assistant", "content": null, "tool_calls": [tool_call],
        "refusal": null, "annotations": []});
    let body = json!({
        "id": id, "object": "chat.completion", "created": created, "model": prepared.model.config.name,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": ChatUsage::new(prepared.input, output).with_cached(prepared.cached), "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    });
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Renders one streamed tool call.
#[derive(Debug)]
pub struct ToolStream {
    id: String,
    created: u64,
    model: String,
    prompt: u64,
    cached: u64,
    include_usage: bool,
    call: ToolCall,
    fragments: Fragments,
}

impl ToolStream {
    /// A renderer of `call` for `prepared`, streaming `output` tokens.
    #[must_use]
    pub fn new(
        id: String,
        created: u64,
        prepared: &Prepared,
        include_usage: bool,
        call: ToolCall,
        output: u64,
    ) -> Self {
        let fragments = Fragments::new(&call, output, prepared.model.latency.chunk_tokens);
        Self {
            id,
            created,
            model: prepared.model.config.name.clone(),
            prompt: prepared.input,
            cached: prepared.cached,
            include_usage,
            call,
            fragments,
        }
    }

    fn write(&self, out: &mut Vec<u8>, delta: &Value, finish_reason: Option<&str>) {
        let choice = json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason});
        self.chunk_with(out, &json!([choice]), &Value::Null);
    }

    fn chunk_with(&self, out: &mut Vec<u8>, choices: &Value, usage: &Value) {
        let mut chunk = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model, "system_fingerprint": FINGERPRINT, "choices": choices});
        if self.include_usage {
            chunk["usage"] = usage.clone();
        }
        data(out, &chunk);
    }

    fn arguments(&self, out: &mut Vec<u8>, part: &str) {
        let delta = json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]});
        self.write(out, &delta, None);
    }
}

impl Render for ToolStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        let call = json!({"index": 0, "id": call_id(&self.id), "type": "function",
            "function": {"name": self.call.name, "arguments": ""}});
        let delta = json!({"role": "assistant", "content": null, "tool_calls": [call], "refusal": null});
        self.write(out, &delta, None);
    }

    fn chunk(&mut self, _text: &str, out: &mut Vec<u8>) {
        if let Some(part) = self.fragments.next_part().filter(|p| !p.is_empty()) {
            self.arguments(out, &part);
        }
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let rest = self.fragments.rest();
        if !rest.is_empty() {
            self.arguments(out, &rest);
        }
        self.write(out, &json!({}), Some("tool_calls"));
        if self.include_usage {
            let usage =
                serde_json::to_value(ChatUsage::new(self.prompt, output).with_cached(self.cached)).unwrap_or_default();
            self.chunk_with(out, &json!([]), &usage);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }
}
