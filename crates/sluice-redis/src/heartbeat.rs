//! Heartbeats: the reservations this instance holds in a shared store are renewed while
//! their requests run, so that those of an instance that died come back within one
//! heartbeat lease instead of at the end of their whole lease (`[server] lease`).
//!
//! A store with a heartbeat ([`QuotaStore::heartbeat`], Redis) keeps every reservation for
//! that long past its grant or last renewal. [`Renewing`] wraps it: it records each
//! reservation it grants with the end of its whole lease, forgets it when it is settled
//! (the request road's settle guard, above this floor, settles every reservation exactly
//! once, through here), and renews those still held every [`renew_every`] of the heartbeat, all of them in
//! one [`QuotaStore::renew`] (the store splits it per group and in bounded chunks). A
//! reservation is renewed until its whole lease is over, so a request stuck for longer
//! still gives its hold back, at most one heartbeat after its lease.
//!
//! The renewing task runs while this instance holds reservations: started by the first
//! grant, it ends once the last one is settled or past its lease, so at shutdown it ends
//! after the last settlement; the next grant starts it again.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{
    Claimer, Clock, Cost, Demand, Dimension, Grant, Limits, Nanos, QuotaStore, ReservationId, ReserveError, ScopeId,
    ScopeKey, ScopeSnapshot, Settlement, StoreError, StoreFuture, StoreHealth,
};

/// The shortest heartbeat lease: a crashed instance's reservations come back within it.
pub const HEARTBEAT_LEASE: Duration = Duration::from_secs(8);

/// The heartbeat lease of a shared store whose calls are bounded by `timeout`:
/// [`HEARTBEAT_LEASE`], or eight calls' worth when those are slower (`[store] timeout` above
/// 1 s), so that with a renewal every quarter of it three in a row may fail or time out
/// before a live instance's lease runs out.
#[must_use]
pub fn heartbeat_lease(timeout: Duration) -> Duration {
    HEARTBEAT_LEASE.max(timeout.saturating_mul(8))
}

/// How often reservations on a heartbeat lease of `heartbeat` are renewed: four times in
/// each lease.
#[must_use]
pub fn renew_every(heartbeat: Duration) -> Duration {
    (heartbeat / 4).max(Duration::from_millis(1))
}

/// The reservations held here, each with the end of its whole lease.
#[derive(Debug, Default)]
struct Held {
    until: HashMap<ReservationId, Nanos>,
    /// A renewing task is running (or spawned).
    renewing: bool,
}

#[derive(Debug)]
struct Shared {
    inner: Arc<dyn QuotaStore>,
    clock: Arc<dyn Clock>,
    every: Duration,
    held: Mutex<Held>,
}

/// A store that renews the reservations it granted until they are settled (see the module
/// docs). Every other call goes to the store it wraps.
#[derive(Debug)]
pub struct Renewing {
    shared: Arc<Shared>,
}

impl Renewing {
    /// Wraps `inner`, renewing every `every` (see [`renew_every`]); `clock` tells when a
    /// reservation's whole lease is over.
    #[must_use]
    pub fn new(inner: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>, every: Duration) -> Self {
        Self { shared: Arc::new(Shared { inner, clock, every, held: Mutex::new(Held::default()) }) }
    }

    /// Reservations currently renewed.
    #[must_use]
    pub fn renewed(&self) -> usize {
        self.shared.held.lock().until.len()
    }

    fn hold(&self, id: ReservationId, lease: Duration) {
        let until = self.shared.clock.now().after(lease);
        let start = {
            let mut held = self.shared.held.lock();
            held.until.insert(id, until);
            !std::mem::replace(&mut held.renewing, true)
        };
        if start {
            tokio::spawn(renew(Arc::downgrade(&self.shared)));
        }
    }
}

/// Clears the running mark when the task is dropped unfinished (its runtime stopped), so
/// the next grant starts another; disarmed when the task ends by itself.
struct Mark {
    shared: Weak<Shared>,
    armed: bool,
}

impl Drop for Mark {
    fn drop(&mut self) {
        if self.armed
            && let Some(shared) = self.shared.upgrade()
        {
            shared.held.lock().renewing = false;
        }
    }
}

/// The renewing task: every `every`, renews what is still held within its lease; ends when
/// nothing is held, or the store is gone.
async fn renew(shared: Weak<Shared>) {
    let mut mark = Mark { shared: shared.clone(), armed: true };
    loop {
        let every = match shared.upgrade() {
            Some(shared) => shared.every,
            None => return,
        };
        tokio::time::sleep(every).await;
        let Some(shared) = shared.upgrade() else { return };
        let ids: Vec<ReservationId> = {
            let mut held = shared.held.lock();
            let now = shared.clock.now();
            // Past its whole lease a reservation is left to lapse within a heartbeat.
            held.until.retain(|_, until| *until > now);
            if held.until.is_empty() {
                held.renewing = false;
                mark.armed = false;
                return;
            }
            held.until.keys().copied().collect()
        };
        if let Err(e) = shared.inner.renew(&ids).await {
            tracing::warn!(error = %e, held = ids.len(), "renewing reservations failed; retrying at the next heartbeat");
        }
    }
}

impl QuotaStore for Renewing {
    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId {
        self.shared.inner.register(key, limits)
    }

    fn keep_with(&self, scope: ScopeId, owner: ScopeId) {
        self.shared.inner.keep_with(scope, owner);
    }

    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        Box::pin(async move {
            let lease = demand.lease;
            let grant = self.shared.inner.admit(demand).await?;
            self.hold(grant.id, lease);
            Ok(grant)
        })
    }

    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        Box::pin(async move {
            let leases: Vec<Duration> = demands.iter().map(|d| d.lease).collect();
            let (i, grant) = self.shared.inner.admit_first(demands).await?;
            self.hold(grant.id, leases.get(i).copied().unwrap_or(grant.lease));
            Ok((i, grant))
        })
    }

    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>> {
        self.shared.held.lock().until.remove(&id);
        self.shared.inner.settle(id, settlement)
    }

    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        self.shared.inner.pause(scope, wait)
    }

    fn hold(&self, scope: ScopeId, held: bool) -> StoreFuture<'_, Result<(), StoreError>> {
        self.shared.inner.hold(scope, held)
    }

    fn share_window(
        &self,
        scope: ScopeId,
        learned: Option<Duration>,
        hold: Duration,
    ) -> StoreFuture<'_, Result<Option<Duration>, StoreError>> {
        self.shared.inner.share_window(scope, learned, hold)
    }

    fn heartbeat(&self) -> Option<Duration> {
        self.shared.inner.heartbeat()
    }

    fn renew<'a>(&'a self, ids: &'a [ReservationId]) -> StoreFuture<'a, Result<(), StoreError>> {
        self.shared.inner.renew(ids)
    }

    fn open_reservations(&self) -> Option<u64> {
        self.shared.inner.open_reservations()
    }

    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>> {
        self.shared.inner.tighten(scope, dimension, remaining, reset)
    }

    fn sent(&self, scope: ScopeId, cost: Cost, since: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        self.shared.inner.sent(scope, cost, since)
    }

    fn withdraw<'a>(&'a self, path: &'a [ScopeId], by: Claimer) -> StoreFuture<'a, Result<(), StoreError>> {
        self.shared.inner.withdraw(path, by)
    }

    fn reads_in_process(&self) -> bool {
        self.shared.inner.reads_in_process()
    }

    fn shared(&self) -> bool {
        self.shared.inner.shared()
    }

    fn health(&self) -> StoreHealth {
        self.shared.inner.health()
    }

    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>> {
        self.shared.inner.snapshot(id)
    }

    fn snapshots<'a>(&'a self, ids: &'a [ScopeId]) -> StoreFuture<'a, Result<Vec<Option<ScopeSnapshot>>, StoreError>> {
        self.shared.inner.snapshots(ids)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use sluice_quota::{FakeClock, MemoryStore, ScopeKind};

    use super::*;
    use crate::watched::{Hooks, Watched};

    /// Every renewal asked for, each sorted.
    #[derive(Debug, Default)]
    struct Recording {
        renewals: Mutex<Vec<Vec<ReservationId>>>,
    }

    impl Hooks for Recording {
        fn renewed(&self, ids: &[ReservationId]) {
            let mut ids = ids.to_vec();
            ids.sort_unstable_by_key(|id| id.0);
            self.renewals.lock().push(ids);
        }
    }

    const EVERY: Duration = Duration::from_secs(2);

    /// Moves both clocks on by `d` and lets the renewing task run.
    async fn step(clock: &FakeClock, d: Duration) {
        clock.advance(d);
        tokio::time::sleep(d).await;
    }

    #[tokio::test(start_paused = true)]
    async fn held_reservations_are_renewed_until_settled_or_past_their_lease() {
        let clock = FakeClock::default();
        let recording =
            Arc::new(Watched { inner: MemoryStore::new(Arc::new(clock.clone())), hooks: Recording::default() });
        let store = Renewing::new(Arc::clone(&recording) as Arc<dyn QuotaStore>, Arc::new(clock.clone()), EVERY);
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited());
        let short = store.reserve(&[d], Cost::request(1, 1), Duration::from_secs(5)).await.unwrap();
        let long = store.reserve(&[d], Cost::request(1, 1), Duration::from_secs(60)).await.unwrap();
        let mut both = vec![short.id, long.id];
        both.sort_unstable_by_key(|id| id.0);
        // The test looks just after each of the task's ticks.
        tokio::time::sleep(Duration::from_millis(100)).await;
        step(&clock, EVERY).await;
        step(&clock, EVERY).await;
        assert_eq!(*recording.hooks.renewals.lock(), [both.clone(), both.clone()]);
        // At 6 s the short one's lease is over: it is left to lapse.
        step(&clock, EVERY).await;
        assert_eq!(recording.hooks.renewals.lock().last(), Some(&vec![long.id]));
        // Settled, the long one is renewed no more, and the task ends.
        store.settle(long.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        let before = recording.hooks.renewals.lock().len();
        step(&clock, EVERY).await;
        step(&clock, EVERY).await;
        assert_eq!(recording.hooks.renewals.lock().len(), before, "a settled reservation was renewed");
        assert_eq!(store.renewed(), 0);
        assert!(!store.shared.held.lock().renewing, "the task still runs with nothing held");
        // The next grant starts it again.
        let next = store.reserve(&[d], Cost::request(1, 1), Duration::from_secs(60)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        step(&clock, EVERY).await;
        assert_eq!(recording.hooks.renewals.lock().last(), Some(&vec![next.id]));
        assert_eq!(recording.hooks.renewals.lock().len(), before + 1);
    }
}
