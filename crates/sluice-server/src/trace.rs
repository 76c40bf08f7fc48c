//! Trace ids: taken from a W3C `traceparent` when the client sends one, else new.

use axum::http::HeaderMap;
use rand::Rng as _;

/// The 32-hex-digit trace id of a request and the `traceparent` to send upstream.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The trace id.
    pub id: String,
    /// The header value to pass upstream.
    pub traceparent: String,
    /// The gateway's span id for the request (the parent it names upstream).
    pub span: u64,
    /// The client's span id, when it sent a valid `traceparent`.
    pub parent: Option<u64>,
}

impl Trace {
    /// Continues the client's trace or starts one.
    #[must_use]
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut rng = rand::rng();
        let span: u64 = rng.random();
        let client = headers.get("traceparent").and_then(|v| v.to_str().ok()).and_then(parse_traceparent);
        let (id, parent) = match client {
            Some((id, parent)) => (id, Some(parent)),
            None => (format!("{:032x}", rng.random::<u128>()), None),
        };
        let traceparent = format!("00-{id}-{span:016x}-01");
        Self { id, traceparent, span, parent }
    }
}

/// Sets `x-sluice-trace-id` on a response: the one place it is written.
pub fn stamp(headers: &mut HeaderMap, id: &str) {
    if let Ok(v) = axum::http::HeaderValue::from_str(id) {
        headers.insert("x-sluice-trace-id", v);
    }
}

/// The trace id and the parent span id of a valid `traceparent`.
fn parse_traceparent(value: &str) -> Option<(String, u64)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, _flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let valid =
        hex(version, 2) && version != "ff" && hex(trace, 32) && hex(parent, 16) && trace.bytes().any(|b| b != b'0');
    let parent = u64::from_str_radix(parent, 16).ok().filter(|p| *p != 0);
    parent.filter(|_| valid).map(|p| (trace.to_owned(), p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continues_a_valid_traceparent_and_replaces_a_bad_one() {
        let mut headers = HeaderMap::new();
        headers.insert("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".parse().unwrap());
        let trace = Trace::from_headers(&headers);
        assert_eq!(trace.id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(trace.traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert_eq!(trace.parent, Some(0x00f0_67aa_0ba9_02b7));
        assert!(trace.traceparent.ends_with(&format!("-{:016x}-01", trace.span)));
        headers.insert("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01".parse().unwrap());
        assert_ne!(Trace::from_headers(&headers).id, "00000000000000000000000000000000");
        assert_eq!(Trace::from_headers(&HeaderMap::new()).id.len(), 32);
        assert_eq!(Trace::from_headers(&HeaderMap::new()).parent, None);
    }
}
