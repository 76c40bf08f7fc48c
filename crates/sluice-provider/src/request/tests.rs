use super::*;

fn chat(body: &str) -> Result<ParsedRequest, RequestError> {
    parse_request(Protocol::OpenAiChat, body.as_bytes())
}

fn anthropic(body: &str) -> Result<ParsedRequest, RequestError> {
    parse_request(Protocol::AnthropicMessages, body.as_bytes())
}

fn embeddings(body: &str) -> Result<ParsedRequest, RequestError> {
    parse_request(Protocol::OpenAiEmbeddings, body.as_bytes())
}

fn assert_err(result: Result<ParsedRequest, RequestError>, param: Option<&str>, code: RequestErrorCode) {
    let err = result.unwrap_err();
    assert_eq!(err.param.as_deref(), param, "{err:?}");
    assert_eq!(err.code, code, "{err:?}");
}

const TOOL_CHAT: &str = r#"{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "name": "alice", "content": [
      {"type": "text", "text": "What is in this image, and what's the weather in Paris?"},
      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}
    ]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "max_completion_tokens": 400, "max_tokens": 300, "n": 2,
  "stream": true, "stream_options": {"include_usage": true},
  "temperature": 0.3, "some_future_field": {"x": 1}
}"#;

#[test]
fn openai_chat_full_request() {
    let req = chat(TOOL_CHAT).unwrap();
    assert_eq!(req.protocol, Protocol::OpenAiChat);
    assert_eq!(req.model, "gpt-4o-mini");
    assert!(req.stream);
    assert_eq!(req.max_output_tokens, Some(400), "max_completion_tokens wins");
    assert!(req.client_wants_stream_usage);
    assert_eq!(req.choices, 2);
    assert!(req.body.contains_key("some_future_field"));
}

#[test]
fn openai_chat_defaults() {
    let req =
        chat(r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"max_tokens":null,"n":null}"#).unwrap();
    assert!(!req.stream);
    assert_eq!(req.max_output_tokens, None);
    assert!(!req.client_wants_stream_usage);
    assert_eq!(req.choices, 1);
}

#[test]
fn body_must_be_json_object() {
    assert_err(chat("{\"model\":"), None, RequestErrorCode::InvalidJson);
    assert_err(chat("[1,2]"), None, RequestErrorCode::InvalidType);
    assert_err(chat(""), None, RequestErrorCode::InvalidJson);
}

#[test]
fn model_is_a_non_empty_string() {
    let msgs = r#""messages":[{"role":"user","content":"hi"}]"#;
    assert_err(chat(&format!("{{{msgs}}}")), Some("model"), RequestErrorCode::MissingField);
    assert_err(chat(&format!(r#"{{"model":"",{msgs}}}"#)), Some("model"), RequestErrorCode::InvalidValue);
    assert_err(chat(&format!(r#"{{"model":4,{msgs}}}"#)), Some("model"), RequestErrorCode::InvalidType);
}

#[test]
fn openai_messages_shape() {
    assert_err(chat(r#"{"model":"m"}"#), Some("messages"), RequestErrorCode::MissingField);
    assert_err(chat(r#"{"model":"m","messages":{}}"#), Some("messages"), RequestErrorCode::InvalidType);
    assert_err(chat(r#"{"model":"m","messages":[]}"#), Some("messages"), RequestErrorCode::InvalidValue);
    assert_err(chat(r#"{"model":"m","messages":["hi"]}"#), Some("messages[0]"), RequestErrorCode::InvalidType);
    assert_err(
        chat(r#"{"model":"m","messages":[{"content":"hi"}]}"#),
        Some("messages[0].role"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        chat(r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":{"text":"x"}}]}"#),
        Some("messages[1].content"),
        RequestErrorCode::InvalidType,
    );
    assert_err(
        chat(r#"{"model":"m","messages":[{"role":"user"}]}"#),
        Some("messages[0].content"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        chat(r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text"}]}]}"#),
        Some("messages[0].content[1].text"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        chat(r#"{"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]}"#),
        Some("messages[0].content[0].type"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        chat(r#"{"model":"m","messages":[{"role":"user","content":"a","name":7}]}"#),
        Some("messages[0].name"),
        RequestErrorCode::InvalidType,
    );
}

#[test]
fn openai_numeric_and_flag_fields() {
    let with = |field: &str| chat(&format!(r#"{{"model":"m","messages":[{{"role":"user","content":"a"}}],{field}}}"#));
    assert_err(with(r#""max_tokens":-1"#), Some("max_tokens"), RequestErrorCode::InvalidValue);
    assert_err(with(r#""max_tokens":1.5"#), Some("max_tokens"), RequestErrorCode::InvalidType);
    assert_err(with(r#""max_completion_tokens":"9""#), Some("max_completion_tokens"), RequestErrorCode::InvalidType);
    assert_err(
        with(r#""max_completion_tokens":5,"max_tokens":-2"#),
        Some("max_tokens"),
        RequestErrorCode::InvalidValue,
    );
    assert_err(with(r#""stream":"yes""#), Some("stream"), RequestErrorCode::InvalidType);
    assert_err(with(r#""n":0"#), Some("n"), RequestErrorCode::InvalidValue);
    assert_err(with(r#""n":129"#), Some("n"), RequestErrorCode::InvalidValue);
    assert_err(with(r#""n":2.0"#), Some("n"), RequestErrorCode::InvalidType);
    assert_err(with(r#""stream_options":true"#), Some("stream_options"), RequestErrorCode::InvalidType);
    assert_err(
        with(r#""stream_options":{"include_usage":1}"#),
        Some("stream_options.include_usage"),
        RequestErrorCode::InvalidType,
    );
    assert_err(with(r#""max_tokens":0"#), Some("max_tokens"), RequestErrorCode::InvalidValue);
    assert_err(with(r#""max_completion_tokens":0"#), Some("max_completion_tokens"), RequestErrorCode::InvalidValue);
    // Both are checked even when the first would win.
    assert_err(with(r#""max_completion_tokens":5,"max_tokens":0"#), Some("max_tokens"), RequestErrorCode::InvalidValue);
    assert_eq!(with(r#""max_tokens":1"#).unwrap().max_output_tokens, Some(1));
    assert_eq!(with(r#""n":128"#).unwrap().choices, 128);
}

#[test]
fn anthropic_request() {
    let req = anthropic(
        r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,
            "system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
            "messages":[{"role":"user","content":[{"type":"text","text":"Hi"},
              {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBOR"}}]},
              {"role":"assistant","content":"Hello"}],
            "metadata":{"user_id":"u1"}}"#,
    )
    .unwrap();
    assert_eq!(req.max_output_tokens, Some(1024));
    assert!(req.stream);
    assert_eq!(req.choices, 1);
    assert!(!req.client_wants_stream_usage);
}

#[test]
fn anthropic_validation() {
    let msgs = r#""messages":[{"role":"user","content":"hi"}]"#;
    assert_err(anthropic(&format!(r#"{{"model":"c",{msgs}}}"#)), Some("max_tokens"), RequestErrorCode::MissingField);
    assert_err(
        anthropic(&format!(r#"{{"model":"c","max_tokens":0,{msgs}}}"#)),
        Some("max_tokens"),
        RequestErrorCode::InvalidValue,
    );
    assert_err(
        anthropic(&format!(r#"{{"model":"c","max_tokens":10,"system":5,{msgs}}}"#)),
        Some("system"),
        RequestErrorCode::InvalidType,
    );
    assert_err(
        anthropic(&format!(r#"{{"model":"c","max_tokens":10,"system":[{{"type":"image"}}],{msgs}}}"#)),
        Some("system[0].type"),
        RequestErrorCode::InvalidValue,
    );
    assert_err(
        anthropic(r#"{"model":"c","max_tokens":10,"messages":[{"role":"user","content":null}]}"#),
        Some("messages[0].content"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        anthropic(r#"{"model":"c","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":3}]}]}"#),
        Some("messages[0].content[0].text"),
        RequestErrorCode::InvalidType,
    );
}

#[test]
fn embeddings_inputs() {
    for input in [r#""one""#, r#"["a","b"]"#, "[1,2,3]", "[[1,2],[3]]"] {
        let req = embeddings(&format!(r#"{{"model":"text-embedding-3-small","input":{input}}}"#)).unwrap();
        assert!(!req.stream);
        assert_eq!(req.max_output_tokens, None);
    }
    let bad = |input: &str| embeddings(&format!(r#"{{"model":"e","input":{input}}}"#));
    assert_err(embeddings(r#"{"model":"e"}"#), Some("input"), RequestErrorCode::MissingField);
    assert_err(bad("[]"), Some("input"), RequestErrorCode::InvalidValue);
    assert_err(bad("5"), Some("input"), RequestErrorCode::InvalidType);
    assert_err(bad(r#"["a",1]"#), Some("input[1]"), RequestErrorCode::InvalidType);
    assert_err(bad("[1,-1]"), Some("input[1]"), RequestErrorCode::InvalidType);
    assert_err(bad("[[1],[]]"), Some("input[1]"), RequestErrorCode::InvalidType);
    assert_err(bad(r#"[{"a":1}]"#), Some("input[0]"), RequestErrorCode::InvalidType);
}

fn nested(depth: usize) -> String {
    // The body object is level 1; `x` adds `depth - 1` levels of arrays.
    let inner = format!("{}{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    format!(r#"{{"model":"m","messages":[{{"role":"user","content":"a"}}],"x":{inner}}}"#)
}

#[test]
fn nesting_limit() {
    assert!(chat(&nested(MAX_NESTING_DEPTH)).is_ok());
    let too_deep = chat(&nested(MAX_NESTING_DEPTH + 1)).unwrap_err();
    assert_eq!(too_deep.code, RequestErrorCode::InvalidValue);
    assert_eq!(too_deep.param, None);
    // serde_json stops at 128 levels by itself, before our walk.
    assert_eq!(chat(&nested(200)).unwrap_err().code, RequestErrorCode::InvalidJson);
}

#[test]
fn error_messages_do_not_echo_input() {
    let big = "x".repeat(10_000);
    let err =
        chat(&format!(r#"{{"model":"m","messages":[{{"role":"user","content":5}}],"junk":"{big}"}}"#)).unwrap_err();
    assert!(err.message.len() < 200, "{}", err.message);
    let err = chat(&format!("{{\"model\":\"{big}")).unwrap_err();
    assert!(err.message.len() < 200, "{}", err.message);
}

fn responses(body: &str) -> Result<ParsedRequest, RequestError> {
    parse_request(Protocol::OpenAiResponses, body.as_bytes())
}

#[test]
fn openai_responses_shape() {
    let req = responses(r#"{"model":"m","input":"hi","max_output_tokens":64,"stream":true}"#).unwrap();
    assert_eq!((req.stream, req.max_output_tokens, req.choices), (true, Some(64), 1));
    let items = r#"{"model":"m","instructions":"x","tools":[],"input":[
        {"role":"user","content":[{"type":"input_text","text":"hi"}]},
        {"type":"function_call_output","call_id":"c","output":"42"}]}"#;
    assert_eq!(responses(items).unwrap().max_output_tokens, None);
    assert_err(responses(r#"{"model":"m"}"#), Some("input"), RequestErrorCode::MissingField);
    assert_err(responses(r#"{"model":"m","input":[]}"#), Some("input"), RequestErrorCode::InvalidValue);
    assert_err(responses(r#"{"model":"m","input":3}"#), Some("input"), RequestErrorCode::InvalidType);
    assert_err(
        responses(r#"{"model":"m","input":[{"role":"user"}]}"#),
        Some("input[0].content"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        responses(r#"{"model":"m","input":[{"content":"x"}]}"#),
        Some("input[0].role"),
        RequestErrorCode::MissingField,
    );
    assert_err(
        responses(r#"{"model":"m","input":"x","instructions":1}"#),
        Some("instructions"),
        RequestErrorCode::InvalidType,
    );
    assert_err(responses(r#"{"model":"m","input":"x","tools":{}}"#), Some("tools"), RequestErrorCode::InvalidType);
    assert_err(
        responses(r#"{"model":"m","input":"x","max_output_tokens":0}"#),
        Some("max_output_tokens"),
        RequestErrorCode::InvalidValue,
    );
}

#[test]
fn responses_continuing_earlier_turns_are_recognised() {
    let err = responses(r#"{"model":"m","input":"x","previous_response_id":1}"#);
    assert_err(err, Some("previous_response_id"), RequestErrorCode::InvalidType);
    let err = responses(r#"{"model":"m","input":"x","conversation":[]}"#);
    assert_err(err, Some("conversation"), RequestErrorCode::InvalidType);
    let continues = |body: &str| responses(body).unwrap().continues_hidden_context();
    assert!(!continues(r#"{"model":"m","input":"x","previous_response_id":null}"#));
    assert!(continues(r#"{"model":"m","input":"x","previous_response_id":"resp_1"}"#));
    assert!(continues(r#"{"model":"m","input":"x","conversation":{"id":"conv_1"}}"#));
    let chat_body = r#"{"model":"m","messages":[{"role":"user","content":"x"}],"previous_response_id":"r"}"#;
    assert!(!chat(chat_body).unwrap().continues_hidden_context());
}
