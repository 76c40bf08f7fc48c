use std::sync::OnceLock;

use super::*;
use crate::request::parse_request;

/// Loading the tables takes a while in debug builds; tests share one estimator.
pub(super) fn estimator() -> &'static Estimator {
    static ESTIMATOR: OnceLock<Estimator> = OnceLock::new();
    ESTIMATOR.get_or_init(|| Estimator::new().unwrap())
}

fn count(protocol: Protocol, kind: TokenizerKind, body: &str) -> u64 {
    let req = parse_request(protocol, body.as_bytes()).unwrap();
    let media = if protocol == Protocol::AnthropicMessages { MediaPricing::Anthropic } else { MediaPricing::OpenAi };
    estimator().input_tokens(&kind, media, &req, 1.0)
}

fn tokens(kind: TokenizerKind, text: &str) -> u64 {
    estimator().text_tokens(&kind, text)
}

#[test]
fn model_families() {
    for model in [
        "gpt-4o",
        "gpt-4o-mini-2024-07-18",
        "gpt-4.1-nano",
        "gpt-5",
        "o1-mini",
        "o3",
        "o4-mini",
        "chatgpt-4o-latest",
        "openai/GPT-4o",
    ] {
        assert_eq!(tokenizer_for_model(model), TokenizerKind::O200k, "{model}");
    }
    for model in [
        "gpt-4",
        "gpt-4-turbo",
        "gpt-3.5-turbo",
        "text-embedding-3-small",
        "text-embedding-ada-002",
        "claude-sonnet-4-5",
        "llama3.1:8b",
    ] {
        assert_eq!(tokenizer_for_model(model), TokenizerKind::Cl100k, "{model}");
    }
}

#[test]
fn known_encodings() {
    assert_eq!(tokens(TokenizerKind::Cl100k, "hello world"), 2);
    assert_eq!(tokens(TokenizerKind::O200k, "Hello there"), 2);
    // Special-token text in user input is ordinary text, never a control token.
    assert!(tokens(TokenizerKind::Cl100k, "<|endoftext|>") > 1);
    assert_eq!(tokens(TokenizerKind::O200k, ""), 0);
}

#[test]
fn role_fast_path_matches_the_tokenizers() {
    for role in ["system", "user", "assistant", "tool", "function", "developer"] {
        assert_eq!(tokens(TokenizerKind::O200k, role), 1, "{role}");
        assert_eq!(tokens(TokenizerKind::Cl100k, role), 1, "{role}");
    }
}

#[test]
fn openai_chat_overhead() {
    let kind = TokenizerKind::O200k;
    let body = r#"{"model":"gpt-4o","messages":[
        {"role":"system","content":"You are terse."},
        {"role":"user","name":"alice","content":[{"type":"text","text":"Sum 2 and 3."},{"type":"text","text":"Thanks!"}]}]}"#;
    let expected = 3
        + 1
        + tokens(kind, "You are terse.")
        + 3
        + 1
        + tokens(kind, "Sum 2 and 3.")
        + tokens(kind, "Thanks!")
        + tokens(kind, "alice")
        + 1
        + 3;
    assert_eq!(count(Protocol::OpenAiChat, kind, body), expected);
}

#[test]
fn openai_images_tools_and_calls() {
    let kind = TokenizerKind::Cl100k;
    let tool = r#"{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}"#;
    let body = format!(
        r#"{{"model":"gpt-4-turbo","tools":[{tool}],"messages":[
        {{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,AAAA"}}}},
                                  {{"type":"image_url","image_url":{{"url":"https://x/y.png","detail":"low"}}}},
                                  {{"type":"input_audio","input_audio":{{"data":"AAAA","format":"wav"}}}}]}},
        {{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\":\"Oslo\"}}"}}}}]}},
        {{"role":"tool","tool_call_id":"c1","content":"rain"}}]}}"#
    );
    let tool_json = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(tool).unwrap()).unwrap();
    // An unreadable data URL costs the largest image; 3 bytes of WAV one second of audio.
    let expected = (3 + 1 + media::OPENAI_IMAGE_MAX + 85 + media::AUDIO_TOKENS_PER_SECOND)
        + (3 + 1 + tokens(kind, "get_weather") + tokens(kind, r#"{"city":"Oslo"}"#))
        + (3 + 1 + tokens(kind, "rain"))
        + 3
        + tokens(kind, &tool_json);
    assert_eq!(count(Protocol::OpenAiChat, kind, &body), expected);
}

#[test]
fn anthropic_messages() {
    let kind = TokenizerKind::Cl100k;
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":100,
        "system":[{"type":"text","text":"Be brief."}],
        "tools":[{"name":"lookup","input_schema":{"type":"object"}}],
        "messages":[
          {"role":"user","content":[{"type":"text","text":"Find it"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},
          {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{"q":"it"}}]},
          {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"found"}]}]}]}"#;
    let expected = tokens(kind, "Be brief.")
        + tokens(kind, r#"{"input_schema":{"type":"object"},"name":"lookup"}"#)
        + (3 + tokens(kind, "Find it") + 1_600)
        + (3 + tokens(kind, "lookup") + tokens(kind, r#"{"q":"it"}"#))
        + (3 + tokens(kind, "found"));
    assert_eq!(count(Protocol::AnthropicMessages, kind, body), expected);
    let plain = r#"{"model":"c","max_tokens":5,"system":"Sys","messages":[{"role":"user","content":"Hi"}]}"#;
    assert_eq!(count(Protocol::AnthropicMessages, kind, plain), tokens(kind, "Sys") + 3 + tokens(kind, "Hi"));
}

#[test]
fn embeddings_inputs() {
    let kind = TokenizerKind::Cl100k;
    let ab = tokens(kind, "alpha beta") + tokens(kind, "gamma");
    assert_eq!(count(Protocol::OpenAiEmbeddings, kind, r#"{"model":"e","input":["alpha beta","gamma"]}"#), ab);
    assert_eq!(count(Protocol::OpenAiEmbeddings, kind, r#"{"model":"e","input":[[1,2,3],[4]]}"#), 4);
    assert_eq!(count(Protocol::OpenAiEmbeddings, kind, r#"{"model":"e","input":[9,8]}"#), 2);
    assert_eq!(count(Protocol::OpenAiEmbeddings, kind, r#"{"model":"e","input":"hello world"}"#), 2);
}

#[test]
fn approximation_counts_characters() {
    let kind = TokenizerKind::Approx { chars_per_token: 4.0 };
    // 9 chars ("héllo wor" counts é as one char) -> ceil(9 / 4) = 3
    assert_eq!(tokens(kind, "héllo wor"), 3);
    let body = r#"{"model":"gemini-2.0-flash","messages":[{"role":"user","content":"abcdefgh"}]}"#;
    assert_eq!(count(Protocol::OpenAiChat, kind, body), 3 + 1 + 2 + 3);
    let broken = TokenizerKind::Approx { chars_per_token: 0.0 };
    assert_eq!(tokens(broken, "abcdefgh"), 2, "unusable ratios fall back to 4");
}

#[test]
fn safety_factor_rounds_up_and_never_shrinks() {
    assert_eq!(apply_safety(100, 1.15), 115);
    assert_eq!(apply_safety(10, 1.01), 11);
    assert_eq!(apply_safety(100, 0.5), 100);
    assert_eq!(apply_safety(100, f64::NAN), 100);
    assert_eq!(apply_safety(u64::MAX, 2.0), u64::MAX);
}

#[test]
fn shared_across_threads() {
    let req =
        parse_request(Protocol::OpenAiChat, br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi there"}]}"#)
            .unwrap();
    let expected = estimator().input_tokens(&TokenizerKind::O200k, MediaPricing::Anthropic, &req, 1.0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                assert_eq!(
                    estimator().input_tokens(&TokenizerKind::O200k, MediaPricing::Anthropic, &req, 1.0),
                    expected
                );
            });
        }
    });
}

#[test]
fn responses_count_like_the_equivalent_chat_plus_items_tools_and_media() {
    let k = TokenizerKind::O200k;
    let chat = r#"{"model":"gpt-4o","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello world"}]}"#;
    let plain = r#"{"model":"gpt-4o","instructions":"Be brief.","input":"hello world"}"#;
    assert_eq!(count(Protocol::OpenAiResponses, k, plain), count(Protocol::OpenAiChat, k, chat));
    let items = r#"{"model":"gpt-4o","instructions":"Be brief.","input":[
        {"role":"user","content":[{"type":"input_text","text":"hello world"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},
        {"type":"function_call_output","call_id":"c1","output":"42"}],
        "tools":[{"type":"function","name":"f","parameters":{}}]}"#;
    let item_json = r#"{"call_id":"c1","output":"42","type":"function_call_output"}"#;
    let tools_json = r#"{"name":"f","parameters":{},"type":"function"}"#;
    let expected = count(Protocol::OpenAiChat, k, chat) + 85 + tokens(k, item_json) + tokens(k, tools_json);
    assert_eq!(count(Protocol::OpenAiResponses, k, items), expected);
}
