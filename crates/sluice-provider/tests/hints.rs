//! Provider rate-limit hints read from real-looking headers and bodies.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use sluice_provider::{MAX_HINT_DURATION, RateLimitHints, Window, parse_go_duration, parse_hints};

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs.iter().map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
}

fn secs(n: u64) -> Option<Duration> {
    Some(Duration::from_secs(n))
}

/// 2024-09-02T18:45:00Z.
const NOW_MS: u64 = 1_725_302_700_000;

#[test]
fn openai_headers() {
    let h = headers(&[
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-limit-tokens", "2000000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-remaining-tokens", "1999100"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-reset-tokens", "2m59.56s"),
        ("x-request-id", "req_123"),
    ]);
    let hints = parse_hints(&h, None, None);
    assert_eq!(
        hints.requests,
        Some(Window {
            limit: Some(10_000),
            remaining: Some(9_999),
            remaining_error: 0,
            reset: Some(Duration::from_millis(6))
        })
    );
    assert_eq!(
        hints.tokens,
        Some(Window {
            limit: Some(2_000_000),
            remaining: Some(1_999_100),
            remaining_error: 0,
            reset: Some(Duration::from_millis(179_560))
        })
    );
    assert_eq!((hints.input_tokens, hints.output_tokens, hints.retry_after), (None, None, None));
    assert_eq!(hints.earliest_retry(), None);
}

#[test]
fn openai_429_floor_is_the_exhausted_window_reset() {
    let h = headers(&[
        ("x-ratelimit-remaining-requests", "12"),
        ("x-ratelimit-reset-requests", "1h2m3.5s"),
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    ]);
    assert_eq!(parse_hints(&h, None, None).earliest_retry(), secs(360));
}

#[test]
fn azure_headers_with_integer_second_resets_and_ms_delays() {
    let h = headers(&[
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-remaining-tokens", "1200"),
        ("x-ratelimit-limit-tokens", "30000"),
        ("x-ratelimit-reset-tokens", "12"),
        ("retry-after-ms", "1500"),
        ("retry-after", "2"),
    ]);
    let hints = parse_hints(&h, None, None);
    assert_eq!(hints.tokens.and_then(|w| w.reset), secs(12));
    assert_eq!(hints.requests.and_then(|w| w.remaining), Some(0));
    assert_eq!(hints.retry_after, Some(Duration::from_millis(1_500)));

    let h = headers(&[("x-ms-retry-after-ms", "250"), ("retry-after", "1")]);
    assert_eq!(parse_hints(&h, None, None).retry_after, Some(Duration::from_millis(250)));
}

#[test]
fn azure_responses_api_oddities_are_dropped() {
    // Reported: the Responses API answering -1 and 0 and no retry-after.
    let h = headers(&[
        ("x-ratelimit-limit-tokens", "0"),
        ("x-ratelimit-remaining-tokens", "-1"),
        ("x-ratelimit-remaining-requests", "-1"),
    ]);
    assert!(parse_hints(&h, None, None).is_empty());
}

fn anthropic_headers(extra: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut pairs = vec![
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
        ("anthropic-ratelimit-requests-reset", "2024-09-02T18:45:00.015Z"),
        ("anthropic-ratelimit-tokens-limit", "480000"),
        ("anthropic-ratelimit-tokens-remaining", "478000"),
        ("anthropic-ratelimit-tokens-reset", "2024-09-02T18:45:01Z"),
        ("anthropic-ratelimit-input-tokens-limit", "400000"),
        ("anthropic-ratelimit-input-tokens-remaining", "400000"),
        ("anthropic-ratelimit-input-tokens-reset", "2024-09-02T18:45:00Z"),
        ("anthropic-ratelimit-output-tokens-limit", "80000"),
        ("anthropic-ratelimit-output-tokens-remaining", "0"),
        ("anthropic-ratelimit-output-tokens-reset", "2024-09-02T20:45:30+02:00"),
    ];
    pairs.extend_from_slice(extra);
    headers(&pairs)
}

#[test]
fn anthropic_headers_against_the_response_date() {
    let h = anthropic_headers(&[("date", "Mon, 02 Sep 2024 18:45:00 GMT"), ("retry-after", "30")]);
    // The response's own Date wins over a skewed local clock.
    let hints = parse_hints(&h, None, Some(NOW_MS + 3_600_000));
    assert_eq!(hints.requests.and_then(|w| w.reset), Some(Duration::from_millis(15)));
    assert_eq!(hints.requests.map(|w| w.remaining_error), Some(0));
    let tokens = hints.tokens.unwrap();
    assert_eq!((tokens.limit, tokens.remaining, tokens.remaining_error), (Some(480_000), Some(478_000), 500));
    assert_eq!(tokens.reset, secs(1));
    assert_eq!(hints.input_tokens.and_then(|w| w.reset), secs(0));
    assert_eq!(hints.output_tokens.and_then(|w| w.reset), secs(30));
    assert_eq!(hints.retry_after, secs(30));
}

#[test]
fn anthropic_resets_need_a_reference_time() {
    let h = anthropic_headers(&[]);
    let with_clock = parse_hints(&h, None, Some(NOW_MS));
    assert_eq!(with_clock.output_tokens.and_then(|w| w.reset), secs(30));
    // A reset in the past means already replenished.
    let later = parse_hints(&h, None, Some(NOW_MS + 60_000));
    assert_eq!(later.output_tokens.and_then(|w| w.reset), secs(0));
    let no_clock = parse_hints(&h, None, None);
    assert_eq!(no_clock.output_tokens.and_then(|w| w.reset), None);
    assert_eq!(no_clock.output_tokens.and_then(|w| w.remaining), Some(0));
}

#[test]
fn retry_after_as_http_date() {
    let h = headers(&[("retry-after", "Mon, 02 Sep 2024 18:45:42 GMT")]);
    assert_eq!(parse_hints(&h, None, Some(NOW_MS)).retry_after, secs(42));
    assert_eq!(parse_hints(&h, None, None).retry_after, None);
    let h = headers(&[("retry-after", "Mon, 02 Sep 2024 18:45:42 GMT"), ("date", "Mon, 02 Sep 2024 18:45:40 GMT")]);
    assert_eq!(parse_hints(&h, None, None).retry_after, secs(2));
}

const GEMINI_PER_MINUTE: &str = r#"{
  "error": {
    "code": 429,
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "status": "RESOURCE_EXHAUSTED",
    "details": [
      {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
       "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                       "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                       "quotaDimensions": {"location": "global", "model": "gemini-2.0-flash"},
                       "quotaValue": "15"}]},
      {"@type": "type.googleapis.com/google.rpc.Help",
       "links": [{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
      {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}
    ]
  }
}"#;

#[test]
fn gemini_retry_info_and_quota_failure() {
    let hints = parse_hints(&HeaderMap::new(), Some(GEMINI_PER_MINUTE.as_bytes()), None);
    assert_eq!(hints, RateLimitHints { retry_after: secs(37), ..RateLimitHints::default() });

    let daily = GEMINI_PER_MINUTE.replace("PerMinute", "PerDay").replace("37s", "1.5s");
    let hints = parse_hints(&HeaderMap::new(), Some(daily.as_bytes()), None);
    assert_eq!(hints.retry_after, Some(Duration::from_millis(1_500)));
    assert!(hints.daily_quota);

    let wrapped = format!("[{GEMINI_PER_MINUTE}]");
    assert_eq!(parse_hints(&HeaderMap::new(), Some(wrapped.as_bytes()), None).retry_after, secs(37));

    // A header wins over the body.
    let h = headers(&[("retry-after", "5")]);
    assert_eq!(parse_hints(&h, Some(GEMINI_PER_MINUTE.as_bytes()), None).retry_after, secs(5));
}

#[test]
fn absurd_values_are_dropped() {
    let h = headers(&[
        ("x-ratelimit-remaining-tokens", "500"),
        ("x-ratelimit-limit-tokens", "100"),
        ("x-ratelimit-reset-tokens", "25h"),
        ("x-ratelimit-reset-requests", "-1s"),
        ("x-ratelimit-limit-requests", "1e6"),
        ("retry-after", "86401"),
        ("retry-after-ms", "NaN"),
    ]);
    let hints = parse_hints(&h, Some(b"\xff\xfe{\"details\""), Some(NOW_MS));
    assert_eq!(hints.tokens, Some(Window { limit: Some(100), remaining: Some(100), remaining_error: 0, reset: None }));
    assert_eq!(hints.requests, None);
    assert_eq!(hints.retry_after, None);
    let far = headers(&[("anthropic-ratelimit-requests-reset", "2099-01-01T00:00:00Z")]);
    assert!(parse_hints(&far, None, Some(NOW_MS)).is_empty());
}

/// Formats a duration the way Go's `time.Duration.String` does.
fn go_format(d: Duration) -> String {
    fn with_fraction(n: u128, unit: u128, width: usize, suffix: &str) -> String {
        let (int, frac) = (n / unit, n % unit);
        if frac == 0 {
            return format!("{int}{suffix}");
        }
        let digits = format!("{frac:0width$}");
        format!("{int}.{}{suffix}", digits.trim_end_matches('0'))
    }
    let n = d.as_nanos();
    match n {
        0 => "0s".to_owned(),
        1..1_000 => format!("{n}ns"),
        1_000..1_000_000 => with_fraction(n, 1_000, 3, "µs"),
        1_000_000..1_000_000_000 => with_fraction(n, 1_000_000, 6, "ms"),
        _ => {
            let whole = n / 1_000_000_000;
            let (h, m) = (whole / 3_600, whole / 60 % 60);
            let rest = n - (h * 3_600 + m * 60) * 1_000_000_000;
            let mut out = String::new();
            if h > 0 {
                out.push_str(&format!("{h}h"));
            }
            if h > 0 || m > 0 {
                out.push_str(&format!("{m}m"));
            }
            out + &with_fraction(rest, 1_000_000_000, 9, "s")
        }
    }
}

#[test]
fn go_format_matches_go() {
    let cases = [(0, "0s"), (12_000_000, "12ms"), (360_000_000_000, "6m0s"), (3_723_500_000_000, "1h2m3.5s")];
    for (nanos, text) in cases {
        assert_eq!(go_format(Duration::from_nanos(nanos)), text);
    }
    assert_eq!(go_format(Duration::from_nanos(1_500)), "1.5µs");
}

const HINT_HEADERS: &[&str] = &[
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-output-tokens-reset",
    "retry-after",
    "retry-after-ms",
    "x-ms-retry-after-ms",
    "date",
];

fn assert_sane(w: &Window) {
    assert_ne!(w.limit, Some(0));
    if let (Some(l), Some(r)) = (w.limit, w.remaining) {
        assert!(r <= l);
    }
    assert!(w.reset.is_none_or(|d| d <= MAX_HINT_DURATION));
}

proptest! {
    #[test]
    fn go_durations_round_trip(nanos in 0u64..(10 * 86_400 * 1_000_000_000)) {
        let d = Duration::from_nanos(nanos);
        prop_assert_eq!(parse_go_duration(&go_format(d)), Some(d));
    }

    #[test]
    fn go_duration_terms_add_up(h in 0u64..50, m in 0u64..120, s in 0u64..120, ms in 0u64..2_000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let want = Duration::from_millis(((h * 60 + m) * 60 + s) * 1_000 + ms);
        prop_assert_eq!(parse_go_duration(&text), Some(want));
    }

    #[test]
    fn go_duration_never_panics(text in "\\PC{0,24}") {
        let _ = parse_go_duration(&text);
    }

    #[test]
    fn garbage_never_panics_nor_goes_absurd(
        values in proptest::collection::vec((0..HINT_HEADERS.len(), "[ -~]{0,40}"), 0..10),
        body in proptest::collection::vec(any::<u8>(), 0..200),
        now in proptest::option::of(any::<u64>()),
    ) {
        let mut h = HeaderMap::new();
        for (i, v) in &values {
            if let Ok(value) = HeaderValue::from_str(v) {
                h.insert(HINT_HEADERS[*i], value);
            }
        }
        let hints = parse_hints(&h, Some(&body), now);
        hints.windows().for_each(assert_sane);
        prop_assert!(hints.retry_after.is_none_or(|d| d <= MAX_HINT_DURATION));
    }
}
