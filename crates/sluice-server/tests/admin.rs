//! The admin API over real sockets: every route refuses without the admin key (404 when
//! none is configured), live state carries no secrets, tenant and class pauses hold and
//! release, limit changes apply at once and are validated like the config.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Env, KEY, chat, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

const ADMIN: &str = "sk-admin-test-0123";
const BETA: &str = "sk-test-beta";
const BATCH: &str = "sk-test-batch-key";
const PLANTED: &str = "sk-provider-planted-secret-0000";

/// Every admin route, as (method, path).
const ROUTES: [(&str, &str); 7] = [
    ("GET", "/admin/state"),
    ("POST", "/admin/tenants/acme/pause"),
    ("POST", "/admin/tenants/acme/resume"),
    ("POST", "/admin/classes/batch/pause"),
    ("POST", "/admin/classes/batch/resume"),
    ("PUT", "/admin/limits/key/acme-1"),
    ("POST", "/admin/dashboard/ticket"),
];

fn sim() -> SimConfig {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 8 }, ..ModelConfig::openai("gpt-4o-mini") };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

fn policy(admin: bool) -> String {
    let admin = if admin { format!("[admin]\nkey_sha256 = \"{}\"\n", sha(ADMIN)) } else { String::new() };
    format!(
        r#"
{admin}
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 32

[[classes]]
name = "interactive"
max_wait = "1s"

[[classes]]
name = "batch"
max_wait = "800ms"
priority = 1

[[tenants]]
name = "acme"
limits = {{ rpm = 6000 }}

[[tenants.teams]]
name = "search"

[[tenants]]
name = "beta"

[[keys]]
id = "acme-1"
tenant = "acme"
team = "search"
sha256 = "{key}"
limits = {{ rpm = 600, tpm = 100000 }}

[[keys]]
id = "beta-1"
tenant = "beta"
sha256 = "{beta}"

[[keys]]
id = "beta-batch"
tenant = "beta"
class = "batch"
sha256 = "{batch}"
"#,
        key = sha(KEY),
        beta = sha(BETA),
        batch = sha(BATCH),
    )
}

async fn env() -> Env {
    start(sim(), &policy(true)).await
}

/// [`env`] on tokio's clock: with `#[tokio::test(start_paused = true)]`, a class's max_wait
/// runs out on paused time, not in real seconds.
async fn clocked_env() -> Env {
    common::start_clocked(sim(), &policy(true), common::TokioClock::new()).await
}

async fn admin(env: &Env, method: &str, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
    admin_from(&env.http, env, method, path, key, body).await
}

async fn admin_from(
    http: &reqwest::Client,
    env: &Env,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let url = format!("{}{path}", env.gateway.url());
    let mut request = http.request(method.parse().unwrap(), url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_route_refuses_without_the_admin_key() {
    let env = env().await;
    for (i, (method, path)) in ROUTES.into_iter().enumerate() {
        // Each route from its own address: failures from one address are throttled.
        let peer = std::net::IpAddr::from([127, 0, 1, u8::try_from(i + 1).unwrap()]);
        let http = reqwest::Client::builder().local_address(peer).build().unwrap();
        for key in [None, Some("wrong"), Some(KEY)] {
            let body = (method == "PUT").then(|| json!({"rpm": 1}));
            let (status, value) = admin_from(&http, &env, method, path, key, body).await;
            assert_eq!(status, 401, "{method} {path} with {key:?}: {value}");
            assert_eq!(value["error"]["code"], "invalid_api_key", "{method} {path}");
            assert_eq!(value["error"]["trace_id"].as_str().unwrap().len(), 32);
        }
    }
    // The limits were never changed by the refused PUTs: acme-1 still has its 600 RPM.
    let (status, _, _) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
    assert_eq!(status, 200);
    let (_, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    let key = state["scopes"].as_array().unwrap().iter().find(|s| s["name"] == "acme-1").unwrap();
    assert_eq!(key["limits"][0]["limit"], 600);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_admin_key_configured_the_admin_surface_does_not_exist() {
    let env = start(sim(), &policy(false)).await;
    for (method, path) in ROUTES.iter().copied().chain([("GET", "/dashboard"), ("POST", "/dashboard/login")]) {
        let (status, _) = admin(&env, method, path, Some(ADMIN), None).await;
        assert_eq!(status, 404, "{method} {path}");
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_shows_live_buckets_queues_and_store_but_no_secrets() {
    let env = env().await;
    for _ in 0..5 {
        let (status, _, _) = env.post("/v1/chat/completions", KEY, &chat("fast", 20, 16)).await;
        assert_eq!(status, 200);
    }
    let (status, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    assert_eq!(status, 200);
    let scope = |kind: &str, name: &str| {
        state["scopes"].as_array().unwrap().iter().find(|s| s["kind"] == kind && s["name"] == name).cloned().unwrap()
    };
    for (kind, name) in [("deployment", "mini"), ("model_profile", "fast"), ("tenant", "acme"), ("team", "acme/search")]
    {
        let s = scope(kind, name);
        assert_eq!(s["held"], false, "{kind} {name}");
        assert!(s["in_flight"].is_u64(), "{s}");
    }
    let key = scope("api_key", "acme-1");
    let rpm = key["limits"].as_array().unwrap().iter().find(|l| l["limiter"] == "rpm").unwrap();
    assert_eq!(rpm["limit"], 600);
    assert!(rpm["remaining"].as_u64().unwrap() < rpm["burst"].as_u64().unwrap(), "5 requests were taken: {rpm}");
    assert!(rpm["reset_ms"].as_u64().unwrap() > 0);
    assert_eq!(state["queues"][0]["deployment"], "mini");
    assert_eq!(state["queues"][0]["depth"], 0);
    assert_eq!(state["store"]["degraded"], false);
    assert_eq!(state["store"]["open_reservations"], 0);
    assert_eq!(state["counters"]["requests"]["2xx"], 5.0);
    assert!(
        state["counters"]["tokens_reserved"].as_f64().unwrap() >= state["counters"]["tokens_used"].as_f64().unwrap()
    );
    let classes: Vec<&str> = state["classes"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(classes, ["interactive", "batch"]);
    let text = state.to_string();
    for secret in [PLANTED, KEY, ADMIN, &sha(KEY), &sha(ADMIN), &sha(BETA)] {
        assert!(!text.contains(secret), "admin state leaks `{secret}`");
    }
    env.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_paused_tenant_waits_its_max_wait_then_gets_paused_and_resume_releases_at_once() {
    let env = std::sync::Arc::new(clocked_env().await);
    let (status, body) = admin(&env, "POST", "/admin/tenants/acme/pause", Some(ADMIN), None).await;
    assert_eq!((status, &body["paused"]), (200, &json!(true)), "{body}");
    let started = tokio::time::Instant::now();
    let (status, headers, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
    let waited = started.elapsed();
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["limiter"], "paused");
    assert_eq!(body["error"]["scope"], "tenant");
    assert!(headers.contains_key("retry-after"));
    assert!(waited >= Duration::from_millis(900), "held for its class's max_wait (1s), not {waited:?}");
    // Other tenants are not held, and a held tenant holds nobody back.
    for _ in 0..5 {
        assert_eq!(env.post("/v1/chat/completions", BETA, &chat("fast", 4, 8)).await.0, 200);
    }
    let (_, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    let acme = state["scopes"].as_array().unwrap().iter().find(|s| s["name"] == "acme").unwrap().clone();
    assert_eq!(acme["held"], true);

    // A request waiting while paused goes as soon as the tenant is resumed.
    let waiting = {
        let env = std::sync::Arc::clone(&env);
        tokio::spawn(async move { env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await.0 })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let resumed = tokio::time::Instant::now();
    assert_eq!(admin(&env, "POST", "/admin/tenants/acme/resume", Some(ADMIN), None).await.0, 200);
    assert_eq!(waiting.await.unwrap(), 200);
    assert!(resumed.elapsed() < Duration::from_millis(500), "released at once, not after {:?}", resumed.elapsed());
    assert_eq!(env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await.0, 200);
    let metrics = env.metrics().await;
    let paused =
        "sluice_decisions_total{decision=\"rejected\",limiter=\"paused\",scope_kind=\"tenant\",dimension=\"none\"}";
    assert!(metrics.contains(paused), "{metrics}");
    let (status, body) = admin(&env, "POST", "/admin/tenants/nobody/pause", Some(ADMIN), None).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("name")));
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_paused_class_is_held_on_this_instance_and_released_by_resume() {
    let env = std::sync::Arc::new(clocked_env().await);
    let (status, body) = admin(&env, "POST", "/admin/classes/batch/pause", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["scope"], "this instance");
    let started = tokio::time::Instant::now();
    let (status, _, body) = env.post("/v1/chat/completions", BATCH, &chat("fast", 4, 8)).await;
    assert_eq!((status, &body["error"]["limiter"]), (429, &json!("paused")), "{body}");
    assert!(started.elapsed() >= Duration::from_millis(700), "held for batch's max_wait (800ms)");
    // The interactive class of the same tenant still goes.
    assert_eq!(env.post("/v1/chat/completions", BETA, &chat("fast", 4, 8)).await.0, 200);
    let (_, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    assert_eq!(state["classes"][1], json!({"name": "batch", "priority": 1, "paused": true}));

    let waiting = {
        let env = std::sync::Arc::clone(&env);
        tokio::spawn(async move { env.post("/v1/chat/completions", BATCH, &chat("fast", 4, 8)).await.0 })
    };
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(admin(&env, "POST", "/admin/classes/batch/resume", Some(ADMIN), None).await.0, 200);
    assert_eq!(waiting.await.unwrap(), 200);
    assert_eq!(env.post("/v1/chat/completions", BATCH, &chat("fast", 4, 8)).await.0, 200);
    let (status, body) = admin(&env, "POST", "/admin/classes/nightly/pause", Some(ADMIN), None).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("name")));
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_changes_apply_at_once_and_are_validated_like_the_config() {
    let env = env().await;
    let limits = json!({"rpm": 2, "burst_seconds": 1});
    let (status, body) = admin(&env, "PUT", "/admin/limits/key/acme-1", Some(ADMIN), Some(limits)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["limits"][0]["limiter"], "rpm");
    assert_eq!(body["limits"][0]["limit"], 2);
    // The bucket kept its fill fraction (full): one request passes, the next waits 30 s,
    // longer than the class allows, so it is refused at once naming the key's rpm.
    assert_eq!(env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await.0, 200);
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
    assert_eq!((status, &body["error"]["limiter"], &body["error"]["scope"]), (429, &json!("rpm"), &json!("api_key")));
    // Teams are named tenant/team (URL-encoded).
    let (status, body) =
        admin(&env, "PUT", "/admin/limits/team/acme%2Fsearch", Some(ADMIN), Some(json!({"tpm": 5000}))).await;
    assert_eq!(status, 200);
    assert_eq!(body["limits"][0]["burst"], 5000, "a caller scope passes its whole minute at once: {body}");
    let cases = [
        ("/admin/limits/key/acme-1", json!({"rpm": 0}), "limits.rpm"),
        ("/admin/limits/key/acme-1", json!({"rpx": 5}), "limits.rpx"),
        ("/admin/limits/key/acme-1", json!({"rpm": "many"}), "limits.rpm"),
        ("/admin/limits/tenant/acme", json!({"burst_seconds": -2.0}), "limits.burst_seconds"),
        ("/admin/limits/deployment/acme", json!({"rpm": 5}), "name"),
        ("/admin/limits/region/acme", json!({"rpm": 5}), "kind"),
        ("/admin/limits/model/fast", json!([1, 2]), "limits"),
    ];
    for (path, body, param) in cases {
        let (status, value) = admin(&env, "PUT", path, Some(ADMIN), Some(body.clone())).await;
        assert_eq!(status, 400, "{path} {body}: {value}");
        assert_eq!(value["error"]["param"], param, "{path} {body}: {value}");
    }
    // Raising the deployment's limits live works too, and the state shows them.
    let raised = json!({"rpm": 20000, "tpm": 20000000});
    assert_eq!(admin(&env, "PUT", "/admin/limits/deployment/mini", Some(ADMIN), Some(raised)).await.0, 200);
    let (_, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    let mini = state["scopes"].as_array().unwrap().iter().find(|s| s["name"] == "mini").unwrap().clone();
    assert_eq!(mini["limits"][0]["limit"], 20000);
    assert_eq!(mini["limits"][0]["burst"], 333, "a deployment, one second of its rate: {mini}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_needs_a_login_or_a_one_time_ticket_and_never_the_key_in_a_url() {
    let env = env().await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let url = env.gateway.url();
    // Without a session: the login form, no data.
    let page = http.get(format!("{url}/dashboard")).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("name=\"key\"") && !page.contains("/admin/state"));
    // A wrong key is refused; the right one sets an HttpOnly session cookie.
    let wrong = http.post(format!("{url}/dashboard/login")).body("key=nope").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    let login = http
        .post(format!("{url}/dashboard/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={ADMIN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    assert_eq!(login.headers()["location"], "/dashboard");
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains(ADMIN));
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = http.get(format!("{url}/dashboard")).header("cookie", &session).send().await.unwrap();
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    let page = page.text().await.unwrap();
    assert!(page.contains("/admin/state") && page.contains("<canvas"));
    // The session reads state but changes nothing.
    let state = http.get(format!("{url}/admin/state")).header("cookie", &session).send().await.unwrap();
    assert_eq!(state.status(), 200);
    let pause = http.post(format!("{url}/admin/tenants/acme/pause")).header("cookie", &session).send().await.unwrap();
    assert_eq!(pause.status(), 401);
    // A ticket opens a session once.
    let (status, ticket) = admin(&env, "POST", "/admin/dashboard/ticket", Some(ADMIN), None).await;
    assert_eq!(status, 200);
    let ticket_url = format!("{url}{}", ticket["url"].as_str().unwrap());
    let first = http.get(&ticket_url).send().await.unwrap();
    assert_eq!(first.status(), 303);
    assert!(first.headers()["set-cookie"].to_str().unwrap().starts_with("sluice_admin="));
    assert_eq!(http.get(&ticket_url).send().await.unwrap().status(), 401);
    env.shutdown().await;
}

/// `PUT /admin/limits/...` with `body`, raw.
async fn put_raw(env: &Env, path: &str, body: Vec<u8>) -> (u16, Value) {
    let url = format!("{}{path}", env.gateway.url());
    let response = env.http.put(url).bearer_auth(ADMIN).body(body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_dashboard_bodies_are_capped_at_max_body_bytes_not_two_mib() {
    // The default `max_body_bytes` is 4 MiB: 3 MiB passes (the framework's default cap was
    // 2 MiB), 5 MiB is refused with the gateway's own 413.
    let env = env().await;
    let padded = |prefix: &str, mib: usize| {
        let mut body = prefix.as_bytes().to_vec();
        body.resize(body.len() + mib * 1024 * 1024, b' ');
        body
    };
    let (status, body) = put_raw(&env, "/admin/limits/key/acme-1", padded(r#"{"rpm": 700}"#, 3)).await;
    assert_eq!((status, &body["limits"][0]["limit"]), (200, &json!(700)), "{body}");
    let (status, body) = put_raw(&env, "/admin/limits/key/acme-1", padded(r#"{"rpm": 800}"#, 5)).await;
    assert_eq!((status, &body["error"]["code"]), (413, &json!("body_too_large")), "{body}");

    let login = |body: Vec<u8>| {
        let request = env.http.post(format!("{}/dashboard/login", env.gateway.url()));
        request.header("content-type", "application/x-www-form-urlencoded").body(body).send()
    };
    let status = login(padded("key=wrong&pad=", 3)).await.unwrap().status().as_u16();
    assert_eq!(status, 401, "read whole and judged: not the admin key");
    let status = login(padded("key=wrong&pad=", 5)).await.unwrap().status().as_u16();
    assert_eq!(status, 413);
    env.shutdown().await;
}

const GAMMA: &str = "sk-test-gamma";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_reload_the_admin_api_and_the_budget_headers_follow_the_new_policy() {
    let env = env().await;
    assert_eq!(admin(&env, "POST", "/admin/classes/batch/pause", Some(ADMIN), None).await.0, 200);
    // The new file adds a tenant with a key, a class, and a second deployment.
    let added = format!(
        "[[tenants]]\nname = \"gamma\"\n\n[[keys]]\nid = \"gamma-1\"\ntenant = \"gamma\"\nlimits = {{ rpm = 42 }}\n\
         sha256 = \"{}\"\n\n[[classes]]\nname = \"bulk\"\npriority = 2\n\n\
         [[deployments]]\nname = \"mini-2\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\n\
         [[models]]\nname = \"fast-2\"\ndeployment = \"mini-2\"\ndefault_max_tokens = 32\n",
        sha(GAMMA)
    );
    let config = common::config(&env.sim, "", &format!("{}\n{added}", policy(true)));
    env.gateway.state().reload(&config).unwrap();

    // The new key's responses carry its own budget.
    let (status, headers, body) = env.post("/v1/chat/completions", GAMMA, &chat("fast", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers.get("x-ratelimit-limit-requests").map(|v| v.to_str().unwrap()), Some("42"));
    // The admin API knows the new tenant, key, class and deployment.
    for path in ["/admin/tenants/gamma/pause", "/admin/tenants/gamma/resume", "/admin/classes/bulk/pause"] {
        let (status, body) = admin(&env, "POST", path, Some(ADMIN), None).await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let (status, body) = admin(&env, "PUT", "/admin/limits/key/gamma-1", Some(ADMIN), Some(json!({"rpm": 43}))).await;
    assert_eq!(status, 200, "{body}");
    let (_, state) = admin(&env, "GET", "/admin/state", Some(ADMIN), None).await;
    let names: Vec<&str> =
        state["queues"].as_array().unwrap().iter().map(|q| q["deployment"].as_str().unwrap()).collect();
    assert_eq!(names, ["mini", "mini-2"]);
    assert_eq!(state["classes"][2], json!({"name": "bulk", "priority": 2, "paused": true}));
    // The class paused before the reload stays paused on the new deployment's queue too.
    let (status, _, body) = env.post("/v1/chat/completions", BATCH, &chat("fast-2", 4, 8)).await;
    assert_eq!((status, &body["error"]["limiter"]), (429, &json!("paused")), "{body}");
    env.shutdown().await;
}
