//! OpenAI chat `messages` → Anthropic `system` + alternating `messages`.

use serde_json::Value;

use crate::protocol::Protocol;
use crate::translate::error::TranslateError;
use crate::translate::image;
use crate::translate::json::{self, Object, object, text_block};
use crate::translate::tools;

/// The translated conversation.
pub(super) struct Converted {
    /// The top-level `system` (a string for one plain system message, else text blocks).
    pub(super) system: Option<Value>,
    /// User and assistant turns, consecutive same-role messages merged.
    pub(super) messages: Vec<Value>,
}

/// One Anthropic turn being assembled.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

impl Turn {
    /// The message; a lone text block is written as plain string content.
    fn into_value(self) -> Value {
        let content = match self.blocks.as_slice() {
            [Value::Object(block)] if block.len() == 2 && block.get("type") == Some(&Value::from("text")) => {
                block.get("text").cloned().unwrap_or_default()
            }
            _ => Value::Array(self.blocks),
        };
        Value::Object(object([("role", Value::from(self.role)), ("content", content)]))
    }
}

/// Translates the `messages` list.
pub(super) fn messages(list: &[Value]) -> Result<Converted, TranslateError> {
    let mut system = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for (i, message) in list.iter().enumerate() {
        let path = format!("messages[{i}]");
        let message = json::as_object(message, &path)?;
        match json::req_str(message, "role", &path)? {
            "system" | "developer" => system.extend(content_blocks(message, &path, Allow::Text)?),
            "user" => push(&mut turns, "user", content_blocks(message, &path, Allow::TextAndImages)?),
            "assistant" => push(&mut turns, "assistant", assistant_blocks(message, &path)?),
            "tool" => push(&mut turns, "user", vec![tool_result(message, &path)?]),
            "function" => {
                let reason = "legacy function messages (use tool messages)";
                return Err(TranslateError::unsupported(format!("{path}.role"), Protocol::AnthropicMessages, reason));
            }
            _ => return Err(TranslateError::invalid(format!("{path}.role"), "is not a chat role")),
        }
    }
    let system = match system.as_slice() {
        [] => None,
        [only] if only.as_object().is_some_and(|b| b.len() == 2) => only.get("text").cloned(),
        _ => Some(Value::Array(system)),
    };
    Ok(Converted { system, messages: turns.into_iter().map(Turn::into_value).collect() })
}

/// Appends `blocks` as a `role` turn, merging into the previous turn of the same role.
fn push(turns: &mut Vec<Turn>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some(last) if last.role == role => last.blocks.extend(blocks),
        _ => turns.push(Turn { role, blocks }),
    }
}

/// Which content parts a message may carry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Allow {
    /// `text` (and, on assistant messages, `refusal`) parts.
    Text,
    /// Text and `image_url` parts (user messages).
    TextAndImages,
}

/// A message's `content` (string or parts) as Anthropic blocks; empty text is skipped
/// (Anthropic rejects empty text blocks).
fn content_blocks(message: &Object, path: &str, allow: Allow) -> Result<Vec<Value>, TranslateError> {
    match json::present(message, "content") {
        None => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(non_empty_text(text).into_iter().collect()),
        Some(Value::Array(parts)) => {
            let mut blocks = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                blocks.extend(part_block(part, &format!("{path}.content[{j}]"), allow)?);
            }
            Ok(blocks)
        }
        Some(_) => Err(TranslateError::invalid(format!("{path}.content"), "must be a string or an array of parts")),
    }
}

fn non_empty_text(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| text_block(text))
}

/// One content part as a block (`None` for an empty text).
fn part_block(part: &Value, path: &str, allow: Allow) -> Result<Option<Value>, TranslateError> {
    let part = json::as_object(part, path)?;
    match json::req_str(part, "type", path)? {
        "text" => Ok(non_empty_text(json::req_str(part, "text", path)?)),
        "refusal" => Ok(non_empty_text(json::req_str(part, "refusal", path)?)),
        "image_url" if allow == Allow::TextAndImages => image::to_anthropic(part, path).map(Some),
        _ => Err(TranslateError::unsupported(
            format!("{path}.type"),
            Protocol::AnthropicMessages,
            "only text and image parts can be passed on",
        )),
    }
}

/// An assistant message: its replayed `thinking_blocks` (Anthropic wants them first, before
/// text and tool use), its text (content parts, or a `refusal`), then its tool calls as
/// `tool_use` blocks.
fn assistant_blocks(message: &Object, path: &str) -> Result<Vec<Value>, TranslateError> {
    if json::present(message, "audio").is_some() || json::present(message, "function_call").is_some() {
        let reason = "assistant audio and legacy function calls have no counterpart";
        return Err(TranslateError::unsupported(path, Protocol::AnthropicMessages, reason));
    }
    let mut blocks = super::thinking::replayed_blocks(message, path)?;
    blocks.extend(content_blocks(message, path, Allow::Text)?);
    if let Some(refusal) = json::opt_str(message, "refusal", path)? {
        blocks.extend(non_empty_text(refusal));
    }
    for (k, call) in json::opt_array(message, "tool_calls", path)?.iter().enumerate() {
        blocks.push(tools::call_to_anthropic(call, &format!("{path}.tool_calls[{k}]"))?);
    }
    Ok(blocks)
}

/// `{role: "tool", tool_call_id, content}` → `{type: "tool_result", tool_use_id, content}`.
fn tool_result(message: &Object, path: &str) -> Result<Value, TranslateError> {
    let content = match json::present(message, "content") {
        Some(Value::String(text)) => Value::from(text.as_str()),
        _ => Value::Array(content_blocks(message, path, Allow::Text)?),
    };
    Ok(Value::Object(object([
        ("type", Value::from("tool_result")),
        ("tool_use_id", Value::from(json::req_str(message, "tool_call_id", path)?)),
        ("content", content),
    ])))
}
