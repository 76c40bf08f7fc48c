//! Tool calls over real HTTP: a `call-tool:<name>` marker or a forcing `tool_choice` makes
//! the answer a call to that tool, plain and streamed, in both shapes.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::tokens::{Encoding, Tokenizer};
use sluice_sim::tools::ARGUMENTS;

const CONFIG: &str = r#"seed = 5
[latency]
chunk_tokens = 2
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 12 }
[[models]]
name = "claude-sonnet"
shape = "anthropic"
completion = { dist = "fixed", tokens = 7 }
"#;

fn openai_tools() -> Value {
    json!([{"type": "function", "function": {"name": "search", "description": "Search",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}])
}

fn anthropic_tools() -> Value {
    json!([{"name": "search", "description": "Search",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}])
}

fn call_tokens(enc: Encoding) -> u64 {
    let t = Tokenizer::new(enc);
    t.count("search") + t.count(ARGUMENTS)
}

#[tokio::test]
async fn openai_marker_gives_a_tool_call_and_text_without_it() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = chat("gpt-4o-mini", "find it call-tool:search", 100);
    body["tools"] = openai_tools();
    let reply: Value = post(&client, &sim, "/v1/chat/completions", &body).await.json().await.unwrap();
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert!(choice["message"]["content"].is_null());
    let call = &choice["message"]["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "search");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"query": "sluice"}));
    assert_eq!(reply["usage"]["completion_tokens"], call_tokens(Encoding::O200kBase));

    // The same tools without the marker: a text answer.
    body["messages"][0]["content"] = "just talk".into();
    let reply: Value = post(&client, &sim, "/v1/chat/completions", &body).await.json().await.unwrap();
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert!(reply["choices"][0]["message"].get("tool_calls").is_none());
    assert_eq!(reply["usage"]["completion_tokens"], 12);
}

#[tokio::test]
async fn openai_streamed_tool_call_carries_argument_fragments() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = chat("gpt-4o-mini", "hello", 100);
    body["tools"] = openai_tools();
    body["tool_choice"] = json!({"type": "function", "function": {"name": "search"}});
    body["stream"] = true.into();
    body["stream_options"] = json!({"include_usage": true});
    let events = read_sse(post(&client, &sim, "/v1/chat/completions", &body).await).await.unwrap();
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1].iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert_eq!(first["tool_calls"][0]["function"]["name"], "search");
    assert!(first["tool_calls"][0]["id"].as_str().unwrap().starts_with("call_"));
    let fragments: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert!(fragments.iter().filter(|f| !f.is_empty()).count() >= 2, "{fragments:?}");
    assert_eq!(fragments.concat(), ARGUMENTS);
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], call_tokens(Encoding::O200kBase));
}

#[tokio::test]
async fn anthropic_tool_use_plain_and_streamed() {
    let sim = start(CONFIG).await;
    let client = client();
    let mut body = message("claude-sonnet", "hello", 100);
    body["tools"] = anthropic_tools();
    body["tool_choice"] = json!({"type": "any"});
    let reply: Value = post(&client, &sim, "/v1/messages", &body).await.json().await.unwrap();
    assert_eq!(reply["stop_reason"], "tool_use");
    let block = &reply["content"][0];
    assert_eq!(block["type"], "tool_use");
    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));
    assert_eq!(block["name"], "search");
    assert_eq!(block["input"], json!({"query": "sluice"}));
    assert_eq!(reply["usage"]["output_tokens"], call_tokens(Encoding::Cl100kBase));

    let mut body = message("claude-sonnet", "please call-tool:search", 100);
    body["tools"] = anthropic_tools();
    body["stream"] = true.into();
    let events = read_sse(post(&client, &sim, "/v1/messages", &body).await).await.unwrap();
    let named = |name: &str| events.iter().filter(|(n, _)| n.as_deref() == Some(name)).count();
    assert_eq!(named("content_block_start"), 1);
    assert_eq!(named("content_block_stop"), 1);
    let start: Value =
        serde_json::from_str(&events.iter().find(|(n, _)| n.as_deref() == Some("content_block_start")).unwrap().1)
            .unwrap();
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["name"], "search");
    assert_eq!(start["content_block"]["input"], json!({}));
    let partial: String = events
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| {
            let delta: Value = serde_json::from_str(d).unwrap();
            assert_eq!(delta["delta"]["type"], "input_json_delta");
            delta["delta"]["partial_json"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(partial, ARGUMENTS);
    let delta: Value =
        serde_json::from_str(&events.iter().find(|(n, _)| n.as_deref() == Some("message_delta")).unwrap().1).unwrap();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], call_tokens(Encoding::Cl100kBase));
    assert_eq!(events.last().unwrap().0.as_deref(), Some("message_stop"));
    assert_eq!(sim.stats().tokens.output_used, 2 * call_tokens(Encoding::Cl100kBase));
}
