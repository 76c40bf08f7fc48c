//! Request translation, OpenAI chat ⇄ Anthropic messages, on real-looking bodies.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers fail loudly")]

use serde_json::{Map, Value, json};
use sluice_provider::{
    ChatUpstream, ParsedRequest, Protocol, TranslateError, anthropic_max_tokens, anthropic_to_openai_request,
    openai_to_anthropic_request, parse_request,
};

fn parsed(protocol: Protocol, body: &Value) -> ParsedRequest {
    parse_request(protocol, &serde_json::to_vec(body).unwrap()).unwrap()
}

fn to_anthropic(body: &Value) -> Result<Map<String, Value>, TranslateError> {
    openai_to_anthropic_request(&parsed(Protocol::OpenAiChat, body), 4096)
}

fn to_openai(body: &Value) -> Result<Map<String, Value>, TranslateError> {
    anthropic_to_openai_request(&parsed(Protocol::AnthropicMessages, body), ChatUpstream::OpenAi)
}

/// Tool-call `arguments` strings parsed, so that key order and spacing do not count.
fn normalized(mut value: Value) -> Value {
    match &mut value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key == "arguments"
                    && let Some(text) = item.as_str()
                {
                    *item = serde_json::from_str(text).unwrap();
                } else {
                    *item = normalized(item.take());
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| *item = normalized(item.take())),
        _ => {}
    }
    value
}

fn unsupported_field(err: TranslateError) -> String {
    match err {
        TranslateError::Unsupported { field, .. } => field,
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn openai_system_and_multi_turn() {
    let body = json!({
        "model": "smart-chat", "max_completion_tokens": 300, "temperature": 1.4, "top_p": 0.9,
        "stop": "\n\nHuman:", "user": "user-42", "stream": true, "stream_options": {"include_usage": true},
        "seed": 7, "frequency_penalty": 0.5,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
            {"role": "user", "content": "Hello"},
            {"role": "user", "name": "bob", "content": "Are you there?"},
            {"role": "assistant", "content": "Oui."},
            {"role": "user", "content": [{"type": "text", "text": "Count to three."}]}
        ]
    });
    let out = to_anthropic(&body).unwrap();
    assert_eq!(
        Value::Object(out),
        json!({
            "model": "smart-chat", "max_tokens": 300, "temperature": 1.0, "top_p": 0.9,
            "stop_sequences": ["\n\nHuman:"], "metadata": {"user_id": "user-42"}, "stream": true,
            "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Answer in French."}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "Are you there?"}]},
                {"role": "assistant", "content": "Oui."},
                {"role": "user", "content": "Count to three."}
            ]
        })
    );
}

#[test]
fn openai_defaults_max_tokens_and_single_system_string() {
    let body = json!({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]});
    let out = to_anthropic(&body).unwrap();
    assert_eq!(out["max_tokens"], 4096);
    assert_eq!(out["system"], "Be brief.");
    assert_eq!(out["messages"], json!([{"role": "user", "content": "Hi"}]));
    assert!(!out.contains_key("stream"));
}

#[test]
fn anthropic_system_and_multi_turn() {
    let body = json!({
        "model": "claude-profile", "max_tokens": 512, "temperature": 0.2, "top_k": 40, "stream": true,
        "stop_sequences": ["END"], "metadata": {"user_id": "u-1"},
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "Hi."}]},
            {"role": "user", "content": [{"type": "text", "text": "Again"}, {"type": "text", "text": "please"}]}
        ]
    });
    assert_eq!(
        Value::Object(to_openai(&body).unwrap()),
        json!({
            "model": "claude-profile", "max_completion_tokens": 512, "temperature": 0.2, "stop": ["END"],
            "user": "u-1", "stream": true, "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi."},
                {"role": "user", "content": [{"type": "text", "text": "Again"}, {"type": "text", "text": "please"}]}
            ]
        })
    );
}

/// An OpenAI agent loop: tools, a parallel tool call, both results, the final question.
fn openai_tool_conversation() -> Value {
    json!({
        "model": "agent", "max_tokens": 1024, "tool_choice": "required", "parallel_tool_calls": false,
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_time", "description": "Local time",
                "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
        ],
        "messages": [
            {"role": "system", "content": "Use tools."},
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call_a1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                {"id": "call_b2", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_a1", "content": "18°C, clear"},
            {"role": "tool", "tool_call_id": "call_b2", "content": [{"type": "text", "text": "14:05"}]},
            {"role": "user", "content": "Thanks, so?"}
        ]
    })
}

#[test]
fn openai_tools_become_anthropic_tool_blocks() {
    let out = to_anthropic(&openai_tool_conversation()).unwrap();
    assert_eq!(out["tool_choice"], json!({"type": "any", "disable_parallel_tool_use": true}));
    assert_eq!(out["tools"][0]["input_schema"]["required"], json!(["city"]));
    assert_eq!(
        out["messages"],
        json!([
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "call_a1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "call_b2", "name": "get_time", "input": {"tz": "Europe/Paris"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a1", "content": "18°C, clear"},
                {"type": "tool_result", "tool_use_id": "call_b2", "content": [{"type": "text", "text": "14:05"}]},
                {"type": "text", "text": "Thanks, so?"}
            ]}
        ])
    );
}

#[test]
fn openai_tool_conversation_round_trips() {
    let original = openai_tool_conversation();
    let anthropic = to_anthropic(&original).unwrap();
    let back = to_openai(&Value::Object(anthropic)).unwrap();
    let mut expected = original["messages"].clone();
    // A lone text part comes back as the equivalent plain string.
    expected[4]["content"] = json!("14:05");
    assert_eq!(normalized(back["messages"].clone()), normalized(expected));
    assert_eq!(back["tools"], original["tools"]);
    assert_eq!(back["tool_choice"], "required");
    assert_eq!(back["parallel_tool_calls"], false);
    assert_eq!(back["max_completion_tokens"], 1024);
}

#[test]
fn anthropic_tool_conversation_round_trips() {
    let original = json!({
        "model": "claude-profile", "max_tokens": 800,
        "tools": [{"name": "lookup", "description": "Find a record",
            "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}}}],
        "tool_choice": {"type": "tool", "name": "lookup"},
        "messages": [
            {"role": "user", "content": "Find record 7"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_01A", "name": "lookup", "input": {"id": 7}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "{\"name\":\"Ada\"}"},
                {"type": "text", "text": "Summarise it."}]}
        ]
    });
    let openai = to_openai(&original).unwrap();
    assert_eq!(
        openai["messages"],
        json!([
            {"role": "user", "content": "Find record 7"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "toolu_01A", "type": "function", "function": {"name": "lookup", "arguments": "{\"id\":7}"}}]},
            {"role": "tool", "tool_call_id": "toolu_01A", "content": "{\"name\":\"Ada\"}"},
            {"role": "user", "content": "Summarise it."}
        ])
    );
    assert_eq!(openai["tool_choice"], json!({"type": "function", "function": {"name": "lookup"}}));
    let back = to_anthropic(&Value::Object(openai)).unwrap();
    for key in ["messages", "tools", "tool_choice", "max_tokens"] {
        assert_eq!(back[key], original[key], "{key}");
    }
}

#[test]
fn images_translate_both_ways() {
    let openai = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg==", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://upload.example.org/cat.png"}}
    ]}]});
    let anthropic = to_anthropic(&openai).unwrap();
    assert_eq!(
        anthropic["messages"][0]["content"],
        json!([
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
            {"type": "image", "source": {"type": "url", "url": "https://upload.example.org/cat.png"}}
        ])
    );
    let back = to_openai(&Value::Object(anthropic)).unwrap();
    assert_eq!(back["messages"][0]["content"][1]["image_url"]["url"], "data:image/jpeg;base64,/9j/4AAQSkZJRg==");
    assert_eq!(back["messages"][0]["content"][2]["image_url"]["url"], "https://upload.example.org/cat.png");
}

#[test]
fn openai_features_without_counterpart_are_refused() {
    let base = |extra: Value| {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let cases = [
        (json!({"n": 3}), "n"),
        (json!({"logprobs": true}), "logprobs"),
        (json!({"top_logprobs": 2}), "top_logprobs"),
        (json!({"logit_bias": {"50256": -100}}), "logit_bias"),
        (json!({"response_format": {"type": "json_object"}}), "response_format"),
        (json!({"modalities": ["text", "audio"]}), "modalities"),
        (json!({"reasoning_effort": "xhigh"}), "reasoning_effort"),
        (json!({"reasoning_effort": "high", "temperature": 0.3}), "temperature"),
        (json!({"tools": [{"type": "custom", "custom": {"name": "grammar"}}]}), "tools[0].type"),
    ];
    for (extra, field) in cases {
        assert_eq!(unsupported_field(to_anthropic(&base(extra)).unwrap_err()), field);
    }
    for harmless in [json!({"n": 1}), json!({"logprobs": false}), json!({"response_format": {"type": "text"}})] {
        assert!(to_anthropic(&base(harmless)).is_ok());
    }
    let audio = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]});
    assert_eq!(unsupported_field(to_anthropic(&audio).unwrap_err()), "messages[0].content[0].type");
}

#[test]
fn openai_reasoning_effort_and_replayed_thinking_blocks_become_anthropic_thinking() {
    let call = json!({"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}});
    let blocks = json!([
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": "WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve/op91XWHOEBLLqIOMfFG/UvLEczmEsUjavL=="}
    ]);
    let body = json!({
        "model": "claude", "max_tokens": 2048, "reasoning_effort": "low",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [call],
             "reasoning_content": "The user wants the weather.", "thinking_blocks": blocks},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
        ]
    });
    let out = to_anthropic(&body).unwrap();
    assert_eq!(out["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
    assert_eq!(out["max_tokens"], 2048);
    let content = out["messages"][1]["content"].as_array().unwrap();
    assert_eq!(content[0], blocks[0], "replayed first, unchanged");
    assert_eq!(content[1], blocks[1], "the signature verbatim");
    assert_eq!(content[2], json!({"type": "text", "text": "Let me look."}));
    assert_eq!(content[3]["type"], "tool_use");
    assert_eq!(content.len(), 4, "reasoning_content is not sent again");
    let tight = json!({"model": "claude", "max_completion_tokens": 1000, "reasoning_effort": "medium",
        "messages": [{"role": "user", "content": "Hi"}]});
    assert_eq!(to_anthropic(&tight).unwrap_err().field(), Some("max_completion_tokens"));
    let off = json!({"model": "claude", "reasoning_effort": "none", "messages": [{"role": "user", "content": "Hi"}]});
    let out = to_anthropic(&off).unwrap();
    assert!(!out.contains_key("thinking"));
    assert_eq!(out["max_tokens"], 4096);
}

#[test]
fn anthropic_features_without_counterpart_are_refused() {
    let with = |extra: Value, messages: Value| {
        let mut body = json!({"model": "m", "max_tokens": 10, "messages": messages});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    let hi = json!([{"role": "user", "content": "Hi"}]);
    let cases = [
        (with(json!({"thinking": {"type": "enabled", "budget_tokens": 2048}}), hi.clone()), "thinking"),
        (with(json!({"stop_sequences": ["a", "b", "c", "d", "e"]}), hi.clone()), "stop_sequences"),
        (with(json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}), hi.clone()), "tools[0].type"),
        (
            with(json!({}), json!([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "{\"a\":"}])),
            "messages[1].role",
        ),
        (
            with(
                json!({}),
                json!([{"role": "user", "content": [{"type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}]}]),
            ),
            "messages[0].content[0].type",
        ),
    ];
    for (body, field) in cases {
        assert_eq!(unsupported_field(to_openai(&body).unwrap_err()), field);
    }
    assert!(to_openai(&with(json!({"thinking": {"type": "disabled"}}), hi)).is_ok());
}

#[test]
fn malformed_tool_arguments_and_wrong_protocol() {
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]});
    let err = to_anthropic(&body).unwrap_err();
    assert_eq!(err.field(), Some("messages[1].tool_calls[0].function.arguments"));
    let anthropic = parsed(
        Protocol::AnthropicMessages,
        &json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}),
    );
    assert!(matches!(openai_to_anthropic_request(&anthropic, 10), Err(TranslateError::WrongProtocol { .. })));
}

#[test]
fn the_max_tokens_asked_of_claude_counts_the_thinking_budget_when_the_client_set_no_limit() {
    let chat = |extra: Value| {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        parsed(Protocol::OpenAiChat, &body)
    };
    assert_eq!(anthropic_max_tokens(&chat(json!({"reasoning_effort": "high"})), 1024), 1024 + 4096);
    assert_eq!(anthropic_max_tokens(&chat(json!({"reasoning_effort": "high", "max_tokens": 8000})), 1024), 8000);
    assert_eq!(anthropic_max_tokens(&chat(json!({"reasoning_effort": "none"})), 1024), 1024);
    assert_eq!(anthropic_max_tokens(&chat(json!({})), 1024), 1024);
    // Refused later (max_tokens at or below the budget): its plain limit.
    assert_eq!(anthropic_max_tokens(&chat(json!({"reasoning_effort": "high", "max_tokens": 100})), 1024), 100);
    // The same figure the translated body carries.
    let translated = openai_to_anthropic_request(&chat(json!({"reasoning_effort": "medium"})), 1024).unwrap();
    assert_eq!(translated["max_tokens"], anthropic_max_tokens(&chat(json!({"reasoning_effort": "medium"})), 1024));
}
