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
use tokio::sync::mpsc;

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
    /// The generator's own lateness: from intended send to the request task starting.
    pub send_lag: Summary,
}

/// Runs one step against `target`.
///
/// Sends are paced by a blocking thread (`std::thread::sleep` is precise to tens of
/// microseconds, tokio's timer to a millisecond); each request runs as a task on the runtime.
pub async fn run_step(client: &HttpClient, target: &Target, step: Step) -> StepResult {
    let clock = SystemClock::new();
    let start = clock.now();
    let (results, received) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher {
        client: client.clone(),
        target: target.clone(),
        step,
        clock,
        start,
        runtime: tokio::runtime::Handle::current(),
        results,
    };
    let (sent, dropped) = tokio::task::spawn_blocking(move || dispatcher.run()).await.unwrap_or((0, 0));
    let (samples, lags, ok, last) = collect(received, &clock).await;
    let window = last.since(start).as_secs_f64().max(step.duration.as_secs_f64() * 0.5);
    StepResult {
        rate: step.rate,
        sent,
        ok,
        errors: sent.saturating_sub(ok),
        dropped,
        achieved_rps: ok as f64 / window,
        latency: samples.summary(),
        send_lag: lags.summary(),
    }
}

/// The pacing loop of one step.
struct Dispatcher {
    client: HttpClient,
    target: Target,
    step: Step,
    clock: SystemClock,
    start: Nanos,
    runtime: tokio::runtime::Handle,
    results: mpsc::UnboundedSender<Timing>,
}

impl Dispatcher {
    /// Sends every request at its intended time; returns (sent, dropped).
    fn run(self) -> (u64, u64) {
        let total = (f64::from(self.step.rate) * self.step.duration.as_secs_f64()).round() as u64;
        let interval = Duration::from_secs_f64(1.0 / f64::from(self.step.rate.max(1)));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (mut sent, mut dropped) = (0u64, 0u64);
        while sent + dropped < total {
            let index = u32::try_from(sent + dropped).unwrap_or(u32::MAX);
            let due = self.start.after(interval.saturating_mul(index));
            let now = self.clock.now();
            if due > now {
                std::thread::sleep(due.since(now));
                continue;
            }
            if in_flight.load(Ordering::Relaxed) >= self.step.max_in_flight {
                dropped += 1;
                continue;
            }
            in_flight.fetch_add(1, Ordering::Relaxed);
            let request = one(self.client.clone(), self.target.clone(), self.clock, due, Arc::clone(&in_flight));
            let results = self.results.clone();
            self.runtime.spawn(async move {
                let _ = results.send(request.await);
            });
            sent += 1;
        }
        (sent, dropped)
    }
}

/// Latency of a successful request and the generator's lateness in sending it.
type Timing = (Option<Duration>, Duration);

async fn one(
    client: HttpClient,
    target: Target,
    clock: SystemClock,
    due: Nanos,
    in_flight: Arc<AtomicUsize>,
) -> Timing {
    let lag = clock.now().since(due);
    let call = client.post_json(&target.uri, Some(&target.bearer), target.body);
    let result = tokio::time::timeout(REQUEST_TIMEOUT, call).await;
    in_flight.fetch_sub(1, Ordering::Relaxed);
    match result {
        Ok(Ok(reply)) if reply.is_success() => (Some(clock.now().since(due)), lag),
        _ => (None, lag),
    }
}

async fn collect(mut received: mpsc::UnboundedReceiver<Timing>, clock: &SystemClock) -> (Samples, Samples, u64, Nanos) {
    let (mut samples, mut lags) = (Samples::default(), Samples::default());
    let mut ok = 0;
    let drain = async {
        // Ends when every request task has reported (each holds a sender).
        while let Some((latency, lag)) = received.recv().await {
            lags.record(lag);
            if let Some(latency) = latency {
                samples.record(latency);
                ok += 1;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, drain).await;
    (samples, lags, ok, clock.now())
}
