//! Natural batching of a group's reservations and settlements.
//!
//! Every reservation and settlement of a hash-tag group goes through its lane. A lane sends
//! at most [`MAX_IN_FLIGHT`] scripts at a time; what arrives while they are out waits and
//! leaves together in the next one (up to [`MAX_BATCH`] operations). On a quiet gateway
//! every operation leaves at once, alone; under load the batches grow by themselves, and
//! the Redis time per operation falls, because a batch reads and writes its group's state
//! once (`batch.lua`). Nothing waits on a timer.
//!
//! The operations of a batch were all in flight at once, so any order of them is one the
//! callers could have seen; a batch puts settlements first (capacity comes back before it
//! is asked for) and runs of reservations on the same scopes together. Each operation is
//! decided as if its script ran alone at its point of that order; a run is first tried as
//! one combined reservation ([`ReserveSpec::combined`]), which passes exactly when each of
//! them would pass in turn, and is otherwise decided one by one. A pool's request on its
//! members ([`Op::First`]) is one operation: its reservations are tried in order, at its
//! point of that order, until one passes. Batching changes throughput, never a decision.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{FairShare, StoreError};
use tokio::sync::oneshot;

use crate::conn::Connector;
use crate::keys::Group;
use crate::record::{self, ReserveSpec};
use crate::scripts::Scripts;

/// Scripts one lane has out at once.
pub const MAX_IN_FLIGHT: usize = 4;
/// Most operations one script carries.
pub const MAX_BATCH: usize = 64;
/// How many expired leases one batch settles on the way.
const EXPIRE_BATCH: u32 = 16;

/// The connection and scripts, and the bound on every call.
#[derive(Debug)]
pub struct Link {
    /// Where Redis is.
    pub connector: Connector,
    /// The scripts.
    pub scripts: Scripts,
    /// Bound on connecting and on each call.
    pub timeout: Duration,
}

pub(crate) fn store_error(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl Link {
    /// Runs a script, bounded by the timeout.
    pub async fn call<T: redis::FromRedisValue>(
        &self,
        invocation: redis::ScriptInvocation<'_>,
    ) -> Result<T, StoreError> {
        let mut conn = tokio::time::timeout(self.timeout, self.connector.get())
            .await
            .map_err(|_| store_error("redis connect timed out"))?
            .map_err(store_error)?;
        tokio::time::timeout(self.timeout, invocation.invoke_async(&mut conn))
            .await
            .map_err(|_| store_error("redis call timed out"))?
            .map_err(store_error)
    }
}

/// A fair-share check to make with a reservation: the deployment's keys and the tenant's
/// claim.
#[derive(Debug, Clone)]
pub struct Fair {
    /// The deployment's group (its fairness hash and asking set).
    pub home: Group,
    /// The claim.
    pub share: FairShare,
    /// Which of the reservation's scopes are the caller's own (bit `k - 1` for the k-th):
    /// a refusal by one of them does not make the tenant count as asking.
    pub own: u64,
}

/// One operation of a batch.
#[derive(Debug, Clone)]
pub enum Op {
    /// A reservation of the group's part of a path.
    Reserve {
        /// The lease-set member (record.rs `lease_member`).
        member: Vec<u8>,
        /// The lease (µs).
        lease_us: u64,
        /// The fair-share check, if any.
        fair: Option<Fair>,
        /// The scopes (record.rs `reserve_spec`).
        spec: ReserveSpec,
        /// The scopes' fields.
        sids: Vec<String>,
        /// Which scopes' state a grant returns (bit `k - 1` for the k-th), 0 for none.
        report: u64,
        /// The caller's share of shared bursts, in thousandths (whom its claims hold back).
        share: u16,
        /// The money budgets it checks and charges (record.rs `budget_reserve`).
        budgets: Vec<u8>,
        /// How much longer the caller waits for it (µs; `None`: no end known), which
        /// bounds its claims.
        patience_us: Option<u64>,
        /// Who asks (its claims carry it; 0: nobody), at most 2^52 - 1.
        claimer: u64,
        /// The gateway keeps a store of record: a budget not yet restored from it refuses
        /// (kind 9) rather than admit against what Redis may have forgotten.
        recorded: bool,
    },
    /// A settlement (or a release) of a reservation.
    Settle {
        /// The reservation's lease-set member.
        member: Vec<u8>,
        /// The settlement (record.rs `settle_spec`).
        spec: Vec<u8>,
        /// The fields it touches.
        sids: Vec<String>,
        /// The money budgets it moves (record.rs `budget_settle`).
        budgets: Vec<u8>,
    },
    /// The first of several reservations ([`Op::Reserve`], in order) that passes, the others
    /// not made: a pool's request on its members ([`sluice_quota::QuotaStore::admit_first`]).
    First(Vec<Op>),
}

type Reply = Result<Vec<i64>, StoreError>;

/// How to give back a reservation nobody will hear of: the settlements that release it,
/// given its reply when it was granted, or `None` when whether it was made is unknown
/// (then whatever it may have made: a release of a reservation never made changes nothing).
pub type Release = Box<dyn FnOnce(Option<&[i64]>) -> Vec<Op> + Send>;

struct Waiting {
    op: Op,
    reply: oneshot::Sender<Reply>,
    /// For a reservation: its release, sent when its caller gave up (timed out, or went)
    /// after the batch left, or when the batch failed in a way that leaves unknown whether
    /// it was made. A release of a reservation never made changes nothing.
    release: Option<Release>,
}

#[derive(Default)]
struct Lane {
    pending: Vec<Waiting>,
    in_flight: usize,
}

impl Lane {
    fn take(&mut self) -> Vec<Waiting> {
        let n = self.pending.len().min(MAX_BATCH);
        self.pending.drain(..n).collect()
    }
}

/// One argument of a batch script.
enum Arg<'a> {
    Str(&'static str),
    Bytes(&'a [u8]),
    Owned(Vec<u8>),
    Count(usize),
}

/// What a batch sends, in order (indices into the batch): a settlement, a run of
/// reservations on the same scopes (perhaps of one; a reservation with a fair-share check
/// is always alone), or the first of several reservations that passes.
enum Step {
    Settle(usize),
    Reserve(Vec<usize>),
    First(usize),
}

struct Plan {
    steps: Vec<Step>,
}

impl Plan {
    /// Settlements first, in arrival order; then the reservations, those with a fair-share
    /// check (and each choice of the first of several) one by one, the others in runs of the
    /// same fields, shape and lease, each run where its first member arrived.
    fn of(batch: &[Waiting]) -> Self {
        let mut steps: Vec<Step> = Vec::with_capacity(batch.len());
        for (i, waiting) in batch.iter().enumerate() {
            if matches!(waiting.op, Op::Settle { .. }) {
                steps.push(Step::Settle(i));
            }
        }
        for (i, waiting) in batch.iter().enumerate() {
            if matches!(waiting.op, Op::First(_)) {
                steps.push(Step::First(i));
                continue;
            }
            let Op::Reserve { fair, spec, sids, lease_us, report, budgets, .. } = &waiting.op else { continue };
            // A budget is charged once per reservation: never in a combined run.
            if fair.is_some() || has_budgets(budgets) {
                steps.push(Step::Reserve(vec![i]));
                continue;
            }
            let joins = |j: usize| match &batch[j].op {
                Op::Reserve {
                    fair: None, spec: other, sids: their, lease_us: lease, report: theirs, budgets, ..
                } => {
                    their == sids
                        && lease == lease_us
                        && other.same_shape(spec)
                        && theirs == report
                        && !has_budgets(budgets)
                }
                _ => false,
            };
            let found = steps.iter_mut().find_map(|step| match step {
                Step::Reserve(run) if joins(run[0]) => Some(run),
                _ => None,
            });
            match found {
                Some(run) => run.push(i),
                None => steps.push(Step::Reserve(vec![i])),
            }
        }
        Self { steps }
    }

    /// The batch indices in the order of the script's replies.
    fn order(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.iter().flat_map(|step| match step {
            Step::Settle(i) | Step::First(i) => std::slice::from_ref(i).iter().copied(),
            Step::Reserve(run) => run.iter().copied(),
        })
    }
}

/// Whether an encoded budget array (record.rs) names any budget: not the empty array.
pub(crate) fn has_budgets(budgets: &[u8]) -> bool {
    budgets.len() > 1
}

/// Appends an encoded budget array, or an empty one for none.
fn push_budgets(blob: &mut Vec<u8>, budgets: &[u8]) {
    if budgets.is_empty() {
        record::push_array(blob, 0);
    } else {
        blob.extend_from_slice(budgets);
    }
}

/// The patience of a caller whose wait has no end known (about 142 years, µs: the largest
/// number the encoding writes).
const NO_END_US: u64 = 1 << 52;

/// A reservation's array for the script (see `batch.lua`), with `spec` in place of its own
/// when given (a run's combined spec).
fn reserve_blob<'a>(op: &'a Op, spec: Option<Vec<u8>>, fields: &mut Fields<'a>, homes: &mut Vec<&'a Group>) -> Vec<u8> {
    let Op::Reserve { lease_us, fair, spec: own, sids, report, share, budgets, patience_us, claimer, recorded, .. } =
        op
    else {
        return Vec::new();
    };
    let spec = spec.unwrap_or_else(|| own.encode());
    let mut blob = Vec::with_capacity(48 + spec.len());
    // The patience is written when known or when a claimer or the record flag follows it
    // (then as "no end"); the claimer when known or when the record flag follows (0).
    let tail = if *recorded {
        3
    } else if *claimer > 0 {
        2
    } else {
        usize::from(patience_us.is_some())
    };
    record::push_array(&mut blob, 13 + tail + sids.len());
    record::push_uint(&mut blob, *lease_us);
    match fair {
        Some(Fair { home, share, own }) => {
            let pair = homes.iter().position(|h| *h == home).unwrap_or_else(|| {
                homes.push(home);
                homes.len() - 1
            }) + 1;
            record::push_uint(&mut blob, u64::try_from(pair).unwrap_or(0));
            record::push_uint(&mut blob, u64::from(share.weight.get()));
            record::push_uint(&mut blob, share.cost);
            record::push_uint(&mut blob, share.slack);
            record::push_str(&mut blob, &share.tenant);
            record::push_uint(&mut blob, u64::from(share.queued_behind));
            record::push_uint(&mut blob, *own);
        }
        None => {
            for n in [0, 1, 0, 0] {
                record::push_uint(&mut blob, n);
            }
            record::push_str(&mut blob, "");
            record::push_uint(&mut blob, 0);
            record::push_uint(&mut blob, 0);
        }
    }
    record::push_uint(&mut blob, u64::try_from(sids.len()).unwrap_or(0));
    for sid in sids {
        record::push_uint(&mut blob, fields.number(sid));
    }
    blob.extend_from_slice(&spec);
    record::push_uint(&mut blob, *report);
    record::push_uint(&mut blob, u64::from(*share));
    push_budgets(&mut blob, budgets);
    if tail > 0 {
        record::push_uint(&mut blob, patience_us.unwrap_or(NO_END_US));
    }
    if tail > 1 {
        record::push_uint(&mut blob, *claimer);
    }
    if *recorded {
        record::push_uint(&mut blob, 1);
    }
    blob
}

/// The fields a batch names, each once, numbered from 1.
#[derive(Default)]
struct Fields<'a> {
    order: Vec<&'a str>,
    numbers: HashMap<&'a str, u64>,
}

impl<'a> Fields<'a> {
    /// `sid`'s number, added if new.
    fn number(&mut self, sid: &'a str) -> u64 {
        if let Some(&n) = self.numbers.get(sid) {
            return n;
        }
        self.order.push(sid);
        let n = u64::try_from(self.order.len()).unwrap_or(u64::MAX);
        self.numbers.insert(sid, n);
        n
    }
}

/// The lanes of every group this instance has used.
pub struct Batches {
    link: Arc<Link>,
    lanes: Mutex<HashMap<Group, Lane>>,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches").field("link", &self.link).finish_non_exhaustive()
    }
}

impl Batches {
    /// Lanes over `link`.
    #[must_use]
    pub fn new(link: Arc<Link>) -> Self {
        Self { link, lanes: Mutex::new(HashMap::new()) }
    }

    /// The link the lanes use.
    #[must_use]
    pub fn link(&self) -> &Link {
        &self.link
    }

    /// The link, to keep beyond a borrow (work in the background).
    #[must_use]
    pub fn shared_link(&self) -> Arc<Link> {
        Arc::clone(&self.link)
    }

    /// Runs `op` on `group`'s state, in a batch with whatever else is waiting; the script's
    /// reply for this operation.
    ///
    /// # Errors
    /// When the script failed (every operation of that batch gets the error), or the call,
    /// lane included, took longer than the store's timeout.
    pub async fn run(self: &Arc<Self>, group: &Group, op: Op) -> Reply {
        self.enqueue(group, op, None).await
    }

    /// Runs the reservation `op` as [`Self::run`] does; when its caller never learns the
    /// answer (it timed out or went after the batch left), or the batch failed without
    /// saying whether it was made, `release` is sent after it, so no capacity stays held
    /// by a reservation nobody will settle.
    ///
    /// # Errors
    /// As [`Self::run`].
    pub async fn reserve(self: &Arc<Self>, group: &Group, op: Op, release: Release) -> Reply {
        self.enqueue(group, op, Some(release)).await
    }

    async fn enqueue(self: &Arc<Self>, group: &Group, op: Op, release: Option<Release>) -> Reply {
        let (reply, answer) = oneshot::channel();
        let batch = {
            let mut lanes = self.lanes.lock();
            let lane = lanes.entry(group.clone()).or_default();
            lane.pending.push(Waiting { op, reply, release });
            if lane.in_flight < MAX_IN_FLIGHT {
                lane.in_flight += 1;
                Some(lane.take())
            } else {
                None
            }
        };
        if let Some(batch) = batch {
            // A task of its own: a caller that gives up must not take the others' answers
            // with it.
            tokio::spawn(Arc::clone(self).flush(group.clone(), batch));
        }
        // The store's timeout bounds the whole call, the wait in the lane included, as it
        // bounded a call that waited behind others on the connection. A reservation given
        // up this way before its batch left is never made (see `send`).
        match tokio::time::timeout(self.link.timeout, answer).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(store_error("the batch carrying this call was dropped")),
            Err(_) => Err(store_error("redis call timed out")),
        }
    }

    /// Sends `batch`, then whatever queued behind it, until the lane is empty.
    async fn flush(self: Arc<Self>, group: Group, mut batch: Vec<Waiting>) {
        loop {
            self.send(&group, batch).await;
            let next = {
                let mut lanes = self.lanes.lock();
                let Some(lane) = lanes.get_mut(&group) else { return };
                if lane.pending.is_empty() {
                    lane.in_flight -= 1;
                    None
                } else {
                    Some(lane.take())
                }
            };
            match next {
                Some(more) => batch = more,
                None => return,
            }
        }
    }

    async fn send(&self, group: &Group, mut batch: Vec<Waiting>) {
        // A reservation whose caller gave up while it waited is not made: nobody would
        // settle it, and it would hold capacity until its lease ran out. Settlements always go.
        batch.retain(|w| !(matches!(w.op, Op::Reserve { .. } | Op::First(_)) && w.reply.is_closed()));
        if batch.is_empty() {
            return;
        }
        let leases = group.leases();
        let state = group.state();
        let mut invocation = self.link.scripts.batch.prepare_invoke();
        invocation.key(&leases).key(&state);
        let plan = Plan::of(&batch);
        // Every field the batch names, once; operations refer to them by number.
        let mut fields = Fields::default();
        // Fairness keys, each deployment's pair once.
        let mut homes: Vec<&Group> = Vec::new();
        let mut args: Vec<Arg<'_>> = Vec::with_capacity(3 * batch.len());
        for step in &plan.steps {
            match step {
                Step::Settle(i) => {
                    if let Op::Settle { member, spec, sids, budgets } = &batch[*i].op {
                        let mut blob = Vec::with_capacity(16 + spec.len() + budgets.len());
                        record::push_array(&mut blob, 3 + sids.len());
                        record::push_uint(&mut blob, u64::try_from(sids.len()).unwrap_or(0));
                        for sid in sids {
                            record::push_uint(&mut blob, fields.number(sid));
                        }
                        blob.extend_from_slice(spec);
                        push_budgets(&mut blob, budgets);
                        args.extend([Arg::Str("s"), Arg::Bytes(member), Arg::Owned(blob)]);
                    }
                }
                Step::Reserve(run) if run.len() == 1 => {
                    let op = &batch[run[0]].op;
                    if let Op::Reserve { member, .. } = op {
                        args.extend([Arg::Str("r"), Arg::Bytes(member)]);
                        args.push(Arg::Owned(reserve_blob(op, None, &mut fields, &mut homes)));
                    }
                }
                Step::Reserve(run) => {
                    let specs: Vec<&ReserveSpec> = run
                        .iter()
                        .filter_map(|&i| match &batch[i].op {
                            Op::Reserve { spec, .. } => Some(spec),
                            Op::Settle { .. } | Op::First(_) => None,
                        })
                        .collect();
                    let combined = ReserveSpec::combined(&specs);
                    args.extend([Arg::Str("g"), Arg::Count(run.len())]);
                    args.push(Arg::Owned(reserve_blob(&batch[run[0]].op, Some(combined), &mut fields, &mut homes)));
                    for &i in run {
                        if let Op::Reserve { member, .. } = &batch[i].op {
                            args.push(Arg::Bytes(member));
                            args.push(Arg::Owned(reserve_blob(&batch[i].op, None, &mut fields, &mut homes)));
                        }
                    }
                }
                Step::First(i) => {
                    if let Op::First(ops) = &batch[*i].op {
                        args.extend([Arg::Str("f"), Arg::Count(ops.len())]);
                        for op in ops {
                            if let Op::Reserve { member, .. } = op {
                                args.push(Arg::Bytes(member));
                                args.push(Arg::Owned(reserve_blob(op, None, &mut fields, &mut homes)));
                            }
                        }
                    }
                }
            }
        }
        for home in homes {
            invocation.key(home.fair()).key(home.asking());
        }
        invocation.arg(EXPIRE_BATCH).arg(fields.order.len());
        for field in &fields.order {
            invocation.arg(*field);
        }
        for arg in &args {
            match arg {
                Arg::Str(s) => invocation.arg(*s),
                Arg::Bytes(b) => invocation.arg(*b),
                Arg::Owned(b) => invocation.arg(b.as_slice()),
                Arg::Count(n) => invocation.arg(*n),
            };
        }
        let replies: Result<Vec<Vec<i64>>, StoreError> = self.link.call(invocation).await;
        let mut orphans = Vec::new();
        match replies {
            Ok(replies) if replies.len() == batch.len() => {
                let mut slots: Vec<Option<Waiting>> = batch.into_iter().map(Some).collect();
                for (i, reply) in plan.order().zip(replies) {
                    if let Some(waiting) = slots.get_mut(i).and_then(Option::take) {
                        let granted = reply.first() == Some(&1);
                        if let (Err(Ok(reply)), true, Some(release)) =
                            (waiting.reply.send(Ok(reply)), granted, waiting.release)
                        {
                            orphans.extend(release(Some(&reply)));
                        }
                    }
                }
            }
            Ok(replies) => {
                let e = store_error(format!("batch of {} answered {} replies", batch.len(), replies.len()));
                orphans = fail(batch, &e);
            }
            Err(e) => orphans = fail(batch, &e),
        }
        if !orphans.is_empty() {
            tracing::warn!(
                reservations = orphans.len(),
                "releasing reservations whose callers never learned of them (timed out, gone, or the batch failed)"
            );
            self.release(group, orphans);
        }
    }

    /// Queues `releases` on `group`'s lane, behind what was sent: the lane's flush sends them
    /// next (settlements always go, nobody waits for their answer).
    fn release(&self, group: &Group, releases: Vec<Op>) {
        let mut lanes = self.lanes.lock();
        let lane = lanes.entry(group.clone()).or_default();
        for op in releases {
            let (reply, _) = oneshot::channel();
            lane.pending.push(Waiting { op, reply, release: None });
        }
    }
}

/// Answers every operation of a failed batch with `e`; the releases of its reservations,
/// since whether they were made is unknown.
fn fail(batch: Vec<Waiting>, e: &StoreError) -> Vec<Op> {
    let mut releases = Vec::new();
    for waiting in batch {
        let _ = waiting.reply.send(Err(e.clone()));
        releases.extend(waiting.release.into_iter().flat_map(|release| release(None)));
    }
    releases
}
