//! The gateway's HTTP surface over real sockets: both API shapes, streams, and every kind
//! of bad input answered with a clear 4xx while the gateway keeps serving.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::{Env, KEY, chat, sha, start};

/// A key whose class makes one upstream attempt only: provider errors reach the client.
const NO_RETRY_KEY: &str = "sk-test-no-retry";
use serde_json::{Value, json};
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};

async fn env() -> Env {
    let openai = ModelConfig { completion: Completion::Fixed { tokens: 12 }, ..ModelConfig::openai("gpt-4o-mini") };
    let claude =
        ModelConfig { completion: Completion::Fixed { tokens: 12 }, ..ModelConfig::anthropic("claude-sonnet-4-5") };
    let tight = ModelConfig::openai("gpt-4o").with_limits(Limits { rpm: Some(60), ..Limits::default() });
    let embed = ModelConfig::openai("text-embedding-3-small");
    let policy = format!(
        r#"
[[deployments]]
name = "mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[deployments]]
name = "sonnet"
provider = "sim-anthropic"
model = "claude-sonnet-4-5"
limits = {{ rpm = 10000, input_tpm = 10000000, output_tpm = 1000000 }}

[[deployments]]
name = "unguarded"
provider = "sim"
model = "gpt-4o"
limits = {{ rpm = 100000 }}

[[deployments]]
name = "embed"
provider = "sim"
model = "text-embedding-3-small"
limits = {{ rpm = 10000, tpm = 10000000 }}

[[models]]
name = "fast"
deployment = "mini"
default_max_tokens = 64

[[models]]
name = "smart"
deployment = "sonnet"

[[models]]
name = "misconfigured"
deployment = "unguarded"

[[models]]
name = "embed-small"
deployment = "embed"

[[tenants]]
name = "acme"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{}"

[[classes]]
name = "no-retry"
retry_attempts = 1

[[keys]]
id = "acme-no-retry"
tenant = "acme"
class = "no-retry"
sha256 = "{}"
"#,
        sha(KEY),
        sha(NO_RETRY_KEY)
    );
    let sim = SimConfig { models: vec![openai, claude, tight, embed], ..SimConfig::default() };
    start(sim, &policy).await
}

/// The value of the series of `name` whose labels contain all of `labels`.
fn metric(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn still_serving(env: &Env) {
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
}

fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["error"]["code"], want_code, "{body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(body["error"]["type"].is_string(), "{body}");
    assert_eq!(body["error"]["trace_id"].as_str().map(str::len), Some(32), "{body}");
}

#[tokio::test]
async fn chat_and_embeddings_pass_through_with_usage() {
    let env = env().await;
    let (status, headers, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 10, 30)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["usage"]["completion_tokens"], 12);
    assert!(headers.contains_key("x-sluice-trace-id"));
    let (status, _, body) =
        env.post("/v1/embeddings", KEY, &json!({"model": "embed-small", "input": ["a b c", "d e"]})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().map(Vec::len), Some(2));
    let models: Value = env
        .http
        .get(format!("{}/v1/models", env.gateway.url()))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["embed-small", "fast", "misconfigured", "smart"]);
    let metrics = env.metrics().await;
    let mini = r#"provider="sim",model="gpt-4o-mini""#;
    assert_eq!(metric(&metrics, "sluice_requests_total", &[r#"model="gpt-4o-mini""#, r#"status="200""#]), 1.0);
    let reserved = metric(&metrics, "sluice_tokens_reserved_total", &[mini]);
    let used = metric(&metrics, "sluice_tokens_used_total", &[mini]);
    // Reserved: estimate + 30 max_tokens; used: prompt + 12 generated.
    assert!(reserved > used && used > 12.0, "reserved {reserved}, used {used}");
    assert_eq!(reserved - used, 18.0, "the input estimate should equal the provider's count");
    env.shutdown().await;
}

async fn stream_text(env: &Env, path: &str, body: &Value, headers: &[(&str, &str)]) -> String {
    let mut request = env.http.post(format!("{}{path}", env.gateway.url())).bearer_auth(KEY).json(body);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    response.text().await.unwrap()
}

#[tokio::test]
async fn openai_streams_keep_their_shape_and_usage_is_hidden_unless_asked() {
    let env = env().await;
    let mut body = chat("fast", 10, 30);
    body["stream"] = json!(true);
    let text = stream_text(&env, "/v1/chat/completions", &body, &[]).await;
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(!text.contains("\"usage\""), "usage leaked into a stream that did not ask: {text}");
    body["stream_options"] = json!({"include_usage": true});
    let text = stream_text(&env, "/v1/chat/completions", &body, &[]).await;
    assert!(text.contains("\"completion_tokens\":12"), "{text}");
    // Both were counted once by the provider; usage flowed back into settlement.
    let stats = env.sim.stats();
    assert_eq!(stats.served, 2);
    assert_eq!(stats.tokens.output_used, 24);
    still_serving(&env).await;
    env.shutdown().await;
}

#[tokio::test]
async fn anthropic_messages_and_streams_work_and_errors_use_its_envelope() {
    let env = env().await;
    let body = json!({"model": "smart", "max_tokens": 50, "system": "be brief",
                      "messages": [{"role": "user", "content": "hello there"}]});
    let (status, _, reply) = env.post("/v1/messages", KEY, &body).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["type"], "message");
    assert_eq!(reply["usage"]["output_tokens"], 12);
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let text = stream_text(&env, "/v1/messages", &streamed, &[("anthropic-version", "2023-06-01")]).await;
    for event in ["message_start", "content_block_delta", "message_delta", "message_stop"] {
        assert!(text.contains(&format!("event: {event}")), "{event} missing: {text}");
    }
    let (status, _, error) = env.post("/v1/messages", KEY, &json!({"model": "smart", "messages": []})).await;
    assert_eq!(status, 400);
    assert_eq!(error["type"], "error", "{error}");
    // An OpenAI-shaped request for an Anthropic-served profile is translated there and back.
    let (status, _, reply) = env.post("/v1/chat/completions", KEY, &chat("smart", 4, 8)).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["model"], "smart");
    assert!(reply["choices"][0]["message"]["content"].as_str().is_some_and(|c| !c.is_empty()), "{reply}");
    // Embeddings have no Anthropic counterpart.
    let (status, _, error) = env.post("/v1/embeddings", KEY, &json!({"model": "smart", "input": "x"})).await;
    assert_error(status, &error, 400, "wrong_endpoint");
    env.shutdown().await;
}

#[tokio::test]
async fn bad_input_gets_a_clear_4xx_and_the_gateway_keeps_serving() {
    let env = env().await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    let raw =
        |body: Vec<u8>| env.http.post(&url).bearer_auth(KEY).header("content-type", "application/json").body(body);

    let response = raw(b"{\"model\": \"fast\", \"messages\": [".to_vec()).send().await.unwrap();
    let (status, body) = (response.status().as_u16(), response.json::<Value>().await.unwrap());
    assert_error(status, &body, 400, "invalid_json");

    let (status, _, body) = env.post("/v1/chat/completions", KEY, &json!({"model": "fast", "messages": "hi"})).await;
    assert_error(status, &body, 400, "invalid_type");
    assert_eq!(body["error"]["param"], "messages");

    let big = vec![b' '; 10 * 1024 * 1024];
    let response = raw(big).send().await.unwrap();
    let (status, body) = (response.status().as_u16(), response.json::<Value>().await.unwrap());
    assert_error(status, &body, 413, "body_too_large");

    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("gpt-9", 4, 8)).await;
    assert_error(status, &body, 404, "model_not_found");

    let response = env.http.post(&url).json(&chat("fast", 4, 8)).send().await.unwrap();
    let (status, body) = (response.status().as_u16(), response.json::<Value>().await.unwrap());
    assert_error(status, &body, 401, "invalid_api_key");

    let (status, _, body) = env.post("/v1/chat/completions", "sk-wrong", &chat("fast", 4, 8)).await;
    assert_error(status, &body, 401, "invalid_api_key");

    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 20_000_000)).await;
    assert_error(status, &body, 400, "request_exceeds_limit");
    assert_eq!(body["error"]["limiter"], "tpm");
    assert_eq!(body["error"]["gateway_decision"], "rejected_before_send");

    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let response = raw(format!("{{\"model\":\"fast\",\"messages\":{deep}}}").into_bytes()).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 400);

    // Nothing above reached the provider; the gateway still serves.
    assert_eq!(env.sim.stats().requests, 0);
    still_serving(&env).await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_provider_429_is_reported_as_admitted_then_provider_rejected() {
    // `misconfigured` allows far more than the provider's 60 RPM: the provider refuses,
    // and with one attempt allowed the refusal reaches the client.
    let env = env().await;
    let mut last = None;
    for _ in 0..200 {
        let (status, headers, body) =
            env.post("/v1/chat/completions", NO_RETRY_KEY, &chat("misconfigured", 4, 8)).await;
        if status == 429 {
            last = Some((headers, body));
            break;
        }
    }
    let (headers, body) = last.expect("the provider never refused");
    assert_eq!(body["error"]["gateway_decision"], "admitted_then_provider_rejected");
    assert_eq!(body["error"]["provider"], "sim");
    assert!(headers.contains_key("retry-after"));
    let text = body.to_string();
    assert!(!text.contains("sk-provider-planted-secret"), "provider key leaked: {text}");
    let metrics = env.metrics().await;
    assert_eq!(metric(&metrics, "sluice_rate_limit_hits_total", &[r#"limit_type="provider""#]), 1.0);
    assert!(metric(&metrics, "sluice_requests_total", &[r#"status="429""#]) >= 1.0);
    assert!(!metrics.contains("sk-provider-planted-secret"));
    // The provider's hint now holds every caller of that deployment back before sending:
    // the next request waits in the queue for the pause to end instead of meeting a 429.
    let provider_429s = env.sim.stats().rate_limited.total();
    let started = tokio::time::Instant::now();
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("misconfigured", 4, 8)).await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300), "not held back: {:?}", started.elapsed());
    assert_eq!(env.sim.stats().rate_limited.total(), provider_429s, "the provider refused again");
    env.shutdown().await;
}
