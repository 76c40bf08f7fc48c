//! Anthropic `system` + `messages` → OpenAI chat `messages`.

use serde_json::Value;

use super::{ChatUpstream, gemini_thinking};
use crate::protocol::Protocol;
use crate::translate::error::TranslateError;
use crate::translate::image;
use crate::translate::json::{self, Object, object};
use crate::translate::tools;

/// The top-level `system` as a leading system message (string, or text parts).
pub(super) fn system(body: &Object) -> Result<Option<Value>, TranslateError> {
    let content = match json::present(body, "system") {
        None => return Ok(None),
        Some(Value::String(text)) if text.is_empty() => return Ok(None),
        Some(Value::String(text)) => Value::from(text.as_str()),
        Some(Value::Array(blocks)) => text_content(blocks, "system")?,
        Some(_) => return Err(TranslateError::invalid("system", "must be a string or an array of text blocks")),
    };
    Ok(Some(message("system", content)))
}

/// Translates the `messages` list; a `user` turn may expand into several messages.
pub(super) fn messages(list: &[Value], upstream: ChatUpstream) -> Result<Vec<Value>, TranslateError> {
    let mut out = Vec::with_capacity(list.len());
    for (i, turn) in list.iter().enumerate() {
        let path = format!("messages[{i}]");
        let turn = json::as_object(turn, &path)?;
        match json::req_str(turn, "role", &path)? {
            "user" => user(turn, &path, &mut out)?,
            "assistant" if i + 1 == list.len() => {
                let reason = "a prefilled assistant turn cannot be continued there";
                return Err(TranslateError::unsupported(format!("{path}.role"), Protocol::OpenAiChat, reason));
            }
            "assistant" => out.push(assistant(turn, &path, upstream)?),
            _ => return Err(TranslateError::invalid(format!("{path}.role"), "must be user or assistant")),
        }
    }
    Ok(out)
}

fn message(role: &str, content: Value) -> Value {
    Value::Object(object([("role", Value::from(role)), ("content", content)]))
}

/// A turn's content as a list of blocks (a plain string is one text block).
fn blocks_of(turn: &Object, path: &str) -> Result<Vec<Value>, TranslateError> {
    match json::present(turn, "content") {
        Some(Value::String(text)) => Ok(vec![json::text_block(text)]),
        Some(Value::Array(blocks)) => Ok(blocks.clone()),
        _ => Err(TranslateError::invalid(format!("{path}.content"), "must be a string or an array of blocks")),
    }
}

/// A user turn: its `tool_result` blocks become `tool` messages (which must directly follow
/// the assistant's calls), then the rest becomes one user message.
fn user(turn: &Object, path: &str, out: &mut Vec<Value>) -> Result<(), TranslateError> {
    if let Some(Value::String(text)) = json::present(turn, "content") {
        out.push(message("user", Value::from(text.as_str())));
        return Ok(());
    }
    let mut parts = Vec::new();
    for (j, block) in blocks_of(turn, path)?.iter().enumerate() {
        let block_path = format!("{path}.content[{j}]");
        let block = json::as_object(block, &block_path)?;
        match json::req_str(block, "type", &block_path)? {
            "text" => parts.push(text_part(block, &block_path)?),
            "image" => parts.push(image::to_openai(block, &block_path)?),
            "tool_result" => out.push(tool_message(block, &block_path)?),
            _ => return Err(no_counterpart(&block_path)),
        }
    }
    if !parts.is_empty() {
        out.push(message("user", parts_content(parts)));
    }
    Ok(())
}

fn no_counterpart(block_path: &str) -> TranslateError {
    let reason = "only text, image, tool_use and tool_result blocks can be passed on";
    TranslateError::unsupported(format!("{block_path}.type"), Protocol::OpenAiChat, reason)
}

/// `{type: "text", text}` (Anthropic extras such as `cache_control` dropped).
fn text_part(block: &Object, path: &str) -> Result<Value, TranslateError> {
    Ok(json::text_block(json::req_str(block, "text", path)?))
}

/// Content parts as message content: a lone text part is written as a plain string.
fn parts_content(mut parts: Vec<Value>) -> Value {
    match parts.as_mut_slice() {
        [Value::Object(only)] if only.get("type") == Some(&Value::from("text")) => {
            only.remove("text").unwrap_or_default()
        }
        _ => Value::Array(parts),
    }
}

/// Text blocks (of `system` or a tool result) as message content.
fn text_content(blocks: &[Value], path: &str) -> Result<Value, TranslateError> {
    let mut parts = Vec::with_capacity(blocks.len());
    for (j, block) in blocks.iter().enumerate() {
        let block_path = format!("{path}[{j}]");
        let block = json::as_object(block, &block_path)?;
        if json::req_str(block, "type", &block_path)? != "text" {
            let reason = "OpenAI accepts only text here";
            return Err(TranslateError::unsupported(format!("{block_path}.type"), Protocol::OpenAiChat, reason));
        }
        parts.push(text_part(block, &block_path)?);
    }
    Ok(parts_content(parts))
}

/// `{type: "tool_result", tool_use_id, content}` → `{role: "tool", tool_call_id, content}`.
fn tool_message(block: &Object, path: &str) -> Result<Value, TranslateError> {
    let content = match json::present(block, "content") {
        None => Value::from(""),
        Some(Value::String(text)) => Value::from(text.as_str()),
        Some(Value::Array(blocks)) => text_content(blocks, &format!("{path}.content"))?,
        Some(_) => return Err(TranslateError::invalid(format!("{path}.content"), "must be a string or blocks")),
    };
    Ok(Value::Object(object([
        ("role", Value::from("tool")),
        ("tool_call_id", Value::from(json::req_str(block, "tool_use_id", path)?)),
        ("content", content),
    ])))
}

/// An assistant turn: text blocks joined into `content`, `tool_use` blocks as `tool_calls`,
/// thinking blocks dropped; toward Gemini, a thinking block's Gemini signature goes to the
/// call or text after it (the turn's text when nothing follows).
fn assistant(turn: &Object, path: &str, upstream: ChatUpstream) -> Result<Value, TranslateError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    let (mut pending, mut text_signature) = (None, None);
    let blocks = blocks_of(turn, path)?;
    for (j, block) in blocks.iter().enumerate() {
        let block_path = format!("{path}.content[{j}]");
        let block = json::as_object(block, &block_path)?;
        match json::req_str(block, "type", &block_path)? {
            "text" => {
                text.push_str(json::req_str(block, "text", &block_path)?);
                text_signature = pending.take().or(text_signature);
            }
            "tool_use" => {
                let mut call = tools::call_to_openai(block, &block_path)?;
                if let Some(signature) = pending.take() {
                    gemini_thinking::sign(&mut call, signature);
                }
                calls.push(call);
            }
            "thinking" if upstream == ChatUpstream::Gemini => {
                pending = gemini_thinking::replayed_signature(block, &block_path)?.or(pending);
            }
            "thinking" | "redacted_thinking" => {}
            _ => return Err(no_counterpart(&block_path)),
        }
    }
    let content = if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::from(text) };
    let mut out = Value::Object(object([("role", Value::from("assistant")), ("content", content)]));
    if let Some(signature) = text_signature.or(pending) {
        gemini_thinking::sign(&mut out, signature);
    }
    if !calls.is_empty() {
        out["tool_calls"] = Value::Array(calls);
    }
    Ok(out)
}
