//! Providers that stall after their headers: a live non-stream request gets a timely 504,
//! a live stream ends with its protocol's error event after the idle timeout, and job
//! workers give stalled jobs back instead of wedging, so healthy jobs behind them run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{KEY, sha};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, FaultConfig, LatencyConfig, ModelConfig, SimConfig};
use tokio::time::Instant;

/// How long the simulated provider stays silent: far longer than any test runs.
const STALL_MS: u64 = 600_000;

/// A key of the interactive class: three attempts within 8 s.
const LIVE: &str = "sk-test-live";

fn stalling(model: ModelConfig) -> ModelConfig {
    stalling_at(1.0, model)
}

fn stalling_at(rate: f64, model: ModelConfig) -> ModelConfig {
    let faults = FaultConfig { stall: rate, stall_ms: STALL_MS, ..FaultConfig::default() };
    let latency = LatencyConfig { ttft_ms: 10.0, per_token_ms: 1.0, ..LatencyConfig::default() };
    ModelConfig { faults: Some(faults), latency: Some(latency), completion: Completion::Fixed { tokens: 40 }, ..model }
}

fn sim() -> SimConfig {
    sim_stalling(stalling(ModelConfig::openai("gpt-4o-mini")))
}

fn sim_stalling(stuck: ModelConfig) -> SimConfig {
    let models = vec![stuck, stalling(ModelConfig::anthropic("claude-sonnet-4-5")), ModelConfig::openai("gpt-4o")];
    SimConfig { seed: Some(5), models, ..SimConfig::default() }
}

fn policy(jobs: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "stuck"
provider = "sim"
model = "gpt-4o-mini"
attempt_timeout = "1s"
stream_idle_timeout = "1s"
breaker_failures = 1000

[[deployments]]
name = "stuck-claude"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"
stream_idle_timeout = "1s"

[[deployments]]
name = "healthy"
provider = "sim"
model = "gpt-4o"

[[models]]
name = "stuck"
deployment = "stuck"

[[models]]
name = "stuck-claude"
deployment = "stuck-claude"

[[models]]
name = "healthy"
deployment = "healthy"

[[tenants]]
name = "acme"

[[classes]]
name = "batch"
priority = 5
max_wait = "5m"
max_attempts = 20
retry_attempts = 1

[[keys]]
id = "acme"
tenant = "acme"
class = "batch"
sha256 = "{}"

[[keys]]
id = "acme-live"
tenant = "acme"
sha256 = "{}"
{jobs}
"#,
        sha(KEY),
        sha(LIVE)
    )
}

fn chat(model: &str) -> Value {
    json!({"model": model, "max_tokens": 40, "messages": [{"role": "user", "content": "hello"}]})
}

/// A client that gives up long after any bound the gateway should keep.
fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_stream_answer_that_stalls_after_its_headers_times_out_in_time() {
    let env = common::start(sim(), &policy("")).await;
    let started = Instant::now();
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let response = client().post(&url).bearer_auth(KEY).json(&chat("stuck")).send().await.unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    // One attempt of at most 1 s (the class allows no retry), not the provider's ten minutes.
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["error"]["code"], "upstream_timeout", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`stuck`"), "{body}");
    assert_eq!(env.sim.stats().faults.stall, 1);
    let metrics = env.metrics().await;
    assert!(
        metrics.lines().any(|l| l.starts_with("sluice_upstream_failures_total{") && l.contains("reason=\"stalled\"")),
        "{metrics}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_non_stream_attempt_is_retried_and_the_retry_serves() {
    let env = common::start(sim_stalling(stalling_at(0.5, ModelConfig::openai("gpt-4o-mini"))), &policy("")).await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let http = client();
    for _ in 0..5 {
        let response = http.post(&url).bearer_auth(LIVE).json(&chat("stuck")).send().await.unwrap();
        let status = response.status().as_u16();
        let stats = env.sim.stats();
        assert_eq!(status, 200, "{} {stats:?}", response.text().await.unwrap());
        assert_eq!(response.json::<Value>().await.unwrap()["object"], "chat.completion");
    }
    // Some attempts stalled; every request was served by a retry.
    let stats = env.sim.stats();
    assert!(stats.faults.stall >= 1, "{stats:?}");
    assert_eq!(stats.served, 5);
    env.shutdown().await;
}

/// Reads a stream to its end; the text received.
async fn read_stream(response: reqwest::Response) -> String {
    let mut response = response;
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_stalls_ends_with_the_error_event_after_the_idle_timeout() {
    let env = common::start(sim(), &policy("")).await;
    let http = client();
    let started = Instant::now();
    let mut body = chat("stuck");
    body["stream"] = json!(true);
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let response = http.post(&url).bearer_auth(KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = read_stream(response).await;
    assert!(text.contains("chat.completion.chunk"), "the first chunks came through: {text}");
    let last = text.trim_end().lines().last().unwrap();
    let event: Value = serde_json::from_str(last.trim_start_matches("data: ")).unwrap();
    assert_eq!(event["error"]["code"], "upstream_stream_stalled", "{text}");

    let mut body = chat("stuck-claude");
    body["stream"] = json!(true);
    let url = format!("{}/v1/messages", env.gateway.url());
    let response = http.post(&url).header("x-api-key", KEY).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = read_stream(response).await;
    assert!(text.contains("event: message_start"), "{text}");
    assert!(text.trim_end().ends_with("}"), "{text}");
    let (_, tail) = text.trim_end().rsplit_once("\n\n").unwrap();
    assert!(tail.starts_with("event: error\ndata: "), "{text}");
    assert!(tail.contains("stalled"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(40), "took {:?}", started.elapsed());
    // Nothing was retried: each stream reached the provider once.
    assert_eq!(env.sim.stats().faults.stall, 2);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_jobs_are_given_back_and_a_healthy_job_behind_them_completes() {
    const WORKERS: usize = 4;
    let jobs = format!("\n[jobs]\nworkers = {WORKERS}\nvisibility_timeout = \"3s\"\n");
    let env = common::start_jobs(sim(), &policy(&jobs)).await;
    // One stalled job per worker, then a healthy one queued behind them.
    let mut stuck = Vec::new();
    for _ in 0..WORKERS {
        stuck.push(env.submit(KEY, &chat("stuck")).await);
    }
    let healthy = env.submit(KEY, &chat("healthy")).await;
    let job = env.wait_for(KEY, &healthy, Duration::from_secs(45), |job| job["status"] == "completed").await;
    assert_eq!(job["status"], "completed", "the healthy job is stuck behind stalled ones: {job}");
    let stalled = env.sim.stats().faults.stall;
    assert!(stalled >= WORKERS as u64, "{stalled}");
    // The stalled jobs went back to wait for another attempt, their error telling why.
    let why = |job: &Value| job["error"].as_str().unwrap_or_default().contains("stopped sending");
    let job = env.wait_for(KEY, &stuck[0], Duration::from_secs(20), why).await;
    assert!(why(&job), "{job}");
    assert!(job["status"] != "completed" && job["status"] != "failed", "{job}");
    env.shutdown().await;
}
