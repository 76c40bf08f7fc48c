//! The body sent upstream: the client's body with the deployment's model, and (for OpenAI
//! chat streams) usage reporting switched on so the gateway can settle.

use serde_json::{Map, Value};

use crate::request::ParsedRequest;

/// Serializes the body to send upstream.
///
/// `model` is replaced by `provider_model`; every other field, unknown ones included, is
/// written back unchanged (key order may differ from the client's: JSON objects are
/// unordered). For an OpenAI chat request with `stream: true` and `force_stream_usage`,
/// `stream_options.include_usage` is set to `true` (other `stream_options` kept); pair this
/// with [`StreamTap::new`](crate::StreamTap::new)`(.., hide_usage_chunk)` when the client
/// did not ask for usage itself, so it sees the stream it asked for.
///
/// The body is streamed into the output buffer without cloning the parsed object.
#[must_use]
pub fn upstream_body(req: &ParsedRequest, provider_model: &str, force_stream_usage: bool) -> Vec<u8> {
    let force = force_stream_usage && req.stream && req.protocol.is_openai_chunks();
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, key: &str, value: &Value| {
        if !first {
            out.push(b',');
        }
        first = false;
        write_json(out, key);
        out.push(b':');
        write_json(out, value);
    };
    put(&mut out, "model", &Value::String(provider_model.to_owned()));
    for (key, value) in &req.body {
        match key.as_str() {
            "model" => {}
            "stream_options" if force => put(&mut out, key, &with_usage(value)),
            _ => put(&mut out, key, value),
        }
    }
    if force && !req.body.contains_key("stream_options") {
        put(&mut out, "stream_options", &with_usage(&Value::Null));
    }
    out.push(b'}');
    out
}

/// An OpenAI chat body without its `extra_body`, the field only Google's OpenAI
/// compatibility layer reads (`extra_body.google`): what goes to any other OpenAI-shaped
/// deployment, which would refuse an unknown field. The body as it is when it has none.
#[must_use]
pub fn without_extra_body(body: Vec<u8>) -> Vec<u8> {
    edited_if_marked(body, b"\"extra_body\"", |map| map.remove("extra_body").is_some())
}

/// An Anthropic messages body without the `thinking` blocks that carry Gemini's thought
/// signatures (`gemini:…`, which sluice hands to Anthropic clients of Gemini
/// deployments): what goes to a Claude deployment, which refuses a signature not its own
/// (a conversation that moved from Gemini to Claude). A turn left with nothing else keeps
/// them (Claude refuses an empty turn as well). The body as it is when it has none.
#[must_use]
pub fn without_gemini_thinking(body: Vec<u8>) -> Vec<u8> {
    let is_gemini = |block: &Value| {
        block.get("type").and_then(Value::as_str) == Some("thinking")
            && block.get("signature").and_then(Value::as_str).is_some_and(|s| s.starts_with("gemini:"))
    };
    edited_if_marked(body, b"\"gemini:", |map| {
        let mut removed = false;
        let messages = map.get_mut("messages").and_then(Value::as_array_mut).into_iter().flatten();
        for content in messages.filter_map(|m| m.get_mut("content")?.as_array_mut()) {
            if content.iter().any(is_gemini) && !content.iter().all(is_gemini) {
                content.retain(|block| !is_gemini(block));
                removed = true;
            }
        }
        removed
    })
}

/// `body` with `edit` applied to its top-level object, when its bytes hold `mark` (a cheap
/// scan first: most bodies are passed through without being parsed) and `edit` says it
/// changed something; else `body` as it is (also when it is not a JSON object).
fn edited_if_marked(
    body: Vec<u8>,
    mark: &[u8],
    edit: impl FnOnce(&mut serde_json::Map<String, Value>) -> bool,
) -> Vec<u8> {
    if memchr::memmem::find(&body, mark).is_none() {
        return body;
    }
    let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(&body) else { return body };
    if edit(&mut map) { serde_json::to_vec(&map).unwrap_or(body) } else { body }
}

/// `stream_options` with `include_usage: true`; keeps the client's other options.
fn with_usage(options: &Value) -> Value {
    let mut map = match options {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    map.insert("include_usage".to_owned(), Value::Bool(true));
    Value::Object(map)
}

/// Serializing a `str` or a `Value` into a `Vec` cannot fail (no IO, string keys only).
fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Protocol;
    use crate::request::parse_request;

    fn rewrite(protocol: Protocol, body: &str, force: bool) -> Value {
        let req = parse_request(protocol, body.as_bytes()).unwrap();
        serde_json::from_slice(&upstream_body(&req, "model-x-2025", force)).unwrap()
    }

    #[test]
    fn geminis_thinking_blocks_are_left_out_toward_claude_and_claudes_stay() {
        let body = serde_json::json!({"model": "m", "max_tokens": 8, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "gemini:c2ln"},
                {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "x", "signature": "EqQBclaude"},
                {"type": "text", "text": "ok"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": "gemini:b25seQ=="}]},
        ]});
        let out: Value = serde_json::from_slice(&without_gemini_thinking(serde_json::to_vec(&body).unwrap())).unwrap();
        assert_eq!(
            out["messages"][1]["content"],
            serde_json::json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])
        );
        assert_eq!(out["messages"][2], body["messages"][2], "Claude's own block stays");
        assert_eq!(out["messages"][3], body["messages"][3], "a turn with nothing else keeps it");
        let plain = br#"{"model":"m","messages":[{"role":"user","content":"gemini: hello"}]}"#.to_vec();
        assert_eq!(without_gemini_thinking(plain.clone()), plain);
    }

    #[test]
    fn only_extra_body_is_taken_out_and_a_body_without_it_is_untouched() {
        let body = br#"{"model":"m","messages":[],"extra_body":{"google":{"thinking_config":{}}},"x":1}"#.to_vec();
        let out: Value = serde_json::from_slice(&without_extra_body(body)).unwrap();
        assert_eq!(out, serde_json::json!({"model": "m", "messages": [], "x": 1}));
        let plain = br#"{"model":"m",  "messages":[]}"#.to_vec();
        assert_eq!(without_extra_body(plain.clone()), plain);
        // Named only inside a message: the body is left as it is.
        let quoted = br#"{"model":"m","messages":[{"role":"user","content":""extra_body""}]}"#.to_vec();
        assert_eq!(without_extra_body(quoted.clone()), quoted);
    }

    #[test]
    fn replaces_model_and_keeps_unknown_fields() {
        let out = rewrite(
            Protocol::OpenAiChat,
            r#"{"model":"fast-chat","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"x_new_field":{"a":[1,2]}}"#,
            true,
        );
        assert_eq!(out["model"], "model-x-2025");
        assert_eq!(out["temperature"], 0.2);
        assert_eq!(out["x_new_field"], serde_json::json!({"a":[1,2]}));
        assert!(out.get("stream_options").is_none(), "not a stream: nothing forced");
    }

    #[test]
    fn forces_include_usage_on_openai_streams() {
        let out = rewrite(
            Protocol::OpenAiChat,
            r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            true,
        );
        assert_eq!(out["stream_options"], serde_json::json!({"include_usage": true}));
    }

    #[test]
    fn keeps_other_stream_options_when_forcing() {
        let out = rewrite(
            Protocol::OpenAiChat,
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":false,"x":1},"messages":[{"role":"user","content":"hi"}]}"#,
            true,
        );
        assert_eq!(out["stream_options"], serde_json::json!({"include_usage": true, "x": 1}));
    }

    #[test]
    fn leaves_stream_options_alone_without_force() {
        let out = rewrite(
            Protocol::OpenAiChat,
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}"#,
            false,
        );
        assert_eq!(out["stream_options"], serde_json::json!({"include_usage": false}));
    }

    #[test]
    fn anthropic_gets_no_stream_options() {
        let out = rewrite(
            Protocol::AnthropicMessages,
            r#"{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            true,
        );
        assert_eq!(out["model"], "model-x-2025");
        assert!(out.get("stream_options").is_none());
    }

    #[test]
    fn escapes_model_names() {
        let req = parse_request(Protocol::OpenAiEmbeddings, br#"{"model":"e","input":"x"}"#).unwrap();
        let out: Value = serde_json::from_slice(&upstream_body(&req, "we\"ird\\name", false)).unwrap();
        assert_eq!(out["model"], "we\"ird\\name");
    }
}
