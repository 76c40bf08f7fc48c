//! What a deployment's queue tells a request whose wait ran out.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::future::Future as _;
use std::num::{NonZeroU32, NonZeroU64};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use sluice_quota::queue::{Ask, DeploymentQueue, WaitError};
use sluice_quota::{
    Calendar, Claimer, Cost, Dimension, FakeClock, Limits, MemoryStore, QuotaStore, RateLimit, ScopeKey, ScopeKind,
    Share,
};

const LEASE: Duration = Duration::from_secs(60);

fn ask(path: Vec<sluice_quota::ScopeId>) -> Ask {
    Ask {
        path,
        cost: Cost::request(0, 0),
        share: Share::FULL,
        lease: LEASE,
        tenant: 0,
        lane: 0,
        weight: NonZeroU32::MIN,
        priority: 0,
        fair: None,
        calendar: Calendar::default(),
        deadline: None,
        claimer: Claimer::NOBODY,
        others: Vec::new(),
        retries: 0,
    }
}

/// Two requests of one key wait on a spent deployment; only the first is ever tried. Both
/// waits run out at once, and the queue empties (the dispatcher takes both out of the line)
/// before the second's own timer answers it: it is still told the limit that held its lane,
/// not an anonymous queue wait.
#[tokio::test]
async fn a_wait_that_ran_out_behind_another_is_told_the_limit_that_held_its_lane() {
    let clock = Arc::new(FakeClock::default());
    let store = MemoryStore::new(clock.clone());
    let rate = RateLimit::per_minute(Dimension::Requests, 1).unwrap().with_burst(NonZeroU64::MIN);
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(rate));
    let _spent = store.reserve_now(&[deployment], Cost::request(0, 0), LEASE).unwrap();
    let store: Arc<dyn QuotaStore> = Arc::new(store);
    let queue = DeploymentQueue::new(store, clock.clone());

    let first = tokio::spawn({
        let queue = Arc::clone(&queue);
        async move { queue.wait(ask(vec![deployment]), Duration::from_secs(2), 10, None).await }
    });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // The second joins, polled once, then left alone while the queue works.
    let mut second = pin!(queue.wait(ask(vec![deployment]), Duration::from_secs(2), 10, None));
    std::future::poll_fn(|cx| {
        assert!(second.as_mut().poll(cx).is_pending(), "the deployment is spent");
        Poll::Ready(())
    })
    .await;
    assert_eq!(queue.depth(), 2);
    clock.advance(Duration::from_secs(2));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(queue.depth(), 0, "both are out of the line");
    let (first, _) = first.await.unwrap();
    let (second, report) = second.await;
    for result in [first, second] {
        let Err(WaitError::TimedOut { rejection: Some(refusal), .. }) = result else {
            panic!("not the deployment's refusal: {result:?}")
        };
        assert_eq!(refusal.scope, ScopeKey::new(ScopeKind::Deployment, "d"));
    }
    assert_eq!(report.bound_by.map(|r| r.scope), Some(ScopeKey::new(ScopeKind::Deployment, "d")));
}

/// A queue that granted a line at ten a second and then stood empty predicts the next
/// wait at the rate it drained at: the idle time since does not divide that rate down (a
/// queue most requests pass by, with a clump now and then, priced a short line as a long
/// wait and refused requests that would have passed).
#[tokio::test]
async fn after_a_clump_the_prediction_keeps_the_rate_the_queue_drained_at() {
    let clock = Arc::new(FakeClock::default());
    let store = MemoryStore::new(clock.clone());
    let rate = RateLimit::per_minute(Dimension::Requests, 600).unwrap().with_burst(NonZeroU64::MIN);
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(rate));
    let _spent = store.reserve_now(&[deployment], Cost::request(0, 0), LEASE).unwrap();
    let store: Arc<dyn QuotaStore> = Arc::new(store);
    let queue = DeploymentQueue::new(store, clock.clone());
    // Ten requests wait for the deployment's next ten slots, a tenth of a second apart.
    let mut waiting = Vec::new();
    for _ in 0..10 {
        let queue = Arc::clone(&queue);
        waiting.push(tokio::spawn(
            async move { queue.wait(ask(vec![deployment]), Duration::from_secs(5), 10, None).await },
        ));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    for _ in 0..100 {
        clock.advance(Duration::from_millis(20));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }
    for handle in waiting {
        assert!(handle.await.unwrap().0.is_ok(), "granted in its slot");
    }
    // Eight idle seconds later, one request waits behind nobody: its own turn, at the
    // rate the queue drained at (about ten a second), not a rate spread over the idle time.
    clock.advance(Duration::from_secs(8));
    let eta = queue.predict(&ask(vec![deployment]), None);
    assert!(eta <= Duration::from_millis(200), "the drain rate, not the idle time: {eta:?}");
}
