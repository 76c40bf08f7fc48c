//! The Redis side of the gateway's operation log (idempotency records), shared by every
//! gateway instance: one hash per operation, started by one script, replaced whole in one
//! transaction, dropped by one script. The Responses API's remembered responses are hashes
//! moved by the same calls (`replace`, `read`, `remove`). The gateway names the keys and
//! reads the fields; this module only moves them, with the timeout on every call.

use std::time::Duration;

use redis::Script;

use crate::Topology;
use crate::conn::{Conn, Connector};

/// Version of the scripts and the record layout; part of every script's text.
pub const VERSION: &str = "sluice-oplog-v1";

/// A call that failed or timed out; the message is for the log.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpRecordError(pub String);

/// A record's fields as the start script returns them: `state`, `fp`, `status`, `ctype`,
/// `body` (absent fields are `None`).
pub type Fields = Vec<Option<Vec<u8>>>;

/// Operation records in Redis.
#[derive(Debug)]
pub struct OpRecords {
    connector: Connector,
    timeout: Duration,
    begin: Script,
    abandon: Script,
}

fn failed(e: impl std::fmt::Display) -> OpRecordError {
    OpRecordError(e.to_string())
}

/// `d` in whole milliseconds, at least one (Redis refuses a zero expiry).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl OpRecords {
    /// Records on `topology`; every call (connecting included) gets `timeout`.
    #[must_use]
    pub fn new(topology: Topology, timeout: Duration) -> Self {
        Self {
            connector: Connector::new(topology, timeout),
            timeout,
            begin: Script::new(&format!("-- {VERSION}\n{}", include_str!("lua/oplog_begin.lua"))),
            abandon: Script::new(&format!("-- {VERSION}\n{}", include_str!("lua/oplog_abandon.lua"))),
        }
    }

    /// The same, with `tls` for `rediss://` URLs.
    #[must_use]
    pub fn with_tls(self, tls: crate::Tls) -> Self {
        Self { connector: self.connector.with_tls(tls), ..self }
    }

    async fn conn(&self) -> Result<Conn, OpRecordError> {
        tokio::time::timeout(self.timeout, self.connector.get())
            .await
            .map_err(|_| OpRecordError("redis connect timed out".into()))?
            .map_err(failed)
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        call: impl AsyncFnOnce(Conn) -> redis::RedisResult<T>,
    ) -> Result<T, OpRecordError> {
        let conn = self.conn().await?;
        tokio::time::timeout(self.timeout, call(conn))
            .await
            .map_err(|_| OpRecordError("redis call timed out".into()))?
            .map_err(failed)
    }

    /// Records `key` in flight for `fingerprint`, expiring with `lease`, when it has no
    /// record (`None`); else returns the record's [`Fields`] untouched.
    ///
    /// # Errors
    /// When Redis fails or does not answer in time.
    pub async fn begin(&self, key: &str, fingerprint: &[u8], lease: Duration) -> Result<Option<Fields>, OpRecordError> {
        let mut invocation = self.begin.prepare_invoke();
        invocation.key(key).arg(fingerprint).arg(millis(lease));
        let reply: Fields = self.run(async |mut c| invocation.invoke_async(&mut c).await).await?;
        Ok((!reply.is_empty()).then_some(reply))
    }

    /// Replaces `key`'s record with `fields`, kept for `ttl`, in one transaction.
    ///
    /// # Errors
    /// When Redis fails or does not answer in time.
    pub async fn replace(&self, key: &str, fields: &[(&str, Vec<u8>)], ttl: Duration) -> Result<(), OpRecordError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(key)
            .ignore()
            .hset_multiple(key, fields)
            .ignore()
            .pexpire(key, i64::try_from(millis(ttl)).unwrap_or(i64::MAX))
            .ignore();
        self.run(async |mut c| pipe.query_async::<()>(&mut c).await).await
    }

    /// `names` of `key`'s hash, in order (`None` for an absent field or key).
    ///
    /// # Errors
    /// When Redis fails or does not answer in time.
    pub async fn read(&self, key: &str, names: &[&str]) -> Result<Fields, OpRecordError> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key).arg(names);
        self.run(async |mut c| cmd.query_async::<Fields>(&mut c).await).await
    }

    /// Removes `key`'s record, whatever it holds.
    ///
    /// # Errors
    /// When Redis fails or does not answer in time.
    pub async fn remove(&self, key: &str) -> Result<(), OpRecordError> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(key);
        self.run(async |mut c| cmd.query_async::<i64>(&mut c).await).await.map(drop)
    }

    /// Removes `key`'s record if it is still the in-flight one for `fingerprint`.
    ///
    /// # Errors
    /// When Redis fails or does not answer in time.
    pub async fn abandon(&self, key: &str, fingerprint: &[u8]) -> Result<(), OpRecordError> {
        let mut invocation = self.abandon.prepare_invoke();
        invocation.key(key).arg(fingerprint);
        self.run(async |mut c| invocation.invoke_async::<i64>(&mut c).await).await.map(drop)
    }
}
