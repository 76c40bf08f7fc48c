//! Operation records in Redis, shared by every gateway instance: a repeat that a load
//! balancer sends to another instance finds the first one's record. The Redis calls and
//! scripts are `sluice_redis::oplog`; here the records' meaning and the local fallback.
//!
//! One hash per operation, `P:op:<n>:<tenant>:<key>` (n = the tenant's length), with
//! `state` (`in_flight`, `completed`, `streamed`), `fp` (the request's fingerprint) and,
//! once completed, `status`, `ctype` and `body`. Starting is one script (create in flight
//! with the lease as expiry, or return what is there); finishing is one transaction that
//! replaces the hash and sets the retention. While Redis is unreachable the log follows
//! `[store] on_unavailable`: `fail_closed` answers 503, `fail_open_local` keeps records in
//! this process (repeats reaching another instance are then not caught).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sluice_config::{Store, Unavailable};
use sluice_redis::oplog::{Fields, OpRecords};

use super::memory::MemoryOps;
use super::{Fingerprint, OpFuture, OpId, OpState, OpStore, OpStoreError, Record, Stored};

/// Operation records in Redis.
#[derive(Debug)]
pub struct RedisOps {
    records: OpRecords,
    prefix: String,
    /// Where records go while Redis is unreachable, when the store fails open.
    local: Option<MemoryOps>,
}

/// The Redis records `settings` call for, and whether they fail open to this process;
/// `None` when the quota store is not Redis.
#[must_use]
pub fn records(settings: &Store) -> Option<(OpRecords, bool)> {
    let (topology, tls) = sluice_redis::choose::redis_target(settings)?;
    let fail_open = settings.on_unavailable == Unavailable::FailOpenLocal;
    Some((OpRecords::new(topology, settings.timeout).with_tls(tls), fail_open))
}

/// The store `settings` call for: Redis when the quota store is Redis, else `local`.
#[must_use]
pub fn from_config(settings: &Store, local: MemoryOps) -> Arc<dyn OpStore> {
    let Some((records, fail_open)) = records(settings) else { return Arc::new(local) };
    Arc::new(RedisOps { records, prefix: settings.prefix.clone(), local: fail_open.then_some(local) })
}

fn failed(e: impl std::fmt::Display) -> OpStoreError {
    OpStoreError(e.to_string())
}

impl RedisOps {
    fn key(&self, id: &OpId) -> String {
        format!("{}:op:{}:{}:{}", self.prefix, id.tenant.len(), id.tenant, id.key)
    }

    async fn begin_remote(&self, id: &OpId, fp: &Fingerprint, lease: Duration) -> Result<Option<Record>, OpStoreError> {
        let reply = self.records.begin(&self.key(id), &fp[..], lease).await.map_err(failed)?;
        reply.map(parse).transpose()
    }

    async fn finish_remote(&self, id: &OpId, record: &Record, ttl: Duration) -> Result<(), OpStoreError> {
        let mut fields: Vec<(&str, Vec<u8>)> = vec![("fp", record.fingerprint.to_vec())];
        match &record.state {
            OpState::InFlight => fields.push(("state", b"in_flight".to_vec())),
            OpState::Streamed => fields.push(("state", b"streamed".to_vec())),
            OpState::Completed(stored) => {
                fields.push(("state", b"completed".to_vec()));
                fields.push(("status", stored.status.to_string().into_bytes()));
                fields.push(("body", stored.body.to_vec()));
                if let Some(ctype) = &stored.content_type {
                    fields.push(("ctype", ctype.as_bytes().to_vec()));
                }
            }
        }
        self.records.replace(&self.key(id), &fields, ttl).await.map_err(failed)
    }

    async fn abandon_remote(&self, id: &OpId, fp: &Fingerprint) -> Result<(), OpStoreError> {
        self.records.abandon(&self.key(id), &fp[..]).await.map_err(failed)
    }

    /// `remote`'s answer, or the local log's when Redis failed and the store fails open.
    fn or_local<T>(
        &self,
        remote: Result<T, OpStoreError>,
        local: impl FnOnce(&MemoryOps) -> T,
    ) -> Result<T, OpStoreError> {
        match (remote, &self.local) {
            (Err(e), Some(memory)) => {
                tracing::debug!(error = %e, "operation log: Redis unreachable, recording locally");
                Ok(local(memory))
            }
            (result, _) => result,
        }
    }
}

/// A record from its [`Fields`] (`state fp status ctype body`).
fn parse(reply: Fields) -> Result<Record, OpStoreError> {
    let mut fields = reply.into_iter();
    let mut next = || fields.next().flatten();
    let bad = |what: &str| OpStoreError(format!("bad operation record: {what}"));
    let (state, fp) = (next(), next());
    let fingerprint: Fingerprint = fp.and_then(|f| f.try_into().ok()).ok_or_else(|| bad("fingerprint"))?;
    let state = match state.as_deref() {
        Some(b"in_flight") => OpState::InFlight,
        Some(b"streamed") => OpState::Streamed,
        Some(b"completed") => {
            let status = next().and_then(|s| String::from_utf8(s).ok()).and_then(|s| s.parse().ok());
            let content_type = next().and_then(|c| http::HeaderValue::from_bytes(&c).ok());
            let body = Bytes::from(next().unwrap_or_default());
            OpState::Completed(Stored { status: status.ok_or_else(|| bad("status"))?, content_type, body })
        }
        _ => return Err(bad("state")),
    };
    Ok(Record { fingerprint, state })
}

impl OpStore for RedisOps {
    fn begin<'a>(
        &'a self,
        id: &'a OpId,
        fingerprint: &'a Fingerprint,
        lease: Duration,
    ) -> OpFuture<'a, Option<Record>> {
        Box::pin(async move {
            let remote = self.begin_remote(id, fingerprint, lease).await;
            self.or_local(remote, |m| m.begin_now(id, fingerprint, lease))
        })
    }

    fn finish<'a>(&'a self, id: &'a OpId, record: &'a Record, ttl: Duration) -> OpFuture<'a, ()> {
        Box::pin(async move {
            let remote = self.finish_remote(id, record, ttl).await;
            self.or_local(remote, |m| m.finish_now(id, record, ttl))
        })
    }

    fn abandon<'a>(&'a self, id: &'a OpId, fingerprint: &'a Fingerprint) -> OpFuture<'a, ()> {
        Box::pin(async move {
            let remote = self.abandon_remote(id, fingerprint).await;
            self.or_local(remote, |m| m.abandon_now(id, fingerprint))
        })
    }
}
