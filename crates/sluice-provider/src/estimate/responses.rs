//! OpenAI Responses counting, on the chat recipe: `instructions` as a system message, a
//! string `input` as one user message, message items as chat messages (their
//! `input_image` / `input_file` parts priced by [`MediaPricing`](super::MediaPricing)),
//! every other item (function calls and their outputs, reasoning items) as its compact
//! JSON, the tools' schemas as their JSON, plus the reply priming.

use serde_json::{Map, Value};

use super::Tally;
use super::openai::{REPLY_PRIMING, TOKENS_PER_MESSAGE, array};

/// Counts a validated Responses body.
pub(super) fn responses(tally: &mut Tally<'_>, body: &Map<String, Value>) {
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        message(tally, "system", Some(instructions), &[]);
    }
    match body.get("input") {
        Some(Value::String(text)) => message(tally, "user", Some(text), &[]),
        Some(Value::Array(items)) => items.iter().for_each(|item| item_tokens(tally, item)),
        _ => {}
    }
    tally.fixed(REPLY_PRIMING);
    for tool in array(body.get("tools")) {
        tally.json(tool);
    }
}

fn item_tokens(tally: &mut Tally<'_>, item: &Value) {
    let is_message = item.get("type").and_then(Value::as_str).is_none_or(|kind| kind == "message");
    let Some(role) = item.get("role").and_then(Value::as_str).filter(|_| is_message) else {
        tally.json(item);
        return;
    };
    match item.get("content") {
        Some(Value::String(text)) => message(tally, role, Some(text), &[]),
        Some(Value::Array(parts)) => message(tally, role, None, parts),
        _ => message(tally, role, None, &[]),
    }
}

/// One message: its overhead and role, then its text or its parts (text parts by their
/// text, media parts by their price).
fn message(tally: &mut Tally<'_>, role: &str, text: Option<&str>, parts: &[Value]) {
    tally.fixed(TOKENS_PER_MESSAGE);
    tally.role(role);
    if let Some(text) = text {
        tally.text(text);
    }
    for part in parts {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => tally.text(text),
            None => tally.media(tally.pricing.responses_part(part)),
        }
    }
}
