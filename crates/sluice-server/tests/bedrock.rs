//! AWS Bedrock through the gateway over HTTP against the simulated provider: OpenAI- and
//! Anthropic-shaped clients, plain and streaming, reach a Bedrock deployment over the
//! Converse API with SigV4 (the simulator verifies the signature and serves Bedrock models
//! nowhere else); a wrong secret is the gateway's 502; a `ThrottlingException` is retried;
//! the output weight prices admission.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::bedrock::sigv4::{SIM_ACCESS_KEY_ID, SIM_SECRET_ACCESS_KEY};
use sluice_sim::config::{Flavor, Limits, ModelConfig, SimConfig};

const MODEL: &str = "anthropic.claude-3-7-sonnet-20250219-v1:0";

fn sim(limits: Limits) -> SimConfig {
    let model = ModelConfig { flavor: Some(Flavor::Bedrock), output_weight: 5, ..ModelConfig::anthropic(MODEL) };
    SimConfig { models: vec![model.with_limits(limits)], ..SimConfig::default() }
}

/// An AWS shared credentials file holding `secret` for the simulator's key.
fn credentials(secret: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    let text = format!("[default]\naws_access_key_id = {SIM_ACCESS_KEY_ID}\naws_secret_access_key = {secret}\n");
    std::fs::write(file.path(), text).unwrap();
    file
}

fn policy(file: &tempfile::NamedTempFile, deployment_extra: &str) -> String {
    format!(
        r#"
[[providers]]
name = "bedrock"
kind = "bedrock"
base_url = "{{SIM}}"
region = "us-east-1"
aws_credentials_file = "{path}"

[[deployments]]
name = "claude"
provider = "bedrock"
model = "{MODEL}"
{deployment_extra}

[[models]]
name = "claude"
deployment = "claude"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{sha}"
"#,
        path = file.path().display(),
        sha = sha(KEY)
    )
}

fn messages(max_tokens: u64, stream: bool) -> Value {
    json!({"model": "claude", "max_tokens": max_tokens, "stream": stream, "system": "be brief",
        "messages": [{"role": "user", "content": "hello there"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_and_anthropic_clients_reach_bedrock_over_converse_plain_and_streaming() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    let env = start(sim(Limits::default()), &policy(&file, "")).await;

    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("claude", 8, 16)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert!(!body["choices"][0]["message"]["content"].as_str().unwrap().is_empty(), "{body}");
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "Converse's usage reaches the client: {body}");

    let (status, _, body) = env.post("/v1/messages", KEY, &messages(16, false)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["type"], "message");
    assert_eq!(body["content"][0]["type"], "text");
    assert!(body["usage"]["output_tokens"].as_u64().unwrap() > 0, "{body}");

    let mut stream = chat("claude", 8, 16);
    stream["stream"] = json!(true);
    let (status, _, text) = env.post("/v1/chat/completions", KEY, &stream).await;
    let text = text.as_str().unwrap().to_owned();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("chat.completion.chunk") && text.trim_end().ends_with("data: [DONE]"), "{text}");

    let (status, _, text) = env.post("/v1/messages", KEY, &messages(16, true)).await;
    let text = text.as_str().unwrap().to_owned();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: content_block_delta") && text.contains("event: message_stop"), "{text}");
    assert!(!text.contains("event: error"), "{text}");

    let stats = env.sim.stats();
    assert_eq!((stats.served, stats.invalid), (4, 0), "every call signed and sent to Converse");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_aws_secret_is_the_gateways_502_without_aws_words() {
    let file = credentials("not-the-secret");
    let env = start(sim(Limits::default()), &policy(&file, "")).await;
    let (status, _, body) = env.post("/v1/messages", KEY, &messages(16, false)).await;
    assert_eq!(status, 502, "{body}");
    assert_eq!(body["error"]["type"], "upstream_error", "{body}");
    assert!(!body.to_string().contains("signature"), "AWS's text stays with the operator: {body}");
    assert_eq!(env.sim.stats().served, 0);
    assert!(env.sim.stats().invalid >= 1, "the simulator refused the signature");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttling_exception_is_retried_until_bedrock_admits() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    // One request per second at Bedrock; the gateway knows no limit, so it meets the 429.
    let limits = Limits { rpm: Some(60), window_fraction: 1.0 / 60.0, ..Limits::default() };
    let env = start(sim(limits), &policy(&file, "")).await;
    let body = messages(8, false);
    let (first, second) = tokio::join!(env.post("/v1/messages", KEY, &body), env.post("/v1/messages", KEY, &body));
    assert_eq!((first.0, second.0), (200, 200), "{} / {}", first.2, second.2);
    let stats = env.sim.stats();
    assert!(stats.rate_limited.requests >= 1, "Bedrock throttled one: {:?}", stats.rate_limited);
    assert_eq!(stats.served, 2);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_weight_prices_max_tokens_on_the_deployments_tpm() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    // 300 output tokens × 5 = 1,500 > 1,000 TPM: never fits; with weight 1 it does.
    let env = start(sim(Limits::default()), &policy(&file, "limits = { tpm = 1000 }")).await;
    let (status, _, body) = env.post("/v1/messages", KEY, &messages(300, false)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert_eq!(env.sim.stats().requests, 0, "refused before sending");
    env.shutdown().await;

    let env = start(sim(Limits::default()), &policy(&file, "output_weight = 1\nlimits = { tpm = 1000 }")).await;
    let (status, _, body) = env.post("/v1/messages", KEY, &messages(300, false)).await;
    assert_eq!(status, 200, "{body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_model_carries_anthropics_own_body_and_stream_for_both_clients() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    let invoke =
        policy(&file, "").replacen("region = \"us-east-1\"", "region = \"us-east-1\"\nbedrock_api = \"invoke\"", 1);
    let env = start(sim(Limits::default()), &invoke).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("claude", 8, 16)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["usage"]["completion_tokens"].as_u64().unwrap() > 0, "{body}");
    let (status, _, text) = env.post("/v1/messages", KEY, &messages(16, true)).await;
    let text = text.as_str().unwrap().to_owned();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: content_block_delta") && text.contains("event: message_stop"), "{text}");
    let mut stream = chat("claude", 8, 16);
    stream["stream"] = json!(true);
    let (status, _, text) = env.post("/v1/chat/completions", KEY, &stream).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.as_str().unwrap().trim_end().ends_with("data: [DONE]"), "{text}");
    let stats = env.sim.stats();
    assert_eq!((stats.served, stats.invalid), (3, 0), "signed, with bedrock-2023-05-31 and no model in the body");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_stream_error_mid_way_ends_the_clients_stream_with_its_error_event() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    let faults = sluice_sim::config::FaultConfig {
        stream_drop: 1.0,
        stream_drop_after_chunks: 2,
        ..sluice_sim::config::FaultConfig::default()
    };
    let mut config = sim(Limits::default());
    config.models[0].faults = Some(faults);
    config.models[0].completion = sluice_sim::config::Completion::Fixed { tokens: 40 };
    let env = start(config, &policy(&file, "")).await;

    let (status, _, text) = env.post("/v1/messages", KEY, &messages(64, true)).await;
    let text = text.as_str().unwrap().to_owned();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: content_block_delta"), "some text came first: {text}");
    assert!(text.contains("event: error") && !text.contains("event: message_stop"), "{text}");
    assert!(text.contains("modelStreamErrorException") && !text.contains("interrupted."), "sluice's words: {text}");

    let mut stream = chat("claude", 8, 64);
    stream["stream"] = json!(true);
    let (status, _, text) = env.post("/v1/chat/completions", KEY, &stream).await;
    let text = text.as_str().unwrap().to_owned();
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"error\"") && !text.contains("[DONE]"), "OpenAI's error chunk ends it: {text}");
    env.shutdown().await;
}
