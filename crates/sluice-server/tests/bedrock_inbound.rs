//! Bedrock's runtime API served to Bedrock clients (`/model/{modelId}/converse`,
//! `converse-stream`, `invoke`, `invoke-with-response-stream`), over HTTP against the
//! simulated provider: the model id names a profile served by an Anthropic or an OpenAI
//! deployment, the answer comes back in Converse's JSON or event-stream frames, and every
//! refusal in Bedrock's shape (`{"message"}` with `x-amzn-errortype`): a bad body a 400
//! `ValidationException` naming the field, an unknown profile a 404
//! `ResourceNotFoundException`, a missing or unknown key a 403 `AccessDeniedException`, the
//! gateway's 429 a `ThrottlingException` with its `retry-after`. The boto3 tests in
//! tests/python/test_bedrock_inbound.py drive the same routes with the real client.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};

/// Answers of 6 tokens, within every request's `maxTokens`.
fn sim() -> SimConfig {
    let fixed = Completion::Fixed { tokens: 6 };
    let claude = ModelConfig { completion: fixed.clone(), ..ModelConfig::anthropic("claude-sonnet-4-5") };
    let gpt = ModelConfig { completion: fixed, ..ModelConfig::openai("gpt-4o-mini") };
    SimConfig { models: vec![claude, gpt], ..SimConfig::default() }
}

/// `claude` on the simulator's Anthropic shape, `gpt` on its OpenAI shape (model ids with
/// a `:` and a `.`, as Bedrock's are), and [`KEY`] with `key_limits`.
fn policy(key_limits: &str) -> String {
    format!(
        "[[deployments]]\nname = \"c\"\nprovider = \"sim-anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n\
         [[deployments]]\nname = \"o\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\n\
         [[models]]\nname = \"anthropic.claude-v1:0\"\ndeployment = \"c\"\n\n\
         [[models]]\nname = \"gpt\"\ndeployment = \"o\"\n\n\
         [[tenants]]\nname = \"t\"\n\n[[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n{key_limits}",
        sha(KEY)
    )
}

const CLAUDE: &str = "anthropic.claude-v1%3A0";

fn converse() -> Value {
    json!({"system": [{"text": "be brief"}], "messages": [{"role": "user", "content": [{"text": "hello there"}]}],
        "inferenceConfig": {"maxTokens": 16}})
}

/// Posts `body` to `/model/{model}/{operation}` with `key` (none: no header); the status,
/// headers and body bytes.
async fn post(
    env: &Env,
    model: &str,
    operation: &str,
    key: Option<&str>,
    body: &Value,
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let url = format!("{}/model/{model}/{operation}", env.gateway.url());
    let mut request = env.http.post(url).json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn error_type(headers: &reqwest::header::HeaderMap) -> &str {
    headers.get("x-amzn-errortype").map_or("", |v| v.to_str().unwrap())
}

/// The Anthropic events an event stream carries, read back by the gateway's own upstream
/// reader of Bedrock streams: `(event, data)` pairs.
fn events(frames: &[u8], invoke: bool) -> Vec<(String, Value)> {
    let mut reader = if invoke {
        sluice_provider::ConverseToAnthropicStream::invoke("m")
    } else {
        sluice_provider::ConverseToAnthropicStream::new("m", "msg")
    };
    let sse = String::from_utf8(reader.push(frames).to_vec()).unwrap();
    sse.split("\n\n")
        .filter_map(|e| {
            let (head, data) = e.split_once("\ndata: ")?;
            Some((head.trim_start_matches("event: ").to_owned(), serde_json::from_str(data).ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converse_and_its_stream_answer_in_bedrocks_shape_from_anthropic_and_openai_deployments() {
    let env = start(sim(), &policy("")).await;
    for model in [CLAUDE, "gpt"] {
        let (status, headers, body) = post(&env, model, "converse", Some(KEY), &converse()).await;
        let body = json_of(&body);
        assert_eq!(status, 200, "{model}: {body}");
        assert_eq!(body["output"]["message"]["role"], "assistant");
        assert!(!body["output"]["message"]["content"][0]["text"].as_str().unwrap().is_empty(), "{body}");
        assert_eq!(body["stopReason"], "end_turn", "{body}");
        let usage = &body["usage"];
        assert!(usage["inputTokens"].as_u64().unwrap() > 0 && usage["outputTokens"] == 6, "{body}");
        assert!(usage["cacheReadInputTokens"].is_u64() && body["metrics"]["latencyMs"].is_u64(), "{body}");
        assert!(headers.contains_key("x-amzn-requestid"), "{headers:?}");

        let (status, headers, frames) = post(&env, model, "converse-stream", Some(KEY), &converse()).await;
        assert_eq!(status, 200, "{model}: {}", String::from_utf8_lossy(&frames));
        assert_eq!(headers["content-type"], "application/vnd.amazon.eventstream");
        let events = events(&frames, false);
        let kinds: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(kinds.first(), Some(&"message_start"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"message_stop"), "{kinds:?}");
        let text: String = events.iter().filter_map(|(_, d)| d["delta"]["text"].as_str()).collect::<Vec<_>>().concat();
        assert!(!text.is_empty(), "{events:?}");
        let (_, delta) = events.iter().find(|(e, _)| e == "message_delta").unwrap();
        assert_eq!(delta["usage"]["output_tokens"], 6, "metadata's usage: {delta}");
        assert!(delta["usage"]["input_tokens"].as_u64().unwrap() > 0, "metadata's usage: {delta}");
    }
    let stats = env.sim.stats();
    assert_eq!((stats.served, stats.invalid), (4, 0));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_model_takes_anthropics_body_and_answers_anthropics_json_and_chunks() {
    let env = start(sim(), &policy("")).await;
    let body = json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 16,
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, headers, reply) = post(&env, CLAUDE, "invoke", Some(KEY), &body).await;
    let reply = json_of(&reply);
    assert_eq!(status, 200, "{reply}");
    assert_eq!((reply["type"].as_str(), reply["content"][0]["type"].as_str()), (Some("message"), Some("text")));
    let output = reply["usage"]["output_tokens"].as_u64().unwrap();
    assert_eq!(headers["x-amzn-bedrock-output-token-count"].to_str().unwrap(), output.to_string());

    let (status, headers, frames) = post(&env, CLAUDE, "invoke-with-response-stream", Some(KEY), &body).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/vnd.amazon.eventstream");
    let events = events(&frames, true);
    assert_eq!(events.first().map(|(e, _)| e.as_str()), Some("message_start"), "{events:?}");
    assert_eq!(events.last().map(|(e, _)| e.as_str()), Some("message_stop"), "{events:?}");
    assert!(events.iter().any(|(_, d)| d["delta"]["text"].as_str().is_some_and(|t| !t.is_empty())), "{events:?}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_bedrock_errors_naming_the_field() {
    let env = start(sim(), &policy("")).await;
    let refused = async |model: &str, operation: &str, key: Option<&str>, body: &Value| {
        let (status, headers, bytes) = post(&env, model, operation, key, body).await;
        let body = json_of(&bytes);
        let message = body["message"].as_str().unwrap_or_else(|| panic!("{body}")).to_owned();
        (status, error_type(&headers).to_owned(), message)
    };

    // A content block sluice cannot carry, named by its path.
    let mut document = converse();
    document["messages"][0]["content"] = json!([{"text": "read"}, {"document": {"name": "d", "format": "pdf"}}]);
    let (status, kind, message) = refused(CLAUDE, "converse", Some(KEY), &document).await;
    assert_eq!((status, kind.as_str()), (400, "ValidationException"), "{message}");
    assert!(message.contains("messages[0].content[1]"), "{message}");
    // A cache point of the wrong type.
    let mut point = converse();
    point["system"] = json!([{"text": "rules"}, {"cachePoint": {"type": "ephemeral"}}]);
    let (status, kind, message) = refused(CLAUDE, "converse-stream", Some(KEY), &point).await;
    assert_eq!((status, kind.as_str()), (400, "ValidationException"));
    assert!(message.contains("system[1].cachePoint.type"), "{message}");
    // Not JSON; InvokeModel without its version.
    let (status, kind, _) = refused(CLAUDE, "converse", Some(KEY), &json!("text")).await;
    assert_eq!((status, kind.as_str()), (400, "ValidationException"));
    let no_version = json!({"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let (status, kind, message) = refused(CLAUDE, "invoke", Some(KEY), &no_version).await;
    assert_eq!((status, kind.as_str()), (400, "ValidationException"));
    assert!(message.contains("anthropic_version"), "{message}");
    // The road's own validation, named too.
    let mut zero = converse();
    zero["inferenceConfig"]["maxTokens"] = json!(0);
    let (status, kind, message) = refused(CLAUDE, "converse", Some(KEY), &zero).await;
    assert_eq!((status, kind.as_str()), (400, "ValidationException"));
    assert!(message.contains("max_tokens"), "{message}");

    let (status, kind, message) = refused("anthropic.unknown-v9%3A0", "converse", Some(KEY), &converse()).await;
    assert_eq!((status, kind.as_str()), (404, "ResourceNotFoundException"), "{message}");
    assert!(message.contains("anthropic.unknown-v9:0"), "the decoded model id: {message}");
    let (status, kind, _) = refused(CLAUDE, "converse", None, &converse()).await;
    assert_eq!((status, kind.as_str()), (403, "AccessDeniedException"));
    let (status, kind, message) = refused(CLAUDE, "converse", Some("sk-nobody"), &converse()).await;
    assert_eq!((status, kind.as_str()), (403, "AccessDeniedException"));
    assert!(message.contains("invalid API key"), "{message}");
    let (status, kind, _) = refused(CLAUDE, "apply-guardrail", Some(KEY), &converse()).await;
    assert_eq!((status, kind.as_str()), (404, "UnknownOperationException"));

    assert_eq!(env.sim.stats().served, 0, "nothing refused reached the provider");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_429_is_a_throttling_exception_with_its_retry_after() {
    let env = start(sim(), &policy("limits = { rpm = 1 }\n")).await;
    let (status, _, body) = post(&env, CLAUDE, "converse", Some(KEY), &converse()).await;
    assert_eq!(status, 200, "{}", json_of(&body));
    let (status, headers, body) = post(&env, CLAUDE, "converse", Some(KEY), &converse()).await;
    let body = json_of(&body);
    assert_eq!((status, error_type(&headers)), (429, "ThrottlingException"), "{body}");
    assert!(headers["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1, "{headers:?}");
    assert!(body["message"].as_str().unwrap().contains("rate limit"), "sluice's own words: {body}");
    assert_eq!(headers["x-sluice-ratelimit-scope"], "api_key");
    // Usage was counted for the caller's request that went through.
    assert_eq!(env.sim.stats().served, 1);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_provider_drops_ends_with_an_exception_frame() {
    let sim = SimConfig::from_toml_str(
        "seed = 4\n[latency]\nchunk_tokens = 3\n[[models]]\nname = \"claude-sonnet-4-5\"\nshape = \"anthropic\"\n\
         completion = { dist = \"fixed\", tokens = 30 }\nfaults = { stream_drop = 1.0, stream_drop_after_chunks = 2 }\n",
    )
    .unwrap();
    let env = start(sim, &policy("")).await;
    let mut body = converse();
    body["inferenceConfig"]["maxTokens"] = json!(64);
    let (status, _, frames) = post(&env, CLAUDE, "converse-stream", Some(KEY), &body).await;
    assert_eq!(status, 200);
    let events = events(&frames, false);
    let text: String = events.iter().filter_map(|(_, d)| d["delta"]["text"].as_str()).collect::<Vec<_>>().concat();
    assert!(!text.is_empty(), "the partial answer came first: {events:?}");
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "error", "{events:?}");
    let message = data["error"]["message"].as_str().unwrap();
    assert!(message.contains("modelStreamErrorException"), "an exception frame of Bedrock's kind: {message}");
    assert!(!events.iter().any(|(e, _)| e == "message_stop"), "{events:?}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_counts_the_input_the_gateway_would_reserve_without_calling_the_provider() {
    let env = start(sim(), &policy("")).await;
    let converse = json!({"input": {"converse": {"messages": converse()["messages"], "system": converse()["system"]}}});
    let (status, _, body) = post(&env, CLAUDE, "count-tokens", Some(KEY), &converse).await;
    let body = json_of(&body);
    assert_eq!(status, 200, "{body}");
    let tokens = body["inputTokens"].as_u64().unwrap();
    // The same count as Anthropic's endpoint gives for the same input.
    let anthropic = json!({"model": "anthropic.claude-v1:0", "system": [{"type": "text", "text": "be brief"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]});
    let (_, _, same) = env.post("/v1/messages/count_tokens", KEY, &anthropic).await;
    assert_eq!(same["input_tokens"].as_u64(), Some(tokens), "{same}");
    assert!(tokens > 0);

    let (status, headers, body) = post(&env, CLAUDE, "count-tokens", Some(KEY), &json!({"input": {}})).await;
    assert_eq!((status, error_type(&headers)), (400, "ValidationException"), "{}", json_of(&body));
    let (status, headers, _) = post(&env, CLAUDE, "count-tokens", None, &converse).await;
    assert_eq!((status, error_type(&headers)), (403, "AccessDeniedException"));
    let (status, headers, _) = post(&env, "nope", "count-tokens", Some(KEY), &converse).await;
    assert_eq!((status, error_type(&headers)), (404, "ResourceNotFoundException"));
    assert_eq!(env.sim.stats().served, 0, "counted by the gateway alone");
    env.shutdown().await;
}
