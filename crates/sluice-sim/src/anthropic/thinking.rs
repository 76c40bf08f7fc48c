//! Extended thinking, as Anthropic's API (and Claude on Bedrock, which the simulator
//! serves through this shape) answers and checks it:
//!
//! - `thinking: {type: "enabled", budget_tokens}` asks for it: `budget_tokens` is at least
//!   1,024 and below `max_tokens`, unless the `interleaved-thinking-2025-05-14` beta lifts
//!   the cap; tool use may not be forced (`tool_choice` `any` or `tool`); `temperature`
//!   may only be 1, `top_p` no lower than 0.95, `top_k` unset ("Feature compatibility").
//! - The answer opens with a `thinking` block whose `signature` the simulator signs (an HMAC
//!   of its text under the simulator's own key); a last user message carrying
//!   [`REDACTED_TRIGGER`] gets a `redacted_thinking` block first, its `data` signed alike.
//!   Streamed, a thinking block is `thinking_delta`s then one `signature_delta`.
//! - A thinking block sent back must carry its signature unaltered, a redacted one its data
//!   (else 400, "Invalid `signature` in `thinking` block"); with thinking on, the assistant
//!   turn whose tool call the last user turn answers must start with its thinking block.
//!
//! (<https://docs.claude.com/en/docs/build-with-claude/extended-thinking>; on Bedrock:
//! <https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-extended-thinking.html>.)
//! The simulated thinking is a short note outside the output count.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use ring::hmac;
use serde_json::{Value, json};

use super::request::{Content, MessagesRequest};
use crate::errors::ApiError;
use crate::pacer::event;

/// Anthropic's documented test string: a prompt holding it is answered with a
/// `redacted_thinking` block.
pub const REDACTED_TRIGGER: &str =
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253";

/// The beta that lets `budget_tokens` exceed `max_tokens` (thinking between tool calls).
pub const INTERLEAVED_BETA: &str = "interleaved-thinking-2025-05-14";

/// The smallest `budget_tokens` Anthropic takes.
const MIN_BUDGET: u64 = 1_024;

/// The key the simulator signs thinking with (what it signs, only it can check).
const SIGNING_KEY: &[u8] = b"sluice-sim-thinking-signature";

fn key() -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, SIGNING_KEY)
}

/// The signature of a thinking block's text.
#[must_use]
pub fn sign(thinking: &str) -> String {
    STANDARD.encode(hmac::sign(&key(), thinking.as_bytes()).as_ref())
}

fn verified(thinking: &str, signature: &str) -> bool {
    STANDARD.decode(signature).is_ok_and(|tag| hmac::verify(&key(), thinking.as_bytes(), &tag).is_ok())
}

/// A `redacted_thinking` block's `data`: what it hides and its HMAC, in base64.
fn redacted_data(hidden: &str) -> String {
    let mut bytes = hidden.as_bytes().to_vec();
    bytes.extend_from_slice(hmac::sign(&key(), hidden.as_bytes()).as_ref());
    STANDARD.encode(bytes)
}

fn redacted_verified(data: &str) -> bool {
    let Ok(bytes) = STANDARD.decode(data) else { return false };
    let Some(split) = bytes.len().checked_sub(32) else { return false };
    let (hidden, tag) = bytes.split_at(split);
    hmac::verify(&key(), hidden, tag).is_ok()
}

/// Whether the request asks for thinking.
#[must_use]
pub fn enabled(req: &MessagesRequest<'_>) -> bool {
    req.thinking.as_ref().and_then(|t| t.get("type")).and_then(Value::as_str) == Some("enabled")
}

fn invalid(message: String) -> ApiError {
    ApiError::Invalid { message, param: None }
}

/// The beta flags of the `anthropic-beta` headers.
fn betas(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all("anthropic-beta")
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// Refuses what Anthropic refuses about thinking (see the module's rules).
///
/// # Errors
/// The 400 naming the field, in Anthropic's words.
pub fn check(req: &MessagesRequest<'_>, headers: &HeaderMap, cap: u64) -> Result<(), ApiError> {
    let messages = req.messages.as_deref().unwrap_or_default();
    for (i, message) in messages.iter().enumerate() {
        let Content::Blocks(blocks) = &message.content else { continue };
        for (j, block) in blocks.iter().enumerate() {
            check_block(block, &format!("messages.{i}.content.{j}"))?;
        }
    }
    if !enabled(req) {
        return Ok(());
    }
    let budget = req.thinking.as_ref().and_then(|t| t.get("budget_tokens")).and_then(Value::as_u64);
    let Some(budget) = budget else { return Err(invalid("thinking.enabled.budget_tokens: Field required".into())) };
    if budget < MIN_BUDGET {
        return Err(invalid(format!(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET}"
        )));
    }
    if budget >= cap && !betas(headers).any(|b| b == INTERLEAVED_BETA) {
        return Err(invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size".into()));
    }
    check_sampling(req)?;
    let forced = req.tool_choice.as_ref().and_then(|c| c.get("type")).and_then(Value::as_str);
    if matches!(forced, Some("any" | "tool")) {
        return Err(invalid("Thinking may not be enabled when tool_choice forces tool use.".into()));
    }
    tool_turn_starts_with_thinking(messages)
}

/// Anthropic's refusals of sampling settings with thinking on, in its words.
fn check_sampling(req: &MessagesRequest<'_>) -> Result<(), ApiError> {
    const SEE: &str = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility";
    let number = |v: &Option<Value>| v.as_ref().filter(|v| !v.is_null()).map(|v| v.as_f64().unwrap_or(f64::NAN));
    if number(&req.temperature).is_some_and(|t| (t - 1.0).abs() > f64::EPSILON) {
        return Err(invalid(format!("`temperature` may only be set to 1 when thinking is enabled. {SEE}")));
    }
    if number(&req.top_p).is_some_and(|p| p.is_nan() || p < 0.95) {
        return Err(invalid(format!(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. {SEE}"
        )));
    }
    if number(&req.top_k).is_some() {
        return Err(invalid(format!("`top_k` must be unset when thinking is enabled. {SEE}")));
    }
    Ok(())
}

fn check_block(block: &Value, path: &str) -> Result<(), ApiError> {
    match block.get("type").and_then(Value::as_str) {
        Some("thinking") => {
            let text = block.get("thinking").and_then(Value::as_str).unwrap_or_default();
            match block.get("signature").and_then(Value::as_str) {
                None => Err(invalid(format!("{path}.thinking.signature: Field required"))),
                Some(signature) if verified(text, signature) => Ok(()),
                Some(_) => Err(invalid(format!("{path}: Invalid `signature` in `thinking` block"))),
            }
        }
        Some("redacted_thinking") => match block.get("data").and_then(Value::as_str) {
            Some(data) if redacted_verified(data) => Ok(()),
            _ => Err(invalid(format!("{path}: Invalid `data` in `redacted_thinking` block"))),
        },
        _ => Ok(()),
    }
}

/// With thinking on, a last user turn answering a tool call needs the assistant turn that
/// made the call to open with its thinking.
fn tool_turn_starts_with_thinking(messages: &[super::request::Message<'_>]) -> Result<(), ApiError> {
    let Some((last, rest)) = messages.split_last() else { return Ok(()) };
    let answers_a_call = matches!(&last.content, Content::Blocks(blocks)
        if blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")));
    let Some(call) = rest.last().filter(|m| answers_a_call && m.role == "assistant") else { return Ok(()) };
    let first = match &call.content {
        Content::Text(_) => "text",
        Content::Blocks(blocks) => blocks.first().and_then(|b| b.get("type")).and_then(Value::as_str).unwrap_or("none"),
    };
    if matches!(first, "thinking" | "redacted_thinking") {
        return Ok(());
    }
    Err(invalid(format!(
        "messages.{}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking",
        rest.len() - 1
    )))
}

/// The thinking blocks that open the answer `id` to a request whose last text is
/// `last_text`: a `redacted_thinking` block when it holds [`REDACTED_TRIGGER`], then a
/// signed `thinking` block.
#[must_use]
pub fn blocks(id: &str, last_text: &str) -> Vec<Value> {
    let mut out = Vec::with_capacity(2);
    if last_text.contains(REDACTED_TRIGGER) {
        out.push(json!({"type": "redacted_thinking", "data": redacted_data(&format!("redacted reasoning of {id}"))}));
    }
    let thinking = format!("Considering how to answer {id} step by step.");
    out.push(json!({"type": "thinking", "thinking": thinking, "signature": sign(&thinking)}));
    out
}

/// The stream events of `blocks` (from [`blocks`]), as indexes 0.. of the message: a
/// redacted block whole at its start, a thinking block as two `thinking_delta`s and its
/// `signature_delta`.
pub fn stream(blocks: &[Value], out: &mut Vec<u8>) {
    for (index, block) in blocks.iter().enumerate() {
        let delta = |d: Value| json!({"type": "content_block_delta", "index": index, "delta": d});
        if block["type"] == "thinking" {
            let start = json!({"type": "thinking", "thinking": "", "signature": ""});
            event(
                out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            let text = block["thinking"].as_str().unwrap_or_default();
            let (head, tail) = text.split_at(text.find(' ').unwrap_or(text.len()));
            for piece in [head, tail].into_iter().filter(|p| !p.is_empty()) {
                event(out, "content_block_delta", &delta(json!({"type": "thinking_delta", "thinking": piece})));
            }
            event(
                out,
                "content_block_delta",
                &delta(json!({"type": "signature_delta", "signature": block["signature"]})),
            );
        } else {
            event(
                out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            );
        }
        event(out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &Value, headers: &HeaderMap) -> Option<String> {
        let text = body.to_string();
        let req: MessagesRequest = serde_json::from_str(&text).unwrap();
        match check(&req, headers, req.max_tokens.unwrap_or(0)) {
            Ok(()) => None,
            Err(ApiError::Invalid { message, .. }) => Some(message),
            Err(other) => Some(format!("{other:?}")),
        }
    }

    fn conversation(assistant: Vec<Value>) -> Value {
        json!({"model": "claude", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "weather? call-tool:get"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]}
        ]})
    }

    #[test]
    fn a_tool_turn_replayed_with_its_signed_thinking_passes_and_without_it_is_refused() {
        let headers = HeaderMap::new();
        let mut assistant = blocks("msg_1", REDACTED_TRIGGER);
        assert_eq!(assistant.len(), 2);
        assistant.push(json!({"type": "tool_use", "id": "t1", "name": "get", "input": {}}));
        assert_eq!(refusal(&conversation(assistant.clone()), &headers), None);

        let without = vec![assistant[2].clone()];
        let message = refusal(&conversation(without), &headers).unwrap_or_default();
        assert!(message.starts_with("messages.1.content.0.type: Expected `thinking`"), "{message}");

        let mut altered = assistant.clone();
        altered[1]["thinking"] = json!("Something else entirely.");
        assert_eq!(
            refusal(&conversation(altered), &headers).as_deref(),
            Some("messages.1.content.1: Invalid `signature` in `thinking` block")
        );
        let mut unsigned = assistant.clone();
        unsigned[1].as_object_mut().unwrap().remove("signature");
        assert_eq!(
            refusal(&conversation(unsigned), &headers).as_deref(),
            Some("messages.1.content.1.thinking.signature: Field required")
        );
        let mut forged = assistant;
        forged[0]["data"] = json!(STANDARD.encode(b"not from the provider, not signed at all......"));
        assert_eq!(
            refusal(&conversation(forged), &headers).as_deref(),
            Some("messages.1.content.0: Invalid `data` in `redacted_thinking` block")
        );
    }

    #[test]
    fn the_budget_stays_below_max_tokens_unless_thinking_is_interleaved() {
        let body = json!({"model": "claude", "max_tokens": 1024, "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "hi"}]});
        let message = refusal(&body, &HeaderMap::new()).unwrap_or_default();
        assert!(message.contains("must be greater than `thinking.budget_tokens`"), "{message}");
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-beta",
            http::HeaderValue::from_static("context-1m-2025-08-07,interleaved-thinking-2025-05-14"),
        );
        assert_eq!(refusal(&body, &headers), None);
        let small = json!({"model": "claude", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 100},
            "messages": [{"role": "user", "content": "hi"}]});
        assert!(refusal(&small, &headers).is_some_and(|m| m.contains("greater than or equal to 1024")));
        let disabled: MessagesRequest = serde_json::from_str(r#"{"thinking": {"type": "disabled"}}"#).unwrap();
        assert!(!enabled(&disabled));
    }

    #[test]
    fn thinking_takes_temperature_1_a_high_top_p_and_no_top_k() {
        let with = |extra: Value| {
            let mut body = json!({"model": "claude", "max_tokens": 2048,
                "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": [{"role": "user", "content": "hi"}]});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            refusal(&body, &HeaderMap::new())
        };
        assert_eq!(with(json!({"temperature": 1, "top_p": 0.95})), None);
        assert!(with(json!({"temperature": 0.5})).is_some_and(|m| m.starts_with("`temperature` may only be set to 1")));
        assert!(with(json!({"top_p": 0.9})).is_some_and(|m| m.starts_with("`top_p` must be greater than or equal")));
        assert!(with(json!({"top_k": 5})).is_some_and(|m| m.starts_with("`top_k` must be unset")));
        let off: MessagesRequest = serde_json::from_str(r#"{"temperature": 0.2, "top_k": 5}"#).unwrap();
        assert!(check(&off, &HeaderMap::new(), 100).is_ok(), "without thinking sampling is free");
    }

    #[test]
    fn a_streamed_thinking_block_ends_with_its_signature() {
        let blocks = blocks("msg_2", "hi");
        let mut out = Vec::new();
        stream(&blocks, &mut out);
        let text = String::from_utf8(out).unwrap();
        let signature = blocks[0]["signature"].as_str().unwrap();
        assert!(text.contains(&format!(r#""signature":"{signature}","type":"signature_delta""#)), "{text}");
        let thinking: String = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|d| d["delta"]["thinking"].as_str().map(str::to_owned))
            .collect();
        assert!(verified(&thinking, signature), "the deltas add up to the signed text");
    }
}
