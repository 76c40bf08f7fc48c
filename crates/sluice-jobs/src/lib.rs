//! Durable async jobs for sluice: work that may wait is accepted now, run later through
//! the same admission path as a live request, and its answer kept for the owner to fetch.
//!
//! Layout: [`job`] (the types), [`machine`] (the state machine, pure), [`store`] (the
//! [`JobStore`] trait), [`embedded`] (one `redb` file, for the embedded deployment),
//! [`redis_store`] (Redis or Redis Cluster, for the distributed one),
//! [`doc`] (owner-scoped documents kept beside the jobs, for files and batch records),
//! [`usage`] (daily usage rollups kept beside them too), [`usage_book`] (the in-process
//! counts flushed to those rollups in batches applied once), [`batch_lines`] (a batch's
//! input and output files, line by line, pure).
//!
//! Failure semantics: every transition is one atomic commit (a redb write transaction, a
//! Redis script) on the store's clock. A job is leased with a visibility timeout and a
//! token; a worker renews its lease while the job runs; a lease that ends while the job
//! runs (its worker or process died) puts the job back in the queue — an *uncertain
//! rerun*, counted on the job, because the lost attempt may have reached the provider.
//! Without such a crash every job reaches the provider until it is recorded completed,
//! and is recorded at most once.

pub mod batch_lines;
pub mod doc;
pub mod embedded;
mod embedded_docs;
mod embedded_tables;
mod embedded_usage;
pub mod job;
pub mod machine;
pub mod redis_store;
pub mod store;
pub mod usage;
pub mod usage_book;

pub use doc::{Changes, Doc, DocKey};
pub use embedded::EmbeddedJobStore;
pub use job::{
    Counts, Endpoint, Failure, Job, JobId, JobResult, JobState, LeaseOutcome, Leased, NewJob, Retry, Submitted,
};
pub use redis_store::{RedisJobConfig, RedisJobStore};
pub use store::{JobFuture, JobStore, JobStoreError};
pub use usage::{COUNTERS, Day, Retention, USAGE_BATCH_TTL, UsageCounts, UsageKey, day_of_millis};
pub use usage_book::{UsageBook, UsageTag};
