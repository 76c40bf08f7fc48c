//! The one interface every quota store implements, in memory or remote.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::bucket::{Claimer, Share};
use crate::budget::BudgetPeriod;
use crate::decision::{Demand, Grant, Rejection, RejectionKind};
use crate::ledger::ScopeSnapshot;
use crate::limit::{Cost, Dimension, Limits, Settlement};
use crate::scope::{ReservationId, ScopeId, ScopeKey};

/// A boxed future, so stores can be used as trait objects.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The store itself failed (unreachable, timed out, answered nonsense).
#[derive(Debug, Clone, thiserror::Error)]
#[error("quota store failed: {0}")]
pub struct StoreError(pub String);

/// Why a reservation was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReserveError {
    /// A limit refused; see the rejection for which and until when.
    #[error("rejected by {} on {}", .0.limiter, .0.scope)]
    Rejected(Rejection),
    /// The store could not decide.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Of two refusals, the one a waiting request heeds: a rejection over a store error, the
/// sooner wait over the later (a busy slot as no wait; a cost that never fits after any
/// wait); the first on a tie.
fn sooner(first: Option<ReserveError>, second: ReserveError) -> ReserveError {
    let rank = |e: &ReserveError| match e {
        ReserveError::Rejected(r) => match r.kind {
            RejectionKind::SlotsBusy => (0, Duration::ZERO),
            RejectionKind::RetryAfter(d) | RejectionKind::InFlight(d) => (0, d),
            RejectionKind::NeverFits { .. } => (1, Duration::ZERO),
        },
        ReserveError::Store(_) => (2, Duration::ZERO),
    };
    match first {
        Some(first) if rank(&first) <= rank(&second) => first,
        _ => second,
    }
}

/// Of the refusals of several demands, in the order they were tried, the one a waiting
/// request heeds (as [`QuotaStore::admit_first`] answers when none passes): the soonest
/// wait (a busy slot as no wait), over a cost that never fits, over a store error; the
/// first on a tie. A store error when there is none.
pub fn soonest(refusals: impl IntoIterator<Item = ReserveError>) -> ReserveError {
    refusals
        .into_iter()
        .fold(None, |kept, refusal| Some(sooner(kept, refusal)))
        .unwrap_or_else(|| ReserveError::Store(StoreError("no demand to admit".to_owned())))
}

/// [`QuotaStore::admit_first`] by one [`QuotaStore::admit`] per demand, in order, until
/// one passes: the default, and what a store uses when it cannot decide several demands
/// in one step (a Redis Cluster, whose members live on different servers).
pub fn admit_each<'a, S: QuotaStore + ?Sized>(
    store: &'a S,
    demands: Vec<Demand<'a>>,
) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
    Box::pin(async move {
        let mut refusals = Vec::new();
        for (i, demand) in demands.into_iter().enumerate() {
            match store.admit(demand).await {
                Ok(grant) => return Ok((i, grant)),
                Err(e) => refusals.push(e),
            }
        }
        Err(soonest(refusals))
    })
}

/// How a store is doing, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreHealth {
    /// The shared store is unreachable and a fallback decides (or requests are refused).
    pub degraded: bool,
    /// Store errors seen since start.
    pub errors: u64,
}

/// Reserves and settles quota atomically across every scope of a path.
///
/// Implementations apply the rules of [`crate::Ledger`]: all-or-nothing reservation,
/// idempotent settlement, leases that expire and refund.
pub trait QuotaStore: Send + Sync + std::fmt::Debug {
    /// Registers a scope (or updates its limits) and returns its local handle.
    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId;

    /// Keeps `scope`'s state beside `owner`'s: a caller's team and key beside its tenant.
    /// A store that spreads its state over servers (a Redis Cluster's slots) then reserves a
    /// caller's own scopes in one step wherever the tenant lives; other stores ignore it.
    /// Call it right after registering `scope`, before it is used, with the same owner on
    /// every instance.
    fn keep_with(&self, scope: ScopeId, owner: ScopeId) {
        let _ = (scope, owner);
    }

    /// Admits a [`Demand`]: every bucket of its path or none, within its share of shared
    /// bursts, and (with `demand.fair`) within its tenant's fair share of the deployment.
    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>>;

    /// Reserves `cost` on every scope of `path`, or nothing, using at most `share` of the
    /// burst of shared scopes (see [`crate::bucket::take_share`]).
    fn reserve_share<'a>(
        &'a self,
        path: &'a [ScopeId],
        cost: Cost,
        lease: Duration,
        share: Share,
    ) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        self.admit(Demand { share, ..Demand::new(path, cost, lease) })
    }

    /// Reserves `cost` on every scope of `path`, or nothing, with the whole burst.
    fn reserve<'a>(
        &'a self,
        path: &'a [ScopeId],
        cost: Cost,
        lease: Duration,
    ) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        self.reserve_share(path, cost, lease, Share::FULL)
    }

    /// Admits the first of `demands` that passes, trying them in order (a pool's members in
    /// the order [`crate::placement::order`] gives): its index and grant. When none passes,
    /// the refusal a waiting request heeds: the soonest one (a busy slot counts as soonest,
    /// one that never fits as last), or a store error when no demand got an answer. This
    /// default asks once per demand; a store that can decide several in one atomic step
    /// overrides it. Deciding them in one step, a store records what a refused demand
    /// records for its waiting request (claims on idle windows, its tenant waiting for a
    /// fair share) only when none passes: a request admitted on one member waits on no
    /// other, and a demand is never held back by what an earlier one of the same request
    /// just recorded.
    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        admit_each(self, demands)
    }

    /// Replaces the reservation by what was used; unknown ids are a no-op.
    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>>;

    /// Holds every reservation through `scope` back for `wait`, for every user of the
    /// store (coordinated backoff); never shortens a pause already in force.
    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>>;

    /// Holds `scope` (an operator's pause) or releases it, for every user of the store:
    /// while held, reservations through it are refused with limiter `paused` (see
    /// [`crate::Ledger::hold`]). Stores without holds refuse the call.
    fn hold(&self, scope: ScopeId, held: bool) -> StoreFuture<'_, Result<(), StoreError>> {
        let _ = (scope, held);
        Box::pin(std::future::ready(Err(StoreError("this store cannot hold scopes".into()))))
    }

    /// Shares a deployment's learned short window with every user of the store: `learned`
    /// (a window this instance just shrank to) is kept for `hold` unless a shorter one is
    /// kept already; returns the shortest window kept now (`None` when none is). Every
    /// instance adopts it, so one instance's lesson holds the whole fleet's bursts. A
    /// store used by one instance only (the default) keeps nothing: it returns `learned`.
    fn share_window(
        &self,
        scope: ScopeId,
        learned: Option<Duration>,
        hold: Duration,
    ) -> StoreFuture<'_, Result<Option<Duration>, StoreError>> {
        let _ = (scope, hold);
        Box::pin(std::future::ready(Ok(learned)))
    }

    /// How long a reservation stays held in shared state without a renewal
    /// ([`QuotaStore::renew`]), when that is shorter than its lease: `None` (the default)
    /// for a store whose reservations live as long as their lease asks, such as the
    /// in-process one, whose holds go with the process. A store that answers `Some` keeps
    /// each reservation for at most this long past its grant or last renewal, so the holds
    /// of a process that died come back within it, and its user must renew what it still
    /// holds well within it, until the reservation's own lease is over.
    fn heartbeat(&self) -> Option<Duration> {
        None
    }

    /// Extends each reservation of `ids` that is still held for another
    /// [`QuotaStore::heartbeat`] from now. A reservation already settled, or expired and
    /// refunded, stays gone: a renewal never takes capacity again. Unknown ids are skipped.
    /// A no-op (the default) for stores without a heartbeat.
    fn renew<'a>(&'a self, ids: &'a [ReservationId]) -> StoreFuture<'a, Result<(), StoreError>> {
        let _ = ids;
        Box::pin(std::future::ready(Ok(())))
    }

    /// Reservations this instance made that are not yet settled or expired, if known.
    fn open_reservations(&self) -> Option<u64> {
        None
    }

    /// Holds the per-minute buckets of `dimension` on `scope` to at most `remaining` units
    /// available now, for every user of the store: the provider reported less than local
    /// state believed. `reset` (when the provider's window is full again) bounds how long
    /// the bucket is held. Never loosens a bucket; see [`crate::bucket::tighten`].
    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>>;

    /// A request admitted with `cost` through `scope` went to the provider `since` ago
    /// (measured by the caller): the scope's guarded buckets are re-anchored at that instant,
    /// for every user of the store (see [`crate::bucket::sent`]), so the next request is
    /// paced from where the provider's window really starts. Never loosens a bucket. Stores
    /// that pace no provider may ignore it.
    fn sent(&self, scope: ScopeId, cost: Cost, since: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        let _ = (scope, cost, since);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Withdraws the claims `by` holds on the scopes of `path` (see [`crate::bucket::Claim`]):
    /// its request went before it was admitted (its client hung up), so the window it
    /// claimed is not kept idle for nobody. For every user of the store. Stores that record
    /// no claims may ignore it.
    fn withdraw<'a>(&'a self, path: &'a [ScopeId], by: Claimer) -> StoreFuture<'a, Result<(), StoreError>> {
        let _ = (path, by);
        Box::pin(std::future::ready(Ok(())))
    }

    /// Whether other gateway instances admit on the same buckets (a Redis store): their
    /// queues then race this one's for each bucket's next free instant
    /// ([`crate::queue::DeploymentQueue::with_stagger`]).
    fn shared(&self) -> bool {
        false
    }

    /// Whether a read ([`QuotaStore::snapshot`]) is answered in-process, without waiting on
    /// IO: such a read is cheaper to make when needed than to start early in a task.
    fn reads_in_process(&self) -> bool {
        false
    }

    /// How the store is doing; in-process stores are always healthy.
    fn health(&self) -> StoreHealth {
        StoreHealth::default()
    }

    /// The live state of a scope.
    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>>;

    /// The live state of several scopes, in the order of `ids` (`None` for an unknown one).
    /// A remote store overrides this to read them in one round trip.
    fn snapshots<'a>(&'a self, ids: &'a [ScopeId]) -> StoreFuture<'a, Result<Vec<Option<ScopeSnapshot>>, StoreError>> {
        Box::pin(async move {
            let mut snapshots = Vec::with_capacity(ids.len());
            for &id in ids {
                snapshots.push(self.snapshot(id).await?);
            }
            Ok(snapshots)
        })
    }
}

/// Money spent on one scope in a day and a month, in micro-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpentInPeriods {
    /// Spent in the day asked about.
    pub day: u64,
    /// Spent in the month asked about.
    pub month: u64,
}

/// The fleet's durable record of money spent per budget scope and period: written as
/// reservations settle, read when a shared store lost (or never had) what it keeps, so a
/// budget is restored before anything is admitted against it. Scopes are named by their
/// store field (`<kind>:<name>`), periods by their start (Unix seconds).
pub trait SpendRecord: Send + Sync + std::fmt::Debug {
    /// Adds `micros` spent on `scope` in the period of `kind` starting at `period`. Never
    /// waits: the record writes in batches, each applied once.
    fn record(&self, scope: &str, kind: BudgetPeriod, period: u64, micros: u64);

    /// What the record holds spent on each of `scopes` in the day starting at `day` and the
    /// month starting at `month`, after writing out what this instance still holds back and
    /// waiting until what any instance recorded before the call is written.
    ///
    /// # Errors
    /// When the record cannot be read.
    fn spent<'a>(
        &'a self,
        scopes: &'a [String],
        day: u64,
        month: u64,
    ) -> StoreFuture<'a, Result<Vec<SpentInPeriods>, StoreError>>;
}
