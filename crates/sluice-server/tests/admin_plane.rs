//! The admin plane apart from the API: the public listener answers 404 `unknown_route` for
//! `/admin/*`, `/dashboard` and `/metrics` while the admin listener serves them (and
//! nothing of the API); `/metrics` behind its bearer token; `[admin] listen = "shared"`
//! serving both on one port; and the admin API's OpenAPI document matching the router:
//! every route documented, every documented route served, every documented GET answering
//! its documented status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;

use common::{KEY, sha};
use serde_json::Value;
use sluice_config::{AdminListen, SecretSource};
use sluice_quota::SystemClock;
use sluice_server::{AppState, Running};
use sluice_sim::SimProvider;
use sluice_sim::config::{ModelConfig, SimConfig};

const ADMIN: &str = "sk-admin-plane-test-0123";
const METRICS_TOKEN: &str = "scrape-me-0123456789";

fn sim_config() -> SimConfig {
    SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() }
}

fn policy() -> String {
    format!("[admin]\nkey_sha256 = \"{}\"\n\n{}", sha(ADMIN), common::one_deployment(""))
}

/// A gateway with the admin plane as `listen` says, runtime keys on (an embedded job store
/// in `dir`), and `metrics_token` as `/metrics`'s token source.
async fn gateway(
    sim: &sluice_sim::server::SimHandle,
    listen: AdminListen,
    metrics_token: Option<SecretSource>,
    dir: &std::path::Path,
) -> Running {
    let mut config = common::config(sim, "", &policy());
    config.admin.listen = listen;
    config.admin.metrics_token = metrics_token;
    let clock = Arc::new(SystemClock::new());
    let store = Arc::new(sluice_quota::MemoryStore::new(clock.clone()));
    let jobs = sluice_jobs::EmbeddedJobStore::open(&dir.join("jobs.redb"), clock.clone()).unwrap();
    let state = AppState::build_with_clock(&config, store, clock)
        .unwrap()
        .with_jobs(Arc::new(jobs), &config)
        .with_surface(sluice_admin::surface(&config));
    Running::start_state(state, "127.0.0.1:0".parse().unwrap(), config.server.shutdown_grace).await.unwrap()
}

fn apart() -> AdminListen {
    AdminListen::Apart("127.0.0.1:0".parse().unwrap())
}

async fn get(url: &str, key: Option<&str>) -> (u16, String) {
    get_from(&reqwest::Client::new(), url, key).await
}

async fn get_from(http: &reqwest::Client, url: &str, key: Option<&str>) -> (u16, String) {
    let mut request = http.get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_port_refuses_the_admin_plane_and_the_admin_port_serves_it() {
    let sim = SimProvider::start(sim_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(&sim, apart(), None, dir.path()).await;
    let (public, admin) = (gateway.url(), gateway.admin_url());
    assert_ne!(public, admin, "two listeners");
    for path in ["/admin/state", "/dashboard", "/metrics", "/admin/openapi.json", "/admin/keys"] {
        let (status, body) = get(&format!("{public}{path}"), Some(ADMIN)).await;
        assert_eq!(status, 404, "{path} on the public port: {body}");
        assert!(body.contains("unknown_route"), "{path}: {body}");
    }
    assert_eq!(get(&format!("{public}/healthz"), None).await.0, 200);
    assert_eq!(get(&format!("{public}/readyz"), None).await.0, 200);
    assert_eq!(get(&format!("{public}/v1/models"), Some(KEY)).await.0, 200);

    let (status, body) = get(&format!("{admin}/admin/state"), Some(ADMIN)).await;
    assert_eq!(status, 200, "{body}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["scopes"].is_array(), "{body}");
    assert_eq!(get(&format!("{admin}/admin/state"), None).await.0, 401, "the admin key is still asked for");
    let (status, page) = get(&format!("{admin}/dashboard"), None).await;
    assert_eq!(status, 200);
    assert!(page.contains("<form"), "the login form: {page}");
    let (status, metrics) = get(&format!("{admin}/metrics"), None).await;
    assert_eq!(status, 200, "no token configured: open on the admin port");
    assert!(metrics.contains("sluice_"), "{metrics}");
    let (status, body) = get(&format!("{admin}/v1/models"), Some(KEY)).await;
    assert_eq!(status, 404, "no API on the admin port: {body}");
    assert!(body.contains("unknown_route"), "{body}");
    gateway.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_asks_for_its_token_from_a_file_or_the_environment() {
    let sim = SimProvider::start(sim_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metrics-token");
    std::fs::write(&file, format!("{METRICS_TOKEN}\n")).unwrap();
    let source = SecretSource::File(file.display().to_string());
    let gateway = gateway(&sim, apart(), Some(source), dir.path()).await;
    let metrics = format!("{}/metrics", gateway.admin_url());
    let (status, body) = get(&metrics, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("metrics token required") && !body.contains(METRICS_TOKEN), "{body}");
    assert_eq!(get(&metrics, Some("scrape-me-wrong")).await.0, 401);
    assert_eq!(get(&metrics, Some(ADMIN)).await.0, 401, "the admin key is not the metrics token");
    let (status, body) = get(&metrics, Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200);
    assert!(body.contains("sluice_"), "{body}");
    gateway.shutdown().await;

    // A variable that is not set: the gateway does not start.
    let mut config = common::config(&sim, "", &policy());
    config.admin.metrics_token = Some(SecretSource::Env("SLUICE_TEST_METRICS_TOKEN_UNSET".into()));
    let store = Arc::new(sluice_quota::MemoryStore::new(Arc::new(SystemClock::new())));
    let error = AppState::build(&config, store).unwrap_err().to_string();
    assert!(error.contains("SLUICE_TEST_METRICS_TOKEN_UNSET"), "{error}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_serves_the_admin_plane_beside_the_api_on_one_port() {
    let sim = SimProvider::start(sim_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(&sim, AdminListen::Shared, None, dir.path()).await;
    let url = gateway.url();
    assert_eq!(gateway.admin_url(), url);
    assert_eq!(get(&format!("{url}/admin/state"), Some(ADMIN)).await.0, 200);
    assert_eq!(get(&format!("{url}/dashboard"), None).await.0, 200);
    assert_eq!(get(&format!("{url}/metrics"), None).await.0, 200);
    assert_eq!(get(&format!("{url}/v1/models"), Some(KEY)).await.0, 200);
    gateway.shutdown().await;
    sim.shutdown().await;
}

/// A documented path with its parameters filled in: names this gateway knows.
fn concrete(path: &str) -> String {
    path.replace("{id}", "k").replace("{name}", "t").replace("{kind}", "tenant")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_every_admin_route_and_each_get_answers_as_documented() {
    let sim = SimProvider::start(sim_config()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(&sim, apart(), None, dir.path()).await;
    let admin = gateway.admin_url();
    let (status, text) = get(&format!("{admin}/admin/openapi.json"), None).await;
    assert_eq!(status, 200, "{text}");
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc, serde_json::to_value(sluice_admin::openapi()).unwrap(), "served as generated");
    let paths = doc["paths"].as_object().unwrap();

    // The router's routes (the table it is built from) and the document's operations agree.
    let routed: Vec<(String, String)> = sluice_admin::route_table()
        .into_iter()
        .filter(|(_, path)| path.starts_with("/admin/"))
        .map(|(method, path)| (method.to_lowercase(), path.to_owned()))
        .collect();
    assert!(routed.len() >= 20, "{routed:?}");
    for (method, path) in &routed {
        assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} is not documented");
    }
    let mut documented = Vec::new();
    for (path, item) in paths {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                documented.push((method.to_owned(), path.clone()));
            }
        }
    }
    for operation in &documented {
        assert!(routed.contains(operation), "{operation:?} is documented but not routed");
    }
    assert_eq!(documented.len(), routed.len());
    // Every operation has an id of its own (a generated client's method name).
    let mut ids: Vec<&str> = documented.iter().map(|(m, p)| paths[p][m]["operationId"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), documented.len(), "operation ids repeat: {ids:?}");
    // Every schema a document names is in it.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for reference in text.match_indices("#/components/schemas/").map(|(at, _)| &text[at + 21..]) {
        let name: String = reference.chars().take_while(|c| *c != '"').collect();
        assert!(schemas.contains_key(&name), "{name} is referenced but not defined");
    }

    // Every documented GET answers with the status documented for success, and refuses
    // without the key as documented.
    for (i, (method, path)) in documented.iter().filter(|(m, _)| m == "get").enumerate() {
        let responses = paths[path][method]["responses"].as_object().unwrap();
        let key = (path != "/admin/openapi.json").then_some(ADMIN);
        let (status, body) = get(&format!("{admin}{}", concrete(path)), key).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        assert!(responses.contains_key("200"), "GET {path}: 200 is not documented");
        if key.is_some() {
            // From an address of its own: refusals from one address are throttled.
            let peer = std::net::IpAddr::from([127, 0, 2, u8::try_from(i + 1).unwrap()]);
            let http = reqwest::Client::builder().local_address(peer).build().unwrap();
            let (status, _) = get_from(&http, &format!("{admin}{}", concrete(path)), None).await;
            assert!(responses.contains_key(&status.to_string()), "GET {path} without the key: {status} undocumented");
            assert_eq!(status, 401, "GET {path} without the key");
        }
    }
    gateway.shutdown().await;
    sim.shutdown().await;
}
