//! Validation of OpenAI chat-completions and embeddings bodies.

use serde_json::Value;

use super::Shape;
use super::fields::{self, Object};
use crate::error::RequestError;

/// Largest `n` accepted (OpenAI's own bound).
const MAX_CHOICES: u64 = 128;

/// Validates a `/v1/chat/completions` body and extracts what admission needs.
pub(super) fn chat(body: &Object) -> Result<Shape, RequestError> {
    for (i, message) in fields::object_list(body, "messages")?.into_iter().enumerate() {
        chat_message(message, i)?;
    }
    // Validate both even when the first wins: a bad value is a bad request either way.
    let max_completion_tokens = positive(body, "max_completion_tokens")?;
    let max_output_tokens = max_completion_tokens.or(positive(body, "max_tokens")?);
    fields::opt_array(body, "tools", || "tools".to_owned())?;
    Ok(Shape {
        stream: fields::opt_bool(body, "stream")?.unwrap_or(false),
        max_output_tokens,
        client_wants_stream_usage: include_usage(body)?,
        choices: choices(body)?,
    })
}

/// Validates a legacy `/v1/completions` body: `prompt` (optional) a string or a list of
/// strings or token ids, `max_tokens` positive, `n` and `stream_options` as for chat.
pub(super) fn completions(body: &Object) -> Result<Shape, RequestError> {
    match fields::present(body, "prompt") {
        None | Some(Value::String(_) | Value::Array(_)) => {}
        Some(_) => return Err(RequestError::wrong_type("prompt", "a string or an array")),
    }
    Ok(Shape {
        stream: fields::opt_bool(body, "stream")?.unwrap_or(false),
        max_output_tokens: positive(body, "max_tokens")?,
        client_wants_stream_usage: include_usage(body)?,
        choices: choices(body)?,
    })
}

/// `stream_options.include_usage` set true by the client.
fn include_usage(body: &Object) -> Result<bool, RequestError> {
    let Some(options) = fields::opt_object(body, "stream_options")? else { return Ok(false) };
    let include = fields::opt_bool(options, "include_usage")
        .map_err(|_| RequestError::wrong_type("stream_options.include_usage", "a boolean"))?;
    Ok(include == Some(true))
}

/// An optional output bound: a positive integer. Zero is refused, not passed on: the
/// provider would refuse it after admission, and a zero reservation prices nothing.
pub(super) fn positive(body: &Object, name: &str) -> Result<Option<u64>, RequestError> {
    match fields::opt_u64(body, name)? {
        Some(0) => Err(RequestError::invalid(name, "must be >= 1")),
        other => Ok(other),
    }
}

/// `n`: 1..=128, default 1.
fn choices(body: &Object) -> Result<u32, RequestError> {
    let Some(value) = fields::present(body, "n") else {
        return Ok(1);
    };
    if !value.is_i64() && !value.is_u64() {
        return Err(RequestError::wrong_type("n", "an integer"));
    }
    value
        .as_u64()
        .filter(|n| (1..=MAX_CHOICES).contains(n))
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| RequestError::invalid("n", "must be between 1 and 128"))
}

/// One entry of `messages`: string `role`; `content` a string, an array of typed parts, or
/// `null`/absent on assistant messages (which then carry `tool_calls`, `function_call`,
/// `audio` or `refusal`); optional string `name`; optional array `tool_calls`.
fn chat_message(message: &Object, i: usize) -> Result<(), RequestError> {
    let path = || format!("messages[{i}]");
    let role = fields::nested_str(message, "role", &path)?;
    match fields::present(message, "content") {
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => fields::typed_parts(parts, &|| format!("messages[{i}].content"))?,
        Some(_) => {
            return Err(RequestError::wrong_type(
                format!("messages[{i}].content"),
                "a string, an array of content parts or null",
            ));
        }
        None if role == "assistant" => {}
        None => return Err(RequestError::missing(format!("messages[{i}].content"))),
    }
    fields::nested_opt_str(message, "name", &path)?;
    fields::opt_array(message, "tool_calls", || format!("messages[{i}].tool_calls"))?;
    Ok(())
}

/// Validates a `/v1/embeddings` body: `input` is a string, or a non-empty array of strings,
/// of token ids, or of non-empty arrays of token ids.
pub(super) fn embeddings(body: &Object) -> Result<Shape, RequestError> {
    match fields::present(body, "input") {
        None => return Err(RequestError::missing("input")),
        Some(Value::String(_)) => {}
        Some(Value::Array(items)) => embedding_items(items)?,
        Some(_) => return Err(wrong_input("input")),
    }
    Ok(Shape { stream: false, max_output_tokens: None, client_wants_stream_usage: false, choices: 1 })
}

fn embedding_items(items: &[Value]) -> Result<(), RequestError> {
    let Some(first) = items.first() else {
        return Err(RequestError::invalid("input", "must contain at least one item"));
    };
    for (i, item) in items.iter().enumerate() {
        let ok = match (first, item) {
            (Value::String(_), Value::String(_)) => true,
            (Value::Number(_), Value::Number(n)) => n.as_u64().is_some(),
            (Value::Array(_), Value::Array(ids)) => !ids.is_empty() && ids.iter().all(|t| t.as_u64().is_some()),
            _ => false,
        };
        if !ok {
            return Err(wrong_input(&format!("input[{i}]")));
        }
    }
    Ok(())
}

fn wrong_input(param: &str) -> RequestError {
    RequestError::wrong_type(
        param,
        "a string, or an array of strings, of token ids or of arrays of token ids (one kind throughout)",
    )
}
