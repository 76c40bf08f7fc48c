//! The [`JobStore`] trait: one contract, an embedded and a Redis implementation, one
//! conformance suite.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::doc::{Changes, Doc, DocKey};
use crate::job::{Counts, Failure, Job, JobId, JobResult, JobState, LeaseOutcome, NewJob, Submitted};
use crate::usage::{Day, Retention, UsageCounts, UsageKey};

/// A store call's future.
pub type JobFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, JobStoreError>> + Send + 'a>>;

/// A store that could not answer (IO, Redis unreachable, a corrupt record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job store: {0}")]
pub struct JobStoreError(pub String);

impl JobStoreError {
    /// Wraps any displayable error.
    pub fn from_display(e: impl std::fmt::Display) -> Self {
        Self(e.to_string())
    }
}

/// Durable job state. Every transition is atomic and on the store's own clock; a lease
/// token guards every transition of a running job, so a worker whose lease expired can no
/// longer change it.
pub trait JobStore: Send + Sync + std::fmt::Debug {
    /// Stores `job` as queued, or, when its tenant already submitted its idempotency key,
    /// returns that job unchanged (`created: false`).
    fn submit(&self, job: NewJob) -> JobFuture<'_, Submitted>;

    /// Submits `jobs` in order, as [`submit`](Self::submit) does each, in as few commits or
    /// round trips as the store allows (a batch of many requests must not pay one durable
    /// commit per line). Not atomic as a whole: on an error, some may have been stored.
    fn submit_many(&self, jobs: Vec<NewJob>) -> JobFuture<'_, Vec<Submitted>> {
        Box::pin(async move {
            let mut submitted = Vec::with_capacity(jobs.len());
            for job in jobs {
                submitted.push(self.submit(job).await?);
            }
            Ok(submitted)
        })
    }

    /// Makes due delayed jobs ready, takes back running jobs whose lease expired, then
    /// leases the first ready job (lowest priority value, then oldest) to `worker` for
    /// `visibility`. A job whose lease is still valid is never leased again.
    fn lease_next<'a>(&'a self, worker: &'a str, visibility: Duration) -> JobFuture<'a, LeaseOutcome>;

    /// Extends the lease `token` by `visibility` from now. `false`: the lease is lost.
    fn renew<'a>(&'a self, id: &'a JobId, token: u64, visibility: Duration) -> JobFuture<'a, bool>;

    /// Records the answer. `false`: the lease is lost and nothing was recorded.
    fn complete<'a>(&'a self, id: &'a JobId, token: u64, result: JobResult) -> JobFuture<'a, bool>;

    /// Records a failed attempt; the new state, or `None` when the lease is lost.
    fn fail<'a>(&'a self, id: &'a JobId, token: u64, failure: Failure) -> JobFuture<'a, Option<JobState>>;

    /// The job, if it exists.
    fn get<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<Job>>;

    /// Jobs per state.
    fn counts(&self) -> JobFuture<'_, Counts>;

    /// Cancels a job that has not started: a queued or delayed job becomes `failed` with
    /// the error `cancelled` (and is retired like any finished job). Returns the job's
    /// state afterwards (unchanged when it was running or finished), `None` when unknown.
    fn cancel<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<JobState>>;

    /// Stores `doc`, replacing the one under its key (which keeps its place in the
    /// listing order); it is kept for [`RETENTION`](crate::redis_store::RETENTION) after
    /// this write.
    fn put_doc(&self, doc: Doc) -> JobFuture<'_, ()>;

    /// The document's body, if it exists for this owner.
    fn get_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, Option<Vec<u8>>>;

    /// Removes the document; `false` when there was none.
    fn delete_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, bool>;

    /// The owner's documents of `kind`, newest (by first write) first.
    fn list_docs<'a>(&'a self, kind: &'a str, owner: &'a str) -> JobFuture<'a, Vec<Doc>>;

    /// Stores `doc` as a *record*: like [`put_doc`](Self::put_doc), but kept until it is
    /// deleted (never retired), and in the same commit the version of its `kind` grows by
    /// one. Returns that version: readers poll [`doc_version`](Self::doc_version) to learn
    /// that some record of the kind changed.
    fn put_record(&self, doc: Doc) -> JobFuture<'_, u64>;

    /// [`put_record`](Self::put_record), only when the stored body is `expected` (`None`:
    /// no document of that key may exist), checked and written atomically. Returns the new
    /// version, or `None` (nothing written) when the stored document is not the one
    /// expected: a writer that read a record before another writer changed it loses,
    /// instead of undoing that change.
    fn swap_record(&self, doc: Doc, expected: Option<Vec<u8>>) -> JobFuture<'_, Option<u64>>;

    /// The version of `kind`'s records: 0 before the first [`put_record`](Self::put_record).
    fn doc_version<'a>(&'a self, kind: &'a str) -> JobFuture<'a, u64>;

    /// The id of the data the store holds: set once when the store is first written, and
    /// different after the store lost everything (a Redis restarted without persistence or
    /// flushed), so that a reader can tell a fresh store from the one it read before and
    /// read everything again rather than trust version counters that started over. `None`
    /// for a store that cannot lose its data under a running instance (the embedded file).
    fn epoch(&self) -> JobFuture<'_, Option<String>> {
        Box::pin(std::future::ready(Ok(None)))
    }

    /// The records of `kind` written after version `since` (as [`doc_version`](Self::doc_version)
    /// counts), each once with its body now, and the version they bring the reader to, read
    /// at one instant. `docs` is `None` when the store cannot tell which changed (it keeps
    /// no log of them, or not that far back): the reader lists them all.
    fn records_since<'a>(&'a self, kind: &'a str, owner: &'a str, since: u64) -> JobFuture<'a, Changes> {
        let _ = (owner, since);
        Box::pin(async move { Ok(Changes { version: self.doc_version(kind).await?, docs: None }) })
    }

    /// Adds `rows` to their daily usage rollups, as batch `batch`, at most once: in one
    /// commit or one atomic script that first records the batch's id, and does nothing when
    /// the id is already recorded (a retry of a write that was applied though its caller saw
    /// an error). Ids are remembered for [`USAGE_BATCH_TTL`](crate::usage::USAGE_BATCH_TTL).
    /// Forgets the days `keep` no longer covers. True when the rows were added now, false
    /// when the batch had been applied before.
    fn add_usage<'a>(
        &'a self,
        batch: &'a str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> JobFuture<'a, bool>;

    /// The usage rollups of the days from `first` to `last`, both included.
    fn usage_between(&self, first: Day, last: Day) -> JobFuture<'_, Vec<(UsageKey, UsageCounts)>>;
}

/// `d` in whole milliseconds, at least 1.
#[must_use]
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
