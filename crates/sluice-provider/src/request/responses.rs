//! Validation of OpenAI Responses (`POST /v1/responses`) bodies.

use serde_json::Value;

use super::Shape;
use super::fields::{self, Object};
use super::openai::positive;
use crate::error::RequestError;

/// Validates a `/v1/responses` body: `input` a string or a non-empty list of items (each an
/// object; messages with a string `role` and string or typed-part `content`), optional
/// string `instructions`, array `tools`, positive `max_output_tokens`, boolean `stream`.
pub(super) fn responses(body: &Object) -> Result<Shape, RequestError> {
    match fields::present(body, "input") {
        None => return Err(RequestError::missing("input")),
        Some(Value::String(_)) => {}
        Some(Value::Array(items)) if items.is_empty() => {
            return Err(RequestError::invalid("input", "must contain at least one item"));
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, i)?;
            }
        }
        Some(_) => return Err(RequestError::wrong_type("input", "a string or an array of input items")),
    }
    match fields::present(body, "instructions") {
        None | Some(Value::String(_)) => {}
        Some(_) => return Err(RequestError::wrong_type("instructions", "a string")),
    }
    fields::opt_array(body, "tools", || "tools".to_owned())?;
    match fields::present(body, "previous_response_id") {
        None | Some(Value::String(_)) => {}
        Some(_) => return Err(RequestError::wrong_type("previous_response_id", "a string")),
    }
    match fields::present(body, "conversation") {
        None | Some(Value::String(_) | Value::Object(_)) => {}
        Some(_) => return Err(RequestError::wrong_type("conversation", "a string or an object")),
    }
    Ok(Shape {
        stream: fields::opt_bool(body, "stream")?.unwrap_or(false),
        max_output_tokens: positive(body, "max_output_tokens")?,
        client_wants_stream_usage: false,
        choices: 1,
    })
}

/// One input item: an object; a message (no `type`, or `type: "message"`) has a string
/// `role` and `content` as a string or typed parts. Other items (function calls and their
/// outputs, reasoning, item references) are the provider's to judge.
fn input_item(item: &Value, i: usize) -> Result<(), RequestError> {
    let path = || format!("input[{i}]");
    let Some(item) = item.as_object() else {
        return Err(RequestError::wrong_type(path(), "an object"));
    };
    let kind = fields::nested_opt_str(item, "type", &path)?;
    if kind.is_some_and(|k| k != "message") {
        return Ok(());
    }
    fields::nested_str(item, "role", &path)?;
    match fields::present(item, "content") {
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(parts)) => fields::typed_parts(parts, &|| format!("input[{i}].content")),
        Some(_) => {
            Err(RequestError::wrong_type(format!("input[{i}].content"), "a string or an array of content parts"))
        }
        None => Err(RequestError::missing(format!("input[{i}].content"))),
    }
}
