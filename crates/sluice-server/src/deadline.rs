//! How long a client says it will wait for its answer, read from its headers.
//!
//! The official OpenAI and Anthropic SDKs send their timeout as `x-stainless-timeout`
//! (seconds, possibly fractional) and, on some versions, `x-stainless-read-timeout`; any
//! client may send `x-sluice-max-wait-ms` (milliseconds). The rule: every one of them that
//! is a plain non-negative decimal number counts, the smallest wins; a header that is not
//! one (empty, negative, `NaN`, `inf`, text, not ASCII) is ignored, as if it were absent.
//! The request's wait deadline is then the smaller of that and its class's `max_wait`.
//!
//! The same SDKs say when a request is a retry: `x-stainless-retry-count` (the OpenAI and
//! Anthropic SDKs: how many times they sent it before) and `amz-sdk-request: attempt=N;
//! max=M` (the AWS SDKs: this is the Nth attempt). A retried request waits ahead of its own
//! key's first attempts ([`sluice_quota::waiting::FairQueue::push`]).

use std::time::Duration;

use axum::http::HeaderMap;

/// The gateway's own header: milliseconds the client will wait.
pub const MAX_WAIT_MS: &str = "x-sluice-max-wait-ms";
/// The SDKs' timeout, in seconds.
pub const STAINLESS_TIMEOUT: &str = "x-stainless-timeout";
/// The SDKs' read timeout, in seconds.
pub const STAINLESS_READ_TIMEOUT: &str = "x-stainless-read-timeout";

/// The OpenAI and Anthropic SDKs' count of earlier tries.
pub const STAINLESS_RETRY_COUNT: &str = "x-stainless-retry-count";
/// The AWS SDKs' attempt header (`attempt=2; max=3`).
pub const AMZ_SDK_REQUEST: &str = "amz-sdk-request";

/// The longest client wait taken from a header (a day): beyond it, the class's `max_wait`
/// binds anyway, and a huge figure must not overflow a `Duration`.
const LONGEST: f64 = 86_400.0;

/// The wait a client's headers state, the smallest of those that parse; `None` without one.
#[must_use]
pub fn client_wait(headers: &HeaderMap) -> Option<Duration> {
    let seconds = [(STAINLESS_TIMEOUT, 1.0), (STAINLESS_READ_TIMEOUT, 1.0), (MAX_WAIT_MS, 0.001)];
    seconds
        .into_iter()
        .flat_map(|(name, unit)| headers.get_all(name).iter().filter_map(move |v| number(v.to_str().ok()?, unit)))
        .min()
}

/// The request's wait: the class's `max_wait`, or the client's own when that is shorter.
#[must_use]
pub fn effective(max_wait: Duration, client: Option<Duration>) -> Duration {
    client.map_or(max_wait, |c| c.min(max_wait))
}

/// What a client's stated wait makes of its request's queueing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientDeadline {
    /// The client stated none: the request waits out its class's `max_wait`.
    Unstated,
    /// The client will wait at least the class's `max_wait` (the SDKs' 600 s): the class
    /// binds. A first attempt predicted to outlast it is refused at once with the
    /// prediction, so its client comes back sooner, as a retry, which waits ahead of its
    /// key's first attempts; a retry itself waits its `max_wait` out rather than be
    /// refused on a prediction (the prediction prices the whole line, which a retry
    /// passes, and its next refusal may be its client's last).
    Beyond,
    /// The client's wait is shorter than the class's and binds: any wait predicted to
    /// outlast it is refused at once (the client would be gone).
    Binds,
}

impl ClientDeadline {
    /// The case of a client stating `client` against a class's `max_wait`.
    #[must_use]
    pub fn of(max_wait: Duration, client: Option<Duration>) -> Self {
        match client {
            None => Self::Unstated,
            Some(client) if client < max_wait => Self::Binds,
            Some(_) => Self::Beyond,
        }
    }

    /// Whether a request of `retries` earlier tries is refused at once when its wait is
    /// predicted to outlast its deadline.
    #[must_use]
    pub fn refuses_on_prediction(self, retries: u8) -> bool {
        match self {
            Self::Unstated => false,
            Self::Beyond => retries == 0,
            Self::Binds => true,
        }
    }
}

/// How many times the client says it sent this request before (0 when it says nothing, or
/// nothing that parses), at most 255.
#[must_use]
pub fn retries(headers: &HeaderMap) -> u8 {
    let stainless = headers.get(STAINLESS_RETRY_COUNT).and_then(|v| count(v.to_str().ok()?));
    let amz = headers.get(AMZ_SDK_REQUEST).and_then(|v| {
        let attempt = v.to_str().ok()?.split(';').find_map(|part| part.trim().strip_prefix("attempt="))?;
        count(attempt)?.checked_sub(1)
    });
    stainless.into_iter().chain(amz).max().map_or(0, |n| u8::try_from(n).unwrap_or(u8::MAX))
}

/// `text` as a plain count (digits only, at most 9 of them).
fn count(text: &str) -> Option<u32> {
    let text = text.trim();
    (!text.is_empty() && text.len() <= 9 && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// `text` as a non-negative decimal number of `unit` seconds (digits with at most one
/// point, nothing else: no sign, exponent, `inf` or `NaN`).
fn number(text: &str, unit: f64) -> Option<Duration> {
    let text = text.trim();
    let plain = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && text.bytes().filter(|b| *b == b'.').count() <= 1
        && text.bytes().any(|b| b.is_ascii_digit());
    if !plain {
        return None;
    }
    let seconds = text.parse::<f64>().ok()? * unit;
    Duration::try_from_secs_f64(seconds.min(LONGEST)).ok()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn retries_from_either_sdk_header_and_nothing_else() {
        assert_eq!(retries(&headers(&[(STAINLESS_RETRY_COUNT, "0")])), 0);
        assert_eq!(retries(&headers(&[(STAINLESS_RETRY_COUNT, "2")])), 2);
        assert_eq!(retries(&headers(&[(AMZ_SDK_REQUEST, "attempt=3; max=3")])), 2);
        assert_eq!(retries(&headers(&[(AMZ_SDK_REQUEST, "attempt=1; max=3")])), 0);
        assert_eq!(retries(&headers(&[(STAINLESS_RETRY_COUNT, "100000")])), u8::MAX);
        for junk in ["", "-1", "1.5", "two", "1e3", "9999999999"] {
            assert_eq!(retries(&headers(&[(STAINLESS_RETRY_COUNT, junk)])), 0, "{junk:?}");
        }
        assert_eq!(retries(&headers(&[(AMZ_SDK_REQUEST, "attempt=0")])), 0);
        assert_eq!(retries(&HeaderMap::new()), 0);
    }

    #[test]
    fn each_header_in_its_unit_and_the_smallest_wins() {
        assert_eq!(client_wait(&headers(&[(STAINLESS_TIMEOUT, "600")])), Some(Duration::from_secs(600)));
        assert_eq!(client_wait(&headers(&[(STAINLESS_TIMEOUT, "2.5")])), Some(Duration::from_millis(2_500)));
        assert_eq!(client_wait(&headers(&[(MAX_WAIT_MS, "250")])), Some(Duration::from_millis(250)));
        assert_eq!(client_wait(&headers(&[(MAX_WAIT_MS, " 40 ")])), Some(Duration::from_millis(40)));
        let all = headers(&[(STAINLESS_TIMEOUT, "10"), (STAINLESS_READ_TIMEOUT, "3"), (MAX_WAIT_MS, "5000")]);
        assert_eq!(client_wait(&all), Some(Duration::from_secs(3)));
        assert_eq!(client_wait(&headers(&[(MAX_WAIT_MS, "0")])), Some(Duration::ZERO), "will not wait at all");
        assert_eq!(client_wait(&HeaderMap::new()), None);
    }

    #[test]
    fn garbage_is_ignored_and_huge_figures_are_capped() {
        for bad in ["", " ", "-1", "+2", "1e3", "NaN", "inf", "soon", "1.2.3", ".", "3s", "0x10"] {
            assert_eq!(client_wait(&headers(&[(MAX_WAIT_MS, bad)])), None, "`{bad}`");
            assert_eq!(client_wait(&headers(&[(STAINLESS_TIMEOUT, bad)])), None, "`{bad}`");
        }
        // A bad header does not hide a good one.
        let mixed = headers(&[(STAINLESS_TIMEOUT, "never"), (MAX_WAIT_MS, "900")]);
        assert_eq!(client_wait(&mixed), Some(Duration::from_millis(900)));
        let huge = headers(&[(STAINLESS_TIMEOUT, &"9".repeat(400))]);
        assert_eq!(client_wait(&huge), Some(Duration::from_secs(86_400)));
        let mut opaque = HeaderMap::new();
        opaque.insert(MAX_WAIT_MS, HeaderValue::from_bytes(b"\xff12").unwrap());
        assert_eq!(client_wait(&opaque), None, "not ASCII");
    }

    #[test]
    fn which_deadline_binds_decides_who_is_refused_on_a_prediction() {
        let class = Duration::from_secs(2);
        let unstated = ClientDeadline::of(class, None);
        assert!(!unstated.refuses_on_prediction(0) && !unstated.refuses_on_prediction(2));
        let sdk = ClientDeadline::of(class, Some(Duration::from_secs(600)));
        assert_eq!(sdk, ClientDeadline::Beyond);
        assert!(sdk.refuses_on_prediction(0), "a first attempt comes back sooner as a retry");
        assert!(!sdk.refuses_on_prediction(1), "a retry waits the class's wait out");
        assert_eq!(ClientDeadline::of(class, Some(class)), ClientDeadline::Beyond);
        let short = ClientDeadline::of(class, Some(Duration::from_millis(500)));
        assert_eq!(short, ClientDeadline::Binds);
        assert!(short.refuses_on_prediction(0) && short.refuses_on_prediction(2), "its client would be gone");
    }

    #[test]
    fn the_class_max_wait_caps_the_client() {
        let two = Duration::from_secs(2);
        assert_eq!(effective(two, None), two);
        assert_eq!(effective(two, Some(Duration::from_millis(300))), Duration::from_millis(300));
        assert_eq!(effective(two, Some(Duration::from_secs(600))), two);
    }
}
