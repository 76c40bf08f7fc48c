//! An Anthropic client's extended thinking with a Gemini deployment, through both layers
//! (messages → OpenAI chat → `generateContent`, and back), whole and streamed: the thinking
//! budget reaches Gemini, the thought summaries reach the client as `thinking` blocks, and
//! each thought signature goes back on the part that carried it when the client replays
//! the turn as it got it.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers fail loudly")]

use serde_json::{Value, json};
use sluice_provider::{
    ChatUpstream, GeminiToOpenAiStream, OpenAiToAnthropicStream, Protocol, anthropic_to_openai_request,
    gemini_to_openai_response, openai_to_anthropic_response, openai_to_gemini_request, parse_request,
};

const MODEL: &str = "gemini-2.5-flash";

/// The `generateContent` body an Anthropic request becomes toward a Gemini deployment.
fn to_gemini(anthropic: &Value) -> Value {
    let parsed = parse_request(Protocol::AnthropicMessages, &serde_json::to_vec(anthropic).unwrap()).unwrap();
    let mut chat = anthropic_to_openai_request(&parsed, ChatUpstream::Gemini).unwrap();
    chat.insert("model".into(), Value::from(MODEL));
    serde_json::from_slice(&openai_to_gemini_request(&serde_json::to_vec(&chat).unwrap()).unwrap()).unwrap()
}

/// A Gemini answer as the Anthropic client gets it, whole.
fn to_anthropic(gemini: &Value) -> Value {
    let chat = gemini_to_openai_response(gemini.to_string().as_bytes(), "gemini", 1).unwrap();
    serde_json::from_slice(&openai_to_anthropic_response(&chat, "gemini").unwrap()).unwrap()
}

/// A Gemini stream (one `GenerateContentResponse` an event) as the Anthropic client's
/// message, rebuilt from its events as the Anthropic SDK accumulates them.
fn to_anthropic_streamed(events: &[Value]) -> Value {
    let mut decoder = GeminiToOpenAiStream::new("gemini", 1);
    let mut pipe = OpenAiToAnthropicStream::new("gemini");
    let mut wire = Vec::new();
    for event in events {
        let chunk = decoder.push(format!("data: {event}\r\n\r\n").as_bytes());
        wire.extend_from_slice(&pipe.push(&chunk));
    }
    wire.extend_from_slice(&pipe.push(&decoder.finish()));
    wire.extend_from_slice(&pipe.finish());
    accumulate(&String::from_utf8(wire).unwrap())
}

fn accumulate(wire: &str) -> Value {
    let mut content: Vec<Value> = Vec::new();
    let mut stop = Value::Null;
    for data in wire.split("\n\n").filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: "))) {
        let event: Value = serde_json::from_str(data).unwrap();
        match event["type"].as_str().unwrap() {
            "content_block_start" => content.push(event["content_block"].clone()),
            "content_block_delta" => {
                let block = content.last_mut().unwrap();
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap() {
                    "thinking_delta" => append(block, "thinking", &delta["thinking"]),
                    "signature_delta" => block["signature"] = delta["signature"].clone(),
                    "text_delta" => append(block, "text", &delta["text"]),
                    "input_json_delta" => append(block, "partial", &delta["partial_json"]),
                    other => panic!("unexpected delta {other}"),
                }
            }
            "message_delta" => stop = event["delta"]["stop_reason"].clone(),
            "error" => panic!("stream error {event}"),
            _ => {}
        }
    }
    for block in &mut content {
        if let Some(partial) = block.as_object_mut().unwrap().remove("partial") {
            block["input"] = serde_json::from_str(partial.as_str().unwrap()).unwrap();
        }
    }
    json!({"content": content, "stop_reason": stop})
}

fn append(block: &mut Value, key: &str, text: &Value) {
    let held = block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    block[key] = Value::from(held + text.as_str().unwrap());
}

fn request(messages: Value) -> Value {
    json!({
        "model": "gemini", "max_tokens": 4096, "messages": messages,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "tools": [{"name": "weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    })
}

fn call_answer(signature: &str, city: &str) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Looking up the weather.", "thought": true},
            {"functionCall": {"name": "weather", "args": {"city": city}}, "thoughtSignature": signature},
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5, "thoughtsTokenCount": 16},
    })
}

#[test]
fn the_budget_and_the_wish_for_thoughts_reach_gemini() {
    let body = to_gemini(&request(json!([{"role": "user", "content": "Weather in Oslo?"}])));
    assert_eq!(body["generationConfig"]["thinkingConfig"], json!({"thinkingBudget": 2048, "includeThoughts": true}));
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 4096);
    let mut adaptive = request(json!([{"role": "user", "content": "hi"}]));
    adaptive["thinking"] = json!({"type": "adaptive"});
    assert_eq!(to_gemini(&adaptive)["generationConfig"]["thinkingConfig"], json!({"includeThoughts": true}));
    let mut off = request(json!([{"role": "user", "content": "hi"}]));
    off["thinking"] = json!({"type": "disabled"});
    assert!(to_gemini(&off)["generationConfig"].get("thinkingConfig").is_none());
}

#[test]
fn toward_an_openai_deployment_thinking_is_still_refused() {
    let parsed = parse_request(
        Protocol::AnthropicMessages,
        &serde_json::to_vec(&request(json!([{"role": "user", "content": "hi"}]))).unwrap(),
    )
    .unwrap();
    let refused = anthropic_to_openai_request(&parsed, ChatUpstream::OpenAi).unwrap_err();
    assert_eq!(refused.field(), Some("thinking"));
}

#[test]
fn a_signed_call_comes_back_as_a_signed_thinking_block_and_goes_out_on_its_call() {
    for streamed in [false, true] {
        let answer = call_answer("c2lnLW9zbG8=", "Oslo");
        let message = if streamed {
            // Gemini streams the summary, then the call in a later event.
            let parts = answer["candidates"][0]["content"]["parts"].as_array().unwrap();
            to_anthropic_streamed(&[
                json!({"candidates": [{"content": {"role": "model", "parts": [parts[0]]}}]}),
                json!({"candidates": [{"content": {"role": "model", "parts": [parts[1]]}, "finishReason": "STOP"}],
                       "usageMetadata": answer["usageMetadata"]}),
            ])
        } else {
            to_anthropic(&answer)
        };
        let content = message["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "{streamed}: {message}");
        assert_eq!(content[0]["type"], "thinking");
        assert_eq!(content[0]["thinking"], "Looking up the weather.");
        assert_eq!(content[0]["signature"], "gemini:c2lnLW9zbG8=");
        assert_eq!(content[1]["type"], "tool_use");
        assert_eq!(content[1]["input"], json!({"city": "Oslo"}));
        assert_eq!(message["stop_reason"], "tool_use");

        // The client sends the turn back as it got it, with the tool's result.
        let id = content[1]["id"].clone();
        let replay = to_gemini(&request(json!([
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "3 degrees"}]},
        ])));
        let model_turn = &replay["contents"][1];
        assert_eq!(model_turn["role"], "model");
        let parts = model_turn["parts"].as_array().unwrap();
        let call = parts.iter().find(|p| p.get("functionCall").is_some()).unwrap();
        assert_eq!(call["thoughtSignature"], "c2lnLW9zbG8=", "{streamed}: {replay}");
        assert!(parts.iter().all(|p| p.get("thought").is_none()), "no thought text goes back: {replay}");
    }
}

#[test]
fn a_signed_text_answer_keeps_its_signature_on_the_text() {
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Thinking it over.", "thought": true},
            {"text": "It is cold.", "thoughtSignature": "dGV4dA=="},
        ]}, "finishReason": "STOP"}],
    });
    let message = to_anthropic(&answer);
    let content = message["content"].as_array().unwrap();
    assert_eq!(
        content[0],
        json!({"type": "thinking", "thinking": "Thinking it over.", "signature": "gemini:dGV4dA=="})
    );
    assert_eq!(content[1], json!({"type": "text", "text": "It is cold."}));
    let replay = to_gemini(&request(json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "Thanks. And tomorrow?"},
    ])));
    assert_eq!(replay["contents"][1]["parts"], json!([{"text": "It is cold.", "thoughtSignature": "dGV4dA=="}]));

    // Streamed, Gemini 3 sends the text's signature on an empty last part.
    let message = to_anthropic_streamed(&[
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "It is "}]}}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "cold."}]}}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "", "thoughtSignature": "dGV4dA=="}]},
               "finishReason": "STOP"}]}),
    ]);
    let content = message["content"].as_array().unwrap();
    let text: String = content.iter().filter(|b| b["type"] == "text").map(|b| b["text"].as_str().unwrap()).collect();
    assert_eq!(text, "It is cold.");
    let replay = to_gemini(&request(json!([
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "And tomorrow?"},
    ])));
    let parts = replay["contents"][1]["parts"].as_array().unwrap();
    assert_eq!(parts.iter().filter_map(|p| p["thoughtSignature"].as_str()).collect::<Vec<_>>(), ["dGV4dA=="]);
}

#[test]
fn claudes_signatures_never_reach_gemini_and_parallel_calls_keep_theirs() {
    let replay = to_gemini(&request(json!([
        {"role": "user", "content": "Weather in Oslo and Bergen?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two cities.", "signature": "EqQBCkYIBxgCKkBclaude"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
            {"type": "thinking", "thinking": "", "signature": "gemini:Zmlyc3Q="},
            {"type": "tool_use", "id": "call_0", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Bergen"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_0", "content": "3"},
            {"type": "tool_result", "tool_use_id": "call_1", "content": "5"},
        ]},
    ])));
    let parts = replay["contents"][1]["parts"].as_array().unwrap();
    let signatures: Vec<Option<&str>> = parts.iter().map(|p| p["thoughtSignature"].as_str()).collect();
    // Gemini signs only the first call of a step.
    assert_eq!(signatures, [Some("Zmlyc3Q="), None], "{replay}");
    assert!(!replay.to_string().contains("claude"), "{replay}");
}
