//! AWS Bedrock through the gateway over HTTP against the simulated provider: OpenAI- and
//! Anthropic-shaped clients, plain and streaming, reach a Bedrock deployment over the
//! Converse API with SigV4 (the simulator verifies the signature and serves Bedrock models
//! nowhere else); a wrong secret is the gateway's 502; a `ThrottlingException` is retried;
//! the output weight prices admission. Extended thinking with tool use keeps its signed
//! reasoning from turn to turn (plain and streamed, Converse and InvokeModel), cache
//! breakpoints reach Bedrock as cache points and cache reads come back, and the client's
//! `anthropic-beta` flags reach Bedrock in the body.
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

/// A `POST /v1/messages` with the client's `anthropic-beta` header.
async fn post_with_betas(env: &Env, body: &Value, betas: &str) -> (u16, Value) {
    let response = env
        .http
        .post(format!("{}/v1/messages", env.gateway.url()))
        .bearer_auth(KEY)
        .header("anthropic-beta", betas)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn invoke_policy(file: &tempfile::NamedTempFile) -> String {
    policy(file, "").replacen("region = \"us-east-1\"", "region = \"us-east-1\"\nbedrock_api = \"invoke\"", 1)
}

fn thinking_turn(messages: &Value, stream: bool) -> Value {
    json!({"model": "claude", "max_tokens": 2048, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get_weather", "description": "The weather of a city", "input_schema": {"type": "object"}}],
        "messages": messages})
}

/// The content blocks of an Anthropic SSE answer, put together as the SDKs do: text and
/// thinking deltas appended, the signature set, tool input parsed.
fn streamed_content(sse: &str) -> Vec<Value> {
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial: Vec<String> = Vec::new();
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).unwrap();
        let index = usize::try_from(event["index"].as_u64().unwrap_or(0)).unwrap();
        match event["type"].as_str().unwrap_or_default() {
            "content_block_start" => {
                blocks.push(event["content_block"].clone());
                partial.push(String::new());
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                let block = &mut blocks[index];
                match delta["type"].as_str().unwrap_or_default() {
                    "thinking_delta" => {
                        block["thinking"] = json!(format!(
                            "{}{}",
                            block["thinking"].as_str().unwrap(),
                            delta["thinking"].as_str().unwrap()
                        ))
                    }
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "text_delta" => {
                        block["text"] =
                            json!(format!("{}{}", block["text"].as_str().unwrap(), delta["text"].as_str().unwrap()))
                    }
                    "input_json_delta" => partial[index].push_str(delta["partial_json"].as_str().unwrap()),
                    other => assert_eq!(other, "a delta a client reads", "{sse}"),
                }
            }
            "content_block_stop" if blocks[index]["type"] == "tool_use" => {
                blocks[index]["input"] = serde_json::from_str(&partial[index]).unwrap();
            }
            _ => {}
        }
    }
    blocks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extended_thinking_with_tool_use_keeps_its_signed_reasoning_from_turn_to_turn() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    for (surface, policy) in [("converse", policy(&file, "")), ("invoke", invoke_policy(&file))] {
        let env = start(sim(Limits::default()), &policy).await;
        for stream in [false, true] {
            // The streamed conversation also asks for redacted reasoning (Anthropic's test string).
            let ask = if stream {
                format!("Weather in Paris? call-tool:get_weather {}", sluice_sim::anthropic::thinking::REDACTED_TRIGGER)
            } else {
                "Weather in Paris? call-tool:get_weather".to_owned()
            };
            let mut messages = json!([{"role": "user", "content": ask}]);
            let (status, _, first) = env.post("/v1/messages", KEY, &thinking_turn(&messages, stream)).await;
            assert_eq!(status, 200, "{surface} {first}");
            let content = if stream {
                streamed_content(first.as_str().unwrap())
            } else {
                first["content"].as_array().unwrap().clone()
            };
            let kinds: Vec<&str> = content.iter().map(|b| b["type"].as_str().unwrap()).collect();
            let expected: &[&str] =
                if stream { &["redacted_thinking", "thinking", "tool_use"] } else { &["thinking", "tool_use"] };
            assert_eq!(kinds, expected, "{surface} stream={stream}: {content:?}");
            let thinking = content.iter().find(|b| b["type"] == "thinking").unwrap();
            assert!(
                thinking["signature"].as_str().is_some_and(|s| !s.is_empty()),
                "the signature reaches the client: {thinking}"
            );
            assert!(!thinking["thinking"].as_str().unwrap().is_empty());

            let call = content.iter().find(|b| b["type"] == "tool_use").unwrap();
            let answer = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "sunny, 21°C"}]});
            let with = |assistant: Vec<Value>| {
                let mut turns = messages.as_array().unwrap().clone();
                turns.push(json!({"role": "assistant", "content": assistant}));
                turns.push(answer.clone());
                Value::Array(turns)
            };

            // Without its reasoning, or with it altered, Bedrock refuses the second turn.
            let (status, _, refused) =
                env.post("/v1/messages", KEY, &thinking_turn(&with(vec![call.clone()]), false)).await;
            assert_eq!(status, 400, "{surface} {refused}");
            assert_eq!(refused["error"]["type"], "invalid_request_error", "{refused}");
            assert!(
                refused["error"]["message"].as_str().unwrap().contains("must start with a thinking block"),
                "{refused}"
            );
            let mut altered = content.clone();
            let at = kinds.iter().position(|k| *k == "thinking").unwrap();
            altered[at]["thinking"] = json!("A different line of thought.");
            let (status, _, refused) = env.post("/v1/messages", KEY, &thinking_turn(&with(altered), false)).await;
            assert_eq!(status, 400, "{surface} {refused}");
            assert!(refused["error"]["message"].as_str().unwrap().contains("Invalid `signature`"), "{refused}");

            // As it came, in its order: the second turn and a third succeed.
            messages = with(content.clone());
            let (status, _, second) = env.post("/v1/messages", KEY, &thinking_turn(&messages, stream)).await;
            assert_eq!(status, 200, "{surface} stream={stream}: {second}");
            let reply = if stream {
                streamed_content(second.as_str().unwrap())
            } else {
                second["content"].as_array().unwrap().clone()
            };
            assert_eq!(reply.last().unwrap()["type"], "text", "{reply:?}");
            let mut turns = messages.as_array().unwrap().clone();
            turns.push(json!({"role": "assistant", "content": reply}));
            turns.push(json!({"role": "user", "content": "Thanks. And tomorrow?"}));
            let (status, _, third) = env.post("/v1/messages", KEY, &thinking_turn(&Value::Array(turns), false)).await;
            assert_eq!(status, 200, "{surface} {third}");
        }
        env.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_breakpoints_reach_bedrock_as_cache_points_and_cache_reads_come_back() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    let mut config = sim(Limits::default());
    config.models[0].prompt_cache = true;
    let env = start(config, &policy(&file, "")).await;
    // Past the 1,024 tokens a prefix needs to be cached.
    let rules = "Answer in the house style. ".repeat(300);
    let body = json!({"model": "claude", "max_tokens": 16,
        "tools": [{"name": "lookup", "description": "Look a word up", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "system": [{"type": "text", "text": rules, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}]});
    let (status, _, first) = env.post("/v1/messages", KEY, &body).await;
    assert_eq!(status, 200, "{first}");
    let written = first["usage"]["cache_creation_input_tokens"].as_u64().unwrap();
    assert!(written >= 1024, "cacheWriteInputTokens comes back as cache_creation_input_tokens: {first}");
    assert_eq!(first["usage"]["cache_read_input_tokens"], 0, "{first}");
    let (status, _, second) = env.post("/v1/messages", KEY, &body).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["usage"]["cache_read_input_tokens"].as_u64(), Some(written), "cacheReadInputTokens: {second}");
    let stats = env.sim.stats();
    assert_eq!((stats.served, stats.invalid), (2, 0));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_beta_flags_reach_bedrock_in_the_body_of_both_apis() {
    let file = credentials(SIM_SECRET_ACCESS_KEY);
    for (surface, policy) in [("converse", policy(&file, "")), ("invoke", invoke_policy(&file))] {
        let env = start(sim(Limits::default()), &policy).await;
        // A thinking budget past max_tokens needs interleaved thinking, a beta.
        let body = json!({"model": "claude", "max_tokens": 1500, "thinking": {"type": "enabled", "budget_tokens": 4000},
            "messages": [{"role": "user", "content": "hello there"}]});
        let (status, refused) = post_with_betas(&env, &body, "context-1m-2025-08-07").await;
        assert_eq!(status, 400, "{surface}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("budget_tokens"), "{refused}");
        let (status, answer) =
            post_with_betas(&env, &body, "context-1m-2025-08-07, interleaved-thinking-2025-05-14").await;
        assert_eq!(status, 200, "{surface}: {answer}");
        assert_eq!(answer["content"][0]["type"], "thinking", "{answer}");
        let (status, refused) = post_with_betas(&env, &body, "Not A Flag").await;
        assert_eq!(status, 400, "{surface}: {refused}");
        env.shutdown().await;
    }
}
