//! [`EmbeddedJobStore`]: jobs in one `redb` file, for the embedded (single-process)
//! deployment. Every state change is one write transaction, committed durably (fsync)
//! before the call returns.
//!
//! Tables:
//!
//! ```text
//! jobs          id                 -> job (JSON)
//! ready         (priority, seq)    -> id     lowest priority value first, then oldest
//! delayed       (not_before, seq)  -> id     by the store time it may run again (ms)
//! leases        (lease_until, seq) -> id     running jobs by lease end (ms)
//! dead_letter   seq                -> id
//! finished      (finished_at, seq) -> id     completed and failed jobs, retired after RETENTION
//! idempotency   (tenant, key)      -> id
//! meta          "seq" | "clock"    -> u64    submission counter; the store's clock high-water mark
//! ```
//!
//! Documents (see [`crate::doc`]) live in three more tables, described in `embedded_docs`,
//! and the daily usage rollups (see [`crate::usage`]) in three, described in `embedded_usage`;
//! the job tables and the changes that keep them in step are in `embedded_tables`.
//!
//! Time: the store's clock is the process's monotonic clock plus the high-water mark of
//! the previous run, so it never goes backwards across restarts (time while the process
//! is down does not count: a delay resumes where it stopped).
//!
//! Recovery: redb lets one process open the file for writing, so whatever is `running`
//! when the store is opened belonged to a process that is gone. Opening marks those
//! leases expired; the next `lease_next` takes them back (and reports them as recovered).
//!
//! Answers first: a commit waits its turn behind every other write and for the disk, so a
//! provider's answer is first appended to a journal beside the file (`<file>.answers`, one
//! JSON line each, written before `complete` returns to the caller's task, no fsync: it
//! survives the process, which is what a crash takes). Opening completes every job the
//! journal holds an answer for before anything else; a job answered just before a
//! `kill -9` is then completed once instead of run again. The journal is emptied whenever
//! everything in it is committed and it has grown past [`JOURNAL_LIMIT`].

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use redb::{Database, ReadableDatabase as _, ReadableTable as _, ReadableTableMetadata as _, TableDefinition};
use sluice_quota::Clock;

use crate::doc::{Changes, Doc, DocKey};
use crate::embedded_docs;
use crate::embedded_tables::{
    DEAD, DELAYED, FINISHED, IDEMPOTENCY, JOBS, LEASES, META, READY, Txn, apply_lease_change, load, open_tables,
    promote_due, recover_expired, save,
};
use crate::embedded_usage;
use crate::job::{Counts, Failure, Job, JobId, JobResult, JobState, LeaseOutcome, Leased, NewJob, Submitted};
use crate::machine;
use crate::store::{JobFuture, JobStore, JobStoreError, millis};
use crate::usage::{Day, Retention, UsageCounts, UsageKey};

/// Page cache of the redb file. The hot pages are those of queued and running jobs and
/// of the table heads; finished jobs are written once and read back rarely, so a small
/// cache serves the queue and reads beyond it come from the operating system's file cache.
/// The cache fills with finished jobs' pages and then stays at this size: 8 MiB is reached
/// after a few thousand jobs, so a gateway's memory settles early (redb's default would let
/// it grow to 1 GiB).
const CACHE_BYTES: usize = 8 << 20;

/// Size past which the answer journal is emptied once everything in it is committed.
pub const JOURNAL_LIMIT: u64 = 1 << 20;

fn db_error(e: impl Into<redb::Error>) -> JobStoreError {
    JobStoreError(format!("redb: {}", e.into()))
}

/// Jobs in a local `redb` file.
#[derive(Debug, Clone)]
pub struct EmbeddedJobStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: Database,
    clock: Arc<dyn Clock>,
    base_ms: u64,
    journal: parking_lot::Mutex<Journal>,
}

/// The answer journal and how many of its answers are not committed yet.
#[derive(Debug)]
struct Journal {
    file: std::fs::File,
    uncommitted: usize,
}

/// One journal line: a provider's answer for a job under a lease.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Answer {
    id: String,
    token: u64,
    result: JobResult,
}

fn journal_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".answers");
    std::path::PathBuf::from(name)
}

impl EmbeddedJobStore {
    /// Opens (or creates) the store at `path`; running jobs of a previous process become
    /// recoverable at once.
    ///
    /// # Errors
    /// When the file cannot be opened (another process holds it, it is not a redb file).
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Self, JobStoreError> {
        let db = Database::builder().set_cache_size(CACHE_BYTES).create(path).map_err(db_error)?;
        let journal_at = journal_path(path);
        let answers = read_journal(&journal_at)?;
        let txn = db.begin_write().map_err(db_error)?;
        let base_ms = open_tables(&txn).map_err(db_error)?;
        for answer in answers {
            let id = JobId(answer.id);
            apply_lease_change(&txn, &id, base_ms, |job| machine::complete(job, answer.token, answer.result))
                .map_err(db_error)?;
        }
        txn.commit().map_err(db_error)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_at)
            .map_err(JobStoreError::from_display)?;
        file.set_len(0).map_err(JobStoreError::from_display)?;
        let journal = parking_lot::Mutex::new(Journal { file, uncommitted: 0 });
        Ok(Self { inner: Arc::new(Inner { db, clock, base_ms, journal }) })
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Inner) -> Result<T, JobStoreError> + Send + 'static,
    ) -> Result<T, JobStoreError> {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner)).await.map_err(JobStoreError::from_display)?
    }
}

/// The answers a journal holds; a line cut short by a crash is skipped.
fn read_journal(path: &Path) -> Result<Vec<Answer>, JobStoreError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes.split(|&b| b == b'\n').filter_map(|line| serde_json::from_slice(line).ok()).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(JobStoreError::from_display(e)),
    }
}

impl Inner {
    fn now_ms(&self) -> u64 {
        self.base_ms.saturating_add(self.clock.now().0 / 1_000_000)
    }

    /// One durable write transaction on the store's clock.
    fn write<T>(&self, work: impl FnOnce(&Txn, u64) -> Result<T, redb::Error>) -> Result<T, JobStoreError> {
        let txn = self.db.begin_write().map_err(db_error)?;
        let now = self.now_ms();
        let out = work(&txn, now).map_err(db_error)?;
        let mut meta = txn.open_table(META).map_err(db_error)?;
        meta.insert("clock", now).map_err(db_error)?;
        drop(meta);
        txn.commit().map_err(db_error)?;
        Ok(out)
    }

    /// Appends an answer to the journal; false (and a warning) when that failed, the
    /// commit then being the only record.
    fn journal_answer(&self, id: &JobId, token: u64, result: &JobResult) -> bool {
        use std::io::Write as _;
        let answer = Answer { id: id.as_str().to_owned(), token, result: result.clone() };
        let Ok(mut line) = serde_json::to_vec(&answer) else { return false };
        line.push(b'\n');
        let mut journal = self.journal.lock();
        journal.uncommitted += 1;
        if let Err(e) = journal.file.write_all(&line) {
            journal.uncommitted -= 1;
            tracing::warn!(error = %e, "job answer journal write failed");
            return false;
        }
        true
    }

    /// One journaled answer is committed (or refused); empties the journal when it holds
    /// nothing uncommitted and has grown past the limit.
    fn answer_committed(&self) {
        let mut journal = self.journal.lock();
        journal.uncommitted = journal.uncommitted.saturating_sub(1);
        if journal.uncommitted == 0
            && journal.file.metadata().is_ok_and(|m| m.len() > JOURNAL_LIMIT)
            && let Err(e) = journal.file.set_len(0)
        {
            tracing::warn!(error = %e, "emptying the job answer journal failed");
        }
    }

    /// Stores `news` in one write transaction (one durable commit), in order.
    fn submit(&self, news: Vec<NewJob>) -> Result<Vec<Submitted>, JobStoreError> {
        self.write(|txn, _| {
            let mut jobs = txn.open_table(JOBS)?;
            let mut idempotency = txn.open_table(IDEMPOTENCY)?;
            let mut meta = txn.open_table(META)?;
            let mut ready = txn.open_table(READY)?;
            let mut out = Vec::with_capacity(news.len());
            for new in news {
                if let Some(key) = &new.idempotency_key {
                    let known = idempotency.get((new.tenant.as_str(), key.as_str()))?.map(|v| v.value().to_owned());
                    if let Some(job) = known.map(|id| load(&jobs, &id)).transpose()?.flatten() {
                        out.push(Submitted { job, created: false });
                        continue;
                    }
                    idempotency.insert((new.tenant.as_str(), key.as_str()), new.id.as_str())?;
                }
                let seq = meta.get("seq")?.map_or(0, |v| v.value()).saturating_add(1);
                meta.insert("seq", seq)?;
                let job = Job::new(new, seq);
                save(&mut jobs, &job)?;
                ready.insert(machine::ready_key(&job), job.id.as_str())?;
                out.push(Submitted { job, created: true });
            }
            Ok(out)
        })
    }

    /// Whether a lease call has anything to do (a read, so idle polling never writes).
    fn has_work(&self) -> Result<bool, JobStoreError> {
        let now = self.now_ms();
        let txn = self.db.begin_read().map_err(db_error)?;
        let ready = !txn.open_table(READY).map_err(db_error)?.is_empty().map_err(db_error)?;
        let first = |def: TableDefinition<(u64, u64), &str>| -> Result<bool, JobStoreError> {
            let table = txn.open_table(def).map_err(db_error)?;
            let head = table.first().map_err(db_error)?;
            Ok(head.is_some_and(|(k, _)| k.value().0 <= now))
        };
        Ok(ready || first(DELAYED)? || first(LEASES)?)
    }

    fn lease_next(&self, worker: &str, visibility: Duration) -> Result<LeaseOutcome, JobStoreError> {
        if !self.has_work()? {
            return Ok(LeaseOutcome::default());
        }
        self.write(|txn, now| {
            let mut jobs = txn.open_table(JOBS)?;
            let mut ready = txn.open_table(READY)?;
            promote_due(&mut jobs, &mut ready, &mut txn.open_table(DELAYED)?, now)?;
            let mut leases = txn.open_table(LEASES)?;
            let mut outcome = recover_expired(&mut jobs, &mut ready, &mut leases, &mut txn.open_table(DEAD)?, now)?;
            let Some(id) = ready.pop_first()?.map(|(_, id)| id.value().to_owned()) else { return Ok(outcome) };
            let Some(mut job) = load(&jobs, &id)? else { return Ok(outcome) };
            let token = machine::lease(&mut job, worker, now, millis(visibility));
            leases.insert((job.lease_until, job.seq), id.as_str())?;
            save(&mut jobs, &job)?;
            outcome.leased = Some(Leased { job, token });
            Ok(outcome)
        })
    }

    /// Applies `change` to a running job held with `token`; `None` when the lease is lost.
    fn with_lease<T>(
        &self,
        id: &JobId,
        change: impl FnOnce(&mut Job, u64) -> Result<T, machine::Stale>,
    ) -> Result<Option<T>, JobStoreError> {
        self.write(|txn, now| apply_lease_change(txn, id, now, |job| change(job, now)))
    }

    fn get(&self, id: &JobId) -> Result<Option<Job>, JobStoreError> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let jobs = txn.open_table(JOBS).map_err(db_error)?;
        load(&jobs, id.as_str()).map_err(db_error)
    }

    fn cancel(&self, id: &JobId) -> Result<Option<JobState>, JobStoreError> {
        self.write(|txn, now| {
            let mut jobs = txn.open_table(JOBS)?;
            let Some(mut job) = load(&jobs, id.as_str())? else { return Ok(None) };
            let (ready_at, delayed_at) = (machine::ready_key(&job), (job.not_before, job.seq));
            let was = job.state;
            if !machine::cancel(&mut job) {
                return Ok(Some(job.state));
            }
            match was {
                JobState::Queued => drop(txn.open_table(READY)?.remove(ready_at)?),
                _ => drop(txn.open_table(DELAYED)?.remove(delayed_at)?),
            }
            txn.open_table(FINISHED)?.insert((now, job.seq), id.as_str())?;
            save(&mut jobs, &job)?;
            Ok(Some(job.state))
        })
    }

    fn read<T>(&self, work: impl FnOnce(&redb::ReadTransaction) -> Result<T, redb::Error>) -> Result<T, JobStoreError> {
        let txn = self.db.begin_read().map_err(db_error)?;
        work(&txn).map_err(db_error)
    }

    fn counts(&self) -> Result<Counts, JobStoreError> {
        let txn = self.db.begin_read().map_err(db_error)?;
        let ready = txn.open_table(READY).and_then(|t| Ok(t.len()?)).map_err(db_error)?;
        let delayed = txn.open_table(DELAYED).and_then(|t| Ok(t.len()?)).map_err(db_error)?;
        let running = txn.open_table(LEASES).and_then(|t| Ok(t.len()?)).map_err(db_error)?;
        let dead_letter = txn.open_table(DEAD).and_then(|t| Ok(t.len()?)).map_err(db_error)?;
        Ok(Counts { queued: ready, delayed, running, dead_letter })
    }
}

impl JobStore for EmbeddedJobStore {
    fn submit(&self, job: NewJob) -> JobFuture<'_, Submitted> {
        Box::pin(self.run(move |inner| {
            let mut submitted = inner.submit(vec![job])?;
            submitted.pop().ok_or_else(|| JobStoreError("a submission returned nothing".into()))
        }))
    }

    fn submit_many(&self, jobs: Vec<NewJob>) -> JobFuture<'_, Vec<Submitted>> {
        Box::pin(self.run(move |inner| inner.submit(jobs)))
    }

    fn lease_next<'a>(&'a self, worker: &'a str, visibility: Duration) -> JobFuture<'a, LeaseOutcome> {
        let worker = worker.to_owned();
        Box::pin(self.run(move |inner| inner.lease_next(&worker, visibility)))
    }

    fn renew<'a>(&'a self, id: &'a JobId, token: u64, visibility: Duration) -> JobFuture<'a, bool> {
        let id = id.clone();
        Box::pin(self.run(move |inner| {
            let renewed = inner.with_lease(&id, |job, now| machine::renew(job, token, now, millis(visibility)))?;
            Ok(renewed.is_some())
        }))
    }

    fn complete<'a>(&'a self, id: &'a JobId, token: u64, result: JobResult) -> JobFuture<'a, bool> {
        let id = id.clone();
        // The answer reaches the journal now, before the commit waits its turn.
        let journaled = self.inner.journal_answer(&id, token, &result);
        Box::pin(self.run(move |inner| {
            let done = inner.with_lease(&id, |job, _| machine::complete(job, token, result));
            if journaled {
                inner.answer_committed();
            }
            Ok(done?.is_some())
        }))
    }

    fn fail<'a>(&'a self, id: &'a JobId, token: u64, failure: Failure) -> JobFuture<'a, Option<JobState>> {
        let id = id.clone();
        Box::pin(self.run(move |inner| inner.with_lease(&id, |job, now| machine::fail(job, token, &failure, now))))
    }

    fn get<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<Job>> {
        let id = id.clone();
        Box::pin(self.run(move |inner| inner.get(&id)))
    }

    fn counts(&self) -> JobFuture<'_, Counts> {
        Box::pin(self.run(Inner::counts))
    }

    fn cancel<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<JobState>> {
        let id = id.clone();
        Box::pin(self.run(move |inner| inner.cancel(&id)))
    }

    fn put_doc(&self, doc: Doc) -> JobFuture<'_, ()> {
        Box::pin(self.run(move |inner| inner.write(|txn, now| embedded_docs::put(txn, now, &doc))))
    }

    fn get_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, Option<Vec<u8>>> {
        let (kind, owner, id) = (key.kind.to_owned(), key.owner.to_owned(), key.id.to_owned());
        Box::pin(self.run(move |inner| {
            inner.read(|txn| embedded_docs::get(txn, DocKey { kind: &kind, owner: &owner, id: &id }))
        }))
    }

    fn delete_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, bool> {
        let (kind, owner, id) = (key.kind.to_owned(), key.owner.to_owned(), key.id.to_owned());
        Box::pin(self.run(move |inner| {
            inner.write(|txn, _| embedded_docs::delete(txn, DocKey { kind: &kind, owner: &owner, id: &id }))
        }))
    }

    fn list_docs<'a>(&'a self, kind: &'a str, owner: &'a str) -> JobFuture<'a, Vec<Doc>> {
        let (kind, owner) = (kind.to_owned(), owner.to_owned());
        Box::pin(self.run(move |inner| inner.read(|txn| embedded_docs::list(txn, &kind, &owner))))
    }

    fn put_record(&self, doc: Doc) -> JobFuture<'_, u64> {
        Box::pin(self.run(move |inner| inner.write(|txn, now| embedded_docs::put_record(txn, now, &doc))))
    }

    fn swap_record(&self, doc: Doc, expected: Option<Vec<u8>>) -> JobFuture<'_, Option<u64>> {
        Box::pin(
            self.run(move |inner| {
                inner.write(|txn, now| embedded_docs::swap_record(txn, now, &doc, expected.as_deref()))
            }),
        )
    }

    fn doc_version<'a>(&'a self, kind: &'a str) -> JobFuture<'a, u64> {
        let kind = kind.to_owned();
        Box::pin(self.run(move |inner| inner.read(|txn| embedded_docs::version(txn, &kind))))
    }

    fn records_since<'a>(&'a self, kind: &'a str, owner: &'a str, since: u64) -> JobFuture<'a, Changes> {
        let (kind, owner) = (kind.to_owned(), owner.to_owned());
        Box::pin(self.run(move |inner| inner.read(|txn| embedded_docs::since(txn, &kind, &owner, since))))
    }

    fn add_usage<'a>(
        &'a self,
        batch: &'a str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> JobFuture<'a, bool> {
        let batch = batch.to_owned();
        Box::pin(self.run(move |inner| inner.write(|txn, now| embedded_usage::add(txn, now, &batch, &rows, keep))))
    }

    fn usage_between(&self, first: Day, last: Day) -> JobFuture<'_, Vec<(UsageKey, UsageCounts)>> {
        Box::pin(self.run(move |inner| inner.read(|txn| embedded_usage::between(txn, first, last))))
    }
}
