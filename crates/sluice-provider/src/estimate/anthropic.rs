//! Anthropic messages counting.
//!
//! Anthropic publishes no tokenizer, so this counts with whatever [`Tally`] it is given
//! (cl100k by default, see [`tokenizer_for_model`](crate::tokenizer_for_model)) and relies
//! on the caller's safety factor. Counted: `system` text, message text blocks, `tool_use`
//! name + input JSON, `tool_result` content, `thinking` text (conservative: the API may
//! drop earlier thinking), tool definitions as compact JSON, [`TOKENS_PER_MESSAGE`] per
//! message, and a flat [`IMAGE_TOKENS`] per image (Anthropic's formula is
//! `width * height / 750`, capped near 1,600 for images it does not downscale further).
//! Documents and other block types count 0 until settled.

use serde_json::{Map, Value};

use super::Tally;
use super::openai::array;

/// Fixed tokens per message (role markers).
const TOKENS_PER_MESSAGE: u64 = 3;
/// Flat cost of one image block.
pub(crate) const IMAGE_TOKENS: u64 = 1_600;

/// Counts a validated messages body.
pub(super) fn messages(tally: &mut Tally<'_>, body: &Map<String, Value>) {
    match body.get("system") {
        Some(Value::String(text)) => tally.text(text),
        Some(Value::Array(blocks)) => blocks.iter().for_each(|b| block_tokens(tally, b)),
        _ => {}
    }
    for message in array(body.get("messages")) {
        tally.fixed(TOKENS_PER_MESSAGE);
        content_tokens(tally, message.get("content"));
    }
    for tool in array(body.get("tools")) {
        tally.json(tool);
    }
}

/// A `content` that is a string or an array of blocks.
fn content_tokens(tally: &mut Tally<'_>, content: Option<&Value>) {
    match content {
        Some(Value::String(text)) => tally.text(text),
        Some(Value::Array(blocks)) => blocks.iter().for_each(|b| block_tokens(tally, b)),
        _ => {}
    }
}

fn block_tokens(tally: &mut Tally<'_>, block: &Value) {
    let str_field = |key| block.get(key).and_then(Value::as_str);
    match str_field("type") {
        Some("text") => str_field("text").into_iter().for_each(|t| tally.text(t)),
        Some("thinking") => str_field("thinking").into_iter().for_each(|t| tally.text(t)),
        Some("image") => tally.fixed(IMAGE_TOKENS),
        Some("tool_use") => {
            str_field("name").into_iter().for_each(|t| tally.text(t));
            if let Some(input) = block.get("input") {
                tally.json(input);
            }
        }
        // Nested blocks here are text or images only (the API refuses deeper nesting).
        Some("tool_result") => content_tokens(tally, block.get("content")),
        _ => {}
    }
}
