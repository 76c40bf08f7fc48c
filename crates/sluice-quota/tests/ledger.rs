//! Behaviour of the ledger that examples show best.
#![allow(clippy::unwrap_used, reason = "a test helper that fails loudly")]

use std::num::NonZeroU64;
use std::time::Duration;

use sluice_quota::{
    Cost, Dimension, Ledger, Limits, Nanos, RateLimit, RejectionKind, ScopeKey, ScopeKind, Settled, Settlement,
};

const SEC: u64 = 1_000_000_000;

fn nz(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

#[test]
fn concurrency_slot_is_held_until_settle_or_expiry() {
    let mut ledger = Ledger::new();
    let limits = Limits::unlimited().with_concurrency(nz(1));
    let id = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "ollama"), limits);
    let lease = Duration::from_secs(5);
    let first = ledger.reserve(Nanos(0), &[id], Cost::request(10, 10), lease).unwrap();
    let busy = ledger.reserve(Nanos(SEC), &[id], Cost::request(10, 10), lease).unwrap_err();
    assert_eq!(busy.kind, RejectionKind::SlotsBusy);
    assert_eq!(ledger.settle(Nanos(SEC), first.id, Settlement::exact(Cost::request(10, 3))), Settled::Reconciled);
    assert_eq!(ledger.settle(Nanos(SEC), first.id, Settlement::exact(Cost::request(10, 3))), Settled::Unknown);
    let second = ledger.reserve(Nanos(SEC), &[id], Cost::request(10, 10), lease).unwrap();
    // Never settled: the lease runs out and the slot comes back.
    assert!(ledger.reserve(Nanos(5 * SEC), &[id], Cost::request(1, 1), lease).is_err());
    assert!(ledger.reserve(Nanos(6 * SEC), &[id], Cost::request(1, 1), lease).is_ok());
    assert_eq!(ledger.settle(Nanos(6 * SEC), second.id, Settlement::exact(Cost::default())), Settled::Unknown);
}

#[test]
fn expiry_refunds_output_to_own_scopes_but_not_to_the_provider() {
    let mut ledger = Ledger::new();
    let limits = || {
        Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::InputTokens, 6_000).unwrap().with_burst(nz(6_000)))
            .with_rate(RateLimit::per_minute(Dimension::OutputTokens, 6_000).unwrap().with_burst(nz(6_000)))
    };
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "t"), limits());
    let upstream = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "d"), limits());
    let now = Nanos(60 * SEC);
    let _lost = ledger.reserve(now, &[tenant, upstream], Cost::request(1_000, 2_000), Duration::from_secs(1)).unwrap();
    assert_eq!(ledger.expire(Nanos(61 * SEC)), 1);
    assert_eq!(ledger.open_reservations(), 0);
    let remaining =
        |id| ledger.snapshot(Nanos(61 * SEC), id).unwrap().rates.iter().map(|r| r.remaining).collect::<Vec<_>>();
    // One second of refill (100 tokens) has passed since the reservation.
    assert_eq!(remaining(tenant), [5_100, 6_000]);
    assert_eq!(remaining(upstream), [5_100, 4_100]);
}

#[test]
fn deployment_scopes_settle_by_the_providers_rule() {
    let mut ledger = Ledger::new();
    let tpm = || {
        Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 6_000).unwrap().with_burst(nz(6_000)))
    };
    let tenant = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "t"), tpm());
    let upstream = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "d"), tpm());
    let now = Nanos(60 * SEC);
    let grant = ledger.reserve(now, &[tenant, upstream], Cost::request(1_000, 2_000), Duration::from_secs(60)).unwrap();
    let settlement = Settlement { used: Cost::request(900, 100), upstream: Cost::request(900, 2_000) };
    assert_eq!(ledger.settle(now, grant.id, settlement), Settled::Reconciled);
    assert_eq!(ledger.snapshot(now, tenant).unwrap().rates[0].remaining, 5_000);
    assert_eq!(ledger.snapshot(now, upstream).unwrap().rates[0].remaining, 3_100);
}

#[test]
fn never_fits_is_distinct_from_not_yet() {
    let mut ledger = Ledger::new();
    let limits = Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::OutputTokens, 4_000).unwrap());
    let id = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "t"), limits);
    let err = ledger.reserve(Nanos(0), &[id], Cost::request(10, 4_001), Duration::from_secs(60)).unwrap_err();
    assert_eq!(err.kind, RejectionKind::NeverFits { cost: 4_001, capacity: 4_000 });
    assert_eq!(err.retry_after(), None);
    assert_eq!(err.limiter.to_string(), "output_tpm");
}

#[test]
fn rejection_names_the_scope_with_the_longest_wait() {
    let mut ledger = Ledger::new();
    let tenant = ledger.register(
        Nanos(0),
        ScopeKey::new(ScopeKind::Tenant, "acme"),
        Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 60).unwrap().with_burst(nz(1))),
    );
    let upstream = ledger.register(
        Nanos(0),
        ScopeKey::new(ScopeKind::Deployment, "d"),
        Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 6).unwrap().with_burst(nz(1))),
    );
    let now = Nanos(100 * SEC);
    let _g = ledger.reserve(now, &[tenant, upstream], Cost::request(1, 1), Duration::from_secs(60)).unwrap();
    let err = ledger.reserve(now, &[tenant, upstream], Cost::request(1, 1), Duration::from_secs(60)).unwrap_err();
    assert_eq!(err.scope.to_string(), "deployment:d");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(10)));
}

#[test]
fn changing_limits_keeps_reservations_and_fill() {
    let mut ledger = Ledger::new();
    let key = ScopeKey::new(ScopeKind::Deployment, "d");
    let rpm =
        |n| Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, n).unwrap().with_burst(nz(n)));
    let id = ledger.register(Nanos(0), key.clone(), rpm(60));
    let now = Nanos(60 * SEC);
    let grant = ledger.reserve(now, &[id], Cost::request(0, 0), Duration::from_secs(60)).unwrap();
    assert_eq!(ledger.register(now, key, rpm(120)), id);
    assert_eq!(ledger.snapshot(now, id).unwrap().rates[0].remaining, 118);
    assert_eq!(ledger.settle(now, grant.id, Settlement::exact(Cost::request(0, 0))), Settled::Reconciled);
}

#[test]
fn a_paused_scope_holds_everyone_back_until_the_pause_ends() {
    let mut ledger = Ledger::new();
    let upstream = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited());
    let other = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Deployment, "e"), Limits::unlimited());
    let now = Nanos(10 * SEC);
    ledger.pause(upstream, Nanos(13 * SEC));
    ledger.pause(upstream, Nanos(12 * SEC)); // never shortens
    let err = ledger.reserve(now, &[upstream], Cost::request(1, 1), Duration::from_secs(60)).unwrap_err();
    assert_eq!(err.limiter.to_string(), "provider_cooldown");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
    assert!(ledger.reserve(now, &[other], Cost::request(1, 1), Duration::from_secs(60)).is_ok());
    assert!(ledger.reserve(Nanos(13 * SEC), &[upstream], Cost::request(1, 1), Duration::from_secs(60)).is_ok());
}

#[test]
fn a_charge_debits_whatever_the_bucket_holds_and_takes_no_slot() {
    let mut ledger = Ledger::new();
    // 60 requests a minute, a burst of 10; 600 total tokens a minute, a burst of 100.
    let limits = Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::Requests, 60).unwrap().with_burst(nz(10)))
        .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)))
        .with_concurrency(nz(1));
    let id = ledger.register(Nanos(0), ScopeKey::new(ScopeKind::Tenant, "shadow"), limits);
    assert_eq!(ledger.rate_dimensions(id), [Dimension::Requests, Dimension::TotalTokens]);
    // Twelve requests of 10 tokens each granted elsewhere: more than the bursts hold, so
    // both buckets are empty, not in debt.
    for _ in 0..12 {
        ledger.charge(Nanos(0), &[id], Cost::request(5, 5));
    }
    let refused = ledger.reserve(Nanos(0), &[id], Cost::request(1, 0), Duration::from_secs(5)).unwrap_err();
    assert_eq!(refused.kind, RejectionKind::RetryAfter(Duration::from_secs(1)), "one request refills in 1 s");
    // No slot was taken: after the refill, one request goes (the cap is 1).
    assert!(ledger.reserve(Nanos(SEC), &[id], Cost::request(1, 0), Duration::from_secs(5)).is_ok());
    // A charge never loosens a bucket already in debt.
    ledger.charge(Nanos(SEC), &[id], Cost::request(0, 0));
    assert!(ledger.reserve(Nanos(SEC), &[id], Cost::request(1, 0), Duration::from_secs(5)).is_err());
}

/// A deployment of 300,000 TPM with sluice's default one-second burst and send guard, on
/// the memory store and a fake clock.
fn guarded_deployment() -> (sluice_quota::MemoryStore, sluice_quota::FakeClock, sluice_quota::ScopeId) {
    use sluice_quota::QuotaStore as _;
    let clock = sluice_quota::FakeClock::default();
    let store = sluice_quota::MemoryStore::new(std::sync::Arc::new(clock.clone()));
    let rate = RateLimit::per_minute(Dimension::TotalTokens, 300_000).unwrap().with_burst(nz(5_000)).guarded();
    let id = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(rate));
    (store, clock, id)
}

/// Admits as many 300-token requests as the store lets through now (a backlog from many
/// instances retrying at once); returns how many.
fn drain_small(store: &sluice_quota::MemoryStore, id: sluice_quota::ScopeId) -> usize {
    let lease = Duration::from_secs(60);
    std::iter::from_fn(|| store.reserve_now(&[id], Cost::request(300, 0), lease).ok()).take(100).count()
}

#[test]
fn a_stream_of_small_requests_cannot_starve_one_that_needs_an_idle_window() {
    let (store, clock, id) = guarded_deployment();
    let lease = Duration::from_secs(60);
    let big = Cost::request(5_030, 0); // more than the burst less its guard: needs an idle window
    let tick = Duration::from_millis(10);
    let mut small_before = 0;
    // The small requests keep the window busy; the large one asks every tick.
    let mut passed_at = None;
    for n in 0..1_000u64 {
        small_before += drain_small(&store, id);
        if store.reserve_now(&[id], big, lease).is_ok() {
            passed_at = Some(Duration::from_millis(10 * n));
            break;
        }
        clock.advance(tick);
    }
    // Its claim holds the small ones back until the window is idle: about one window.
    let passed_at = passed_at.expect("the large request passed within 10 s");
    assert!(passed_at <= Duration::from_millis(1_100), "passed after {passed_at:?}");
    assert!(small_before >= 16, "the small ones had the window first: {small_before}");
    // Behind it, the small ones go on once its step has been paid.
    let mut small_after = 0;
    for _ in 0..200 {
        clock.advance(tick);
        small_after += drain_small(&store, id);
    }
    assert!(small_after >= 16, "the small ones resumed: {small_after}");
}

#[test]
fn a_claim_whose_claimer_went_away_lapses() {
    let (store, clock, id) = guarded_deployment();
    let lease = Duration::from_secs(60);
    assert!(drain_small(&store, id) > 0);
    // Refused once, never asking again: its claim holds the small ones back for a while...
    assert!(store.reserve_now(&[id], Cost::request(5_030, 0), lease).is_err());
    let mut held_for = Duration::ZERO;
    while drain_small(&store, id) == 0 {
        clock.advance(Duration::from_millis(10));
        held_for += Duration::from_millis(10);
        assert!(held_for < Duration::from_secs(10), "the claim never lapsed");
    }
    // ...until it lapses: a grace after the window was idle (the small ones left it 0.9 to
    // 1.02 s from idle), not its own step on top as well.
    let grace = sluice_quota::bucket::CLAIM_GRACE;
    let (soonest, latest) = (Duration::from_millis(900) + grace, Duration::from_millis(1_030) + grace);
    assert!(held_for >= soonest && held_for <= latest, "{held_for:?}");
}

#[test]
fn a_claim_lives_no_longer_than_its_claimer_waits() {
    let (store, clock, id) = guarded_deployment();
    let lease = Duration::from_secs(60);
    let big = Cost::request(5_030, 0);
    let path = [id];
    let waiting = |patience: Duration| sluice_quota::Demand {
        patience: Some(patience),
        ..sluice_quota::Demand::new(&path, big, lease)
    };
    // The window is busy for about a second; a claimer that waits only half of it claims
    // nothing, and the small ones go on as the window refills.
    assert!(drain_small(&store, id) > 0);
    assert!(store.admit_now(&waiting(Duration::from_millis(500))).is_err());
    clock.advance(Duration::from_millis(100));
    assert!(drain_small(&store, id) > 0, "held back by a claimer that will have gone");
    // One that waits 1.1 s claims the window, and holds the small ones back until it stops
    // waiting (1.1 s from now), not a grace past the idle instant.
    assert!(store.admit_now(&waiting(Duration::from_millis(1_100))).is_err());
    let mut held_for = Duration::ZERO;
    while drain_small(&store, id) == 0 {
        clock.advance(Duration::from_millis(10));
        held_for += Duration::from_millis(10);
        assert!(held_for < Duration::from_secs(5), "the claim never lapsed");
    }
    assert!(held_for >= Duration::from_millis(1_000) && held_for <= Duration::from_millis(1_110), "{held_for:?}");
}

#[test]
fn a_claim_withdrawn_by_its_claimer_holds_nothing_back() {
    use sluice_quota::QuotaStore as _;
    let (store, clock, id) = guarded_deployment();
    let lease = Duration::from_secs(60);
    let path = [id];
    let claiming = |by: u64| sluice_quota::Demand {
        patience: Some(Duration::from_secs(30)),
        claimer: sluice_quota::Claimer::new(by),
        ..sluice_quota::Demand::new(&path, Cost::request(5_030, 0), lease)
    };
    assert!(drain_small(&store, id) > 0);
    assert!(store.admit_now(&claiming(7)).is_err());
    clock.advance(Duration::from_millis(100));
    assert_eq!(drain_small(&store, id), 0, "the claim holds the small ones back");
    // Someone else's withdrawal, or nobody's, changes nothing.
    assert!(futures_ready(store.withdraw(&path, sluice_quota::Claimer::new(8))));
    assert!(futures_ready(store.withdraw(&path, sluice_quota::Claimer::NOBODY)));
    clock.advance(Duration::from_millis(100));
    assert_eq!(drain_small(&store, id), 0, "still claimed");
    // Its claimer's request went: the window serves the small ones as it refills.
    assert!(futures_ready(store.withdraw(&path, sluice_quota::Claimer::new(7))));
    assert!(drain_small(&store, id) > 0, "the withdrawn claim still held them back");
}

#[test]
fn a_request_that_left_late_paces_the_next_one_from_where_it_left() {
    use sluice_quota::QuotaStore as _;
    let (store, clock, id) = guarded_deployment();
    let lease = Duration::from_secs(60);
    let whole = Cost::request(5_030, 0); // as large as the provider's one-second window
    // Admitted into an idle window, but it reached the wire 30 ms later (its task resumed
    // late, or its connection was opened first): the provider's window starts then.
    assert!(store.reserve_now(&[id], whole, lease).is_ok());
    clock.advance(Duration::from_millis(30));
    let sent = store.sent(id, whole, Duration::ZERO);
    assert!(futures_ready(sent));
    // Its step (1.006 s) plus the guard (20 ms) after its admission, the provider's window
    // is still 30 ms from idle: the next one waits for those 30 ms too.
    clock.advance(Duration::from_millis(996));
    let Err(sluice_quota::ReserveError::Rejected(early)) = store.reserve_now(&[id], whole, lease) else {
        panic!("the next request went out 30 ms early")
    };
    assert_eq!(early.retry_after(), Some(Duration::from_millis(30)));
    clock.advance(Duration::from_millis(30));
    assert!(store.reserve_now(&[id], whole, lease).is_ok());
}

/// Whether a store future is done with success at once (the memory store never waits).
fn futures_ready(future: sluice_quota::StoreFuture<'_, Result<(), sluice_quota::StoreError>>) -> bool {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = future;
    matches!(future.as_mut().poll(&mut context), std::task::Poll::Ready(Ok(())))
}

#[test]
fn several_scopes_read_at_once_are_each_scope_read_alone() {
    use sluice_quota::QuotaStore as _;
    let clock = sluice_quota::FakeClock::default();
    let store = sluice_quota::MemoryStore::new(std::sync::Arc::new(clock.clone()));
    let per_minute =
        |n| Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, n).unwrap().with_burst(nz(n)));
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "t"), per_minute(600));
    let key = store.register(ScopeKey::new(ScopeKind::ApiKey, "k"), per_minute(60));
    assert!(store.reserve_now(&[tenant, key], Cost::request(10, 0), Duration::from_secs(60)).is_ok());
    clock.advance(Duration::from_millis(250));
    let unknown = sluice_quota::ScopeId(99);
    let ids = [key, unknown, tenant];
    let together = ready(store.snapshots(&ids)).expect("the memory store reads at once");
    let alone: Vec<_> = ids.iter().map(|&id| ready(store.snapshot(id)).expect("read")).collect();
    assert_eq!(together, alone);
    assert!(together[1].is_none(), "an unknown scope reads as none, in its place");
    assert_eq!(together[0].as_ref().map(|s| s.rates[0].remaining), Some(59), "the key's request was counted");
}

/// A store future's success, when it is done at once (the memory store never waits).
fn ready<T>(mut future: sluice_quota::StoreFuture<'_, Result<T, sluice_quota::StoreError>>) -> Option<T> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(Ok(value)) => Some(value),
        _ => None,
    }
}
