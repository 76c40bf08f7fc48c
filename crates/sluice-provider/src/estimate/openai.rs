//! OpenAI chat and embeddings counting.
//!
//! Chat follows OpenAI's published recipe: per message `3 + tokens(role) +
//! tokens(content text) + (name ? tokens(name) + 1 : 0)`, plus 3 to prime the reply.
//! Approximations, all documented with the constants below:
//! - tool and function definitions count as the tokens of their compact JSON (OpenAI
//!   renders them into a hidden prompt of similar size);
//! - assistant `tool_calls`/`function_call` count the function name plus its arguments;
//! - `image_url` parts by the image's size read from its header (the largest size for an
//!   http(s) URL), `input_audio` by its duration, `file` parts as PDFs by their pages (a
//!   `file_id` alone by a default page count), all priced by [`MediaPricing`](super::MediaPricing);
//!   the settle step corrects all of these from the provider's usage.

use serde_json::{Map, Value};

use super::Tally;

/// Fixed tokens per chat message.
pub(super) const TOKENS_PER_MESSAGE: u64 = 3;
/// Extra tokens when a message has a `name`.
const TOKENS_PER_NAME: u64 = 1;
/// Tokens priming the assistant's reply.
pub(super) const REPLY_PRIMING: u64 = 3;

/// Counts a validated chat-completions body.
pub(super) fn chat(tally: &mut Tally<'_>, body: &Map<String, Value>) {
    for message in array(body.get("messages")) {
        message_tokens(tally, message);
    }
    tally.fixed(REPLY_PRIMING);
    for tool in array(body.get("tools")).iter().chain(array(body.get("functions"))) {
        tally.json(tool);
    }
}

fn message_tokens(tally: &mut Tally<'_>, message: &Value) {
    tally.fixed(TOKENS_PER_MESSAGE);
    if let Some(role) = message.get("role").and_then(Value::as_str) {
        tally.role(role);
    }
    match message.get("content") {
        Some(Value::String(text)) => tally.text(text),
        Some(Value::Array(parts)) => parts.iter().for_each(|part| part_tokens(tally, part)),
        _ => {}
    }
    if let Some(name) = message.get("name").and_then(Value::as_str) {
        tally.text(name);
        tally.fixed(TOKENS_PER_NAME);
    }
    for call in array(message.get("tool_calls")) {
        function_tokens(tally, call.get("function"));
    }
    function_tokens(tally, message.get("function_call"));
}

fn part_tokens(tally: &mut Tally<'_>, part: &Value) {
    match part.get("type").and_then(Value::as_str) {
        Some("text") => {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                tally.text(text);
            }
        }
        Some("file") => {
            if let Some(name) = part.pointer("/file/filename").and_then(Value::as_str) {
                tally.text(name);
            }
            tally.media(tally.pricing.openai_part(part));
        }
        _ => tally.media(tally.pricing.openai_part(part)),
    }
}

/// A `{"name": .., "arguments": ".."}` function call.
fn function_tokens(tally: &mut Tally<'_>, function: Option<&Value>) {
    let Some(function) = function else { return };
    for key in ["name", "arguments"] {
        if let Some(text) = function.get(key).and_then(Value::as_str) {
            tally.text(text);
        }
    }
}

/// Counts a validated embeddings body: each input string's tokens; token-id arrays by length.
/// Embeddings' `input` and legacy completions' `prompt`: a string, or a list of strings or
/// token ids.
pub(super) fn inputs(tally: &mut Tally<'_>, value: Option<&Value>) {
    match value {
        Some(Value::String(text)) => tally.text(text),
        Some(Value::Array(items)) => items.iter().for_each(|item| embedding_item(tally, item)),
        _ => {}
    }
}

fn embedding_item(tally: &mut Tally<'_>, item: &Value) {
    match item {
        Value::String(text) => tally.text(text),
        Value::Number(_) => tally.fixed(1),
        Value::Array(ids) => tally.fixed(ids.len() as u64),
        _ => {}
    }
}

/// The items of an optional array field (empty when absent or not an array).
pub(super) fn array(value: Option<&Value>) -> &[Value] {
    match value {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}
