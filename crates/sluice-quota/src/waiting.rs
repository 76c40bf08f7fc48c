//! Who goes next when requests wait for capacity: strict priority between traffic
//! classes, weighted fair queuing by token cost between tenants, FIFO within a tenant.
//!
//! Each tenant has a virtual time that advances by `cost / weight` whenever one of its
//! requests is admitted; the waiting tenant with the lowest virtual time goes next. A tenant
//! alone takes all the capacity (it borrows what others leave idle); a tenant that starts
//! waiting joins at the queue's virtual clock (the virtual time at which the last admitted
//! request started), so it gets its share from its first request on (the borrowed capacity
//! is reclaimed at once) without credit for the time it was idle. A refusal on a tenant's own limit blocks only
//! that tenant; a refusal on a shared limit blocks the queue until the shared bucket can
//! take the head. Pure: every call takes `now`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::num::NonZeroU32;

use crate::clock::Nanos;
use crate::drain::Ahead;

/// Virtual time resolution: cost units per unit of weight, scaled to keep integer math exact.
const SCALE: u128 = 1 << 20;

/// A waiting request's handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaiterId(pub u64);

/// A request waiting for capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    /// Its handle.
    pub id: WaiterId,
    /// Its tenant (an index the caller chooses): the unit of fair sharing.
    pub tenant: u32,
    /// Its lane (the caller's key): the unit a refusal of the caller's own limits blocks.
    pub lane: u32,
    /// Its class's priority: lower goes first.
    pub priority: u8,
    /// Its tenant's weight.
    pub weight: NonZeroU32,
    /// What it costs, in the unit fairness is measured in (tokens).
    pub cost: u64,
    /// When it stops waiting.
    pub deadline: Nanos,
    /// How many times its client says it sent this request before (its SDK retried after a
    /// refusal): it waits ahead of its own lane's waiters retried fewer times.
    pub retries: u8,
}

/// What a refusal blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Only the waiter's lane (one of its caller's own limits refused).
    Lane,
    /// Everyone (a shared limit refused).
    Shared,
}

/// Why a waiter that could have gone was passed over (see [`FairQueue::passed_over`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassedOver {
    /// A request of a higher class went first.
    Priority,
    /// A request of another tenant, further behind its fair share, went first.
    Fairness,
}

/// The waiting requests of one upstream. See the module docs.
#[derive(Debug, Default)]
pub struct FairQueue {
    classes: BTreeMap<u8, BTreeMap<u32, VecDeque<Waiter>>>,
    index: HashMap<WaiterId, (u8, u32)>,
    virtual_time: HashMap<u32, u128>,
    clock: u128,
    lane_blocked: HashMap<u32, Nanos>,
    shared_blocked: Nanos,
    paused_tenants: HashSet<u32>,
    paused_classes: HashSet<u8>,
}

impl FairQueue {
    /// An empty queue.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests waiting.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether nothing waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Whether a request of `priority` or a higher one (a lower number) is waiting: a new
    /// request of `priority` must then queue behind it rather than try first.
    #[must_use]
    pub fn has_waiting_at_or_above(&self, priority: u8) -> bool {
        self.classes.range(..=priority).any(|(_, tenants)| tenants.values().any(|q| !q.is_empty()))
    }

    fn is_waiting(&self, tenant: u32) -> bool {
        self.classes.values().any(|tenants| tenants.get(&tenant).is_some_and(|q| !q.is_empty()))
    }

    /// Adds a waiter to its tenant's line: at the back, except that a retried request goes
    /// before the waiters of its own lane retried fewer times. It was refused before, so it
    /// has waited longest; in a closed loop of clients above capacity, first attempts would
    /// otherwise take every place a retry comes back for, and the same clients would be
    /// refused again and again. Only its own lane's order changes: each of those waiters
    /// moves into the next place the lane holds, other lanes (the tenant's other keys) keep
    /// theirs, so a client claiming retries overtakes nobody but its own key's requests.
    pub fn push(&mut self, waiter: Waiter) {
        if !self.is_waiting(waiter.tenant) {
            let time = self.virtual_time.entry(waiter.tenant).or_insert(self.clock);
            *time = (*time).max(self.clock);
        }
        self.index.insert(waiter.id, (waiter.priority, waiter.tenant));
        let line = self.classes.entry(waiter.priority).or_default().entry(waiter.tenant).or_default();
        let (lane, retries) = (waiter.lane, waiter.retries);
        let Some(at) = line.iter().position(|w| w.lane == lane && w.retries < retries) else {
            line.push_back(waiter);
            return;
        };
        let mut carried = waiter;
        for place in line.iter_mut().skip(at).filter(|w| w.lane == lane) {
            carried = std::mem::replace(place, carried);
        }
        line.push_back(carried);
    }

    /// The waiter to try now, if any may go.
    #[must_use]
    pub fn next(&self, now: Nanos) -> Option<&Waiter> {
        if self.shared_blocked > now {
            return None;
        }
        for (priority, tenants) in &self.classes {
            if self.paused_classes.contains(priority) {
                continue;
            }
            let ready = tenants
                .iter()
                .filter(|(tenant, _)| !self.paused_tenants.contains(tenant))
                .filter_map(|(tenant, line)| Some((tenant, self.first_unblocked(line, now)?)));
            let best = ready.min_by_key(|(tenant, waiter)| {
                let time = self.virtual_time.get(tenant).copied().unwrap_or(0);
                (time, waiter.id)
            });
            if let Some((_, waiter)) = best {
                return Some(waiter);
            }
        }
        None
    }

    /// Whether `tenant` has a waiter besides `except` that may go at `now` (one not held by a
    /// refusal of its caller's own limits): were `except` admitted, the tenant would still
    /// be waiting for the upstream's capacity.
    #[must_use]
    pub fn waits_besides(&self, tenant: u32, except: WaiterId, now: Nanos) -> bool {
        self.classes
            .values()
            .filter_map(|tenants| tenants.get(&tenant))
            .flatten()
            .any(|w| w.id != except && self.lane_blocked.get(&w.lane).is_none_or(|until| *until <= now))
    }

    fn first_unblocked<'a>(&self, line: &'a VecDeque<Waiter>, now: Nanos) -> Option<&'a Waiter> {
        line.iter().find(|w| self.lane_blocked.get(&w.lane).is_none_or(|until| *until <= now))
    }

    /// The waiters that `chosen` (the one [`FairQueue::next`] returned at `now`) goes
    /// before although they arrived earlier and could have gone: the front of each other
    /// tenant's line in its class, and of every line of lower classes, when that waiter is
    /// neither blocked nor paused. A line's later waiters wait behind its front (FIFO) and
    /// are not counted; so one call costs one look per tenant and class, not per waiter.
    #[must_use]
    pub fn passed_over(&self, chosen: WaiterId, now: Nanos) -> Vec<(WaiterId, PassedOver)> {
        let Some(&(priority, tenant)) = self.index.get(&chosen) else { return Vec::new() };
        let fronts = self
            .classes
            .range(priority..)
            .filter(|(p, _)| !self.paused_classes.contains(p))
            .flat_map(|(p, tenants)| tenants.iter().map(move |(t, line)| (*p, *t, line)))
            .filter(|(p, t, _)| !self.paused_tenants.contains(t) && (*p, *t) != (priority, tenant))
            .filter_map(|(p, _, line)| Some((p, self.first_unblocked(line, now)?)));
        fronts
            .filter(|(_, waiter)| waiter.id < chosen)
            .map(|(p, waiter)| (waiter.id, if p > priority { PassedOver::Priority } else { PassedOver::Fairness }))
            .collect()
    }

    /// Removes an admitted waiter and advances its tenant's virtual time by its cost.
    pub fn admitted(&mut self, id: WaiterId) -> Option<Waiter> {
        let waiter = self.remove(id)?;
        let step = u128::from(waiter.cost.max(1)) * SCALE / u128::from(waiter.weight.get());
        let time = self.virtual_time.entry(waiter.tenant).or_default();
        self.clock = self.clock.max(*time);
        *time += step;
        Some(waiter)
    }

    /// Records a refusal of `id`: its tenant, or everyone, waits until `until`.
    ///
    /// A shared block outlives a waiter that leaves before it ends (its client gave up): the
    /// next in line waits until then too, so a window a large request needed idle goes
    /// idle for the next one instead of being kept busy by smaller ones (which would leave
    /// large requests served less often than small ones). The bucket refills meanwhile:
    /// nothing is lost, since the block ends when the window is idle.
    pub fn refused(&mut self, id: WaiterId, block: Block, until: Nanos) {
        if block == Block::Shared {
            self.shared_blocked = self.shared_blocked.max(until);
            return;
        }
        let Some(lane) = self.find(id).map(|w| w.lane) else { return };
        let blocked = self.lane_blocked.entry(lane).or_default();
        *blocked = (*blocked).max(until);
    }

    fn find(&self, id: WaiterId) -> Option<&Waiter> {
        let (priority, tenant) = self.index.get(&id)?;
        self.classes.get(priority)?.get(tenant)?.iter().find(|w| w.id == id)
    }

    /// Lifts every block: capacity may have come back (a settlement refunded it).
    pub fn unblock(&mut self) {
        self.shared_blocked = Nanos(0);
        self.lane_blocked.clear();
    }

    /// Takes a waiter out (it gave up or its client left).
    pub fn remove(&mut self, id: WaiterId) -> Option<Waiter> {
        let (priority, tenant) = self.index.remove(&id)?;
        let tenants = self.classes.get_mut(&priority)?;
        let line = tenants.get_mut(&tenant)?;
        let at = line.iter().position(|w| w.id == id)?;
        let waiter = line.remove(at);
        if line.is_empty() {
            tenants.remove(&tenant);
        }
        waiter
    }

    /// Takes out every waiter whose deadline has passed.
    pub fn expire(&mut self, now: Nanos) -> Vec<Waiter> {
        let due: Vec<WaiterId> = self
            .classes
            .values()
            .flat_map(|tenants| tenants.values().flatten())
            .filter(|w| w.deadline <= now)
            .map(|w| w.id)
            .collect();
        due.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// When something may change by itself: a block ends or a deadline passes.
    #[must_use]
    pub fn wake_at(&self, now: Nanos) -> Option<Nanos> {
        let deadlines = self.classes.values().flat_map(|t| t.values().flatten()).map(|w| w.deadline);
        let blocks = self.lane_blocked.values().copied().chain([self.shared_blocked]).filter(|t| *t > now);
        deadlines.chain(blocks).min()
    }

    /// Whether a waiter whose client says it is a retry is in the line.
    #[must_use]
    pub fn holds_retry(&self) -> bool {
        self.classes.values().flat_map(|t| t.values().flatten()).any(|w| w.retries > 0)
    }

    /// What waits ahead of a new request of `priority` (same or higher classes) from
    /// `lane`, retried `retries` times: all of it but its lane's waiters of its class retried
    /// fewer times, which it goes before ([`FairQueue::push`]).
    #[must_use]
    pub fn ahead(&self, priority: u8, lane: u32, retries: u8) -> Ahead {
        self.classes
            .range(..=priority)
            .flat_map(|(p, t)| t.values().flatten().map(move |w| (*p, w)))
            .filter(|(p, w)| !(*p == priority && w.lane == lane && w.retries < retries))
            .fold(Ahead::default(), |ahead, (_, w)| ahead.plus(Ahead::own(w.cost)))
    }

    /// Holds back (or releases) every waiter of a tenant.
    pub fn pause_tenant(&mut self, tenant: u32, paused: bool) {
        if paused {
            self.paused_tenants.insert(tenant);
        } else {
            self.paused_tenants.remove(&tenant);
        }
    }

    /// Holds back (or releases) every waiter of a class.
    pub fn pause_class(&mut self, priority: u8, paused: bool) {
        if paused {
            self.paused_classes.insert(priority);
        } else {
            self.paused_classes.remove(&priority);
        }
    }
}
