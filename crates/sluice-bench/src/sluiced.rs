//! Clients of the gateway: they send through sluice — spread round-robin over its
//! instances, as a load balancer would — and, when it answers 429 ("not now"), wait what
//! `retry-after-ms` says and ask again. No backoff of their own.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Uri;

use crate::client::HttpClient;
use crate::drive::{Outcome, Transport};
use crate::workload::Kind;

/// Floor of a wait, so a zero hint cannot spin.
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Wait when a 429 carries no hint.
const DEFAULT_WAIT: Duration = Duration::from_millis(100);
/// Attempts after transport errors or 5xx before giving up.
const MAX_ERRORS: u32 = 3;

/// Sends through the gateway with one key per traffic class.
#[derive(Debug)]
pub struct Gateway {
    client: HttpClient,
    uris: Vec<Uri>,
    next: AtomicUsize,
    interactive_key: String,
    batch_key: String,
    /// 429s the gateway answered to interactive requests (each followed by a wait and a
    /// new attempt).
    pub interactive_not_now: AtomicU64,
    /// 429s the gateway answered to batch requests.
    pub batch_not_now: AtomicU64,
    /// Other failed attempts.
    pub errors: AtomicU64,
}

impl Gateway {
    /// A transport posting to the chat endpoints of `base_urls`, one attempt after the
    /// other round-robin.
    ///
    /// # Errors
    /// When a URL is invalid or none is given.
    pub fn new(base_urls: &[String], interactive_key: &str, batch_key: &str) -> anyhow::Result<Self> {
        let uris = base_urls
            .iter()
            .map(|url| format!("{url}/v1/chat/completions").parse())
            .collect::<Result<Vec<Uri>, _>>()?;
        anyhow::ensure!(!uris.is_empty(), "no gateway to send to");
        Ok(Self {
            client: HttpClient::new(),
            uris,
            next: AtomicUsize::new(0),
            interactive_key: interactive_key.to_owned(),
            batch_key: batch_key.to_owned(),
            interactive_not_now: AtomicU64::new(0),
            batch_not_now: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    /// 429s the gateway answered, both classes.
    #[must_use]
    pub fn not_now(&self) -> u64 {
        self.interactive_not_now.load(Ordering::Relaxed) + self.batch_not_now.load(Ordering::Relaxed)
    }

    fn uri(&self) -> &Uri {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        &self.uris[n % self.uris.len()]
    }

    async fn attempt(&self, kind: Kind, body: Bytes, errors: &mut u32) -> Option<Outcome> {
        let key = match kind {
            Kind::Interactive => &self.interactive_key,
            Kind::Batch => &self.batch_key,
        };
        match self.client.post_json(self.uri(), Some(key), body).await {
            Ok(reply) if reply.is_success() => Some(Outcome::Served),
            Ok(reply) if reply.status == 429 => {
                let counter = match kind {
                    Kind::Interactive => &self.interactive_not_now,
                    Kind::Batch => &self.batch_not_now,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(reply.retry_after.unwrap_or(DEFAULT_WAIT).max(MIN_WAIT)).await;
                None
            }
            Ok(reply) if reply.status < 500 => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                Some(Outcome::Failed)
            }
            Ok(_) | Err(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                *errors += 1;
                (*errors >= MAX_ERRORS).then_some(Outcome::Failed)
            }
        }
    }
}

impl Transport for Gateway {
    async fn send(&self, kind: Kind, body: Bytes) -> Outcome {
        let mut errors = 0;
        loop {
            if let Some(outcome) = self.attempt(kind, body.clone(), &mut errors).await {
                return outcome;
            }
        }
    }
}
