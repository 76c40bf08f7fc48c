//! The naive setup of seed 000: a fixed pool of uncoordinated workers, each with its own
//! queue, calling the provider directly and backing off on its own (exponential, full
//! jitter) when the provider answers 429 or fails. Requests are dealt to the workers'
//! queues round-robin, interactive and batch alike; a worker backing off holds its queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::client::HttpClient;
use crate::drive::{Outcome, Transport};
use crate::workload::Kind;

/// Each worker's retry policy.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// First backoff ceiling.
    pub base: Duration,
    /// Largest backoff ceiling.
    pub cap: Duration,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
}

impl Backoff {
    /// Full jitter: uniform in `0..=min(cap, base · 2^retry)`.
    pub fn delay(&self, retry: u32, rng: &mut impl rand::Rng) -> Duration {
        let ceiling = self.base.saturating_mul(1 << retry.min(20)).min(self.cap);
        rng.random_range(Duration::ZERO..=ceiling)
    }
}

struct Job {
    kind: Kind,
    body: Bytes,
    done: oneshot::Sender<Outcome>,
}

/// Counters of the naive side.
#[derive(Debug, Default)]
pub struct Counters {
    /// Provider 429s the workers saw.
    pub rate_limited: AtomicU64,
    /// Of which on interactive requests.
    pub interactive_rate_limited: AtomicU64,
    /// Retries after a backoff.
    pub retries: AtomicU64,
}

/// The worker pool, as a [`Transport`]: `send` queues the request at the next worker.
#[derive(Debug)]
pub struct Workers {
    queues: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
    /// What the workers saw.
    pub counters: Arc<Counters>,
    tasks: Mutex<JoinSet<()>>,
}

impl Workers {
    /// Starts `count` workers posting to `base_url`'s chat endpoint.
    ///
    /// # Errors
    /// When the URL is invalid.
    pub fn start(count: usize, base_url: &str, backoff: Backoff, seed: u64) -> anyhow::Result<Self> {
        let uri: Uri = format!("{base_url}/v1/chat/completions").parse()?;
        let counters = Arc::new(Counters::default());
        let client = HttpClient::new();
        let mut tasks = JoinSet::new();
        let mut queues = Vec::with_capacity(count);
        for index in 0..count {
            let (tx, rx) = mpsc::unbounded_channel();
            queues.push(tx);
            let worker = Worker {
                client: client.clone(),
                uri: uri.clone(),
                backoff,
                counters: Arc::clone(&counters),
                rng: StdRng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x27d4_eb2f)),
            };
            tasks.spawn(worker.run(rx));
        }
        Ok(Self { queues, next: AtomicUsize::new(0), counters, tasks: Mutex::new(tasks) })
    }

    /// Stops every worker at once; queued and in-flight requests are dropped.
    pub async fn shutdown(&self) {
        let mut tasks = std::mem::take(&mut *self.tasks.lock());
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

impl Transport for Workers {
    async fn send(&self, kind: Kind, body: Bytes) -> Outcome {
        let (done, result) = oneshot::channel();
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.queues.len().max(1);
        let Some(queue) = self.queues.get(index) else { return Outcome::Failed };
        if queue.send(Job { kind, body, done }).is_err() {
            return Outcome::Failed;
        }
        result.await.unwrap_or(Outcome::Failed)
    }
}

struct Worker {
    client: HttpClient,
    uri: Uri,
    backoff: Backoff,
    counters: Arc<Counters>,
    rng: StdRng,
}

impl Worker {
    async fn run(mut self, mut queue: mpsc::UnboundedReceiver<Job>) {
        while let Some(job) = queue.recv().await {
            let outcome = self.call(job.kind, &job.body).await;
            let _ = job.done.send(outcome);
        }
    }

    async fn call(&mut self, kind: Kind, body: &Bytes) -> Outcome {
        for retry in 0..self.backoff.max_attempts {
            if retry > 0 {
                self.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            match self.client.post_json(&self.uri, Some("sk-naive"), body.clone()).await {
                Ok(reply) if reply.is_success() => return Outcome::Served,
                Ok(reply) if reply.status == 429 => {
                    self.counters.rate_limited.fetch_add(1, Ordering::Relaxed);
                    if kind == Kind::Interactive {
                        self.counters.interactive_rate_limited.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(reply) if reply.status < 500 => return Outcome::Failed,
                Ok(_) | Err(_) => {}
            }
            if retry + 1 == self.backoff.max_attempts {
                break;
            }
            tokio::time::sleep(self.backoff.delay(retry, &mut self.rng)).await;
        }
        Outcome::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_under_the_doubling_ceiling() {
        let b = Backoff { base: Duration::from_millis(100), cap: Duration::from_millis(800), max_attempts: 8 };
        let mut rng = StdRng::seed_from_u64(3);
        let mut max = [Duration::ZERO; 6];
        for _ in 0..2000 {
            for (retry, m) in max.iter_mut().enumerate() {
                *m = (*m).max(b.delay(retry as u32, &mut rng));
            }
        }
        let ceilings = [100, 200, 400, 800, 800, 800].map(Duration::from_millis);
        for (m, c) in max.iter().zip(ceilings) {
            assert!(*m <= c && *m > c * 9 / 10, "{m:?} vs {c:?}");
        }
    }
}
