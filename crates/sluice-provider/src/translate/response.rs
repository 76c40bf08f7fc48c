//! Non-stream response bodies: Anthropic message ⇄ OpenAI chat completion.

use serde::Deserialize;
use serde_json::Value;

use super::error::TranslateError;
use super::gemini::{anthropic_signature, object_signature as signature};
use super::json::{self, Object, object};
use super::{mapping, tools};
use crate::protocol::Protocol;
use crate::usage::{RawUsage, Usage};

/// Translates an Anthropic message body into an OpenAI chat completion.
///
/// Text blocks are joined into `message.content` (`null` when the answer is only tool
/// calls), `tool_use` blocks become `message.tool_calls`; thinking goes where LiteLLM puts
/// it for OpenAI-shaped clients of Claude (<https://docs.litellm.ai/docs/reasoning_content>):
/// the thinking text into `message.reasoning_content`, and the `thinking` and
/// `redacted_thinking` blocks themselves, signature and data verbatim, into
/// `message.thinking_blocks`, which the client sends back on the assistant message to
/// replay them; server-tool blocks are dropped; `stop_reason` maps to `finish_reason` (`end_turn`/`stop_sequence` → `stop`,
/// `max_tokens` → `length`, `tool_use` → `tool_calls`, `refusal` → `content_filter`);
/// usage counters are converted (`prompt_tokens` = all input incl. cache,
/// `prompt_tokens_details.cached_tokens` = cache reads); `id` becomes `chatcmpl-…`.
/// `model` is the name the client asked for, `created` the Unix time to report (time is
/// injected: this crate reads no clock).
///
/// # Errors
/// [`TranslateError::Invalid`] when the body is not a JSON message with a `content` array.
pub fn anthropic_to_openai_response(body: &[u8], model: &str, created: u64) -> Result<Vec<u8>, TranslateError> {
    let msg = json::parse_body(body)?;
    let Some(Value::Array(blocks)) = json::present(&msg, "content") else {
        return Err(TranslateError::invalid("content", "must be an array of blocks"));
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut reasoning = String::new();
    let mut thoughts = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let path = format!("content[{j}]");
        let obj = json::as_object(block, &path)?;
        match json::req_str(obj, "type", &path)? {
            "text" => text.push_str(json::req_str(obj, "text", &path)?),
            "tool_use" => calls.push(tools::call_to_openai(obj, &path)?),
            "thinking" => {
                reasoning.push_str(json::opt_str(obj, "thinking", &path)?.unwrap_or_default());
                thoughts.push(block.clone());
            }
            "redacted_thinking" => thoughts.push(block.clone()),
            _ => {}
        }
    }
    let content = if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(text) };
    let mut message = object([("role", Value::from("assistant")), ("content", content), ("refusal", Value::Null)]);
    if !calls.is_empty() {
        message.insert("tool_calls".to_owned(), Value::Array(calls));
    }
    if !thoughts.is_empty() {
        message.insert("reasoning_content".to_owned(), Value::from(reasoning));
        message.insert("thinking_blocks".to_owned(), Value::Array(thoughts));
    }
    let stop_reason = json::opt_str(&msg, "stop_reason", "")?;
    let choice = object([
        ("index", Value::from(0)),
        ("message", Value::Object(message)),
        ("logprobs", Value::Null),
        ("finish_reason", Value::from(mapping::finish_reason(stop_reason))),
    ]);
    let usage = usage_of(&msg, Protocol::AnthropicMessages);
    let out = object([
        ("id", Value::from(mapping::openai_id(json::opt_str(&msg, "id", "")?.unwrap_or_default()))),
        ("object", Value::from("chat.completion")),
        ("created", Value::from(created)),
        ("model", Value::from(model)),
        ("choices", Value::Array(vec![Value::Object(choice)])),
        ("usage", mapping::openai_usage(&usage)),
    ]);
    Ok(json::to_vec(&Value::Object(out)))
}

/// Translates an OpenAI chat completion body into an Anthropic message.
///
/// The first choice is used (a translated request never asks for more): its `content`
/// becomes a text block, a `refusal` a text block with `stop_reason: "refusal"`, its
/// `tool_calls` `tool_use` blocks (arguments parsed into `input`), the reasoning and Gemini's
/// thought signatures `thinking` blocks (see `content_blocks`); `finish_reason` maps to
/// `stop_reason` (`stop` → `end_turn`, `length` → `max_tokens`, `tool_calls` → `tool_use`,
/// `content_filter` → `refusal`); usage counters are converted (`input_tokens` excludes
/// cached tokens, reported as `cache_read_input_tokens`); `id` becomes `msg_…`; `model` is
/// the name the client asked for.
///
/// # Errors
/// [`TranslateError::Invalid`] when the body is not a completion with a `choices[0].message`,
/// or a tool call's arguments are not a JSON object.
pub fn openai_to_anthropic_response(body: &[u8], model: &str) -> Result<Vec<u8>, TranslateError> {
    let completion = json::parse_body(body)?;
    let choice = json::opt_array(&completion, "choices", "")?
        .first()
        .and_then(Value::as_object)
        .ok_or_else(|| TranslateError::invalid("choices", "must hold at least one choice"))?;
    let message = json::as_object(json::present(choice, "message").unwrap_or(&Value::Null), "choices[0].message")?;
    let (content, refused) = content_blocks(message)?;
    let finish = json::opt_str(choice, "finish_reason", "choices[0]")?;
    let stop_reason = if refused { "refusal" } else { mapping::stop_reason(finish) };
    let usage = usage_of(&completion, Protocol::OpenAiChat);
    let out = object([
        ("id", Value::from(mapping::anthropic_id(json::opt_str(&completion, "id", "")?.unwrap_or_default()))),
        ("type", Value::from("message")),
        ("role", Value::from("assistant")),
        ("model", Value::from(model)),
        ("content", Value::Array(content)),
        ("stop_reason", Value::from(stop_reason)),
        ("stop_sequence", Value::Null),
        ("usage", mapping::anthropic_usage(&usage)),
    ]);
    Ok(json::to_vec(&Value::Object(out)))
}

/// A completion message's blocks, and whether it was a refusal.
///
/// The model's reasoning (`reasoning_content`) and Gemini's thought signatures
/// (`extra_content.google.thought_signature` on the message and its tool calls) become
/// `thinking` blocks: the reasoning first, each signature, prefixed `gemini:`, on a block
/// just before the text or `tool_use` whose part carried it, so that a client sending the
/// turn back gives each signature back to its part.
fn content_blocks(message: &Object) -> Result<(Vec<Value>, bool), TranslateError> {
    let path = "choices[0].message";
    let mut blocks = Vec::new();
    let mut reasoning = json::opt_str(message, "reasoning_content", path)?.filter(|t| !t.is_empty());
    let mut text_signature = signature(message);
    let text = json::opt_str(message, "content", path)?.filter(|t| !t.is_empty());
    let calls = json::opt_array(message, "tool_calls", path)?;
    if text.is_some() || calls.is_empty() {
        thinking_block(&mut blocks, reasoning.take(), text_signature.take());
    }
    if let Some(text) = text {
        blocks.push(json::text_block(text));
    }
    let refusal = json::opt_str(message, "refusal", path)?.filter(|t| !t.is_empty());
    if let Some(text) = refusal {
        blocks.push(json::text_block(text));
    }
    for (k, call) in calls.iter().enumerate() {
        let call_signature = call.as_object().and_then(signature);
        thinking_block(&mut blocks, reasoning.take(), call_signature);
        blocks.push(tools::call_to_anthropic(call, &format!("{path}.tool_calls[{k}]"))?);
    }
    thinking_block(&mut blocks, None, text_signature);
    Ok((blocks, refusal.is_some()))
}

/// Pushes a `thinking` block with `reasoning` and `signature` (prefixed for Gemini), when
/// there is either.
fn thinking_block(blocks: &mut Vec<Value>, reasoning: Option<&str>, signature: Option<&str>) {
    if reasoning.is_none() && signature.is_none() {
        return;
    }
    blocks.push(Value::Object(object([
        ("type", Value::from("thinking")),
        ("thinking", Value::from(reasoning.unwrap_or_default())),
        ("signature", Value::from(signature.map(anthropic_signature).unwrap_or_default())),
    ])));
}

/// The body's `usage` read as `protocol` reports it; zeros when absent.
fn usage_of(body: &Object, protocol: Protocol) -> Usage {
    json::present(body, "usage")
        .and_then(|raw| RawUsage::deserialize(raw).ok())
        .map(|raw| raw.into_usage(protocol))
        .unwrap_or_default()
}
