//! Shutdown drains: a stream in flight when shutdown begins still completes; one still
//! running when the grace ends gets its protocol's error event; background work a
//! request left is waited for.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::{KEY, chat, start_with};
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
    let env =
        start_with(SimConfig { models: vec![model], ..SimConfig::default() }, process, &common::one_deployment(""))
            .await;
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
    env.gateway.state().gateway.services.background.spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        flag.store(true, Ordering::SeqCst);
    });
    let common::Env { sim, gateway, .. } = env;
    gateway.shutdown().await;
    assert!(done.load(Ordering::SeqCst), "serve returned before the background work finished");
    sim.shutdown().await;
}

/// One thread per listener, each a runtime of its own: requests on fresh connections are
/// served (whichever thread the kernel picks), and shutdown drains a stream in flight
/// before `per_core::serve` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_on_a_runtime_per_thread_answers_and_drains_a_stream() {
    let (env, mut stream) = streaming(30, 20.0, "").await;
    let config = common::config(&env.sim, "", &common::one_deployment(""));
    let store =
        sluice_redis::choose::from_config(&config.store, std::sync::Arc::new(sluice_quota::SystemClock::new()), None);
    let state = sluice_server::AppState::build(&config, store).unwrap();
    let listeners = sluice_listener::per_core::listeners("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    let addr = listeners[0].local_addr().unwrap();
    assert_eq!(listeners[1].local_addr().unwrap(), addr, "one port for every thread");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let grace = std::time::Duration::from_secs(10);
    let serve_one = move |listener, shutdown| sluice_server::serve_with_grace(listener, state.clone(), shutdown, grace);
    let serving = tokio::spawn(sluice_listener::per_core::serve(listeners, serve_one, shutdown));
    let url = format!("http://{addr}/v1/chat/completions");
    let fresh = || reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    for _ in 0..8 {
        let answer = fresh().post(&url).bearer_auth(KEY).json(&chat("fast", 4, 4)).send().await.unwrap();
        assert_eq!(answer.status(), 200);
    }
    let mut body = chat("fast", 4, 30);
    body["stream"] = json!(true);
    let mut threaded = fresh().post(&url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(threaded.status(), 200);
    let first = threaded.chunk().await.unwrap().unwrap();
    stop.send(()).unwrap();
    let mut text = String::from_utf8_lossy(&first).into_owned();
    while let Some(chunk) = threaded.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.trim_end().ends_with("data: [DONE]"), "stream cut by shutdown: {text}");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), serving).await;
    ended.expect("serve returned after the drain").unwrap().unwrap();
    assert!(fresh().post(&url).bearer_auth(KEY).json(&chat("fast", 4, 4)).send().await.is_err(), "still accepting");
    while stream.chunk().await.unwrap().is_some() {}
    env.shutdown().await;
}
