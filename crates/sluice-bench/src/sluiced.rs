//! Clients of the gateway: they send through sluice and, when it answers 429 ("not
//! now"), wait what `retry-after-ms` says and ask again. No backoff of their own.

use std::sync::atomic::{AtomicU64, Ordering};
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
    uri: Uri,
    interactive_key: String,
    batch_key: String,
    /// 429s the gateway answered (each followed by a wait and a new attempt).
    pub not_now: AtomicU64,
    /// Other failed attempts.
    pub errors: AtomicU64,
}

impl Gateway {
    /// A transport posting to `base_url`'s chat endpoint.
    ///
    /// # Errors
    /// When the URL is invalid.
    pub fn new(base_url: &str, interactive_key: &str, batch_key: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: HttpClient::new(),
            uri: format!("{base_url}/v1/chat/completions").parse()?,
            interactive_key: interactive_key.to_owned(),
            batch_key: batch_key.to_owned(),
            not_now: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        })
    }

    async fn attempt(&self, key: &str, body: Bytes, errors: &mut u32) -> Option<Outcome> {
        match self.client.post_json(&self.uri, Some(key), body).await {
            Ok(reply) if reply.is_success() => Some(Outcome::Served),
            Ok(reply) if reply.status == 429 => {
                self.not_now.fetch_add(1, Ordering::Relaxed);
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
        let key = match kind {
            Kind::Interactive => &self.interactive_key,
            Kind::Batch => &self.batch_key,
        };
        let mut errors = 0;
        loop {
            if let Some(outcome) = self.attempt(key, body.clone(), &mut errors).await {
                return outcome;
            }
        }
    }
}
