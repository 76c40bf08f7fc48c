//! Anthropic streaming: `message_start`, `content_block_*`, `message_delta`, `message_stop`.

use serde_json::json;

use crate::flow::Prepared;
use crate::pacer::{Render, event};

/// Renders one streamed message.
#[derive(Debug)]
pub struct MessageStream {
    id: String,
    model: String,
    usage: serde_json::Value,
    cap: u64,
    /// Thinking blocks streamed first; the text block's index follows them.
    thinking: Vec<serde_json::Value>,
}

impl MessageStream {
    /// A renderer for `prepared`.
    #[must_use]
    pub fn new(id: String, prepared: &Prepared) -> Self {
        Self {
            id,
            model: prepared.model.config.name.clone(),
            usage: super::usage_of(prepared, 1),
            cap: prepared.ask.cap,
            thinking: Vec::new(),
        }
    }

    /// The same stream, opened by `thinking` blocks ([`super::thinking::blocks`]).
    #[must_use]
    pub fn after(self, thinking: Vec<serde_json::Value>) -> Self {
        Self { thinking, ..self }
    }
}

impl Render for MessageStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        let usage = &self.usage;
        let message = json!({"id": self.id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage});
        event(out, "message_start", &json!({"type": "message_start", "message": message}));
        super::thinking::stream(&self.thinking, out);
        let index = self.thinking.len();
        event(
            out,
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        );
        event(out, "ping", &json!({"type": "ping"}));
    }

    fn chunk(&mut self, text: &str, out: &mut Vec<u8>) {
        event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.thinking.len(), "delta": {"type": "text_delta", "text": text}}),
        );
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        event(out, "content_block_stop", &json!({"type": "content_block_stop", "index": self.thinking.len()}));
        let delta = json!({"stop_reason": super::stop_reason(output, self.cap), "stop_sequence": null});
        event(
            out,
            "message_delta",
            &json!({"type": "message_delta", "delta": delta, "usage": {"output_tokens": output}}),
        );
        event(out, "message_stop", &json!({"type": "message_stop"}));
    }
}
