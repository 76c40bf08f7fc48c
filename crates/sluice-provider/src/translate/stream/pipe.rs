//! What the stream translators share: the [`Translator`] each direction implements, the
//! [`Pipe`] that frames upstream bytes into complete events for it, and writing and reading
//! one event's JSON.

use bytes::Bytes;
use serde_json::Value;

use super::framer::Framer;
use crate::sse::Event;
use crate::tap::MAX_HELD_EVENT_BYTES;
use crate::translate::json;

/// One direction's event-by-event state machine.
pub(super) trait Translator {
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
pub(super) struct Pipe<T> {
    framer: Framer,
    pub(super) inner: T,
}

impl<T: Translator> Pipe<T> {
    pub(super) fn new(inner: T) -> Self {
        Self { framer: Framer::default(), inner }
    }

    pub(super) fn push(&mut self, chunk: &[u8]) -> Bytes {
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

    pub(super) fn finish(&mut self) -> Bytes {
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
pub(super) fn write_event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(&json::to_vec(data));
    out.extend_from_slice(b"\n\n");
}

/// The event's data as a JSON object, if it is one.
pub(super) fn data_object(event: &Event<'_>) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str(event.data.as_deref()?) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}
