//! Usage: what each settled request used and cost, counted in-process per day and group
//! (tenant, team, key, model profile, deployment) and written to the job store as daily
//! rollups every `[usage] flush_interval` and at shutdown, so that the request path never
//! waits for a store.
//!
//! Layout: [`book`] (the in-process counts and the flush), [`dates`] (UTC days and the
//! query's timestamps), [`query`] (grouping, JSON and CSV for `GET /admin/usage`).
//!
//! Failure semantics: a flush that fails puts its counts back and is tried again at the
//! next interval; a crash (or `kill -9`) loses what was counted since the last flush (at
//! most one interval's usage); a graceful shutdown flushes. The pending counts are bounded
//! ([`book::MAX_PENDING`] groups); beyond it a new group is dropped and counted in
//! `sluice_usage_dropped_total`.

pub mod book;
pub mod dates;
pub mod query;

pub use book::{UsageBook, UsageTag, flush, spawn_flush};

#[cfg(test)]
mod query_tests;
