//! Money budgets across instances: three `sluice serve` processes on one Redis, a tenant
//! with a daily budget that holds exactly `K` requests at the deployment's price, and more
//! requests than that at once, spread over the three. Everything is real: child
//! processes, a `redis-server`, the simulated provider, loopback HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{KEY, config, gateways, redis_store};
use serde_json::{Value, json};
use sluice_redis::local::LocalRedis;
use sluice_sim::{SimConfig, SimProvider};

/// The admin key (its hash in the config).
const ADMIN_KEY: &str = "sk-admin-budget-test";
/// Requests the budget holds.
const K: usize = 5;
/// Requests sent, all at once, round-robin over the instances.
const SENT: usize = 15;
/// Output tokens per request: `max_tokens`, and what the simulator generates, so the
/// estimate reserved at admission is exactly what settles.
const OUTPUT: u64 = 8;
/// Price per 1 M output tokens (input is free): 8 tokens cost 0.008.
const OUTPUT_PRICE: f64 = 1_000.0;

fn unix_millis() -> u128 {
    #[expect(clippy::disallowed_methods, reason = "the test compares with the wall clock the gateways read")]
    let now = SystemTime::now();
    now.duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// The next 00:00 UTC after `millis`, in ms since the epoch.
fn next_utc_midnight(millis: u128) -> u128 {
    (millis / 86_400_000 + 1) * 86_400_000
}

/// A simulated provider that generates exactly [`OUTPUT`] tokens per answer.
async fn priced_sim() -> sluice_sim::SimHandle {
    let sim_text = format!(
        "seed = 7\n\n[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\n\
         completion = {{ dist = \"fixed\", tokens = {OUTPUT} }}\n"
    );
    SimProvider::start(SimConfig::from_toml_str(&sim_text).unwrap()).await.unwrap()
}

/// The gateways' config: the deployment priced at [`OUTPUT_PRICE`] per 1 M output tokens
/// (input free), the tenant `acme` with a daily `budget`.
fn priced_config(sim_url: &str, store: &str, budget: f64) -> String {
    config(sim_url, store, "rpm = 100000", "30s")
        .replace(
            "model = \"gpt-4o-mini\"\n",
            &format!("model = \"gpt-4o-mini\"\nprice = {{ input = 0.0, output = {OUTPUT_PRICE:.1} }}\n"),
        )
        .replace(
            "[[tenants]]\nname = \"acme\"\n",
            &format!("[[tenants]]\nname = \"acme\"\nlimits = {{ budget = {{ day = {budget} }} }}\n"),
        )
}

async fn send(client: reqwest::Client, url: String) -> (u16, Option<String>, Value) {
    let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": "hello" }], "max_tokens": OUTPUT });
    let response = client.post(format!("{url}/v1/chat/completions")).bearer_auth(KEY).json(&body).send().await.unwrap();
    let status = response.status().as_u16();
    let retry = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_redis_admit_exactly_what_a_daily_budget_holds() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim = priced_sim().await;
    let per_request = OUTPUT as f64 * OUTPUT_PRICE / 1e6;
    let budget = per_request * K as f64;
    let store = redis_store(&redis.url(), "budget", "fail_closed");
    let text = priced_config(&sim.url(), &store, budget);
    let admin = format!("\n[admin]\nkey_sha256 = \"{}\"\n", sluice_bench::harness::key_hash(ADMIN_KEY));
    let instances = gateways(3, &(text + &admin));
    let client = reqwest::Client::new();
    let before = unix_millis();
    let calls: Vec<_> =
        (0..SENT).map(|i| tokio::spawn(send(client.clone(), instances[i % instances.len()].url.clone()))).collect();
    let mut answers = Vec::with_capacity(SENT);
    for call in calls {
        answers.push(call.await.unwrap());
    }
    let after = unix_millis();

    let admitted = answers.iter().filter(|(status, _, _)| *status == 200).count();
    assert_eq!(admitted, K, "exactly what the budget holds, across the instances: {answers:?}");
    assert_eq!(sim.stats().requests, K as u64, "the provider saw only those");
    // They settled at what was reserved (the provider generated the whole reservation):
    // nothing came back, on any instance.
    for instance in &instances {
        let (status, _, body) = send(client.clone(), instance.url.clone()).await;
        assert_eq!((status, &body["error"]["limiter"]), (429, &json!("budget")), "{body}");
    }
    let (midnight, latest) = (next_utc_midnight(before), next_utc_midnight(after));
    for (status, retry, body) in answers.iter().filter(|(status, _, _)| *status != 200) {
        assert_eq!(*status, 429, "{body}");
        let error = &body["error"];
        assert_eq!(error["limiter"], "budget", "{body}");
        assert_eq!(error["scope"], "tenant", "{body}");
        // The reset is the next UTC midnight: now + the wait, to the second.
        let wait = u128::from(error["retry_after_ms"].as_u64().unwrap());
        let reset = (before..=after)
            .map(|t| t + wait)
            .find(|at| at.abs_diff(midnight) <= 2_000 || at.abs_diff(latest) <= 2_000);
        assert!(reset.is_some(), "a wait of {wait} ms from {before}..{after} is not the next midnight {midnight}");
        let retry_secs: u128 = retry.as_deref().unwrap().parse().unwrap();
        assert!(retry_secs.abs_diff(wait.div_ceil(1_000)) <= 1, "retry-after {retry_secs} s for {wait} ms");
    }
    // A request whose estimate is more than the whole budget never fits: 400, not 429.
    let body = json!({ "model": "chat", "messages": [{ "role": "user", "content": "hello" }], "max_tokens": 100 });
    let response = client
        .post(format!("{}/v1/chat/completions", instances[0].url))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(
        (&error["error"]["code"], &error["error"]["limiter"]),
        (&json!("request_exceeds_budget"), &json!("budget"))
    );
    // Every instance shows the budget spent: in /admin/state and in the gauge.
    for instance in &instances {
        let state: Value = client
            .get(format!("{}/admin/state", instance.admin_url))
            .bearer_auth(ADMIN_KEY)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let acme = state["scopes"].as_array().unwrap().iter().find(|s| s["kind"] == "tenant" && s["name"] == "acme");
        let shown = &acme.unwrap()["budgets"][0];
        assert_eq!(shown["period"], "day", "{shown}");
        assert!((shown["used"].as_f64().unwrap() - budget).abs() < 1e-9, "{shown}");
        assert!((shown["limit"].as_f64().unwrap() - budget).abs() < 1e-9, "{shown}");
        let metrics = client.get(format!("{}/metrics", instance.admin_url)).send().await.unwrap().text().await.unwrap();
        let gauge = "sluice_budget_used_ratio{scope_kind=\"tenant\",scope=\"acme\",period=\"day\"} 1";
        assert!(metrics.lines().any(|l| l.starts_with(gauge)), "no `{gauge}` in the metrics");
    }
    drop(instances);
}

/// A webhook receiver on 127.0.0.1: every JSON body POSTed to `/hook` arrives on the channel.
async fn webhook() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let receive = move |axum::Json(body): axum::Json<Value>| {
        let _ = tx.send(body);
        std::future::ready("ok")
    };
    let app = axum::Router::new().route("/hook", axum::routing::post(receive));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

/// The next warning the receiver got, within 20 s.
async fn next(warnings: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    let waiting = tokio::time::timeout(std::time::Duration::from_secs(20), warnings.recv());
    waiting.await.expect("a warning within 20 s").expect("the receiver is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soft_budget_warns_once_per_threshold_through_the_webhook_without_refusing() {
    let sim = priced_sim().await;
    let per_request = OUTPUT as f64 * OUTPUT_PRICE / 1e6;
    // Four requests' worth: the second reaches 50 %, the fourth 100 %.
    let budget = per_request * 4.0;
    let (hook, mut warnings) = webhook().await;
    let soft = format!("[budgets]\nwarn_at = [0.5, 0.75, 1.0]\nwebhook_url = \"{hook}\"\ncheck_interval = \"100ms\"\n");
    let text = priced_config(&sim.url(), "[store]\nkind = \"memory\"", budget);
    let instances = gateways(1, &(text + "\n" + &soft));
    let client = reqwest::Client::new();
    let (url, admin_url) = (instances[0].url.clone(), instances[0].admin_url.clone());
    for _ in 0..2 {
        assert_eq!(send(client.clone(), url.clone()).await.0, 200);
    }
    let first = next(&mut warnings).await;
    assert_eq!(
        (&first["scope_kind"], &first["scope"], &first["period"]),
        (&json!("tenant"), &json!("acme"), &json!("day"))
    );
    assert_eq!(first["threshold"], 0.5, "{first}");
    assert!((first["used"].as_f64().unwrap() - 2.0 * per_request).abs() < 1e-9, "{first}");
    assert_eq!(first["currency"], "USD", "{first}");
    // Two more: 100 % spent. Both higher thresholds warn, each once, in order; the soft
    // budget refused nothing (the hard budget is what refuses the fifth).
    for _ in 0..2 {
        assert_eq!(send(client.clone(), url.clone()).await.0, 200);
    }
    let (second, third) = (next(&mut warnings).await, next(&mut warnings).await);
    assert_eq!((second["threshold"].as_f64(), third["threshold"].as_f64()), (Some(0.75), Some(1.0)));
    assert_ne!(first["id"], third["id"]);
    let (status, _, body) = send(client.clone(), url.clone()).await;
    assert_eq!((status, &body["error"]["limiter"]), (429, &json!("budget")), "{body}");
    // Several more checks pass: no threshold warns twice.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(warnings.try_recv().is_err(), "a threshold warned twice");
    let metrics = client.get(format!("{admin_url}/metrics")).send().await.unwrap().text().await.unwrap();
    for threshold in ["0.5", "0.75", "1"] {
        let line = format!(
            "sluice_budget_warnings_total{{scope_kind=\"tenant\",scope=\"acme\",period=\"day\",threshold=\"{threshold}\"}} 1"
        );
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in the metrics");
    }
    assert!(metrics.lines().any(|l| l == "sluice_budget_webhook_failures_total 0"), "a webhook failure was counted");
    drop(instances);
}
