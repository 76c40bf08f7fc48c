//! Money budgets in the ledger: calendar counters reserved all-or-nothing with the rates.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::time::Duration;

use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Cost, Demand, Dimension, IN_FLIGHT_RETRY, Ledger, LimiterName, Limits, Nanos,
    RateLimit, Rejection, RejectionKind, ReservationId, ScopeId, ScopeKey, ScopeKind, Settlement,
};

const LEASE: Duration = Duration::from_secs(600);
/// 2026-12-01T21:30:00Z.
const T: u64 = 1_796_160_600;
/// 2026-12-02T00:00:00Z.
const MIDNIGHT: u64 = 1_796_169_600;

fn daily(micros: u64) -> Limits {
    Limits::unlimited().with_budget(Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(micros).unwrap() })
}

fn priced(micros: u64) -> Cost {
    Cost::request(100, 50).with_money(micros)
}

fn admit(
    ledger: &mut Ledger,
    path: &[ScopeId],
    cost: Cost,
    unix: u64,
    offset: i32,
) -> Result<ReservationId, Rejection> {
    let demand = Demand { calendar: Calendar::at(unix, offset), ..Demand::new(path, cost, LEASE) };
    ledger.admit(Nanos(0), &demand).map(|grant| grant.id)
}

#[test]
fn a_daily_budget_admits_exactly_what_it_holds_and_refuses_until_midnight() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    // 0.30 each: three fit in 1.00, the fourth does not (once they are settled: until
    // then they only hold it, see below).
    for _ in 0..3 {
        let id = admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap();
        ledger.settle(Nanos(0), id, Settlement::exact(priced(300_000)));
    }
    let refused = admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap_err();
    assert_eq!(refused.limiter, LimiterName::Budget);
    assert_eq!(refused.limiter.to_string(), "budget");
    assert_eq!(refused.scope, ScopeKey::new(ScopeKind::Tenant, "acme"));
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(MIDNIGHT - T)));
    // What is left (0.10) still fits, and a request without a price is never refused.
    admit(&mut ledger, &[tenant], priced(100_000), T, 0).unwrap();
    admit(&mut ledger, &[tenant], priced(0), T, 0).unwrap();
    // At midnight UTC the day starts from zero.
    admit(&mut ledger, &[tenant], priced(300_000), MIDNIGHT - 1, 0).unwrap_err();
    admit(&mut ledger, &[tenant], priced(1_000_000), MIDNIGHT, 0).unwrap();
}

#[test]
fn a_budget_in_a_zone_east_of_utc_rolls_over_at_its_own_midnight() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "tokyo"), daily(500_000));
    // 14:59:59Z is 23:59:59 at +09:00.
    let before = MIDNIGHT - 9 * 3_600 - 1;
    let id = admit(&mut ledger, &[tenant], priced(500_000), before, 9 * 3_600).unwrap();
    ledger.settle(Nanos(0), id, Settlement::exact(priced(500_000)));
    let refused = admit(&mut ledger, &[tenant], priced(1), before, 9 * 3_600).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(1)));
    admit(&mut ledger, &[tenant], priced(500_000), before + 1, 9 * 3_600).unwrap();
    // In UTC the same instant is still the same day as the first charge.
    let mut utc = Ledger::new();
    let tenant = utc.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "utc"), daily(500_000));
    admit(&mut utc, &[tenant], priced(500_000), before, 0).unwrap();
    admit(&mut utc, &[tenant], priced(1), before + 1, 0).unwrap_err();
}

#[test]
fn settlement_refunds_or_charges_the_real_cost() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    let grant = admit(&mut ledger, &[tenant], priced(800_000), T, 0).unwrap();
    admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap_err();
    // It really cost 0.20: 0.60 comes back.
    ledger.settle(Nanos(1), grant, Settlement::exact(priced(200_000)));
    let second = admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap();
    // This one cost 0.70 instead of 0.30: 0.90 is spent, 0.10 left.
    ledger.settle(Nanos(1), second, Settlement::exact(priced(700_000)));
    admit(&mut ledger, &[tenant], priced(100_001), T, 0).unwrap_err();
    admit(&mut ledger, &[tenant], priced(100_000), T, 0).unwrap();
    let snapshot = ledger.snapshot(Nanos(1), tenant).unwrap();
    assert_eq!(snapshot.budgets[0].spent.used, 1_000_000);
    assert_eq!(snapshot.budgets[0].limit, 1_000_000);
}

#[test]
fn a_cost_above_the_whole_budget_never_fits() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    let refused = admit(&mut ledger, &[tenant], priced(1_000_001), T, 0).unwrap_err();
    assert_eq!(refused.limiter, LimiterName::Budget);
    assert_eq!(refused.kind, RejectionKind::NeverFits { cost: 1_000_001, capacity: 1_000_000 });
}

#[test]
fn a_refusal_by_a_rate_charges_no_budget_and_a_reload_keeps_what_was_spent() {
    let mut ledger = Ledger::new();
    let key = ScopeKey::new(ScopeKind::Tenant, "acme");
    let rpm = RateLimit::per_minute(Dimension::Requests, 1).unwrap();
    let tenant = ledger.register(Nanos(0), key.clone(), daily(1_000_000).with_rate(rpm));
    admit(&mut ledger, &[tenant], priced(400_000), T, 0).unwrap();
    let refused = admit(&mut ledger, &[tenant], priced(400_000), T, 0).unwrap_err();
    assert_eq!(refused.limiter, rpm.name(), "the rate refused, all or nothing");
    // A reload (a month budget added, the rate dropped) keeps the day's 0.40.
    let month = Budget { period: BudgetPeriod::Month, amount: NonZeroU64::new(10_000_000).unwrap() };
    ledger.register(Nanos(0), key, daily(1_000_000).with_budget(month));
    admit(&mut ledger, &[tenant], priced(600_000), T, 0).unwrap();
    let refused = admit(&mut ledger, &[tenant], priced(1), T, 0).unwrap_err();
    assert_eq!(refused.limiter, LimiterName::Budget);
}

#[test]
fn a_budget_held_by_reservations_in_flight_refuses_for_a_moment() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    // Three streams reserve 0.30 each; each will use far less.
    let streams: Vec<_> = (0..3).map(|_| admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap()).collect();
    let budget = ledger.snapshot(Nanos(0), tenant).unwrap().budgets[0];
    assert_eq!((budget.spent.used, budget.spent.held), (900_000, 900_000));
    // A fourth fits once they settle, not now: a refusal by the budget, for a moment.
    let refused = admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap_err();
    assert_eq!(refused.limiter, LimiterName::Budget);
    assert_eq!(refused.scope, ScopeKey::new(ScopeKind::Tenant, "acme"));
    assert_eq!(refused.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(1)));
    // One settles at 0.02: 0.62 spent, 0.60 held, and the fourth fits.
    ledger.settle(Nanos(1), streams[0], Settlement::exact(priced(20_000)));
    let budget = ledger.snapshot(Nanos(1), tenant).unwrap().budgets[0];
    assert_eq!((budget.spent.used, budget.spent.held), (620_000, 600_000));
    let fourth = admit(&mut ledger, &[tenant], priced(300_000), T, 0).unwrap();
    // 0.92 spent, 0.90 held: 0.09 fits the rest now, 0.99 only once they settle, and
    // 1.00 (what the settled 0.02 leaves no room for) not before midnight.
    admit(&mut ledger, &[tenant], priced(80_000), T, 0).unwrap();
    let held = admit(&mut ledger, &[tenant], priced(980_000), T, 0).unwrap_err();
    assert_eq!(held.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
    let spent = admit(&mut ledger, &[tenant], priced(990_000), T, 0).unwrap_err();
    assert_eq!(spent.kind, RejectionKind::RetryAfter(Duration::from_secs(MIDNIGHT - T)));
    ledger.settle(Nanos(1), fourth, Settlement::exact(priced(300_000)));
    let budget = ledger.snapshot(Nanos(1), tenant).unwrap().budgets[0];
    assert_eq!((budget.spent.used, budget.spent.held), (1_000_000, 680_000));
}

#[test]
fn an_expired_lease_keeps_its_money_spent_but_no_longer_held() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    let calendar = Calendar::at(T, 0);
    let lease = Duration::from_secs(5);
    let path = [tenant];
    let demand = |money| Demand { calendar, ..Demand::new(&path, priced(money), lease) };
    let _lost = ledger.admit(Nanos(0), &demand(700_000)).unwrap();
    let refused = ledger.admit(Nanos(0), &demand(400_000)).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY), "held while the lease runs");
    // The lease runs out: the reservation may have reached the provider, so its money
    // stays spent, but nothing holds it any more: the budget is spent until midnight.
    assert_eq!(ledger.expire(Nanos(lease.as_nanos() as u64)), 1);
    let budget = ledger.snapshot(Nanos(0), tenant).unwrap().budgets[0];
    assert_eq!((budget.spent.used, budget.spent.held), (700_000, 0));
    let refused = ledger.admit(Nanos(6_000_000_000), &demand(400_000)).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(MIDNIGHT - T)));
    let _rest = ledger.admit(Nanos(6_000_000_000), &demand(300_000)).unwrap();
}

#[test]
fn holds_of_an_earlier_period_do_not_hold_the_next() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    let late = admit(&mut ledger, &[tenant], priced(900_000), MIDNIGHT - 1, 0).unwrap();
    // The new day starts from zero, spent and held alike.
    let first = admit(&mut ledger, &[tenant], priced(600_000), MIDNIGHT, 0).unwrap();
    let refused = admit(&mut ledger, &[tenant], priced(600_000), MIDNIGHT, 0).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
    // Yesterday's reservation settling changes nothing today.
    ledger.settle(Nanos(0), late, Settlement::exact(priced(0)));
    let budget = ledger.snapshot(Nanos(0), tenant).unwrap().budgets[0];
    assert_eq!((budget.spent.used, budget.spent.held), (600_000, 600_000));
    ledger.settle(Nanos(0), first, Settlement::exact(priced(600_000)));
    let refused = admit(&mut ledger, &[tenant], priced(600_000), MIDNIGHT, 0).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(86_400)));
}

#[test]
fn a_budget_spent_for_good_answers_before_one_only_held() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "acme"), daily(1_000_000));
    let team = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Team, "acme/search"), daily(600_000));
    // The tenant is held by a reservation elsewhere; the team spent its day for good.
    let _elsewhere = admit(&mut ledger, &[tenant], priced(900_000), T, 0).unwrap();
    let id = admit(&mut ledger, &[team], priced(450_000), T, 0).unwrap();
    ledger.settle(Nanos(0), id, Settlement::exact(priced(450_000)));
    let refused = admit(&mut ledger, &[tenant, team], priced(200_000), T, 0).unwrap_err();
    assert_eq!(refused.scope, ScopeKey::new(ScopeKind::Team, "acme/search"));
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(MIDNIGHT - T)));
    // With room on the team, the tenant's hold answers.
    let refused = admit(&mut ledger, &[tenant, team], priced(120_000), T, 0).unwrap_err();
    assert_eq!(refused.scope, ScopeKey::new(ScopeKind::Tenant, "acme"));
    assert_eq!(refused.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
}
