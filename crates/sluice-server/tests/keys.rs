//! Runtime keys through the admin API (embedded job store): a created key calls the API
//! at once, its secret is shown once and never again, updates, rotation (both secrets
//! valid for the grace), expiry and revocation take effect at once; configured keys are
//! read-only; hostile bodies get a structured 4xx; tenant admins see only their tenant;
//! every change is in the audit log, without secrets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use common::{JobsEnv, KEY, sha, start_jobs};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

const ADMIN: &str = "sk-admin-keys-test";

fn sim() -> SimConfig {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 8 }, ..ModelConfig::openai("gpt-4o-mini") };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

fn policy() -> String {
    format!(
        r#"
[admin]
key_sha256 = "{admin}"

[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 32

[[models]]
name = "other"
deployment = "mini"
default_max_tokens = 32

[[classes]]
name = "interactive"
max_wait = "1s"

[[classes]]
name = "batch"
max_wait = "1s"
priority = 1

[[tenants]]
name = "acme"

[[tenants.teams]]
name = "search"

[[tenants]]
name = "globex"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{key}"

[jobs]
workers = 0
"#,
        admin = sha(ADMIN),
        key = sha(KEY),
    )
}

async fn call(env: &JobsEnv, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = env.http.request(method.parse().unwrap(), format!("{}{path}", env.url)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn chat(env: &JobsEnv, key: &str, model: &str) -> u16 {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    call(env, "POST", "/v1/chat/completions", key, Some(body)).await.0
}

async fn create(env: &JobsEnv, by: &str, body: Value) -> (String, Value) {
    let (status, value) = call(env, "POST", "/admin/keys", by, Some(body)).await;
    assert_eq!(status, 201, "{value}");
    (value["secret"].as_str().unwrap().to_owned(), value["key"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_key_calls_at_once_and_revocation_ends_it() {
    let env = start_jobs(sim(), &policy()).await;
    let (secret, key) = create(&env, ADMIN, json!({"id": "rt-1", "tenant": "acme", "team": "search"})).await;
    assert!(secret.starts_with("sk-sluice-"));
    assert_eq!((key["id"].as_str(), key["status"].as_str()), (Some("rt-1"), Some("active")));
    assert_eq!(chat(&env, &secret, "fast").await, 200);
    // The secret is shown once: neither read nor list repeats it (nor its hash).
    for path in ["/admin/keys/rt-1", "/admin/keys", "/admin/audit"] {
        let (status, value) = call(&env, "GET", path, ADMIN, None).await;
        assert_eq!(status, 200, "{path}: {value}");
        let text = value.to_string();
        assert!(!text.contains(&secret) && !text.contains(&sha(&secret)), "{path} leaks: {text}");
    }
    let (status, listed) = call(&env, "GET", "/admin/keys", ADMIN, None).await;
    assert_eq!(status, 200);
    let sources: Vec<(&str, &str)> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["id"].as_str().unwrap(), k["source"].as_str().unwrap()))
        .collect();
    assert_eq!(sources, [("acme-1", "config"), ("rt-1", "runtime")]);
    let (status, value) = call(&env, "POST", "/admin/keys/rt-1/revoke", ADMIN, None).await;
    assert_eq!((status, value["status"].as_str()), (200, Some("revoked")), "{value}");
    assert_eq!(chat(&env, &secret, "fast").await, 401);
    // Revoking twice, changing or rotating a revoked key: a clear 409.
    for (method, path, body) in [
        ("POST", "/admin/keys/rt-1/revoke", None),
        ("POST", "/admin/keys/rt-1/rotate", None),
        ("PATCH", "/admin/keys/rt-1", Some(json!({"class": "batch"}))),
    ] {
        let (status, value) = call(&env, method, path, ADMIN, body).await;
        assert_eq!((status, value["error"]["code"].as_str()), (409, Some("key_revoked")), "{method} {path}: {value}");
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_rotation_and_model_restriction_apply_at_once() {
    let env = start_jobs(sim(), &policy()).await;
    let (old, _) = create(&env, ADMIN, json!({"id": "rt-2", "tenant": "acme", "models": ["fast"]})).await;
    assert_eq!(chat(&env, &old, "fast").await, 200);
    assert_eq!(chat(&env, &old, "other").await, 404, "a profile outside the key's list does not exist for it");
    let job = |model: &str| {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
        json!({"endpoint": "/v1/chat/completions", "body": body})
    };
    assert_eq!(call(&env, "POST", "/v1/jobs", &old, Some(job("other"))).await.0, 404, "nor for its jobs");
    assert_eq!(call(&env, "POST", "/v1/jobs", &old, Some(job("fast"))).await.0, 202);
    let (_, listed) = call(&env, "GET", "/v1/models", &old, None).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    let (status, value) =
        call(&env, "PATCH", "/admin/keys/rt-2", ADMIN, Some(json!({"models": null, "metadata": {"owner": "ops"}})))
            .await;
    assert_eq!(status, 200, "{value}");
    assert_eq!(value["metadata"]["owner"], "ops");
    assert_eq!(chat(&env, &old, "other").await, 200, "the restriction was lifted");
    // A rotation: old and new both work during the grace; with no grace the old stops.
    let (status, rotated) =
        call(&env, "POST", "/admin/keys/rt-2/rotate", ADMIN, Some(json!({"grace_seconds": 600}))).await;
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_eq!((chat(&env, &old, "fast").await, chat(&env, &new, "fast").await), (200, 200));
    let (status, again) = call(&env, "POST", "/admin/keys/rt-2/rotate", ADMIN, Some(json!({"grace_seconds": 0}))).await;
    assert_eq!(status, 200, "{again}");
    let newest = again["secret"].as_str().unwrap().to_owned();
    assert_eq!((chat(&env, &old, "fast").await, chat(&env, &new, "fast").await), (401, 401));
    assert_eq!(chat(&env, &newest, "fast").await, 200);
    let (_, audit) = call(&env, "GET", "/admin/audit?limit=2", ADMIN, None).await;
    let actions: Vec<&str> = audit["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["key.rotate", "key.rotate"], "newest first: {audit}");
    assert_eq!(audit["data"][0]["actor"], "root");
    let next = audit["next"].as_str().unwrap();
    let (_, rest) = call(&env, "GET", &format!("/admin/audit?limit=10&before={next}"), ADMIN, None).await;
    let actions: Vec<&str> = rest["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["key.update", "key.create"], "{rest}");
    assert_eq!(rest["data"][0]["fields"], json!(["metadata", "models"]));
    assert!(rest["next"].is_null());
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_and_config_keys_get_a_structured_4xx() {
    let env = start_jobs(sim(), &policy()).await;
    let huge: serde_json::Map<String, Value> = (0..40).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = [
        (json!({"tenant": "acme", "colour": "red"}), "body"),
        (json!({"tenant": "nobody"}), "tenant"),
        (json!({"tenant": "acme", "team": "nope"}), "team"),
        (json!({"tenant": "acme", "class": "nope"}), "class"),
        (json!({"tenant": "acme", "models": ["nope"]}), "models"),
        (json!({"tenant": "acme", "limits": {"rpm": "many"}}), "limits.rpm"),
        (json!({"tenant": "acme", "metadata": huge}), "metadata"),
        (json!({"tenant": "acme", "metadata": {"k": "x".repeat(5000)}}), "metadata.k"),
        (json!({"tenant": "acme", "metadata": {"k": 1}}), "metadata.k"),
        (json!({"tenant": "acme", "expires_at": 1}), "expires_at"),
        (json!({"tenant": "acme", "expires_at": "tomorrow"}), "body"),
        (json!({"tenant": "acme", "id": "bad id/../"}), "id"),
    ];
    for (body, param) in cases {
        let (status, value) = call(&env, "POST", "/admin/keys", ADMIN, Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {value}");
        assert_eq!(value["error"]["param"], param, "{body}: {value}");
        assert_eq!(value["error"]["type"], "invalid_request_error");
    }
    let (status, value) =
        call(&env, "POST", "/admin/keys", ADMIN, Some(json!({"id": "acme-1", "tenant": "acme"}))).await;
    assert_eq!((status, value["error"]["code"].as_str()), (409, Some("key_id_taken")), "{value}");
    for (method, path) in
        [("PATCH", "/admin/keys/acme-1"), ("POST", "/admin/keys/acme-1/revoke"), ("POST", "/admin/keys/acme-1/rotate")]
    {
        let (status, value) = call(&env, method, path, ADMIN, Some(json!({}))).await;
        assert_eq!((status, value["error"]["code"].as_str()), (403, Some("config_key_read_only")), "{path}: {value}");
    }
    assert_eq!(chat(&env, KEY, "fast").await, 200, "the configured key is untouched");
    let (status, value) = call(&env, "POST", "/admin/keys/ghost/revoke", ADMIN, None).await;
    assert_eq!((status, value["error"]["code"].as_str()), (404, Some("key_not_found")));
    let (_, created) = call(&env, "POST", "/admin/keys", ADMIN, Some(json!({"id": "rt-h", "tenant": "acme"}))).await;
    assert_eq!(created["key"]["id"], "rt-h");
    for (method, path, body, param) in [
        ("PATCH", "/admin/keys/rt-h", json!({"secret": "mine"}), "body"),
        ("PATCH", "/admin/keys/rt-h", json!({"tenant": null}), "body"),
        ("PATCH", "/admin/keys/rt-h", json!({"limits": null}), "body"),
        ("PATCH", "/admin/keys/rt-h", json!({}), "body"),
        ("PATCH", "/admin/keys/rt-h", json!({"expires_at": -5}), "body"),
        ("PATCH", "/admin/keys/rt-h", json!({"expires_at": 0}), "expires_at"),
        ("POST", "/admin/keys/rt-h/rotate", json!({"grace_seconds": 999_999_999}), "grace_seconds"),
        ("POST", "/admin/keys/rt-h/rotate", json!({"grace": 5}), "body"),
    ] {
        let (status, value) = call(&env, method, path, ADMIN, Some(body.clone())).await;
        assert_eq!((status, value["error"]["param"].as_str()), (400, Some(param)), "{method} {path} {body}: {value}");
    }
    let huge = json!({"tenant": "acme", "metadata": {"k": "x".repeat(5 * 1024 * 1024)}});
    let (status, value) = call(&env, "POST", "/admin/keys", ADMIN, Some(huge)).await;
    assert_eq!((status, value["error"]["code"].as_str()), (413, Some("body_too_large")), "{value}");
    for query in ["limit=0", "limit=501", "limit=x", "colour=red"] {
        let (status, value) = call(&env, "GET", &format!("/admin/audit?{query}"), ADMIN, None).await;
        assert_eq!(status, 400, "{query}: {value}");
    }
    // Nothing refused above reached the store: the audit log holds the one creation.
    let (_, audit) = call(&env, "GET", "/admin/audit", ADMIN, None).await;
    let actions: Vec<&str> = audit["data"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["key.create"], "{audit}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_key_is_no_admin_key_and_a_refusal_leaves_no_audit_entry() {
    let env = start_jobs(sim(), &policy()).await;
    let (status, _) = call(&env, "POST", "/admin/keys", ADMIN, Some(json!({"tenant": "nobody"}))).await;
    assert_eq!(status, 400);
    let (_, audit) = call(&env, "GET", "/admin/audit", ADMIN, None).await;
    assert_eq!(audit["data"], json!([]));
    // A client key is no admin key.
    assert_eq!(call(&env, "GET", "/admin/keys", KEY, None).await.0, 401);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_manages_only_its_own_tenant() {
    let env = start_jobs(sim(), &policy()).await;
    let (admin, _) = create(&env, ADMIN, json!({"id": "acme-admin", "tenant": "acme", "role": "tenant_admin"})).await;
    assert_eq!(chat(&env, &admin, "fast").await, 401, "an admin key does not call the API");
    let (_, globex) = create(&env, ADMIN, json!({"id": "globex-key", "tenant": "globex"})).await;
    assert_eq!(globex["tenant"], "globex");
    let (secret, own) = create(&env, &admin, json!({"id": "acme-own", "tenant": "acme"})).await;
    assert_eq!(own["id"], "acme:acme-own", "a tenant admin's ids are namespaced by its tenant");
    assert_eq!(chat(&env, &secret, "fast").await, 200);
    let (status, listed) = call(&env, "GET", "/admin/keys", &admin, None).await;
    assert_eq!(status, 200);
    let mut ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|k| k["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["acme-1", "acme-admin", "acme:acme-own"]);
    // Another tenant's key, another tenant, or a root-only route: as if they did not exist.
    for (method, path, body) in [
        ("GET", "/admin/keys/globex-key", None),
        ("POST", "/admin/keys/globex-key/revoke", None),
        ("POST", "/admin/keys", Some(json!({"tenant": "globex"}))),
        ("PATCH", "/admin/keys/acme:acme-own", Some(json!({"tenant": "globex"}))),
        ("GET", "/admin/state", None),
        ("POST", "/admin/tenants/globex/pause", None),
    ] {
        let (status, value) = call(&env, method, path, &admin, body).await;
        assert_eq!(status, 404, "{method} {path}: {value}");
    }
    let (status, value) =
        call(&env, "POST", "/admin/keys", &admin, Some(json!({"tenant": "acme", "role": "tenant_admin"}))).await;
    assert_eq!((status, value["error"]["code"].as_str()), (403, Some("root_only")));
    let (_, audit) = call(&env, "GET", "/admin/audit", &admin, None).await;
    let seen: Vec<(&str, &str)> = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["key_id"].as_str().unwrap(), e["actor"].as_str().unwrap()))
        .collect();
    assert_eq!(seen, [("acme:acme-own", "acme-admin"), ("acme-admin", "root")], "{audit}");
    // Revoking the tenant admin ends its access.
    assert_eq!(call(&env, "POST", "/admin/keys/acme-admin/revoke", ADMIN, None).await.0, 200);
    assert_eq!(call(&env, "GET", "/admin/keys", &admin, None).await.0, 401);
    env.shutdown().await;
}

/// A gateway whose state the test keeps (to reload it), on an embedded job store.
async fn reloadable(sim: &sluice_sim::SimHandle, policy: &str) -> (sluice_server::AppState, String, tempfile::TempDir) {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(sim, "", policy);
    let clock = Arc::new(sluice_quota::SystemClock::new());
    let jobs = sluice_jobs::EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
    let store = Arc::new(sluice_quota::MemoryStore::new(clock));
    let state = sluice_server::AppState::build(&config, store)
        .unwrap()
        .with_jobs(Arc::new(jobs), &config)
        .with_surface(sluice_admin::surface(&config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(sluice_server::serve(listener, state.clone(), std::future::pending()));
    (state, url, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_keys_follow_a_reload_of_the_file() {
    let sim = sluice_sim::SimProvider::start(sim()).await.unwrap();
    let (state, url, _dir) = reloadable(&sim, &policy()).await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| http.post(format!("{url}{path}")).bearer_auth(ADMIN).json(&body).send();
    let created: Value =
        post("/admin/keys", json!({"tenant": "acme", "team": "search"})).await.unwrap().json().await.unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    let models = || http.get(format!("{url}/v1/models")).bearer_auth(&secret).send();
    assert_eq!(models().await.unwrap().status().as_u16(), 200);
    // The same file again: the key keeps working on the new gateway.
    state.reload(&common::config(&sim, "", &policy())).unwrap();
    assert_eq!(models().await.unwrap().status().as_u16(), 200);
    // A file without the key's team: the key stops; with it again, it works again.
    let without_team = policy().replace("[[tenants.teams]]\nname = \"search\"\n", "");
    state.reload(&common::config(&sim, "", &without_team)).unwrap();
    assert_eq!(models().await.unwrap().status().as_u16(), 401);
    state.reload(&common::config(&sim, "", &policy())).unwrap();
    assert_eq!(models().await.unwrap().status().as_u16(), 200);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_created_at_run_time_takes_keys_and_holds_its_limits() {
    let env = start_jobs(sim(), &policy()).await;
    let tenant = json!({"name": "initech", "weight": 2, "limits": {"rpm": 1}, "teams": {"ops": {"rpm": 100}}});
    let (status, created) = call(&env, "POST", "/admin/tenants", ADMIN, Some(tenant.clone())).await;
    assert_eq!((status, created["source"].as_str()), (201, Some("runtime")), "{created}");
    let (secret, key) = create(&env, ADMIN, json!({"tenant": "initech", "team": "ops"})).await;
    assert_eq!(key["team"], "ops");
    assert_eq!(chat(&env, &secret, "fast").await, 200);
    let body = json!({"model": "fast", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
    let (status, refused) = call(&env, "POST", "/v1/chat/completions", &secret, Some(body)).await;
    assert_eq!((status, refused["error"]["scope"].as_str()), (429, Some("tenant")), "the tenant's rpm = 1: {refused}");
    // Raised at run time: the next request passes.
    let (status, _) =
        call(&env, "PATCH", "/admin/tenants/initech", ADMIN, Some(json!({"limits": {"rpm": 6000}}))).await;
    assert_eq!(status, 200);
    assert_eq!(chat(&env, &secret, "fast").await, 200);
    for (method, path, body, want, code) in [
        ("POST", "/admin/tenants", tenant.clone(), 409, "tenant_name_taken"),
        ("POST", "/admin/tenants", json!({"name": "acme"}), 409, "tenant_name_taken"),
        ("PATCH", "/admin/tenants/acme", json!({"weight": 3}), 403, "config_tenant_read_only"),
        ("PATCH", "/admin/tenants/ghost", json!({"weight": 3}), 404, "tenant_not_found"),
        ("PATCH", "/admin/tenants/initech", json!({"weight": 0}), 400, "invalid_value"),
        ("PATCH", "/admin/tenants/initech", json!({"teams": {"ops": {"rpm": "x"}}}), 400, "invalid_value"),
        ("POST", "/admin/tenants", json!({"name": "x", "colour": 1}), 400, "invalid_value"),
    ] {
        let (status, value) = call(&env, method, path, ADMIN, Some(body.clone())).await;
        assert_eq!((status, value["error"]["code"].as_str()), (want, Some(code)), "{method} {path} {body}: {value}");
    }
    let (_, listed) = call(&env, "GET", "/admin/tenants", ADMIN, None).await;
    let names: Vec<(&str, &str)> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["source"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("acme", "config"), ("globex", "config"), ("initech", "runtime")]);
    let (_, audit) = call(&env, "GET", "/admin/audit", ADMIN, None).await;
    let first = &audit["data"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((first["action"].as_str(), first["key_id"].is_null()), (Some("tenant.create"), true), "{audit}");
    // A tenant admin of initech manages its keys, but not tenants.
    let (admin, _) = create(&env, ADMIN, json!({"tenant": "initech", "role": "tenant_admin"})).await;
    assert_eq!(call(&env, "GET", "/admin/tenants", &admin, None).await.0, 404);
    assert_eq!(call(&env, "POST", "/admin/keys", &admin, Some(json!({"tenant": "initech"}))).await.0, 201);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_key_keeps_its_tenants_regions_and_only_the_root_admin_narrows_them() {
    let sim = sluice_sim::SimProvider::start(sim()).await.unwrap();
    let placed = policy()
        .replace("model = \"gpt-4o-mini\"\n", "model = \"gpt-4o-mini\"\nregion = \"eu-west\"\nlabels = [\"gdpr\"]\n")
        .replace("name = \"acme\"\n", "name = \"acme\"\nregions = [\"eu-west\"]\n");
    let (state, url, _dir) = reloadable(&sim, &placed).await;
    let http = reqwest::Client::new();
    let send = |method: &str, path: &str, by: &str, body: Value| {
        http.request(method.parse().unwrap(), format!("{url}{path}")).bearer_auth(by).json(&body).send()
    };
    let post = |path: &str, by: &str, body: Value| send("POST", path, by, body);
    let caller = |id: &str| state.current().services.runtime_keys.caller_by_id(id, u64::MAX / 2).unwrap();

    // Without constraints of its own, the key has its tenant's; with labels, both.
    let plain = post("/admin/keys", ADMIN, json!({"id": "eu-1", "tenant": "acme"})).await.unwrap();
    assert_eq!(plain.status().as_u16(), 201);
    assert_eq!(caller("eu-1").allowed.to_string(), "regions eu-west");
    let labelled = post("/admin/keys", ADMIN, json!({"id": "eu-2", "tenant": "acme", "labels": ["gdpr"]})).await;
    let labelled: Value = labelled.unwrap().json().await.unwrap();
    assert_eq!(labelled["key"]["labels"], json!(["gdpr"]), "{labelled}");
    let route = &state.current().deployments[0];
    assert_eq!((route.region.as_deref(), route.labels.len()), (Some("eu-west"), 1));
    let allowed = caller("eu-2").allowed;
    assert_eq!(allowed.to_string(), "regions eu-west; labels gdpr");
    assert!(allowed.admits(route.region.as_deref(), &route.labels));
    assert!(!allowed.admits(Some("us-east"), &route.labels));

    // Regions no deployment has, outside the tenant's, or an empty list: refused, naming the field.
    for (body, words) in [
        (json!({"tenant": "globex", "regions": ["us-east"]}), "no deployment has the region `us-east`"),
        (json!({"tenant": "acme", "regions": []}), "an empty list admits no deployment"),
        (json!({"tenant": "acme", "labels": ["gdpr", "gdpr"]}), "listed twice"),
    ] {
        let answer = post("/admin/keys", ADMIN, body.clone()).await.unwrap();
        let status = answer.status().as_u16();
        let value: Value = answer.json().await.unwrap();
        assert_eq!(status, 400, "{body}: {value}");
        assert!(value["error"]["message"].as_str().unwrap().contains(words), "{body}: {value}");
    }

    // A tenant admin may not set them, on a new key or an existing one.
    let admin: Value =
        post("/admin/keys", ADMIN, json!({"id": "acme-admin", "tenant": "acme", "role": "tenant_admin"}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let admin = admin["secret"].as_str().unwrap().to_owned();
    let answer = post("/admin/keys", &admin, json!({"tenant": "acme", "labels": ["gdpr"]})).await.unwrap();
    assert_eq!(answer.status().as_u16(), 403);
    let answer = send("PATCH", "/admin/keys/eu-2", &admin, json!({"labels": null})).await.unwrap();
    assert_eq!(answer.status().as_u16(), 403);
    assert_eq!(caller("eu-2").allowed.to_string(), "regions eu-west; labels gdpr", "unchanged");
    // The root admin may clear them: the tenant's regions still hold.
    let answer = send("PATCH", "/admin/keys/eu-2", ADMIN, json!({"labels": null})).await.unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    assert_eq!(caller("eu-2").allowed.to_string(), "regions eu-west");
    sim.shutdown().await;
}
