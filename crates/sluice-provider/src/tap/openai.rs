//! OpenAI chat-completions stream events.
//!
//! Chunks are `data: {json}` events, closed by `data: [DONE]`. The pre-scan looks for the
//! keys that matter (`"usage"` with an object value, `"error"`)
//! by substring; serde_json runs only on the rare chunk that holds usage or an error.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::StreamOutcome;
use crate::protocol::Protocol;
use crate::sse::{self, Event};
use crate::usage::RawUsage;

const USAGE: &str = "\"usage\"";
const ERROR: &str = "\"error\"";

/// A chunk that holds usage: its usage and whether `choices` is empty.
#[derive(Deserialize)]
struct UsageChunk {
    usage: Option<RawUsage>,
    #[serde(default)]
    choices: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize)]
struct ErrorChunk {
    error: Option<IgnoredAny>,
}

/// Analyses one complete event `text` and appends what the client should get to `out`.
pub(super) fn event(text: &str, hide_usage: bool, outcome: &mut StreamOutcome, out: &mut Vec<u8>) {
    let event = Event::parse(text);
    if event.name == Some("error") {
        outcome.error_event = true;
    }
    let Some(data) = event.data.as_deref() else {
        out.extend_from_slice(text.as_bytes());
        return;
    };
    if data.trim() == "[DONE]" {
        outcome.completed = true;
    } else if analyse_chunk(data, outcome) == Chunk::UsageOnly && hide_usage {
        return;
    }
    if hide_usage {
        strip_null_usage(text, out);
    } else {
        out.extend_from_slice(text.as_bytes());
    }
}

#[derive(PartialEq, Eq)]
enum Chunk {
    UsageOnly,
    Other,
}

fn analyse_chunk(data: &str, outcome: &mut StreamOutcome) -> Chunk {
    let mut kind = Chunk::Other;
    if sse::value_of(data, USAGE).is_some_and(|v| v.starts_with('{'))
        && let Ok(chunk) = serde_json::from_str::<UsageChunk>(data)
        && let Some(raw) = chunk.usage
    {
        outcome.usage = Some(raw.into_usage(Protocol::OpenAiChat));
        outcome.usage_final = true;
        if chunk.choices.as_ref().is_some_and(Vec::is_empty) {
            kind = Chunk::UsageOnly;
        }
    }
    if sse::find_key(data, ERROR).is_some() && serde_json::from_str::<ErrorChunk>(data).is_ok_and(|c| c.error.is_some())
    {
        outcome.error_event = true;
    }
    kind
}

/// Copies `text` to `out` without its `"usage":null` member (and the comma joining it to
/// its neighbours), which only the forced `include_usage` option adds.
fn strip_null_usage(text: &str, out: &mut Vec<u8>) {
    let Some((key, value)) = sse::find_key(text, USAGE) else {
        out.extend_from_slice(text.as_bytes());
        return;
    };
    let bytes = text.as_bytes();
    if !text.get(value..).is_some_and(|v| v.starts_with("null")) {
        out.extend_from_slice(bytes);
        return;
    }
    let value_end = value + "null".len();
    let before = text.get(..key).unwrap_or_default().trim_end();
    let (cut_start, cut_end) = if let Some(kept) = before.strip_suffix(',') {
        (kept.len(), value_end)
    } else {
        // First member: drop the comma after it instead.
        let after = text.get(value_end..).unwrap_or_default();
        let rest = after.trim_start();
        let rest = rest.strip_prefix(',').map_or(rest, str::trim_start);
        (key, value_end + (after.len() - rest.len()))
    };
    out.extend_from_slice(bytes.get(..cut_start).unwrap_or_default());
    out.extend_from_slice(bytes.get(cut_end..).unwrap_or_default());
}
