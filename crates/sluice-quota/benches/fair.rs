//! Fair queue: enqueue and dequeue rates with 100,000 waiting requests, the memory they
//! take, and the scheduling cost per admitted request.
//!
//! Run: `cargo bench -p sluice-quota --bench fair`.
#![allow(clippy::unwrap_used, clippy::print_stdout, reason = "a benchmark harness")]

use std::hint::black_box;
use std::num::NonZeroU32;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use sluice_quota::Nanos;
use sluice_quota::waiting::{FairQueue, Waiter, WaiterId};

const WAITING: u64 = 100_000;
const TENANTS: u64 = 100;

fn waiter(i: u64) -> Waiter {
    Waiter {
        id: WaiterId(i),
        tenant: u32::try_from(i % TENANTS).unwrap(),
        lane: u32::try_from(i % (TENANTS * 4)).unwrap(),
        priority: u8::try_from(i % 2 * 5).unwrap(),
        weight: NonZeroU32::new(1 + u32::try_from(i % 3).unwrap()).unwrap(),
        cost: 200 + i % 1_800,
        deadline: Nanos(u64::MAX),
        retries: 0,
    }
}

fn full() -> FairQueue {
    let mut queue = FairQueue::new();
    for i in 0..WAITING {
        queue.push(waiter(i));
    }
    queue
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn memory() {
    let before = rss_kib();
    let queue = full();
    let after = rss_kib();
    println!(
        "fair queue: {WAITING} waiting requests of {TENANTS} tenants take {} KiB ({} bytes each)",
        after.saturating_sub(before),
        after.saturating_sub(before) * 1024 / WAITING
    );
    black_box(queue);
}

fn rates(c: &mut Criterion) {
    memory();
    c.bench_function("enqueue 100k", |b| b.iter(|| black_box(full())));
    c.bench_function("dequeue 100k (next + admitted)", |b| {
        b.iter_batched(
            full,
            |mut queue| {
                while let Some(id) = queue.next(Nanos(0)).map(|w| w.id) {
                    queue.admitted(id);
                }
                queue
            },
            BatchSize::LargeInput,
        );
    });
    let mut queue = full();
    let mut next_id = WAITING;
    c.bench_function("one admission with 100k waiting (next + admitted + push)", |b| {
        b.iter(|| {
            let id = queue.next(Nanos(0)).map(|w| w.id).unwrap();
            let done = queue.admitted(id).unwrap();
            next_id += 1;
            queue.push(Waiter { id: WaiterId(next_id), ..done });
        });
    });
}

criterion_group!(benches, rates);
criterion_main!(benches);
