//! Closed-loop clients that record every HTTP attempt: each client sends one request at a
//! time, round-robin over the gateways' URLs, waits what a refusal hints (`retry-after-ms`,
//! capped), and stops at a deadline. The record is what the chaos invariants and the
//! multi-process tests judge: who answered what, when, and how long it took.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use serde_json::Value;
use tokio::time::Instant;

use crate::client::HttpClient;

/// Most attempts one client loop makes, whatever the time left.
const MAX_ATTEMPTS_PER_CLIENT: usize = 50_000;
/// Bound on one HTTP attempt; an attempt cut here has status 0 and `took` ≥ this.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Wait after a failed connection or an answer without a hint.
const DEFAULT_PAUSE: Duration = Duration::from_millis(100);

/// One HTTP attempt as a client saw it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Which of the load's URLs it went to.
    pub instance: usize,
    /// Sent at, since the load's origin.
    pub sent: Duration,
    /// Until the response was read (or the attempt failed).
    pub took: Duration,
    /// HTTP status, 0 when no response came (connection failed or [`ATTEMPT_TIMEOUT`]).
    pub status: u16,
    /// `error.gateway_decision`, else `error.code`, else empty.
    pub decision: String,
}

impl Attempt {
    /// When the answer came, since the load's origin.
    #[must_use]
    pub fn done(&self) -> Duration {
        self.sent + self.took
    }
}

/// How the client loops behave.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Concurrent client loops.
    pub clients: usize,
    /// How long they run from the origin.
    pub run: Duration,
    /// Cap on any wait between attempts (the gateway's `retry-after-ms` is honoured up to it).
    pub max_wait: Duration,
}

/// Runs `load.clients` loops from `origin`, posting `body(client)` to
/// `URL/v1/chat/completions` with gateway key `key`; client `c`'s `n`-th attempt goes to
/// `urls[(c + n) % len]`. Every loop stops at `origin + load.run` or after a bounded number
/// of attempts. The attempts come back ordered by send time.
pub async fn run_load(
    urls: Vec<String>,
    load: Load,
    origin: Instant,
    key: &str,
    body: fn(usize) -> Value,
) -> Vec<Attempt> {
    let http = HttpClient::new();
    let end = origin + load.run;
    let uris: Vec<Option<Uri>> = urls.iter().map(|u| format!("{u}/v1/chat/completions").parse().ok()).collect();
    let mut tasks = Vec::new();
    for client in 0..load.clients {
        let (http, uris, key) = (http.clone(), uris.clone(), key.to_owned());
        let body = Bytes::from(body(client).to_string());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for n in 0..MAX_ATTEMPTS_PER_CLIENT {
                let now = Instant::now();
                if now >= end || uris.is_empty() {
                    break;
                }
                let instance = (client + n) % uris.len();
                let (status, decision, wait) = attempt(&http, uris[instance].as_ref(), &key, body.clone()).await;
                seen.push(Attempt { instance, sent: now - origin, took: now.elapsed(), status, decision });
                let pause = match status {
                    200 => Duration::ZERO,
                    _ => wait.unwrap_or(DEFAULT_PAUSE),
                };
                tokio::time::sleep_until((Instant::now() + pause.min(load.max_wait)).min(end)).await;
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap_or_default());
    }
    all.sort_by_key(|a| a.sent);
    all
}

async fn attempt(http: &HttpClient, uri: Option<&Uri>, key: &str, body: Bytes) -> (u16, String, Option<Duration>) {
    let Some(uri) = uri else { return (0, String::new(), None) };
    let reply = match tokio::time::timeout(ATTEMPT_TIMEOUT, http.post_json(uri, Some(key), body)).await {
        Ok(Ok(reply)) => reply,
        _ => return (0, String::new(), None),
    };
    let value: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    let error = &value["error"];
    let decision = error["gateway_decision"].as_str().or_else(|| error["code"].as_str()).unwrap_or_default();
    (reply.status, decision.to_owned(), reply.retry_after)
}

/// Counts attempts by `(status, decision)`, for reports and failure messages.
#[must_use]
pub fn summary(attempts: &[Attempt]) -> BTreeMap<(u16, String), usize> {
    let mut counts = BTreeMap::new();
    for a in attempts {
        *counts.entry((a.status, a.decision.clone())).or_insert(0) += 1;
    }
    counts
}

/// The longest attempt.
#[must_use]
pub fn slowest(attempts: &[Attempt]) -> Duration {
    attempts.iter().map(|a| a.took).max().unwrap_or_default()
}

/// Per instance, how long after `up` its first successful answer came (`None`: never).
#[must_use]
pub fn back_after(attempts: &[Attempt], instances: usize, up: Duration) -> Vec<Option<Duration>> {
    (0..instances)
        .map(|i| {
            let first = attempts.iter().filter(|a| a.instance == i && a.status == 200 && a.sent >= up);
            first.map(Attempt::done).min().map(|t| t - up)
        })
        .collect()
}

/// `DBSIZE` of the Redis server on 127.0.0.1:`port` (`None` while it does not answer).
/// Blocks for at most half a second.
#[must_use]
pub fn redis_keys(port: u16) -> Option<u64> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    stream.write_all(b"DBSIZE\r\n").ok()?;
    let mut buffer = [0u8; 64];
    let n = stream.read(&mut buffer).ok()?;
    std::str::from_utf8(buffer.get(..n)?).ok()?.trim().strip_prefix(':')?.parse().ok()
}
