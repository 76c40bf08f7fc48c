//! What the gateway does when Redis cannot be reached: refuse (`fail_closed`) or limit
//! locally at this instance's share of every limit (`fail_open_local`). Transitions are
//! logged once each way and counted; Redis is probed again at most once a second while
//! it is away, so requests do not each wait out a timeout.
//!
//! `fail_open_local` hands out no extra burst at either transition:
//! - while Redis is healthy, every admission it grants is also charged to the local
//!   limiter (a shadow account at this instance's share), so when Redis goes away the
//!   local buckets hold what this instance has recently used, not a fresh burst;
//! - when Redis comes back its buckets are full (restarted) or refilled (time passed)
//!   while the provider's are not: until every shared bucket has been tightened to this
//!   instance's local remainder times the instance count (the smallest report wins), each
//!   admission must pass the local limiter too.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::Duration;

use sluice_quota::{
    Budget, Calendar, Claimer, Clock, Cost, Demand, Dimension, Grant, Limits, MemoryStore, QuotaStore, RateLimit,
    ReservationId, ReserveError, ScopeId, ScopeKey, ScopeSnapshot, Settlement, StoreError, StoreFuture, StoreHealth,
};

use crate::store::RedisStore;

/// Reservation ids of the local fallback carry this bit, so settlement finds their store.
const LOCAL: u64 = 1 << 63;
/// How often Redis is tried again while it is away.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// The configured behaviour while Redis is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnavailable {
    /// Refuse admission (the gateway answers 503) until Redis is back.
    FailClosed,
    /// Admit against a local limiter holding `1 / instances` of every limit.
    FailOpenLocal {
        /// How many gateway instances share the limits.
        instances: NonZeroU64,
    },
}

/// A [`RedisStore`] with a configured answer to Redis being away.
#[derive(Debug)]
pub struct ResilientStore {
    remote: RedisStore,
    local: Option<MemoryStore>,
    mode: OnUnavailable,
    clock: Arc<dyn Clock>,
    down: AtomicBool,
    /// After an outage, until the shared buckets are tightened: the local limiter gates too.
    guarded: AtomicBool,
    next_probe: AtomicU64,
    errors: AtomicU64,
    /// Reservations the local limiter granted, by id: their path and periods, so what they
    /// spend is recorded for the shared budgets ([`RedisStore::record_spent`]).
    local_grants: parking_lot::Mutex<HashMap<u64, (Vec<ScopeId>, Calendar)>>,
    /// The time zone of the last admission's calendar (seconds east of UTC): the zone the
    /// budgets are brought up to the record in after an outage.
    zone: AtomicI32,
}

impl ResilientStore {
    /// Wraps `remote`; `clock` times the probes.
    #[must_use]
    pub fn new(remote: RedisStore, mode: OnUnavailable, clock: Arc<dyn Clock>) -> Self {
        let local = match mode {
            OnUnavailable::FailClosed => None,
            OnUnavailable::FailOpenLocal { .. } => Some(MemoryStore::new(Arc::clone(&clock))),
        };
        Self {
            remote,
            local,
            mode,
            clock,
            down: AtomicBool::new(false),
            guarded: AtomicBool::new(false),
            next_probe: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            local_grants: parking_lot::Mutex::new(HashMap::new()),
            zone: AtomicI32::new(0),
        }
    }

    /// Whether Redis is currently considered unreachable.
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// Store errors seen so far.
    #[must_use]
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    fn should_try_remote(&self) -> bool {
        if !self.down.load(Ordering::Relaxed) {
            return true;
        }
        let now = self.clock.now();
        let due = self.next_probe.load(Ordering::Relaxed);
        now.0 >= due
            && self
                .next_probe
                .compare_exchange(due, now.after(PROBE_EVERY).0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    fn failed(&self, error: &StoreError) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.next_probe.store(self.clock.now().after(PROBE_EVERY).0, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::AcqRel) {
            let mode = match self.mode {
                OnUnavailable::FailClosed => "refusing requests (fail_closed)",
                OnUnavailable::FailOpenLocal { .. } => "limiting locally at this instance's share (fail_open_local)",
            };
            tracing::error!(%error, "redis unavailable: {mode}");
        }
    }

    /// Redis answered. After an outage this call brings the shared buckets down to what
    /// the local limiter says is left (times the instance count) before the local gate
    /// lifts, and the shared money budgets up to the store of record (what every instance
    /// spent admitting locally included); a failure there leaves the gate on for the next
    /// recovery to try again.
    async fn recovered(&self) {
        if !self.down.swap(false, Ordering::AcqRel) {
            return;
        }
        tracing::warn!("redis reachable again: shared limits restored");
        let (Some(local), OnUnavailable::FailOpenLocal { instances }) = (&self.local, self.mode) else { return };
        self.guarded.store(true, Ordering::Release);
        let calendar = Calendar::at(self.clock.unix_millis() / 1_000, self.zone.load(Ordering::Relaxed));
        if let Err(e) = self.remote.reconcile(calendar).await {
            tracing::warn!(error = %e, "bringing the shared budgets up to the ledger after an outage failed");
            self.failed(&e);
            return;
        }
        for scope in local.scope_ids() {
            let Ok(Some(snapshot)) = local.snapshot(scope).await else { continue };
            let dimensions = local.rate_dimensions(scope);
            let mut done: Vec<Dimension> = Vec::new();
            for &dimension in &dimensions {
                if done.contains(&dimension) {
                    continue;
                }
                done.push(dimension);
                // What is left locally of this dimension (its tightest bucket), for everyone.
                let left = snapshot
                    .rates
                    .iter()
                    .zip(&dimensions)
                    .filter(|(_, d)| **d == dimension)
                    .map(|(rate, _)| rate.remaining)
                    .min()
                    .unwrap_or(u64::MAX);
                let shared = left.saturating_mul(instances.get());
                if let Err(e) = self.remote.tighten(scope, dimension, shared, None).await {
                    // Away again: the next recovery tightens anew; the gate stays on.
                    tracing::warn!(error = %e, "tightening the shared limits after an outage failed");
                    self.failed(&e);
                    return;
                }
            }
        }
        self.guarded.store(false, Ordering::Release);
    }

    /// The local gate after an outage: the admission must fit the local limiter too, and
    /// is charged there (reserved and settled at once).
    fn local_gate(&self, demand: &Demand<'_>) -> Result<(), ReserveError> {
        let Some(local) = &self.local else { return Ok(()) };
        if !self.guarded.load(Ordering::Acquire) {
            return Ok(());
        }
        let grant = local.admit_now(demand)?;
        local.settle_now(grant.id, Settlement { used: demand.cost, upstream: demand.cost });
        Ok(())
    }

    /// The shadow account: what Redis granted, charged to the local limiter.
    fn shadow(&self, path: &[ScopeId], cost: Cost) {
        if let Some(local) = &self.local {
            local.charge_now(path, cost);
        }
    }

    async fn reserve_resilient(&self, demand: Demand<'_>) -> Result<Grant, ReserveError> {
        let demands = std::slice::from_ref(&demand);
        let remote = async { self.remote.admit(demand.clone()).await.map(|grant| (0, grant)) };
        let local = |local: &MemoryStore| local.admit_now(&demand).map(|grant| (0, grant));
        Ok(self.admit_either(demands, Some(&demand), remote, local).await?.1)
    }

    /// [`QuotaStore::admit_first`] as [`Self::reserve_resilient`] admits one demand: Redis
    /// decides while it answers (in one step where it can), the local limiter while it is
    /// away. While the local gate is on after an outage each demand is admitted on its own,
    /// through that gate, in order.
    async fn first_resilient(&self, demands: Vec<Demand<'_>>) -> Result<(usize, Grant), ReserveError> {
        if self.local.is_some() && self.guarded.load(Ordering::Acquire) {
            return sluice_quota::store::admit_each(self, demands).await;
        }
        let remote = self.remote.admit_first(demands.clone());
        let local = |local: &MemoryStore| local.admit_first_now(&demands);
        self.admit_either(&demands, None, remote, local).await
    }

    /// Admits one of `demands` (the one whose index the answer carries): by Redis (`remote`,
    /// after the local gate for `gated`, if on) while it answers, its grant charged to the
    /// shadow account; by the local limiter (`local`) while it is away, its grant's id
    /// marked local.
    async fn admit_either(
        &self,
        demands: &[Demand<'_>],
        gated: Option<&Demand<'_>>,
        remote: impl Future<Output = Result<(usize, Grant), ReserveError>>,
        local: impl FnOnce(&MemoryStore) -> Result<(usize, Grant), ReserveError>,
    ) -> Result<(usize, Grant), ReserveError> {
        if let Some(demand) = demands.first() {
            self.zone.store(demand.calendar.zone, Ordering::Relaxed);
        }
        let error = if self.should_try_remote() {
            let guarded = self.guarded.load(Ordering::Acquire);
            if let Some(demand) = gated {
                self.local_gate(demand)?;
            }
            match remote.await {
                Err(ReserveError::Store(e)) => e,
                other => {
                    if let (Ok((i, _)), false) = (&other, guarded)
                        && let Some(demand) = demands.get(*i)
                    {
                        self.shadow(demand.path, demand.cost);
                    }
                    self.recovered().await;
                    return other;
                }
            }
        } else {
            StoreError("redis unavailable (waiting for the next probe)".into())
        };
        if !self.is_degraded() || error.0.contains("waiting for the next probe") {
            self.failed_if_remote_error(&error);
        }
        let Some(store) = &self.local else { return Err(ReserveError::Store(error)) };
        let (i, grant) = local(store)?;
        if let Some(demand) = demands.get(i) {
            self.local_grants.lock().insert(grant.id.0, (demand.path.to_vec(), demand.calendar));
        }
        Ok((i, Grant { id: ReservationId(grant.id.0 | LOCAL), ..grant }))
    }

    fn failed_if_remote_error(&self, error: &StoreError) {
        if !error.0.contains("waiting for the next probe") {
            self.failed(error);
        }
    }

    async fn settle_resilient(&self, id: ReservationId, settlement: Settlement) -> Result<(), StoreError> {
        if id.0 & LOCAL != 0 {
            if let Some(local) = &self.local {
                local.settle_now(ReservationId(id.0 & !LOCAL), settlement);
            }
            if let Some((path, calendar)) = self.local_grants.lock().remove(&(id.0 & !LOCAL)) {
                self.remote.record_spent(&path, calendar, settlement);
            }
            return Ok(());
        }
        let result = self.remote.settle(id, settlement).await;
        if let Err(e) = &result {
            self.failed(e);
        }
        result
    }
}

/// `limits` at `1 / n` of every amount, burst, concurrency cap and budget (at least 1 each).
fn share(limits: &Limits, n: NonZeroU64) -> Limits {
    let part = |v: NonZeroU64| NonZeroU64::new(v.get() / n.get()).unwrap_or(NonZeroU64::MIN);
    let rates = limits.rates.iter().map(|r| RateLimit { amount: part(r.amount), burst: part(r.burst), ..*r }).collect();
    let budgets = limits.budgets.iter().map(|b| Budget { amount: part(b.amount), ..*b }).collect();
    Limits { rates, concurrency: limits.concurrency.map(part), budgets }
}

impl QuotaStore for ResilientStore {
    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId {
        if let (Some(local), OnUnavailable::FailOpenLocal { instances }) = (&self.local, self.mode) {
            let local_id = local.register(key.clone(), share(&limits, instances));
            let id = self.remote.register(key, limits);
            debug_assert_eq!(local_id, id, "local and remote scope ids must agree");
            return id;
        }
        self.remote.register(key, limits)
    }

    fn keep_with(&self, scope: ScopeId, owner: ScopeId) {
        self.remote.keep_with(scope, owner);
    }

    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        Box::pin(self.reserve_resilient(demand))
    }

    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        Box::pin(self.first_resilient(demands))
    }

    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.settle_resilient(id, settlement))
    }

    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                local.pause(scope, wait).await?;
            }
            if self.is_degraded() { Ok(()) } else { self.remote.pause(scope, wait).await }
        })
    }

    fn hold(&self, scope: ScopeId, held: bool) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                local.hold(scope, held).await?;
            }
            self.remote.hold(scope, held).await
        })
    }

    fn share_window(
        &self,
        scope: ScopeId,
        learned: Option<Duration>,
        hold: Duration,
    ) -> StoreFuture<'_, Result<Option<Duration>, StoreError>> {
        if self.is_degraded() {
            return Box::pin(std::future::ready(Ok(learned)));
        }
        self.remote.share_window(scope, learned, hold)
    }

    fn heartbeat(&self) -> Option<Duration> {
        self.remote.heartbeat()
    }

    /// Renews the reservations Redis holds; the local fallback's (made while Redis was
    /// away) live their whole lease in this process. While Redis is away a renewal is sent
    /// only as the next probe, like an admission: the leases there run out after their
    /// heartbeat and this instance's holds are refunded, as a crashed one's would be.
    fn renew<'a>(&'a self, ids: &'a [ReservationId]) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let remote: Vec<ReservationId> = ids.iter().copied().filter(|id| id.0 & LOCAL == 0).collect();
            if remote.is_empty() {
                return Ok(());
            }
            if !self.should_try_remote() {
                return Err(StoreError("redis unavailable (waiting for the next probe)".into()));
            }
            let result = self.remote.renew(&remote).await;
            match &result {
                Ok(()) => self.recovered().await,
                Err(e) => self.failed(e),
            }
            result
        })
    }

    fn open_reservations(&self) -> Option<u64> {
        let local = self.local.as_ref().map_or(0, MemoryStore::open_reservations);
        let remote = self.remote.open_reservations().unwrap_or(0);
        Some(remote.saturating_add(u64::try_from(local).unwrap_or(u64::MAX)))
    }

    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                // The local share holds 1/n of the limits: its part of what is left.
                let part = match self.mode {
                    OnUnavailable::FailOpenLocal { instances } => remaining / instances.get(),
                    OnUnavailable::FailClosed => remaining,
                };
                local.tighten(scope, dimension, part, reset).await?;
            }
            if self.is_degraded() { Ok(()) } else { self.remote.tighten(scope, dimension, remaining, reset).await }
        })
    }

    fn sent(&self, scope: ScopeId, cost: Cost, since: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                local.sent(scope, cost, since).await?;
            }
            if self.is_degraded() { Ok(()) } else { self.remote.sent(scope, cost, since).await }
        })
    }

    fn withdraw<'a>(&'a self, path: &'a [ScopeId], by: Claimer) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(local) = &self.local {
                local.withdraw(path, by).await?;
            }
            if self.is_degraded() { Ok(()) } else { self.remote.withdraw(path, by).await }
        })
    }

    fn shared(&self) -> bool {
        true
    }

    fn health(&self) -> StoreHealth {
        StoreHealth { degraded: self.is_degraded(), errors: self.errors() }
    }

    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>> {
        Box::pin(async move {
            match (&self.local, self.is_degraded()) {
                (Some(local), true) => local.snapshot(id).await,
                _ => self.remote.snapshot(id).await,
            }
        })
    }

    fn snapshots<'a>(&'a self, ids: &'a [ScopeId]) -> StoreFuture<'a, Result<Vec<Option<ScopeSnapshot>>, StoreError>> {
        Box::pin(async move {
            match (&self.local, self.is_degraded()) {
                (Some(local), true) => local.snapshots(ids).await,
                _ => self.remote.snapshots(ids).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_quota::Dimension;

    #[test]
    fn a_share_divides_every_limit_but_never_to_zero() {
        let limits = Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 30_000).unwrap_or_else(|| unreachable!()))
            .with_concurrency(NonZeroU64::new(2).unwrap_or(NonZeroU64::MIN));
        let three = NonZeroU64::new(3).unwrap_or(NonZeroU64::MIN);
        let shared = share(&limits, three);
        assert_eq!(shared.rates[0].amount.get(), 10_000);
        assert_eq!(shared.rates[0].burst.get(), 166); // a third of one second of 30,000 a minute
        assert_eq!(shared.concurrency.map(NonZeroU64::get), Some(1));
    }
}
