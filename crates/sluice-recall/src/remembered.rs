//! What sluice remembers of each Responses API response it relayed, and of each
//! provider-side object created through passthrough (a conversation, a vector store, a
//! fine-tuning job, an upload): the tenant whose request created it, the deployment that
//! created it (where reading, cancelling or deleting it must go) and, for a response, the
//! context it left behind (its input plus output tokens, from usage), per tenant and id.
//!
//! Every deployment of a gateway may answer under one provider key, so the provider cannot
//! tell tenants apart: these records are what keeps them apart. An id is usable only by the
//! tenant it is remembered for ([`Responses::owned`]); an id sluice does not know for the
//! caller's tenant (another tenant's, another gateway's, expired, malformed) is refused as
//! missing, before any upstream call. Provider ids carry their kind in a prefix (`resp_`,
//! `conv_`, `vs_`…), so one key space holds them all.
//!
//! A request that continues a response (`previous_response_id`) reserves that context on
//! top of its own input: the provider adds the earlier turns, which are not in the body; a
//! response whose usage is not known yet (and a conversation) is reserved at the profile's
//! `context_reserve_tokens`; both settle exactly from usage.
//!
//! Layout as the operation log's: this file is the meaning ([`Responses`]); the records live
//! in a [`ResponseStore`]: in this process ([`memory`], bounded, with expiry) or, when the
//! quota store is Redis, in Redis ([`redis`], one hash with a TTL per id), so every
//! instance knows what any of them relayed.

pub mod memory;
pub mod redis;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use sluice_provider::Usage;
use sluice_redis::{Tls, Topology};

use crate::oplog::OpFuture;

/// How long a response or object is remembered: OpenAI keeps stored responses for 30 days.
pub const REMEMBERED_FOR: Duration = Duration::from_secs(30 * 24 * 3600);

/// Longest id accepted (OpenAI's are about 50 characters).
pub const MAX_ID_CHARS: usize = 128;

/// One response or provider-side object: a tenant's id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResponseKey {
    /// The tenant whose request created it.
    pub tenant: Arc<str>,
    /// The provider's id.
    pub id: String,
}

/// What is remembered of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    /// The deployment that created it.
    pub deployment: Arc<str>,
    /// Its input plus output tokens; `None` until its usage is known (a background
    /// response still running).
    pub context: Option<u64>,
}

/// The store of remembered responses could not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the remembered responses are unavailable")]
pub struct Unavailable;

/// Why [`Responses::owned`] has nothing for the caller; `W` names what was looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unowned<W> {
    /// `W` was not found: the id is malformed or not remembered for the caller's tenant
    /// (another tenant's id included, answered alike).
    NotFound(W),
    /// The store could not answer.
    StoreUnavailable,
}

impl<W> From<Unavailable> for Unowned<W> {
    fn from(_: Unavailable) -> Self {
        Self::StoreUnavailable
    }
}

/// Where remembered responses live. Each call is atomic on its record.
pub trait ResponseStore: Send + Sync + Debug {
    /// Remembers `what` of `key` for `ttl`, replacing what was there.
    fn remember<'a>(&'a self, key: &'a ResponseKey, what: &'a Remembered, ttl: Duration) -> OpFuture<'a, ()>;
    /// What is remembered of `key`, if anything.
    fn recall<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, Option<Remembered>>;
    /// Forgets `key`.
    fn forget<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, ()>;
}

/// The remembered responses over a store.
#[derive(Debug)]
pub struct Responses {
    store: Arc<dyn ResponseStore>,
}

impl Responses {
    /// Remembered responses on `store`.
    #[must_use]
    pub fn new(store: Arc<dyn ResponseStore>) -> Self {
        Self { store }
    }

    /// Remembers `what` of `key`; a store failure is logged (the response is then unknown:
    /// a continuation reserves conservatively, a read is a 404).
    pub async fn remember(&self, key: &ResponseKey, what: &Remembered) {
        if let Err(e) = self.store.remember(key, what, REMEMBERED_FOR).await {
            tracing::warn!(error = %e, "could not remember a response");
        }
    }

    /// What is remembered of `key`.
    ///
    /// # Errors
    /// [`Unavailable`] when the store cannot answer.
    pub async fn recall(&self, key: &ResponseKey) -> Result<Option<Remembered>, Unavailable> {
        self.store.recall(key).await.map_err(|e| {
            tracing::warn!(error = %e, "could not read a remembered response");
            Unavailable
        })
    }

    /// What is remembered of `key`, which names `what`: the caller's tenant's own.
    ///
    /// # Errors
    /// [`Unowned::NotFound`] (`what`; the gateway answers 404) when the id is malformed or
    /// not remembered for the tenant (another tenant's id included, answered alike),
    /// [`Unowned::StoreUnavailable`] when the store cannot answer.
    pub async fn owned<W>(&self, key: &ResponseKey, what: W) -> Result<Remembered, Unowned<W>> {
        let remembered = match well_formed(&key.id) {
            true => self.recall(key).await?,
            false => None,
        };
        remembered.ok_or(Unowned::NotFound(what))
    }

    /// Forgets `key` (the provider deleted it).
    pub async fn forget(&self, key: &ResponseKey) {
        if let Err(e) = self.store.forget(key).await {
            tracing::warn!(error = %e, "could not forget a deleted response");
        }
    }
}

/// Remembers what a relayed response left behind, once its answer is read: the
/// deployment that created it, and its context from the usage.
#[derive(Debug, Clone)]
pub struct Memo {
    /// Where it is remembered.
    pub responses: Arc<Responses>,
    /// The tenant whose request it answers.
    pub tenant: Arc<str>,
    /// The deployment that answered.
    pub deployment: Arc<str>,
}

impl Memo {
    /// Remembers response `id`, with the context its `usage` leaves: everything it read
    /// plus everything it wrote, which a continuation reads again.
    pub async fn record(&self, id: &str, usage: Option<&Usage>) {
        let key = ResponseKey { tenant: Arc::clone(&self.tenant), id: id.to_owned() };
        let context = usage.map(|u| u.input_tokens.saturating_add(u.output_tokens));
        self.responses.remember(&key, &Remembered { deployment: Arc::clone(&self.deployment), context }).await;
    }

    /// [`Memo::record`] for a non-stream answer: the response's `id` is read from `body`.
    pub async fn record_body(&self, body: &[u8], usage: Option<&Usage>) {
        if let Some(id) = response_id(body) {
            self.record(&id, usage).await;
        }
    }
}

/// Whether `id` could be a provider's id: 1 to [`MAX_ID_CHARS`] letters, digits, `_`, `-`.
#[must_use]
pub fn well_formed(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_CHARS
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The `id` of a Responses API `response` object (or of any object the provider answers).
#[must_use]
pub fn response_id(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Named {
        id: Option<String>,
    }
    serde_json::from_slice::<Named>(body).ok()?.id.filter(|id| !id.is_empty())
}

/// The remembered responses `config` calls for: in Redis when the quota store is Redis,
/// else in this process. `target` is where that Redis is and how to reach it (`None` for the
/// memory store).
#[must_use]
pub fn from_config(
    config: &sluice_config::Config,
    target: Option<(Topology, Tls)>,
    clock: Arc<dyn sluice_quota::Clock>,
) -> Responses {
    Responses::new(redis::from_config(&config.store, target, memory::MemoryResponses::new(clock)))
}

#[cfg(test)]
mod tests;
