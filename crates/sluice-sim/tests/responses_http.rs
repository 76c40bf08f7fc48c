//! `POST /v1/responses` over real HTTP: the response object, the typed event stream with
//! usage on `response.completed`, and the same RPM/TPM limits and 429s as chat.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::tokens::{Encoding, Tokenizer};

const CONFIG: &str = r#"seed = 3
[[models]]
name = "gpt-4o-mini"
completion = { dist = "fixed", tokens = 12 }
limits = { rpm = 1000, tpm = 6000 }
"#;

fn responses(input: &str, max_output_tokens: u64) -> Value {
    json!({"model": "gpt-4o-mini", "input": input, "instructions": "Be brief.", "max_output_tokens": max_output_tokens})
}

#[tokio::test]
async fn a_plain_response_reports_input_and_output_usage() {
    let sim = start(CONFIG).await;
    let response = post(&client(), &sim, "/v1/responses", &responses("hello world", 100)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-ratelimit-limit-tokens"), "6000");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "response");
    assert_eq!(body["status"], "completed");
    assert!(body["id"].as_str().unwrap().starts_with("resp_"));
    let t = Tokenizer::new(Encoding::O200kBase);
    let input = 3 + t.message("system", ["Be brief."], None) + t.message("user", ["hello world"], None);
    assert_eq!(body["usage"]["input_tokens"], input);
    assert_eq!(body["usage"]["output_tokens"], 12);
    assert_eq!(body["usage"]["total_tokens"], input + 12);
    assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(body["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
    let text = body["output"][0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(body["output"][0]["content"][0]["type"], "output_text");
    assert_eq!(t.count(text), 12);
    // A missing input is a 400 naming it.
    let bad = post(&client(), &sim, "/v1/responses", &json!({"model": "gpt-4o-mini"})).await;
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.json::<Value>().await.unwrap()["error"]["param"], "input");
}

#[tokio::test]
async fn a_stream_follows_the_event_sequence_and_completes_with_usage() {
    let sim = start(CONFIG).await;
    let mut body = responses("hello", 100);
    body["stream"] = true.into();
    let response = post(&client(), &sim, "/v1/responses", &body).await;
    assert!(header(&response, "content-type").starts_with("text/event-stream"));
    let events = read_sse(response).await.unwrap();
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_deref().unwrap_or("")).collect();
    let deltas = names.iter().filter(|n| **n == "response.output_text.delta").count();
    assert!(deltas >= 1);
    let mut expected =
        vec!["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"];
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names, expected);
    let data: Vec<Value> = events.iter().map(|(_, d)| serde_json::from_str(d).unwrap()).collect();
    assert!(data.iter().enumerate().all(|(i, d)| d["sequence_number"] == i && d["type"] == names[i]));
    let text: String = data.iter().filter_map(|d| d["delta"].as_str()).collect();
    let done = &data[data.len() - 4];
    assert_eq!(done["text"], text.as_str());
    let completed = &data[data.len() - 1]["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(completed["usage"]["output_tokens"], 12);
    assert_eq!(completed["output"][0]["content"][0]["text"], text.as_str());
}

#[tokio::test]
async fn responses_spend_the_models_tpm_and_are_refused_with_a_429() {
    let sim = start(CONFIG).await;
    // Each request costs its input plus its 490-token cap, as chat does: the 1 s window
    // of a 6,000 TPM limit holds 600 tokens, so the second is refused on tokens.
    assert_eq!(post(&client(), &sim, "/v1/responses", &responses("hi", 490)).await.status(), 200);
    let limited = post(&client(), &sim, "/v1/responses", &responses("hi", 490)).await;
    assert_eq!(limited.status(), 429);
    assert!(!header(&limited, "retry-after").is_empty());
    assert!(!header(&limited, "x-ratelimit-remaining-tokens").is_empty());
    let body: Value = limited.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(body["error"]["type"], "tokens");
}

#[tokio::test]
async fn a_continued_response_is_charged_the_context_the_previous_one_left() {
    let sim = start(CONFIG).await;
    let first: Value = post(&client(), &sim, "/v1/responses", &responses("hello", 100)).await.json().await.unwrap();
    let left = first["usage"]["total_tokens"].as_u64().unwrap();
    let own = first["usage"]["input_tokens"].as_u64().unwrap();
    let mut next = responses("hello", 100);
    next["previous_response_id"] = first["id"].clone();
    let mut streamed = next.clone();
    let second: Value = post(&client(), &sim, "/v1/responses", &next).await.json().await.unwrap();
    assert_eq!(second["usage"]["input_tokens"], left + own);
    // A streamed continuation is charged the same, and leaves its own context behind.
    streamed["stream"] = true.into();
    let events = read_sse(post(&client(), &sim, "/v1/responses", &streamed).await).await.unwrap();
    let completed: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert_eq!(completed["response"]["usage"]["input_tokens"], left + own);
    next["previous_response_id"] = completed["response"]["id"].clone();
    let third: Value = post(&client(), &sim, "/v1/responses", &next).await.json().await.unwrap();
    assert_eq!(third["usage"]["input_tokens"], left + own + 12 + own);
    next["previous_response_id"] = "resp_unknown".into();
    let unknown = post(&client(), &sim, "/v1/responses", &next).await;
    assert_eq!(unknown.status(), 400);
    assert_eq!(unknown.json::<Value>().await.unwrap()["error"]["param"], "previous_response_id");
}
