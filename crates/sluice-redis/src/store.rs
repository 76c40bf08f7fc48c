//! [`RedisStore`]: the [`QuotaStore`] whose state lives in Redis.
//!
//! A reservation is one operation per hash-tag group of its path, carried by that group's
//! next batch script ([`crate::batch`]). On a standalone server the whole path is one group
//! and one operation: one round trip, atomic. On a cluster a path spans up to three groups
//! ([`crate::keys`]): the shared caller scopes (org, model profile, account; only those with
//! limits), the tenant's own (tenant, team, key; its tag shared with other tenants) and the
//! deployment. The parts are
//! reserved one after the other, in the order the path names them; if one refuses, the
//! parts before it are released. A crash in between leaves the earlier parts reserved until
//! their lease ends: under-admission, never over-admission.
//!
//! A pool's request ([`QuotaStore::admit_first`]) offers one path per member. On a
//! standalone server (or behind Sentinel) they are one group: one operation of its batch
//! tries them in order and makes the first that passes, in one round trip however many
//! members refuse. On a cluster each member's deployment has a slot of its own: the members
//! are asked one after the other, each as above.
//!
//! On a cluster an org or model profile without limits is left off the path: it has no
//! bucket to keep, and reserving on it would send every admission of every tenant through
//! its one slot. It cannot be held there (give it a limit first).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use rand::Rng as _;
use sluice_quota::bucket::{self, Share, Tat};
use sluice_quota::store::{admit_each, soonest};
use sluice_quota::{
    Budget, BudgetPeriod, BudgetSnapshot, Calendar, Claimer, Clock, Cost, Demand, Dimension, Grant, LimiterName,
    Limits, Nanos, QuotaStore, RateSnapshot, Rejection, RejectionKind, ReservationId, ReserveError, ScopeId, ScopeKey,
    ScopeKind, ScopeSnapshot, Settlement, SpendRecord, Spent, StoreError, StoreFuture,
};

use crate::batch::{Batches, Fair, Link, Op, store_error};
use crate::conn::{Connector, Topology};
use crate::keys::{Group, TenantGroups};
use crate::record::{self, ScopeSpec};
use crate::restore;
use crate::scripts::Scripts;
use crate::tls::Tls;

#[derive(Debug, Clone)]
struct Scope {
    key: ScopeKey,
    limits: Limits,
    /// The group whose state hash holds this scope.
    group: Group,
    /// The state hash of that group.
    state: String,
    spec: ScopeSpec,
    /// Left off admission paths (a shared caller scope without limits, on a cluster).
    off_path: bool,
}

/// The registered scopes, by id and by key.
type Registry = (Vec<Arc<Scope>>, HashMap<ScopeKey, ScopeId>);

/// One group's share of a reservation, for settling it, and its scopes right after.
#[derive(Debug)]
struct Reserved {
    part: Part,
    after: Vec<ScopeSnapshot>,
}

/// One group's share of a reservation, ready to send: the part, and whether its grant
/// reports the caller's own scopes.
#[derive(Debug)]
struct Prepared {
    part: Part,
    report_own: bool,
}

impl Prepared {
    /// The part granted, with its reported scopes from the grant's reply after its leading 1.
    fn granted(self, state: &[i64]) -> Reserved {
        let own = |s: &&Arc<Scope>| self.report_own && !s.key.kind.is_shared();
        let reported: Vec<&Arc<Scope>> = self.part.scopes.iter().filter(own).collect();
        let after = granted_state(&reported, state);
        Reserved { part: self.part, after }
    }
}

/// Whether a reservation may be asked again once its budgets are restored: it charges a
/// budget, and the gateway keeps a store of record.
fn restorable(op: &Op) -> bool {
    matches!(op, Op::Reserve { recorded: true, budgets, .. } if crate::batch::has_budgets(budgets))
}

/// The refusal a batch script answered for a part on `scopes`: its wait, scope index,
/// limit index and kind (kind 9, a budget not restored when asked again, is the store
/// failing).
fn refused(scopes: &[Arc<Scope>], quad: &[i64]) -> ReserveError {
    match *quad {
        [_, _, _, 9] => ReserveError::Store(store_error("a budget was not restored from the ledger")),
        [wait, scope, limit, kind] => ReserveError::Rejected(rejection(scopes, wait, scope, limit, kind)),
        _ => ReserveError::Store(store_error(format!("unexpected refusal: {quad:?}"))),
    }
}

/// One group's share of a reservation, for settling it.
#[derive(Debug, Clone)]
struct Part {
    group: Group,
    /// The reservation's member of the lease set (its id and expiry settlement).
    member: Vec<u8>,
    /// What was reserved, on which scopes as they were then (a reload may change them
    /// before the settlement).
    cost: Cost,
    scopes: Vec<Arc<Scope>>,
    /// The periods its money was charged to.
    calendar: Calendar,
}

impl Part {
    /// The batch operation that settles this part by `settlement`.
    fn settle_op(&self, settlement: Settlement) -> Op {
        let specs: Vec<&ScopeSpec> = self.scopes.iter().map(|s| &s.spec).collect();
        let settle = record::settle_spec(self.cost, settlement.used, settlement.upstream, &specs);
        let budgets =
            record::budget_settle(self.cost.money, settlement.used, settlement.upstream, self.calendar, &specs);
        Op::Settle { member: self.member.clone(), spec: settle.spec, sids: settle.sids, budgets }
    }
}

/// Settings of a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// Where Redis is.
    pub topology: Topology,
    /// Key prefix (inside the hash tags).
    pub prefix: String,
    /// Bound on connecting and on each call.
    pub timeout: Duration,
    /// Certificates for `rediss://` URLs.
    pub tls: Tls,
}

/// Quota state in Redis, shared by every gateway instance that uses the same prefix.
#[derive(Debug)]
pub struct RedisStore {
    batches: Arc<Batches>,
    prefix: String,
    /// Where tenants live on a cluster.
    tenants: TenantGroups,
    scopes: RwLock<Registry>,
    /// Scopes kept beside another's ([`QuotaStore::keep_with`]): their group, kept across
    /// a new registration of their limits.
    placed: Mutex<HashMap<ScopeKey, Group>>,
    open: Mutex<HashMap<ReservationId, Vec<Part>>>,
    /// The lease a reservation is kept on in Redis when shorter than its own
    /// ([`RedisStore::with_heartbeat`]); `None`: its own lease.
    heartbeat: Option<Duration>,
    /// Redis's clock, for the periods money budgets count in
    /// ([`RedisStore::with_store_periods`]); `None`: the caller's calendar.
    store_clock: Option<Arc<StoreClock>>,
    /// The store of record for money ([`RedisStore::with_record`]).
    record: Option<Arc<dyn SpendRecord>>,
}

/// How often the store's clock is read again (its offset from the local clock).
const STORE_CLOCK_EVERY_MS: u64 = 10_000;

/// Redis's clock as seen from this instance: its offset from the local clock, read with
/// `TIME` at the first admission and then at most every [`STORE_CLOCK_EVERY_MS`], off the
/// request path.
#[derive(Debug)]
struct StoreClock {
    local: Arc<dyn Clock>,
    /// Redis's time less the local clock's, milliseconds (0 until first read).
    offset_ms: AtomicI64,
    /// When (local unix milliseconds) the offset was last asked for; 0: never.
    asked_at_ms: AtomicU64,
    /// The offset was read at least once.
    known: AtomicBool,
}

/// Reads Redis's `TIME` and keeps its offset from `clock.local` (half the round trip taken
/// off); a failed read keeps the offset it had, and is tried again when next due.
async fn read_offset(clock: &StoreClock, link: &Link) {
    let before = clock.local.unix_millis();
    let Ok(Ok(mut conn)) = tokio::time::timeout(link.timeout, link.connector.get()).await else { return };
    let reply = tokio::time::timeout(link.timeout, redis::cmd("TIME").query_async::<(u64, u64)>(&mut conn)).await;
    let Ok(Ok((seconds, micros))) = reply else { return };
    let after = clock.local.unix_millis();
    let redis_ms = seconds.saturating_mul(1_000).saturating_add(micros / 1_000);
    let local_ms = before / 2 + after / 2;
    let offset = i64::try_from(redis_ms).unwrap_or(i64::MAX) - i64::try_from(local_ms).unwrap_or(i64::MAX);
    clock.offset_ms.store(offset, Ordering::Relaxed);
    clock.known.store(true, Ordering::Relaxed);
}

/// Most lease members one renewal script carries: a renewal of many thousands of
/// reservations is this many per call, so no call holds Redis for long.
pub const RENEW_CHUNK: usize = 256;

impl RedisStore {
    /// A store for `config`. Connects on first use.
    #[must_use]
    pub fn new(config: RedisConfig) -> Self {
        let link = Link {
            connector: Connector::new(config.topology, config.timeout).with_tls(config.tls),
            scripts: Scripts::new(),
            timeout: config.timeout,
        };
        Self {
            batches: Arc::new(Batches::new(Arc::new(link))),
            tenants: TenantGroups::new(&config.prefix),
            prefix: config.prefix,
            scopes: RwLock::new((Vec::new(), HashMap::new())),
            placed: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            heartbeat: None,
            store_clock: None,
            record: None,
        }
    }

    /// Keeps what every settlement spends on money budgets in `record`, and admits against
    /// a budget only once Redis holds it restored from there: after Redis lost its memory
    /// (restarted empty, failed over to a replica behind), the first reservation on each
    /// budget restores it, and a second pass [`restore::CATCH_UP`] later brings in what
    /// other instances had not yet written.
    #[must_use]
    pub fn with_record(mut self, record: Arc<dyn SpendRecord>) -> Self {
        self.record = Some(record);
        self
    }

    /// Records what a reservation admitted elsewhere (a local fallback while Redis was
    /// unreachable) spent on the budgets of `path`, so the shared budgets take it in when
    /// they are next restored ([`Self::reconcile`]).
    pub fn record_spent(&self, path: &[ScopeId], calendar: Calendar, settlement: Settlement) {
        let Some(record) = &self.record else { return };
        for scope in path.iter().filter_map(|&id| self.scope(id)) {
            restore::record_settled(&**record, &scope.spec, calendar, settlement);
        }
    }

    /// Brings every registered budget up to the store of record (what instances spent
    /// while they admitted locally included).
    ///
    /// # Errors
    /// When the record cannot be read or Redis does not answer.
    pub async fn reconcile(&self, calendar: Calendar) -> Result<(), StoreError> {
        let Some(record) = &self.record else { return Ok(()) };
        let calendar = self.store_calendar(calendar).await;
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for scope in self.scopes.read().0.iter().filter(|s| !s.spec.budgets.is_empty()) {
            match groups.iter_mut().find(|(state, _)| *state == scope.state) {
                Some((_, sids)) => sids.push(scope.spec.sid.clone()),
                None => groups.push((scope.state.clone(), vec![scope.spec.sid.clone()])),
            }
        }
        for (state, sids) in &groups {
            restore::restore(self.batches.link(), &**record, state, sids, calendar).await?;
        }
        Ok(())
    }

    /// Restores the budgets of `scopes` (of `group`), and once more in a moment.
    async fn restore_part(&self, group: &Group, scopes: &[Arc<Scope>], calendar: Calendar) -> Result<(), StoreError> {
        let Some(record) = &self.record else { return Ok(()) };
        let sids: Vec<String> =
            scopes.iter().filter(|s| !s.spec.budgets.is_empty()).map(|s| s.spec.sid.clone()).collect();
        let state = group.state();
        restore::restore(self.batches.link(), &**record, &state, &sids, calendar).await?;
        restore::catch_up(self.batches.shared_link(), Arc::clone(record), state, sids, calendar);
        Ok(())
    }

    /// Places the day and month that money budgets count in by Redis's clock rather than
    /// the caller's (in the caller's time zone): every instance then starts a period at the
    /// same instant, whatever its own clock's skew, and one whose clock is minutes off
    /// neither starts a period early nor late. `local` is the clock the offset to Redis's
    /// is measured from. Without it (the default) the caller's calendar stands.
    #[must_use]
    pub fn with_store_periods(mut self, local: Arc<dyn Clock>) -> Self {
        let clock = StoreClock {
            local,
            offset_ms: AtomicI64::new(0),
            asked_at_ms: AtomicU64::new(0),
            known: AtomicBool::new(false),
        };
        self.store_clock = Some(Arc::new(clock));
        self
    }

    /// The periods of `asked` (the caller's calendar) as Redis's clock places them, in the
    /// same zone. The clock's offset is read at the first admission (waited for), then again
    /// in the background when due.
    async fn store_calendar(&self, asked: Calendar) -> Calendar {
        let Some(clock) = &self.store_clock else { return asked };
        let now = clock.local.unix_millis();
        let asked_at = clock.asked_at_ms.load(Ordering::Relaxed);
        let due = asked_at == 0 || now.saturating_sub(asked_at) >= STORE_CLOCK_EVERY_MS;
        if due && clock.asked_at_ms.compare_exchange(asked_at, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            if asked_at == 0 {
                read_offset(clock, self.batches.link()).await;
            } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let (clock, batches) = (Arc::clone(clock), Arc::clone(&self.batches));
                runtime.spawn(async move { read_offset(&clock, batches.link()).await });
            }
        }
        if !clock.known.load(Ordering::Relaxed) {
            // Never read (Redis did not answer): the caller's calendar until it is.
            return asked;
        }
        let local = i64::try_from(clock.local.unix_millis()).unwrap_or(i64::MAX);
        let at_ms = local.saturating_add(clock.offset_ms.load(Ordering::Relaxed));
        Calendar::at(u64::try_from(at_ms / 1_000).unwrap_or(0), asked.zone)
    }

    /// Keeps every reservation in Redis on a lease of `heartbeat` (or its own lease, if
    /// shorter) rather than its whole lease: the holder renews what it still holds
    /// ([`QuotaStore::renew`]) well within `heartbeat`, and the reservations of a holder
    /// that died are refunded by the next batch of their group once it has passed. Without
    /// it (the default) a reservation lives its whole lease unless settled.
    #[must_use]
    pub fn with_heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = Some(heartbeat.max(Duration::from_millis(1)));
        self
    }

    async fn call<T: redis::FromRedisValue>(&self, invocation: redis::ScriptInvocation<'_>) -> Result<T, StoreError> {
        self.batches.link().call(invocation).await
    }

    fn scripts(&self) -> &Scripts {
        &self.batches.link().scripts
    }

    /// The path split into groups, in order of first appearance (a single group on a
    /// standalone server).
    fn parts(&self, path: &[ScopeId]) -> Vec<(Group, Vec<Arc<Scope>>)> {
        let scopes = self.scopes.read();
        let mut parts: Vec<(Group, Vec<Arc<Scope>>)> = Vec::new();
        for id in path {
            let Some(scope) = scopes.0.get(id.0 as usize).filter(|s| !s.off_path) else { continue };
            match parts.iter_mut().find(|(g, _)| *g == scope.group) {
                Some((_, members)) => members.push(Arc::clone(scope)),
                None => parts.push((scope.group.clone(), vec![Arc::clone(scope)])),
            }
        }
        parts
    }

    fn scope(&self, id: ScopeId) -> Option<Arc<Scope>> {
        self.scopes.read().0.get(id.0 as usize).cloned()
    }

    /// The reservation of `demand`'s part on `group` (its `scopes`), and the operation of
    /// the group's batch that makes it; a cost that can never pass there is refused before
    /// asking.
    fn prepare(
        &self,
        id: ReservationId,
        group: &Group,
        scopes: Vec<Arc<Scope>>,
        demand: &Demand<'_>,
    ) -> Result<(Prepared, Op), ReserveError> {
        let (cost, lease, share) = (demand.cost, demand.lease, demand.share);
        let specs: Vec<&ScopeSpec> = scopes.iter().map(|s| &s.spec).collect();
        let spec = record::reserve_spec(cost, share, &specs).map_err(|never| {
            let index = |i: usize| i64::try_from(i).map_or(0, |i| i + 1);
            ReserveError::Rejected(rejection(&scopes, 0, index(never.scope), index(never.limit), 3))
        })?;
        let budgets = record::budget_reserve(cost.money, demand.calendar, &specs).map_err(|over| {
            let scope =
                scopes.get(over.scope).map_or_else(|| ScopeKey::new(ScopeKind::Org, "unknown"), |s| s.key.clone());
            let kind = RejectionKind::NeverFits { cost: cost.money, capacity: over.capacity };
            ReserveError::Rejected(Rejection { scope, limiter: LimiterName::Budget, kind })
        })?;
        let member = record::lease_member(id.0, cost, demand.calendar, &specs);
        // In Redis a reservation lives a heartbeat at a time, renewed by its holder.
        let kept = self.heartbeat.map_or(lease, |heartbeat| heartbeat.min(lease));
        let lease_us = u64::try_from(kept.as_micros()).unwrap_or(u64::MAX);
        let deployment = scopes.iter().find(|s| s.key.kind == sluice_quota::ScopeKind::Deployment);
        let fair = match (&demand.fair, deployment) {
            (Some(share), Some(scope)) => {
                let own = scopes.iter().zip(0..64).filter(|(s, _)| !s.key.kind.is_shared()).map(|(_, k)| 1_u64 << k);
                Some(Fair { home: Group::of(&self.prefix, &scope.key), share: share.clone(), own: own.sum() })
            }
            _ => None,
        };
        let sids = specs.iter().map(|s| s.sid.clone()).collect();
        drop(specs);
        let own = |s: &&Arc<Scope>| demand.report_own && !s.key.kind.is_shared();
        let report = scopes.iter().zip(0..64).filter(|(s, _)| own(s)).map(|(_, k)| 1_u64 << k).sum();
        let patience_us = demand.patience.map(|p| u64::try_from(p.as_micros()).unwrap_or(u64::MAX));
        let op = Op::Reserve {
            member: member.clone(),
            lease_us,
            fair,
            spec,
            sids,
            report,
            share: share.get(),
            budgets,
            patience_us,
            claimer: demand.claimer.get(),
            recorded: self.record.is_some(),
        };
        let part = Part { group: group.clone(), member, cost, scopes, calendar: demand.calendar };
        Ok((Prepared { part, report_own: demand.report_own }, op))
    }

    async fn reserve_part(
        &self,
        id: ReservationId,
        group: &Group,
        scopes: Vec<Arc<Scope>>,
        demand: &Demand<'_>,
    ) -> Result<Reserved, ReserveError> {
        let (prepared, op) = self.prepare(id, group, scopes, demand)?;
        let again = restorable(&op).then(|| op.clone());
        let mut reply = self.send_reserve(&prepared.part, op).await?;
        if let ([0, _, _, _, 9], Some(op)) = (reply.as_slice(), again) {
            // A budget Redis does not hold as restored from the record: restored, then asked
            // again (once: a second refusal of this kind is the store failing).
            self.restore_part(group, &prepared.part.scopes, prepared.part.calendar).await?;
            reply = self.send_reserve(&prepared.part, op).await?;
        }
        match reply.as_slice() {
            [1, rest @ ..] => Ok(prepared.granted(rest)),
            [0, refusal @ ..] if refusal.len() == 4 => Err(refused(&prepared.part.scopes, refusal)),
            _ => Err(ReserveError::Store(store_error(format!("unexpected reply from reserve: {reply:?}")))),
        }
    }

    /// Sends the reservation `op` of `part`; should its caller never hear the answer, the
    /// batch gives it back.
    async fn send_reserve(&self, part: &Part, op: Op) -> Result<Vec<i64>, StoreError> {
        let unheard = part.clone();
        let release = Box::new(move |_: Option<&[i64]>| vec![unheard.settle_op(Settlement::exact(Cost::default()))]);
        self.batches.reserve(&part.group, op, release).await
    }

    /// Sends the choice of the first of `ops` (the reservations of `tried`'s parts, in
    /// order) that passes; should its caller never hear the answer, the batch gives back the
    /// one made (or, not knowing which, each).
    async fn send_first(
        &self,
        group: &Group,
        tried: &[(usize, Prepared)],
        ops: Vec<Op>,
    ) -> Result<Vec<i64>, StoreError> {
        let parts: Vec<Part> = tried.iter().map(|(_, p)| p.part.clone()).collect();
        let release = Box::new(move |reply: Option<&[i64]>| {
            let release = |part: &Part| part.settle_op(Settlement::exact(Cost::default()));
            let made = reply.and_then(|r| r.get(1)).and_then(|&k| usize::try_from(k).ok()?.checked_sub(1));
            match made {
                Some(k) => parts.get(k).map(release).into_iter().collect(),
                None => parts.iter().map(release).collect(),
            }
        });
        self.batches.reserve(group, Op::First(ops), release).await
    }

    /// [`QuotaStore::admit_first`]: when every demand's path is one group's (always on a
    /// standalone server or behind Sentinel), one operation of that group's batch tries them
    /// in order and makes the first that passes: one round trip, atomic, whatever the number
    /// of demands. On a Redis Cluster each pool member's deployment lives in a slot of its
    /// own, so the demands are admitted one after the other ([`admit_each`]).
    async fn first_path(&self, mut demands: Vec<Demand<'_>>) -> Result<(usize, Grant), ReserveError> {
        let parts: Vec<Vec<(Group, Vec<Arc<Scope>>)>> = demands.iter().map(|d| self.parts(d.path)).collect();
        let mut groups = parts.iter().flatten().map(|(g, _)| g);
        let one_group = groups.next().is_none_or(|first| groups.all(|g| g == first));
        if self.batches.link().connector.is_cluster() || !one_group || parts.iter().any(|p| p.len() > 1) {
            return admit_each(self, demands).await;
        }
        let id = ReservationId(rand::rng().random::<u64>() >> 1);
        let mut refusals: Vec<(usize, ReserveError)> = Vec::new();
        let mut tried: Vec<(usize, Prepared)> = Vec::new();
        let mut ops = Vec::new();
        // The first demand with nothing to reserve (no scope on its path): granted if reached.
        let mut bare = None;
        for (i, (demand, part)) in demands.iter_mut().zip(parts).enumerate() {
            demand.calendar = self.store_calendar(demand.calendar).await;
            let Some((group, scopes)) = part.into_iter().next() else {
                bare = Some(i);
                break;
            };
            match self.prepare(id, &group, scopes, demand) {
                Ok((prepared, op)) => {
                    tried.push((i, prepared));
                    ops.push(op);
                }
                Err(e) => refusals.push((i, e)),
            }
        }
        if let Some((_, first)) = tried.first() {
            let group = first.part.group.clone();
            let again = ops.iter().any(restorable).then(|| ops.clone());
            let mut reply = self.send_first(&group, &tried, ops).await?;
            if let (Some(&9), Some(ops)) = (reply.last().filter(|_| reply.first() == Some(&0)), again) {
                // A budget Redis does not hold as restored from the record stopped the
                // choice at its member: every member's budgets are restored, then the
                // choice is asked again (once).
                self.restore_budgets(&group, &tried).await?;
                reply = self.send_first(&group, &tried, ops).await?;
            }
            match reply.as_slice() {
                [1, index, rest @ ..] => {
                    let made = usize::try_from(*index).ok().and_then(|k| k.checked_sub(1)).filter(|&k| k < tried.len());
                    let Some(made) = made else {
                        return Err(ReserveError::Store(store_error(format!(
                            "unexpected reply from first: {reply:?}"
                        ))));
                    };
                    let (i, prepared) = tried.swap_remove(made);
                    let reserved = prepared.granted(rest);
                    self.open.lock().insert(id, vec![reserved.part]);
                    let demand = &demands[i];
                    return Ok((i, Grant { id, reserved: demand.cost, lease: demand.lease, after: reserved.after }));
                }
                [0, quads @ ..] if quads.len() % 4 == 0 && quads.len() / 4 <= tried.len() => {
                    // After a budget not restored (a store error) the rest was not tried.
                    if quads.len() / 4 < tried.len() || quads.last() == Some(&9) {
                        bare = None;
                    }
                    for ((i, prepared), quad) in tried.iter().zip(quads.chunks_exact(4)) {
                        refusals.push((*i, refused(&prepared.part.scopes, quad)));
                    }
                }
                _ => return Err(ReserveError::Store(store_error(format!("unexpected reply from first: {reply:?}")))),
            }
        }
        if let Some(i) = bare {
            self.open.lock().insert(id, Vec::new());
            let demand = &demands[i];
            return Ok((i, Grant { id, reserved: demand.cost, lease: demand.lease, after: Vec::new() }));
        }
        refusals.sort_by_key(|(i, _)| *i);
        Err(soonest(refusals.into_iter().map(|(_, e)| e)))
    }

    /// Restores the budgets of every scope of `tried`'s parts (each once), in each part's
    /// periods.
    async fn restore_budgets(&self, group: &Group, tried: &[(usize, Prepared)]) -> Result<(), StoreError> {
        let mut pending: Vec<(Calendar, Vec<Arc<Scope>>)> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (_, prepared) in tried {
            let part = &prepared.part;
            for scope in part.scopes.iter().filter(|s| !s.spec.budgets.is_empty()) {
                if seen.contains(&scope.spec.sid.as_str()) {
                    continue;
                }
                seen.push(&scope.spec.sid);
                match pending.iter_mut().find(|(calendar, _)| *calendar == part.calendar) {
                    Some((_, scopes)) => scopes.push(Arc::clone(scope)),
                    None => pending.push((part.calendar, vec![Arc::clone(scope)])),
                }
            }
        }
        for (calendar, scopes) in &pending {
            self.restore_part(group, scopes, *calendar).await?;
        }
        Ok(())
    }

    async fn settle_part(&self, part: &Part, settlement: Settlement) -> Result<(), StoreError> {
        self.batches.run(&part.group, part.settle_op(settlement)).await?;
        Ok(())
    }

    async fn reserve_path(&self, mut demand: Demand<'_>) -> Result<Grant, ReserveError> {
        demand.calendar = self.store_calendar(demand.calendar).await;
        let id = ReservationId(rand::rng().random::<u64>() >> 1);
        let mut done: Vec<Part> = Vec::new();
        let mut after = Vec::new();
        for (group, scopes) in self.parts(demand.path) {
            match self.reserve_part(id, &group, scopes, &demand).await {
                Ok(reserved) => {
                    done.push(reserved.part);
                    after.extend(reserved.after);
                }
                Err(e) => {
                    // Compensation: release what earlier groups reserved.
                    let release = Settlement { used: Cost::default(), upstream: Cost::default() };
                    for part in &done {
                        if let Err(undo) = self.settle_part(part, release).await {
                            tracing::warn!(error = %undo, "release after a refusal failed; the lease will expire");
                        }
                    }
                    return Err(e);
                }
            }
        }
        self.open.lock().insert(id, done);
        Ok(Grant { id, reserved: demand.cost, lease: demand.lease, after })
    }

    async fn settle_all(&self, id: ReservationId, settlement: Settlement) -> Result<(), StoreError> {
        let Some(parts) = self.open.lock().remove(&id) else { return Ok(()) };
        for part in &parts {
            self.settle_part(part, settlement).await?;
            if let Some(record) = &self.record {
                for scope in &part.scopes {
                    restore::record_settled(&**record, &scope.spec, part.calendar, settlement);
                }
            }
        }
        Ok(())
    }

    /// Renews the leases of `ids` still open here: one script per group and per
    /// [`RENEW_CHUNK`] of its members.
    async fn renew_open(&self, ids: &[ReservationId]) -> Result<(), StoreError> {
        let Some(heartbeat) = self.heartbeat else { return Ok(()) };
        let mut groups: Vec<(Group, Vec<Vec<u8>>)> = Vec::new();
        {
            let open = self.open.lock();
            for part in ids.iter().filter_map(|id| open.get(id)).flatten() {
                match groups.iter_mut().find(|(g, _)| *g == part.group) {
                    Some((_, members)) => members.push(part.member.clone()),
                    None => groups.push((part.group.clone(), vec![part.member.clone()])),
                }
            }
        }
        let lease_us = u64::try_from(heartbeat.as_micros()).unwrap_or(u64::MAX);
        let mut error = None;
        for (group, members) in &groups {
            for chunk in members.chunks(RENEW_CHUNK) {
                let mut invocation = self.scripts().renew.prepare_invoke();
                invocation.key(group.leases()).key(group.state()).arg(lease_us);
                for member in chunk {
                    invocation.arg(member.as_slice());
                }
                // One group unreachable (a cluster master away) does not hold the others'
                // renewals back.
                if let Err(e) = self.call::<i64>(invocation).await {
                    error = Some(e);
                }
            }
        }
        error.map_or(Ok(()), Err)
    }

    async fn pause_scope(&self, scope: ScopeId, wait: Duration) -> Result<(), StoreError> {
        let Some(scope) = self.scope(scope) else { return Ok(()) };
        let mut invocation = self.scripts().pause.prepare_invoke();
        invocation.key(&scope.state).arg(u64::try_from(wait.as_micros()).unwrap_or(u64::MAX)).arg(&scope.spec.sid);
        let _: i64 = self.call(invocation).await?;
        Ok(())
    }

    async fn share_scope_window(
        &self,
        scope: ScopeId,
        learned: Option<Duration>,
        hold: Duration,
    ) -> Result<Option<Duration>, StoreError> {
        let Some(scope) = self.scope(scope) else { return Ok(learned) };
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut invocation = self.scripts().window.prepare_invoke();
        invocation.key(scope.group.window(&scope.spec.sid));
        invocation.arg(learned.map_or(0, micros)).arg(u64::try_from(hold.as_millis()).unwrap_or(u64::MAX).max(1));
        let shared: u64 = self.call(invocation).await?;
        Ok((shared > 0).then(|| Duration::from_micros(shared)))
    }

    async fn hold_scope(&self, scope: ScopeId, held: bool) -> Result<(), StoreError> {
        let Some(scope) = self.scope(scope) else { return Ok(()) };
        if scope.off_path && held {
            let name = &scope.spec.sid;
            return Err(store_error(format!(
                "`{name}` has no limits and is left off admission paths on a Redis Cluster: give it a limit to hold it"
            )));
        }
        let mut invocation = self.scripts().hold.prepare_invoke();
        invocation.key(&scope.state).arg(u8::from(held)).arg(&scope.spec.sid);
        let _: i64 = self.call(invocation).await?;
        Ok(())
    }

    async fn tighten_scope(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> Result<(), StoreError> {
        let Some(scope) = self.scope(scope) else { return Ok(()) };
        let buckets: Vec<_> = scope
            .limits
            .rates
            .iter()
            .zip(&scope.spec.limits)
            .zip(1_u32..)
            .filter(|((r, _), _)| r.dimension == dimension && r.period <= sluice_quota::ledger::TIGHTEN_MAX_PERIOD)
            .map(|((_, spec), at)| (at, spec))
            .collect();
        if buckets.is_empty() {
            return Ok(());
        }
        let reset_us = reset.map_or(-1, |r| i64::try_from(r.as_micros()).unwrap_or(i64::MAX));
        let mut invocation = self.scripts().tighten.prepare_invoke();
        invocation.key(&scope.state).arg(remaining).arg(reset_us).arg(&scope.spec.sid).arg(scope.spec.layout);
        for (at, spec) in buckets {
            invocation.arg(at).arg(spec.amount).arg(spec.period_us).arg(spec.burst);
        }
        let _: i64 = self.call(invocation).await?;
        Ok(())
    }

    async fn sent_scope(&self, scope: ScopeId, cost: Cost, since: Duration) -> Result<(), StoreError> {
        let Some(scope) = self.scope(scope) else { return Ok(()) };
        let steps: Vec<(u32, u64)> = scope
            .limits
            .rates
            .iter()
            .zip(1_u32..)
            .filter(|(r, _)| r.guard && cost.of(r.dimension) > 0 && cost.of(r.dimension) <= r.amount.get())
            .map(|(r, at)| (at, bucket::need(r, cost.of(r.dimension), Share::FULL).step.div_ceil(1_000)))
            .collect();
        if steps.is_empty() {
            return Ok(());
        }
        let mut invocation = self.scripts().sent.prepare_invoke();
        invocation.key(&scope.state).arg(u64::try_from(since.as_micros()).unwrap_or(u64::MAX));
        invocation.arg(&scope.spec.sid).arg(scope.spec.layout);
        for (at, step) in steps {
            invocation.arg(at).arg(step);
        }
        let _: i64 = self.call(invocation).await?;
        Ok(())
    }

    /// Drops the claims of `by` on the scopes of `path` with limits: one call per group.
    async fn withdraw_claims(&self, path: &[ScopeId], by: Claimer) -> Result<(), StoreError> {
        if by == Claimer::NOBODY {
            return Ok(());
        }
        let scopes: Vec<Arc<Scope>> =
            path.iter().filter_map(|&id| self.scope(id)).filter(|s| !s.limits.rates.is_empty()).collect();
        let mut groups: Vec<&str> = scopes.iter().map(|s| s.state.as_str()).collect();
        groups.sort_unstable();
        groups.dedup();
        for state in groups {
            let mut invocation = self.scripts().withdraw.prepare_invoke();
            invocation.key(state).arg(by.get());
            for scope in scopes.iter().filter(|s| s.state == state) {
                invocation.arg(&scope.spec.sid).arg(scope.spec.layout).arg(scope.limits.rates.len());
            }
            let _: i64 = self.call(invocation).await?;
        }
        Ok(())
    }

    /// Snapshots of `ids`, in order: one peek per group of them (a caller's own scopes
    /// share one group, so they take one round trip).
    async fn snapshot_scopes(&self, ids: &[ScopeId]) -> Result<Vec<Option<ScopeSnapshot>>, StoreError> {
        let scopes: Vec<Option<Arc<Scope>>> = ids.iter().map(|&id| self.scope(id)).collect();
        let mut groups: Vec<(&str, Vec<&Arc<Scope>>)> = Vec::new();
        for scope in scopes.iter().flatten() {
            match groups.iter_mut().find(|(state, _)| *state == scope.state) {
                Some((_, members)) => members.push(scope),
                None => groups.push((&scope.state, vec![scope])),
            }
        }
        let mut peeked: HashMap<&str, Vec<i64>> = HashMap::new();
        for (state, members) in &groups {
            let mut invocation = self.scripts().peek.prepare_invoke();
            invocation.key(*state).arg(members.len());
            for scope in members {
                let budgets = u8::from(!scope.spec.budgets.is_empty());
                invocation.arg(&scope.spec.sid).arg(scope.spec.layout).arg(scope.spec.limits.len()).arg(budgets);
            }
            let reply: Vec<Vec<i64>> = self.call(invocation).await?;
            for (scope, values) in members.iter().zip(reply) {
                peeked.insert(&scope.spec.sid, values);
            }
        }
        let of = |scope: &Arc<Scope>| {
            let peeked = peeked.get(&*scope.spec.sid).map_or(&[][..], Vec::as_slice);
            let at = |i: usize| peeked.get(i).copied().unwrap_or(0);
            let rest = peeked.get(3..).unwrap_or(&[]);
            let (tats, spent) = rest.split_at(scope.spec.limits.len().min(rest.len()));
            ScopeSnapshot { budgets: budgets(scope, spent), ..snapshot(scope, at(0), at(1), at(2) == 1, tats) }
        };
        Ok(scopes.iter().map(|scope| scope.as_ref().map(of)).collect())
    }
}

fn rejection(scopes: &[Arc<Scope>], wait_us: i64, scope: i64, limit: i64, kind: i64) -> Rejection {
    let index = if kind == 5 {
        // Fair share is the deployment's: the script leaves naming it to the gateway.
        scopes.iter().position(|s| s.key.kind == sluice_quota::ScopeKind::Deployment).unwrap_or(0)
    } else {
        usize::try_from(scope - 1).unwrap_or(0).min(scopes.len().saturating_sub(1))
    };
    let Some(scope) = scopes.get(index) else {
        let key = ScopeKey::new(sluice_quota::ScopeKind::Org, "unknown");
        return Rejection { scope: key, limiter: LimiterName::Concurrency, kind: RejectionKind::SlotsBusy };
    };
    let rate = usize::try_from(limit - 1).ok().and_then(|j| scope.limits.rates.get(j));
    let wait = Duration::from_micros(u64::try_from(wait_us).unwrap_or(0));
    let (limiter, kind) = match kind {
        2 => (LimiterName::Concurrency, RejectionKind::SlotsBusy),
        3 => {
            let rate = rate.copied();
            let limiter = rate.map_or(LimiterName::Concurrency, |r| r.name());
            let capacity = rate.map_or(0, |r| r.amount.get());
            (limiter, RejectionKind::NeverFits { cost: capacity.saturating_add(1), capacity })
        }
        4 => (LimiterName::ProviderCooldown, RejectionKind::RetryAfter(wait)),
        5 => (LimiterName::FairShare, RejectionKind::RetryAfter(wait)),
        6 => (LimiterName::Paused, RejectionKind::RetryAfter(sluice_quota::HOLD_RETRY)),
        7 => (LimiterName::Budget, RejectionKind::RetryAfter(wait)),
        8 => (LimiterName::Budget, RejectionKind::InFlight(sluice_quota::IN_FLIGHT_RETRY)),
        _ => (rate.map_or(LimiterName::Concurrency, sluice_quota::RateLimit::name), RejectionKind::RetryAfter(wait)),
    };
    Rejection { scope: scope.key.clone(), limiter, kind }
}

/// A scope's budgets from its budget field as `peek.lua` returns it (day's period, spent
/// that day, month's period, spent that month, held that day, held that month; empty when
/// the scope has none).
fn budgets(scope: &Scope, field: &[i64]) -> Vec<BudgetSnapshot> {
    let at = |i: usize| field.get(i).and_then(|&v| u64::try_from(v).ok()).unwrap_or(0);
    let spent = |period| match period {
        BudgetPeriod::Day => Spent { period: at(0), used: at(1), held: at(4) },
        BudgetPeriod::Month => Spent { period: at(2), used: at(3), held: at(5) },
    };
    let of = |b: &Budget| BudgetSnapshot { period: b.period, limit: b.amount.get(), spent: spent(b.period) };
    scope.limits.budgets.iter().map(of).collect()
}

/// The reported scopes of a granted part as the batch script returned them with the
/// grant: the server's time, then per scope its requests in flight and each limit's
/// full-again instant (µs). Empty when the reply carries no state (none was asked, or a
/// grant made before is answered again).
fn granted_state(scopes: &[&Arc<Scope>], reply: &[i64]) -> Vec<ScopeSnapshot> {
    let Some((&now, mut rest)) = reply.split_first() else { return Vec::new() };
    let mut after = Vec::with_capacity(scopes.len());
    for scope in scopes {
        let Some((&in_flight, tail)) = rest.split_first() else { return Vec::new() };
        let Some((tats, tail)) = tail.split_at_checked(scope.spec.limits.len()) else { return Vec::new() };
        after.push(snapshot(scope, now, in_flight, false, tats));
        rest = tail;
    }
    after
}

/// A scope's snapshot from the server's time `now_us`, its requests in flight, held or
/// not, and each limit's full-again instant (µs), as the scripts return them.
fn snapshot(scope: &Scope, now_us: i64, in_flight: i64, held: bool, tats: &[i64]) -> ScopeSnapshot {
    let us = |v: i64| u64::try_from(v).unwrap_or(0);
    let now = Nanos(us(now_us).saturating_mul(1_000));
    let rates = scope
        .limits
        .rates
        .iter()
        .enumerate()
        .map(|(i, limit)| {
            let tat = Tat(Nanos(tats.get(i).copied().map_or(0, us).saturating_mul(1_000)));
            RateSnapshot {
                limiter: limit.name(),
                limit: limit.amount.get(),
                burst: limit.burst.get(),
                remaining: bucket::remaining(limit, tat, now),
                reset: bucket::until_full(tat, now),
            }
        })
        .collect();
    let cap = scope.limits.concurrency.map(std::num::NonZeroU64::get);
    ScopeSnapshot { key: scope.key.clone(), rates, in_flight: (us(in_flight), cap), held, budgets: Vec::new() }
}

impl QuotaStore for RedisStore {
    fn shared(&self) -> bool {
        true
    }

    fn register(&self, key: ScopeKey, limits: Limits) -> ScopeId {
        let cluster = self.batches.link().connector.is_cluster();
        let group = if cluster {
            let placed = self.placed.lock().get(&key).cloned();
            placed.unwrap_or_else(|| match key.kind {
                ScopeKind::Tenant => self.tenants.of(&key.name),
                _ => Group::of(&self.prefix, &key),
            })
        } else {
            Group::standalone(&self.prefix)
        };
        let spec = ScopeSpec::new(&key, &limits);
        let off_path = cluster && matches!(key.kind, ScopeKind::Org | ScopeKind::ModelProfile) && limits.is_unlimited();
        let scope = Scope { key: key.clone(), limits, state: group.state(), group, spec, off_path };
        let mut scopes = self.scopes.write();
        if let Some(&id) = scopes.1.get(&key) {
            scopes.0[id.0 as usize] = Arc::new(scope);
            return id;
        }
        let id = ScopeId(u32::try_from(scopes.0.len()).unwrap_or(u32::MAX));
        scopes.0.push(Arc::new(scope));
        scopes.1.insert(key, id);
        id
    }

    fn keep_with(&self, scope: ScopeId, owner: ScopeId) {
        if !self.batches.link().connector.is_cluster() {
            return;
        }
        let mut scopes = self.scopes.write();
        let Some(group) = scopes.0.get(owner.0 as usize).map(|o| o.group.clone()) else { return };
        let Some(entry) = scopes.0.get_mut(scope.0 as usize) else { return };
        if entry.group == group {
            return;
        }
        let moved = Scope { state: group.state(), group: group.clone(), ..Scope::clone(entry) };
        self.placed.lock().insert(moved.key.clone(), group);
        *entry = Arc::new(moved);
    }

    fn admit<'a>(&'a self, demand: Demand<'a>) -> StoreFuture<'a, Result<Grant, ReserveError>> {
        Box::pin(self.reserve_path(demand))
    }

    /// One round trip on a standalone server or behind Sentinel; one admission per demand
    /// on a Redis Cluster (see [`RedisStore::first_path`]).
    fn admit_first<'a>(&'a self, demands: Vec<Demand<'a>>) -> StoreFuture<'a, Result<(usize, Grant), ReserveError>> {
        Box::pin(self.first_path(demands))
    }

    fn settle(&self, id: ReservationId, settlement: Settlement) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.settle_all(id, settlement))
    }

    fn pause(&self, scope: ScopeId, wait: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.pause_scope(scope, wait))
    }

    fn hold(&self, scope: ScopeId, held: bool) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.hold_scope(scope, held))
    }

    fn open_reservations(&self) -> Option<u64> {
        Some(u64::try_from(self.open.lock().len()).unwrap_or(u64::MAX))
    }

    fn heartbeat(&self) -> Option<Duration> {
        self.heartbeat
    }

    fn renew<'a>(&'a self, ids: &'a [ReservationId]) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(self.renew_open(ids))
    }

    fn share_window(
        &self,
        scope: ScopeId,
        learned: Option<Duration>,
        hold: Duration,
    ) -> StoreFuture<'_, Result<Option<Duration>, StoreError>> {
        Box::pin(self.share_scope_window(scope, learned, hold))
    }

    fn tighten(
        &self,
        scope: ScopeId,
        dimension: Dimension,
        remaining: u64,
        reset: Option<Duration>,
    ) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.tighten_scope(scope, dimension, remaining, reset))
    }

    fn sent(&self, scope: ScopeId, cost: Cost, since: Duration) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(self.sent_scope(scope, cost, since))
    }

    fn withdraw<'a>(&'a self, path: &'a [ScopeId], by: Claimer) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(self.withdraw_claims(path, by))
    }

    fn snapshot(&self, id: ScopeId) -> StoreFuture<'_, Result<Option<ScopeSnapshot>, StoreError>> {
        Box::pin(async move { Ok(self.snapshot_scopes(&[id]).await?.pop().flatten()) })
    }

    fn snapshots<'a>(&'a self, ids: &'a [ScopeId]) -> StoreFuture<'a, Result<Vec<Option<ScopeSnapshot>>, StoreError>> {
        Box::pin(self.snapshot_scopes(ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(topology: Topology) -> RedisStore {
        RedisStore::new(RedisConfig {
            topology,
            prefix: "sluice".into(),
            timeout: Duration::from_secs(1),
            tls: Tls::default(),
        })
    }

    fn group(store: &RedisStore, id: ScopeId) -> Group {
        store.scope(id).map(|s| s.group.clone()).unwrap_or_else(|| Group::standalone("?"))
    }

    #[test]
    fn on_a_cluster_tenants_land_on_different_slots_with_their_teams_and_keys() {
        let store = store(Topology::Cluster(vec!["redis://127.0.0.1:1".into()]));
        let register = |kind, name: &str, limits: Limits| store.register(ScopeKey::new(kind, name), limits);
        let acme = register(ScopeKind::Tenant, "acme", Limits::unlimited());
        let globex = register(ScopeKind::Tenant, "globex", Limits::unlimited());
        assert_ne!(group(&store, acme).slot(), group(&store, globex).slot());
        let team = register(ScopeKind::Team, "acme/core", Limits::unlimited());
        let key = register(ScopeKind::ApiKey, "k1", Limits::unlimited());
        assert_eq!(group(&store, key), Group::standalone("sluice"), "a key nobody placed is a shared one");
        store.keep_with(team, acme);
        store.keep_with(key, acme);
        assert_eq!(group(&store, team), group(&store, acme));
        assert_eq!(group(&store, key), group(&store, acme));
        assert_eq!(store.parts(&[acme, team, key]).len(), 1, "a caller's own scopes are one step");
        // New limits (a reload, the admin API) keep the placement.
        let rpm =
            sluice_quota::RateLimit::per_minute(Dimension::Requests, 60).map(|r| Limits::unlimited().with_rate(r));
        assert_eq!(register(ScopeKind::ApiKey, "k1", rpm.clone().unwrap_or_default()), key);
        assert_eq!(group(&store, key), group(&store, acme));
        // An org without limits is left off the path; with one it is on it, in `{P:c}`.
        let org = register(ScopeKind::Org, "org", Limits::unlimited());
        let d = register(ScopeKind::Deployment, "east", Limits::unlimited());
        assert_eq!(store.parts(&[org, acme, key, d]).len(), 2);
        assert_eq!(register(ScopeKind::Org, "org", rpm.unwrap_or_default()), org);
        let parts = store.parts(&[org, acme, key, d]);
        let groups: Vec<&str> = parts.iter().map(|(g, _)| g.tag.as_str()).collect();
        let acme = TenantGroups::new("sluice").of("acme");
        assert_eq!(groups, ["{sluice:c}", acme.tag.as_str(), "{sluice:d:east}"]);
    }

    #[test]
    fn on_a_standalone_server_a_path_is_one_group() {
        let store = store(Topology::Standalone("redis://127.0.0.1:1".into()));
        let register = |kind, name: &str| store.register(ScopeKey::new(kind, name), Limits::unlimited());
        let path = [
            register(ScopeKind::Org, "org"),
            register(ScopeKind::Tenant, "acme"),
            register(ScopeKind::ApiKey, "k1"),
            register(ScopeKind::Deployment, "east"),
        ];
        store.keep_with(path[2], path[1]);
        let parts = store.parts(&path);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].1.len(), 4, "the org without limits is on the path too");
    }
}
