//! OpenAI chat streaming: `chat.completion.chunk` events ending in `data: [DONE]`.

use serde::Serialize;

use super::response::{ChatUsage, FINGERPRINT, finish_reason};
use crate::flow::Prepared;
use crate::pacer::{Render, data};

/// Renders one streamed chat completion.
#[derive(Debug)]
pub struct ChatStream {
    id: String,
    created: u64,
    model: String,
    prompt: u64,
    cached: u64,
    cap: u64,
    include_usage: bool,
}

#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    system_fingerprint: &'static str,
    choices: &'a [ChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Option<ChatUsage>>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
}

impl ChatStream {
    /// A renderer for `prepared`.
    #[must_use]
    pub fn new(id: String, created: u64, prepared: &Prepared, include_usage: bool) -> Self {
        Self {
            id,
            created,
            model: prepared.model.config.name.clone(),
            prompt: prepared.input,
            cached: prepared.cached,
            cap: prepared.ask.cap,
            include_usage,
        }
    }

    fn write(&self, out: &mut Vec<u8>, choices: &[ChunkChoice<'_>], usage: Option<ChatUsage>) {
        let usage = if self.include_usage { Some(usage) } else { None };
        let chunk = Chunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            system_fingerprint: FINGERPRINT,
            choices,
            usage,
        };
        data(out, &chunk);
    }
}

impl Render for ChatStream {
    fn head(&mut self, out: &mut Vec<u8>) {
        let delta = Delta { role: Some("assistant"), content: Some("") };
        self.write(out, &[ChunkChoice { index: 0, delta, logprobs: None, finish_reason: None }], None);
    }

    fn chunk(&mut self, text: &str, out: &mut Vec<u8>) {
        let delta = Delta { role: None, content: Some(text) };
        self.write(out, &[ChunkChoice { index: 0, delta, logprobs: None, finish_reason: None }], None);
    }

    fn tail(&mut self, output: u64, out: &mut Vec<u8>) {
        let reason = finish_reason(output, self.cap);
        self.write(
            out,
            &[ChunkChoice { index: 0, delta: Delta::default(), logprobs: None, finish_reason: Some(reason) }],
            None,
        );
        if self.include_usage {
            self.write(out, &[], Some(ChatUsage::new(self.prompt, output).with_cached(self.cached)));
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }
}
