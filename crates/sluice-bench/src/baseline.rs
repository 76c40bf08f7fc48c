//! The provider's own latency for an interactive request: the same requests the users send,
//! straight to the simulated provider, a few at a time, with nothing else running — the
//! yardstick for "interactive p99 within the provider's own latency + 100 ms". A provider
//! enforcing a short window refuses some of them (a few at a time can be more than one
//! window holds): a refused request is sent again after the provider's hint, and only the
//! attempt it answers is timed — its latency, not its limits, is the yardstick.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;
use sluice_quota::{Clock, SystemClock};
use tokio::task::JoinSet;

use crate::client::HttpClient;
use crate::stats::Samples;
use crate::workload::{Kind, Workload};

#[derive(Default)]
struct Tally {
    samples: Samples,
    failed: usize,
    refused: usize,
}

/// Latency of interactive requests sent directly, without contention.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderLatency {
    /// Requests answered.
    pub served: usize,
    /// Requests that failed (any non-2xx other than a 429, or still refused after
    /// [`MAX_ATTEMPTS`]: there should be none).
    pub failed: usize,
    /// The provider's 429s met on the way (each followed by another attempt).
    pub refused: usize,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Slowest, ms.
    pub max_ms: Option<f64>,
}

/// Attempts per request, the first included.
pub const MAX_ATTEMPTS: usize = 40;

/// The longest a refused request waits before its next attempt, whatever the hint.
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// Sends `requests` interactive requests of `workload` to `sim_url`, `concurrency` at a time.
///
/// # Errors
/// When the URL is invalid.
pub async fn measure(
    sim_url: &str,
    workload: &Workload,
    requests: usize,
    concurrency: usize,
    seed: u64,
) -> anyhow::Result<ProviderLatency> {
    let uri: http::Uri = format!("{sim_url}/v1/chat/completions").parse()?;
    let client = HttpClient::new();
    let samples = Arc::new(Mutex::new(Tally::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for worker in 0..concurrency.max(1) {
        let (client, uri, samples, next, workload) =
            (client.clone(), uri.clone(), Arc::clone(&samples), Arc::clone(&next), workload.clone());
        tasks.spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ 0xba5e ^ worker as u64);
            let clock = SystemClock::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= requests {
                    return;
                }
                let body = workload.body(Kind::Interactive, "baseline", n, &mut rng);
                for attempt in 1..=MAX_ATTEMPTS {
                    let sent = clock.now();
                    let reply = client.post_json(&uri, Some("sk-baseline"), body.clone()).await;
                    let took = clock.now().since(sent);
                    match reply {
                        Ok(r) if r.is_success() => {
                            samples.lock().samples.record(took);
                            break;
                        }
                        Ok(r) if r.status == 429 && attempt < MAX_ATTEMPTS => {
                            samples.lock().refused += 1;
                            let pause = r.retry_after.unwrap_or(Duration::from_millis(10));
                            tokio::time::sleep(pause.clamp(Duration::from_millis(1), MAX_PAUSE)).await;
                        }
                        _ => {
                            samples.lock().failed += 1;
                            break;
                        }
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let Tally { samples, failed, refused } = std::mem::take(&mut *samples.lock());
    let summary = samples.summary();
    Ok(ProviderLatency {
        served: summary.count,
        failed,
        refused,
        p50_ms: summary.p50_ms,
        p99_ms: summary.p99_ms,
        max_ms: summary.max_ms,
    })
}
