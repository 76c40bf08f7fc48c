//! Per-response costs of reading rate-limit hints and classifying errors; both run on
//! every upstream response (hints) or failure (classification).
//!
//! Run with `cargo bench -p sluice-provider --bench hints`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderName, HeaderValue};
use sluice_provider::{ProviderFlavor, classify, parse_hints};

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs.iter().map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v))).collect()
}

const GEMINI_429: &[u8] = br#"{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}"#;

fn bench(c: &mut Criterion) {
    let openai = headers(&[
        ("content-type", "application/json"),
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-limit-tokens", "2000000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-remaining-tokens", "1999100"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-reset-tokens", "2m59.56s"),
    ]);
    let anthropic = headers(&[
        ("date", "Mon, 02 Sep 2024 18:45:00 GMT"),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
        ("anthropic-ratelimit-requests-reset", "2024-09-02T18:45:00Z"),
        ("anthropic-ratelimit-input-tokens-limit", "400000"),
        ("anthropic-ratelimit-input-tokens-remaining", "400000"),
        ("anthropic-ratelimit-input-tokens-reset", "2024-09-02T18:45:00Z"),
        ("anthropic-ratelimit-output-tokens-limit", "80000"),
        ("anthropic-ratelimit-output-tokens-remaining", "79000"),
        ("anthropic-ratelimit-output-tokens-reset", "2024-09-02T18:45:01Z"),
    ]);
    c.bench_function("hints/openai_headers", |b| b.iter(|| parse_hints(black_box(&openai), None, None)));
    c.bench_function("hints/anthropic_headers", |b| b.iter(|| parse_hints(black_box(&anthropic), None, None)));
    let empty = HeaderMap::new();
    c.bench_function("classify/gemini_429", |b| {
        b.iter(|| classify(429, &empty, black_box(GEMINI_429), ProviderFlavor::Gemini))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
