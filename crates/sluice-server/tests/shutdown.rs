//! Shutdown drains: a stream in flight when shutdown begins still completes; one still
//! running when the grace ends gets its protocol's error event; background work a
//! request left is waited for.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::{KEY, chat, sha, start_with};
use serde_json::json;
use sluice_sim::config::{Completion, LatencyConfig, ModelConfig, SimConfig};

/// A gateway (with `process` settings) in front of a sim streaming `tokens` tokens at
/// `per_token_ms`, and a stream started on it.
async fn streaming(tokens: u64, per_token_ms: f64, process: &str) -> (common::Env, reqwest::Response) {
    let latency = LatencyConfig { ttft_ms: 100.0, per_token_ms, ..LatencyConfig::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens },
        latency: Some(latency),
        ..ModelConfig::openai("gpt-4o-mini")
    };
    let policy = format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 1000 }}\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sha(KEY)
    );
    let env = start_with(SimConfig { models: vec![model], ..SimConfig::default() }, process, &policy).await;
    let mut body = chat("fast", 4, tokens);
    body["stream"] = json!(true);
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let response = env.http.post(&url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    (env, response)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_a_stream_in_flight() {
    let (env, mut response) = streaming(40, 20.0, "").await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let mut body = chat("fast", 4, 40);
    body["stream"] = json!(true);
    let first = response.chunk().await.unwrap().unwrap();
    assert!(!first.is_empty());

    let common::Env { sim, gateway, http } = env;
    let stopping = tokio::spawn(gateway.shutdown());
    let mut text = String::from_utf8_lossy(&first).into_owned();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.trim_end().ends_with("data: [DONE]"), "stream cut by shutdown: {text}");
    stopping.await.unwrap();
    assert!(http.post(&url).bearer_auth(KEY).json(&body).send().await.is_err(), "still accepting after shutdown");
    assert_eq!(sim.stats().served, 1);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_still_running_when_the_grace_ends_gets_the_error_event() {
    // 400 tokens at 50 ms: a 20 s stream, far past a 500 ms grace.
    let (env, mut response) = streaming(400, 50.0, "[server]\nshutdown_grace = \"500ms\"\n").await;
    let mut text = String::from_utf8_lossy(&response.chunk().await.unwrap().unwrap()).into_owned();

    let common::Env { sim, gateway, .. } = env;
    let started = tokio::time::Instant::now();
    let stopping = tokio::spawn(gateway.shutdown());
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let last = text.trim_end().lines().last().unwrap();
    let event: serde_json::Value = serde_json::from_str(last.trim_start_matches("data: ")).unwrap();
    assert_eq!(event["error"]["code"], "shutting_down", "{text}");
    stopping.await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "shutdown took {:?}", started.elapsed());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_the_background_work_requests_left() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let (env, mut response) = streaming(1, 1.0, "").await;
    while response.chunk().await.unwrap().is_some() {}
    // Work a request left behind just before shutdown, as a settlement on a slow remote
    // store would be.
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    env.gateway.state().gateway.background.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        flag.store(true, Ordering::SeqCst);
    });
    let common::Env { sim, gateway, .. } = env;
    gateway.shutdown().await;
    assert!(done.load(Ordering::SeqCst), "serve returned before the background work finished");
    sim.shutdown().await;
}
