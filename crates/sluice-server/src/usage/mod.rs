//! Usage: what each settled request used and cost, counted in-process per day and group
//! (tenant, team, key, model profile, deployment) and written to the job store as daily
//! rollups every `[usage] flush_interval` and at shutdown, so that the request path never
//! waits for a store.
//!
//! Layout: [`book`] (the in-process counts and the flush), [`dates`] (UTC days and the
//! query's timestamps); the query itself (grouping, JSON and CSV for `GET /admin/usage`) is
//! the operator surface's (`sluice-admin`).
//!
//! Failure semantics: each flush is a batch with an id of its own (a random nonce of the
//! process and a number), which the store applies at most once. A batch whose write fails
//! is held aside as it was and written again, unchanged, first thing at the next interval
//! (what is counted meanwhile waits in the pending counts): a write that timed out but
//! landed is then not counted twice. A crash (or `kill -9`) loses what was counted since the
//! last flush (at most one interval's usage, and a held batch); a graceful shutdown flushes,
//! the held batch first. The pending counts and the held batch together are bounded
//! ([`book::MAX_PENDING`] groups); beyond it a new group is dropped and counted in
//! `sluice_usage_dropped_total`.

pub mod book;
pub mod dates;

pub use book::{UsageBook, UsageTag, flush, spawn_flush};
