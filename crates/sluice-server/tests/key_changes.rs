//! Key changes reach every instance incrementally and in order, over HTTP: three gateways
//! share one Redis; a key created, rotated or revoked on one is in force on the others
//! without any of them reading every key again (counted by each instance's refresh), and a
//! revoke after a rotate ends revoked everywhere. On the embedded store (one gateway) a
//! change reads only the changed key too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Deadline, sha};
use serde_json::{Value, json};
use sluice_jobs::{JobStore, RedisJobConfig, RedisJobStore};
use sluice_quota::{MemoryStore, SystemClock};
use sluice_redis::Topology;
use sluice_redis::local::LocalRedis;
use sluice_sim::config::{ModelConfig, SimConfig};

const ROOT: &str = "sk-admin-changes-test";
/// Keys made before the changes watched: a full reload would read at least this many.
const KEYS: usize = 12;

fn policy() -> String {
    format!(
        r#"
[admin]
key_sha256 = "{root}"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 100000, tpm = 100000000 }}

[[models]]
name = "fast"
deployment = "mini"

[[tenants]]
name = "acme"

[jobs]
workers = 0
"#,
        root = sha(ROOT),
    )
}

struct Instance {
    url: String,
    state: sluice_server::AppState,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn instance(sim: &sluice_sim::SimHandle, jobs: Arc<dyn JobStore>) -> Instance {
    let config = common::config(sim, "", &policy());
    let store = Arc::new(MemoryStore::new(Arc::new(SystemClock::new())));
    let state = sluice_server::AppState::build(&config, store)
        .unwrap()
        .with_jobs(jobs.clone(), &config)
        .with_surface(sluice_admin::surface(&config));
    sluice_server::keys::poll::refresh(jobs.as_ref(), &state.current(), true).await.unwrap();
    let tasks = sluice_server::keys::poll::spawn(&state).into_iter().collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(sluice_server::serve(listener, state.clone(), std::future::pending()));
    Instance { url, state, tasks, server }
}

/// Stops the instances' servers and background tasks.
fn stop(instances: Vec<Instance>) {
    for instance in instances {
        instance.tasks.iter().for_each(tokio::task::JoinHandle::abort);
        instance.server.abort();
    }
}

async fn call(http: &reqwest::Client, url: &str, method: &str, path: &str, key: &str) -> (u16, Value) {
    let response = http.request(method.parse().unwrap(), format!("{url}{path}")).bearer_auth(key).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn post(http: &reqwest::Client, url: &str, path: &str, body: Value) -> Value {
    let response = http.post(format!("{url}{path}")).bearer_auth(ROOT).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let value: Value = response.json().await.unwrap();
    assert!(status == 200 || status == 201, "{path}: {status} {value}");
    value
}

/// Waits (at most 10 s) until `secret` answers `want` on `GET /v1/models` of every instance.
async fn until_everywhere(http: &reqwest::Client, instances: &[Instance], secret: &str, want: u16) {
    let deadline = Deadline::after(Duration::from_secs(10));
    for instance in instances {
        loop {
            let (status, _) = call(http, &instance.url, "GET", "/v1/models", secret).await;
            if status == want {
                break;
            }
            assert!(deadline.sleep(Duration::from_millis(20)).await, "{} answers {status}, not {want}", instance.url);
        }
    }
}

/// Each instance's (key records read, full reads) since start.
fn loaded(instances: &[Instance]) -> Vec<(u64, u64)> {
    instances.iter().map(|i| i.state.current().services.runtime_keys.loaded()).collect()
}

/// Asserts that no instance read every key since `before`, and each read at most `most`.
fn incremental(instances: &[Instance], before: &[(u64, u64)], most: u64, what: &str) {
    for (i, (now, then)) in loaded(instances).iter().zip(before).enumerate() {
        assert_eq!(now.1, then.1, "instance {i} read every key for {what}");
        assert!(now.0 - then.0 <= most, "instance {i} read {} keys for {what}", now.0 - then.0);
    }
}

/// A real Redis, the simulated provider, and three gateways sharing the Redis as their job
/// store.
struct Fleet {
    redis: LocalRedis,
    sim: sluice_sim::SimHandle,
    jobs: Arc<dyn JobStore>,
    http: reqwest::Client,
    instances: Vec<Instance>,
}

async fn fleet() -> Fleet {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim = sluice_sim::SimProvider::start(SimConfig {
        models: vec![ModelConfig::openai("gpt-4o-mini")],
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let jobs: Arc<dyn JobStore> = Arc::new(RedisJobStore::new(RedisJobConfig {
        topology: Topology::Standalone(redis.url()),
        prefix: "key-changes".into(),
        timeout: Duration::from_secs(2),
        tls: sluice_redis::Tls::default(),
    }));
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(instance(&sim, Arc::clone(&jobs)).await);
    }
    Fleet { redis, sim, jobs, http, instances }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_changes_reach_three_gateways_one_key_at_a_time_and_in_order() {
    let Fleet { redis: _redis, sim, jobs, http, instances } = fleet().await;
    let mut last = String::new();
    for i in 0..KEYS {
        let created =
            post(&http, &instances[0].url, "/admin/keys", json!({"id": format!("base-{i}"), "tenant": "acme"})).await;
        last = created["secret"].as_str().unwrap().to_owned();
    }
    until_everywhere(&http, &instances, &last, 200).await;

    // Created on one: in force on the others, each having read that key alone.
    let before = loaded(&instances);
    let created = post(&http, &instances[0].url, "/admin/keys", json!({"id": "watched", "tenant": "acme"})).await;
    let first = created["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &first, 200).await;
    incremental(&instances, &before, 2, "a create");

    // Rotated on another: the new secret everywhere, the old within its grace.
    let before = loaded(&instances);
    let rotated = post(&http, &instances[1].url, "/admin/keys/watched/rotate", json!({"grace_seconds": 600})).await;
    let second = rotated["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &second, 200).await;
    until_everywhere(&http, &instances, &first, 200).await;
    incremental(&instances, &before, 2, "a rotate");

    // A rotate then a revoke, from two instances: revoked on every one, and stays so.
    let before = loaded(&instances);
    let third = post(&http, &instances[2].url, "/admin/keys/watched/rotate", json!({"grace_seconds": 600})).await;
    let third = third["secret"].as_str().unwrap().to_owned();
    post(&http, &instances[0].url, "/admin/keys/watched/revoke", json!({})).await;
    for secret in [&first, &second, &third] {
        until_everywhere(&http, &instances, secret, 401).await;
    }
    let version = jobs.doc_version("key").await.unwrap();
    let deadline = Deadline::after(Duration::from_secs(10));
    while instances.iter().any(|i| i.state.current().services.runtime_keys.versions().keys < version) {
        assert!(deadline.sleep(Duration::from_millis(20)).await, "an instance never reached version {version}");
    }
    for (i, instance) in instances.iter().enumerate() {
        for secret in [&first, &second, &third] {
            assert_eq!(call(&http, &instance.url, "GET", "/v1/models", secret).await.0, 401, "instance {i}");
        }
        let (status, key) = call(&http, &instance.url, "GET", "/admin/keys/watched", ROOT).await;
        assert_eq!((status, key["status"].as_str()), (200, Some("revoked")), "instance {i}: {key}");
        let keys = &instance.state.current().services.runtime_keys;
        let watched = keys.record("watched").unwrap();
        assert!(watched.revoked_at.is_some() && watched.secrets.is_empty(), "instance {i} holds {watched:?}");
        assert_eq!(keys.count(), KEYS + 1, "instance {i}");
    }
    incremental(&instances, &before, 4, "a rotate and a revoke");

    stop(instances);
    sim.shutdown().await;
}

/// Redis restarted empty under three gateways (its key versions start over): a key made
/// after it works on every gateway, a key revoked after it is refused on every gateway
/// within a second, and each gateway reports that the store lost its data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_restarts_empty_keys_made_and_revoked_since_hold_on_every_gateway() {
    let Fleet { mut redis, sim, jobs, http, instances } = fleet().await;
    for i in 0..KEYS {
        post(&http, &instances[0].url, "/admin/keys", json!({"id": format!("old-{i}"), "tenant": "acme"})).await;
    }
    let old = post(&http, &instances[0].url, "/admin/keys", json!({"id": "old", "tenant": "acme"})).await;
    let old = old["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &old, 200).await;

    redis.restart().unwrap();
    // The first call on a connection the restart cut may fail; the client reconnects.
    let deadline = Deadline::after(Duration::from_secs(10));
    let version = loop {
        match jobs.doc_version("key").await {
            Ok(version) => break version,
            Err(e) => assert!(deadline.sleep(Duration::from_millis(50)).await, "the store never came back: {e}"),
        }
    };
    assert_eq!(version, 0, "the store starts over");
    let made = post(&http, &instances[1].url, "/admin/keys", json!({"id": "made", "tenant": "acme"})).await;
    let made = made["secret"].as_str().unwrap().to_owned();
    let doomed = post(&http, &instances[2].url, "/admin/keys", json!({"id": "doomed", "tenant": "acme"})).await;
    let doomed = doomed["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &doomed, 200).await;
    post(&http, &instances[0].url, "/admin/keys/doomed/revoke", json!({})).await;
    let revoked_at = tokio::time::Instant::now();
    until_everywhere(&http, &instances, &doomed, 401).await;
    let took = revoked_at.elapsed();
    assert!(took <= Duration::from_secs(1), "the revoke took {took:?} to reach every gateway");
    until_everywhere(&http, &instances, &made, 200).await;
    until_everywhere(&http, &instances, &old, 401).await;
    for (i, instance) in instances.iter().enumerate() {
        let ready = http.get(format!("{}/readyz", instance.url)).send().await.unwrap().text().await.unwrap();
        assert!(ready.starts_with("ready\njob store lost its data"), "instance {i}: {ready}");
        let metrics = http.get(format!("{}/metrics", instance.url)).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("sluice_store_resets_total 1"), "instance {i}");
    }

    stop(instances);
    sim.shutdown().await;
}

/// With a ledger, each gateway's records and usage are in Postgres: a Redis restarted empty
/// takes no key, tenant, audit entry or usage with it, and no gateway reports a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_ledger_keys_tenants_audit_and_usage_outlive_redis_restarting_empty() {
    let postgres = sluice_ledger::local::LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let Fleet { mut redis, sim, jobs: hot, http, instances: plain } = fleet().await;
    stop(plain);
    let settings = sluice_ledger::LedgerConfig {
        url: postgres.url(),
        password: None,
        timeout: Duration::from_secs(5),
        flush_every: Duration::from_millis(250),
    };
    let today = sluice_jobs::day_of_millis(sluice_quota::Clock::unix_millis(&SystemClock::new()));
    let keep = sluice_jobs::Retention { today, days: 30 };
    let records = sluice_server::keys::RECORDS;
    let mut stores: Vec<Arc<dyn JobStore>> = Vec::new();
    let mut instances = Vec::new();
    for _ in 0..3 {
        let store = sluice_ledger::LedgerJobStore::connect(&settings, Arc::clone(&hot), &records, keep).await.unwrap();
        let store: Arc<dyn JobStore> = Arc::new(store);
        instances.push(instance(&sim, Arc::clone(&store)).await);
        stores.push(store);
    }
    let old = post(&http, &instances[0].url, "/admin/keys", json!({"id": "old", "tenant": "acme"})).await;
    let old = old["secret"].as_str().unwrap().to_owned();
    let gone = post(&http, &instances[1].url, "/admin/keys", json!({"id": "gone", "tenant": "acme"})).await;
    let gone = gone["secret"].as_str().unwrap().to_owned();
    post(&http, &instances[2].url, "/admin/keys/gone/revoke", json!({})).await;
    post(&http, &instances[0].url, "/admin/tenants", json!({"name": "globex", "weight": 2})).await;
    until_everywhere(&http, &instances, &old, 200).await;
    until_everywhere(&http, &instances, &gone, 401).await;
    let ask = json!({"model": "fast", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    for n in 0..6 {
        let url = &instances[n % 3].url;
        let response = http.post(format!("{url}/v1/chat/completions")).bearer_auth(&old).json(&ask).send().await;
        assert_eq!(response.unwrap().status().as_u16(), 200, "request {n}");
    }
    for (instance, store) in instances.iter().zip(&stores) {
        sluice_server::usage::flush(&instance.state.current().services.usage, store.as_ref(), keep.days).await.unwrap();
    }

    redis.restart().unwrap();
    // Keys made and revoked after the restart are in force everywhere within a second, and
    // those of before are as they were.
    let made = post(&http, &instances[1].url, "/admin/keys", json!({"id": "made", "tenant": "acme"})).await;
    let made = made["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &made, 200).await;
    post(&http, &instances[0].url, "/admin/keys/made/revoke", json!({})).await;
    let revoked_at = tokio::time::Instant::now();
    until_everywhere(&http, &instances, &made, 401).await;
    let took = revoked_at.elapsed();
    assert!(took <= Duration::from_secs(1), "the revoke took {took:?} to reach every gateway");
    until_everywhere(&http, &instances, &old, 200).await;
    until_everywhere(&http, &instances, &gone, 401).await;
    for (i, instance) in instances.iter().enumerate() {
        let (status, tenants) = call(&http, &instance.url, "GET", "/admin/tenants", ROOT).await;
        assert_eq!(status, 200);
        assert!(tenants.to_string().contains("globex"), "instance {i}: {tenants}");
        let (_, audit) = call(&http, &instance.url, "GET", "/admin/audit?limit=100", ROOT).await;
        let actions: Vec<&str> =
            audit["data"].as_array().unwrap().iter().filter_map(|e| e["action"].as_str()).collect();
        assert!(actions.contains(&"tenant.create") && actions.contains(&"key.revoke"), "instance {i}: {actions:?}");
        let (_, usage) = call(&http, &instance.url, "GET", "/admin/usage", ROOT).await;
        assert_eq!(usage["total"]["requests"], 6, "instance {i}: {usage}");
        let ready = http.get(format!("{}/readyz", instance.url)).send().await.unwrap().text().await.unwrap();
        assert!(!ready.contains("lost"), "instance {i}: {ready}");
    }
    stop(instances);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_embedded_store_a_key_change_reads_only_that_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(SystemClock::new());
    let jobs: Arc<dyn JobStore> =
        Arc::new(sluice_jobs::EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock).unwrap());
    let sim = sluice_sim::SimProvider::start(SimConfig {
        models: vec![ModelConfig::openai("gpt-4o-mini")],
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let instances = vec![instance(&sim, jobs).await];
    for i in 0..KEYS {
        post(&http, &instances[0].url, "/admin/keys", json!({"id": format!("base-{i}"), "tenant": "acme"})).await;
    }
    let before = loaded(&instances);
    let created = post(&http, &instances[0].url, "/admin/keys", json!({"id": "watched", "tenant": "acme"})).await;
    let first = created["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &first, 200).await;
    let rotated = post(&http, &instances[0].url, "/admin/keys/watched/rotate", json!({"grace_seconds": 0})).await;
    let second = rotated["secret"].as_str().unwrap().to_owned();
    until_everywhere(&http, &instances, &second, 200).await;
    until_everywhere(&http, &instances, &first, 401).await;
    post(&http, &instances[0].url, "/admin/keys/watched/revoke", json!({})).await;
    until_everywhere(&http, &instances, &second, 401).await;
    incremental(&instances, &before, 3, "a create, a rotate and a revoke");
    let keys = &instances[0].state.current().services.runtime_keys;
    assert_eq!(keys.count(), KEYS + 1);
    assert!(keys.record("watched").unwrap().revoked_at.is_some());
    stop(instances);
    sim.shutdown().await;
}
