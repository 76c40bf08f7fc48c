//! [`RedisJobStore`]: jobs in Redis (or Valkey, standalone or Cluster), shared by every
//! gateway instance. Each transition is one Lua script on the server's clock (`TIME`).
//!
//! Keys, all under the hash tag `{P:jobs}` (one cluster slot):
//!
//! ```text
//! {P:jobs}:ready         ZSET   id by priority · 2^44 + seq (lowest first)
//! {P:jobs}:delayed       ZSET   id by not_before (ms, server time)
//! {P:jobs}:leases        ZSET   running id by lease end (ms, server time)
//! {P:jobs}:dead_letter   ZSET   id by seq
//! {P:jobs}:seq           STRING submission counter
//! {P:jobs}:job:<id>      HASH   the job: owner, request, state, attempts, lease token, result, error
//! {P:jobs}:idem:<n>:<tenant>:<key>  STRING  id submitted under that idempotency key (n = tenant length)
//! {P:jobs}:epoch         STRING the id of the data held, set once (see `JobStore::epoch`)
//! ```
//!
//! Documents (see [`crate::doc`]) have keys of their own under the same tag (`docs`), and so
//! have the usage rollups (`usage`).
//!
//! Completed and failed jobs (and their idempotency keys) expire after [`RETENTION`];
//! dead-lettered jobs stay until an operator removes them.

use std::collections::HashMap;
use std::time::Duration;

use redis::Script;
use sluice_redis::conn::Connector;
use sluice_redis::{Tls, Topology};

use crate::doc::{Changes, Doc, DocKey};
use crate::job::Submitted;
use crate::job::{Counts, Endpoint, Failure, Job, JobId, JobResult, JobState, LeaseOutcome, Leased, NewJob, Retry};
use crate::store::{JobFuture, JobStore, JobStoreError, millis};
use crate::usage::{Day, Retention, UsageCounts, UsageKey};

/// Version of the script set; part of every script's text.
pub const VERSION: &str = "sluice-jobs-v1";
/// How long a finished job's answer is kept.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Most delayed or expired jobs one lease call moves.
const MOVE_BATCH: u32 = 256;

mod docs;
mod usage;

pub use docs::CHANGE_LOG;

const COMMON: &str = include_str!("lua/common.lua");

#[derive(Debug)]
struct Scripts {
    submit: Script,
    lease: Script,
    renew: Script,
    complete: Script,
    fail: Script,
    cancel: Script,
    put_doc: Script,
    put_record: Script,
    swap_record: Script,
    records_since: Script,
    add_usage: Script,
}

impl Scripts {
    fn new() -> Self {
        let build = |body: &str| Script::new(&format!("-- {VERSION}\n{COMMON}\n{body}"));
        Self {
            submit: build(include_str!("lua/submit.lua")),
            lease: build(include_str!("lua/lease.lua")),
            renew: build(include_str!("lua/renew.lua")),
            complete: build(include_str!("lua/complete.lua")),
            fail: build(include_str!("lua/fail.lua")),
            cancel: build(include_str!("lua/cancel.lua")),
            put_doc: build(include_str!("lua/put_doc.lua")),
            put_record: build(include_str!("lua/put_record.lua")),
            swap_record: build(include_str!("lua/swap_record.lua")),
            records_since: build(include_str!("lua/records_since.lua")),
            add_usage: build(include_str!("lua/add_usage.lua")),
        }
    }
}

/// Settings of a [`RedisJobStore`].
#[derive(Debug, Clone)]
pub struct RedisJobConfig {
    /// Where Redis is.
    pub topology: Topology,
    /// Key prefix (`P` in `{P:jobs}`).
    pub prefix: String,
    /// Bound on connecting and on each call.
    pub timeout: Duration,
    /// Certificates for `rediss://` URLs.
    pub tls: Tls,
}

/// Jobs in Redis.
#[derive(Debug)]
pub struct RedisJobStore {
    connector: Connector,
    timeout: Duration,
    scripts: Scripts,
    tag: String,
}

type Fields = HashMap<String, String>;

fn fields(flat: Vec<String>) -> Fields {
    let mut map = HashMap::with_capacity(flat.len() / 2);
    let mut items = flat.into_iter();
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        map.insert(k, v);
    }
    map
}

fn parse_job(id: &str, f: &Fields) -> Result<Job, JobStoreError> {
    let text = |name: &str| f.get(name).cloned().unwrap_or_default();
    let num = |name: &str| f.get(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0).max(0);
    let small = |name: &str| u32::try_from(num(name)).unwrap_or(u32::MAX);
    let bad = |what: &str| JobStoreError(format!("job {id}: bad {what}"));
    let state = JobState::parse(&text("state")).ok_or_else(|| bad("state"))?;
    let endpoint = Endpoint::from_path(&text("endpoint")).ok_or_else(|| bad("endpoint"))?;
    let result = f
        .get("result_status")
        .and_then(|s| s.parse::<u16>().ok())
        .map(|status| JobResult { status, body: text("result_body") });
    Ok(Job {
        id: JobId(id.to_owned()),
        tenant: text("tenant"),
        key_id: text("key_id"),
        idempotency_key: f.get("idem").filter(|k| !k.is_empty()).cloned(),
        endpoint,
        body: text("body"),
        class: text("class"),
        priority: u8::try_from(num("priority")).unwrap_or(u8::MAX),
        max_attempts: small("max_attempts"),
        state,
        attempts: small("attempts"),
        lease: num("lease").unsigned_abs(),
        seq: num("seq").unsigned_abs(),
        not_before: num("not_before").unsigned_abs(),
        lease_until: num("lease_until").unsigned_abs(),
        reruns: small("reruns"),
        worker: text("worker"),
        result,
        error: f.get("error").cloned(),
    })
}

impl RedisJobStore {
    /// A store for `config`. Connects on first use.
    #[must_use]
    pub fn new(config: RedisJobConfig) -> Self {
        Self {
            connector: Connector::new(config.topology, config.timeout).with_tls(config.tls),
            timeout: config.timeout,
            scripts: Scripts::new(),
            tag: format!("{{{}:jobs}}", config.prefix),
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}:{name}", self.tag)
    }

    fn job_prefix(&self) -> String {
        self.key("job:")
    }

    fn job_key(&self, id: &JobId) -> String {
        format!("{}{}", self.job_prefix(), id.as_str())
    }

    async fn conn(&self) -> Result<sluice_redis::conn::Conn, JobStoreError> {
        tokio::time::timeout(self.timeout, self.connector.get())
            .await
            .map_err(|_| JobStoreError("redis connect timed out".into()))?
            .map_err(JobStoreError::from_display)
    }

    async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, JobStoreError> {
        let mut conn = self.conn().await?;
        tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn))
            .await
            .map_err(|_| JobStoreError("redis call timed out".into()))?
            .map_err(JobStoreError::from_display)
    }

    async fn submit_job(&self, new: NewJob) -> Result<Submitted, JobStoreError> {
        let mut invocation = self.scripts.submit.prepare_invoke();
        let idem =
            new.idempotency_key.as_ref().map(|k| self.key(&format!("idem:{}:{}:{k}", new.tenant.len(), new.tenant)));
        invocation
            .key(self.key("ready"))
            .key(self.key("seq"))
            .key(self.job_key(&new.id))
            .key(idem.clone().unwrap_or_else(|| self.key("idem:")));
        invocation
            .arg(if idem.is_some() { "1" } else { "0" })
            .arg(new.id.as_str())
            .arg(self.job_prefix())
            .arg(new.priority);
        let pairs: [(&str, String); 8] = [
            ("tenant", new.tenant),
            ("key_id", new.key_id),
            ("idem", new.idempotency_key.unwrap_or_default()),
            ("endpoint", new.endpoint.path().to_owned()),
            ("body", new.body),
            ("class", new.class),
            ("priority", new.priority.to_string()),
            ("max_attempts", new.max_attempts.to_string()),
        ];
        for (name, value) in &pairs {
            invocation.arg(*name).arg(value);
        }
        let (created, id, flat): (i64, String, Vec<String>) = self.call(invocation).await?;
        let job = parse_job(&id, &fields(flat))?;
        Ok(Submitted { job, created: created == 1 })
    }

    async fn lease_job(&self, worker: &str, visibility: Duration) -> Result<LeaseOutcome, JobStoreError> {
        let mut invocation = self.scripts.lease.prepare_invoke();
        for name in ["ready", "delayed", "leases", "dead_letter"] {
            invocation.key(self.key(name));
        }
        invocation.arg(self.job_prefix()).arg(worker).arg(millis(visibility)).arg(MOVE_BATCH).arg(millis(RETENTION));
        let reply: Vec<redis::Value> = self.call(invocation).await?;
        let number = |v: Option<&redis::Value>| match v {
            Some(redis::Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        };
        let mut outcome = LeaseOutcome {
            leased: None,
            recovered: u32::try_from(number(reply.first())).unwrap_or(u32::MAX),
            recovered_dead: u32::try_from(number(reply.get(1))).unwrap_or(u32::MAX),
        };
        if let [_, _, id, token, flat] = reply.as_slice() {
            let id: String = redis::from_redis_value_ref(id).map_err(JobStoreError::from_display)?;
            let flat: Vec<String> = redis::from_redis_value_ref(flat).map_err(JobStoreError::from_display)?;
            let job = parse_job(&id, &fields(flat))?;
            outcome.leased = Some(Leased { job, token: number(Some(token)) });
        }
        Ok(outcome)
    }

    async fn renew_job(&self, id: &JobId, token: u64, visibility: Duration) -> Result<bool, JobStoreError> {
        let mut invocation = self.scripts.renew.prepare_invoke();
        invocation.key(self.job_key(id)).key(self.key("leases")).arg(id.as_str()).arg(token).arg(millis(visibility));
        let renewed: i64 = self.call(invocation).await?;
        Ok(renewed == 1)
    }

    async fn complete_job(&self, id: &JobId, token: u64, result: JobResult) -> Result<bool, JobStoreError> {
        let mut invocation = self.scripts.complete.prepare_invoke();
        invocation.key(self.job_key(id)).key(self.key("leases"));
        invocation.arg(id.as_str()).arg(token).arg(result.status).arg(result.body).arg(millis(RETENTION));
        let done: i64 = self.call(invocation).await?;
        Ok(done == 1)
    }

    async fn fail_job(&self, id: &JobId, token: u64, failure: Failure) -> Result<Option<JobState>, JobStoreError> {
        let mut invocation = self.scripts.fail.prepare_invoke();
        invocation.key(self.job_key(id)).key(self.key("leases")).key(self.key("delayed")).key(self.key("dead_letter"));
        let (retry, delay, counted) = match failure.retry {
            Retry::Never => (0, 0, false),
            Retry::After { delay_ms, counted } => (1, delay_ms, counted),
        };
        invocation.arg(id.as_str()).arg(token).arg(failure.error).arg(retry).arg(delay).arg(u8::from(counted));
        invocation.arg(millis(RETENTION));
        let state: String = self.call(invocation).await?;
        Ok(JobState::parse(&state))
    }

    async fn get_job(&self, id: &JobId) -> Result<Option<Job>, JobStoreError> {
        let mut conn = self.conn().await?;
        let mut command = redis::cmd("HGETALL");
        command.arg(self.job_key(id));
        let fetch = command.query_async::<Vec<String>>(&mut conn);
        let flat = tokio::time::timeout(self.timeout, fetch)
            .await
            .map_err(|_| JobStoreError("redis call timed out".into()))?
            .map_err(JobStoreError::from_display)?;
        if flat.is_empty() {
            return Ok(None);
        }
        parse_job(id.as_str(), &fields(flat)).map(Some)
    }

    async fn count_jobs(&self) -> Result<Counts, JobStoreError> {
        let mut conn = self.conn().await?;
        let mut pipe = redis::pipe();
        for name in ["ready", "delayed", "leases", "dead_letter"] {
            pipe.cmd("ZCARD").arg(self.key(name));
        }
        let fetch = pipe.query_async::<(u64, u64, u64, u64)>(&mut conn);
        let (queued, delayed, running, dead_letter) = tokio::time::timeout(self.timeout, fetch)
            .await
            .map_err(|_| JobStoreError("redis call timed out".into()))?
            .map_err(JobStoreError::from_display)?;
        Ok(Counts { queued, delayed, running, dead_letter })
    }
}

impl JobStore for RedisJobStore {
    fn submit(&self, job: NewJob) -> JobFuture<'_, Submitted> {
        Box::pin(self.submit_job(job))
    }

    fn submit_many(&self, jobs: Vec<NewJob>) -> JobFuture<'_, Vec<Submitted>> {
        // All at once on the multiplexed connection: pipelined, about one round trip's wait
        // for the lot; each is still its own atomic script.
        Box::pin(futures_util::future::try_join_all(jobs.into_iter().map(|job| self.submit_job(job))))
    }

    fn lease_next<'a>(&'a self, worker: &'a str, visibility: Duration) -> JobFuture<'a, LeaseOutcome> {
        Box::pin(self.lease_job(worker, visibility))
    }

    fn renew<'a>(&'a self, id: &'a JobId, token: u64, visibility: Duration) -> JobFuture<'a, bool> {
        Box::pin(self.renew_job(id, token, visibility))
    }

    fn complete<'a>(&'a self, id: &'a JobId, token: u64, result: JobResult) -> JobFuture<'a, bool> {
        Box::pin(self.complete_job(id, token, result))
    }

    fn fail<'a>(&'a self, id: &'a JobId, token: u64, failure: Failure) -> JobFuture<'a, Option<JobState>> {
        Box::pin(self.fail_job(id, token, failure))
    }

    fn get<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<Job>> {
        Box::pin(self.get_job(id))
    }

    fn counts(&self) -> JobFuture<'_, Counts> {
        Box::pin(self.count_jobs())
    }

    fn cancel<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<JobState>> {
        Box::pin(self.cancel_job(id))
    }

    fn put_doc(&self, doc: Doc) -> JobFuture<'_, ()> {
        Box::pin(self.put(doc))
    }

    fn get_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, Option<Vec<u8>>> {
        Box::pin(self.get_body(key))
    }

    fn delete_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, bool> {
        Box::pin(self.delete(key))
    }

    fn list_docs<'a>(&'a self, kind: &'a str, owner: &'a str) -> JobFuture<'a, Vec<Doc>> {
        Box::pin(self.list(kind, owner))
    }

    fn put_record(&self, doc: Doc) -> JobFuture<'_, u64> {
        Box::pin(self.put_kept(doc))
    }

    fn swap_record(&self, doc: Doc, expected: Option<Vec<u8>>) -> JobFuture<'_, Option<u64>> {
        Box::pin(self.swap_kept(doc, expected))
    }

    fn doc_version<'a>(&'a self, kind: &'a str) -> JobFuture<'a, u64> {
        Box::pin(self.version(kind))
    }

    fn epoch(&self) -> JobFuture<'_, Option<String>> {
        Box::pin(self.epoch())
    }

    fn records_since<'a>(&'a self, kind: &'a str, owner: &'a str, since: u64) -> JobFuture<'a, Changes> {
        Box::pin(self.changes(kind, owner, since))
    }

    fn add_usage<'a>(
        &'a self,
        batch: &'a str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> JobFuture<'a, bool> {
        Box::pin(self.add_rollups(batch, rows, keep))
    }

    fn usage_between(&self, first: Day, last: Day) -> JobFuture<'_, Vec<(UsageKey, UsageCounts)>> {
        Box::pin(self.rollups(first, last))
    }
}
