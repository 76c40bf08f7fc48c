//! A reservation whose caller never hears the answer is given back at once, not held until
//! its lease runs out: the caller timed out while Redis was stalled (the script ran when it
//! woke), or went away after its reservation left. Against a real `redis-server` that is
//! frozen (`SIGSTOP`) and thawed. The same for a pool's choice of the first member that passes.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::time::Duration;

use sluice_quota::{Cost, Demand, Limits, QuotaStore, ReserveError, ScopeId, ScopeKey, ScopeKind, Settlement};
use sluice_redis::local::LocalRedis;
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

/// Far longer than the test: a reservation still held at the end was not given back.
const LEASE: Duration = Duration::from_secs(600);

fn store(server: &LocalRedis, timeout: Duration) -> (RedisStore, ScopeId) {
    let config = RedisConfig {
        topology: Topology::Standalone(server.url()),
        prefix: "unheard".into(),
        timeout,
        tls: Tls::default(),
    };
    let store = RedisStore::new(config);
    let slots = Limits::unlimited().with_concurrency(NonZeroU64::new(2).unwrap());
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "slots"), slots);
    (store, deployment)
}

/// The slots taken on `scope`, waiting up to 5 s for them to reach `want`.
async fn slots_taken(store: &RedisStore, scope: ScopeId, want: u64) -> u64 {
    let mut taken = u64::MAX;
    for _ in 0..50 {
        taken = store.snapshot(scope).await.unwrap().unwrap().in_flight.0;
        if taken == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    taken
}

/// Takes one slot and gives it back: the connection is open before Redis is frozen.
async fn warm(store: &RedisStore, scope: ScopeId) {
    let grant = store.reserve(&[scope], Cost::request(1, 1), LEASE).await.unwrap();
    store.settle(grant.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_that_timed_out_in_a_stall_is_given_back_when_redis_wakes() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let (store, scope) = store(&server, Duration::from_millis(300));
    warm(&store, scope).await;

    server.freeze().unwrap();
    let refused = store.reserve(&[scope], Cost::request(1, 1), LEASE).await;
    assert!(matches!(refused, Err(ReserveError::Store(_))), "a frozen Redis answers: {refused:?}");
    // The reservation and its release were both sent into the stall.
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.thaw().unwrap();

    assert_eq!(slots_taken(&store, scope, 0).await, 0, "the unheard reservation still holds its slot");
    let both = [
        store.reserve(&[scope], Cost::request(1, 1), LEASE).await,
        store.reserve(&[scope], Cost::request(1, 1), LEASE).await,
    ];
    assert!(both.iter().all(Result::is_ok), "both slots are free again: {both:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_whose_caller_went_is_given_back_when_the_answer_comes() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let (store, scope) = store(&server, Duration::from_secs(5));
    let store = std::sync::Arc::new(store);
    warm(&store, scope).await;

    server.freeze().unwrap();
    let asking = {
        let store = std::sync::Arc::clone(&store);
        tokio::spawn(async move { store.reserve(&[scope], Cost::request(1, 1), LEASE).await.map(|g| g.id) })
    };
    // Its batch has left; the caller goes (a client hanging up while it is admitted).
    tokio::time::sleep(Duration::from_millis(300)).await;
    asking.abort();
    assert!(asking.await.unwrap_err().is_cancelled());
    server.thaw().unwrap();

    // Granted when Redis woke, to nobody: the batch gives it back.
    assert_eq!(slots_taken(&store, scope, 0).await, 0, "the reservation of a caller gone still holds its slot");
}

/// A pool of `scope` and a second member with 2 slots: one request on each, in order.
fn pool_demands(paths: &[[ScopeId; 1]; 2]) -> Vec<Demand<'_>> {
    paths.iter().map(|path| Demand::new(path, Cost::request(1, 1), LEASE)).collect()
}

fn second_member(store: &RedisStore) -> ScopeId {
    let slots = Limits::unlimited().with_concurrency(NonZeroU64::new(2).unwrap());
    store.register(ScopeKey::new(ScopeKind::Deployment, "slots-b"), slots)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_choice_that_timed_out_in_a_stall_is_given_back_when_redis_wakes() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let (store, scope) = store(&server, Duration::from_millis(300));
    let paths = [[scope], [second_member(&store)]];
    warm(&store, scope).await;
    // The first member's slots are both taken: the choice is made on the second.
    let _held = [
        store.reserve(&paths[0], Cost::request(1, 1), LEASE).await.unwrap(),
        store.reserve(&paths[0], Cost::request(1, 1), LEASE).await.unwrap(),
    ];

    server.freeze().unwrap();
    let refused = store.admit_first(pool_demands(&paths)).await;
    assert!(matches!(refused, Err(ReserveError::Store(_))), "a frozen Redis answers: {refused:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.thaw().unwrap();

    assert_eq!(slots_taken(&store, paths[1][0], 0).await, 0, "the unheard choice still holds its slot");
    assert_eq!(slots_taken(&store, scope, 2).await, 2, "the release gave back what it did not take");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_choice_whose_caller_went_is_given_back_when_the_answer_comes() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let (store, scope) = store(&server, Duration::from_secs(5));
    let store = std::sync::Arc::new(store);
    let paths = [[scope], [second_member(&store)]];
    warm(&store, scope).await;
    let _held = store.reserve(&paths[0], Cost::request(1, 1), LEASE).await.unwrap();

    server.freeze().unwrap();
    let asking = {
        let store = std::sync::Arc::clone(&store);
        tokio::spawn(async move { store.admit_first(pool_demands(&paths)).await.map(|(i, _)| i) })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    asking.abort();
    assert!(asking.await.unwrap_err().is_cancelled());
    server.thaw().unwrap();

    // Granted on the first member when Redis woke, to nobody: given back there.
    assert_eq!(slots_taken(&store, scope, 1).await, 1, "the choice of a caller gone still holds its slot");
    assert_eq!(slots_taken(&store, paths[1][0], 0).await, 0);
}
