//! Waiting instead of failing: one queue per deployment, served by a dispatcher task that
//! exists only while requests wait.
//!
//! A request that does not fit now waits, up to its class's `max_wait`, in the deployment's
//! [`FairQueue`]. The dispatcher tries the queue's head against the store; when the store
//! refuses, it sleeps until the refusing bucket's next-available instant (a tenant's own
//! refusal blocks only that tenant), or until a settlement on the deployment gives capacity
//! back — never polling. New requests go straight to the store only when nothing of their
//! class or higher waits, so nobody overtakes the queue.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use crate::bucket::{Claimer, Share};
use crate::budget::Calendar;
use crate::clock::{Clock, Nanos, within};
use crate::decision::{Demand, FairShare, Grant, Rejection, RejectionKind};
use crate::drain::{Ahead, DrainRate, Pricing};
use crate::guarantee::HeldBack;
use crate::limit::{Cost, LimiterName, Settlement};
use crate::scope::ScopeId;
use crate::store::{QuotaStore, ReserveError, StoreError};
use crate::waiting::{Block, FairQueue, PassedOver, Waiter, WaiterId};

/// How long the dispatcher waits before trying again when every slot is busy and no
/// settlement on this instance signals a free one (another instance may free it).
const SLOT_POLL: Duration = Duration::from_millis(25);
/// How far apart the instances sharing a store try a bucket's next free instant
/// ([`DeploymentQueue::with_stagger`]): two ticks of the runtime's millisecond timer.
const STAGGER: Duration = Duration::from_millis(2);

/// What a waiting request asks for.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The quota path.
    pub path: Vec<ScopeId>,
    /// The cost.
    pub cost: Cost,
    /// Its share of shared bursts.
    pub share: Share,
    /// The reservation lease.
    pub lease: Duration,
    /// Tenant index, for fair sharing.
    pub tenant: u32,
    /// The caller's key index: what a refusal of its own limits blocks.
    pub lane: u32,
    /// The tenant's weight.
    pub weight: NonZeroU32,
    /// The class's priority.
    pub priority: u8,
    /// The tenant's fair-share claim on the deployment.
    pub fair: Option<FairShare>,
    /// The current day and month, for money budgets.
    pub calendar: Calendar,
    /// When the request stops waiting (`None`: no end known): what is left of it at each
    /// try bounds the claims a refusal records (see [`crate::bucket::Claim`]).
    pub deadline: Option<Nanos>,
    /// Who asks: its claims carry it, so they go with it ([`Withdrawal`]).
    pub claimer: Claimer,
    /// The other deployments it may be admitted on (the rest of its pool's members, in the
    /// order placement gave), tried after `path` in one store step; empty for one
    /// deployment. The grant says which one took it ([`Waited::member`]).
    pub others: Vec<Alternative>,
    /// How many times the client says it sent this request before: a retry waits ahead of
    /// its own lane's first attempts ([`FairQueue::push`]).
    pub retries: u8,
}

/// A pool member a waiting request may also be admitted on: its quota path and the
/// request's cost there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// The quota path on that member (the caller's scopes, then the member's).
    pub path: Vec<ScopeId>,
    /// The request's cost on it.
    pub cost: Cost,
}

impl Ask {
    /// The store demand for this ask at `now`; a grant reports the caller's own scopes (its
    /// rate-limit headers).
    #[must_use]
    pub fn demand(&self, now: Nanos) -> Demand<'_> {
        let (path, cost, lease, share) = (&self.path[..], self.cost, self.lease, self.share);
        let patience = self.deadline.map(|deadline| deadline.since(now));
        Demand {
            path,
            cost,
            lease,
            share,
            fair: self.fair.clone(),
            report_own: true,
            calendar: self.calendar,
            patience,
            claimer: self.claimer,
        }
    }

    /// The demands on every member it may be admitted on, `path` first.
    #[must_use]
    pub fn demands(&self, now: Nanos) -> Vec<Demand<'_>> {
        let first = self.demand(now);
        let others = self.others.iter().map(|other| Demand { path: &other.path, cost: other.cost, ..first.clone() });
        let mut demands = Vec::with_capacity(1 + self.others.len());
        demands.extend(others);
        demands.insert(0, first);
        demands
    }

    /// Admits it on the first of its members that passes (`path`, then `others`, in one
    /// store step): which one (0 is `path`) and the grant.
    ///
    /// # Errors
    /// The refusal a waiting request heeds (see [`QuotaStore::admit_first`]).
    pub async fn admit(&self, store: &dyn QuotaStore, now: Nanos) -> Result<(usize, Grant), ReserveError> {
        if self.others.is_empty() {
            store.admit(self.demand(now)).await.map(|grant| (0, grant))
        } else {
            store.admit_first(self.demands(now)).await
        }
    }

    fn fairness_cost(&self) -> u64 {
        self.cost.input_tokens.saturating_add(self.cost.output_tokens).max(1)
    }
}

/// Withdraws a waiting request's claims when the request goes while it waits (its client
/// hung up and its future was dropped), so the idle window it claimed serves the others at
/// once instead of lapsing a grace later. Disarmed when the wait ends by itself (a grant, or
/// its deadline: then the claims lapse on their own). The withdrawal runs as a task of its
/// own: a dropped future cannot wait for the store.
#[derive(Debug)]
pub struct Withdrawal {
    store: Arc<dyn QuotaStore>,
    paths: Vec<Vec<ScopeId>>,
    by: Claimer,
    armed: bool,
}

impl Withdrawal {
    /// Armed for the claims of `ask` in `store`.
    #[must_use]
    pub fn of(store: &Arc<dyn QuotaStore>, ask: &Ask) -> Self {
        Self {
            store: Arc::clone(store),
            paths: std::iter::once(&ask.path).chain(ask.others.iter().map(|o| &o.path)).cloned().collect(),
            by: ask.claimer,
            armed: ask.claimer != Claimer::NOBODY,
        }
    }

    /// The wait ended by itself: nothing to withdraw.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Withdrawal {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (store, paths, by) = (Arc::clone(&self.store), std::mem::take(&mut self.paths), self.by);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for path in paths {
                    if let Err(e) = store.withdraw(&path, by).await {
                        tracing::debug!(error = %e, "withdrawing a gone request's claims failed; they lapse by themselves");
                    }
                }
            });
        }
    }
}

/// Why waiting did not end in a grant.
#[derive(Debug)]
pub enum WaitError {
    /// The queue for this class is full.
    QueueFull,
    /// `max_wait` passed; the queue estimates the request could pass after this.
    TimedOut {
        /// The last refusal seen for it.
        rejection: Option<Rejection>,
        /// The estimated wait from now.
        eta: Duration,
    },
    /// The store refused for good or failed.
    Store(ReserveError),
}

/// What the queue reports about a wait, whatever its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waited {
    /// The ETA the queue would have answered when the request joined it (what a refusal
    /// at that moment would have said in `retry_after`).
    pub eta: Duration,
    /// Whether, and for whom, it was held back at least once (see [`crate::guarantee`]).
    pub held: Option<HeldBack>,
    /// When the dispatcher's grant came, by the queue's clock (the waiting task may resume
    /// later on a busy machine: the request's time from grant to wire counts from here).
    pub granted: Option<Nanos>,
    /// The refusal that held it last (its own, or else the last one of its lane or of the
    /// shared scopes while it waited); `None` when no limit refused while it waited.
    pub bound_by: Option<Rejection>,
    /// Which of the ask's members the grant is on (0: its `path`; `i`: `others[i - 1]`).
    pub member: usize,
}

type Reply = (Result<(usize, Grant), ReserveError>, Option<HeldBack>, Nanos, Option<Rejection>);

struct Pending {
    ask: Ask,
    reply: oneshot::Sender<Reply>,
    last_refusal: Option<Rejection>,
    held: Option<HeldBack>,
    /// When it joined the line.
    joined: Nanos,
}

impl Pending {
    /// Notes that it was held back (the first reason counts).
    fn hold(&mut self, by: HeldBack) {
        self.held.get_or_insert(by);
    }
}

#[derive(Default)]
struct State {
    fair: FairQueue,
    pending: HashMap<WaiterId, Pending>,
    per_class: HashMap<u8, usize>,
    next_id: u64,
    dispatching: bool,
    drain: DrainRate,
    /// Classes (by priority) an operator paused, with the refusal their requests get.
    held: HashMap<u8, Rejection>,
    /// The last refusal of each lane's own scopes, and of the shared scopes, while requests
    /// wait: what held a waiter that was never tried itself (it waited behind its lane's
    /// head). Forgotten when the queue empties.
    lane_refusals: HashMap<u32, Rejection>,
    shared_refusal: Option<Rejection>,
}

impl State {
    /// The refusal on record for `pending`: its own, else its lane's, else the shared scopes'.
    fn on_record(&self, pending: &Pending) -> Option<Rejection> {
        let lane = || self.lane_refusals.get(&pending.ask.lane).cloned();
        pending.last_refusal.clone().or_else(lane).or_else(|| self.shared_refusal.clone())
    }

    /// Forgets the refusals on record once nobody waits and nobody is still to be answered:
    /// a waiter past its deadline that its own timer has not answered yet is told what held
    /// its lane, even when it was never tried itself.
    fn forget_refusals_when_idle(&mut self) {
        if self.fair.is_empty() && self.pending.is_empty() {
            self.lane_refusals.clear();
            self.shared_refusal = None;
        }
    }
}

/// The waiting requests of one deployment.
pub struct DeploymentQueue {
    state: Mutex<State>,
    wake: Notify,
    store: Arc<dyn QuotaStore>,
    clock: Arc<dyn Clock>,
    /// The queues of the pools this deployment is a member of: capacity it gets back may
    /// admit their waiters too.
    pools: Mutex<Vec<std::sync::Weak<DeploymentQueue>>>,
    /// Whether its tries at a bucket's next free instant are staggered (see
    /// [`DeploymentQueue::with_stagger`]).
    staggered: bool,
}

impl std::fmt::Debug for DeploymentQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeploymentQueue").field("waiting", &self.lock().fair.len()).finish_non_exhaustive()
    }
}

impl DeploymentQueue {
    /// An empty queue over `store`.
    #[must_use]
    pub fn new(store: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>) -> Arc<Self> {
        let staggered = store.shared();
        Self::with_stagger(store, clock, staggered)
    }

    /// A queue whose tries at a bucket's next free instant are `staggered` or not ([`new`]
    /// staggers them on a store other instances share).
    ///
    /// Every instance's queue waiting on a bucket learns the same next free instant from
    /// the shared store and tries it then; the first try to reach the store wins. Left to
    /// their timers (whole milliseconds, each runtime on its own grid) the same instance
    /// wins most ties, and its clients get more than their share of the deployment (about
    /// 0.27 / 0.33 / 0.40 of a pool over three instances with ten clients each), while a
    /// retry on the losing instance may wait its whole `max_wait` in vain. Staggered, a
    /// queue where a retried request waits tries at the instant, and any other queue at a
    /// random moment a quarter to one and a quarter [`STAGGER`] after it: ties among first
    /// attempts fall evenly, and a retry waiting on any instance is tried first. The
    /// stagger is kept to two timer ticks because lateness can cost capacity: a bucket that
    /// is full at the instant (a waiting cost needing its whole burst) loses the refill of
    /// every millisecond late.
    ///
    /// [`new`]: DeploymentQueue::new
    pub fn with_stagger(store: Arc<dyn QuotaStore>, clock: Arc<dyn Clock>, staggered: bool) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            store,
            clock,
            pools: Mutex::new(Vec::new()),
            staggered,
        })
    }

    /// Makes this deployment's returned capacity also wake `pool`'s queue (a pool it is a
    /// member of). Queues of pools no longer configured are forgotten as they go.
    pub fn wakes(&self, pool: &Arc<Self>) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        pools.retain(|p| p.strong_count() > 0);
        if !pools.iter().any(|p| std::ptr::eq(p.as_ptr(), Arc::as_ptr(pool))) {
            pools.push(Arc::downgrade(pool));
        }
    }

    /// The clock its waits and its deployment's settlements go by.
    #[must_use]
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests waiting now.
    #[must_use]
    pub fn depth(&self) -> usize {
        self.lock().fair.len()
    }

    /// Whether a request of `priority` must queue behind others rather than try first
    /// (also while its class is paused: it then waits, held, up to its `max_wait`).
    #[must_use]
    pub fn must_queue(&self, priority: u8) -> bool {
        let state = self.lock();
        state.fair.has_waiting_at_or_above(priority) || state.held.contains_key(&priority)
    }

    /// Requests waiting now, per class priority.
    #[must_use]
    pub fn depth_by_priority(&self) -> Vec<(u8, usize)> {
        let mut depths: Vec<(u8, usize)> = self.lock().per_class.iter().map(|(p, n)| (*p, *n)).collect();
        depths.sort_unstable();
        depths
    }

    /// Pauses the class of `priority` on this queue (`Some(refusal)`: what its requests are
    /// told when their wait runs out) or resumes it (`None`: its waiters go at once).
    /// Per instance: other gateway instances keep serving the class.
    pub fn hold_class(&self, priority: u8, refusal: Option<Rejection>) {
        let mut state = self.lock();
        state.fair.pause_class(priority, refusal.is_some());
        match refusal {
            Some(refusal) => {
                for pending in state.pending.values_mut().filter(|p| p.ask.priority == priority) {
                    pending.last_refusal = Some(refusal.clone());
                }
                state.held.insert(priority, refusal);
            }
            None => {
                state.held.remove(&priority);
                state.fair.unblock();
            }
        }
        drop(state);
        self.wake.notify_one();
    }

    /// The refusal for a request of `priority` while its class is paused here, if it is.
    #[must_use]
    pub fn class_hold(&self, priority: u8) -> Option<Rejection> {
        self.lock().held.get(&priority).cloned()
    }

    /// Capacity may have come back (a settlement on this deployment): retry the head now.
    pub fn capacity_returned(&self) {
        let pools: Vec<Arc<Self>> = {
            let pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
            pools.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        for pool in pools {
            pool.capacity_returned();
        }
        let mut state = self.lock();
        if state.fair.is_empty() {
            return;
        }
        state.fair.unblock();
        drop(state);
        self.wake.notify_one();
    }

    /// Waits for a grant, at most `max_wait`, with at most `max_queue` of the class waiting;
    /// with what the wait was predicted to take and whether the request was held back.
    ///
    /// # Errors
    /// A full queue, the wait running out, or the store refusing for good.
    pub async fn wait(
        self: &Arc<Self>,
        mut ask: Ask,
        max_wait: Duration,
        max_queue: usize,
        refusal: Option<Rejection>,
    ) -> (Result<Grant, WaitError>, Waited) {
        let now = self.clock.now();
        let mut waited = Waited::default();
        let (id, reply) = {
            let mut state = self.lock();
            let queued = state.per_class.get(&ask.priority).copied().unwrap_or(0);
            if queued >= max_queue {
                return (Err(WaitError::QueueFull), waited);
            }
            waited.eta = Self::eta(&state, &ask, refusal.as_ref());
            *state.per_class.entry(ask.priority).or_default() += 1;
            state.next_id += 1;
            let id = WaiterId(state.next_id);
            let deadline = now.after(max_wait);
            ask.deadline = Some(ask.deadline.map_or(deadline, |d| d.min(deadline)));
            let waiter = Waiter {
                id,
                tenant: ask.tenant,
                lane: ask.lane,
                priority: ask.priority,
                weight: ask.weight,
                cost: ask.fairness_cost(),
                deadline,
                retries: ask.retries,
            };
            state.fair.push(waiter);
            let (reply, receive) = oneshot::channel();
            let refusal = refusal.or_else(|| state.held.get(&ask.priority).cloned());
            state.pending.insert(id, Pending { ask, reply, last_refusal: refusal, held: None, joined: now });
            if !state.dispatching {
                state.dispatching = true;
                tokio::spawn(Arc::clone(self).dispatch());
            }
            (id, receive)
        };
        self.wake.notify_one();
        let mut ticket = Ticket { queue: self, id: Some(id) };
        let result = match within(self.clock.as_ref(), max_wait, reply).await {
            Some(Ok((result, held, at, bound_by))) => {
                ticket.id = None;
                waited.held = held;
                waited.bound_by = bound_by;
                waited.granted = result.is_ok().then_some(at);
                result
                    .map(|(member, grant)| {
                        waited.member = member;
                        grant
                    })
                    .map_err(WaitError::Store)
            }
            Some(Err(_)) => Err(WaitError::Store(ReserveError::Store(StoreError("queue closed".into())))),
            None => {
                let (rejection, eta, held) = ticket.give_up();
                waited.held = held;
                waited.bound_by.clone_from(&rejection);
                Err(WaitError::TimedOut { rejection, eta })
            }
        };
        (result, waited)
    }

    /// When `ask` would be granted if it joined the queue now (see [`Waited::eta`]):
    /// what waits ahead of it and its own cost, at the rate the queue drains at, priced in
    /// the unit of the limit that refused it ([`DrainRate::eta`]).
    #[must_use]
    pub fn predict(&self, ask: &Ask, refusal: Option<&Rejection>) -> Duration {
        Self::eta(&self.lock(), ask, refusal)
    }

    fn forget(&self, state: &mut State, id: WaiterId) -> Option<Pending> {
        state.fair.remove(id);
        let pending = state.pending.remove(&id)?;
        if let Some(n) = state.per_class.get_mut(&pending.ask.priority) {
            *n = n.saturating_sub(1);
        }
        Some(pending)
    }

    /// The wait of `ask` were it to join now, last refused by `refusal` (the queue's last
    /// refusal of the shared scopes when it was not tried itself).
    fn eta(state: &State, ask: &Ask, refusal: Option<&Rejection>) -> Duration {
        let ahead = state.fair.ahead(ask.priority, ask.lane, ask.retries).plus(Ahead::own(ask.fairness_cost()));
        let refusal = refusal.or(state.shared_refusal.as_ref());
        state.drain.eta(ahead, Pricing::of(refusal), refusal.and_then(Rejection::retry_after))
    }

    async fn dispatch(self: Arc<Self>) {
        loop {
            let now = self.clock.now();
            let next = {
                let mut state = self.lock();
                // Past their deadline: out of the line. Their own timers answer them (with the
                // last refusal and an ETA), so their reply channels stay open.
                state.fair.expire(now);
                if state.fair.is_empty() {
                    state.dispatching = false;
                    state.forget_refusals_when_idle();
                    return;
                }
                let head = state.fair.next(now).map(|w| (w.id, w.tenant));
                let behind = head.is_some_and(|(id, tenant)| state.fair.waits_besides(tenant, id, now));
                match head.and_then(|(id, _)| state.pending.get(&id).map(|p| (id, p.ask.clone()))) {
                    Some((id, mut ask)) => {
                        if let Some(fair) = &mut ask.fair {
                            fair.queued_behind = behind;
                        }
                        Ok((id, ask))
                    }
                    None => Err((state.fair.wake_at(now), state.fair.holds_retry())),
                }
            };
            match next {
                Ok((id, ask)) => self.try_one(id, ask).await,
                Err((wake, retries)) => self.sleep(now, wake, retries).await,
            }
        }
    }

    /// Sleeps until `wake` (staggered: see [`DeploymentQueue::with_stagger`]; `retries`:
    /// whether a retried request waits here) or until woken.
    async fn sleep(&self, now: Nanos, wake: Option<Nanos>, retries: bool) {
        let wait = wake.map_or(Duration::from_secs(1), |at| at.since(now) + self.stagger(retries));
        tokio::select! {
            () = self.wake.notified() => {}
            () = self.clock.sleep(wait) => {}
        }
    }

    /// How long after a bucket's next free instant this queue tries it.
    fn stagger(&self, retries: bool) -> Duration {
        if !self.staggered || retries {
            return Duration::ZERO;
        }
        STAGGER.mul_f64(0.25 + rand::random::<f64>())
    }

    async fn try_one(&self, id: WaiterId, ask: Ask) {
        let result = ask.admit(self.store.as_ref(), self.clock.now()).await;
        let now = self.clock.now();
        let mut state = self.lock();
        match result {
            Ok((member, grant)) => {
                for (other, why) in state.fair.passed_over(id, now) {
                    let by = match why {
                        PassedOver::Fairness => HeldBack::Tenant,
                        PassedOver::Priority => HeldBack::Class,
                    };
                    state.pending.get_mut(&other).into_iter().for_each(|p| p.hold(by));
                }
                state.fair.admitted(id);
                let joined = state.pending.get(&id).map_or(now, |p| p.joined);
                state.drain.granted(now, joined, ask.fairness_cost());
                match self.forget(&mut state, id) {
                    Some(pending) => {
                        let bound_by = state.on_record(&pending);
                        let granted = (Ok((member, grant)), pending.held, now, bound_by);
                        if let Err((Ok((_, grant)), ..)) = pending.reply.send(granted) {
                            self.release(grant);
                        }
                    }
                    None => self.release(grant),
                }
            }
            Err(ReserveError::Rejected(rejection)) => {
                let own = !rejection.scope.kind.is_shared() || rejection.limiter == LimiterName::FairShare;
                let block = if own { Block::Lane } else { Block::Shared };
                // A spent budget waits for the next day or month, not for capacity: refused at
                // once. One that reservations in flight hold waits for them to settle (a
                // settlement here wakes the queue; elsewhere, the next try is the hint's).
                let budget = rejection.limiter == LimiterName::Budget;
                match rejection.kind {
                    RejectionKind::RetryAfter(wait) if !budget => state.fair.refused(id, block, now.after(wait)),
                    RejectionKind::InFlight(wait) => state.fair.refused(id, block, now.after(wait)),
                    RejectionKind::SlotsBusy => state.fair.refused(id, block, now.after(SLOT_POLL)),
                    RejectionKind::NeverFits { .. } | RejectionKind::RetryAfter(_) => {
                        if let Some(pending) = self.forget(&mut state, id) {
                            let refused = Err(ReserveError::Rejected(rejection.clone()));
                            let _ = pending.reply.send((refused, pending.held, now, Some(rejection)));
                        }
                        return;
                    }
                }
                if own {
                    state.lane_refusals.insert(ask.lane, rejection.clone());
                } else {
                    state.shared_refusal = Some(rejection.clone());
                }
                if let Some(pending) = state.pending.get_mut(&id) {
                    if rejection.limiter == LimiterName::FairShare {
                        pending.hold(HeldBack::Tenant);
                    }
                    pending.last_refusal = Some(rejection);
                }
            }
            Err(error) => {
                if let Some(pending) = self.forget(&mut state, id) {
                    let _ = pending.reply.send((Err(error), pending.held, now, None));
                }
            }
        }
    }

    fn release(&self, grant: Grant) {
        let store = Arc::clone(&self.store);
        tokio::spawn(async move {
            let _ = store.settle(grant.id, Settlement::default()).await;
        });
    }
}

/// Removes its waiter from the queue if the waiting request goes away (timeout, client gone).
struct Ticket<'q> {
    queue: &'q DeploymentQueue,
    id: Option<WaiterId>,
}

impl Ticket<'_> {
    fn give_up(&mut self) -> (Option<Rejection>, Duration, Option<HeldBack>) {
        let Some(id) = self.id.take() else { return (None, Duration::ZERO, None) };
        let mut state = self.queue.lock();
        let Some(pending) = self.queue.forget(&mut state, id) else {
            let everything = state.fair.ahead(u8::MAX, 0, 0);
            let eta = state.drain.eta(everything, Pricing::of(state.shared_refusal.as_ref()), None);
            return (None, eta, None);
        };
        let refusal = state.on_record(&pending);
        let eta = DeploymentQueue::eta(&state, &pending.ask, refusal.as_ref());
        state.forget_refusals_when_idle();
        (refusal, eta, pending.held)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let mut state = self.queue.lock();
            self.queue.forget(&mut state, id);
            state.forget_refusals_when_idle();
        }
    }
}
