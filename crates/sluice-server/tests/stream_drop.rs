//! A provider stream dropped midway: the client gets the partial output, then the
//! interruption event in its own protocol's shape, and the stream ends; the provider is
//! called once — no retry and no fallback once bytes went to the client. Both protocols,
//! served by the same and by the other protocol's deployment.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Env, KEY, sha};
use serde_json::{Value, json};
use sluice_sim::config::SimConfig;

const SIM: &str = r#"seed = 4
[latency]
chunk_tokens = 3
[[models]]
name = "gpt-drop"
completion = { dist = "fixed", tokens = 30 }
faults = { stream_drop = 1.0, stream_drop_after_chunks = 2 }
[[models]]
name = "claude-drop"
shape = "anthropic"
completion = { dist = "fixed", tokens = 30 }
faults = { stream_drop = 1.0, stream_drop_after_chunks = 2 }
[[models]]
name = "gpt-backup"
completion = { dist = "fixed", tokens = 5 }
"#;

/// The text of the two content chunks the sim sends before the cut (3 filler tokens each).
const PARTIAL: &str = "the quick brown fox jumps over";

fn policy() -> String {
    format!(
        r#"
[[deployments]]
name = "oa-drop"
provider = "sim"
model = "gpt-drop"

[[deployments]]
name = "an-drop"
provider = "sim-anthropic"
model = "claude-drop"

[[deployments]]
name = "backup"
provider = "sim"
model = "gpt-backup"

[[models]]
name = "oa"
deployment = "oa-drop"
fallbacks = [{{ deployment = "backup", when = ["provider_5xx", "primary_unavailable"] }}]

[[models]]
name = "an"
deployment = "an-drop"
fallbacks = [{{ deployment = "backup", when = ["provider_5xx", "primary_unavailable"] }}]

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

/// The gateway on tokio's clock: with `#[tokio::test(start_paused = true)]`, the time given
/// to a (wrong) late retry or fallback is the gateway's own, not real time.
async fn env() -> Env {
    common::start_clocked(SimConfig::from_toml_str(SIM).unwrap(), &policy(), common::TokioClock::new()).await
}

/// Streams `body` to `path` and returns its SSE events `(event name, data)`; the body must
/// end cleanly (no transport error).
async fn stream(env: &Env, path: &str, body: &Value) -> Vec<(Option<String>, String)> {
    let response = env
        .http
        .post(format!("{}{path}", env.gateway.url()))
        .bearer_auth(KEY)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let text = response.text().await.expect("the client's stream ends cleanly");
    text.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            (name, data)
        })
        .collect()
}

/// An OpenAI client's stream: the partial text, then one error chunk, and no `[DONE]`.
fn assert_openai_interrupted(events: &[(Option<String>, String)]) {
    assert!(events.iter().all(|(_, d)| d != "[DONE]"), "{events:?}");
    let chunks: Vec<Value> = events.iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    let (last, content) = chunks.split_last().unwrap();
    assert_eq!(last["error"]["type"], "stream_interrupted", "{last}");
    assert_eq!(last["error"]["code"], "upstream_stream_interrupted");
    assert!(last["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(content.iter().all(|c| c.get("error").is_none() && c["object"] == "chat.completion.chunk"));
    assert!(content.iter().all(|c| c["choices"][0]["finish_reason"].is_null()), "no finish before the cut");
    let text: String = content.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text.trim(), PARTIAL);
}

/// An Anthropic client's stream: the partial text, then `event: error`, and no `message_stop`.
fn assert_anthropic_interrupted(events: &[(Option<String>, String)]) {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap_or("")).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"error"), "{names:?}");
    assert!(!names.contains(&"message_stop") && !names.contains(&"message_delta"), "{names:?}");
    let error: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(error["type"], "error");
    assert!(error["error"]["type"].as_str().is_some_and(|t| !t.is_empty()));
    let text: String = events
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| serde_json::from_str::<Value>(d).unwrap()["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text.trim(), PARTIAL);
}

/// Requests the sim received per model, read from `GET /_stats`.
async fn sim_requests(env: &Env, model: &str) -> u64 {
    // Give a (wrong) late retry or fallback time to show up.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stats: Value = env.http.get(format!("{}/_stats", env.sim.url())).send().await.unwrap().json().await.unwrap();
    stats["models"][model]["requests"].as_u64().unwrap_or(0)
}

fn body(model: &str) -> Value {
    json!({"model": model, "stream": true, "max_tokens": 100, "messages": [{"role": "user", "content": "tell me"}]})
}

#[tokio::test(start_paused = true)]
async fn openai_client_same_protocol() {
    let env = env().await;
    assert_openai_interrupted(&stream(&env, "/v1/chat/completions", &body("oa")).await);
    assert_eq!(sim_requests(&env, "gpt-drop").await, 1, "the provider is called once");
    assert_eq!(sim_requests(&env, "gpt-backup").await, 0, "no fallback after the first byte");
    env.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn anthropic_client_same_protocol() {
    let env = env().await;
    assert_anthropic_interrupted(&stream(&env, "/v1/messages", &body("an")).await);
    assert_eq!(sim_requests(&env, "claude-drop").await, 1, "the provider is called once");
    assert_eq!(sim_requests(&env, "gpt-backup").await, 0, "no fallback after the first byte");
    env.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn openai_client_served_by_anthropic() {
    let env = env().await;
    assert_openai_interrupted(&stream(&env, "/v1/chat/completions", &body("an")).await);
    assert_eq!(sim_requests(&env, "claude-drop").await, 1, "the provider is called once");
    assert_eq!(sim_requests(&env, "gpt-backup").await, 0, "no fallback after the first byte");
    env.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn anthropic_client_served_by_openai() {
    let env = env().await;
    assert_anthropic_interrupted(&stream(&env, "/v1/messages", &body("oa")).await);
    assert_eq!(sim_requests(&env, "gpt-drop").await, 1, "the provider is called once");
    assert_eq!(sim_requests(&env, "gpt-backup").await, 0, "no fallback after the first byte");
    env.shutdown().await;
}

/// A Responses client's stream: `response.created`, the partial text, then the protocol's
/// own `error` event, and no `response.completed`.
#[tokio::test(start_paused = true)]
async fn responses_client_same_protocol() {
    let env = env().await;
    let body = json!({"model": "oa", "stream": true, "max_output_tokens": 100, "input": "tell me"});
    let events = stream(&env, "/v1/responses", &body).await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap_or("")).collect();
    assert_eq!(names.first(), Some(&"response.created"), "{names:?}");
    assert_eq!(names.last(), Some(&"error"), "{names:?}");
    assert!(!names.contains(&"response.completed"), "{names:?}");
    let error: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(error["type"], "error");
    assert_eq!(error["code"], "upstream_stream_interrupted");
    let text: String = events
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("response.output_text.delta"))
        .map(|(_, d)| serde_json::from_str::<Value>(d).unwrap()["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text.trim(), PARTIAL);
    assert_eq!(sim_requests(&env, "gpt-drop").await, 1, "the provider is called once");
    assert_eq!(sim_requests(&env, "gpt-backup").await, 0, "no fallback after the first byte");
    env.shutdown().await;
}
