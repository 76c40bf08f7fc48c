//! Settlement that cannot be forgotten: a guard that settles on drop.

use std::sync::Arc;

use futures_util::FutureExt as _;
use prometheus_client::metrics::counter::Counter;
use sluice_quota::{QuotaStore, ReservationId, Settlement};
use tokio_util::task::TaskTracker;

use crate::queue::DeploymentQueue;

/// Owns a reservation until it is settled. Dropped unsettled (the client went away, the
/// handler failed), it settles with the fallback figure it holds.
#[derive(Debug)]
pub struct SettleGuard {
    store: Arc<dyn QuotaStore>,
    id: Option<ReservationId>,
    fallback: Settlement,
    used: Counter,
    queue: Arc<DeploymentQueue>,
    background: TaskTracker,
}

impl SettleGuard {
    /// Guards `id`, settling with `fallback` if nothing better is known.
    /// Each settlement adds its used tokens to `used` and tells the deployment's `queue`
    /// that capacity may have come back. A settlement that cannot finish at once runs on
    /// in `background`, which shutdown waits for.
    #[must_use]
    pub fn new(
        store: Arc<dyn QuotaStore>,
        id: ReservationId,
        fallback: Settlement,
        used: Counter,
        queue: Arc<DeploymentQueue>,
        background: TaskTracker,
    ) -> Self {
        Self { store, id: Some(id), fallback, used, queue, background }
    }

    /// Settles now with `settlement`.
    pub fn settle(mut self, settlement: Settlement) {
        self.fallback = settlement;
        self.finish();
    }

    fn finish(&mut self) {
        let Some(id) = self.id.take() else { return };
        let store = Arc::clone(&self.store);
        let settlement = self.fallback;
        self.used.inc_by(settlement.used.input_tokens.saturating_add(settlement.used.output_tokens));
        let queue = Arc::clone(&self.queue);
        let mut settling = Box::pin(async move {
            if let Err(e) = store.settle(id, settlement).await {
                tracing::warn!(error = %e, "settlement failed; the lease will expire instead");
            }
            queue.capacity_returned();
        });
        // The memory store settles synchronously; a remote store's call goes on in a task
        // (the same future: it may already have been sent), tracked so shutdown waits for it.
        if (&mut settling).now_or_never().is_none() {
            self.background.spawn(settling);
        }
    }
}

impl Drop for SettleGuard {
    fn drop(&mut self) {
        self.finish();
    }
}
