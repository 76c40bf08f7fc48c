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
/// How long a predicted request may wait.
const MINUTE: Duration = Duration::from_secs(60);

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

/// A deployment limited to `per_minute` of `dimension` (with `burst`), spent, whose queue
/// has admitted three 20-token requests, one a second, and has one request of
/// `waiting_tokens` waiting.
async fn queue_with_history(
    dimension: Dimension,
    per_minute: u64,
    burst: u64,
    waiting_tokens: u64,
) -> (Arc<FakeClock>, Arc<DeploymentQueue>, sluice_quota::ScopeId, tokio::task::JoinHandle<()>) {
    let clock = Arc::new(FakeClock::default());
    let store = MemoryStore::new(clock.clone());
    let burst = NonZeroU64::new(burst).unwrap();
    let rate = RateLimit::per_minute(dimension, per_minute).unwrap().with_burst(burst);
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(rate));
    let _spent = store.reserve_now(&[deployment], Cost::request(burst.get(), 0), LEASE).unwrap();
    let store: Arc<dyn QuotaStore> = Arc::new(store);
    let queue = DeploymentQueue::new(store, clock.clone());
    let sized = |tokens: u64| Ask { cost: Cost::request(tokens, 0), ..ask(vec![deployment]) };
    let small: Vec<_> = (0..3)
        .map(|_| {
            let (queue, ask) = (Arc::clone(&queue), sized(20));
            tokio::spawn(async move { queue.wait(ask, Duration::from_secs(60), 10, None).await.0.unwrap() })
        })
        .collect();
    for _ in 0..3 {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        clock.advance(Duration::from_secs(1));
    }
    for granted in small {
        let _granted = granted.await.unwrap();
    }
    let large = tokio::spawn({
        let (queue, ask) = (Arc::clone(&queue), sized(waiting_tokens));
        async move {
            let _ = queue.wait(ask, Duration::from_secs(600), 10, None).await;
        }
    });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(queue.depth(), 1, "the large request waits");
    (clock, queue, deployment, large)
}

/// Behind a limit of requests, a queue's predicted wait counts the requests ahead, not
/// their tokens: one large prompt ahead of a small request delays it by one request's turn.
#[tokio::test]
async fn behind_a_request_limit_the_predicted_wait_counts_requests_not_tokens() {
    let (_clock, queue, deployment, large) = queue_with_history(Dimension::Requests, 60, 1, 20_000).await;
    let small = Ask { cost: Cost::request(20, 0), ..ask(vec![deployment]) };
    let eta = queue.predict(&small, None, MINUTE);
    // Three admitted in about two seconds: two requests (the large one and itself) take
    // one to two seconds; counted in tokens they would take twenty minutes.
    assert!(eta >= Duration::from_secs(1) && eta <= Duration::from_secs(3), "{eta:?}");
    large.abort();
}

/// Behind a limit of tokens, the same queue's wait counts tokens: the large prompt ahead
/// takes its tokens' time.
#[tokio::test]
async fn behind_a_token_limit_the_predicted_wait_counts_tokens() {
    let (_clock, queue, deployment, large) = queue_with_history(Dimension::InputTokens, 1_200, 1_000, 1_000).await;
    let small = Ask { cost: Cost::request(20, 0), ..ask(vec![deployment]) };
    let eta = queue.predict(&small, None, MINUTE);
    // 60 tokens admitted in about two seconds: the 1,020 tokens ahead take over half a
    // minute (counted in requests, two of them would take a second or two).
    assert!(eta >= Duration::from_secs(30), "{eta:?}");
    large.abort();
}

/// Requests refused at once with a predicted wait are told successive turns, not one
/// instant: each is told to come after the queue and those told before it. Coming back
/// as retries, they go before the key's first attempts but not before each other: a
/// first attempt counts them ahead, a retry does not.
#[tokio::test]
async fn requests_told_to_come_back_are_told_successive_turns() {
    let (clock, queue, deployment, large) = queue_with_history(Dimension::Requests, 60, 1, 20).await;
    let first = Ask { cost: Cost::request(20, 0), ..ask(vec![deployment]) };
    let retried = Ask { retries: 1, ..first.clone() };
    let (first_alone, retried_alone) = (queue.predict(&first, None, MINUTE), queue.predict(&retried, None, MINUTE));
    let one = queue.turn_away(&first, None);
    assert_eq!(one, first_alone);
    let two = queue.turn_away(&first, None);
    let turn = two.checked_sub(one).unwrap();
    assert!(turn >= Duration::from_millis(500) && turn <= Duration::from_millis(1_500), "{one:?} then {two:?}");
    assert!(queue.turn_away(&first, None) > two);
    // Three first attempts will come back as retries: a new first attempt that may wait
    // until then waits for them, one that may wait only until before the first is due does
    // not, and a retry arriving now does not either.
    assert!(queue.predict(&first, None, MINUTE) > first_alone);
    assert_eq!(queue.predict(&first, None, one / 2), first_alone);
    assert_eq!(queue.predict(&retried, None, MINUTE), retried_alone);
    // Once their time has come they are back (in the line, or gone): no longer counted. The
    // waiting request is admitted meanwhile.
    clock.advance(Duration::from_secs(10));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(queue.depth(), 0);
    // Nothing is ahead of a first attempt now but what is ahead of a retry: itself.
    assert_eq!(queue.predict(&first, None, MINUTE), queue.predict(&retried, None, MINUTE));
    large.abort();
}

/// Requests refused faster than the deployment admits (an overload, or clients that never
/// come back) do not push the hints out without end: only those due within ten seconds
/// count ahead.
#[tokio::test]
async fn a_flood_of_refusals_spreads_the_hints_over_a_bounded_time() {
    let (_clock, queue, deployment, large) = queue_with_history(Dimension::Requests, 60, 1, 20).await;
    let ask = Ask { cost: Cost::request(20, 0), ..ask(vec![deployment]) };
    let hints: Vec<Duration> = (0..200).map(|_| queue.turn_away(&ask, None)).collect();
    let longest = hints.iter().max().unwrap();
    assert!(*longest <= Duration::from_secs(20), "{longest:?}");
    assert!(*longest >= Duration::from_secs(10), "the hints spread: {longest:?}");
    large.abort();
}

/// Requests admitted at once count in the rate a queue predicts by, as its own grants do:
/// a queue whose requests mostly pass without waiting does not predict waits many times
/// too long for the few that must.
#[tokio::test]
async fn requests_admitted_at_once_count_in_the_rate_waits_are_predicted_by() {
    let (_clock, queue, deployment, large) = queue_with_history(Dimension::Requests, 60, 1, 20).await;
    let small = Ask { cost: Cost::request(20, 0), ..ask(vec![deployment]) };
    let before = queue.predict(&small, None, MINUTE);
    for _ in 0..3 {
        queue.admitted_now(&small);
    }
    // Twice the admissions in the same span: half the wait.
    let after = queue.predict(&small, None, MINUTE);
    assert!(after.abs_diff(before / 2) < Duration::from_micros(1), "{before:?} then {after:?}");
    large.abort();
}
