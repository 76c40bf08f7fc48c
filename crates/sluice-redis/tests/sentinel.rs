//! Redis behind Sentinel, on real processes (a master, a replica, a sentinel): the store
//! finds the master through the sentinel, and when the master dies it finds the promoted
//! replica, keeping the reservations that were replicated before the crash.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ScopeKey, ScopeKind, Settlement, SystemClock};
use sluice_redis::local::LocalSentinel;
use sluice_redis::{OnUnavailable, RedisConfig, RedisStore, ResilientStore, Tls, Topology};

const LEASE: Duration = Duration::from_secs(120);

fn store(group: &LocalSentinel) -> ResilientStore {
    let config = RedisConfig {
        topology: Topology::Sentinel(group.target()),
        prefix: "sentinel".into(),
        timeout: Duration::from_millis(500),
        tls: Tls::default(),
    };
    ResilientStore::new(RedisStore::new(config), OnUnavailable::FailClosed, Arc::new(SystemClock::new()))
}

/// Waits until the replica has acknowledged every write the master took.
fn replicated(master_port: u16) {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{master_port}")).unwrap().get_connection().unwrap();
    let acknowledged: i64 = redis::cmd("WAIT").arg(1).arg(5_000).query(&mut conn).unwrap();
    assert_eq!(acknowledged, 1, "the replica did not acknowledge the reservations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_moves_the_store_to_the_promoted_replica_with_the_reservations_held() {
    let mut group = LocalSentinel::start(1).expect("a master, a replica and a sentinel");
    let (master_port, replica_port) = group.ports();
    let store = store(&group);
    // 10 in flight at most; 100 requests an hour (one back every 36 s).
    let rate = RateLimit::new(Dimension::Requests, NonZeroU64::new(100).unwrap(), Duration::from_secs(3_600))
        .with_burst(NonZeroU64::new(100).unwrap());
    let limits = Limits::unlimited().with_rate(rate).with_concurrency(NonZeroU64::new(10).unwrap());
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), limits);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(store.reserve(&[tenant], Cost::request(1, 1), LEASE).await.expect("admitted through the sentinel"));
    }
    replicated(master_port);

    group.kill_master();
    // Fail closed while the sentinel notices (1 s) and promotes the replica; bounded wait.
    let mut refused = 0;
    let admitted = loop {
        match store.reserve(&[tenant], Cost::request(1, 1), LEASE).await {
            Ok(grant) => break grant,
            Err(_) if refused < 300 => refused += 1,
            Err(e) => panic!("still refused after {refused} tries: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(refused > 0, "the master's death went unnoticed");
    assert!(!store.is_degraded(), "the store is back on the promoted replica");
    assert_eq!(group.master_port(), Some(replica_port), "the sentinel promoted the replica");

    // The four reservations from before the crash are still held on the new master...
    let snapshot = store.snapshot(tenant).await.unwrap().unwrap();
    assert_eq!(snapshot.in_flight, (5, Some(10)));
    let remaining = snapshot.rates[0].remaining;
    assert!((95..=97).contains(&remaining), "{remaining} left of 100 after 5 admissions: a fresh burst");
    // ...and settle there.
    for grant in held {
        store.settle(grant.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
    }
    let after = store.snapshot(tenant).await.unwrap().unwrap();
    assert_eq!(after.in_flight, (1, Some(10)));
    store.settle(admitted.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
}
