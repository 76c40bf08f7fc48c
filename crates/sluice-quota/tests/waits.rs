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

/// A deployment of `rpm` requests a minute (a burst of one), its one slot just taken, with
/// its queue: the clock, the store and the deployment's scope.
fn spent_deployment(rpm: u64) -> (Arc<FakeClock>, Arc<dyn QuotaStore>, sluice_quota::ScopeId, Arc<DeploymentQueue>) {
    let clock = Arc::new(FakeClock::default());
    let memory = MemoryStore::new(clock.clone());
    let rate = RateLimit::per_minute(Dimension::Requests, rpm).unwrap().with_burst(NonZeroU64::MIN);
    let deployment = memory.register(ScopeKey::new(ScopeKind::Deployment, "d"), Limits::unlimited().with_rate(rate));
    let _spent = memory.reserve_now(&[deployment], Cost::request(0, 0), LEASE).unwrap();
    let store: Arc<dyn QuotaStore> = Arc::new(memory);
    let queue = DeploymentQueue::new(Arc::clone(&store), clock.clone());
    (clock, store, deployment, queue)
}

/// Lets spawned tasks run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// `ask`s joining the queue one after another, each waiting up to 5 s.
async fn join_all(
    queue: &Arc<DeploymentQueue>,
    asks: impl IntoIterator<Item = Ask>,
) -> Vec<tokio::task::JoinHandle<(Result<sluice_quota::Grant, WaitError>, sluice_quota::queue::Waited)>> {
    let mut waiting = Vec::new();
    for ask in asks {
        let queue = Arc::clone(queue);
        waiting.push(tokio::spawn(async move { queue.wait(ask, Duration::from_secs(5), 20, None).await }));
        settle().await;
    }
    waiting
}

/// Moves the clock on `steps` times 20 ms, letting the queue work at each step.
async fn run_for(clock: &FakeClock, steps: u32) {
    for _ in 0..steps {
        clock.advance(Duration::from_millis(20));
        settle().await;
    }
}

/// Two requests of one key wait on a spent deployment; only the first is ever tried. Both
/// waits run out at once, and the queue empties (the dispatcher takes both out of the line)
/// before the second's own timer answers it: it is still told the limit that held its lane,
/// not an anonymous queue wait.
#[tokio::test]
async fn a_wait_that_ran_out_behind_another_is_told_the_limit_that_held_its_lane() {
    let (clock, _store, deployment, queue) = spent_deployment(1);

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
    let (clock, _store, deployment, queue) = spent_deployment(600);
    // Ten requests wait for the deployment's next ten slots, a tenth of a second apart.
    let waiting = join_all(&queue, (0..10).map(|_| ask(vec![deployment]))).await;
    run_for(&clock, 100).await;
    for handle in waiting {
        assert!(handle.await.unwrap().0.is_ok(), "granted in its slot");
    }
    // Eight idle seconds later, one request waits behind nobody: its own turn, at the
    // rate the queue drained at (about ten a second), not a rate spread over the idle time.
    clock.advance(Duration::from_secs(8));
    let eta = queue.predict(&ask(vec![deployment]), None);
    assert!(eta <= Duration::from_millis(200), "the drain rate, not the idle time: {eta:?}");
}

/// Behind a request limit, a large request waits its place in the line, not its tokens at
/// the rate small ones drained at: requests of mixed sizes made one large request behind
/// a short line look like a long wait, and it was refused at once when it would have
/// passed in a moment.
#[tokio::test]
async fn behind_a_request_limit_a_large_request_is_priced_by_its_place_in_line() {
    let (clock, store, deployment, queue) = spent_deployment(600);
    // Thirteen small requests wait; a second later, ten are through and three still wait.
    let small = (0..13).map(|_| Ask { cost: Cost::request(10, 0), ..ask(vec![deployment]) });
    let waiting = join_all(&queue, small).await;
    run_for(&clock, 51).await;
    assert!((2..=4).contains(&queue.depth()), "three still wait: {}", queue.depth());
    let refusal = match store.reserve(&[deployment], Cost::request(10_000, 0), LEASE).await {
        Err(sluice_quota::ReserveError::Rejected(r)) => r,
        other => panic!("the deployment is busy: {other:?}"),
    };
    let large = Ask { cost: Cost::request(10_000, 0), ..ask(vec![deployment]) };
    let eta = queue.predict(&large, Some(&refusal));
    assert!(eta <= Duration::from_millis(600), "its place in line at ten a second: {eta:?}");
    run_for(&clock, 50).await;
    for handle in waiting {
        assert!(handle.await.unwrap().0.is_ok(), "granted in its slot");
    }
}

/// Two instances' queues wait on one deployment of a shared store: the first instance's
/// waiter is a first attempt that joined first, the second's a retry. At the bucket's
/// next free instant the retry is tried first and takes the slot: a staggered queue with
/// a retry waiting tries at the instant, one without at least half a millisecond after
/// (unstaggered, the queue whose timer fires first wins, whatever it holds).
#[tokio::test]
async fn across_instances_a_retry_is_tried_first_at_the_free_instant() {
    let (clock, store, deployment, _) = spent_deployment(600);
    let first_instance = DeploymentQueue::with_stagger(Arc::clone(&store), clock.clone(), true);
    let second_instance = DeploymentQueue::with_stagger(Arc::clone(&store), clock.clone(), true);
    let first = join_all(&first_instance, [ask(vec![deployment])]).await.pop().unwrap();
    let retry = join_all(&second_instance, [Ask { retries: 1, ..ask(vec![deployment]) }]).await.pop().unwrap();
    for _ in 0..1500 {
        clock.advance(Duration::from_micros(100));
        settle().await;
        if first.is_finished() || retry.is_finished() {
            break;
        }
    }
    assert!(retry.is_finished() && !first.is_finished(), "the retry took the slot");
    run_for(&clock, 10).await;
    assert!(first.await.unwrap().0.is_ok() && retry.await.unwrap().0.is_ok(), "each in its slot");
}
