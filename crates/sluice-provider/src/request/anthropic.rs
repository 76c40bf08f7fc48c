//! Validation of Anthropic messages bodies.

use serde_json::Value;

use super::Shape;
use super::fields::{self, Object};
use crate::error::RequestError;

/// Validates a `/v1/messages` body: non-empty `messages` of objects with string `role` and
/// `content` a string or an array of typed blocks; `max_tokens` a positive integer
/// (required); `system` a string or an array of text blocks.
pub(super) fn messages(body: &Object) -> Result<Shape, RequestError> {
    for (i, message) in fields::object_list(body, "messages")?.into_iter().enumerate() {
        message_entry(message, i)?;
    }
    let max_tokens = match fields::opt_u64(body, "max_tokens")? {
        None => return Err(RequestError::missing("max_tokens")),
        Some(0) => return Err(RequestError::invalid("max_tokens", "must be >= 1")),
        Some(n) => n,
    };
    system(body)?;
    fields::opt_array(body, "tools", || "tools".to_owned())?;
    Ok(Shape {
        stream: fields::opt_bool(body, "stream")?.unwrap_or(false),
        max_output_tokens: Some(max_tokens),
        client_wants_stream_usage: false,
        choices: 1,
    })
}

fn message_entry(message: &Object, i: usize) -> Result<(), RequestError> {
    let path = || format!("messages[{i}]");
    fields::nested_str(message, "role", &path)?;
    match fields::present(message, "content") {
        None => Err(RequestError::missing(format!("messages[{i}].content"))),
        Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => fields::typed_parts(blocks, &|| format!("messages[{i}].content")),
        Some(_) => {
            Err(RequestError::wrong_type(format!("messages[{i}].content"), "a string or an array of content blocks"))
        }
    }
}

fn system(body: &Object) -> Result<(), RequestError> {
    match fields::present(body, "system") {
        None | Some(Value::String(_)) => Ok(()),
        Some(Value::Array(blocks)) => {
            fields::typed_parts(blocks, &|| "system".to_owned())?;
            let non_text = blocks.iter().position(|b| b.get("type").and_then(Value::as_str) != Some("text"));
            match non_text {
                Some(i) => Err(RequestError::invalid(format!("system[{i}].type"), "must be \"text\"")),
                None => Ok(()),
            }
        }
        Some(_) => Err(RequestError::wrong_type("system", "a string or an array of text blocks")),
    }
}
