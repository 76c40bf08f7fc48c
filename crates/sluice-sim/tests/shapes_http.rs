//! Response shapes over real HTTP: OpenAI chat (plain and SSE), embeddings, models,
//! Anthropic messages (plain and SSE), errors, tenants and duplicate markers.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::tokens::{Encoding, Tokenizer};

const CONFIG: &str = r#"seed = 3
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 12 }
limits = { rpm = 1000, tpm = 100000 }
[[models]]
name = "text-embedding-3-small"
embedding_dims = 8
[[models]]
name = "claude-sonnet"
shape = "anthropic"
completion = { dist = "fixed", tokens = 7 }
limits = { rpm = 1000, itpm = 100000, otpm = 100000 }
[[models]]
name = "gemini-flash"
flavor = "gemini"
limits = { rpm = 1 }
[[models]]
name = "azure-gpt"
flavor = "azure"
limits = { tpm = 10000 }
"#;

#[tokio::test]
async fn openai_chat_reports_real_prompt_tokens_and_generated_output() {
    let sim = start(CONFIG).await;
    let client = client();
    let response = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hello world", 100)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "application/json");
    assert_eq!(header(&response, "x-ratelimit-remaining-requests"), "999");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    let t = Tokenizer::new(Encoding::O200kBase);
    let prompt = 3 + t.count("user") + t.count("hello world") + 3;
    assert_eq!(body["usage"]["prompt_tokens"], prompt);
    assert_eq!(body["usage"]["completion_tokens"], 12);
    assert_eq!(body["usage"]["total_tokens"], prompt + 12);
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(t.count(content), 12);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    // max_tokens caps the completion and ends it with `length`.
    let capped: Value =
        post(&client, &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hi", 5)).await.json().await.unwrap();
    assert_eq!(capped["usage"]["completion_tokens"], 5);
    assert_eq!(capped["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn openai_stream_ends_with_usage_and_done() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = chat("gpt-4o-mini", "hello", 100);
    body["stream"] = true.into();
    body["stream_options"] = json!({"include_usage": true});
    let response = post(&client, &sim, "/v1/chat/completions", &body).await;
    assert!(header(&response, "content-type").starts_with("text/event-stream"));
    let events = read_sse(response).await.unwrap();
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(Tokenizer::new(Encoding::O200kBase).count(&text), 12);
    let usage_chunk = chunks.last().unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"]["completion_tokens"], 12);
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");
    assert!(chunks[..chunks.len() - 1].iter().all(|c| c["usage"].is_null()));
    // Without include_usage there is no usage chunk and no usage field.
    body["stream_options"] = Value::Null;
    let events = read_sse(post(&client, &sim, "/v1/chat/completions", &body).await).await.unwrap();
    let last: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(last.get("usage").is_none());
    assert_eq!(sim.stats().served, 2);
}

#[tokio::test]
async fn embeddings_and_models() {
    let sim = start(CONFIG).await;
    let client = client();
    let body = json!({"model": "text-embedding-3-small", "input": ["hello world", "bye"]});
    let response: Value = post(&client, &sim, "/v1/embeddings", &body).await.json().await.unwrap();
    assert_eq!(response["data"].as_array().unwrap().len(), 2);
    assert_eq!(response["data"][0]["embedding"].as_array().unwrap().len(), 8);
    assert_eq!(response["usage"]["prompt_tokens"], 3);
    let body = json!({"model": "text-embedding-3-small", "input": "x", "encoding_format": "base64"});
    let response: Value = post(&client, &sim, "/v1/embeddings", &body).await.json().await.unwrap();
    assert_eq!(response["data"][0]["embedding"].as_str().unwrap().len(), 44);
    let models: Value = client.get(format!("{}/v1/models", sim.url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"].as_array().unwrap().len(), 5);
    let anthropic: Value = client
        .get(format!("{}/v1/models", sim.url()))
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(anthropic["data"][0]["id"], "claude-sonnet");
    assert_eq!(anthropic["has_more"], false);
}

#[tokio::test]
async fn invalid_requests_get_the_providers_errors() {
    let sim = start(CONFIG).await;
    let client = client();
    let url = format!("{}/v1/chat/completions", sim.url());
    let bad_json = client.post(&url).body("{not json").send().await.unwrap();
    assert_eq!(bad_json.status(), 400);
    let body: Value = bad_json.json().await.unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let no_model: Value =
        post(&client, &sim, "/v1/chat/completions", &json!({"messages": []})).await.json().await.unwrap();
    assert_eq!(no_model["error"]["message"], "you must provide a model parameter");
    let no_messages = post(&client, &sim, "/v1/chat/completions", &json!({"model": "gpt-4o-mini"})).await;
    assert_eq!(no_messages.status(), 400);
    assert_eq!(no_messages.json::<Value>().await.unwrap()["error"]["param"], "messages");
    let unknown = post(&client, &sim, "/v1/chat/completions", &chat("gpt-9", "hi", 5)).await;
    assert_eq!(unknown.status(), 404);
    assert_eq!(unknown.json::<Value>().await.unwrap()["error"]["code"], "model_not_found");
    // An Anthropic model is not served on the OpenAI route, and vice versa.
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &chat("claude-sonnet", "hi", 5)).await.status(), 404);
    let missing = post(&client, &sim, "/v1/messages", &message("gpt-4o-mini", "hi", 5)).await;
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!((body["type"].as_str(), body["error"]["type"].as_str()), (Some("error"), Some("not_found_error")));
    let no_max = post(
        &client,
        &sim,
        "/v1/messages",
        &json!({"model": "claude-sonnet", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(no_max.status(), 400);
    assert_eq!(no_max.json::<Value>().await.unwrap()["error"]["message"], "max_tokens: Field required");
    assert_eq!(sim.stats().invalid, 7);
}

#[tokio::test]
async fn anthropic_messages_plain_and_streamed() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = message("claude-sonnet", "hello", 100);
    body["system"] = "be brief".into();
    let response = post(&client, &sim, "/v1/messages", &body).await;
    assert_eq!(header(&response, "anthropic-ratelimit-requests-limit"), "1000");
    assert_eq!(header(&response, "anthropic-ratelimit-tokens-limit"), "100000");
    let plain: Value = response.json().await.unwrap();
    let t = Tokenizer::new(Encoding::Cl100kBase);
    assert_eq!(plain["type"], "message");
    assert_eq!(plain["content"][0]["type"], "text");
    assert_eq!(plain["usage"]["input_tokens"], t.count("be brief") + 3 + t.count("hello"));
    assert_eq!(plain["usage"]["output_tokens"], 7);
    assert_eq!(plain["stop_reason"], "end_turn");

    body["stream"] = true.into();
    let events = read_sse(post(&client, &sim, "/v1/messages", &body).await).await.unwrap();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_deref().unwrap()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    assert!(names[3..names.len() - 3].iter().all(|n| *n == "content_block_delta"));
    for (name, data) in &events {
        let value: Value = serde_json::from_str(data).unwrap();
        assert_eq!(value["type"].as_str(), name.as_deref());
    }
    let delta: Value = serde_json::from_str(&events[events.len() - 2].1).unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 7);
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn tenants_and_duplicate_markers_are_counted() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = chat("gpt-4o-mini", "do it req-id:job-1", 100);
    body["user"] = "alice".into();
    for _ in 0..3 {
        assert_eq!(post(&client, &sim, "/v1/chat/completions", &body).await.status(), 200);
    }
    let other = chat("gpt-4o-mini", "req-id:job-2", 100);
    let response = client
        .post(format!("{}/v1/chat/completions", sim.url()))
        .header("x-sim-tenant", "bob")
        .json(&other)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut anthropic = message("claude-sonnet", "req-id:job-2", 10);
    anthropic["metadata"] = json!({"user_id": "carol"});
    assert_eq!(post(&client, &sim, "/v1/messages", &anthropic).await.status(), 200);
    let stats = stats_over_http(&client, &sim).await;
    assert_eq!(stats.tenants["alice"].served, 3);
    assert_eq!(stats.tenants["bob"].served, 1);
    assert_eq!(stats.tenants["carol"].output_tokens, 7);
    assert_eq!(stats.markers, 2);
    assert_eq!(stats.duplicates, 2);
    assert_eq!(stats.duplicate_completions, 3);
    assert_eq!(stats.models["claude-sonnet"].served, 1);
    assert_eq!(stats.timeline.iter().map(|s| s.requests).sum::<u64>(), 5);
}

#[tokio::test]
async fn gemini_and_azure_flavours() {
    let sim = start(CONFIG).await;
    let client = client();
    let gemini = "/v1beta/openai/chat/completions";
    assert_eq!(post(&client, &sim, gemini, &chat("gemini-flash", "hi", 5)).await.status(), 200);
    let limited = post(&client, &sim, gemini, &chat("gemini-flash", "hi", 5)).await;
    assert_eq!(limited.status(), 429);
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
    let details = body["error"]["details"].as_array().unwrap();
    let retry = details.iter().find(|d| d["@type"] == "type.googleapis.com/google.rpc.RetryInfo").unwrap();
    let delay = retry["retryDelay"].as_str().unwrap();
    assert!(delay.ends_with('s') && delay.trim_end_matches('s').parse::<u64>().unwrap() >= 1, "{delay}");
    // Azure: RPM derived from TPM (6 per 1,000).
    let ok = post(&client, &sim, "/v1/chat/completions", &chat("azure-gpt", "hi", 5)).await;
    assert_eq!(header(&ok, "x-ratelimit-limit-requests"), "60");
    // 1,500 tokens into a window already holding some: over its 1,000-token allowance.
    let big = post(&client, &sim, "/v1/chat/completions", &chat("azure-gpt", "hi", 1500)).await;
    assert_eq!(big.status(), 429);
    assert!(big.headers().contains_key("retry-after-ms"));
    let body: Value = big.json().await.unwrap();
    assert_eq!(body["error"]["code"], "429");
    assert!(body["error"]["message"].as_str().unwrap().contains("token rate limit"));
}
