//! Converse responses and errors to the Anthropic shape, and back (for the simulator).

use serde_json::{Value, json};

use super::names::{stop_to_anthropic, stop_to_converse};
use crate::translate::error::TranslateError;

/// Anthropic's `usage` from Converse's (`inputTokens` excludes cache reads and writes, as
/// Anthropic's `input_tokens` does).
pub(super) fn usage_to_anthropic(usage: &Value) -> Value {
    let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    json!({
        "input_tokens": n("inputTokens"),
        "output_tokens": n("outputTokens"),
        "cache_read_input_tokens": n("cacheReadInputTokens"),
        "cache_creation_input_tokens": n("cacheWriteInputTokens"),
    })
}

/// Converse's `usage` from Anthropic's.
pub(super) fn usage_to_converse(usage: &Value) -> Value {
    let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (n("input_tokens"), n("output_tokens"));
    let (read, write) = (n("cache_read_input_tokens"), n("cache_creation_input_tokens"));
    json!({"inputTokens": input, "outputTokens": output, "totalTokens": input + output + read + write,
        "cacheReadInputTokens": read, "cacheWriteInputTokens": write})
}

/// An Anthropic Messages response (as the deployment's Anthropic-shaped client side reads
/// it) for a Converse response `body`; `id` names the message (Converse has no id).
/// `reasoningContent` blocks become `thinking` (text and signature, which the client must
/// send back in a later turn) and `redacted_thinking` blocks, in their place.
///
/// # Errors
/// A body without `output.message`.
pub fn converse_to_anthropic_response(body: &[u8], model: &str, id: &str) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let Some(message) = value.get("output").and_then(|o| o.get("message")) else {
        return Err(TranslateError::invalid("output.message", "is required"));
    };
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let content: Vec<Value> = blocks.iter().filter_map(block_to_anthropic).collect();
    let stop = value.get("stopReason").and_then(Value::as_str).map_or("end_turn", stop_to_anthropic);
    let usage = usage_to_anthropic(value.get("usage").unwrap_or(&Value::Null));
    let out = json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop, "stop_sequence": null, "usage": usage});
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

fn block_to_anthropic(block: &Value) -> Option<Value> {
    if let Some(text) = block.get("text") {
        return Some(json!({"type": "text", "text": text}));
    }
    if let Some(call) = block.get("toolUse") {
        return Some(
            json!({"type": "tool_use", "id": call.get("toolUseId"), "name": call.get("name"), "input": call.get("input")}),
        );
    }
    let reasoning = block.get("reasoningContent")?;
    if let Some(data) = reasoning.get("redactedContent") {
        return Some(json!({"type": "redacted_thinking", "data": data}));
    }
    let thinking = reasoning.get("reasoningText")?;
    Some(json!({"type": "thinking", "thinking": thinking.get("text"), "signature": thinking.get("signature")}))
}

/// A Converse response for an Anthropic Messages response `body` (the simulator's answer).
///
/// # Errors
/// A body that is no JSON.
pub fn anthropic_to_converse_response(body: &[u8], latency_ms: u64) -> Result<Vec<u8>, TranslateError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| TranslateError::invalid("body", "is not JSON"))?;
    let blocks = value.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let content: Vec<Value> = blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => Some(json!({"text": b.get("text")})),
            Some("tool_use") => {
                Some(json!({"toolUse": {"toolUseId": b.get("id"), "name": b.get("name"), "input": b.get("input")}}))
            }
            Some("thinking") => Some(
                json!({"reasoningContent": {"reasoningText": {"text": b.get("thinking"), "signature": b.get("signature")}}}),
            ),
            Some("redacted_thinking") => Some(json!({"reasoningContent": {"redactedContent": b.get("data")}})),
            _ => None,
        })
        .collect();
    let stop = value.get("stop_reason").and_then(Value::as_str).map_or("end_turn", stop_to_converse);
    let out = json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": usage_to_converse(value.get("usage").unwrap_or(&Value::Null)),
        "metrics": {"latencyMs": latency_ms},
    });
    Ok(serde_json::to_vec(&out).unwrap_or_default())
}

/// Anthropic's error type for a Bedrock error type (`x-amzn-ErrorType`, e.g.
/// `ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/`).
#[must_use]
pub fn anthropic_error_type(amzn_error_type: &str) -> &'static str {
    match amzn_error_type.split(':').next().unwrap_or_default() {
        "ThrottlingException" | "ServiceQuotaExceededException" => "rate_limit_error",
        "AccessDeniedException" | "UnrecognizedClientException" | "InvalidSignatureException" => "permission_error",
        "ResourceNotFoundException" => "not_found_error",
        "ValidationException" => "invalid_request_error",
        "ServiceUnavailableException" | "ModelNotReadyException" => "overloaded_error",
        "ModelTimeoutException" => "timeout_error",
        _ => "api_error",
    }
}

/// Bedrock's error body (`{"message": "…"}`) with its `x-amzn-ErrorType` as an Anthropic
/// error body, so the Anthropic side of the request road reads it (and translates it for an
/// OpenAI client). The message keeps Bedrock's words; the caller scrubs secrets from it.
#[must_use]
pub fn converse_error_to_anthropic(status: u16, amzn_error_type: Option<&str>, body: &[u8]) -> Vec<u8> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("message").or_else(|| v.get("Message")))
        .and_then(Value::as_str)
        .map_or_else(|| format!("Bedrock answered {status}"), |m| m.chars().take(2_000).collect());
    let kind = amzn_error_type.map_or("api_error", anthropic_error_type);
    serde_json::to_vec(&json!({"type": "error", "error": {"type": kind, "message": message}})).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn a_converse_answer_reads_as_anthropic_with_its_usage_and_stop_reason() {
        let converse = json!({
            "output": {"message": {"role": "assistant", "content": [{"text": "hi"}, {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 10, "outputTokens": 4, "totalTokens": 17, "cacheReadInputTokens": 3},
        });
        let out: Value = serde_json::from_slice(
            &converse_to_anthropic_response(converse.to_string().as_bytes(), "m", "msg_1").unwrap_or_default(),
        )
        .unwrap_or_default();
        assert_eq!(out["content"][1], json!({"type": "tool_use", "id": "t", "name": "f", "input": {}}));
        assert_eq!(out["stop_reason"], "tool_use");
        assert_eq!(
            out["usage"],
            json!({"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 0})
        );
        let back: Value = serde_json::from_slice(
            &anthropic_to_converse_response(&serde_json::to_vec(&out).unwrap_or_default(), 5).unwrap_or_default(),
        )
        .unwrap_or_default();
        assert_eq!(back["output"], converse["output"]);
        assert_eq!(back["usage"]["totalTokens"], 17);
        assert!(converse_to_anthropic_response(b"{}", "m", "x").is_err());
    }

    #[test]
    fn bedrock_errors_take_anthropic_types_by_their_error_type_header() {
        let body = converse_error_to_anthropic(
            429,
            Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            br#"{"message":"Too many requests, please wait before trying again."}"#,
        );
        let body: Value = serde_json::from_slice(&body).unwrap_or_default();
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["message"], "Too many requests, please wait before trying again.");
        assert_eq!(anthropic_error_type("ServiceQuotaExceededException"), "rate_limit_error");
        assert_eq!(anthropic_error_type("AccessDeniedException"), "permission_error");
    }

    #[test]
    fn reasoning_blocks_keep_their_signature_and_redacted_content_both_ways() {
        let converse = json!({
            "output": {"message": {"role": "assistant", "content": [
                {"reasoningContent": {"redactedContent": "RU5DUllQVEVE"}},
                {"reasoningContent": {"reasoningText": {"text": "think", "signature": "c2ln"}}},
                {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}
            ]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        });
        let out: Value = serde_json::from_slice(
            &converse_to_anthropic_response(converse.to_string().as_bytes(), "m", "msg_1").unwrap_or_default(),
        )
        .unwrap_or_default();
        assert_eq!(out["content"][0], json!({"type": "redacted_thinking", "data": "RU5DUllQVEVE"}));
        assert_eq!(out["content"][1], json!({"type": "thinking", "thinking": "think", "signature": "c2ln"}));
        assert_eq!(out["content"][2]["type"], "tool_use");
        let back: Value = serde_json::from_slice(
            &anthropic_to_converse_response(&serde_json::to_vec(&out).unwrap_or_default(), 5).unwrap_or_default(),
        )
        .unwrap_or_default();
        assert_eq!(back["output"], converse["output"], "the simulator answers reasoning as Bedrock does");
    }
}
