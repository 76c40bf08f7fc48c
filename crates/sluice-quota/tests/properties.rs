//! Invariants of the admission core, on a fake timeline.
#![allow(clippy::unwrap_used, reason = "a test helper that fails loudly")]

use std::num::NonZeroU64;
use std::time::Duration;

use proptest::prelude::*;
use sluice_quota::{
    Cost, Dimension, Ledger, Limits, Nanos, RateLimit, RejectionKind, ScopeId, ScopeKey, ScopeKind, Settlement,
};

const LEASE: Duration = Duration::from_secs(3_600);
const MINUTE_NS: u64 = 60_000_000_000;

fn tokens_limit(amount: u64, burst: u64) -> RateLimit {
    RateLimit::per_minute(Dimension::TotalTokens, amount).unwrap().with_burst(NonZeroU64::new(burst).unwrap())
}

fn one_scope(limit: RateLimit) -> (Ledger, ScopeId) {
    let mut ledger = Ledger::new();
    let id = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(limit));
    (ledger, id)
}

/// Amounts that divide a minute in nanoseconds, so unit arithmetic is exact.
fn exact_amount() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![60, 600, 1_000, 6_000, 60_000, 600_000])
}

proptest! {
    /// In any window [a, b] the admitted cost never exceeds the bucket's burst (or the
    /// single largest request, which may pass from a full bucket) plus the refill.
    #[test]
    fn never_over_admits_in_any_window(
        amount in exact_amount(),
        burst_pct in 1u64..=100,
        steps in prop::collection::vec((0u64..2_000_000_000, 1u64..=100), 1..200),
    ) {
        let burst = (amount * burst_pct / 100).max(1);
        let limit = tokens_limit(amount, burst);
        let (mut ledger, id) = one_scope(limit);
        let mut now = 0u64;
        let mut admitted: Vec<(u64, u64)> = Vec::new();
        for (gap, cost_pct) in steps {
            now += gap;
            let cost = (amount * cost_pct / 100).max(1);
            if ledger.reserve(Nanos(now), &[id], Cost::request(cost, 0), LEASE).is_ok() {
                admitted.push((now, cost));
            }
        }
        for i in 0..admitted.len() {
            let mut sum = 0u64;
            let mut largest = 0u64;
            for &(t, cost) in &admitted[i..] {
                sum += cost;
                largest = largest.max(cost);
                let refill = u128::from(t - admitted[i].0) * u128::from(amount) / u128::from(MINUTE_NS);
                let bound = u128::from(burst.max(largest)) + refill + 1;
                prop_assert!(u128::from(sum) <= bound, "window from {} to {}: {} > {}", admitted[i].0, t, sum, bound);
            }
        }
    }

    /// A request refused with "retry after w" passes at exactly now + w, and not 1 ms before.
    /// (The history's costs leave room in every burst: a cost refused while waiting for an
    /// idle window claims it, and a smaller one's hint then counts on the claimer passing
    /// first, which the claim tests show.)
    #[test]
    fn passes_exactly_at_retry_after(
        amounts in prop::collection::vec(exact_amount(), 1..4),
        history in prop::collection::vec((0u64..500_000_000, 1u64..=9), 0..50),
        cost_pct in 1u64..=100,
    ) {
        let mut ledger = Ledger::new();
        let kinds = [ScopeKind::Tenant, ScopeKind::Team, ScopeKind::Deployment];
        let path: Vec<ScopeId> = amounts.iter().zip(kinds).map(|(&amount, kind)| {
            let limit = tokens_limit(amount, (amount / 10).max(1));
            ledger.register(Nanos(0), ScopeKey::new(kind, "s"), Limits::unlimited().with_rate(limit))
        }).collect();
        let smallest = *amounts.iter().min().unwrap();
        let mut now = 0u64;
        for (gap, pct) in history {
            now += gap;
            let _ = ledger.reserve(Nanos(now), &path, Cost::request((smallest * pct / 100).max(1), 0), LEASE);
        }
        let cost = Cost::request((smallest * cost_pct / 100).max(1), 0);
        if let Err(rejection) = ledger.reserve(Nanos(now), &path, cost, LEASE) {
            let RejectionKind::RetryAfter(wait) = rejection.kind else {
                return Err(TestCaseError::fail(format!("unexpected {rejection:?}")));
            };
            let wait = u64::try_from(wait.as_nanos()).unwrap();
            if wait > 1_000_000 {
                prop_assert!(ledger.reserve(Nanos(now + wait - 1_000_000), &path, cost, LEASE).is_err());
            }
            prop_assert!(ledger.reserve(Nanos(now + wait), &path, cost, LEASE).is_ok());
        }
    }

    /// Reserving and settling with the real usage leaves the bucket exactly as if only
    /// the usage had been taken.
    #[test]
    fn reserve_then_settle_conserves_tokens(
        amount in exact_amount(),
        ops in prop::collection::vec((1u64..=100, 0u64..=100), 1..30),
    ) {
        let limit = tokens_limit(amount, amount);
        let (mut ledger, id) = one_scope(limit);
        let now = Nanos(MINUTE_NS);
        let mut used_total = 0u64;
        for (reserve_pct, used_pct) in ops {
            let reserved = (amount * reserve_pct / 100 / 30).max(1);
            let used = reserved * used_pct / 100;
            if let Ok(grant) = ledger.reserve(now, &[id], Cost::request(reserved, 0), LEASE) {
                ledger.settle(now, grant.id, Settlement::exact(Cost::request(used, 0)));
                used_total += used;
            }
        }
        let snapshot = ledger.snapshot(now, id).unwrap();
        prop_assert_eq!(snapshot.rates[0].remaining, amount.saturating_sub(used_total));
        prop_assert_eq!(snapshot.in_flight.0, 0);
    }

    /// A refused reservation changes no bucket on the path.
    #[test]
    fn refusal_debits_nothing(
        amounts in prop::collection::vec(exact_amount(), 2..6),
        costs in prop::collection::vec(1u64..700_000, 1..40),
    ) {
        let mut ledger = Ledger::new();
        let kinds = [ScopeKind::Org, ScopeKind::Tenant, ScopeKind::Team, ScopeKind::ApiKey, ScopeKind::Deployment];
        let path: Vec<ScopeId> = amounts.iter().zip(kinds).map(|(&amount, kind)| {
            let limits = Limits::unlimited()
                .with_rate(tokens_limit(amount, (amount / 4).max(1)))
                .with_concurrency(NonZeroU64::new(20).unwrap());
            ledger.register(Nanos(0), ScopeKey::new(kind, "s"), limits)
        }).collect();
        let now = Nanos(5 * MINUTE_NS);
        for cost in costs {
            let before: Vec<_> = path.iter().map(|&id| ledger.snapshot(now, id)).collect();
            if ledger.reserve(now, &path, Cost::request(cost, 0), LEASE).is_err() {
                let after: Vec<_> = path.iter().map(|&id| ledger.snapshot(now, id)).collect();
                prop_assert_eq!(before, after);
            }
        }
    }
}

proptest! {
    /// After a provider's report, the bucket holds no more than the provider said was
    /// left (or its own fill, if that was lower), and a later looser report loosens nothing.
    #[test]
    fn tighten_never_leaves_more_than_reported_and_never_loosens(
        amount in exact_amount(),
        burst_pct in 1u64..=100,
        used in 0u64..=100,
        reported in 0u64..=200_000,
        looser in 0u64..=200_000,
    ) {
        let burst = (amount * burst_pct / 100).max(1);
        let (mut ledger, id) = one_scope(tokens_limit(amount, burst));
        let now = Nanos(MINUTE_NS);
        let take = (burst * used / 100).min(burst);
        if take > 0 {
            let _grant = ledger.reserve(now, &[id], Cost::request(take, 0), LEASE).unwrap();
        }
        let before = ledger.snapshot(now, id).unwrap().rates[0].remaining;
        ledger.tighten(now, id, Dimension::TotalTokens, reported, None);
        let after = ledger.snapshot(now, id).unwrap().rates[0].remaining;
        prop_assert!(after <= before.min(reported));
        ledger.tighten(now, id, Dimension::TotalTokens, reported.saturating_add(looser), None);
        prop_assert_eq!(ledger.snapshot(now, id).unwrap().rates[0].remaining, after);
        // Other dimensions are untouched.
        ledger.tighten(now, id, Dimension::Requests, 0, None);
        prop_assert_eq!(ledger.snapshot(now, id).unwrap().rates[0].remaining, after);
    }
}
