//! Remembered responses in Redis, shared by every gateway instance: a continuation or a
//! read that a load balancer sends to another instance finds what the first one relayed.
//!
//! One hash per response, `P:resp:<n>:<tenant>:<id>` (n = the tenant's length), with `dep`
//! (the deployment) and, once its usage is known, `ctx` (its context in tokens); written
//! whole in one transaction with its time to live. While Redis is unreachable the store
//! follows `[store] on_unavailable`, as the operation log does.

use std::sync::Arc;
use std::time::Duration;

use sluice_config::Store;
use sluice_redis::oplog::OpRecords;
use sluice_redis::{Tls, Topology};

use super::memory::MemoryResponses;
use super::{Remembered, ResponseKey, ResponseStore};
use crate::oplog::{OpFuture, OpStoreError};

/// Remembered responses in Redis.
#[derive(Debug)]
pub struct RedisResponses {
    records: OpRecords,
    prefix: String,
    /// Where records go while Redis is unreachable, when the store fails open.
    local: Option<MemoryResponses>,
}

/// The store `settings` call for: Redis (at `target`) when the quota store is Redis, else
/// `local`.
#[must_use]
pub fn from_config(
    settings: &Store,
    target: Option<(Topology, Tls)>,
    local: MemoryResponses,
) -> Arc<dyn ResponseStore> {
    let Some((records, fail_open)) = crate::oplog::redis::records(settings, target) else { return Arc::new(local) };
    Arc::new(RedisResponses { records, prefix: settings.prefix.clone(), local: fail_open.then_some(local) })
}

fn failed(e: impl std::fmt::Display) -> OpStoreError {
    OpStoreError(e.to_string())
}

impl RedisResponses {
    fn key(&self, key: &ResponseKey) -> String {
        format!("{}:resp:{}:{}:{}", self.prefix, key.tenant.len(), key.tenant, key.id)
    }

    async fn remember_remote(&self, key: &ResponseKey, what: &Remembered, ttl: Duration) -> Result<(), OpStoreError> {
        let mut fields: Vec<(&str, Vec<u8>)> = vec![("dep", what.deployment.as_bytes().to_vec())];
        if let Some(context) = what.context {
            fields.push(("ctx", context.to_string().into_bytes()));
        }
        self.records.replace(&self.key(key), &fields, ttl).await.map_err(failed)
    }

    async fn recall_remote(&self, key: &ResponseKey) -> Result<Option<Remembered>, OpStoreError> {
        let reply = self.records.read(&self.key(key), &["dep", "ctx"]).await.map_err(failed)?;
        let mut fields = reply.into_iter().map(|f| f.and_then(|bytes| String::from_utf8(bytes).ok()));
        let (deployment, context) = (fields.next().flatten(), fields.next().flatten());
        Ok(deployment.map(|d| Remembered { deployment: d.into(), context: context.and_then(|c| c.parse().ok()) }))
    }

    /// `remote`'s answer, or the local store's when Redis failed and the store fails open.
    fn or_local<T>(
        &self,
        remote: Result<T, OpStoreError>,
        local: impl FnOnce(&MemoryResponses) -> T,
    ) -> Result<T, OpStoreError> {
        match (remote, &self.local) {
            (Err(e), Some(memory)) => {
                tracing::debug!(error = %e, "remembered responses: Redis unreachable, using this instance's");
                Ok(local(memory))
            }
            (result, _) => result,
        }
    }
}

impl ResponseStore for RedisResponses {
    fn remember<'a>(&'a self, key: &'a ResponseKey, what: &'a Remembered, ttl: Duration) -> OpFuture<'a, ()> {
        Box::pin(async move {
            let remote = self.remember_remote(key, what, ttl).await;
            self.or_local(remote, |m| m.remember_now(key, what, ttl))
        })
    }

    fn recall<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, Option<Remembered>> {
        Box::pin(async move {
            let remote = self.recall_remote(key).await;
            self.or_local(remote, |m| m.recall_now(key))
        })
    }

    fn forget<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, ()> {
        Box::pin(async move {
            let remote = self.records.remove(&self.key(key)).await.map_err(failed);
            self.or_local(remote, |m| m.forget_now(key))
        })
    }
}
