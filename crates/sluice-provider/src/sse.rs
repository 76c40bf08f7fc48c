//! Server-sent-events framing and cheap JSON peeking, just enough for the stream tap.
//!
//! An event ends at a blank line: a `\n` followed by `\n` or `\r\n` (so `\n\n`,
//! `\r\n\r\n` and mixes of the two). Lines are `field: value` with one optional space after
//! the colon; `:` lines are comments. Lone `\r` line endings (legal in SSE, used by no LLM
//! provider) are not recognised.

use std::borrow::Cow;

/// Length of the first complete event in `buf`, blank line included; the search for the
/// terminating `\n` starts at `from` (a resume hint: nothing before it can start one).
pub(crate) fn event_len(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(offset) = buf.get(i..)?.iter().position(|&b| b == b'\n') {
        let nl = i + offset;
        match (buf.get(nl + 1), buf.get(nl + 2)) {
            (Some(b'\n'), _) => return Some(nl + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(nl + 3),
            _ => i = nl + 1,
        }
    }
    None
}

/// Where to resume [`event_len`] after it found nothing in a buffer of `len` bytes: a
/// terminator may have begun in the last two bytes.
pub(crate) fn resume_hint(len: usize) -> usize {
    len.saturating_sub(2)
}

/// Length of the blank lines (`\n` or `\r\n`) at the start of `buf`: they belong to no event
/// and are forwarded at once.
pub(crate) fn leading_blank_len(buf: &[u8]) -> usize {
    let mut i = 0;
    loop {
        match (buf.get(i), buf.get(i + 1)) {
            (Some(b'\n'), _) => i += 1,
            (Some(b'\r'), Some(b'\n')) => i += 2,
            _ => return i,
        }
    }
}

/// The fields of one complete event that the tap reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Event<'a> {
    /// The `event:` field, if any.
    pub(crate) name: Option<&'a str>,
    /// The `data:` lines, joined by `\n` as the SSE spec says; `None` without any.
    pub(crate) data: Option<Cow<'a, str>>,
}

impl<'a> Event<'a> {
    /// Reads the `event` and `data` fields of a complete event's text.
    pub(crate) fn parse(text: &'a str) -> Self {
        let mut event = Event::default();
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line, ""),
            };
            match field {
                "event" => event.name = Some(value),
                "data" => event.push_data(value),
                _ => {}
            }
        }
        event
    }

    fn push_data(&mut self, value: &'a str) {
        self.data = Some(match self.data.take() {
            None => Cow::Borrowed(value),
            Some(prior) => Cow::Owned(format!("{prior}\n{value}")),
        });
    }
}

/// Finds the object key `quoted_key` (with its quotes, e.g. `"\"usage\""`) in `json` and
/// returns `(key_start, value_start)`.
///
/// A heuristic, exact for the JSON providers emit: the match must be followed by `:` (a
/// string *value* never is) and not preceded by a backslash (an escaped quote inside a
/// string). It does not track nesting, so a same-named key deeper down also matches.
pub(crate) fn find_key(json: &str, quoted_key: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(offset) = json.get(from..)?.find(quoted_key) {
        let start = from + offset;
        let after = start + quoted_key.len();
        let escaped = start > 0 && json.as_bytes().get(start - 1) == Some(&b'\\');
        if !escaped {
            let rest = json.get(after..)?.trim_start();
            if let Some(value) = rest.strip_prefix(':') {
                let value = value.trim_start();
                return Some((start, json.len() - value.len()));
            }
        }
        from = after;
    }
    None
}

/// The text right after `quoted_key`'s colon, if the key is present.
pub(crate) fn value_of<'j>(json: &'j str, quoted_key: &str) -> Option<&'j str> {
    find_key(json, quoted_key).and_then(|(_, value)| json.get(value..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_lf_crlf_and_mixed() {
        assert_eq!(event_len(b"data: a\n\ndata: b\n\n", 0), Some(9));
        assert_eq!(event_len(b"data: a\r\n\r\nrest", 0), Some(11));
        assert_eq!(event_len(b"data: a\r\n\n", 0), Some(10));
        assert_eq!(event_len(b"event: x\ndata: a\n", 0), None);
        assert_eq!(event_len(b"data: a\n\r", 0), None);
        assert_eq!(event_len(b"data: a\n\n", 7), Some(9));
    }

    #[test]
    fn leading_blank_lines() {
        assert_eq!(leading_blank_len(b"\n\r\ndata"), 3);
        assert_eq!(leading_blank_len(b"\r"), 0);
        assert_eq!(leading_blank_len(b"data"), 0);
    }

    #[test]
    fn parses_fields() {
        let event = Event::parse("event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n");
        assert_eq!(event.name, Some("message_stop"));
        assert_eq!(event.data.as_deref(), Some("{\"type\":\"message_stop\"}"));
        let multi = Event::parse(": keep-alive\ndata:a\ndata: b\n\n");
        assert_eq!(multi.name, None);
        assert_eq!(multi.data.as_deref(), Some("a\nb"));
    }

    #[test]
    fn finds_keys_not_values() {
        let json = r#"{"x":"say \"usage","content":"the \"usage\" word","usage" : {"a":1}}"#;
        let (_, value) = find_key(json, "\"usage\"").unwrap();
        assert!(json[value..].starts_with("{\"a\""));
        assert!(value_of(json, "\"content\"").is_some_and(|v| v.starts_with("\"the \\\"usage")));
        assert_eq!(value_of(r#"{"content":""}"#, "\"content\""), Some("\"\"}"));
        assert_eq!(find_key(r#"{"a":"usage"}"#, "\"usage\""), None);
    }
}
