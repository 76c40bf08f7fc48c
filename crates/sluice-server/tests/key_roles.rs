//! Admin roles and ordered key changes, over HTTP: a tenant admin changes its tenant's
//! member keys only (never a tenant admin key, never past the limits the root admin set),
//! a taken id tells it nothing of another tenant, failed admin keys are throttled per
//! peer, and a revoke racing a rotate and a PATCH of the same key leaves it revoked every
//! time: on one gateway (embedded store) and on three gateways sharing a Redis.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{Deadline, sha, start_jobs};
use serde_json::{Value, json};
use sluice_jobs::{JobStore, RedisJobConfig, RedisJobStore};
use sluice_quota::{MemoryStore, SystemClock};
use sluice_redis::Topology;
use sluice_redis::local::LocalRedis;
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

const ROOT: &str = "sk-admin-roles-test";
/// Races run per setup.
const RACES: usize = 100;

fn sim() -> SimConfig {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 8 }, ..ModelConfig::openai("gpt-4o-mini") };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

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
default_max_tokens = 32

[[tenants]]
name = "acme"

[[tenants]]
name = "globex"

[jobs]
workers = 0
"#,
        root = sha(ROOT),
    )
}

/// One admin API client of one gateway.
#[derive(Clone)]
struct Admin {
    url: String,
    http: reqwest::Client,
}

impl Admin {
    fn new(url: &str) -> Self {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        Self { url: url.to_owned(), http }
    }

    async fn call(&self, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method.parse().unwrap(), format!("{}{path}", self.url)).bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Creates a key; its secret and view.
    async fn create(&self, by: &str, body: Value) -> (String, Value) {
        let (status, value) = self.call("POST", "/admin/keys", by, Some(body)).await;
        assert_eq!(status, 201, "{value}");
        (value["secret"].as_str().unwrap().to_owned(), value["key"].clone())
    }

    /// The status of `GET /v1/models` with `secret`: 200 while it authenticates.
    async fn models(&self, secret: &str) -> u16 {
        self.call("GET", "/v1/models", secret, None).await.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_cannot_rotate_revoke_or_change_a_tenant_admin_key() {
    let env = start_jobs(sim(), &policy()).await;
    let api = Admin::new(&env.url);
    let (one, _) = api.create(ROOT, json!({"id": "acme-admin-1", "tenant": "acme", "role": "tenant_admin"})).await;
    let (two, _) = api.create(ROOT, json!({"id": "acme-admin-2", "tenant": "acme", "role": "tenant_admin"})).await;
    for (method, path, body) in [
        ("POST", "/admin/keys/acme-admin-2/rotate", None),
        ("POST", "/admin/keys/acme-admin-2/revoke", None),
        ("PATCH", "/admin/keys/acme-admin-2", Some(json!({"metadata": {"x": "y"}}))),
        ("POST", "/admin/keys/acme-admin-1/rotate", None),
        ("POST", "/admin/keys/acme-admin-1/revoke", None),
    ] {
        let (status, value) = api.call(method, path, &one, body).await;
        assert_eq!((status, value["error"]["code"].as_str()), (403, Some("root_only")), "{method} {path}: {value}");
        assert!(value.get("secret").is_none(), "{value}");
    }
    assert_eq!(api.call("GET", "/admin/keys", &two, None).await.0, 200, "the other admin key still works");
    assert_eq!(api.call("GET", "/admin/keys", &one, None).await.0, 200);
    // Its own tenant's member keys it manages.
    let (_, member) = api.create(&one, json!({"tenant": "acme"})).await;
    let path = format!("/admin/keys/{}/rotate", member["id"].as_str().unwrap());
    assert_eq!(api.call("POST", &path, &one, None).await.0, 200);
    // The root admin manages tenant admin keys.
    let (status, rotated) = api.call("POST", "/admin/keys/acme-admin-2/rotate", ROOT, None).await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(api.call("POST", "/admin/keys/acme-admin-2/revoke", ROOT, None).await.0, 200);
    assert_eq!(api.call("GET", "/admin/keys", &two, None).await.0, 401);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_the_root_admin_set_a_tenant_admin_may_lower_but_not_clear_or_raise() {
    let env = start_jobs(sim(), &policy()).await;
    let api = Admin::new(&env.url);
    let (admin, _) = api.create(ROOT, json!({"tenant": "acme", "role": "tenant_admin"})).await;
    let (_, capped) = api.create(ROOT, json!({"id": "capped", "tenant": "acme", "limits": {"rpm": 100}})).await;
    for limits in [json!({}), json!({"tpm": 5}), json!({"rpm": 101}), json!({"rpm": 1_000_000})] {
        let (status, value) = api.call("PATCH", "/admin/keys/capped", &admin, Some(json!({"limits": limits}))).await;
        assert_eq!((status, value["error"]["code"].as_str()), (403, Some("root_limits")), "{limits}: {value}");
    }
    assert_eq!(capped["root_limits"], json!({"rpm": 100}), "{capped}");
    let (_, read) = api.call("GET", "/admin/keys/capped", &admin, None).await;
    assert_eq!(read["limits"], json!({"rpm": 100}), "unchanged: {read}");
    let tighter = json!({"limits": {"rpm": 50, "tpm": 1000}});
    let (status, lowered) = api.call("PATCH", "/admin/keys/capped", &admin, Some(tighter)).await;
    assert_eq!((status, &lowered["limits"]), (200, &json!({"rpm": 50, "tpm": 1000})), "{lowered}");
    // Back up to the root admin's value, not past it; other fields stay the tenant admin's.
    let (status, _) = api.call("PATCH", "/admin/keys/capped", &admin, Some(json!({"limits": {"rpm": 100}}))).await;
    assert_eq!(status, 200);
    let (status, _) = api.call("PATCH", "/admin/keys/capped", &admin, Some(json!({"metadata": {"a": "b"}}))).await;
    assert_eq!(status, 200);
    // The root admin lifts its own limit; a key the tenant admin made has none of root's.
    let (status, _) = api.call("PATCH", "/admin/keys/capped", ROOT, Some(json!({"limits": {}}))).await;
    assert_eq!(status, 200);
    let (status, _) = api.call("PATCH", "/admin/keys/capped", &admin, Some(json!({"limits": {"rpm": 9}}))).await;
    assert_eq!(status, 200);
    let (_, own) = api.create(&admin, json!({"tenant": "acme", "limits": {"rpm": 5}})).await;
    let path = format!("/admin/keys/{}", own["id"].as_str().unwrap());
    assert_eq!(api.call("PATCH", &path, &admin, Some(json!({"limits": {}}))).await.0, 200);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_id_tells_a_tenant_admin_nothing_of_another_tenant() {
    let env = start_jobs(sim(), &policy()).await;
    let api = Admin::new(&env.url);
    let (acme, _) = api.create(ROOT, json!({"tenant": "acme", "role": "tenant_admin"})).await;
    let (globex, _) = api.create(ROOT, json!({"tenant": "globex", "role": "tenant_admin"})).await;
    api.create(ROOT, json!({"id": "globex-bot", "tenant": "globex"})).await;
    let (_, theirs) = api.create(&globex, json!({"id": "ci", "tenant": "globex"})).await;
    // Ids taken in globex, and a fresh one: acme's admin gets the same answer for each.
    for name in ["globex-bot", "ci", "fresh"] {
        let (status, value) = api.call("POST", "/admin/keys", &acme, Some(json!({"id": name, "tenant": "acme"}))).await;
        assert_eq!((status, value["key"]["id"].as_str()), (201, Some(format!("acme:{name}").as_str())), "{value}");
    }
    assert_eq!(theirs["id"], "globex:ci", "a tenant admin's ids are namespaced by its tenant");
    let (status, value) =
        api.call("POST", "/admin/keys", &acme, Some(json!({"id": "acme:ci", "tenant": "acme"}))).await;
    assert_eq!((status, value["error"]["code"].as_str()), (409, Some("key_id_taken")), "its own: {value}");
    // Another tenant's namespace is refused alike, taken or not.
    let mut refusals = Vec::new();
    for id in ["globex:ci", "globex:unused"] {
        let (status, value) = api.call("POST", "/admin/keys", &acme, Some(json!({"id": id, "tenant": "acme"}))).await;
        refusals.push((status, value["error"]["message"].clone()));
    }
    assert_eq!(refusals[0], refusals[1]);
    assert_eq!(refusals[0].0, 400);
    for id in [".", "..", "", "-x", ".hidden", "a/b", "a b", &"x".repeat(65)] {
        let (status, value) = api.call("POST", "/admin/keys", ROOT, Some(json!({"id": id, "tenant": "acme"}))).await;
        assert_eq!((status, value["error"]["param"].as_str()), (400, Some("id")), "{id:?}: {value}");
    }
    let (_, longest) = api.create(ROOT, json!({"id": "x".repeat(64), "tenant": "acme"})).await;
    assert_eq!(longest["id"].as_str().map(str::len), Some(64));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_admin_keys_are_throttled_per_peer() {
    let env = start_jobs(sim(), &policy()).await;
    let api = Admin::new(&env.url);
    let (tenant_admin, _) = api.create(ROOT, json!({"tenant": "acme", "role": "tenant_admin"})).await;
    for attempt in 1..=5 {
        assert_eq!(api.call("GET", "/admin/keys", "sk-guess", None).await.0, 401, "attempt {attempt}");
        if attempt < 5 {
            // A tenant admin key that works buys no further guesses.
            assert_eq!(api.call("GET", "/admin/keys", &tenant_admin, None).await.0, 200);
        }
    }
    let response = api.http.get(format!("{}/admin/keys", api.url)).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 429, "locked out, even with the right key");
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "{wait}");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_failed_logins", "{body}");
    // Another peer address is not locked out.
    let elsewhere = reqwest::Client::builder().local_address(IpAddr::from([127, 0, 0, 2])).build().unwrap();
    let response = elsewhere.get(format!("{}/admin/keys", api.url)).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    env.shutdown().await;
}

/// One race: `revoke`, `rotate` and a PATCH of one key at once, each sent to its gateway.
/// Returns the secrets that were ever valid for the key (the first, a rotated one).
async fn race(key: &str, revoke: &Admin, rotate: &Admin, patch: &Admin, first: String) -> Vec<String> {
    let revoke_path = format!("/admin/keys/{key}/revoke");
    let rotate_path = format!("/admin/keys/{key}/rotate");
    let patch_path = format!("/admin/keys/{key}");
    let (revoked, rotated, patched) = tokio::join!(
        revoke.call("POST", &revoke_path, ROOT, None),
        rotate.call("POST", &rotate_path, ROOT, Some(json!({"grace_seconds": 600}))),
        patch.call("PATCH", &patch_path, ROOT, Some(json!({"metadata": {"race": "patch"}}))),
    );
    assert_eq!(revoked.0, 200, "revoke wins: {}", revoked.1);
    for (what, (status, value)) in [("rotate", &rotated), ("patch", &patched)] {
        let code = value["error"]["code"].as_str();
        let lost = status == &409 && matches!(code, Some("key_revoked" | "key_changed"));
        assert!(status == &200 || lost, "{what}: {status} {value}");
        if code == Some("key_changed") {
            assert!(value["error"]["current_version"].as_u64().is_some(), "{value}");
        }
    }
    let mut secrets = vec![first];
    secrets.extend(rotated.1["secret"].as_str().map(str::to_owned));
    secrets
}

/// Polls until none of `secrets` authenticates on any of `gateways` (at most 5 s); the
/// ones that still do.
async fn still_valid(gateways: &[Admin], secrets: &[String]) -> Vec<String> {
    let deadline = Deadline::after(Duration::from_secs(5));
    loop {
        let mut valid = Vec::new();
        for secret in secrets {
            for gateway in gateways {
                if gateway.models(secret).await != 401 {
                    valid.push(secret.clone());
                }
            }
        }
        if valid.is_empty() || !deadline.sleep(Duration::from_millis(100)).await {
            return valid;
        }
    }
}

/// Runs [`RACES`] races over `gateways` (each race's calls spread over them) and checks
/// every key ends revoked, on every gateway, with none of its secrets valid.
async fn revoke_wins_every_race(gateways: &[Admin]) {
    let mut secrets = Vec::new();
    for i in 0..RACES {
        let pick = |n: usize| &gateways[(i + n) % gateways.len()];
        let key = format!("race-{i}");
        let (first, _) = pick(0).create(ROOT, json!({"id": key, "tenant": "acme"})).await;
        assert_eq!(pick(0).models(&first).await, 200);
        secrets.extend(race(&key, pick(0), pick(1), pick(2), first).await);
        for gateway in gateways {
            let (status, read) = gateway.call("GET", &format!("/admin/keys/{key}"), ROOT, None).await;
            assert_eq!((status, read["status"].as_str()), (200, Some("revoked")), "race {i}: {read}");
        }
    }
    assert_eq!(still_valid(gateways, &secrets).await, Vec::<String>::new(), "every secret of a revoked key ends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_wins_every_race_with_rotate_and_patch_on_one_gateway() {
    let env = start_jobs(sim(), &policy()).await;
    revoke_wins_every_race(&[Admin::new(&env.url)]).await;
    env.shutdown().await;
}

/// A gateway on `jobs` (shared with the others), polling it for key changes.
struct Instance {
    url: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn instance(sim: &sluice_sim::SimHandle, jobs: Arc<dyn JobStore>) -> Instance {
    let config = common::config(sim, "", &policy());
    let store = Arc::new(MemoryStore::new(Arc::new(SystemClock::new())));
    let state = sluice_server::AppState::build(&config, store)
        .unwrap()
        .with_jobs(jobs, &config)
        .with_surface(sluice_admin::surface(&config));
    let tasks = sluice_server::keys::poll::spawn(&state).into_iter().collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(sluice_server::serve(listener, state, std::future::pending()));
    Instance { url, tasks, server }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_wins_every_race_with_rotate_and_patch_on_three_gateways_sharing_redis() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim = sluice_sim::SimProvider::start(sim()).await.unwrap();
    let jobs: Arc<dyn JobStore> = Arc::new(RedisJobStore::new(RedisJobConfig {
        topology: Topology::Standalone(redis.url()),
        prefix: "key-races".into(),
        timeout: Duration::from_secs(2),
        tls: sluice_redis::Tls::default(),
    }));
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(instance(&sim, Arc::clone(&jobs)).await);
    }
    let gateways: Vec<Admin> = instances.iter().map(|i| Admin::new(&i.url)).collect();
    revoke_wins_every_race(&gateways).await;
    for instance in instances {
        instance.tasks.iter().for_each(tokio::task::JoinHandle::abort);
        instance.server.abort();
    }
    sim.shutdown().await;
}
