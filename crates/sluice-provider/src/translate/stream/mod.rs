//! Streaming translation: upstream SSE bytes of one protocol in, client SSE bytes of the
//! other out.
//!
//! Like [`StreamTap`](crate::StreamTap), the translators frame the upstream bytes into
//! complete events (chunk boundaries may fall anywhere) and act per complete event, so the
//! output does not depend on how the stream was cut. Each event is translated as soon as it
//! is complete; only an unterminated trailing event is held, bounded by
//! [`MAX_HELD_EVENT_BYTES`] (past it the stream counts as broken).
//!
//! `finish` ends the stream: if the upstream's terminal event (`message_stop` / `data:
//! [DONE]`) or an error event never came, the client gets its protocol's interruption event
//! (the same bytes the gateway's relay sends for an untranslated stream), never a
//! fabricated ending.

mod framer;
mod from_gemini;
mod to_anthropic;
mod to_openai;
mod to_responses;

use bytes::Bytes;
use serde_json::Value;

use self::framer::Framer;
use crate::sse::Event;
use crate::tap::MAX_HELD_EVENT_BYTES;

pub use self::from_gemini::GeminiToOpenAiStream;
pub use self::to_anthropic::OpenAiToAnthropicStream;
pub use self::to_openai::AnthropicToOpenAiStream;
pub use self::to_responses::AnthropicToResponsesStream;

/// One direction's event-by-event state machine.
trait Translator {
    /// Translates one complete upstream event.
    fn event(&mut self, event: &Event<'_>, out: &mut Vec<u8>);
    /// The upstream's terminal event, an error or an interruption was handled: later input
    /// is ignored.
    fn ended(&self) -> bool;
    /// Writes the client's interruption event and ends the stream.
    fn interrupt(&mut self, out: &mut Vec<u8>);
}

/// Framing plus a [`Translator`]: the shared body of both public stream types.
#[derive(Debug)]
struct Pipe<T> {
    framer: Framer,
    inner: T,
}

impl<T: Translator> Pipe<T> {
    fn new(inner: T) -> Self {
        Self { framer: Framer::default(), inner }
    }

    fn push(&mut self, chunk: &[u8]) -> Bytes {
        if self.inner.ended() {
            return Bytes::new();
        }
        let mut out = Vec::new();
        self.framer.feed(chunk);
        while !self.inner.ended()
            && let Some(text) = self.framer.next_event()
        {
            self.inner.event(&Event::parse(&text), &mut out);
        }
        if self.inner.ended() {
            self.framer.clear();
        } else if self.framer.held() > MAX_HELD_EVENT_BYTES {
            self.framer.clear();
            self.inner.interrupt(&mut out);
        }
        Bytes::from(out)
    }

    fn finish(&mut self) -> Bytes {
        let mut out = Vec::new();
        if let Some(text) = self.framer.take_rest()
            && !self.inner.ended()
        {
            self.inner.event(&Event::parse(&text), &mut out);
        }
        if !self.inner.ended() {
            self.inner.interrupt(&mut out);
        }
        Bytes::from(out)
    }
}

/// Appends one SSE event: an optional `event:` line, then `data: <json>` and a blank line.
fn write_event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(&super::json::to_vec(data));
    out.extend_from_slice(b"\n\n");
}

/// The event's data as a JSON object, if it is one.
fn data_object(event: &Event<'_>) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str(event.data.as_deref()?) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}
