//! What a scope's state looks like from outside: its buckets, requests in flight, hold
//! and money budgets at one instant, for headers, the admin API and metrics.

use std::time::Duration;

use crate::budget::{BudgetPeriod, Spent};
use crate::limit::LimiterName;
use crate::scope::ScopeKey;

/// A scope's live state, for headers, the admin API and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeSnapshot {
    /// The scope.
    pub key: ScopeKey,
    /// Per rate limit: the limiter, its amount, what could be taken now, time until full.
    pub rates: Vec<RateSnapshot>,
    /// Requests in flight and the cap, if any.
    pub in_flight: (u64, Option<u64>),
    /// Whether an operator holds the scope (see [`Ledger::hold`](crate::Ledger::hold)).
    pub held: bool,
    /// Per money budget: what was spent in its latest period.
    pub budgets: Vec<BudgetSnapshot>,
}

/// One money budget's state: what was spent in the period it last counted, and how much of
/// it reservations in flight hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSnapshot {
    /// Day or month.
    pub period: BudgetPeriod,
    /// Its amount per period, micro-units.
    pub limit: u64,
    /// What was spent and is held, and in which period (compare with the current one: an
    /// older period's figure means nothing is spent yet in this one).
    pub spent: Spent,
}

/// One bucket's live state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateSnapshot {
    /// Which limiter.
    pub limiter: LimiterName,
    /// Its amount per period.
    pub limit: u64,
    /// Its burst.
    pub burst: u64,
    /// Units available right now.
    pub remaining: u64,
    /// Time until the bucket is full.
    pub reset: Duration,
}
