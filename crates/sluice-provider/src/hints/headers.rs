//! Reading the rate-limit headers of OpenAI, Azure OpenAI and Anthropic into [`Window`]s,
//! and the delay headers into a `retry_after`.

use std::time::Duration;

use http::HeaderMap;
use http::header::{AsHeaderName, HeaderName};

use super::duration::{parse_go_duration, parse_millis, parse_seconds};
use super::rfc3339::parse_rfc3339_unix_ms;
use super::window::{MAX_HINT_DURATION, Window};

/// Anthropic rounds remaining token counts to the nearest thousand.
const ANTHROPIC_TOKEN_ROUNDING_ERROR: u64 = 500;

/// The three header names that describe one window (names made once, so a lookup does
/// not parse them again).
pub(super) struct Names {
    limit: HeaderName,
    remaining: HeaderName,
    reset: HeaderName,
}

macro_rules! names {
    ($limit:literal, $remaining:literal, $reset:literal) => {
        Names {
            limit: HeaderName::from_static($limit),
            remaining: HeaderName::from_static($remaining),
            reset: HeaderName::from_static($reset),
        }
    };
}

/// Whether any header could carry a hint: a rate-limit window or a delay (every name this
/// module reads but `date` matches). Most answers carry none of them, and are read no
/// further.
pub(super) fn any(headers: &HeaderMap) -> bool {
    headers.keys().any(|name| {
        let name = name.as_str();
        name.starts_with("x-ratelimit-") || name.starts_with("anthropic-ratelimit-") || name.contains("retry-after")
    })
}

pub(super) const OPENAI_REQUESTS: Names =
    names!("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests");
pub(super) const OPENAI_TOKENS: Names =
    names!("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens");
pub(super) const ANTHROPIC_REQUESTS: Names = names!(
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset"
);
pub(super) const ANTHROPIC_TOKENS: Names = names!(
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset"
);
pub(super) const ANTHROPIC_INPUT_TOKENS: Names = names!(
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset"
);
pub(super) const ANTHROPIC_OUTPUT_TOKENS: Names = names!(
    "anthropic-ratelimit-output-tokens-limit",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset"
);

/// A header's value as trimmed, non-empty visible ASCII.
pub(super) fn text(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers.get(name)?.to_str().ok().map(str::trim).filter(|s| !s.is_empty())
}

/// An unsigned integer count (`-1`, `1.5e3`, `abc` → `None`).
fn count(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    text(headers, name)?.parse().ok()
}

/// A duration kept only when it is within [`MAX_HINT_DURATION`].
pub(super) fn sane(d: Duration) -> Option<Duration> {
    (d <= MAX_HINT_DURATION).then_some(d)
}

/// Assembles a window; a limit of 0 is dropped (no serving deployment has one, and adopting
/// it would stall the route), and `remaining` is capped at `limit`.
fn window(limit: Option<u64>, remaining: Option<u64>, remaining_error: u64, reset: Option<Duration>) -> Option<Window> {
    let limit = limit.filter(|l| *l > 0);
    let remaining = match (remaining, limit) {
        (Some(r), Some(l)) => Some(r.min(l)),
        (r, _) => r,
    };
    if limit.is_none() && remaining.is_none() && reset.is_none() {
        return None;
    }
    Some(Window { limit, remaining, remaining_error, reset })
}

/// An OpenAI (Go-duration reset) or Azure (integer-second reset) window.
pub(super) fn openai_window(headers: &HeaderMap, names: &Names) -> Option<Window> {
    let reset = text(headers, &names.reset).and_then(|t| parse_go_duration(t).or_else(|| parse_seconds(t)));
    window(count(headers, &names.limit), count(headers, &names.remaining), 0, reset.and_then(sane))
}

/// An Anthropic window: RFC 3339 reset read against `reference_ms` (Unix milliseconds).
pub(super) fn anthropic_window(
    headers: &HeaderMap,
    names: &Names,
    rounded: bool,
    reference_ms: Option<u64>,
) -> Option<Window> {
    let reset = match (text(headers, &names.reset).and_then(parse_rfc3339_unix_ms), reference_ms) {
        (Some(at), Some(now)) => sane(Duration::from_millis(at.saturating_sub(now))),
        _ => None,
    };
    let error = if rounded { ANTHROPIC_TOKEN_ROUNDING_ERROR } else { 0 };
    window(count(headers, &names.limit), count(headers, &names.remaining), error, reset)
}

/// The response's own `Date` header, in Unix milliseconds.
pub(super) fn response_date_ms(headers: &HeaderMap) -> Option<u64> {
    let at = httpdate::parse_http_date(text(headers, http::header::DATE)?).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");
const X_MS_RETRY_AFTER_MS: HeaderName = HeaderName::from_static("x-ms-retry-after-ms");

/// `retry-after-ms`, then `x-ms-retry-after-ms`, then `retry-after` (seconds, or an HTTP
/// date read against `reference_ms`): the first one that parses to a sane value.
pub(super) fn retry_after(headers: &HeaderMap, reference_ms: Option<u64>) -> Option<Duration> {
    let millis = [RETRY_AFTER_MS, X_MS_RETRY_AFTER_MS]
        .into_iter()
        .find_map(|name| text(headers, name).and_then(parse_millis).and_then(sane));
    millis.or_else(|| {
        let value = text(headers, http::header::RETRY_AFTER)?;
        parse_seconds(value).or_else(|| http_date_delay(value, reference_ms)).and_then(sane)
    })
}

fn http_date_delay(value: &str, reference_ms: Option<u64>) -> Option<Duration> {
    let at = httpdate::parse_http_date(value).ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
    let at_ms = u64::try_from(at.as_millis()).ok()?;
    Some(Duration::from_millis(at_ms.saturating_sub(reference_ms?)))
}
