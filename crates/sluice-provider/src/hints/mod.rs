//! What a provider's response says about its rate limits: the remaining budget per
//! dimension, when it refills, how long to wait, and whether a quota is a daily one.
//!
//! Sources read (see `docs` of each function for formats):
//! - OpenAI `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as Go durations
//!   (`6m0s`, `2m59.56s`); Azure OpenAI sends the same names with integer-second resets;
//! - Anthropic `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
//!   remaining,reset}`, resets as RFC 3339 instants, token `remaining` rounded to the
//!   nearest thousand (carried as [`Window::remaining_error`]);
//! - `retry-after-ms`, `x-ms-retry-after-ms` (Azure), `retry-after` (seconds or HTTP date);
//! - Gemini error bodies: `RetryInfo.retryDelay` and `QuotaFailure.violations[].quotaId`.
//!
//! Absolute instants (Anthropic resets, an HTTP-date `retry-after`) become durations
//! against the response's own `Date` header when it has one — the provider stamped both, so
//! clock skew between sluice and the provider cancels out — else against the caller's
//! `now_unix_ms`, else they are dropped. An instant already past reads as zero.
//!
//! Garbage never panics and never yields absurd values: unparsable, negative or
//! non-integer counts are `None`; a limit of 0 is `None`; `remaining` is capped at `limit`;
//! any duration above [`MAX_HINT_DURATION`] (one day) is `None` — per-minute windows refill
//! within a minute and daily ones within a day, so a longer figure is a broken header, and
//! a caller waiting on it would stall a deployment for no reason.

mod duration;
mod gemini;
mod headers;
mod rfc3339;
mod window;

use std::time::Duration;

use http::HeaderMap;
use serde_json::Value;

pub use duration::parse_go_duration;
pub(crate) use gemini::{GeminiDetails, details as gemini_details};
pub use rfc3339::parse_rfc3339_unix_ms;
pub use window::{MAX_HINT_DURATION, Window};

/// Error bodies larger than this are not parsed (real ones are well under 4 KiB).
pub const MAX_HINT_BODY_BYTES: usize = 64 * 1024;

/// Everything a response says about the provider's limits; all fields optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimitHints {
    /// Requests per minute (OpenAI, Azure, Anthropic).
    pub requests: Option<Window>,
    /// Tokens per minute: OpenAI/Azure TPM; Anthropic's most restrictive token limit.
    pub tokens: Option<Window>,
    /// Anthropic input tokens per minute (ITPM).
    pub input_tokens: Option<Window>,
    /// Anthropic output tokens per minute (OTPM).
    pub output_tokens: Option<Window>,
    /// How long the provider asks to wait before the next call (headers first, then
    /// Gemini's `RetryInfo`).
    pub retry_after: Option<Duration>,
    /// The provider named a per-day quota as the one exceeded (Gemini `QuotaFailure`
    /// with `PerDay` in a `quotaId`): do not retry this deployment soon, whatever
    /// `retry_after` says.
    pub daily_quota: bool,
}

impl RateLimitHints {
    /// The windows present, in the order requests, tokens, input tokens, output tokens.
    pub fn windows(&self) -> impl Iterator<Item = &Window> {
        [&self.requests, &self.tokens, &self.input_tokens, &self.output_tokens].into_iter().flatten()
    }

    /// The earliest time a retry can pass: `retry_after` when given, else the longest
    /// reset among windows reported exhausted (`remaining == 0`), else `None`.
    #[must_use]
    pub fn earliest_retry(&self) -> Option<Duration> {
        self.retry_after.or_else(|| self.windows().filter(|w| w.remaining == Some(0)).filter_map(|w| w.reset).max())
    }

    /// Whether the response carried no hint at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Reads the rate-limit hints of a provider response: its headers, and its body when the
/// caller has it (only error bodies carry hints; others are skipped cheaply).
///
/// `now_unix_ms` is the caller's wall clock, used only when the response has no `Date`
/// header to read absolute instants against (see the module docs). Never fails: what
/// cannot be read is `None`.
///
/// ```
/// use std::time::Duration;
/// use http::HeaderMap;
/// use sluice_provider::parse_hints;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("x-ratelimit-remaining-tokens", "0".parse().unwrap());
/// headers.insert("x-ratelimit-reset-tokens", "6m0s".parse().unwrap());
/// let hints = parse_hints(&headers, None, None);
/// assert_eq!(hints.tokens.and_then(|w| w.reset), Some(Duration::from_secs(360)));
/// assert_eq!(hints.earliest_retry(), Some(Duration::from_secs(360)));
/// ```
#[must_use]
pub fn parse_hints(headers: &HeaderMap, body: Option<&[u8]>, now_unix_ms: Option<u64>) -> RateLimitHints {
    let details = body
        .filter(|b| b.windows(DETAILS_KEY.len()).any(|w| w == DETAILS_KEY))
        .and_then(error_json)
        .map(|json| gemini::details(&json))
        .unwrap_or_default();
    from_parts(headers, &details, now_unix_ms)
}

/// Only bodies with this key can carry hints; others are not parsed.
const DETAILS_KEY: &[u8] = b"\"details\"";

/// The hints of `headers` plus already-read Gemini details.
pub(crate) fn from_parts(headers: &HeaderMap, details: &GeminiDetails, now_unix_ms: Option<u64>) -> RateLimitHints {
    use headers::{
        ANTHROPIC_INPUT_TOKENS, ANTHROPIC_OUTPUT_TOKENS, ANTHROPIC_REQUESTS, ANTHROPIC_TOKENS, OPENAI_REQUESTS,
        OPENAI_TOKENS, anthropic_window, openai_window,
    };
    if !headers::any(headers) {
        let retry_after = details.retry_delay;
        return RateLimitHints { retry_after, daily_quota: details.daily, ..RateLimitHints::default() };
    }
    let reference = headers::response_date_ms(headers).or(now_unix_ms);
    let anthropic = |names, rounded| anthropic_window(headers, names, rounded, reference);
    RateLimitHints {
        requests: anthropic(&ANTHROPIC_REQUESTS, false).or_else(|| openai_window(headers, &OPENAI_REQUESTS)),
        tokens: anthropic(&ANTHROPIC_TOKENS, true).or_else(|| openai_window(headers, &OPENAI_TOKENS)),
        input_tokens: anthropic(&ANTHROPIC_INPUT_TOKENS, true),
        output_tokens: anthropic(&ANTHROPIC_OUTPUT_TOKENS, true),
        retry_after: headers::retry_after(headers, reference).or(details.retry_delay),
        daily_quota: details.daily,
    }
}

/// The JSON of an error body, when it is small and looks like a JSON object or array.
pub(crate) fn error_json(body: &[u8]) -> Option<Value> {
    if body.len() > MAX_HINT_BODY_BYTES {
        return None;
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    serde_json::from_slice(body).ok()
}
