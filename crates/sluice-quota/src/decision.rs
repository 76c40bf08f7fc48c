//! What the core answers: a grant, or why not and until when.

use std::time::Duration;

use std::num::NonZeroU32;
use std::sync::Arc;

use crate::bucket::{Claimer, Share};
use crate::budget::Calendar;
use crate::limit::{Cost, LimiterName};
use crate::scope::{ReservationId, ScopeId, ScopeKey};
use crate::snapshot::ScopeSnapshot;

/// What one admission asks of a store.
#[derive(Debug, Clone)]
pub struct Demand<'a> {
    /// Every scope it must pass.
    pub path: &'a [ScopeId],
    /// What it costs.
    pub cost: Cost,
    /// How long the reservation lives if never settled.
    pub lease: Duration,
    /// The part of shared scopes' bursts it may use.
    pub share: Share,
    /// Fair sharing of the deployment between tenants, across every gateway instance.
    pub fair: Option<FairShare>,
    /// Asks for the state of the caller's own scopes of the path (tenant, team, key) right
    /// after the grant, in [`Grant::after`] (a client's rate-limit headers).
    pub report_own: bool,
    /// The current day and month, for the money budgets on the path (the default, the
    /// epoch's, suits demands that cost no money).
    pub calendar: Calendar,
    /// How much longer the caller will wait for this admission, from now: a refusal by a
    /// bucket that must be idle for this cost claims that window (see
    /// [`crate::bucket::Claim`]) only if the caller is still there when it comes, and the
    /// claim lapses when the caller stops waiting. `None`: the caller's wait has no end
    /// the store knows of; zero: it will not wait at all, and claims nothing.
    pub patience: Option<Duration>,
    /// Who asks: the claims its refusals record carry it, so it can withdraw them when it
    /// goes ([`crate::QuotaStore::withdraw`]).
    pub claimer: Claimer,
}

impl<'a> Demand<'a> {
    /// A demand with the whole burst and no fairness check.
    #[must_use]
    pub fn new(path: &'a [ScopeId], cost: Cost, lease: Duration) -> Self {
        Self {
            path,
            cost,
            lease,
            share: Share::FULL,
            fair: None,
            report_own: false,
            calendar: Calendar::default(),
            patience: None,
            claimer: Claimer::NOBODY,
        }
    }
}

/// A tenant's claim to its fair share of a deployment: a tenant whose token consumption
/// (divided by its weight) runs more than `slack` ahead of another tenant that is also
/// asking is held back briefly, so spreading over many gateway instances gains nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairShare {
    /// The tenant.
    pub tenant: Arc<str>,
    /// Its weight.
    pub weight: NonZeroU32,
    /// This request's cost in tokens.
    pub cost: u64,
    /// How far ahead (tokens) a tenant may run before it is held back.
    pub slack: u64,
    /// Whether more of this tenant's requests wait behind this one for the deployment
    /// (set by a gateway's queue): admitted, the tenant still counts as waiting, so the gap
    /// between this admission and its next request's refusal is not capacity another
    /// tenant may run ahead with.
    pub queued_behind: bool,
}

/// Capacity reserved on every bucket of a path. Settle it with the real usage.
#[must_use = "a grant holds capacity until it is settled or its lease expires"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The reservation's handle for settling.
    pub id: ReservationId,
    /// What was reserved.
    pub reserved: Cost,
    /// How long the reservation lives if never settled.
    pub lease: Duration,
    /// The caller's own scopes of the path as they were right after this grant, when the
    /// demand asked ([`Demand::report_own`]) and the store learned them in the same round
    /// trip (a remote store); empty otherwise (an in-process store reads them as cheaply
    /// when asked).
    pub after: Vec<ScopeSnapshot>,
}

/// Why a request cannot pass now, and when it could.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The scope whose bucket refused (the one with the longest wait).
    pub scope: ScopeKey,
    /// The limiter that refused.
    pub limiter: LimiterName,
    /// Whether it can ever pass.
    pub kind: RejectionKind,
}

/// "Not yet" versus "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    /// It would pass after this wait if nothing else changed.
    RetryAfter(Duration),
    /// Every concurrency slot is taken; it may pass as soon as one is released.
    SlotsBusy,
    /// A money budget would take it but for what reservations in flight hold of it: it may
    /// pass as soon as they settle below what they reserved. The wait is a hint for a
    /// retry ([`crate::IN_FLIGHT_RETRY`]), not the budget's next period.
    InFlight(Duration),
    /// The cost exceeds what the limiter allows in a whole period.
    NeverFits {
        /// The amount the request needs.
        cost: u64,
        /// The most the limiter ever allows at once.
        capacity: u64,
    },
}

impl Rejection {
    /// The wait after which the request could pass, if it ever can.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self.kind {
            RejectionKind::RetryAfter(d) | RejectionKind::InFlight(d) => Some(d),
            RejectionKind::SlotsBusy | RejectionKind::NeverFits { .. } => None,
        }
    }
}

/// What the gateway does with a request. The core decides `Admit` or a [`Rejection`];
/// the policy layers above turn a rejection into waiting, rerouting or refusing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<Route> {
    /// Capacity is reserved; send now.
    Admit(Grant),
    /// Wait in the queue, at most `max_wait`, then decide again.
    Queue {
        /// Why it cannot go now.
        rejection: Rejection,
        /// The longest it may wait.
        max_wait: Duration,
    },
    /// Send elsewhere (a cheaper or local deployment).
    Reroute {
        /// Why the first choice cannot take it.
        rejection: Rejection,
        /// The alternative.
        to: Route,
    },
    /// Refuse with the reason.
    Reject(Rejection),
}
