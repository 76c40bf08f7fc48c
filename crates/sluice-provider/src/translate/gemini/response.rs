//! Gemini answers → OpenAI chat shapes: the non-stream response, its usage and finish
//! reason (shared with the stream translator), and Google's error envelope.

use serde_json::{Map, Value, json};

use super::thinking::{extra_content, part_signature};
use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object};

/// Translates a Gemini `GenerateContentResponse` into an OpenAI chat completion answering
/// as `model` (the name the client asked for), created at `created` (Unix seconds).
///
/// Text parts are joined; thought summaries (`thought: true` parts, which Gemini sends when
/// asked with `includeThoughts`) are joined into `message.reasoning_content` (the field
/// OpenAI-shaped gateways and servers give a model's reasoning); `functionCall`
/// parts become `tool_calls` (ids `call_{index}` unless Gemini named one); `usageMetadata`
/// becomes `usage`. A part's `thoughtSignature` is kept for the client to send back, as
/// Google's OpenAI compatibility layer keeps it: in the tool call's
/// `extra_content.google.thought_signature`, or the message's for a text part.
///
/// # Errors
/// When the body is not a JSON object.
pub fn gemini_to_openai_response(body: &[u8], model: &str, created: u64) -> Result<Vec<u8>, TranslateError> {
    let response = json::parse_body(body)?;
    let candidate = first_candidate(&response);
    let parts = candidate.and_then(|c| c.get("content")?.get("parts")?.as_array()).map_or(&[][..], Vec::as_slice);
    let text: String = parts.iter().filter(|p| !is_thought(p)).filter_map(|p| p.get("text")?.as_str()).collect();
    let calls: Vec<Value> =
        parts.iter().filter(|p| p.get("functionCall").is_some()).enumerate().map(tool_call).collect();
    let mut message = Map::new();
    message.insert("role".into(), Value::from("assistant"));
    message
        .insert("content".into(), if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(text) });
    let thoughts: String = parts.iter().filter(|p| is_thought(p)).filter_map(|p| p.get("text")?.as_str()).collect();
    if !thoughts.is_empty() {
        message.insert("reasoning_content".into(), Value::from(thoughts));
    }
    if let Some(signature) = parts.iter().filter(|p| is_text_signed(p)).filter_map(part_signature).next_back() {
        message.insert("extra_content".into(), extra_content(signature));
    }
    let blocked = candidate.is_none() && response.get("promptFeedback").and_then(|f| f.get("blockReason")).is_some();
    let reason = candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str);
    let finish = if blocked { "content_filter" } else { finish_reason(reason, !calls.is_empty()) };
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let id = response.get("responseId").and_then(Value::as_str).unwrap_or("sluice");
    let mut out = json!({
        "id": format!("chatcmpl-{id}"), "object": "chat.completion", "created": created, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": null}],
    });
    if let Some(usage) = response.get("usageMetadata") {
        out["usage"] = openai_usage_of(usage);
    }
    Ok(json::to_vec(&out))
}

fn first_candidate(response: &Object) -> Option<&Value> {
    response.get("candidates")?.as_array()?.first()
}

pub(crate) fn is_thought(part: &Value) -> bool {
    part.get("thought").and_then(Value::as_bool).unwrap_or(false)
}

/// Whether `part` is answer text (not a thought summary, not a call) whose signature the
/// message carries.
fn is_text_signed(part: &Value) -> bool {
    !is_thought(part) && part.get("functionCall").is_none()
}

/// A part with a `functionCall` (the `index`-th of its answer) as an OpenAI tool call, with
/// the part's thought signature in `extra_content`.
pub(crate) fn tool_call((index, part): (usize, &Value)) -> Value {
    let call = part.get("functionCall").unwrap_or(&Value::Null);
    let id = call.get("id").and_then(Value::as_str).map_or_else(|| format!("call_{index}"), str::to_owned);
    let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = call.get("args").map_or_else(|| "{}".to_owned(), Value::to_string);
    let mut out = json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}});
    if let Some(signature) = part_signature(part) {
        out["extra_content"] = extra_content(signature);
    }
    out
}

/// Gemini `finishReason` → OpenAI `finish_reason`: `MAX_TOKENS` → `length`; the safety
/// family (`SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`,
/// `IMAGE_SAFETY`) → `content_filter`; a stop with function calls → `tool_calls`; anything
/// else → `stop`.
pub(crate) fn finish_reason(reason: Option<&str>, called: bool) -> &'static str {
    match reason {
        Some("MAX_TOKENS") => "length",
        Some("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY") => {
            "content_filter"
        }
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// `usageMetadata` as an OpenAI `usage`: thinking tokens are output (Gemini bills them as
/// such), cached content is the cached part of the prompt.
pub(crate) fn openai_usage_of(usage: &Value) -> Value {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("promptTokenCount").saturating_add(count("toolUsePromptTokenCount"));
    let thoughts = count("thoughtsTokenCount");
    let completion = count("candidatesTokenCount").saturating_add(thoughts);
    json!({
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt.saturating_add(completion),
        "prompt_tokens_details": {"cached_tokens": count("cachedContentTokenCount")},
        "completion_tokens_details": {"reasoning_tokens": thoughts},
    })
}

/// OpenAI `finish_reason` → Gemini `finishReason`: the inverse of [`finish_reason`]
/// (`length` → `MAX_TOKENS`, `content_filter` → `SAFETY`, a stop or tool calls → `STOP`).
pub(crate) fn gemini_finish_reason(reason: Option<&str>) -> &'static str {
    match reason {
        Some("length") => "MAX_TOKENS",
        Some("content_filter") => "SAFETY",
        _ => "STOP",
    }
}

/// An OpenAI `usage` as `usageMetadata`: the inverse of [`openai_usage_of`] (reasoning
/// tokens are the thoughts, the rest of the output the candidates; cached prompt tokens the
/// cached content).
pub(crate) fn gemini_usage_of(usage: &Value) -> Value {
    let count = |path: &[&str]| path.iter().try_fold(usage, |v, k| v.get(k)).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(&["prompt_tokens"]);
    let completion = count(&["completion_tokens"]);
    let thoughts = count(&["completion_tokens_details", "reasoning_tokens"]).min(completion);
    let cached = count(&["prompt_tokens_details", "cached_tokens"]);
    let mut out = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": prompt.saturating_add(completion),
    });
    if thoughts > 0 {
        out["thoughtsTokenCount"] = Value::from(thoughts);
    }
    if cached > 0 {
        out["cachedContentTokenCount"] = Value::from(cached);
    }
    out
}

/// Google's canonical status name for an HTTP status
/// (<https://cloud.google.com/apis/design/errors#handling_errors>).
#[must_use]
pub fn google_status(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ if status >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

/// An OpenAI-shaped error body (sluice's own, or a provider's as sluice relays it) as
/// Google's `{"error": {"code", "message", "status", "details"}}`, the inverse of
/// [`gemini_error_to_openai`]: the message as sluice wrote it, sluice's error code as an
/// `ErrorInfo` reason (domain `sluice`), the field it names as a `BadRequest` field
/// violation, and `retry_after_secs` as a `RetryInfo` delay, as Google's 429s carry it.
#[must_use]
pub fn openai_error_to_gemini(status: u16, body: &[u8], retry_after_secs: Option<u64>) -> Vec<u8> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_str);
    let message = field("message").map_or_else(|| format!("the request failed with HTTP {status}"), str::to_owned);
    let mut details = Vec::new();
    let reason = field("code").or_else(|| field("type"));
    if let Some(reason) = reason {
        let mut metadata = Map::new();
        if let Some(trace) = field("trace_id") {
            metadata.insert("trace_id".into(), Value::from(trace));
        }
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "sluice",
            "metadata": metadata,
        }));
    }
    if let Some(param) = field("param") {
        details.push(json!({
            "@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": param, "description": message}],
        }));
    }
    if let Some(secs) = retry_after_secs {
        details.push(json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")}));
    }
    json::to_vec(
        &json!({"error": {"code": status, "message": message, "status": google_status(status), "details": details}}),
    )
}

/// A Google error body (`{"error": {"code", "message", "status"}}`, possibly wrapped in a
/// one-element list) as an OpenAI error body: Google's message, its status name as the
/// `code`, an OpenAI error type for the HTTP status. A body that is no Google error keeps
/// its text as the message.
#[must_use]
pub fn gemini_error_to_openai(status: u16, body: &[u8]) -> Vec<u8> {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| match v {
        Value::Array(items) => items.first()?.get("error"),
        other => other.get("error"),
    });
    let field = |name: &str| error.and_then(|e| e.get(name)).and_then(Value::as_str).map(str::to_owned);
    let message = field("message").unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body).trim().chars().take(2_000).collect::<String>();
        if text.is_empty() { format!("the provider answered {status}") } else { text }
    });
    let kind = openai_error_type(status);
    json::to_vec(&json!({"error": {"message": message, "type": kind, "param": null, "code": field("status")}}))
}

/// OpenAI's error type for an HTTP status, when the provider named none.
#[must_use]
pub fn openai_error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn translate(body: &Value) -> Value {
        serde_json::from_slice(&gemini_to_openai_response(body.to_string().as_bytes(), "flash", 7).unwrap()).unwrap()
    }

    #[test]
    fn text_usage_and_thinking_tokens_carry_over() {
        let body = json!({
            "responseId": "r1",
            "candidates": [{"content": {"role": "model", "parts": [{"text": "plan", "thought": true}, {"text": "Hel"}, {"text": "lo"}]}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 6, "cachedContentTokenCount": 8, "totalTokenCount": 20}
        });
        let out = translate(&body);
        assert_eq!(out["id"], "chatcmpl-r1");
        assert_eq!(out["choices"][0]["message"]["content"], "Hello", "thought summaries stay out");
        assert_eq!(out["choices"][0]["finish_reason"], "length");
        assert_eq!(out["usage"]["completion_tokens"], 10, "thinking tokens are output");
        assert_eq!(out["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
        let usage = crate::usage_from_response(crate::Protocol::OpenAiChat, out.to_string().as_bytes()).unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens), (10, 10, 8));
    }

    #[test]
    fn function_calls_become_tool_calls() {
        let body = json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}]}, "finishReason": "STOP"}]});
        let out = translate(&body);
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out["choices"][0]["message"]["content"], Value::Null);
        let call = &out["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "weather");
        assert_eq!(
            serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
            json!({"city": "Oslo"})
        );
        assert!(call.get("extra_content").is_none(), "no signature, no extra content");
        let blocked = translate(&json!({"promptFeedback": {"blockReason": "SAFETY"}}));
        assert_eq!(blocked["choices"][0]["finish_reason"], "content_filter");
    }

    #[test]
    fn thought_signatures_are_kept_where_the_openai_client_sends_them_back() {
        let calls = json!({"candidates": [{"content": {"parts": [
            {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2lnLTE="},
            {"functionCall": {"name": "weather", "args": {"city": "Rome"}}}]}, "finishReason": "STOP"}]});
        let out = translate(&calls);
        let tool_calls = &out["choices"][0]["message"]["tool_calls"];
        assert_eq!(tool_calls[0]["extra_content"], json!({"google": {"thought_signature": "c2lnLTE="}}));
        assert!(tool_calls[1].get("extra_content").is_none());
        assert!(out["choices"][0]["message"].get("extra_content").is_none());
        let text = json!({"candidates": [{"content": {"parts": [
            {"text": "thinking", "thought": true, "thoughtSignature": "not-this"},
            {"text": "Hi"}, {"text": "", "thoughtSignature": "c2lnLTI="}]}, "finishReason": "STOP"}]});
        let message = &translate(&text)["choices"][0]["message"];
        assert_eq!(message["content"], "Hi");
        assert_eq!(message["extra_content"]["google"]["thought_signature"], "c2lnLTI=");
        // What the client sends back reaches Gemini on the same parts.
        let replay = json!({"model": "gemini-3-flash-preview", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": tool_calls},
            {"role": "tool", "tool_call_id": tool_calls[0]["id"], "content": "3"},
            {"role": "tool", "tool_call_id": tool_calls[1]["id"], "content": "20"}]});
        let gemini: Value =
            serde_json::from_slice(&crate::openai_to_gemini_request(replay.to_string().as_bytes()).unwrap()).unwrap();
        assert_eq!(gemini["contents"][1]["parts"], calls["candidates"][0]["content"]["parts"]);
    }

    #[test]
    fn google_errors_read_as_openai_errors() {
        let body = br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#;
        let out: Value = serde_json::from_slice(&gemini_error_to_openai(429, body)).unwrap();
        assert_eq!(
            out["error"],
            json!({"message": "Quota exceeded", "type": "rate_limit_error", "param": null, "code": "RESOURCE_EXHAUSTED"})
        );
        let listed: Value = serde_json::from_slice(&gemini_error_to_openai(
            400,
            format!("[{}]", std::str::from_utf8(body).unwrap()).as_bytes(),
        ))
        .unwrap();
        assert_eq!(listed["error"]["message"], "Quota exceeded");
        let html: Value = serde_json::from_slice(&gemini_error_to_openai(502, b"<html>bad</html>")).unwrap();
        assert_eq!(html["error"]["message"], "<html>bad</html>");
    }
}
