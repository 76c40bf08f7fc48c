//! A deployment's learned short window, shared through Redis: what one instance stores every
//! other instance reads; a shorter window replaces a longer one, never the reverse; it
//! expires with its hold. Two store objects (two instances) on one server, and on a cluster.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use sluice_quota::{Dimension, Limits, MemoryStore, QuotaStore, RateLimit, ScopeKey, ScopeKind, SystemClock};
use sluice_redis::local::{LocalCluster, LocalRedis};
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

const HOLD: Duration = Duration::from_secs(60);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn store(topology: Topology) -> RedisStore {
    RedisStore::new(RedisConfig {
        topology,
        prefix: "window".into(),
        timeout: Duration::from_secs(2),
        tls: Tls::default(),
    })
}

fn limits() -> Limits {
    Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 600).unwrap().guarded())
}

async fn shared_between(a: &RedisStore, b: &RedisStore) {
    let key = ScopeKey::new(ScopeKind::Deployment, "gpt-4o-east");
    let (da, db) = (a.register(key.clone(), limits()), b.register(key, limits()));
    assert_eq!(b.share_window(db, None, HOLD).await.unwrap(), None, "nothing learned yet");
    assert_eq!(a.share_window(da, Some(ms(1_500)), HOLD).await.unwrap(), Some(ms(1_500)));
    assert_eq!(b.share_window(db, None, HOLD).await.unwrap(), Some(ms(1_500)), "the other instance reads it");
    assert_eq!(b.share_window(db, Some(ms(750)), HOLD).await.unwrap(), Some(ms(750)));
    assert_eq!(a.share_window(da, Some(ms(1_000)), HOLD).await.unwrap(), Some(ms(750)), "never lengthened");
    assert_eq!(a.share_window(da, None, HOLD).await.unwrap(), Some(ms(750)));
    // Another deployment has a window of its own; a short hold expires.
    let other = a.register(ScopeKey::new(ScopeKind::Deployment, "gpt-4o-west"), limits());
    assert_eq!(a.share_window(other, Some(ms(500)), ms(200)).await.unwrap(), Some(ms(500)));
    assert_eq!(a.share_window(da, None, HOLD).await.unwrap(), Some(ms(750)));
    tokio::time::sleep(ms(400)).await;
    assert_eq!(a.share_window(other, None, HOLD).await.unwrap(), None, "expired with its hold");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_server_share_the_learned_window() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let (a, b) = (store(Topology::Standalone(server.url())), store(Topology::Standalone(server.url())));
    shared_between(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_a_cluster_share_the_learned_window() {
    let cluster = LocalCluster::start(3).expect("a local 3-master cluster");
    let (a, b) = (store(Topology::Cluster(cluster.urls())), store(Topology::Cluster(cluster.urls())));
    shared_between(&a, &b).await;
}

#[tokio::test]
async fn a_memory_store_keeps_nothing_to_share() {
    let store = MemoryStore::new(std::sync::Arc::new(SystemClock::new()));
    let d = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), limits());
    assert_eq!(store.share_window(d, Some(ms(750)), HOLD).await.unwrap(), Some(ms(750)));
    assert_eq!(store.share_window(d, None, HOLD).await.unwrap(), None);
}
