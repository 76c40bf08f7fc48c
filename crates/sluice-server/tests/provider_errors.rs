//! What a tenant sees when the provider fails: refused credentials become the gateway's
//! own 502 (no provider text), provider messages pass with anything like a key scrubbed
//! (same protocol and crossed), jobs store only that, oversized or unreadable answers and
//! an open breaker get structured errors naming the deployment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Env, KEY, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{FaultConfig, ModelConfig, SimConfig};

/// The provider key the harness configures (see `common::key_file`).
const PLANTED: &str = "planted-secret";
/// A key of the interactive class (no waiting past its 2 s).
const LIVE: &str = "sk-test-live";

fn sim(faults: FaultConfig) -> SimConfig {
    let models = vec![
        ModelConfig { faults: Some(faults.clone()), ..ModelConfig::openai("gpt-4o-mini") },
        ModelConfig { faults: Some(faults), ..ModelConfig::anthropic("claude-sonnet-4-5") },
    ];
    SimConfig { seed: Some(9), models, ..SimConfig::default() }
}

fn policy(extra: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "oa"
provider = "sim"
model = "gpt-4o-mini"
{extra}

[[deployments]]
name = "claude"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"

[[models]]
name = "chat"
deployment = "oa"

[[models]]
name = "smart"
deployment = "claude"

[[tenants]]
name = "acme"

[[classes]]
name = "batch"
priority = 5
max_wait = "5m"
max_attempts = 3
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
"#,
        sha(KEY),
        sha(LIVE)
    )
}

fn chat(model: &str) -> Value {
    json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]})
}

fn echoing(faults: FaultConfig) -> FaultConfig {
    FaultConfig { echo_key: true, ..faults }
}

async fn messages(env: &Env, body: &Value) -> (u16, String) {
    let url = format!("{}/v1/messages", env.gateway.url());
    let response = env.http.post(url).header("x-api-key", KEY).json(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_401_that_echoes_the_key_becomes_the_gateways_502_without_it() {
    let env = start(sim(echoing(FaultConfig { error_401: 1.0, ..FaultConfig::default() })), &policy("")).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat")).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], "upstream_auth_failed", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`oa`"), "{body}");
    assert!(!body.to_string().contains(PLANTED), "{body}");
    let (status, text) = messages(&env, &chat("smart")).await;
    assert_eq!(status, 502, "{text}");
    assert!(text.contains("upstream_auth_failed") && !text.contains(PLANTED), "{text}");
    // The provider did echo it: the gateway held it back.
    assert_eq!(env.sim.stats().faults.error_401, 2);
    let metrics = env.metrics().await;
    let auth =
        metrics.lines().find(|l| l.starts_with("sluice_upstream_failures_total{") && l.contains("reason=\"auth\""));
    assert!(auth.is_some_and(|l| l.ends_with(" 1")), "{metrics}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_message_passes_with_keys_scrubbed_same_protocol_and_crossed() {
    let faults = echoing(FaultConfig { error_400: 1.0, ..FaultConfig::default() });
    let env = start(sim(faults), &policy("")).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat")).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("The request was rejected."), "the provider's message is kept: {body}");
    assert!(message.contains("[redacted]") && !message.contains(PLANTED), "{body}");
    // An OpenAI client served by the Anthropic deployment: the crossed error is scrubbed too.
    let crossed = "[[models]]\nname = \"crossed\"\ndeployment = \"claude\"\n";
    env.gateway.state().reload(&common::config(&env.sim, "", &(policy("") + crossed))).unwrap();
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("crossed")).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("[redacted]") && !message.contains(PLANTED), "{body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_stored_error_never_holds_the_key() {
    let faults = echoing(FaultConfig { error_401: 0.5, error_400: 0.5, ..FaultConfig::default() });
    let env = common::start_jobs(sim(faults), &(policy("") + "\n[jobs]\nworkers = 2\n")).await;
    let ids = [env.submit(KEY, &chat("chat")).await, env.submit(KEY, &chat("chat")).await];
    let mut errors = Vec::new();
    for id in &ids {
        let has_error = |job: &Value| job["error"].is_string();
        let job = env.wait_for(KEY, id, Duration::from_secs(30), has_error).await;
        assert!(!job.to_string().contains(PLANTED), "{job}");
        errors.push(job["error"].as_str().unwrap().to_owned());
    }
    let mapped = |e: &String| e.contains("refused the gateway's credentials") || e.contains("[redacted]");
    assert!(errors.iter().all(mapped), "{errors:?}");
    env.shutdown().await;
}

/// Asserts a structured 502 with `code` that names the deployment `oa`.
fn assert_502_naming_oa(status: u16, body: &Value, code: &str) {
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`oa`"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_unreadable_answers_get_a_structured_502_naming_the_deployment() {
    // An error body over 1 MiB, then a success body over 64 MiB.
    let padded = FaultConfig { error_400: 1.0, error_padding_bytes: 2 << 20, ..FaultConfig::default() };
    let oversize = FaultConfig { oversize: 1.0, oversize_bytes: 65 << 20, ..FaultConfig::default() };
    for faults in [padded, oversize] {
        let env = start(sim(faults), &policy("")).await;
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat")).await;
        assert_502_naming_oa(status, &body, "upstream_response_too_large");
        env.shutdown().await;
    }
    // Crossed, a success that is no response at all.
    let blank = FaultConfig { oversize: 1.0, oversize_bytes: 16, ..FaultConfig::default() };
    let env = start(sim(blank), &(policy("") + "[[models]]\nname = \"crossed\"\ndeployment = \"oa\"\n")).await;
    let (status, text) = messages(&env, &chat("crossed")).await;
    assert_502_naming_oa(status, &serde_json::from_str(&text).unwrap(), "upstream_bad_response");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_is_an_outage_503_not_a_rate_limit() {
    let failing = FaultConfig { error_503: 1.0, ..FaultConfig::default() };
    let env = start(sim(failing), &policy("breaker_failures = 1\nbreaker_cooldown = \"30s\"")).await;
    let (status, _, body) = env.post("/v1/chat/completions", LIVE, &chat("chat")).await;
    assert!(status == 503, "{body}");
    // The breaker opened on that failure: the next request is held back before sending.
    let served = env.sim.stats().requests;
    let (status, headers, body) = env.post("/v1/chat/completions", LIVE, &chat("chat")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "provider_unavailable", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("`oa`"), "{body}");
    let wait: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&wait), "{wait}");
    assert_eq!(env.sim.stats().requests, served, "nothing was sent");
    env.shutdown().await;
}
