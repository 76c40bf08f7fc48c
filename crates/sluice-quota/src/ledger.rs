//! The pure quota state machine: scopes, their buckets, and open reservations.
//!
//! A [`Ledger`] owns no clock and no lock: every operation takes `now`. A store wraps it
//! (the memory store in a mutex; a remote store reimplements the same rules in one
//! atomic script). Reservation is all-or-nothing across every bucket of a path.
//! A [`ScopeId`] not registered in this ledger is treated as a scope without limits.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use crate::bucket::{self, Claim, Claimer, Refusal, Share, Tat};
use crate::budget::{self, Calendar, Over, Spent};
use crate::clock::Nanos;
use crate::decision::{Demand, FairShare, Grant, Rejection, RejectionKind};
use crate::limit::{Cost, Dimension, LimiterName, Limits, Settlement};
use crate::scope::ScopeKind;
use crate::scope::{ReservationId, ScopeId, ScopeKey};
use crate::shares::{FairState, FairVerdict};
pub use crate::snapshot::{BudgetSnapshot, RateSnapshot, ScopeSnapshot};

/// Providers report per-minute windows; longer buckets (per day) are never tightened by them.
pub const TIGHTEN_MAX_PERIOD: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct ScopeState {
    key: ScopeKey,
    limits: Limits,
    tats: Vec<Tat>,
    in_flight: u64,
    paused_until: Nanos,
    held: bool,
    /// A cost waiting for an idle window on one of the buckets: its index and claim.
    claim: Option<(usize, Claim)>,
    /// Per budget (in the order of `limits.budgets`): what was spent in which period.
    spent: Vec<Spent>,
}

#[derive(Debug, Clone)]
struct Reservation {
    path: Vec<ScopeId>,
    cost: Cost,
    /// The periods its money was charged to.
    calendar: Calendar,
}

/// The result of settling a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Reserved and used amounts were reconciled.
    Reconciled,
    /// No such reservation: settled before or expired. Nothing changed.
    Unknown,
}

/// The retry hint of a refusal by a held scope: how soon a waiting request tries again
/// (a release on this instance wakes waiters at once; on another instance, within this).
pub const HOLD_RETRY: Duration = Duration::from_millis(100);

/// The retry hint of a refusal by a money budget that reservations in flight hold
/// ([`RejectionKind::InFlight`]): they may settle below what they reserved at any moment
/// (a settlement on this instance wakes its deployment's waiters at once; on another
/// instance, or on another deployment, the next try comes within this).
pub const IN_FLIGHT_RETRY: Duration = Duration::from_secs(1);

/// Quota state for many scopes. See the module docs.
#[derive(Debug, Default)]
pub struct Ledger {
    scopes: Vec<ScopeState>,
    index: HashMap<ScopeKey, ScopeId>,
    open: HashMap<ReservationId, Reservation>,
    expiry: BinaryHeap<Reverse<(Nanos, ReservationId)>>,
    next_id: u64,
    scratch: Vec<Tat>,
    /// Claims a refusal being decided would record (scope, bucket, claim).
    claims: Vec<(ScopeId, usize, Claim)>,
    fair: HashMap<ScopeId, FairState>,
    /// While [`Ledger::admit_first`] decides: what its refusals would record, recorded only
    /// when none of its demands passes.
    deferred: Option<Deferred>,
}

/// What the refusals of an [`Ledger::admit_first`] would record: claims (scope, bucket,
/// claim) and tenants waiting for their fair share of a deployment.
#[derive(Debug, Default)]
struct Deferred {
    claims: Vec<(ScopeId, usize, Claim)>,
    waiting: Vec<(ScopeId, FairShare)>,
}

impl Ledger {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `key` with `limits`, or changes the limits of a known scope in place
    /// (buckets keep their fill fraction; reservations in flight are unaffected).
    pub fn register(&mut self, now: Nanos, key: ScopeKey, limits: Limits) -> ScopeId {
        if let Some(&id) = self.index.get(&key) {
            self.set_limits(now, id, limits);
            return id;
        }
        let id = ScopeId(u32::try_from(self.scopes.len()).unwrap_or(u32::MAX));
        let tats = vec![Tat::default(); limits.rates.len()];
        let spent = vec![Spent::default(); limits.budgets.len()];
        self.scopes.push(ScopeState {
            key: key.clone(),
            limits,
            tats,
            in_flight: 0,
            paused_until: Nanos(0),
            held: false,
            claim: None,
            spent,
        });
        self.index.insert(key, id);
        id
    }

    /// The id of a registered scope.
    #[must_use]
    pub fn lookup(&self, key: &ScopeKey) -> Option<ScopeId> {
        self.index.get(key).copied()
    }

    fn set_limits(&mut self, now: Nanos, id: ScopeId, limits: Limits) {
        let Some(scope) = self.scopes.get_mut(id.0 as usize) else { return };
        let tats = limits
            .rates
            .iter()
            .map(|new| {
                let old = scope.limits.rates.iter().position(|o| o.name() == new.name());
                old.map_or(Tat::default(), |i| bucket::rescale(&scope.limits.rates[i], new, scope.tats[i], now))
            })
            .collect();
        scope.tats = tats;
        // What was spent stays with the budget of the same period: a reload resets nothing.
        scope.spent = limits
            .budgets
            .iter()
            .map(|new| {
                let old = scope.limits.budgets.iter().position(|o| o.period == new.period);
                old.and_then(|i| scope.spent.get(i).copied()).unwrap_or_default()
            })
            .collect();
        scope.limits = limits;
        scope.claim = None;
    }

    /// Reserves `cost` on every bucket of `path`, all or nothing, and a concurrency slot
    /// on every capped scope. Expired reservations are refunded first.
    ///
    /// # Errors
    /// A [`Rejection`] naming the limiter with the longest wait (or one that can never
    /// pass); nothing is debited.
    pub fn reserve(&mut self, now: Nanos, path: &[ScopeId], cost: Cost, lease: Duration) -> Result<Grant, Rejection> {
        self.reserve_share(now, path, cost, lease, Share::FULL)
    }

    /// [`Ledger::reserve`] for a caller that may use only `share` of the burst of shared
    /// scopes (org, model profile, deployment); its own scopes it may use fully.
    ///
    /// # Errors
    /// As [`Ledger::reserve`].
    pub fn reserve_share(
        &mut self,
        now: Nanos,
        path: &[ScopeId],
        cost: Cost,
        lease: Duration,
        share: Share,
    ) -> Result<Grant, Rejection> {
        self.admit(now, &Demand { share, ..Demand::new(path, cost, lease) })
    }

    /// Admits a [`Demand`]: its buckets as [`Ledger::reserve_share`], and, with
    /// `demand.fair`, the tenant's fair share of the path's deployment scope.
    ///
    /// # Errors
    /// As [`Ledger::reserve`]; `fair_share` when the tenant is too far ahead.
    pub fn admit(&mut self, now: Nanos, demand: &Demand<'_>) -> Result<Grant, Rejection> {
        let (path, cost, lease) = (demand.path, demand.cost, demand.lease);
        self.expire(now);
        self.check_held(path)?;
        self.check_budgets(path, cost.money, demand.calendar)?;
        let fair = self.check_fair(now, demand).inspect_err(|_| self.fair_waiting(now, demand))?;
        // A refusal by one of the caller's own limits is not waiting for the deployment: the
        // tenant could not use its capacity, so it must not hold the others back.
        let deadline = demand.patience.map(|p| now.after(p));
        self.check(now, path, cost, demand.share, (deadline, demand.claimer)).inspect_err(|refusal| {
            if refusal.scope.kind.is_shared() {
                self.fair_waiting(now, demand);
            }
        })?;
        if let (Some((scope, verdict)), Some(ask)) = (fair, &demand.fair) {
            self.fair.entry(scope).or_default().commit(now, ask, verdict);
        }
        let mut next = std::mem::take(&mut self.scratch).into_iter();
        let share = demand.share;
        for id in path {
            let Some(scope) = self.scopes.get_mut(id.0 as usize) else { continue };
            scope.drop_claim_passed_by(now, cost, share);
            for tat in &mut scope.tats {
                *tat = next.next().unwrap_or(*tat);
            }
            scope.in_flight += 1;
            scope.charge(demand.calendar, cost.money);
        }
        self.next_id += 1;
        let id = ReservationId(self.next_id);
        self.open.insert(id, Reservation { path: path.to_vec(), cost, calendar: demand.calendar });
        self.expiry.push(Reverse((now.after(lease), id)));
        Ok(Grant { id, reserved: cost, lease, after: Vec::new() })
    }

    /// Admits the first of `demands` that passes, in order ([`crate::QuotaStore::admit_first`]):
    /// its index and grant, or every refusal, in order. What a refusal records for its
    /// waiting request (claims on idle windows, the tenant waiting for its fair share) is
    /// recorded only when none passes, after all were decided.
    ///
    /// # Errors
    /// Each demand's refusal, in order, when none passes.
    pub fn admit_first(&mut self, now: Nanos, demands: &[Demand<'_>]) -> Result<(usize, Grant), Vec<Rejection>> {
        self.deferred = Some(Deferred::default());
        let mut refusals = Vec::with_capacity(demands.len());
        for (i, demand) in demands.iter().enumerate() {
            match self.admit(now, demand) {
                Ok(grant) => {
                    self.deferred = None;
                    return Ok((i, grant));
                }
                Err(refusal) => refusals.push(refusal),
            }
        }
        let deferred = self.deferred.take().unwrap_or_default();
        self.claims = deferred.claims;
        self.record_claims(now);
        for (scope, ask) in deferred.waiting {
            self.fair.entry(scope).or_default().waiting(now, &ask);
        }
        Err(refusals)
    }

    /// Refuses a cost no money budget on the path takes in its current period: at once,
    /// whatever the rates say (a spent budget waits for the next period, not for capacity;
    /// one held by reservations in flight waits for them to settle).
    fn check_budgets(&self, path: &[ScopeId], money: u64, calendar: Calendar) -> Result<(), Rejection> {
        if money == 0 {
            return Ok(());
        }
        // A budget held by reservations in flight answers only when none is spent for good:
        // waiting for them to settle would be in vain.
        let mut held = None;
        for scope in path.iter().filter_map(|id| self.scopes.get(id.0 as usize)) {
            for (limit, spent) in scope.limits.budgets.iter().zip(&scope.spent) {
                let kind = match budget::check(limit, *spent, calendar.period(limit.period), money) {
                    Ok(()) => continue,
                    Err(Over::Never) => RejectionKind::NeverFits { cost: money, capacity: limit.amount.get() },
                    Err(Over::Until(wait)) => RejectionKind::RetryAfter(wait),
                    Err(Over::Held) => {
                        held = held.or(Some(scope));
                        continue;
                    }
                };
                return Err(scope.rejection(LimiterName::Budget, kind));
            }
        }
        held.map_or(Ok(()), |scope| Err(scope.rejection(LimiterName::Budget, RejectionKind::InFlight(IN_FLIGHT_RETRY))))
    }

    fn deployment_of(&self, path: &[ScopeId]) -> Option<ScopeId> {
        path.iter()
            .copied()
            .find(|id| self.scopes.get(id.0 as usize).is_some_and(|s| s.key.kind == ScopeKind::Deployment))
    }

    fn fair_waiting(&mut self, now: Nanos, demand: &Demand<'_>) {
        if let (Some(ask), Some(scope)) = (&demand.fair, self.deployment_of(demand.path)) {
            match &mut self.deferred {
                Some(deferred) => deferred.waiting.push((scope, ask.clone())),
                None => self.fair.entry(scope).or_default().waiting(now, ask),
            }
        }
    }

    fn check_fair(&mut self, now: Nanos, demand: &Demand<'_>) -> Result<Option<(ScopeId, FairVerdict)>, Rejection> {
        let Some(ask) = &demand.fair else { return Ok(None) };
        let Some(scope) = self.deployment_of(demand.path) else { return Ok(None) };
        match self.fair.entry(scope).or_default().check(now, ask) {
            Ok(verdict) => Ok(Some((scope, verdict))),
            Err(wait) => Err(Rejection {
                scope: self.scopes[scope.0 as usize].key.clone(),
                limiter: LimiterName::FairShare,
                kind: RejectionKind::RetryAfter(wait),
            }),
        }
    }

    /// Computes every bucket's new state into `scratch` without writing, or the refusal.
    /// A refusal only by buckets whose window must be idle for this cost records its claims
    /// on them (see [`Claim`]); any other refusal records none.
    /// `waiter`: when the caller stops waiting, which bounds its claims, and who it is.
    fn check(
        &mut self,
        now: Nanos,
        path: &[ScopeId],
        cost: Cost,
        share: Share,
        waiter: (Option<Nanos>, Claimer),
    ) -> Result<(), Rejection> {
        self.scratch.clear();
        self.claims.clear();
        let mut idle_only = true;
        let mut worst: Option<(Duration, ScopeKey, LimiterName)> = None;
        for &id in path {
            let Some(scope) = self.scopes.get(id.0 as usize) else { continue };
            if scope.paused_until > now {
                idle_only = false;
                let wait = scope.paused_until.since(now);
                if worst.as_ref().is_none_or(|(w, _, _)| wait > *w) {
                    worst = Some((wait, scope.key.clone(), LimiterName::ProviderCooldown));
                }
            }
            if let Some(max) = scope.limits.concurrency
                && scope.in_flight >= max.get()
            {
                return Err(scope.rejection(LimiterName::Concurrency, RejectionKind::SlotsBusy));
            }
            for (j, (limit, tat)) in scope.limits.rates.iter().zip(&scope.tats).enumerate() {
                let units = cost.of(limit.dimension);
                let at = match scope.take(j, now, units, share, waiter) {
                    Ok(next) => {
                        self.scratch.push(next);
                        continue;
                    }
                    Err(Taken::NeverFits) => {
                        let kind = RejectionKind::NeverFits { cost: units, capacity: limit.amount.get() };
                        return Err(scope.rejection(limit.name(), kind));
                    }
                    Err(Taken::Behind(at)) => {
                        idle_only = false;
                        at
                    }
                    Err(Taken::NotIdle(at, claim)) => {
                        self.claims.push((id, j, claim));
                        at
                    }
                    Err(Taken::NotUntil(at)) => {
                        idle_only = false;
                        at
                    }
                };
                self.scratch.push(*tat);
                let wait = at.since(now);
                if worst.as_ref().is_none_or(|(w, _, _)| wait > *w) {
                    worst = Some((wait, scope.key.clone(), limit.name()));
                }
            }
        }
        let Some((wait, scope, limiter)) = worst else { return Ok(()) };
        if idle_only {
            match &mut self.deferred {
                Some(deferred) => deferred.claims.append(&mut self.claims),
                None => self.record_claims(now),
            }
        }
        Err(Rejection { scope, limiter, kind: RejectionKind::RetryAfter(wait) })
    }

    /// Records the claims of a refusal by idle-window buckets alone: each replaces a lapsed
    /// or no larger claim on its scope (a larger claimer keeps its place).
    fn record_claims(&mut self, now: Nanos) {
        for (id, j, claim) in std::mem::take(&mut self.claims) {
            let Some(scope) = self.scopes.get_mut(id.0 as usize) else { continue };
            let keep = scope.claim.is_some_and(|(_, held)| held.until > now && held.step > claim.step);
            if !keep {
                scope.claim = Some((j, claim));
            }
        }
    }

    /// Withdraws the claims `by` holds on the scopes of `path` (its request went: its client
    /// hung up), so the smaller costs they hold back pass at once. Claims of others, and
    /// scopes without a claim, are left alone; returns how many were withdrawn.
    pub fn withdraw(&mut self, path: &[ScopeId], by: Claimer) -> usize {
        if by == Claimer::NOBODY {
            return 0;
        }
        let mut withdrawn = 0;
        for id in path {
            let Some(scope) = self.scopes.get_mut(id.0 as usize) else { continue };
            if scope.claim.is_some_and(|(_, claim)| claim.by == by) {
                scope.claim = None;
                withdrawn += 1;
            }
        }
        withdrawn
    }

    /// Replaces a reservation by what was really used: unused capacity returns, overruns
    /// are debited (buckets may go into debt), and its concurrency slots are released.
    /// Deployment scopes take [`Settlement::upstream`], all others [`Settlement::used`].
    /// Idempotent: a second settle of the same id changes nothing.
    pub fn settle(&mut self, now: Nanos, id: ReservationId, settlement: Settlement) -> Settled {
        let Some(reservation) = self.open.remove(&id) else {
            return Settled::Unknown;
        };
        for scope_id in &reservation.path {
            let Some(scope) = self.scopes.get_mut(scope_id.0 as usize) else { continue };
            let used = if scope.key.kind.is_upstream() { settlement.upstream } else { settlement.used };
            for (limit, tat) in scope.limits.rates.iter().zip(scope.tats.iter_mut()) {
                let dim = limit.dimension;
                *tat = bucket::adjust(limit, *tat, now, reservation.cost.of(dim), used.of(dim));
            }
            for (limit, spent) in scope.limits.budgets.iter().zip(scope.spent.iter_mut()) {
                let period = reservation.calendar.period(limit.period).id;
                *spent = spent.settled(period, reservation.cost.money, used.money);
            }
            scope.in_flight = scope.in_flight.saturating_sub(1);
        }
        Settled::Reconciled
    }

    /// Settles every reservation whose lease ran out by `now`: the gateway's own scopes
    /// keep its request and input but get its output back (what it generated is
    /// unknown); deployment scopes keep everything, since the call may have reached the
    /// provider. Returns how many expired.
    pub fn expire(&mut self, now: Nanos) -> usize {
        let mut expired = 0;
        while let Some(Reverse((at, id))) = self.expiry.peek().copied() {
            if at > now {
                break;
            }
            self.expiry.pop();
            let Some(cost) = self.open.get(&id).map(|r| r.cost) else { continue };
            self.settle(now, id, Settlement { used: Cost { output_tokens: 0, ..cost }, upstream: cost });
            expired += 1;
        }
        expired
    }

    /// Pauses a scope until `until`: every reservation through it waits (coordinated
    /// backoff after a provider's 429). A pause never shortens an existing one.
    pub fn pause(&mut self, id: ScopeId, until: Nanos) {
        if let Some(scope) = self.scopes.get_mut(id.0 as usize) {
            scope.paused_until = scope.paused_until.max(until);
        }
    }

    /// Holds a scope (an operator's pause, until released) or releases it: while held,
    /// every reservation through it is refused with limiter `paused` and a retry hint of
    /// [`HOLD_RETRY`]. Unlike [`Ledger::pause`] it has no end of its own, and a held
    /// tenant does not count as waiting for fair sharing (it must not hold others back).
    pub fn hold(&mut self, id: ScopeId, held: bool) {
        if let Some(scope) = self.scopes.get_mut(id.0 as usize) {
            scope.held = held;
        }
    }

    fn check_held(&self, path: &[ScopeId]) -> Result<(), Rejection> {
        let held = path.iter().filter_map(|id| self.scopes.get(id.0 as usize)).find(|s| s.held);
        held.map_or(Ok(()), |scope| Err(scope.rejection(LimiterName::Paused, RejectionKind::RetryAfter(HOLD_RETRY))))
    }

    /// Holds the per-minute (or shorter) buckets of `dimension` on a scope to at most
    /// `remaining` units available now, as the provider reported (see
    /// [`bucket::tighten`]). Never loosens; unknown scopes are ignored.
    pub fn tighten(&mut self, now: Nanos, id: ScopeId, dimension: Dimension, remaining: u64, reset: Option<Duration>) {
        let Some(scope) = self.scopes.get_mut(id.0 as usize) else { return };
        for (limit, tat) in scope.limits.rates.iter().zip(scope.tats.iter_mut()) {
            if limit.dimension == dimension && limit.period <= TIGHTEN_MAX_PERIOD {
                *tat = bucket::tighten(limit, *tat, now, remaining, reset);
            }
        }
    }

    /// Re-anchors a scope's guarded buckets at the instant a request of `cost` they admitted
    /// went to the provider, `sent` (see [`bucket::sent`]). Never loosens; unknown scopes
    /// are ignored.
    pub fn sent(&mut self, id: ScopeId, cost: Cost, sent: Nanos) {
        let Some(scope) = self.scopes.get_mut(id.0 as usize) else { return };
        for (limit, tat) in scope.limits.rates.iter().zip(scope.tats.iter_mut()) {
            *tat = bucket::sent(limit, *tat, sent, cost.of(limit.dimension));
        }
    }

    /// Debits `cost` from every bucket of `path` whatever they hold, down to an empty
    /// bucket at most (never into debt), without a reservation or a concurrency slot: a
    /// shadow account of what was admitted elsewhere (a fallback limiter tracking what the
    /// shared store granted, so it takes over without a fresh burst, and without a debt
    /// that would lock it out for long if this instance had more than its share).
    pub fn charge(&mut self, now: Nanos, path: &[ScopeId], cost: Cost) {
        for id in path {
            let Some(scope) = self.scopes.get_mut(id.0 as usize) else { continue };
            for (limit, tat) in scope.limits.rates.iter().zip(scope.tats.iter_mut()) {
                let empty = Tat(Nanos(now.0.saturating_add(bucket::units_ns(limit, limit.burst.get()))));
                let charged = bucket::adjust(limit, *tat, now, 0, cost.of(limit.dimension));
                *tat = if charged.0 > empty.0 { Tat(empty.0.max(tat.0)) } else { charged };
            }
        }
    }

    /// The dimension of each of a scope's rate limits, in their order (that of
    /// [`ScopeSnapshot::rates`]).
    #[must_use]
    pub fn rate_dimensions(&self, id: ScopeId) -> Vec<Dimension> {
        self.scopes.get(id.0 as usize).map_or_else(Vec::new, |s| s.limits.rates.iter().map(|r| r.dimension).collect())
    }

    /// Reservations not yet settled or expired.
    #[must_use]
    pub fn open_reservations(&self) -> usize {
        self.open.len()
    }

    /// The live state of a scope.
    #[must_use]
    pub fn snapshot(&self, now: Nanos, id: ScopeId) -> Option<ScopeSnapshot> {
        let scope = self.scopes.get(id.0 as usize)?;
        let rates = scope
            .limits
            .rates
            .iter()
            .zip(&scope.tats)
            .map(|(limit, tat)| RateSnapshot {
                limiter: limit.name(),
                limit: limit.amount.get(),
                burst: limit.burst.get(),
                remaining: bucket::remaining(limit, *tat, now),
                reset: bucket::until_full(*tat, now),
            })
            .collect();
        let cap = scope.limits.concurrency.map(std::num::NonZeroU64::get);
        let budgets = scope
            .limits
            .budgets
            .iter()
            .zip(&scope.spent)
            .map(|(b, spent)| BudgetSnapshot { period: b.period, limit: b.amount.get(), spent: *spent })
            .collect();
        Some(ScopeSnapshot {
            key: scope.key.clone(),
            rates,
            in_flight: (scope.in_flight, cap),
            held: scope.held,
            budgets,
        })
    }

    /// Every registered scope's id, in registration order.
    pub fn scope_ids(&self) -> impl Iterator<Item = ScopeId> + '_ {
        (0..self.scopes.len()).map(|i| ScopeId(u32::try_from(i).unwrap_or(u32::MAX)))
    }
}

/// Why one bucket did not take a cost.
enum Taken {
    /// It never will.
    NeverFits,
    /// It waits behind another cost's claim until then.
    Behind(Nanos),
    /// It needs the window idle, which it is not until then; the claim it would record.
    NotIdle(Nanos, Claim),
    /// Not until then.
    NotUntil(Nanos),
}

impl ScopeState {
    fn rejection(&self, limiter: LimiterName, kind: RejectionKind) -> Rejection {
        Rejection { scope: self.key.clone(), limiter, kind }
    }

    /// Bucket `j` taking `units` for a caller with `share` (of shared scopes' bursts) who
    /// waits until `waiter.0` and is `waiter.1`: its new state, or why not.
    fn take(
        &self,
        j: usize,
        now: Nanos,
        units: u64,
        share: Share,
        (deadline, by): (Option<Nanos>, Claimer),
    ) -> Result<Tat, Taken> {
        let (limit, tat) = (&self.limits.rates[j], self.tats[j]);
        let usable = if self.key.kind.is_shared() { share } else { Share::FULL };
        let need = bucket::need(limit, units, usable);
        if let Some((_, claim)) = self.claim.filter(|(at, _)| *at == j)
            && let Some(until) = claim.holds_back(need, share, tat, now)
        {
            return Err(Taken::Behind(until));
        }
        match bucket::take_share(limit, tat, now, units, usable) {
            Ok(next) => Ok(next),
            Err(Refusal::NeverFits) => Err(Taken::NeverFits),
            Err(Refusal::NotUntil(at)) => {
                Err(Claim::of(need, share, at, deadline, by).map_or(Taken::NotUntil(at), |c| Taken::NotIdle(at, c)))
            }
        }
    }

    /// Charges a reservation of `money` to every budget in its current period, spent and held
    /// (a new period starts from 0).
    fn charge(&mut self, calendar: Calendar, money: u64) {
        if money == 0 {
            return;
        }
        for (limit, spent) in self.limits.budgets.iter().zip(self.spent.iter_mut()) {
            *spent = spent.charged(calendar.period(limit.period).id, money);
        }
    }

    /// A grant of `cost` drops the scope's claim when it lapsed or the grant is at least as
    /// large as its claimer (the claimer itself, or one that took the idle window first).
    fn drop_claim_passed_by(&mut self, now: Nanos, cost: Cost, share: Share) {
        let Some((j, claim)) = self.claim else { return };
        let share = if self.key.kind.is_shared() { share } else { Share::FULL };
        let Some(limit) = self.limits.rates.get(j) else { return };
        let step = bucket::need(limit, cost.of(limit.dimension), share).step;
        if claim.until <= now || step >= claim.step {
            self.claim = None;
        }
    }
}
