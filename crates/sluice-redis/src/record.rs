//! The reservation record a script stores, and the scope descriptions it is built from.
//! Self-contained, so any instance's script can settle or expire it.

use serde::Serialize;
use sluice_quota::{Cost, Dimension, Limits, ScopeKind};

/// One limit, in the scripts' units (periods in microseconds).
#[derive(Debug, Clone, Serialize)]
pub struct LimitSpec {
    /// Dimension: 1 requests, 2 input, 3 output, 4 total tokens.
    pub d: u8,
    /// Amount per period.
    pub a: u64,
    /// Period, µs.
    pub p: u64,
    /// Burst.
    pub b: u64,
}

/// One scope of a reservation.
#[derive(Debug, Clone, Serialize)]
pub struct ScopeSpec {
    /// The scope's hash key.
    pub k: String,
    /// 1 for a deployment scope (settled by the provider's rule).
    pub dep: u8,
    /// 1 for a scope shared by many tenants (a lower class may use only its share).
    pub sh: u8,
    /// Concurrency cap, 0 for none.
    pub cc: u64,
    /// Rate limits.
    pub l: Vec<LimitSpec>,
}

impl ScopeSpec {
    /// The script's view of a scope with `limits` stored at `key`.
    #[must_use]
    pub fn new(kind: ScopeKind, key: String, limits: &Limits) -> Self {
        let l = limits
            .rates
            .iter()
            .map(|r| LimitSpec {
                d: dimension_code(r.dimension),
                a: r.amount.get(),
                p: u64::try_from(r.period.as_micros()).unwrap_or(u64::MAX).max(1),
                b: r.burst.get(),
            })
            .collect();
        let cc = limits.concurrency.map_or(0, std::num::NonZeroU64::get);
        Self { k: key, dep: u8::from(kind == ScopeKind::Deployment), sh: u8::from(kind.is_shared()), cc, l }
    }
}

fn dimension_code(d: Dimension) -> u8 {
    match d {
        Dimension::Requests => 1,
        Dimension::InputTokens => 2,
        Dimension::OutputTokens => 3,
        Dimension::TotalTokens => 4,
    }
}

/// What a script stores for a reservation.
#[derive(Debug, Serialize)]
pub struct Record<'a> {
    /// Cost: requests, input, output.
    pub c: [u64; 3],
    /// Its scopes.
    pub s: Vec<&'a ScopeSpec>,
}

impl<'a> Record<'a> {
    /// The record of `cost` on `scopes`, as JSON.
    #[must_use]
    pub fn json(cost: Cost, scopes: Vec<&'a ScopeSpec>) -> String {
        let record = Record { c: [cost.requests, cost.input_tokens, cost.output_tokens], s: scopes };
        serde_json::to_string(&record).unwrap_or_default()
    }
}
