//! [`StreamTap`]: watches an upstream SSE stream on its way to the client, reading usage,
//! completion and errors without delaying it.
//!
//! Bytes are framed into events (see [`sse`](crate::sse)); each complete event is
//! forwarded in the same `push` that completed it, byte for byte, with one exception: the
//! OpenAI usage chunk the gateway itself asked for (and the `"usage":null` members it adds
//! to every other chunk) are removed when `hide_usage_chunk` is set. Only an incomplete
//! trailing event is held back. Because decisions are taken per complete event, the
//! forwarded bytes and the outcome do not depend on how the stream was cut into chunks.

mod anthropic;
mod openai;
mod responses;

use bytes::Bytes;

use crate::protocol::Protocol;
use crate::sse;
use crate::usage::Usage;

/// Largest event held back while waiting for its end. A longer one (no provider sends
/// one) is forwarded as it stands and its remainder treated as a fresh event, so memory
/// stays bounded even if an upstream never ends an event.
pub const MAX_HELD_EVENT_BYTES: usize = 1 << 20;

/// What a stream told the gateway, so far or in total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOutcome {
    /// OpenAI chat: the final usage chunk (requires `stream_options.include_usage`).
    /// OpenAI Responses: `response.usage` of the final event. Anthropic:
    /// `message_start.usage` (input and cache) updated by the last `message_delta.usage`
    /// (cumulative `output_tokens`). `None` if no usage was seen.
    pub usage: Option<Usage>,
    /// The usage seen is the provider's final count: OpenAI chat's usage chunk, the
    /// Responses API's final event, Anthropic's `message_delta` (not `message_start`'s
    /// opening figures).
    pub usage_final: bool,
    /// Saw `data: [DONE]` (OpenAI chat) / `response.completed` or `response.incomplete`
    /// (OpenAI Responses) / `message_stop` (Anthropic).
    pub completed: bool,
    /// Saw an error event (`event: error`) or an OpenAI chunk with a top-level `error`.
    pub error_event: bool,
}

/// Watches one SSE response stream passing through the gateway.
#[derive(Debug)]
pub struct StreamTap {
    protocol: Protocol,
    hide_usage_chunk: bool,
    /// Bytes of an event whose blank line has not arrived yet.
    held: Vec<u8>,
    /// Where in `held` to resume looking for the blank line.
    resume: usize,
    outcome: StreamOutcome,
    /// OpenAI Responses: the response's id, once an event named it.
    response_id: Option<String>,
}

impl StreamTap {
    /// A tap for a `protocol` stream.
    ///
    /// `hide_usage_chunk`: the gateway forced `stream_options.include_usage` for its own
    /// accounting (see [`upstream_body`](crate::upstream_body)); remove the OpenAI
    /// usage-only chunk (`"choices":[]` with `usage`) and the `"usage":null` members of the
    /// other chunks, so the client receives what it would have without the option. Ignored
    /// for Anthropic, whose usage events are part of the protocol.
    #[must_use]
    pub fn new(protocol: Protocol, hide_usage_chunk: bool) -> Self {
        let hide_usage_chunk = hide_usage_chunk && protocol.is_openai_chunks();
        Self {
            protocol,
            hide_usage_chunk,
            held: Vec::new(),
            resume: 0,
            outcome: StreamOutcome::default(),
            response_id: None,
        }
    }

    /// Feeds one upstream chunk; returns the bytes to forward to the client now: every
    /// event this chunk completed (and blank lines between events). Holds only an
    /// incomplete trailing event.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        let mut out = Vec::new();
        if self.held.is_empty() {
            let used = self.frame(chunk, 0, &mut out);
            self.held.extend_from_slice(chunk.get(used..).unwrap_or_default());
        } else {
            let mut buf = std::mem::take(&mut self.held);
            buf.extend_from_slice(chunk);
            let used = self.frame(&buf, self.resume, &mut out);
            buf.drain(..used);
            self.held = buf;
        }
        self.resume = sse::resume_hint(self.held.len());
        if self.held.len() > MAX_HELD_EVENT_BYTES {
            out.append(&mut self.held);
            self.resume = 0;
        }
        Bytes::from(out)
    }

    /// Returns whatever is still held (an unterminated last event), unchanged, and
    /// analyses it as if it had been terminated.
    pub fn flush(&mut self) -> Bytes {
        let held = std::mem::take(&mut self.held);
        self.resume = 0;
        if held.is_empty() {
            return Bytes::new();
        }
        self.forward(&held, false, &mut Vec::new());
        Bytes::from(held)
    }

    /// What the stream told so far.
    #[must_use]
    pub fn outcome(&self) -> StreamOutcome {
        self.outcome
    }

    /// OpenAI Responses: the id of the response streamed, once an event named it.
    #[must_use]
    pub fn response_id(&self) -> Option<&str> {
        self.response_id.as_deref()
    }

    /// Appends the complete events at the start of `buf` (as the client should get them)
    /// to `out`; returns how many bytes of `buf` they took. `resume` is where the first
    /// event's terminator search may start.
    fn frame(&mut self, buf: &[u8], mut resume: usize, out: &mut Vec<u8>) -> usize {
        let mut start = 0;
        loop {
            let rest = buf.get(start..).unwrap_or_default();
            let blank = sse::leading_blank_len(rest);
            if blank > 0 {
                out.extend_from_slice(&rest[..blank]);
                start += blank;
                resume = resume.saturating_sub(blank);
                continue;
            }
            let Some(len) = sse::event_len(rest, resume) else {
                return start;
            };
            self.forward(&rest[..len], self.hide_usage_chunk, out);
            start += len;
            resume = 0;
        }
    }

    /// Analyses one complete event and appends what the client should get of it.
    fn forward(&mut self, event: &[u8], hide_usage: bool, out: &mut Vec<u8>) {
        let Ok(text) = std::str::from_utf8(event) else {
            out.extend_from_slice(event);
            return;
        };
        match self.protocol {
            Protocol::OpenAiChat | Protocol::OpenAiCompletions => {
                openai::event(text, hide_usage, &mut self.outcome, out);
            }
            Protocol::AnthropicMessages => {
                anthropic::event(text, &mut self.outcome);
                out.extend_from_slice(event);
            }
            Protocol::OpenAiResponses => {
                if let Some(id) = responses::event(text, &mut self.outcome) {
                    self.response_id = Some(id);
                }
                out.extend_from_slice(event);
            }
            // Embeddings never stream; forward anything untouched.
            Protocol::OpenAiEmbeddings => out.extend_from_slice(event),
        }
    }
}

#[cfg(test)]
mod tests;
