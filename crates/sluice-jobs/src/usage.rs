//! Usage rollups: what was used per day and group, kept beside the jobs so that a finance
//! team can ask what a tenant, team, key, model profile or deployment used and cost.
//!
//! A rollup row is keyed by `(day, tenant, team, key, profile, deployment)` and holds
//! counters that only grow: [`JobStore::add_usage`](crate::JobStore::add_usage) adds to
//! them (several instances may add to the same row), and a day older than the retention
//! is forgotten. Costs are kept in whole nano-units of the currency so that sums are
//! exact on every backend.

use serde::{Deserialize, Serialize};

/// Days since 1970-01-01 (UTC).
pub type Day = u32;

/// The seconds in a day.
pub const DAY_SECS: u64 = 86_400;

/// The day of `unix_millis`.
#[must_use]
pub fn day_of_millis(unix_millis: u64) -> Day {
    Day::try_from(unix_millis / 1000 / 86_400).unwrap_or(Day::MAX)
}

/// The group a rollup row counts, on one day.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UsageKey {
    /// The day (UTC).
    pub day: Day,
    /// The tenant.
    pub tenant: String,
    /// The team (empty when the key has none).
    pub team: String,
    /// The key's id.
    pub key: String,
    /// The model profile the client named.
    pub profile: String,
    /// The deployment that served it.
    pub deployment: String,
}

impl UsageKey {
    /// The group without its day, as stored inside a day: a JSON array, which quotes any
    /// name unambiguously.
    #[must_use]
    pub fn group(&self) -> String {
        let parts = [&self.tenant, &self.team, &self.key, &self.profile, &self.deployment];
        serde_json::to_string(&parts).unwrap_or_default()
    }

    /// The key of `group` (as [`group`](Self::group) wrote it) on `day`.
    #[must_use]
    pub fn parse(day: Day, group: &str) -> Option<Self> {
        let [tenant, team, key, profile, deployment]: [String; 5] = serde_json::from_str(group).ok()?;
        Some(Self { day, tenant, team, key, profile, deployment })
    }
}

/// A rollup row's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCounts {
    /// Requests the provider was sent and that were settled.
    pub requests: u64,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// The cached part of the input.
    pub cached_input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// The reasoning part of the output, where the provider reports it.
    pub reasoning_tokens: u64,
    /// The cost in nano-units of the price tables' currency.
    pub cost_nanos: u64,
    /// Of the requests, those whose output sluice counted itself: streams that ended
    /// without the provider's final usage (the client left, the provider broke off).
    #[serde(default)]
    pub counted_requests: u64,
    /// Of the requests, those whose figures are sluice's estimates: sent, and nothing
    /// came back to count.
    #[serde(default)]
    pub estimated_requests: u64,
}

/// The number of counters in a row.
pub const COUNTERS: usize = 8;

impl UsageCounts {
    /// The counters' names, in [`values`](Self::values) order (Redis hash fields).
    pub const NAMES: [&'static str; COUNTERS] =
        ["req", "in", "cached", "out", "reasoning", "cost", "counted", "estimated"];

    /// The counters in [`NAMES`](Self::NAMES) order.
    #[must_use]
    pub const fn values(&self) -> [u64; COUNTERS] {
        [
            self.requests,
            self.input_tokens,
            self.cached_input_tokens,
            self.output_tokens,
            self.reasoning_tokens,
            self.cost_nanos,
            self.counted_requests,
            self.estimated_requests,
        ]
    }

    /// The counters from [`values`](Self::values) order.
    #[must_use]
    pub const fn from_values(v: [u64; COUNTERS]) -> Self {
        Self {
            requests: v[0],
            input_tokens: v[1],
            cached_input_tokens: v[2],
            output_tokens: v[3],
            reasoning_tokens: v[4],
            cost_nanos: v[5],
            counted_requests: v[6],
            estimated_requests: v[7],
        }
    }

    /// Adds `other` (saturating).
    pub fn add(&mut self, other: &Self) {
        let (a, b) = (self.values(), other.values());
        *self = Self::from_values(std::array::from_fn(|i| a[i].saturating_add(b[i])));
    }
}

/// How long rollups are kept: days before `today - days` are forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Today (UTC).
    pub today: Day,
    /// Days kept.
    pub days: u32,
}

impl Retention {
    /// The first day kept.
    #[must_use]
    pub const fn first_kept(&self) -> Day {
        self.today.saturating_sub(self.days)
    }
}

/// How long a store remembers that a usage batch was applied (two days), so that a retry
/// of it is recognised and not added again. A batch is retried every flush interval (at most
/// a minute) until a write of it is acknowledged, so the window that matters runs from a
/// write that landed unacknowledged to the retry that is acknowledged: about an interval
/// when the store comes back, as long as the instance stays cut off from a store that is up.
pub const USAGE_BATCH_TTL: std::time::Duration = std::time::Duration::from_secs(2 * DAY_SECS);
