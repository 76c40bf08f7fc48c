//! The OpenAI chat answer the road gives → the `GenerateContentResponse` a Gemini client
//! reads (<https://ai.google.dev/api/generate-content#generatecontentresponse>): the inverse
//! of [`gemini_to_openai_response`](super::gemini_to_openai_response), sharing its part,
//! usage, finish-reason and signature mappings.

use serde_json::{Map, Value, json};

use super::response::{gemini_finish_reason, gemini_usage_of};
use super::thinking::{block_signature, extra_content_signature};
use crate::translate::error::TranslateError;
use crate::translate::json;

/// Translates an OpenAI chat completion into a Gemini `GenerateContentResponse` for
/// `model` (the profile the client named in its path).
///
/// `message.reasoning_content` (when an upstream gives one) → a `thought: true` part, or,
/// when the answer carries signed `thinking_blocks` (Claude's), one such part a block, the
/// block wrapped in its `thoughtSignature` (see [`thought_parts`]); the
/// content → a text part carrying the message's `extra_content.google.thought_signature`
/// as its `thoughtSignature`; each tool call → a `functionCall` part (`id`, `name`, `args`)
/// with its own signature; `finish_reason` → `finishReason`; `usage` → `usageMetadata`.
///
/// # Errors
/// When the body is not a JSON object.
pub fn openai_to_gemini_response(body: &[u8], model: &str) -> Result<Vec<u8>, TranslateError> {
    let response = json::parse_body(body)?;
    let choice = response.get("choices").and_then(Value::as_array).and_then(|c| c.first());
    let message = choice.and_then(|c| c.get("message")).unwrap_or(&Value::Null);
    let mut parts = thought_parts(message);
    let text = message.get("content").and_then(Value::as_str).unwrap_or_default();
    let signature = extra_content_signature(message);
    if !text.is_empty() || signature.is_some() {
        parts.push(text_part(text, signature));
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        parts.push(function_call_part(call));
    }
    let reason = choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str);
    let mut out = Map::new();
    out.insert(
        "candidates".into(),
        json!([{"content": {"role": "model", "parts": parts}, "finishReason": gemini_finish_reason(reason), "index": 0}]),
    );
    if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
        out.insert("usageMetadata".into(), gemini_usage_of(usage));
    }
    out.insert("modelVersion".into(), Value::from(model));
    if let Some(id) = response.get("id").and_then(Value::as_str) {
        out.insert("responseId".into(), Value::from(id));
    }
    Ok(json::to_vec(&Value::Object(out)))
}

/// The thought parts of an answer (or a stream delta): each of its `thinking_blocks`
/// (Claude's signed thinking) as a `thought: true` part with the block's text, the block
/// itself wrapped in the part's `thoughtSignature` so that the client's replay gives it
/// back; else its `reasoning_content` as one unsigned thought part.
fn thought_parts(message: &Value) -> Vec<Value> {
    let blocks = message.get("thinking_blocks").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if !blocks.is_empty() {
        return blocks
            .iter()
            .map(|block| {
                let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
                json!({"text": text, "thought": true, "thoughtSignature": block_signature(block)})
            })
            .collect();
    }
    match message.get("reasoning_content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        Some(thought) => vec![json!({"text": thought, "thought": true})],
        None => Vec::new(),
    }
}

/// A text part, with its signature when it has one.
pub(crate) fn text_part(text: &str, signature: Option<&str>) -> Value {
    let mut part = json!({"text": text});
    if let Some(signature) = signature {
        part["thoughtSignature"] = Value::from(signature);
    }
    part
}

/// An OpenAI tool call (complete) as a `functionCall` part; arguments that are not a JSON
/// object go as `{}` (the model's call was already broken).
pub(crate) fn function_call_part(call: &Value) -> Value {
    let function = call.get("function").unwrap_or(&Value::Null);
    let name = function.get("name").and_then(Value::as_str).unwrap_or_default();
    let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or_default();
    let args = json::parse_arguments(arguments, "").unwrap_or_else(|_| json!({}));
    let mut part = json!({"functionCall": {"name": name, "args": args}});
    if let Some(id) = call.get("id").and_then(Value::as_str) {
        part["functionCall"]["id"] = Value::from(id);
    }
    if let Some(signature) = extra_content_signature(call) {
        part["thoughtSignature"] = Value::from(signature);
    }
    part
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::openai_to_gemini_response;
    use crate::translate::gemini::gemini_to_openai_response;

    fn translate(body: &Value) -> Value {
        serde_json::from_slice(&openai_to_gemini_response(body.to_string().as_bytes(), "gemini").unwrap()).unwrap()
    }

    #[test]
    fn text_usage_and_finish_reason_carry_over() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gemini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20,
                "prompt_tokens_details": {"cached_tokens": 8}, "completion_tokens_details": {"reasoning_tokens": 6}}
        });
        let out = translate(&body);
        assert_eq!(out["candidates"][0]["content"], json!({"role": "model", "parts": [{"text": "Hello"}]}));
        assert_eq!(out["candidates"][0]["finishReason"], "MAX_TOKENS");
        assert_eq!(
            out["usageMetadata"],
            json!({"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 6, "cachedContentTokenCount": 8, "totalTokenCount": 20})
        );
        // The forward translation reads it back to the same usage.
        let back: Value =
            serde_json::from_slice(&gemini_to_openai_response(out.to_string().as_bytes(), "gemini", 0).unwrap())
                .unwrap();
        assert_eq!(back["usage"], body["usage"]);
        assert_eq!(back["choices"][0]["message"]["content"], "Hello");
    }

    #[test]
    fn tool_calls_become_function_calls_with_their_signatures() {
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
                "extra_content": {"google": {"thought_signature": "c2ln"}}},
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
            "finish_reason": "tool_calls"}]});
        let out = translate(&body);
        assert_eq!(
            out["candidates"][0]["content"]["parts"],
            json!([
                {"functionCall": {"id": "call_0", "name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"},
                {"functionCall": {"id": "call_1", "name": "weather", "args": {"city": "Rome"}}}
            ])
        );
        assert_eq!(out["candidates"][0]["finishReason"], "STOP");
        assert!(out.get("usageMetadata").is_none());
        let signed = json!({"choices": [{"message": {"content": "Hi", "reasoning_content": "hmm",
            "extra_content": {"google": {"thought_signature": "dGV4dA=="}}}, "finish_reason": "stop"}]});
        assert_eq!(
            translate(&signed)["candidates"][0]["content"]["parts"],
            json!([{"text": "hmm", "thought": true}, {"text": "Hi", "thoughtSignature": "dGV4dA=="}])
        );
    }
}
