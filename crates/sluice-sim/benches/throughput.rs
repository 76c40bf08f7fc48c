//! Per-request costs of the simulator's pure parts: admission, token counting, formatting.
//!
//! `cargo bench -p sluice-sim` (HTTP throughput: `cargo run --release -p sluice-sim --example load`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_sim::admission::{Cost, ModelLimiter};
use sluice_sim::openai::request::ChatRequest;
use sluice_sim::tokens::{Encoding, Tokenizer};
use sluice_sim::wire_time::go_duration;
use sluice_sim::{Limits, OutputAccounting};

const BODY: &[u8] = br#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the load test."}],"max_tokens":16}"#;

fn admission(c: &mut Criterion) {
    let limits = Limits { rpm: Some(1_000_000_000), tpm: Some(1_000_000_000_000), ..Limits::default() };
    let mut limiter = ModelLimiter::new(&limits, OutputAccounting::Actual, true, 0.0);
    let cost = Cost { tokens: 40.0, ..Cost::default() };
    let mut now = 0.0;
    c.bench_function("admit rpm+tpm", |b| {
        b.iter(|| {
            now += 1e-6;
            black_box(limiter.admit(now, black_box(&cost)))
        });
    });
}

fn tokens(c: &mut Criterion) {
    let tok = Tokenizer::new(Encoding::O200kBase);
    c.bench_function("parse + count chat prompt", |b| {
        b.iter(|| {
            let request = serde_json::from_slice::<ChatRequest<'_>>(black_box(BODY)).ok();
            black_box(request.map(|r| r.prompt_tokens(&tok)))
        });
    });
}

fn formatting(c: &mut Criterion) {
    c.bench_function("go duration", |b| b.iter(|| black_box(go_duration(black_box(Duration::from_millis(179_560))))));
}

criterion_group!(benches, admission, tokens, formatting);
criterion_main!(benches);
