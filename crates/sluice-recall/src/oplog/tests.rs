use sluice_quota::FakeClock;

use super::*;

fn stored(body: &'static str) -> Stored {
    Stored { status: 200, content_type: None, body: Bytes::from_static(body.as_bytes()) }
}

fn id(tenant: &str, key: &str) -> OpId {
    OpId { tenant: tenant.into(), key: key.to_owned() }
}

fn log(clock: &FakeClock) -> Arc<OpLog> {
    let timing =
        Timing { ttl: Duration::from_secs(60), wait: Duration::from_millis(300), lease: Duration::from_secs(10) };
    Arc::new(OpLog::new(Arc::new(memory::MemoryOps::new(Arc::new(clock.clone()))), timing))
}

#[tokio::test]
async fn a_repeat_is_replayed_waits_for_the_first_or_proceeds_after_a_failure() {
    let clock = FakeClock::default();
    let log = log(&clock);
    let (k1, fp) = (id("acme", "k1"), [1; 32]);
    assert!(matches!(log.begin(&k1, &fp).await, Ok(Begin::Proceed)));
    // A repeat while in flight waits; the first completes meanwhile.
    let waiting = {
        let (log, k1) = (Arc::clone(&log), k1.clone());
        tokio::spawn(async move { log.begin(&k1, &fp).await })
    };
    tokio::task::yield_now().await;
    log.complete(&k1, &fp, stored("first")).await;
    assert!(matches!(waiting.await.unwrap(), Ok(Begin::Replay(s)) if s.body == "first"));
    // Another tenant's same key is another operation.
    assert!(matches!(log.begin(&id("globex", "k1"), &fp).await, Ok(Begin::Proceed)));
    // A failure clears the record.
    let k2 = id("acme", "k2");
    assert!(matches!(log.begin(&k2, &fp).await, Ok(Begin::Proceed)));
    log.abandon(&k2, &fp).await;
    assert!(matches!(log.begin(&k2, &fp).await, Ok(Begin::Proceed)));
    // Completed operations are forgotten after the TTL.
    clock.advance(Duration::from_secs(61));
    assert!(matches!(log.begin(&k1, &fp).await, Ok(Begin::Proceed)));
}

#[tokio::test]
async fn another_request_under_the_key_a_stream_and_a_dead_instance() {
    let clock = FakeClock::default();
    let log = log(&clock);
    let k = id("acme", "k");
    assert!(matches!(log.begin(&k, &[1; 32]).await, Ok(Begin::Proceed)));
    // Another request under the same key is refused, in flight or finished.
    assert!(matches!(log.begin(&k, &[2; 32]).await, Err(BeginError::KeyReused)));
    // Still in flight after the wait: 409.
    assert!(matches!(log.begin(&k, &[1; 32]).await, Err(BeginError::InFlight)));
    // The instance died with it: the lease ends and the key is free again.
    clock.advance(Duration::from_secs(11));
    assert!(matches!(log.begin(&k, &[1; 32]).await, Ok(Begin::Proceed)));
    log.streamed(&k, &[1; 32]).await;
    assert!(matches!(log.begin(&k, &[1; 32]).await, Err(BeginError::StreamCompleted)));
    assert!(matches!(log.begin(&k, &[2; 32]).await, Err(BeginError::KeyReused)));
}

#[test]
fn the_fingerprint_ignores_key_order_and_nothing_else() {
    let a: Map<String, Value> =
        serde_json::from_str(r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1}"#).unwrap();
    let b: Map<String, Value> =
        serde_json::from_str(r#"{ "n":1, "messages":[{"content":"hi","role":"user"}], "model":"m" }"#).unwrap();
    let c: Map<String, Value> =
        serde_json::from_str(r#"{"model":"m","messages":[{"role":"user","content":"hi!"}],"n":1}"#).unwrap();
    let d: Map<String, Value> =
        serde_json::from_str(r#"{"model":"m2","messages":[{"role":"user","content":"hi"}],"n":1}"#).unwrap();
    assert_eq!(fingerprint("/v1/chat/completions", &a), fingerprint("/v1/chat/completions", &b));
    assert_ne!(fingerprint("/v1/chat/completions", &a), fingerprint("/v1/chat/completions", &c));
    assert_ne!(fingerprint("/v1/chat/completions", &a), fingerprint("/v1/chat/completions", &d));
    assert_ne!(fingerprint("/v1/chat/completions", &a), fingerprint("/v1/messages", &a));
}

#[test]
fn keys_are_bounded() {
    let with = |key: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("idempotency-key", key.parse().unwrap());
        idempotency_key(&headers)
    };
    assert_eq!(with("order-1").unwrap().as_deref(), Some("order-1"));
    assert_eq!(with(&"k".repeat(MAX_KEY_CHARS)).unwrap().map(|k| k.len()), Some(MAX_KEY_CHARS));
    assert!(matches!(with(&"k".repeat(MAX_KEY_CHARS + 1)), Err(e) if e.param.as_deref() == Some("Idempotency-Key")));
    assert!(with("  ").is_err());
    assert!(idempotency_key(&HeaderMap::new()).unwrap().is_none());
}

/// What every [`OpStore`] must do, whatever keeps the records.
async fn conformance(store: &dyn OpStore) {
    let (k, lease, ttl) = (id("acme", "conf"), Duration::from_secs(30), Duration::from_secs(60));
    assert_eq!(store.begin(&k, &[1; 32], lease).await.unwrap(), None, "new: recorded in flight");
    let in_flight = Record { fingerprint: [1; 32], state: OpState::InFlight };
    assert_eq!(store.begin(&k, &[2; 32], lease).await.unwrap(), Some(in_flight.clone()), "returned untouched");
    // Only the in-flight record of the same request is abandoned.
    store.abandon(&k, &[2; 32]).await.unwrap();
    assert_eq!(store.begin(&k, &[1; 32], lease).await.unwrap(), Some(in_flight));
    store.abandon(&k, &[1; 32]).await.unwrap();
    assert_eq!(store.begin(&k, &[1; 32], lease).await.unwrap(), None);
    let content_type = Some(http::HeaderValue::from_static("application/json"));
    let done = Stored { status: 201, content_type, body: Bytes::from_static(b"\x00{\"binary\":\xff}") };
    let completed = Record { fingerprint: [1; 32], state: OpState::Completed(done) };
    store.finish(&k, &completed, ttl).await.unwrap();
    assert_eq!(store.begin(&k, &[1; 32], lease).await.unwrap(), Some(completed), "kept byte for byte");
    store.abandon(&k, &[1; 32]).await.unwrap();
    assert!(store.begin(&k, &[1; 32], lease).await.unwrap().is_some(), "a finished record is not abandoned");
    let streamed = Record { fingerprint: [1; 32], state: OpState::Streamed };
    store.finish(&id("acme", "s"), &streamed, ttl).await.unwrap();
    assert_eq!(store.begin(&id("acme", "s"), &[1; 32], lease).await.unwrap(), Some(streamed));
    assert_eq!(store.begin(&id("globex", "s"), &[1; 32], lease).await.unwrap(), None, "per tenant");
}

#[tokio::test]
async fn the_memory_store_conforms() {
    conformance(&memory::MemoryOps::new(Arc::new(FakeClock::default()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_conforms_and_its_lease_ends() {
    let redis = sluice_redis::local::LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let settings = sluice_config::Store {
        kind: sluice_config::StoreKind::Redis(redis.url()),
        prefix: "oplog-test".into(),
        timeout: Duration::from_secs(2),
        on_unavailable: sluice_config::Unavailable::FailClosed,
        instances: std::num::NonZeroU64::MIN,
        tls: sluice_config::StoreTls::default(),
        auth: sluice_config::RedisAuth::default(),
    };
    let target = Some((Topology::Standalone(redis.url()), Tls::default()));
    let store = redis::from_config(&settings, target, memory::MemoryOps::new(Arc::new(FakeClock::default())));
    conformance(store.as_ref()).await;
    // An instance that died with an operation in flight holds its key only for the lease.
    let k = id("acme", "crashed");
    assert_eq!(store.begin(&k, &[1; 32], Duration::from_millis(50)).await.unwrap(), None);
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if store.begin(&k, &[2; 32], Duration::from_secs(30)).await.unwrap().is_none() {
            freed = true;
            break;
        }
    }
    assert!(freed, "the in-flight record outlived its lease");
}

#[tokio::test]
async fn an_unreachable_redis_fails_closed_or_keeps_records_here() {
    let settings = |on_unavailable| sluice_config::Store {
        // Port 1 on loopback: nothing listens, connections are refused at once.
        kind: sluice_config::StoreKind::Redis("redis://127.0.0.1:1".into()),
        prefix: "oplog-test".into(),
        timeout: Duration::from_millis(500),
        on_unavailable,
        instances: std::num::NonZeroU64::MIN,
        tls: sluice_config::StoreTls::default(),
        auth: sluice_config::RedisAuth::default(),
    };
    let local = || memory::MemoryOps::new(Arc::new(FakeClock::default()));
    let target = || Some((Topology::Standalone("redis://127.0.0.1:1".into()), Tls::default()));
    let closed = redis::from_config(&settings(sluice_config::Unavailable::FailClosed), target(), local());
    assert!(closed.begin(&id("acme", "k"), &[1; 32], Duration::from_secs(1)).await.is_err());
    let open = redis::from_config(&settings(sluice_config::Unavailable::FailOpenLocal), target(), local());
    conformance(open.as_ref()).await;
}
