//! `fail_open_local` across an outage and back, against a real `redis-server` that is
//! killed and started again (empty: no persistence). Neither transition may hand out a
//! fresh burst: the local limiter takes over with what this instance already used, and
//! the restarted Redis is brought down to what the local limiter says is left.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ScopeKey, ScopeKind, SystemClock};
use sluice_redis::local::LocalRedis;
use sluice_redis::{OnUnavailable, RedisConfig, RedisStore, ResilientStore, Tls, Topology};

const LEASE: Duration = Duration::from_secs(30);

async fn admitted(store: &ResilientStore, path: &[sluice_quota::ScopeId], tries: usize) -> usize {
    let mut ok = 0;
    for _ in 0..tries {
        if store.reserve(path, Cost::request(1, 1), LEASE).await.is_ok() {
            ok += 1;
        }
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_local_hands_out_no_extra_burst_going_down_or_coming_back() {
    let mut server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let config = RedisConfig {
        topology: Topology::Standalone(server.url()),
        prefix: "resilient".into(),
        timeout: Duration::from_millis(300),
        tls: Tls::default(),
    };
    let two = NonZeroU64::new(2).unwrap();
    let store = ResilientStore::new(
        RedisStore::new(config),
        OnUnavailable::FailOpenLocal { instances: two },
        Arc::new(SystemClock::new()),
    );
    // 6 requests a minute with a burst of 4 for the fleet; this instance's share is 3 a
    // minute with a burst of 2. Nothing refills noticeably within the test.
    let limits = Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::Requests, 6).unwrap().with_burst(NonZeroU64::new(4).unwrap()));
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), limits);
    let path = [tenant];

    // Healthy: the shared burst is used up through Redis.
    assert_eq!(admitted(&store, &path, 6).await, 4);

    // Redis goes away: the local limiter knows this instance used its share already.
    server.kill();
    assert_eq!(admitted(&store, &path, 3).await, 0, "a fresh local burst at the outage");
    assert!(store.is_degraded());

    // Redis comes back empty (every shared bucket full): at most the request that finds it
    // back gets through before the shared buckets are tightened to what is left locally.
    server.restart().expect("redis-server restarts");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let after = admitted(&store, &path, 4).await;
    assert!(!store.is_degraded(), "Redis is back");
    assert!(after <= 1, "{after} admitted right after the restart: a fresh shared burst");
}
