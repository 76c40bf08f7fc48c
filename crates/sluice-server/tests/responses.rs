//! `POST /v1/responses` through the gateway against the strict simulated provider: served
//! and settled plain and streamed, validated, translated for Anthropic deployments, and
//! admitted on the same buckets as chat (mixed traffic never makes the provider 429).
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Deadline, Env, KEY, chat, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};

fn sim(rpm: u64, tpm: u64, tokens: u64) -> SimConfig {
    let limits = Limits { rpm: Some(rpm), tpm: Some(tpm), ..Limits::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens },
        ..ModelConfig::openai("gpt-4o-mini").with_limits(limits)
    };
    let claude = ModelConfig { shape: sluice_sim::config::Shape::Anthropic, ..ModelConfig::openai("claude-x") };
    SimConfig { models: vec![model, claude], ..SimConfig::default() }
}

fn policy(limits: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "sim-mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ {limits} }}

[[deployments]]
name = "sim-claude"
provider = "sim-anthropic"
model = "claude-x"

[[models]]
name = "fast"
deployment = "sim-mini"
default_max_tokens = 256

[[models]]
name = "claude"
deployment = "sim-claude"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-key"
tenant = "acme"
sha256 = "{}"
"#,
        sha(KEY)
    )
}

fn responses(model: &str, words: usize, max_output_tokens: u64) -> Value {
    let input = "lorem ipsum ".repeat(words / 2);
    json!({"model": model, "instructions": "Be brief.", "input": input, "max_output_tokens": max_output_tokens})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_served_with_the_providers_usage_plain_and_streamed() {
    let env = start(sim(1_000, 1_000_000, 20), &policy("rpm = 1000, tpm = 1000000")).await;
    let (status, _, body) = env.post("/v1/responses", KEY, &responses("fast", 40, 100)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "response");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["usage"]["output_tokens"], 20);
    assert!(body["usage"]["input_tokens"].as_u64().unwrap() > 40);
    let mut streamed = responses("fast", 40, 100);
    streamed["stream"] = true.into();
    let response = env
        .http
        .post(format!("{}/v1/responses", env.gateway.url()))
        .bearer_auth(KEY)
        .json(&streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.starts_with("event: response.created\n"), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: response.completed\n"), "{last}");
    let data: Value = serde_json::from_str(last.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert_eq!(data["response"]["usage"]["output_tokens"], 20);
    assert_eq!(env.sim.stats().rate_limited.total(), 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_by_name() {
    let env = start(sim(1_000, 1_000_000, 20), &policy("rpm = 1000, tpm = 1000000")).await;
    let (status, _, body) = env.post("/v1/responses", KEY, &json!({"model": "fast", "input": []})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["param"], "input");
    assert_eq!(env.sim.stats().requests, 0, "nothing reached the provider");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_deployment_answers_responses_translated_both_ways() {
    let env = start(sim(1_000, 1_000_000, 20), &policy("rpm = 1000, tpm = 1000000")).await;
    let (status, _, body) = env.post("/v1/responses", KEY, &responses("claude", 10, 40)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["object"].as_str(), body["model"].as_str()), (Some("response"), Some("claude")));
    assert!(body["output"][0]["content"][0]["text"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0);
    let mut streamed = responses("claude", 10, 40);
    streamed["stream"] = true.into();
    let url = format!("{}/v1/responses", env.gateway.url());
    let response = env.http.post(url).bearer_auth(KEY).json(&streamed).send().await.unwrap();
    let text = response.text().await.unwrap();
    assert!(text.starts_with("event: response.created\n"), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.starts_with("event: response.completed\n"), "{last}");
    // What only OpenAI keeps is refused before anything is sent, naming the field (the
    // response continued is the tenant's own, from the OpenAI deployment).
    let (status, _, own) = env.post("/v1/responses", KEY, &responses("fast", 10, 40)).await;
    assert_eq!(status, 200, "{own}");
    let mut continued = responses("claude", 10, 40);
    continued["previous_response_id"] = own["id"].clone();
    let requests = env.sim.stats().requests;
    let (status, _, refused) = env.post("/v1/responses", KEY, &continued).await;
    assert_eq!((status, &refused["error"]["param"]), (400, &json!("previous_response_id")), "{refused}");
    assert_eq!(env.sim.stats().requests, requests);
    env.shutdown().await;
}

/// Posts `body` to `path` until `deadline`, waiting out the gateway's own refusals;
/// returns (statuses the provider answered, refusals the gateway waited out).
async fn drive(env: Arc<Env>, path: &'static str, body: Value, deadline: Arc<Deadline>) -> (Vec<u16>, u64) {
    let mut answered = Vec::new();
    let mut waited = 0;
    while !deadline.passed() {
        let (status, headers, value) = env.post(path, KEY, &body).await;
        if status == 429 && value["error"]["gateway_decision"] == "rejected_before_send" {
            waited += 1;
            let wait: u64 = headers["retry-after-ms"].to_str().unwrap().parse().unwrap();
            if !deadline.sleep(Duration::from_millis(wait)).await {
                break;
            }
            continue;
        }
        answered.push(status);
    }
    (answered, waited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_and_responses_share_the_deployments_buckets() {
    // 300,000 TPM = 5,000 tokens/s; each call ~1,000 input + 200 reserved: far more demand
    // than the limit from either endpoint, so the shared buckets decide who goes.
    let env = Arc::new(start(sim(100_000, 300_000, 200), &policy("rpm = 100000, tpm = 300000")).await);
    let deadline = Arc::new(Deadline::after(Duration::from_secs(5)));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (path, body) = if i % 2 == 0 {
            ("/v1/chat/completions", chat("fast", 1_000, 200))
        } else {
            ("/v1/responses", responses("fast", 1_000, 200))
        };
        tasks.push((path, tokio::spawn(drive(Arc::clone(&env), path, body, Arc::clone(&deadline)))));
    }
    let mut waited = 0;
    for (path, task) in tasks {
        let (answered, held) = task.await.unwrap();
        assert!(!answered.is_empty(), "{path} got through");
        assert!(answered.iter().all(|s| *s == 200), "{path}: {answered:?}");
        waited += held;
    }
    // The load exceeded the limit: the gateway held requests back (queued or refused).
    let metrics = env.metrics().await;
    let queued: f64 = metrics
        .lines()
        .filter(|line| line.starts_with("sluice_queue_wait_seconds_sum"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(waited > 0 || queued > 0.0, "the gateway never had to hold a request back");
    assert_eq!(env.sim.stats().rate_limited.total(), 0, "the provider never saw more than its limit");
    Arc::into_inner(env).unwrap().shutdown().await;
}

/// The policy with a profile reserving 200,000 tokens for an unknown continued context, on
/// a deployment whose TPM bucket holds 100,000 (such a reservation can never fit), and a
/// second tenant.
fn continuation_policy() -> String {
    let other = format!(
        "\n[[tenants]]\nname = \"globex\"\n\n[[keys]]\nid = \"globex-key\"\ntenant = \"globex\"\nsha256 = \"{}\"\n",
        sha(OTHER_KEY)
    );
    policy("rpm = 1000, tpm = 100000")
        .replace("default_max_tokens = 256", "default_max_tokens = 256\ncontext_reserve_tokens = 200000")
        + &other
}

const OTHER_KEY: &str = "sk-test-other-tenant";

/// A continuation of `previous` by `key` on `url`: its status and body.
async fn continue_on(http: &reqwest::Client, url: &str, key: &str, previous: &Value, stream: bool) -> (u16, String) {
    let mut body = responses("fast", 10, 50);
    body["previous_response_id"] = previous.clone();
    body["stream"] = stream.into();
    let response = http.post(format!("{url}/v1/responses")).bearer_auth(key).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_response_reserves_the_context_it_continues_or_the_profiles_figure() {
    let env = start(sim(1_000, 1_000_000, 20), &continuation_policy()).await;
    let url = env.gateway.url();
    let (status, _, first) = env.post("/v1/responses", KEY, &responses("fast", 10, 50)).await;
    assert_eq!(status, 200, "{first}");
    // Known: the context it left (~50 tokens) is reserved, not the profile's 200,000.
    let (status, text) = continue_on(&env.http, &url, KEY, &first["id"], false).await;
    assert_eq!(status, 200, "{text}");
    // Streamed, and continued in turn: a stream's response is remembered too.
    let second: Value = serde_json::from_str(&text).unwrap();
    let (status, text) = continue_on(&env.http, &url, KEY, &second["id"], true).await;
    assert_eq!(status, 200, "{text}");
    let created = text.split("\n\n").next().unwrap().lines().nth(1).unwrap().trim_start_matches("data: ");
    let third: Value = serde_json::from_str(created).unwrap();
    let (status, text) = continue_on(&env.http, &url, KEY, &third["response"]["id"], false).await;
    assert_eq!(status, 200, "{text}");
    // A response whose usage is not known yet (a background one still queued): the
    // profile's figure is reserved, which never fits.
    let mut background = responses("fast", 10, 50);
    background["background"] = true.into();
    let (status, _, queued) = env.post("/v1/responses", KEY, &background).await;
    assert_eq!((status, &queued["status"]), (200, &json!("queued")), "{queued}");
    let (status, text) = continue_on(&env.http, &url, KEY, &queued["id"], false).await;
    assert_eq!(status, 400, "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "request_exceeds_limit");
    assert!(body["error"]["estimated_input_tokens"].as_u64().unwrap() > 200_000, "{body}");
    assert_eq!(env.sim.stats().requests, 5);
    env.shutdown().await;
}

/// Tenant `acme` and tenant `globex` (key [`OTHER_KEY`]) on the plain policy.
fn two_tenants() -> String {
    continuation_policy()
        .replace("default_max_tokens = 256\ncontext_reserve_tokens = 200000", "default_max_tokens = 256")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_previous_response_id_is_answered_as_missing_before_any_upstream_call() {
    let env = start(sim(1_000, 1_000_000, 20), &two_tenants()).await;
    let url = env.gateway.url();
    let (status, _, first) = env.post("/v1/responses", KEY, &responses("fast", 200, 50)).await;
    assert_eq!(status, 200, "{first}");
    let requests = env.sim.stats().requests;
    // globex names acme's response, plain and streamed; and an id never relayed: one 404.
    let mut answers = Vec::new();
    for (id, stream) in [(first["id"].clone(), false), (first["id"].clone(), true), (json!("resp_nope"), false)] {
        let (status, text) = continue_on(&env.http, &url, OTHER_KEY, &id, stream).await;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!((status, &body["error"]["code"]), (404, &json!("response_not_found")), "{text}");
        answers.push((body["error"]["type"].clone(), body["error"]["message"].clone(), body["error"]["param"].clone()));
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "another tenant's id answers as a missing one: {answers:?}");
    assert_eq!(env.sim.stats().requests, requests, "nothing was sent upstream");
    // Its input items, and the count of its context, are not globex's either.
    let (status, _) = call(
        &env,
        reqwest::Method::GET,
        &format!("/v1/responses/{}/input_items", first["id"].as_str().unwrap()),
        OTHER_KEY,
    )
    .await;
    assert_eq!(status, 404);
    let mut counted = responses("fast", 10, 50);
    counted["previous_response_id"] = first["id"].clone();
    let (status, _, refused) = env.post("/v1/responses/input_tokens", OTHER_KEY, &counted).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("response_not_found")), "{refused}");
    // acme continues its own.
    let (status, text) = continue_on(&env.http, &url, KEY, &first["id"], false).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(env.sim.stats().requests, requests + 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_on_one_redis_knows_the_context_a_response_left() {
    let redis = sluice_redis::local::LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim = sluice_sim::SimProvider::start(sim(1_000, 1_000_000, 20)).await.unwrap();
    let store = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n", redis.url());
    let config = common::config(&sim, &store, &continuation_policy());
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let quota = sluice_redis::choose::from_config(&config.store, Arc::new(sluice_quota::SystemClock::new()), None);
        gateways.push(sluice_server::Running::start(&config, quota, "127.0.0.1:0".parse().unwrap()).await.unwrap());
    }
    let http = reqwest::Client::new();
    let first = http
        .post(format!("{}/v1/responses", gateways[0].url()))
        .bearer_auth(KEY)
        .json(&responses("fast", 10, 50))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let first: Value = first.json().await.unwrap();
    // The other instance reserves what the first one remembered: served, not refused.
    let (status, text) = continue_on(&http, &gateways[1].url(), KEY, &first["id"], false).await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = continue_on(&http, &gateways[1].url(), OTHER_KEY, &first["id"], false).await;
    assert_eq!(status, 404, "another tenant's continuation is answered as missing: {text}");
    for gateway in gateways {
        gateway.shutdown().await;
    }
    sim.shutdown().await;
}

/// `method` on `path` with `key`: status and JSON body.
async fn call(env: &Env, method: reqwest::Method, path: &str, key: &str) -> (u16, Value) {
    let url = format!("{}{path}", env.gateway.url());
    let response = env.http.request(method, url).bearer_auth(key).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_response_is_read_listed_and_deleted_by_its_tenant_only() {
    let env = start(sim(1_000, 1_000_000, 20), &continuation_policy()).await;
    let (status, _, created) = env.post("/v1/responses", KEY, &responses("fast", 10, 50)).await;
    assert_eq!(status, 200, "{created}");
    let id = created["id"].as_str().unwrap();
    let (status, read) = call(&env, reqwest::Method::GET, &format!("/v1/responses/{id}"), KEY).await;
    assert_eq!((status, &read["id"], &read["status"]), (200, &created["id"], &json!("completed")), "{read}");
    let (status, items) = call(&env, reqwest::Method::GET, &format!("/v1/responses/{id}/input_items"), KEY).await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["role"], "user");
    // Another tenant, and an id sluice never relayed, get the same 404.
    let (status, theirs) = call(&env, reqwest::Method::GET, &format!("/v1/responses/{id}"), OTHER_KEY).await;
    let (unknown_status, unknown) = call(&env, reqwest::Method::GET, "/v1/responses/resp_nope", KEY).await;
    assert_eq!((status, unknown_status), (404, 404));
    assert_eq!(theirs["error"]["code"], "response_not_found");
    assert_eq!(theirs["error"]["message"], unknown["error"]["message"]);
    let (status, _) = call(&env, reqwest::Method::DELETE, &format!("/v1/responses/{id}"), OTHER_KEY).await;
    assert_eq!(status, 404, "another tenant cannot delete it");
    let (status, deleted) = call(&env, reqwest::Method::DELETE, &format!("/v1/responses/{id}"), KEY).await;
    assert_eq!((status, &deleted["deleted"]), (200, &json!(true)), "{deleted}");
    let (status, _) = call(&env, reqwest::Method::GET, &format!("/v1/responses/{id}"), KEY).await;
    assert_eq!(status, 404, "forgotten once deleted");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_responses_are_polled_and_cancelled_as_requests() {
    let policy = continuation_policy()
        .replace("name = \"globex\"", "name = \"globex\"\nlimits = { rpm = 2, burst_seconds = 60 }");
    let env = start(sim(1_000, 1_000_000, 20), &policy).await;
    let mut background = responses("fast", 10, 50);
    background["background"] = true.into();
    let (status, _, queued) = env.post("/v1/responses", KEY, &background).await;
    assert_eq!((status, &queued["status"]), (200, &json!("queued")), "{queued}");
    let id = queued["id"].as_str().unwrap();
    let (status, done) = call(&env, reqwest::Method::GET, &format!("/v1/responses/{id}"), KEY).await;
    assert_eq!((status, &done["status"]), (200, &json!("completed")), "{done}");
    // The poll taught sluice the context it left: its continuation is served, not refused
    // for the profile's 200,000-token figure.
    let (status, text) = continue_on(&env.http, &env.gateway.url(), KEY, &queued["id"], false).await;
    assert_eq!(status, 200, "{text}");
    let (_, _, other) = env.post("/v1/responses", KEY, &background).await;
    let cancel = format!("/v1/responses/{}/cancel", other["id"].as_str().unwrap());
    let (status, cancelled) = call(&env, reqwest::Method::POST, &cancel, KEY).await;
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")), "{cancelled}");
    // Each poll is one request on the caller's limits: globex may make 2 a minute.
    let (_, _, theirs) = env.post("/v1/responses", OTHER_KEY, &background).await;
    let path = format!("/v1/responses/{}", theirs["id"].as_str().unwrap());
    let (status, _) = call(&env, reqwest::Method::GET, &path, OTHER_KEY).await;
    assert_eq!(status, 200);
    let (status, refused) = call(&env, reqwest::Method::GET, &path, OTHER_KEY).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["gateway_decision"], "rejected_before_send");
    assert_eq!(refused["error"]["scope"], "tenant");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_tokens_are_sluices_own_estimate_with_the_continued_context() {
    let env = start(sim(1_000, 1_000_000, 20), &continuation_policy()).await;
    let (status, _, counted) = env.post("/v1/responses/input_tokens", KEY, &responses("fast", 40, 50)).await;
    assert_eq!(status, 200, "{counted}");
    assert_eq!(counted["object"], "response.input_tokens");
    let own = counted["input_tokens"].as_u64().unwrap();
    assert!(own > 40 && own < 200, "{counted}");
    let (status, _, first) = env.post("/v1/responses", KEY, &responses("fast", 10, 50)).await;
    assert_eq!(status, 200, "{first}");
    let left = first["usage"]["input_tokens"].as_u64().unwrap() + first["usage"]["output_tokens"].as_u64().unwrap();
    let mut continued = responses("fast", 40, 50);
    continued["previous_response_id"] = first["id"].clone();
    let (_, _, counted) = env.post("/v1/responses/input_tokens", KEY, &continued).await;
    assert_eq!(counted["input_tokens"].as_u64().unwrap(), own + left, "the context the response left");
    continued["previous_response_id"] = "resp_unknown".into();
    let (status, _, refused) = env.post("/v1/responses/input_tokens", KEY, &continued).await;
    assert_eq!((status, &refused["error"]["code"]), (404, &json!("response_not_found")), "{refused}");
    assert_eq!(env.sim.stats().requests, 1, "counting reached the provider never");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_falls_back_to_an_anthropic_deployment_when_the_primary_is_down() {
    let down = sluice_sim::config::FaultConfig { error_503: 1.0, ..sluice_sim::config::FaultConfig::default() };
    let mut config = sim(1_000, 1_000_000, 20);
    config.models[0].faults = Some(down);
    let policy = policy("rpm = 1000, tpm = 1000000").replace(
        "default_max_tokens = 256\n",
        "default_max_tokens = 256\nfallbacks = [{ deployment = \"sim-claude\", when = [\"provider_5xx\"] }]\n",
    );
    let env = start(config, &policy).await;
    let (status, _, body) = env.post("/v1/responses", KEY, &responses("fast", 10, 40)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["object"].as_str(), body["model"].as_str()), (Some("response"), Some("fast")));
    assert!(body["output"][0]["content"][0]["text"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    let metrics = env.metrics().await;
    assert!(metrics.contains("reason=\"provider_5xx\""), "the answer came from the fallback: {metrics}");
    env.shutdown().await;
}
