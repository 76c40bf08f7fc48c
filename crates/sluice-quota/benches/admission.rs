//! Admission core cost: reserve + settle on paths of 1–6 scopes with 1–6 limits each.
#![allow(clippy::unwrap_used, reason = "a test helper that fails loudly")]
//!
//! Run: `cargo bench -p sluice-quota --bench admission`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use sluice_quota::{
    Cost, Dimension, FakeClock, Limits, MemoryStore, QuotaStore, RateLimit, ScopeId, ScopeKey, ScopeKind, Settlement,
};

const KINDS: [ScopeKind; 6] = [
    ScopeKind::Org,
    ScopeKind::Tenant,
    ScopeKind::Team,
    ScopeKind::ApiKey,
    ScopeKind::ModelProfile,
    ScopeKind::Deployment,
];

fn limits(count: usize) -> Limits {
    let minute = Duration::from_secs(60);
    let day = Duration::from_secs(86_400);
    let all = [
        (Dimension::Requests, minute),
        (Dimension::InputTokens, minute),
        (Dimension::OutputTokens, minute),
        (Dimension::TotalTokens, minute),
        (Dimension::Requests, day),
        (Dimension::TotalTokens, day),
    ];
    all.iter().take(count).fold(Limits::unlimited(), |l, &(dim, period)| {
        let amount = std::num::NonZeroU64::new(u64::MAX / 1_000_000).unwrap_or(std::num::NonZeroU64::MIN);
        l.with_rate(RateLimit::new(dim, amount, period))
    })
}

fn setup(depth: usize, dims: usize) -> (MemoryStore, Vec<ScopeId>) {
    let store = MemoryStore::new(Arc::new(FakeClock::default()));
    let path = KINDS[..depth].iter().map(|&kind| store.register(ScopeKey::new(kind, "bench"), limits(dims))).collect();
    (store, path)
}

fn admit_settle(c: &mut Criterion) {
    let mut group = c.benchmark_group("admit_settle");
    for (depth, dims) in [(1, 1), (1, 4), (3, 4), (6, 1), (6, 4), (6, 6)] {
        let (store, path) = setup(depth, dims);
        let lease = Duration::from_secs(60);
        group.bench_with_input(BenchmarkId::new("depth_x_limits", format!("{depth}x{dims}")), &path, |b, path| {
            b.iter(|| {
                let grant = store.reserve_now(black_box(path), Cost::request(500, 300), lease);
                if let Ok(grant) = grant {
                    store.settle_now(grant.id, Settlement::exact(Cost::request(500, 120)));
                }
            });
        });
    }
    group.finish();
}

fn contended(c: &mut Criterion) {
    let (store, path) = setup(6, 4);
    let store = Arc::new(store);
    let lease = Duration::from_secs(60);
    c.bench_function("admit_settle_two_threads_6x4", |b| {
        b.iter_custom(|iters| {
            let other = Arc::clone(&store);
            let other_path = path.clone();
            let half = iters / 2;
            let clock = sluice_quota::SystemClock::new();
            let start = sluice_quota::Clock::now(&clock);
            let worker = std::thread::spawn(move || {
                for _ in 0..half {
                    if let Ok(g) = other.reserve_now(&other_path, Cost::request(500, 300), lease) {
                        other.settle_now(g.id, Settlement::exact(Cost::request(500, 120)));
                    }
                }
            });
            for _ in 0..iters - half {
                if let Ok(g) = store.reserve_now(&path, Cost::request(500, 300), lease) {
                    store.settle_now(g.id, Settlement::exact(Cost::request(500, 120)));
                }
            }
            let _ = worker.join();
            sluice_quota::Clock::now(&clock).since(start)
        });
    });
}

criterion_group!(benches, admit_settle, contended);
criterion_main!(benches);
