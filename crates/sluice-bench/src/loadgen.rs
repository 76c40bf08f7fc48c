//! An open-loop load generator: requests leave at fixed intended times whatever the
//! server does, and latency is measured from the *intended* send time, so a slow server
//! cannot hide its queueing (no coordinated omission).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use serde::Serialize;
use sluice_quota::{Clock, Nanos, SystemClock};
use tokio::task::JoinSet;

use crate::client::HttpClient;
use crate::stats::{Samples, Summary};

/// Longest a single request may take before it counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest the generator waits for stragglers after the last send.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// Endpoint.
    pub uri: Uri,
    /// Bearer token.
    pub bearer: String,
    /// The request body.
    pub body: Bytes,
}

/// One fixed-rate step.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Intended requests per second.
    pub rate: u32,
    /// How long requests are sent.
    pub duration: Duration,
    /// Requests in flight at most; a send due while this many are out is dropped.
    pub max_in_flight: usize,
}

/// What one step measured.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// Intended rate.
    pub rate: u32,
    /// Requests sent.
    pub sent: u64,
    /// Successful (2xx) responses.
    pub ok: u64,
    /// Non-2xx responses, transport errors and timeouts.
    pub errors: u64,
    /// Sends skipped because `max_in_flight` requests were out.
    pub dropped: u64,
    /// Successful responses per second, from the first intended send to the last response.
    pub achieved_rps: f64,
    /// Latency from intended send to complete response, successful requests only.
    pub latency: Summary,
}

/// Runs one step against `target`.
pub async fn run_step(client: &HttpClient, target: &Target, step: Step) -> StepResult {
    let clock = SystemClock::new();
    let start = clock.now();
    let total = (f64::from(step.rate) * step.duration.as_secs_f64()).round() as u64;
    let interval = Duration::from_secs_f64(1.0 / f64::from(step.rate.max(1)));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    let (mut sent, mut dropped) = (0u64, 0u64);
    while sent + dropped < total {
        let due = start.after(interval.saturating_mul(u32::try_from(sent + dropped).unwrap_or(u32::MAX)));
        let now = clock.now();
        if due > now {
            tokio::time::sleep(due.since(now)).await;
            continue;
        }
        if in_flight.load(Ordering::Relaxed) >= step.max_in_flight {
            dropped += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        tasks.spawn(one(client.clone(), target.clone(), clock, due, Arc::clone(&in_flight)));
        sent += 1;
    }
    let (samples, ok, last) = collect(&mut tasks, &clock).await;
    let window = last.since(start).as_secs_f64().max(step.duration.as_secs_f64() * 0.5);
    StepResult {
        rate: step.rate,
        sent,
        ok,
        errors: sent - ok,
        dropped,
        achieved_rps: ok as f64 / window,
        latency: samples.summary(),
    }
}

async fn one(
    client: HttpClient,
    target: Target,
    clock: SystemClock,
    due: Nanos,
    in_flight: Arc<AtomicUsize>,
) -> Option<Duration> {
    let call = client.post_json(&target.uri, Some(&target.bearer), target.body);
    let result = tokio::time::timeout(REQUEST_TIMEOUT, call).await;
    in_flight.fetch_sub(1, Ordering::Relaxed);
    match result {
        Ok(Ok(reply)) if reply.is_success() => Some(clock.now().since(due)),
        _ => None,
    }
}

async fn collect(tasks: &mut JoinSet<Option<Duration>>, clock: &SystemClock) -> (Samples, u64, Nanos) {
    let mut samples = Samples::default();
    let mut ok = 0;
    let drain = async {
        while let Some(joined) = tasks.join_next().await {
            if let Ok(Some(latency)) = joined {
                samples.record(latency);
                ok += 1;
            }
        }
    };
    if tokio::time::timeout(DRAIN_TIMEOUT, drain).await.is_err() {
        tasks.abort_all();
    }
    (samples, ok, clock.now())
}
