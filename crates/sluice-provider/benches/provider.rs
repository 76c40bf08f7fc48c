//! Hot-path costs of the protocol layer: estimating a request, tapping a stream and
//! counting what it delivered.
//!
//! Run with `cargo bench -p sluice-provider`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use sluice_provider::{
    DeliveredCount, Estimator, MediaPricing, Protocol, StreamTap, TokenizerKind, parse_request, upstream_body,
};

const PROSE: &str = "The gateway decides before anything leaves the building whether a request may go now, \
must wait, should be routed elsewhere, or must be refused. Limits are multi-dimensional: requests per \
minute, input tokens, output tokens, concurrent streams. Many small prompts hit RPM first; few large \
prompts hit TPM first. ";

/// A chat body of roughly `target` bytes: a system prompt and alternating turns of prose.
fn chat_body(target: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "system", "content": "You are a careful assistant. Answer briefly."})];
    let mut size = 100;
    let mut turn = 0;
    while size < target {
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        let take = (target - size).min(PROSE.len());
        messages.push(json!({"role": role, "content": &PROSE[..take]}));
        size += take + 30;
        turn += 1;
    }
    serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages, "max_tokens": 512})).unwrap_or_default()
}

fn bench_estimate(c: &mut Criterion) {
    let Ok(estimator) = Estimator::new() else { return };
    let mut group = c.benchmark_group("input_tokens");
    for size in [1_000, 20_000] {
        let body = chat_body(size);
        let Ok(req) = parse_request(Protocol::OpenAiChat, &body) else { return };
        group.throughput(Throughput::Bytes(body.len() as u64));
        for (name, kind) in [("o200k", TokenizerKind::O200k), ("cl100k", TokenizerKind::Cl100k)] {
            group.bench_with_input(BenchmarkId::new(name, body.len()), &req, |b, req| {
                b.iter(|| estimator.input_tokens(black_box(&kind), MediaPricing::OpenAi, black_box(req), 1.1));
            });
        }
        let approx = TokenizerKind::Approx { chars_per_token: 4.0 };
        group.bench_with_input(BenchmarkId::new("approx", body.len()), &req, |b, req| {
            b.iter(|| estimator.input_tokens(black_box(&approx), MediaPricing::OpenAi, black_box(req), 1.1));
        });
    }
    // Adversarial text: one 20 KB "word" and 20 KB of spaces.
    for (name, text) in [("one_word_20k", "a".repeat(20_000)), ("spaces_20k", " ".repeat(20_000))] {
        let body = serde_json::to_vec(&json!({"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}))
            .unwrap_or_default();
        let Ok(req) = parse_request(Protocol::OpenAiChat, &body) else { return };
        group.bench_function(name, |b| {
            b.iter(|| estimator.input_tokens(&TokenizerKind::O200k, MediaPricing::OpenAi, black_box(&req), 1.0))
        });
    }
    // A 1 MB PDF (scanned once for its pages) and a 1 MB PNG (its header read only).
    let pdf = "<< /Type /Page >> stream BT (lorem ipsum) Tj ET endstream ".repeat(1 << 14);
    let png = [b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\x04\0\0\0\x04\0".as_slice(), &[0; 1 << 20]].concat();
    for (name, part) in [
        (
            "pdf_1mb",
            json!({"type": "file", "file": {"file_data": format!("data:application/pdf;base64,{}", b64(pdf.as_bytes()))}}),
        ),
        ("png_1mb", json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", b64(&png))}})),
    ] {
        let body = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": [part]}]});
        let Ok(req) = parse_request(Protocol::OpenAiChat, body.to_string().as_bytes()) else { return };
        group.bench_function(name, |b| {
            b.iter(|| estimator.input_tokens(&TokenizerKind::O200k, MediaPricing::OpenAi, black_box(&req), 1.0))
        });
    }
    group.finish();
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn bench_parse_rewrite(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    for size in [1_000, 20_000] {
        let body = chat_body(size);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("parse_request", body.len()), &body, |b, body| {
            b.iter(|| parse_request(Protocol::OpenAiChat, black_box(body)));
        });
        let Ok(req) = parse_request(Protocol::OpenAiChat, &body) else { return };
        group.bench_with_input(BenchmarkId::new("upstream_body", body.len()), &req, |b, req| {
            b.iter(|| upstream_body(black_box(req), "gpt-4o-2024-08-06", true));
        });
    }
    group.finish();
}

const OPENAI_CHUNK: &[u8] = b"data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"system_fingerprint\":\"fp_0ba0d124f1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" token\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n";
const OPENAI_USAGE: &[u8] = b"data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":300,\"total_tokens\":1500,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n";
const ANTHROPIC_DELTA: &[u8] = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token\"}}\n\n";

fn bench_tap(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_tap_push");
    let cases: [(&str, Protocol, bool, &[u8]); 4] = [
        ("openai_delta", Protocol::OpenAiChat, false, OPENAI_CHUNK),
        ("openai_delta_hidden_usage", Protocol::OpenAiChat, true, OPENAI_CHUNK),
        ("openai_usage_chunk", Protocol::OpenAiChat, true, OPENAI_USAGE),
        ("anthropic_delta", Protocol::AnthropicMessages, false, ANTHROPIC_DELTA),
    ];
    for (name, protocol, hide, chunk) in cases {
        group.throughput(Throughput::Bytes(chunk.len() as u64));
        group.bench_function(name, |b| {
            let mut tap = StreamTap::new(protocol, hide);
            b.iter(|| tap.push(black_box(chunk)));
        });
    }
    // An event cut in three pieces: two held, the third completes it.
    let (a, rest) = OPENAI_CHUNK.split_at(70);
    let (bpart, cpart) = rest.split_at(70);
    group.throughput(Throughput::Bytes(OPENAI_CHUNK.len() as u64));
    group.bench_function("openai_delta_in_3_pieces", |b| {
        let mut tap = StreamTap::new(Protocol::OpenAiChat, false);
        b.iter(|| {
            black_box(tap.push(black_box(a)));
            black_box(tap.push(black_box(bpart)));
            tap.push(black_box(cpart))
        });
    });
    group.finish();
}

/// The output count a stream settles on when it ends without usage, per event the client
/// was sent, beside the tap's push of the same event (what every stream pays already).
fn bench_delivered(c: &mut Criterion) {
    let Ok(estimator) = Estimator::new() else { return };
    let estimator = std::sync::Arc::new(estimator);
    let mut group = c.benchmark_group("delivered_count_observe");
    let cases: [(&str, Protocol, &[u8]); 3] = [
        ("openai_delta", Protocol::OpenAiChat, OPENAI_CHUNK),
        ("openai_usage_chunk", Protocol::OpenAiChat, OPENAI_USAGE),
        ("anthropic_delta", Protocol::AnthropicMessages, ANTHROPIC_DELTA),
    ];
    for (name, protocol, chunk) in cases {
        group.throughput(Throughput::Bytes(chunk.len() as u64));
        group.bench_function(name, |b| {
            let mut count = DeliveredCount::new(protocol, std::sync::Arc::clone(&estimator), TokenizerKind::O200k);
            b.iter(|| count.observe(black_box(chunk)));
        });
    }
    // 300 deltas then the count read at the end (what a cut stream's settlement pays).
    group.throughput(Throughput::Elements(300));
    group.bench_function("openai_300_deltas_and_tokens", |b| {
        b.iter(|| {
            let mut count =
                DeliveredCount::new(Protocol::OpenAiChat, std::sync::Arc::clone(&estimator), TokenizerKind::O200k);
            for _ in 0..300 {
                count.observe(black_box(OPENAI_CHUNK));
            }
            count.tokens()
        });
    });
    group.finish();
}

criterion_group!(benches, bench_estimate, bench_parse_rewrite, bench_tap, bench_delivered);
criterion_main!(benches);
