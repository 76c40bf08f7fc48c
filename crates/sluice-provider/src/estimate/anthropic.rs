//! Anthropic messages counting.
//!
//! Anthropic publishes no tokenizer, so this counts with whatever [`Tally`] it is given
//! (cl100k by default, see [`tokenizer_for_model`](crate::tokenizer_for_model)) and relies
//! on the caller's safety factor. Counted: `system` text, message text blocks, `tool_use`
//! name + input JSON, `tool_result` content, `thinking` text (conservative: the API may
//! drop earlier thinking), tool definitions as compact JSON, [`TOKENS_PER_MESSAGE`] per
//! message; `image` blocks by their size read from the header (the largest for a URL or
//! file source), `document` blocks as PDFs by their pages, or as their text (`text` and
//! `content` sources), plus `title` and `context`; `search_result` blocks as their text.
//! Media go through the [`MediaPricing`](super::MediaPricing) of the target deployment.
//! Other block types count 0 until settled.

use serde_json::{Map, Value};

use super::Tally;
use super::openai::array;

/// Fixed tokens per message (role markers).
const TOKENS_PER_MESSAGE: u64 = 3;

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
        Some("image") => tally.media(tally.pricing.anthropic_block(block)),
        Some("document") => document_tokens(tally, block),
        Some("search_result") => {
            ["source", "title"].into_iter().filter_map(str_field).for_each(|t| tally.text(t));
            content_tokens(tally, block.get("content"));
        }
        Some("tool_use") => {
            str_field("name").into_iter().for_each(|t| tally.text(t));
            if let Some(input) = block.get("input") {
                tally.json(input);
            }
        }
        // Nested blocks here are text, images, documents or search results.
        Some("tool_result") => content_tokens(tally, block.get("content")),
        _ => {}
    }
}

/// A `document` block: a base64 PDF by its pages, a `text` source as text, a `content`
/// source as its blocks, a `url` or `file` source by a default page count.
fn document_tokens(tally: &mut Tally<'_>, block: &Value) {
    let source = block.get("source");
    let source_str = |key| source.and_then(|s| s.get(key)).and_then(Value::as_str);
    match source_str("type") {
        Some("text") => source_str("data").into_iter().for_each(|t| tally.text(t)),
        Some("content") => content_tokens(tally, source.and_then(|s| s.get("content"))),
        _ => tally.media(tally.pricing.anthropic_block(block)),
    }
    for key in ["title", "context"] {
        block.get(key).and_then(Value::as_str).into_iter().for_each(|t| tally.text(t));
    }
}
