//! The provider's own latency for an interactive request: the same requests the users send,
//! straight to the simulated provider, a few at a time, with nothing else running — the
//! yardstick for "interactive p99 within the provider's own latency + 100 ms".

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::Serialize;
use sluice_quota::{Clock, SystemClock};
use tokio::task::JoinSet;

use crate::client::HttpClient;
use crate::stats::Samples;
use crate::workload::{Kind, Workload};

/// Latency of interactive requests sent directly, without contention.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderLatency {
    /// Requests answered.
    pub served: usize,
    /// Requests that failed (any non-2xx: there should be none).
    pub failed: usize,
    /// Median, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Slowest, ms.
    pub max_ms: Option<f64>,
}

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
    let samples = Arc::new(Mutex::new((Samples::default(), 0usize)));
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
                let sent = clock.now();
                let reply = client.post_json(&uri, Some("sk-baseline"), body).await;
                let took = clock.now().since(sent);
                let mut s = samples.lock();
                match reply {
                    Ok(r) if r.is_success() => s.0.record(took),
                    _ => s.1 += 1,
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let (samples, failed) = std::mem::take(&mut *samples.lock());
    let summary = samples.summary();
    Ok(ProviderLatency {
        served: summary.count,
        failed,
        p50_ms: summary.p50_ms,
        p99_ms: summary.p99_ms,
        max_ms: summary.max_ms,
    })
}
