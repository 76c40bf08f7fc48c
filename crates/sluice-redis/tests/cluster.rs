//! The key layout on a real 3-master Redis Cluster (`redis-server --cluster-enabled yes`
//! processes on 127.0.0.1, free ports): tenants' state spread over the masters, and
//! admission exact across two gateway instances whose paths span several slots.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ScopeId, ScopeKey, ScopeKind};
use sluice_redis::keys::TenantGroups;
use sluice_redis::local::LocalCluster;
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

const LEASE: Duration = Duration::from_secs(30);
const TENANTS: usize = 12;

fn store(cluster: &LocalCluster) -> Arc<RedisStore> {
    let config = RedisConfig {
        topology: Topology::Cluster(cluster.urls()),
        prefix: "spread".into(),
        timeout: Duration::from_secs(5),
        tls: Tls::default(),
    };
    Arc::new(RedisStore::new(config))
}

fn per_hour(n: u64) -> Limits {
    let n = NonZeroU64::new(n).unwrap();
    Limits::unlimited().with_rate(RateLimit::new(Dimension::Requests, n, Duration::from_secs(3600)).with_burst(n))
}

/// Every tenant's path on `store`, registered as the gateway does: the org (40 requests
/// an hour), a model profile without limits, the tenant with its key kept beside it, one
/// deployment.
fn paths(store: &RedisStore) -> Vec<[ScopeId; 5]> {
    let org = store.register(ScopeKey::new(ScopeKind::Org, "org"), per_hour(40));
    let profile = store.register(ScopeKey::new(ScopeKind::ModelProfile, "chat"), Limits::unlimited());
    let d = store.register(ScopeKey::new(ScopeKind::Deployment, "east"), per_hour(1_000));
    (0..TENANTS)
        .map(|i| {
            let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, format!("tenant-{i}")), per_hour(1_000));
            let key = store.register(ScopeKey::new(ScopeKind::ApiKey, format!("key-{i}")), per_hour(1_000));
            store.keep_with(key, tenant);
            [org, tenant, key, profile, d]
        })
        .collect()
}

/// The keys each master holds.
fn keys_per_master(cluster: &LocalCluster) -> Vec<Vec<String>> {
    cluster
        .urls()
        .iter()
        .map(|url| {
            let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
            redis::cmd("KEYS").arg("*").query(&mut conn).unwrap()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_admit_exactly_the_org_limit_with_tenants_spread_over_the_masters() {
    let cluster = LocalCluster::start(3).expect("a local 3-master cluster");
    let instances = [store(&cluster), store(&cluster)];
    let paths: Vec<Arc<Vec<[ScopeId; 5]>>> = instances.iter().map(|s| Arc::new(paths(s))).collect();
    let tasks: Vec<_> = (0..160)
        .map(|i| {
            let (store, paths) = (Arc::clone(&instances[i % 2]), Arc::clone(&paths[i % 2]));
            tokio::spawn(async move {
                let path = paths[(i / 2) % TENANTS];
                store.reserve(&path, Cost::request(1, 1), LEASE).await.is_ok()
            })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        granted += u32::from(task.await.unwrap());
    }
    assert_eq!(granted, 40, "two instances over three masters admit exactly the org's limit");

    let masters = keys_per_master(&cluster);
    let holding = masters.iter().filter(|keys| keys.iter().any(|k| k.starts_with("{spread:t"))).count();
    assert!(holding >= 2, "tenants' state on {holding} master(s): {masters:?}");
    // A tenant's key lives in its tenant's hash; the org and the profile-less path in `{P:c}`.
    let tenant_state = TenantGroups::new("spread").of("tenant-0").state();
    let mut conn = redis::cluster::ClusterClient::new(cluster.urls()).unwrap().get_connection().unwrap();
    let fields: Vec<String> = redis::cmd("HKEYS").arg(&tenant_state).query(&mut conn).unwrap();
    assert!(
        fields.contains(&"tenant:tenant-0".to_owned()) && fields.contains(&"api_key:key-0".to_owned()),
        "{fields:?}"
    );
    let shared: Vec<String> = redis::cmd("HKEYS").arg("{spread:c}:state").query(&mut conn).unwrap();
    assert!(shared.contains(&"org:org".to_owned()), "{shared:?}");
    assert!(
        !shared.iter().any(|f| f.starts_with("model_profile:")),
        "a profile without limits has no state: {shared:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_left_off_the_path_cannot_be_held_and_one_with_a_limit_can() {
    let cluster = LocalCluster::start(3).expect("a local 3-master cluster");
    let store = store(&cluster);
    let org = store.register(ScopeKey::new(ScopeKind::Org, "org"), Limits::unlimited());
    let error = store.hold(org, true).await.unwrap_err();
    assert!(error.to_string().contains("give it a limit"), "{error}");
    store.hold(org, false).await.unwrap();
    let org = store.register(ScopeKey::new(ScopeKind::Org, "org"), per_hour(10));
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), per_hour(10));
    store.hold(org, true).await.unwrap();
    let refusal = store.reserve(&[org, tenant], Cost::request(1, 1), LEASE).await.unwrap_err();
    assert!(refusal.to_string().contains("paused"), "{refusal}");
}
