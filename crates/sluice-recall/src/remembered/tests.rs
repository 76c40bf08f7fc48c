use sluice_quota::FakeClock;

use super::*;

fn key(tenant: &str, id: &str) -> ResponseKey {
    ResponseKey { tenant: tenant.into(), id: id.to_owned() }
}

fn what(deployment: &str, context: Option<u64>) -> Remembered {
    Remembered { deployment: deployment.into(), context }
}

/// What every [`ResponseStore`] must do, whatever keeps the records.
async fn conformance(store: &dyn ResponseStore) {
    let ttl = Duration::from_secs(60);
    let k = key("acme", "resp_1");
    assert_eq!(store.recall(&k).await.unwrap(), None, "unknown");
    store.remember(&k, &what("sim-mini", None), ttl).await.unwrap();
    assert_eq!(store.recall(&k).await.unwrap(), Some(what("sim-mini", None)), "usage not known yet");
    store.remember(&k, &what("sim-mini", Some(1_234)), ttl).await.unwrap();
    assert_eq!(store.recall(&k).await.unwrap(), Some(what("sim-mini", Some(1_234))), "replaced whole");
    assert_eq!(store.recall(&key("globex", "resp_1")).await.unwrap(), None, "per tenant");
    store.forget(&k).await.unwrap();
    assert_eq!(store.recall(&k).await.unwrap(), None, "forgotten");
}

#[tokio::test]
async fn the_memory_store_conforms_expires_and_is_bounded() {
    let clock = FakeClock::default();
    let store = memory::MemoryResponses::with_capacity(Arc::new(clock.clone()), 2);
    conformance(&store).await;
    let ttl = Duration::from_secs(10);
    store.remember_now(&key("acme", "a"), &what("d", Some(1)), ttl);
    clock.advance(Duration::from_secs(11));
    assert_eq!(store.recall_now(&key("acme", "a")), None, "expired");
    for id in ["b", "c", "d"] {
        store.remember_now(&key("acme", id), &what("d", Some(1)), ttl);
    }
    assert_eq!(store.recall_now(&key("acme", "b")), None, "the oldest went past the bound");
    assert!(store.recall_now(&key("acme", "c")).is_some() && store.recall_now(&key("acme", "d")).is_some());
    // A record written again outlives the first write's place in the order.
    store.remember_now(&key("acme", "c"), &what("d", Some(2)), ttl);
    store.remember_now(&key("acme", "e"), &what("d", Some(1)), ttl);
    assert_eq!(store.recall_now(&key("acme", "c")), Some(what("d", Some(2))));
}

fn redis_settings(url: String, on_unavailable: sluice_config::Unavailable) -> sluice_config::Store {
    sluice_config::Store {
        kind: sluice_config::StoreKind::Redis(url),
        prefix: "remembered-test".into(),
        timeout: Duration::from_secs(1),
        on_unavailable,
        instances: std::num::NonZeroU64::MIN,
        tls: sluice_config::StoreTls::default(),
        auth: sluice_config::RedisAuth::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_conforms_and_is_shared_by_instances() {
    let redis = sluice_redis::local::LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let settings = redis_settings(redis.url(), sluice_config::Unavailable::FailClosed);
    let local = || memory::MemoryResponses::new(Arc::new(FakeClock::default()));
    let target = || Some((Topology::Standalone(redis.url()), Tls::default()));
    let (one, two) =
        (redis::from_config(&settings, target(), local()), redis::from_config(&settings, target(), local()));
    conformance(one.as_ref()).await;
    let k = key("acme", "resp_shared");
    one.remember(&k, &what("sim-mini", Some(77)), Duration::from_secs(60)).await.unwrap();
    assert_eq!(two.recall(&k).await.unwrap(), Some(what("sim-mini", Some(77))), "another instance knows it");
}

#[tokio::test]
async fn an_unreachable_redis_fails_closed_or_remembers_here() {
    let url = "redis://127.0.0.1:1".to_owned();
    let local = || memory::MemoryResponses::new(Arc::new(FakeClock::default()));
    let target = || Some((Topology::Standalone(url.clone()), Tls::default()));
    let closed =
        redis::from_config(&redis_settings(url.clone(), sluice_config::Unavailable::FailClosed), target(), local());
    assert!(closed.recall(&key("acme", "r")).await.is_err());
    let open =
        redis::from_config(&redis_settings(url.clone(), sluice_config::Unavailable::FailOpenLocal), target(), local());
    conformance(open.as_ref()).await;
}
