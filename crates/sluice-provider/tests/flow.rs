//! The life of a request through the public API, as the gateway drives it.

use sluice_provider::{
    Estimator, MediaPricing, Protocol, StreamTap, Usage, parse_request, tokenizer_for_model, upstream_body,
    usage_from_response,
};

#[test]
fn openai_stream_with_gateway_forced_usage() {
    let client_body = br#"{"model":"fast-chat","stream":true,"max_tokens":64,
        "messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Name a colour."}]}"#;
    let req = parse_request(Protocol::OpenAiChat, client_body).unwrap();
    assert!(req.stream && !req.client_wants_stream_usage);

    let estimator = Estimator::new().unwrap();
    let kind = tokenizer_for_model("gpt-4o-mini");
    let input = estimator.input_tokens(&kind, MediaPricing::OpenAi, &req, 1.0);
    let text = |t| estimator.text_tokens(&kind, t);
    assert_eq!(input, 3 + 1 + text("Be terse.") + 3 + 1 + text("Name a colour.") + 3);
    let output_reservation = req.max_output_tokens.unwrap_or(0) * u64::from(req.choices);
    assert_eq!(output_reservation, 64);

    let force = !req.client_wants_stream_usage;
    let upstream: serde_json::Value = serde_json::from_slice(&upstream_body(&req, "gpt-4o-mini", force)).unwrap();
    assert_eq!(upstream["model"], "gpt-4o-mini");
    assert_eq!(upstream["stream_options"]["include_usage"], true);

    let upstream_stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Teal\"}}],\"usage\":null}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":19,\"completion_tokens\":1,\"total_tokens\":20}}\n\n",
        "data: [DONE]\n\n",
    );
    let mut tap = StreamTap::new(Protocol::OpenAiChat, force);
    let mut to_client = Vec::new();
    for piece in upstream_stream.as_bytes().chunks(17) {
        to_client.extend_from_slice(&tap.push(piece));
    }
    to_client.extend_from_slice(&tap.flush());
    let to_client = String::from_utf8(to_client).unwrap();
    assert!(!to_client.contains("usage"), "{to_client}");
    assert!(to_client.ends_with("data: [DONE]\n\n"));

    let outcome = tap.outcome();
    assert!(outcome.completed && !outcome.error_event);
    assert_eq!(outcome.usage, Some(Usage { input_tokens: 19, output_tokens: 1, ..Usage::default() }));
}

#[test]
fn anthropic_non_stream() {
    let req = parse_request(
        Protocol::AnthropicMessages,
        br#"{"model":"claude-sonnet","max_tokens":300,"messages":[{"role":"user","content":"Hi"}]}"#,
    )
    .unwrap();
    assert_eq!(req.max_output_tokens, Some(300));
    let body = br#"{"type":"message","content":[{"type":"text","text":"Hello"}],
        "usage":{"input_tokens":8,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":2}}"#;
    let usage = usage_from_response(Protocol::AnthropicMessages, body).unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (8, 2));
}
