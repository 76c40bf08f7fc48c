//! The embedded default store: a [`Ledger`] behind a mutex, on an injected clock.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::bucket::{Claimer, Share};
use crate::clock::{Clock, Nanos};
use crate::decision::{Demand, Grant};
use crate::ledger::{Ledger, ScopeSnapshot};
use crate::limit::{Cost, Dimension, Limits, Settlement};
use crate::scope::{ReservationId, ScopeId, ScopeKey};
use crate::store::{QuotaStore, ReserveError, StoreError, StoreFuture, soonest};

/// In-process quota state. Decisions take a few hundred nanoseconds under the lock.
#[derive(Debug)]
pub struct MemoryStore {
    ledger: Mutex<Ledger>,
    clock: Arc<dyn Clock>,
}

impl MemoryStore {
    /// An empty store reading time from `clock`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { ledger: Mutex::new(Ledger::new()), clock }
    }

    /// Reserves synchronously (the memory store never waits).
    ///
    /// # Errors
    /// The rejection, as [`ReserveError::Rejected`].
    pub fn reserve_now(&self, path: &[ScopeId], cost: Cost, lease: Duration) -> Result<Grant, ReserveError> {
        self.reserve_share_now(path, cost, lease, Share::FULL)
    }

    /// Reserves synchronously with a share of shared bursts.
    ///
    /// # Errors
    /// The rejection, as [`ReserveError::Rejected`].
    pub fn reserve_share_now(
        &self,
        path: &[ScopeId],
        cost: Cost,
        lease: Duration,
        share: Share,
    ) -> Result<Grant, ReserveError> {
        let now = self.clock.now();
        self.ledger.lock().reserve_share(now, path, cost, lease, share).map_err(ReserveError::Rejected)
    }

    /// Admits a [`Demand`] synchronously.
    ///
    /// # Errors
    /// The rejection, as [`ReserveError::Rejected`].
    pub fn admit_now(&self, demand: &Demand<'_>) -> Result<Grant, ReserveError> {
        let now = self.clock.now();
        self.ledger.lock().admit(now, demand).map_err(ReserveError::Rejected)
    }

    /// Admits the first of `demands` that passes, synchronously, under one lock
    /// ([`Ledger::admit_first`]): its index and grant.
    ///
    /// # Errors
    /// The soonest refusal when none passes ([`crate::store::soonest`]).
    pub fn admit_first_now(&self, demands: &[Demand<'_>]) -> Result<(usize, Grant), ReserveError> {
        let now = self.clock.now();
        let decided = self.ledger.lock().admit_first(now, demands);
        decided.map_err(|refusals| soonest(refusals.into_iter().map(ReserveError::Rejected)))
    }

    /// Settles synchronously.
    pub fn settle_now(&self, id: ReservationId, settlement: Settlement) {
        let now = self.clock.now();
        self.ledger.lock().settle(now, id, settlement);
    }

    /// Debits `cost` from every bucket of `path` unconditionally ([`Ledger::charge`]).
    pub fn charge_now(&self, path: &[ScopeId], cost: Cost) {
        let now = self.clock.now();
        self.ledger.lock().charge(now, path, cost);
    }

    /// The dimension of each of a scope's rate limits, in snapshot order.
    #[must_use]
    pub fn rate_dimensions(&self, id: ScopeId) -> Vec<Dimension> {
        self.ledger.lock().rate_dimensions(id)
    }

    /// Every registered scope's id.
    #[must_use]
    pub fn scope_ids(&self) -> Vec<ScopeId> {
        self.ledger.lock().scope_ids().collect()
    }

    /// Refunds expired leases now; returns how many.
    pub fn expire_now(&self) -> usize {
        let now = self.clock.now();
        self.ledger.lock().expire(now)
    }

    /// Reservations still open.
    #[must_use]
    pub fn open_reservations(&self) -> usize {
        self.ledger.lock().open_reservations()
    }
}

impl QuotaStore for MemoryStore {
    fn reads_in_process(&self) -> bool {
        true
    }

    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId {
        let now = self.clock.now();
        self.ledger.lock().register(now, key, limits)
    }

    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        let result = self.admit_now(&demand);
        Box::pin(std::future::ready(result))
    }

    /// Every demand decided under one lock of the ledger.
    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        let result = self.admit_first_now(&demands);
        Box::pin(std::future::ready(result))
    }

    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>> {
        self.settle_now(id, settlement);
        Box::pin(std::future::ready(Ok(())))
    }

    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        let until = self.clock.now().after(wait);
        self.ledger.lock().pause(scope, until);
        Box::pin(std::future::ready(Ok(())))
    }

    fn hold(&self, scope: ScopeId, held: bool) -> StoreFuture<'_, Result<(), StoreError>> {
        self.ledger.lock().hold(scope, held);
        Box::pin(std::future::ready(Ok(())))
    }

    fn open_reservations(&self) -> Option<u64> {
        Some(u64::try_from(self.ledger.lock().open_reservations()).unwrap_or(u64::MAX))
    }

    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>> {
        let now = self.clock.now();
        self.ledger.lock().tighten(now, scope, dimension, remaining, reset);
        Box::pin(std::future::ready(Ok(())))
    }

    fn sent(&self, scope: ScopeId, cost: Cost, since: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        let now = self.clock.now();
        let at = Nanos(now.0.saturating_sub(crate::clock::duration_ns(since)));
        self.ledger.lock().sent(scope, cost, at);
        Box::pin(std::future::ready(Ok(())))
    }

    fn withdraw<'a>(&'a self, path: &'a [ScopeId], by: Claimer) -> StoreFuture<'a, Result<(), StoreError>> {
        self.ledger.lock().withdraw(path, by);
        Box::pin(std::future::ready(Ok(())))
    }

    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>> {
        let now = self.clock.now();
        let snapshot = self.ledger.lock().snapshot(now, id);
        Box::pin(std::future::ready(Ok(snapshot)))
    }

    /// All of `ids` under one lock of the ledger (a caller's rate-limit headers read three
    /// scopes per request).
    fn snapshots<'a>(&'a self, ids: &'a [ScopeId]) -> StoreFuture<'a, Result<Vec<Option<ScopeSnapshot>>, StoreError>> {
        let now = self.clock.now();
        let ledger = self.ledger.lock();
        let snapshots = ids.iter().map(|&id| ledger.snapshot(now, id)).collect();
        drop(ledger);
        Box::pin(std::future::ready(Ok(snapshots)))
    }
}
