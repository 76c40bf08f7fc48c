//! `Idempotency-Key` on the live endpoints over HTTP: a key reused for another request is
//! refused, a long key is refused, a repeat of a stream never reaches the provider again,
//! a repeat sent to another instance sharing Redis is answered from the first one's
//! record, and client-chosen task names create no metric series.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;

use common::{Env, KEY, chat, sha, start_with};
use serde_json::Value;
use sluice_quota::SystemClock;
use sluice_redis::local::LocalRedis;
use sluice_server::Running;
use sluice_sim::config::{ModelConfig, SimConfig};

fn policy() -> String {
    format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 10000 }}\n\n\
         [[deployments]]\nname = \"small\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\ndegrade_to = {{ deployment = \"small\", tasks = [\"summarize\"] }}\n\n\
         [[tenants]]\nname = \"t\"\n\n[[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sha(KEY)
    )
}

fn sim() -> SimConfig {
    SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() }
}

/// Posts `body` (raw JSON text) to `url` with `key` as the `Idempotency-Key`.
async fn send(http: &reqwest::Client, url: &str, key: &str, body: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let response = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("idempotency-key", key)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

fn code(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_reused_for_another_request_is_refused_and_a_reordered_one_replayed() {
    let env = start_with(sim(), "", &policy()).await;
    let url = env.gateway.url();
    let first = r#"{"model":"fast","messages":[{"role":"user","content":"one"}],"max_tokens":8}"#;
    let (status, _, answer) = send(&env.http, &url, "op-1", first).await;
    assert_eq!(status, 200, "{answer}");
    // The same request, keys in another order and other whitespace: replayed.
    let reordered = r#"{ "max_tokens": 8, "messages": [{"content": "one", "role": "user"}], "model": "fast" }"#;
    let (status, headers, replayed) = send(&env.http, &url, "op-1", reordered).await;
    assert_eq!((status, headers.get("x-sluice-idempotent-replay").is_some()), (200, true));
    assert_eq!(replayed, answer);
    // Another request under the same key: 422, nothing sent.
    let other = r#"{"model":"fast","messages":[{"role":"user","content":"two"}],"max_tokens":8}"#;
    let (status, _, refused) = send(&env.http, &url, "op-1", other).await;
    assert_eq!((status, code(&refused)), (422, "idempotency_key_reused".to_owned()), "{refused}");
    // A key longer than 255 characters is refused, as `/v1/jobs` refuses it.
    let (status, _, refused) = send(&env.http, &url, &"k".repeat(256), first).await;
    assert_eq!((status, code(&refused)), (400, "invalid_value".to_owned()), "{refused}");
    assert!(refused.contains("Idempotency-Key"), "{refused}");
    assert_eq!(env.sim.stats().requests, 1, "only the first reached the provider");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_of_a_stream_gets_a_409_and_never_reaches_the_provider() {
    let env = start_with(sim(), "", &policy()).await;
    let url = env.gateway.url();
    let stream = r#"{"model":"fast","stream":true,"messages":[{"role":"user","content":"s"}],"max_tokens":8}"#;
    let (status, _, events) = send(&env.http, &url, "op-stream", stream).await;
    assert_eq!(status, 200, "{events}");
    assert!(events.contains("data: [DONE]"), "{events}");
    for _ in 0..2 {
        let (status, _, refused) = send(&env.http, &url, "op-stream", stream).await;
        assert_eq!((status, code(&refused)), (409, "idempotency_stream_completed".to_owned()), "{refused}");
    }
    assert_eq!(env.sim.stats().requests, 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_sent_to_another_instance_is_answered_from_the_first_ones_record() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim = sluice_sim::SimProvider::start(sim()).await.unwrap();
    let store = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n", redis.url());
    let config = common::config(&sim, &store, &policy());
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let quota = sluice_redis::choose::from_config(&config.store, Arc::new(SystemClock::new()), None);
        gateways.push(Running::start(&config, quota, "127.0.0.1:0".parse().unwrap()).await.unwrap());
    }
    let http = reqwest::Client::new();
    let (a, b) = (gateways[0].url(), gateways[1].url());
    let body = r#"{"model":"fast","messages":[{"role":"user","content":"shared"}],"max_tokens":8}"#;
    let (status, _, answer) = send(&http, &a, "op-shared", body).await;
    assert_eq!(status, 200, "{answer}");
    let (status, headers, replayed) = send(&http, &b, "op-shared", body).await;
    assert_eq!((status, headers.get("x-sluice-idempotent-replay").is_some()), (200, true), "{replayed}");
    assert_eq!(replayed, answer, "B answers with A's stored response");
    let other = r#"{"model":"fast","messages":[{"role":"user","content":"else"}],"max_tokens":8}"#;
    let (status, _, refused) = send(&http, &b, "op-shared", other).await;
    assert_eq!((status, code(&refused)), (422, "idempotency_key_reused".to_owned()), "{refused}");
    // A stream started on A is not sent again by B.
    let stream = r#"{"model":"fast","stream":true,"messages":[{"role":"user","content":"s"}],"max_tokens":8}"#;
    assert_eq!(send(&http, &a, "op-stream", stream).await.0, 200);
    assert_eq!(send(&http, &b, "op-stream", stream).await.0, 409);
    assert_eq!(sim.stats().requests, 2, "one call for the answer, one for the stream");
    for gateway in gateways {
        gateway.shutdown().await;
    }
    sim.shutdown().await;
}

/// `sluice_duplicate_suppressed_total` series in a scrape.
async fn duplicate_series(env: &Env) -> Vec<String> {
    let text = env.metrics().await;
    text.lines().filter(|l| l.starts_with("sluice_duplicate_suppressed_total{")).map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_names_a_client_invents_create_no_metric_series() {
    let env = start_with(sim(), "", &policy()).await;
    let url = env.gateway.url();
    let body = chat("fast", 4, 8);
    let post = |task: String| {
        let request = env.http.post(format!("{url}/v1/chat/completions")).bearer_auth(KEY);
        request.header("idempotency-key", "op-tasks").header("x-sluice-task", task).json(&body).send()
    };
    assert_eq!(post("summarize".into()).await.unwrap().status(), 200);
    // 50 repeats, each under a random task name, and one under the configured task.
    for i in 0..50u32 {
        let task = format!("task-{:08x}", rand_like(i));
        assert_eq!(post(task).await.unwrap().status(), 200);
    }
    assert_eq!(post("summarize".into()).await.unwrap().status(), 200);
    let series = duplicate_series(&env).await;
    let labels: Vec<&str> = series.iter().filter_map(|l| l.split('"').nth(1)).collect();
    assert_eq!(labels.len(), 2, "{series:?}");
    assert!(labels.contains(&"other") && labels.contains(&"summarize"), "{series:?}");
    assert!(
        series.iter().any(|l| l.starts_with("sluice_duplicate_suppressed_total{task_type=\"other\"} 50")),
        "{series:?}"
    );
    assert_eq!(env.sim.stats().requests, 1);
    env.shutdown().await;
}

/// A spread of distinct values (no RNG needed: they only have to differ).
fn rand_like(i: u32) -> u32 {
    i.wrapping_mul(2_654_435_761).rotate_left(7)
}
