//! Usage: what each settled request used and cost, counted in-process per day and group
//! (tenant, team, key, model profile, deployment) and written to the job store as daily
//! rollups every `[usage] flush_interval` and at shutdown, so that the request path never
//! waits for a store.
//!
//! Layout: [`sluice_jobs::usage_book`] (the in-process counts and the flush),
//! [`spawn_flush`] here (the gateway's flushing task); the query (its dates, grouping, JSON
//! and CSV for `GET /admin/usage`) is the operator surface's (`sluice-admin`).
//!
//! Failure semantics: each flush is a batch with an id of its own (a random nonce of the
//! process and a number), which the store applies at most once. A batch whose write fails
//! is held aside as it was and written again, unchanged, first thing at the next interval
//! (what is counted meanwhile waits in the pending counts): a write that timed out but
//! landed is then not counted twice. A crash (or `kill -9`) loses what was counted since the
//! last flush (at most one interval's usage, and a held batch); a graceful shutdown flushes,
//! the held batch first. The pending counts and the held batch together are bounded
//! ([`sluice_jobs::usage_book::MAX_PENDING`] groups); beyond it a new group is dropped and
//! counted in `sluice_usage_dropped_total`.

use std::sync::atomic::Ordering;

pub use sluice_jobs::usage_book::{UsageBook, UsageTag, flush};

/// Flushes the gateway's usage book every `[usage] flush_interval` until shutdown begins,
/// then once more. `None` without a job store (usage is then only counted, not kept).
pub fn spawn_flush(state: &crate::AppState) -> Option<tokio::task::JoinHandle<()>> {
    let jobs = state.jobs.clone()?;
    let state = state.clone();
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            let gateway = state.current();
            let draining = state.draining.load(Ordering::Relaxed);
            let result =
                flush(&gateway.services.usage, jobs.store.as_ref(), gateway.usage_settings.retention_days).await;
            if result.is_err() != failing {
                failing = result.is_err();
                match result {
                    Err(e) => tracing::warn!(error = %e, "usage cannot be written to the store; kept to retry"),
                    Ok(()) => tracing::info!("usage written to the store again"),
                }
            }
            if draining {
                return;
            }
            tokio::time::sleep(gateway.usage_settings.flush_interval).await;
        }
    }))
}
