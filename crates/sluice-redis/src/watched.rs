//! A memory store whose settlements and renewals a unit test watches (and may fail): the
//! one test double of [`QuotaStore`] the unit tests of this crate and of the gateway share
//! (built for tests, and with the `test-util` feature).

use std::time::Duration;

use sluice_quota::{
    Demand, Dimension, Grant, Limits, MemoryStore, QuotaStore, ReservationId, ReserveError, ScopeId, ScopeKey,
    ScopeSnapshot, Settlement, StoreError, StoreFuture,
};

/// What a test does with the calls it watches.
pub trait Hooks: Send + Sync + std::fmt::Debug {
    /// After a settlement was applied: its answer (an error as if the reply were lost).
    fn settled(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// A renewal of `ids` (the memory store keeps no heartbeat: nothing else happens).
    fn renewed(&self, ids: &[ReservationId]) {
        let _ = ids;
    }
}

/// [`MemoryStore`] with its settlements and renewals routed through `hooks`.
#[derive(Debug)]
pub struct Watched<H> {
    /// The store every call goes to.
    pub inner: MemoryStore,
    /// What the test does with the calls it watches.
    pub hooks: H,
}

impl<H: Hooks> QuotaStore for Watched<H> {
    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId {
        self.inner.register(key, limits)
    }
    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        self.inner.admit(demand)
    }
    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        self.inner.admit_first(demands)
    }
    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            self.inner.settle(id, settlement).await?;
            self.hooks.settled()
        })
    }
    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        self.inner.pause(scope, wait)
    }
    fn renew<'a>(&'a self, ids: &'a [ReservationId]) -> StoreFuture<'a, Result<(), StoreError>> {
        self.hooks.renewed(ids);
        Box::pin(std::future::ready(Ok(())))
    }
    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>> {
        self.inner.tighten(scope, dimension, remaining, reset)
    }
    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>> {
        self.inner.snapshot(id)
    }
}
