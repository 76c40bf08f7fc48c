//! Non-stream response translation, Anthropic message ⇄ OpenAI chat completion.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers fail loudly")]

use serde_json::{Value, json};
use sluice_provider::{
    Protocol, Usage, anthropic_to_openai_response, openai_to_anthropic_response, usage_from_response,
};

const CREATED: u64 = 1_730_000_000;

fn to_openai(body: &Value) -> Value {
    let out = anthropic_to_openai_response(&serde_json::to_vec(body).unwrap(), "gpt-4o", CREATED).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn to_anthropic(body: &Value) -> Value {
    let out = openai_to_anthropic_response(&serde_json::to_vec(body).unwrap(), "claude-sonnet-4-5").unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn anthropic_tool_message() -> Value {
    json!({
        "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "text", "text": "I'll check the weather."},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
             "input": {"location": "San Francisco, CA", "unit": "celsius"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2048, "output_tokens": 89}
    })
}

#[test]
fn anthropic_tool_use_message_as_openai_completion() {
    let out = to_openai(&anthropic_tool_message());
    assert_eq!(
        out,
        json!({
            "id": "chatcmpl-01Aq9w938a90dw8q", "object": "chat.completion", "created": CREATED, "model": "gpt-4o",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "I'll check the weather.", "refusal": null,
                "tool_calls": [{"id": "toolu_01A09q90qw90lq917835lq9", "type": "function", "function": {
                    "name": "get_weather", "arguments": "{\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"}"}}]
            }}],
            "usage": {"prompt_tokens": 2520, "completion_tokens": 89, "total_tokens": 2609,
                "prompt_tokens_details": {"cached_tokens": 2048}}
        })
    );
    // The gateway's own usage reader agrees with what the client is told.
    let usage = usage_from_response(Protocol::OpenAiChat, &serde_json::to_vec(&out).unwrap()).unwrap();
    assert_eq!(
        usage,
        Usage {
            input_tokens: 2520,
            output_tokens: 89,
            cache_read_input_tokens: 2048,
            cache_creation_input_tokens: 0,
            reasoning_tokens: 0
        }
    );
}

#[test]
fn openai_tool_call_completion_as_anthropic_message() {
    let completion = json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion", "created": 1741570283,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_fc9f1d7035",
        "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "refusal": null, "annotations": [],
            "tool_calls": [{"id": "call_Dn2RJJSxzDm49vlVTehseJ0k", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris, France\"}"}}]}}],
        "usage": {"prompt_tokens": 1117, "completion_tokens": 17, "total_tokens": 1134,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0}}
    });
    assert_eq!(
        to_anthropic(&completion),
        json!({
            "id": "msg_B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "call_Dn2RJJSxzDm49vlVTehseJ0k", "name": "get_weather",
                "input": {"location": "Paris, France"}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 93, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024, "output_tokens": 17}
        })
    );
}

#[test]
fn stop_reasons_map_both_ways() {
    for (anthropic, openai) in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ] {
        let mut message = anthropic_tool_message();
        message["stop_reason"] = json!(anthropic);
        assert_eq!(to_openai(&message)["choices"][0]["finish_reason"], openai, "{anthropic}");
    }
    for (openai, anthropic) in
        [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"), ("content_filter", "refusal")]
    {
        let completion = json!({"id": "chatcmpl-1", "choices": [{"index": 0, "finish_reason": openai,
            "message": {"role": "assistant", "content": "partial"}}]});
        assert_eq!(to_anthropic(&completion)["stop_reason"], anthropic, "{openai}");
    }
}

#[test]
fn openai_refusal_becomes_refusal_stop() {
    let completion = json!({"id": "chatcmpl-2", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": null, "refusal": "I can't help with that."}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}});
    let out = to_anthropic(&completion);
    assert_eq!(out["content"], json!([{"type": "text", "text": "I can't help with that."}]));
    assert_eq!(out["stop_reason"], "refusal");
    assert_eq!(out["usage"]["input_tokens"], 20);
}

#[test]
fn plain_text_round_trips() {
    let message = json!({"id": "msg_7", "type": "message", "role": "assistant", "model": "x",
        "content": [{"type": "text", "text": "Bonjour"}, {"type": "text", "text": " !"}],
        "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 12, "output_tokens": 3}});
    let openai = to_openai(&message);
    assert_eq!(openai["choices"][0]["message"]["content"], "Bonjour !");
    assert!(openai["choices"][0]["message"].get("tool_calls").is_none());
    let back = to_anthropic(&openai);
    assert_eq!(back["id"], "msg_7");
    assert_eq!(back["content"], json!([{"type": "text", "text": "Bonjour !"}]));
    assert_eq!(back["stop_reason"], "end_turn");
    assert_eq!(back["usage"]["input_tokens"], 12);
    assert_eq!(back["usage"]["output_tokens"], 3);
}

#[test]
fn tool_use_round_trips() {
    let original = anthropic_tool_message();
    let back = to_anthropic(&to_openai(&original));
    assert_eq!(back["content"], original["content"]);
    assert_eq!(back["stop_reason"], original["stop_reason"]);
    assert_eq!(back["usage"], original["usage"]);
}

#[test]
fn bodies_that_are_not_responses_are_errors() {
    let err = anthropic_to_openai_response(b"{\"type\":\"error\",\"error\":{}}", "m", 0).unwrap_err();
    assert_eq!(err.field(), Some("content"));
    let err = openai_to_anthropic_response(b"<html>", "m").unwrap_err();
    assert_eq!(err.field(), Some("body"));
    let bad_args = json!({"id": "c", "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":"}}]}}]});
    let err = openai_to_anthropic_response(&serde_json::to_vec(&bad_args).unwrap(), "m").unwrap_err();
    assert_eq!(err.field(), Some("choices[0].message.tool_calls[0].function.arguments"));
}

#[test]
fn anthropic_thinking_reaches_an_openai_client_as_reasoning_content_and_thinking_blocks() {
    let thought =
        json!({"type": "thinking", "thinking": "I should call the tool.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"});
    let redacted = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"});
    let mut message = anthropic_tool_message();
    let content = message["content"].as_array_mut().unwrap();
    content.insert(0, thought.clone());
    content.insert(0, redacted.clone());
    let out = to_openai(&message);
    let reply = &out["choices"][0]["message"];
    assert_eq!(reply["reasoning_content"], "I should call the tool.");
    assert_eq!(reply["thinking_blocks"], json!([redacted, thought]), "blocks verbatim, in order");
    assert_eq!(reply["content"], "I'll check the weather.");
    assert_eq!(reply["tool_calls"][0]["function"]["name"], "get_weather");
    let plain = to_openai(&anthropic_tool_message());
    let plain = plain["choices"][0]["message"].as_object().unwrap();
    assert!(!plain.contains_key("reasoning_content") && !plain.contains_key("thinking_blocks"));
}
