//! Shutdown drains: a stream in flight when shutdown begins still completes.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::{KEY, chat, sha, start};
use serde_json::json;
use sluice_sim::config::{Completion, LatencyConfig, ModelConfig, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_a_stream_in_flight() {
    let latency = LatencyConfig { ttft_ms: 100.0, per_token_ms: 20.0, ..LatencyConfig::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 40 },
        latency: Some(latency),
        ..ModelConfig::openai("gpt-4o-mini")
    };
    let policy = format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 1000 }}\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sha(KEY)
    );
    let env = start(SimConfig { models: vec![model], ..SimConfig::default() }, &policy).await;
    let mut body = chat("fast", 4, 40);
    body["stream"] = json!(true);
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let mut response = env.http.post(&url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
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
