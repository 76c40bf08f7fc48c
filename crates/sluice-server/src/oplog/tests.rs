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
    assert!(matches!(log.begin(&k, &[2; 32]).await, Err(GatewayError::IdempotencyKeyReused)));
    // Still in flight after the wait: 409.
    assert!(matches!(log.begin(&k, &[1; 32]).await, Err(GatewayError::IdempotencyInFlight)));
    // The instance died with it: the lease ends and the key is free again.
    clock.advance(Duration::from_secs(11));
    assert!(matches!(log.begin(&k, &[1; 32]).await, Ok(Begin::Proceed)));
    log.streamed(&k, &[1; 32]).await;
    assert!(matches!(log.begin(&k, &[1; 32]).await, Err(GatewayError::IdempotencyStreamCompleted)));
    assert!(matches!(log.begin(&k, &[2; 32]).await, Err(GatewayError::IdempotencyKeyReused)));
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
    assert!(
        matches!(with(&"k".repeat(MAX_KEY_CHARS + 1)), Err(GatewayError::BadRequest(e)) if e.param.as_deref() == Some("Idempotency-Key"))
    );
    assert!(matches!(with("  "), Err(GatewayError::BadRequest(_))));
    assert!(idempotency_key(&HeaderMap::new()).unwrap().is_none());
}
