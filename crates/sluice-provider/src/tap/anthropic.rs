//! Anthropic messages stream events.
//!
//! `message_start` carries the input side of the usage (input and cache tokens, plus an
//! initial `output_tokens`), each `message_delta` the cumulative output so far; the event
//! name (the `event:` line, else the data's `type`) decides what to parse, so serde_json
//! only runs on those two events.

use serde::Deserialize;

use super::StreamOutcome;
use crate::protocol::Protocol;
use crate::sse::{self, Event};
use crate::usage::RawUsage;

#[derive(Deserialize)]
struct MessageStart {
    message: StartedMessage,
}

#[derive(Deserialize)]
struct StartedMessage {
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct MessageDelta {
    usage: Option<RawUsage>,
}

/// Analyses one complete event `text` (forwarded unchanged by the caller).
pub(super) fn event(text: &str, outcome: &mut StreamOutcome) {
    let event = Event::parse(text);
    let data = event.data.as_deref().unwrap_or_default();
    let name = event.name.or_else(|| type_of(data));
    match name {
        Some("message_start") => {
            if let Ok(start) = serde_json::from_str::<MessageStart>(data)
                && let Some(raw) = start.message.usage
            {
                outcome.usage = Some(raw.into_usage(Protocol::AnthropicMessages));
            }
        }
        Some("message_delta") => {
            if let Ok(delta) = serde_json::from_str::<MessageDelta>(data)
                && let Some(raw) = delta.usage
            {
                raw.merge_anthropic(outcome.usage.get_or_insert_with(Default::default));
                outcome.usage_final = true;
            }
        }
        Some("message_stop") => outcome.completed = true,
        Some("error") => outcome.error_event = true,
        _ => {}
    }
}

/// The data's `"type"` string, for streams without `event:` lines.
fn type_of(data: &str) -> Option<&str> {
    let value = sse::value_of(data, "\"type\"")?.strip_prefix('"')?;
    value.split('"').next()
}
