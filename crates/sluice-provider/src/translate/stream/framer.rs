//! Cuts an SSE byte stream into complete events, whatever the chunk boundaries.

use crate::sse;

/// Bytes received but not yet handed out as complete events.
#[derive(Debug, Default)]
pub(super) struct Framer {
    buf: Vec<u8>,
    /// Bytes of `buf` already handed out.
    start: usize,
    /// Where, relative to `start`, the terminator search may resume.
    resume: usize,
}

impl Framer {
    /// Appends a chunk (first dropping what was handed out).
    pub(super) fn feed(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event (blank line included), skipping blank lines between events.
    pub(super) fn next_event(&mut self) -> Option<String> {
        loop {
            let rest = self.buf.get(self.start..)?;
            let blank = sse::leading_blank_len(rest);
            if blank > 0 {
                self.start += blank;
                self.resume = self.resume.saturating_sub(blank);
                continue;
            }
            let Some(len) = sse::event_len(rest, self.resume) else {
                self.resume = sse::resume_hint(rest.len());
                return None;
            };
            let text = String::from_utf8_lossy(rest.get(..len)?).into_owned();
            self.start += len;
            self.resume = 0;
            return Some(text);
        }
    }

    /// Bytes held for an unterminated event.
    pub(super) fn held(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// Forgets everything held.
    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }

    /// The unterminated last event, if any bytes other than blank lines remain.
    pub(super) fn take_rest(&mut self) -> Option<String> {
        let rest = self.buf.get(self.start..).unwrap_or_default();
        let text = String::from_utf8_lossy(rest).into_owned();
        self.clear();
        (!text.trim().is_empty()).then_some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_across_chunks() {
        let mut framer = Framer::default();
        framer.feed(b"\r\nevent: a\ndata: 1\n");
        assert_eq!(framer.next_event(), None);
        framer.feed(b"\ndata: 2\n\n\ndata: 3");
        assert_eq!(framer.next_event().as_deref(), Some("event: a\ndata: 1\n\n"));
        assert_eq!(framer.next_event().as_deref(), Some("data: 2\n\n"));
        assert_eq!(framer.next_event(), None);
        assert_eq!(framer.held(), 7);
        assert_eq!(framer.take_rest().as_deref(), Some("data: 3"));
        assert_eq!(framer.take_rest(), None);
    }
}
