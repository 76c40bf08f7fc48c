//! A pool's request tries its members in order and is admitted on the first that can take
//! it; when none can, it learns the soonest any could.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::queue::{Alternative, Ask, DeploymentQueue};
use sluice_quota::{
    Calendar, Claimer, Cost, Demand, Dimension, FakeClock, Limits, MemoryStore, QuotaStore as _, RateLimit,
    RejectionKind, ReserveError, ScopeId, ScopeKey, ScopeKind, Share,
};

const LEASE: Duration = Duration::from_secs(60);

/// A memory store with one deployment per `rpm` (each its whole minute as burst).
fn pool(rpms: &[u64]) -> (MemoryStore, Vec<ScopeId>) {
    pool_on(Arc::new(FakeClock::default()), rpms)
}

fn pool_on(clock: Arc<FakeClock>, rpms: &[u64]) -> (MemoryStore, Vec<ScopeId>) {
    let store = MemoryStore::new(clock);
    let members = rpms
        .iter()
        .enumerate()
        .map(|(i, &rpm)| {
            let rate =
                RateLimit::per_minute(Dimension::Requests, rpm).unwrap().with_burst(NonZeroU64::new(rpm).unwrap());
            store.register(ScopeKey::new(ScopeKind::Deployment, format!("d{i}")), Limits::unlimited().with_rate(rate))
        })
        .collect();
    (store, members)
}

fn demands(members: &[ScopeId]) -> Vec<Demand<'_>> {
    members.iter().map(|m| Demand::new(std::slice::from_ref(m), Cost::request(0, 0), LEASE)).collect()
}

#[tokio::test]
async fn a_request_is_admitted_on_the_first_member_in_order_that_can_take_it() {
    let (store, members) = pool(&[1, 2]);
    assert_eq!(store.admit_first(demands(&members)).await.unwrap().0, 0);
    // The first member's one request a minute is taken: the next goes to the second.
    assert_eq!(store.admit_first(demands(&members)).await.unwrap().0, 1);
    assert_eq!(store.admit_first(demands(&members)).await.unwrap().0, 1);
    // Nothing was reserved on a member that refused: the second holds no third request.
    let refused = store.admit_first(demands(&members)).await.unwrap_err();
    assert!(matches!(refused, ReserveError::Rejected(_)), "{refused}");
}

#[tokio::test]
async fn when_no_member_can_take_it_the_refusal_is_the_soonest_of_theirs() {
    // One request a minute on the first, sixty on the second: both used up at once.
    let (store, members) = pool(&[1, 60]);
    for _ in 0..61 {
        let _held = store.admit_first(demands(&members)).await.unwrap();
    }
    let ReserveError::Rejected(refusal) = store.admit_first(demands(&members)).await.unwrap_err() else {
        panic!("a store error")
    };
    let RejectionKind::RetryAfter(wait) = refusal.kind else { panic!("{refusal:?}") };
    // The second member refills a request in a second; the first only in a minute.
    assert!(wait <= Duration::from_secs(1), "{wait:?}");
    assert_eq!(refusal.scope, ScopeKey::new(ScopeKind::Deployment, "d1"));
}

#[tokio::test]
async fn no_demand_is_a_store_error_not_a_grant() {
    let (store, _) = pool(&[1]);
    assert!(matches!(store.admit_first(Vec::new()).await, Err(ReserveError::Store(_))));
}

#[tokio::test]
async fn a_waiting_pool_request_is_granted_by_whichever_member_frees_first() {
    let clock = Arc::new(FakeClock::default());
    // One request a minute on the first member, two on the second (one every 30 s).
    let (store, members) = pool_on(Arc::clone(&clock), &[1, 2]);
    let store: Arc<dyn sluice_quota::QuotaStore> = Arc::new(store);
    for _ in 0..3 {
        let _held = store.admit_first(demands(&members)).await.unwrap();
    }
    let queue = DeploymentQueue::new(Arc::clone(&store), clock.clone());
    let ask = Ask {
        path: vec![members[0]],
        cost: Cost::request(0, 0),
        share: Share::FULL,
        lease: LEASE,
        tenant: 0,
        lane: 0,
        weight: std::num::NonZeroU32::MIN,
        priority: 0,
        fair: None,
        calendar: Calendar::default(),
        deadline: None,
        claimer: Claimer::NOBODY,
        others: vec![Alternative { path: vec![members[1]], cost: Cost::request(0, 0) }],
        retries: 0,
    };
    let waiting = tokio::spawn({
        let queue = Arc::clone(&queue);
        async move { queue.wait(ask, Duration::from_secs(120), 10, None).await }
    });
    // Both members are spent: the request waits, and the second member's refill (30 s)
    // comes before the first's (60 s).
    for _ in 0..31 {
        tokio::task::yield_now().await;
        clock.advance(Duration::from_secs(1));
        tokio::task::yield_now().await;
    }
    let (granted, report) = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
    assert!(granted.is_ok(), "{granted:?}");
    assert_eq!(report.member, 1, "the second member freed first");
    assert_eq!(queue.depth(), 0);
}

#[tokio::test]
async fn what_a_refusal_records_is_kept_only_when_no_member_passes() {
    // Two members of 10 tokens a second with a burst of 100 and a 200 ms guard; the first
    // has 10 tokens taken, so a whole burst needs its window idle, and claims it if refused.
    let clock = FakeClock::default();
    let store = MemoryStore::new(Arc::new(clock.clone()));
    let rate = || RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(NonZeroU64::new(100).unwrap());
    let members: Vec<[ScopeId; 1]> = (0..2)
        .map(|i| {
            let limits = Limits::unlimited().with_rate(rate().guarded());
            [store.register(ScopeKey::new(ScopeKind::Deployment, format!("g{i}")), limits)]
        })
        .collect();
    let _small = store.reserve_now(&members[0], Cost::request(10, 0), LEASE).unwrap();
    let whole = || members.iter().map(|m| Demand::new(m, Cost::request(100, 0), LEASE)).collect::<Vec<_>>();
    let small_passes = |m: &[ScopeId]| store.reserve_now(m, Cost::request(1, 0), LEASE).is_ok();
    // Admitted on the second: the first holds no claim for it.
    assert_eq!(store.admit_first(whole()).await.unwrap().0, 1);
    assert!(small_passes(&members[0]), "held back for a request admitted elsewhere");
    // Refused on both: the request waits, and its claims hold smaller ones back on both.
    assert!(store.admit_first(whole()).await.is_err());
    clock.advance(Duration::from_millis(400));
    assert!(!small_passes(&members[0]), "the waiting request's claim was not kept");
    assert!(!small_passes(&members[1]), "the waiting request's claim was not kept");
}
