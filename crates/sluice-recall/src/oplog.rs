//! The operation log: one record per idempotency key, so a repeated operation is answered
//! from the log instead of reaching the provider again.
//!
//! A request with an `Idempotency-Key` header is recorded in flight (per tenant and key,
//! with a fingerprint of the request and a lease) before anything is sent. A non-stream
//! success is then recorded `completed` with its response; a stream that started is
//! recorded `streamed` (its body cannot be replayed). A repeat of a completed operation
//! gets the stored response; of a streamed one, a 409; a repeat while the first is in
//! flight waits for it (bounded), then gets a 409. The same key with another request (another
//! fingerprint) is refused with 422. Failures clear the record so the client may try again;
//! an in-flight record whose instance died expires with its lease.
//!
//! Layout: this file decides ([`OpLog`]); the records live in an [`OpStore`]: in this
//! process ([`memory`]) or, when the quota store is Redis, in Redis ([`redis`]), so a
//! repeat that reaches another instance is caught too.

pub mod memory;
pub mod redis;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use sluice_provider::{RequestError, RequestErrorCode};
use sluice_redis::{Tls, Topology};
use tokio::sync::Notify;

/// Longest idempotency key accepted (the same bound as `/v1/jobs`).
pub const MAX_KEY_CHARS: usize = 255;
/// How often a repeat looks again at an operation in flight on another instance.
const POLL: Duration = Duration::from_millis(100);

/// SHA-256 of the endpoint and the canonical request body.
pub type Fingerprint = [u8; 32];

/// A stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: Option<http::HeaderValue>,
    /// Body.
    pub body: Bytes,
}

/// Where an operation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpState {
    /// Sent, no answer yet.
    InFlight,
    /// Answered; the answer is kept.
    Completed(Stored),
    /// A stream was started: the provider was called, its body is not kept.
    Streamed,
}

/// An operation's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The request it was recorded for.
    pub fingerprint: Fingerprint,
    /// Where it is.
    pub state: OpState,
}

/// One operation: a tenant's idempotency key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OpId {
    /// The tenant.
    pub tenant: Arc<str>,
    /// The client's key.
    pub key: String,
}

/// The store could not answer.
#[derive(Debug, thiserror::Error)]
#[error("operation log: {0}")]
pub struct OpStoreError(pub String);

/// A store call's future.
pub type OpFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, OpStoreError>> + Send + 'a>>;

/// Where records live. Each call is atomic on its record.
pub trait OpStore: Send + Sync + Debug {
    /// Records `id` in flight for `fingerprint` until `lease` ends, when it has no live
    /// record (`None`); else returns that record untouched.
    fn begin<'a>(&'a self, id: &'a OpId, fingerprint: &'a Fingerprint, lease: Duration)
    -> OpFuture<'a, Option<Record>>;
    /// Replaces `id`'s record with `record`, kept for `ttl`.
    fn finish<'a>(&'a self, id: &'a OpId, record: &'a Record, ttl: Duration) -> OpFuture<'a, ()>;
    /// Removes `id`'s record if it is still the in-flight one for `fingerprint`.
    fn abandon<'a>(&'a self, id: &'a OpId, fingerprint: &'a Fingerprint) -> OpFuture<'a, ()>;
}

/// Why a request under an idempotency key may not go ahead; the gateway answers each with
/// its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BeginError {
    /// The key was used for another request (another fingerprint).
    #[error("the idempotency key was used for another request")]
    KeyReused,
    /// The first request under the key is still in flight after the wait.
    #[error("the first request under the idempotency key is still in flight")]
    InFlight,
    /// The first request under the key was a stream: the provider was called, its body
    /// is not kept.
    #[error("the stream sent under the idempotency key cannot be replayed")]
    StreamCompleted,
    /// The store could not answer.
    #[error("the operation log is unavailable")]
    StoreUnavailable,
}

/// What the log says about a new request.
#[derive(Debug)]
pub enum Begin {
    /// First of its key: go ahead, then [`OpLog::complete`], [`OpLog::streamed`] or
    /// [`OpLog::abandon`].
    Proceed,
    /// Already completed: answer with this.
    Replay(Stored),
}

/// Settings of an [`OpLog`].
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long a finished operation is remembered.
    pub ttl: Duration,
    /// How long a repeat waits for the first in flight.
    pub wait: Duration,
    /// How long an in-flight record outlives an instance that died with it.
    pub lease: Duration,
}

/// The operation log over a store.
#[derive(Debug)]
pub struct OpLog {
    store: Arc<dyn OpStore>,
    timing: Timing,
    /// Wakes repeats waiting here when an operation of this instance finishes.
    done: Notify,
}

impl OpLog {
    /// A log on `store`.
    #[must_use]
    pub fn new(store: Arc<dyn OpStore>, timing: Timing) -> Self {
        Self { store, timing, done: Notify::new() }
    }

    /// Looks `id` up for a request with `fingerprint`; records it in flight when new.
    ///
    /// # Errors
    /// [`BeginError::KeyReused`] when the key was used for another request,
    /// [`BeginError::InFlight`] when the first is still in flight after the wait,
    /// [`BeginError::StreamCompleted`] when it was a stream, [`BeginError::StoreUnavailable`]
    /// when the store cannot answer.
    pub async fn begin(&self, id: &OpId, fingerprint: &Fingerprint) -> Result<Begin, BeginError> {
        let first = tokio::time::timeout(self.timing.wait, async {
            loop {
                let notified = self.done.notified();
                match self.store.begin(id, fingerprint, self.timing.lease).await {
                    Ok(None) => return Ok(Begin::Proceed),
                    Ok(Some(record)) if record.fingerprint != *fingerprint => {
                        return Err(BeginError::KeyReused);
                    }
                    Ok(Some(Record { state: OpState::Completed(stored), .. })) => return Ok(Begin::Replay(stored)),
                    Ok(Some(Record { state: OpState::Streamed, .. })) => {
                        return Err(BeginError::StreamCompleted);
                    }
                    Ok(Some(Record { state: OpState::InFlight, .. })) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "operation log unavailable");
                        return Err(BeginError::StoreUnavailable);
                    }
                }
                // Woken by a finish here; another instance's finish is seen at the next poll.
                let _ = tokio::time::timeout(POLL, notified).await;
            }
        });
        first.await.unwrap_or(Err(BeginError::InFlight))
    }

    /// Records the operation's response.
    pub async fn complete(&self, id: &OpId, fingerprint: &Fingerprint, stored: Stored) {
        self.finish(id, Record { fingerprint: *fingerprint, state: OpState::Completed(stored) }).await;
    }

    /// Records that the operation's stream started (its body is not kept).
    pub async fn streamed(&self, id: &OpId, fingerprint: &Fingerprint) {
        self.finish(id, Record { fingerprint: *fingerprint, state: OpState::Streamed }).await;
    }

    async fn finish(&self, id: &OpId, record: Record) {
        if let Err(e) = self.store.finish(id, &record, self.timing.ttl).await {
            // Repeats then find it in flight (409) until its lease ends.
            tracing::warn!(error = %e, "operation log could not record a finished operation");
        }
        self.done.notify_waiters();
    }

    /// Forgets an operation that failed, so it may be tried again.
    pub async fn abandon(&self, id: &OpId, fingerprint: &Fingerprint) {
        if let Err(e) = self.store.abandon(id, fingerprint).await {
            tracing::warn!(error = %e, "operation log could not forget a failed operation");
        }
        self.done.notify_waiters();
    }
}

/// The client's `Idempotency-Key`, if it sent one.
///
/// # Errors
/// The request error (a 400) when it is empty, longer than [`MAX_KEY_CHARS`] or not visible
/// ASCII.
pub fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, RequestError> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    match value.to_str().map(str::trim) {
        Ok(key) if !key.is_empty() && key.len() <= MAX_KEY_CHARS => Ok(Some(key.to_owned())),
        _ => Err(RequestError {
            param: Some("Idempotency-Key".to_owned()),
            message: format!("1 to {MAX_KEY_CHARS} visible ASCII characters"),
            code: RequestErrorCode::InvalidValue,
        }),
    }
}

/// The fingerprint of a request to `endpoint` with `body`: key order and whitespace do not
/// matter, every value does (the model included, as it is part of the body).
#[must_use]
pub fn fingerprint(endpoint: &str, body: &Map<String, Value>) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update(endpoint.as_bytes());
    hasher.update(b"\n");
    canonical_map(body, &mut hasher);
    hasher.finalize().into()
}

/// Feeds `map` as JSON with its keys sorted, whatever order the map keeps them in.
fn canonical_map(map: &Map<String, Value>, hasher: &mut Sha256) {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    hasher.update(b"{");
    for (key, item) in entries {
        hasher.update(Value::String(key.clone()).to_string().as_bytes());
        hasher.update(b":");
        canonical(item, hasher);
        hasher.update(b",");
    }
    hasher.update(b"}");
}

fn canonical(value: &Value, hasher: &mut Sha256) {
    match value {
        Value::Object(map) => canonical_map(map, hasher),
        Value::Array(items) => {
            hasher.update(b"[");
            for item in items {
                canonical(item, hasher);
                hasher.update(b",");
            }
            hasher.update(b"]");
        }
        scalar => hasher.update(scalar.to_string().as_bytes()),
    }
}

/// The log `config` calls for: in Redis when the quota store is Redis, else in this process.
/// `target` is where that Redis is and how to reach it (`None` for the memory store).
#[must_use]
pub fn from_config(
    config: &sluice_config::Config,
    target: Option<(Topology, Tls)>,
    clock: Arc<dyn sluice_quota::Clock>,
) -> OpLog {
    let longest_wait = config.classes.iter().map(|c| c.max_wait).max().unwrap_or_default();
    let timing = Timing {
        ttl: config.server.idempotency_ttl,
        wait: config.server.idempotency_wait,
        // A request may wait its class's longest queue time, then hold its reservation.
        lease: config.server.lease.saturating_add(longest_wait),
    };
    let local = memory::MemoryOps::new(clock);
    OpLog::new(redis::from_config(&config.store, target, local), timing)
}

#[cfg(test)]
mod tests;
