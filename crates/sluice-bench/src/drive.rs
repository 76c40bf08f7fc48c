//! Runs one side of the demo: the interactive users and the batch job, over a
//! [`Transport`] (through the gateway, or through the naive workers), until the batch is
//! done or the deadline passes.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use indicatif::ProgressBar;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};
use sluice_quota::{Clock, Nanos, SystemClock};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::stats::Samples;
use crate::workload::{Kind, Workload};

/// How one logical request ended, retries included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered successfully.
    Served,
    /// Given up (retry budget spent, or a non-retryable error).
    Failed,
}

/// How requests reach the provider.
pub trait Transport: Send + Sync + 'static {
    /// Sends one logical request (with whatever retrying the transport does).
    fn send(&self, kind: Kind, body: Bytes) -> impl Future<Output = Outcome> + Send;
}

/// What one side's clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// End-to-end latency of served interactive requests.
    pub interactive: Samples,
    /// Interactive requests given up.
    pub interactive_failed: usize,
    /// Interactive requests still waiting when the side ended.
    pub interactive_unfinished: usize,
    /// Batch requests served.
    pub batch_served: usize,
    /// Batch requests given up.
    pub batch_failed: usize,
    /// Time from the start until the last batch request ended, if it did.
    pub batch_done_after: Option<Duration>,
    /// How long the side ran.
    pub elapsed: Duration,
}

/// One side's run parameters.
#[derive(Debug, Clone)]
pub struct Run {
    /// The workload.
    pub workload: Workload,
    /// The side ends at the latest this long after its start.
    pub deadline: Duration,
    /// Seed of think times and prompts.
    pub seed: u64,
}

struct Ctx<T> {
    transport: Arc<T>,
    run: Run,
    clock: SystemClock,
    start: Nanos,
    tally: Mutex<Tally>,
    next_batch: AtomicUsize,
    batch_ended: AtomicUsize,
    progress: ProgressBar,
    stop: watch::Receiver<bool>,
}

/// Runs users and batch over `transport` until the batch ends or the deadline passes.
pub async fn drive<T: Transport>(transport: Arc<T>, run: Run, progress: ProgressBar) -> Tally {
    let (stop_tx, stop) = watch::channel(false);
    let clock = SystemClock::new();
    let start = clock.now();
    let ctx = Arc::new(Ctx {
        transport,
        run,
        clock,
        start,
        tally: Mutex::new(Tally::default()),
        next_batch: AtomicUsize::new(0),
        batch_ended: AtomicUsize::new(0),
        progress,
        stop,
    });
    let mut users = JoinSet::new();
    for user in 0..ctx.run.workload.users {
        users.spawn(interactive_user(Arc::clone(&ctx), user));
    }
    let mut batch = JoinSet::new();
    for _ in 0..ctx.run.workload.batch_concurrency.max(1) {
        batch.spawn(batch_worker(Arc::clone(&ctx)));
    }
    let _ = tokio::time::timeout(ctx.run.deadline, async { while batch.join_next().await.is_some() {} }).await;
    let _ = stop_tx.send(true);
    while batch.join_next().await.is_some() {}
    while users.join_next().await.is_some() {}
    let mut tally = std::mem::take(&mut *ctx.tally.lock());
    tally.elapsed = ctx.clock.now().since(ctx.start);
    tally
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn interactive_user<T: Transport>(ctx: Arc<Ctx<T>>, user: usize) {
    let mut rng = StdRng::seed_from_u64(ctx.run.seed ^ (user as u64 + 1).wrapping_mul(0x9e37_79b9));
    let name = format!("user-{user:02}");
    // Users are already mid-session when the batch starts: stagger the first question.
    let first = rng.random_range(Duration::ZERO..=ctx.run.workload.think_max);
    let mut think = first;
    for n in 0.. {
        tokio::select! {
            () = tokio::time::sleep(think) => {}
            () = stopped(ctx.stop.clone()) => return,
        }
        let body = ctx.run.workload.body(Kind::Interactive, &name, n, &mut rng);
        let sent = ctx.clock.now();
        tokio::select! {
            outcome = ctx.transport.send(Kind::Interactive, body) => {
                let mut tally = ctx.tally.lock();
                match outcome {
                    Outcome::Served => tally.interactive.record(ctx.clock.now().since(sent)),
                    Outcome::Failed => tally.interactive_failed += 1,
                }
            }
            () = stopped(ctx.stop.clone()) => {
                ctx.tally.lock().interactive_unfinished += 1;
                return;
            }
        }
        think = ctx.run.workload.think(&mut rng);
    }
}

async fn batch_worker<T: Transport>(ctx: Arc<Ctx<T>>) {
    let total = ctx.run.workload.batch_requests;
    loop {
        let n = ctx.next_batch.fetch_add(1, Ordering::Relaxed);
        if n >= total {
            return;
        }
        let mut rng = StdRng::seed_from_u64(ctx.run.seed ^ (n as u64).wrapping_mul(0x85eb_ca6b));
        let body = ctx.run.workload.body(Kind::Batch, "batch-job", n, &mut rng);
        let outcome = tokio::select! {
            outcome = ctx.transport.send(Kind::Batch, body) => outcome,
            () = stopped(ctx.stop.clone()) => return,
        };
        ended(&ctx, outcome, total);
    }
}

fn ended<T>(ctx: &Ctx<T>, outcome: Outcome, total: usize) {
    let mut tally = ctx.tally.lock();
    match outcome {
        Outcome::Served => tally.batch_served += 1,
        Outcome::Failed => tally.batch_failed += 1,
    }
    ctx.progress.inc(1);
    if ctx.batch_ended.fetch_add(1, Ordering::Relaxed) + 1 == total {
        tally.batch_done_after = Some(ctx.clock.now().since(ctx.start));
    }
}
