//! OpenAI Responses stream events.
//!
//! Each event has an `event:` line naming its type (repeated as `type` in the data).
//! `response.completed` and `response.incomplete` end the
//! stream and carry the usage in `response.usage`; `response.failed` and `error` are the
//! protocol's error events. serde_json runs only on those final events and on
//! `response.created`, whose `response.id` names the response.

use serde::Deserialize;

use super::StreamOutcome;
use crate::protocol::Protocol;
use crate::sse::{self, Event};
use crate::usage::RawUsage;

/// The final events' `response` member: only its `usage` is read.
#[derive(Deserialize)]
struct Final {
    response: Option<FinalResponse>,
}

#[derive(Deserialize)]
struct FinalResponse {
    id: Option<String>,
    usage: Option<RawUsage>,
}

/// Analyses one complete event `text`; the event itself is forwarded unchanged. Returns
/// the response's id when the event names it.
pub(super) fn event(text: &str, outcome: &mut StreamOutcome) -> Option<String> {
    let event = Event::parse(text);
    let data = event.data.as_deref().unwrap_or_default();
    let kind = match event.name {
        Some(name) => name.to_owned(),
        // Without an `event:` line, the data's leading `type` names it.
        None => sse::value_of(data, "\"type\"")
            .and_then(|v| v.strip_prefix('"')?.split('"').next())
            .unwrap_or_default()
            .to_owned(),
    };
    match kind.as_str() {
        "response.created" => return read_final(data).and_then(|r| r.id),
        "response.completed" | "response.incomplete" => {
            outcome.completed = true;
            return read_usage(data, outcome);
        }
        "response.failed" => {
            outcome.error_event = true;
            return read_usage(data, outcome);
        }
        "error" => outcome.error_event = true,
        _ => {}
    }
    None
}

fn read_final(data: &str) -> Option<FinalResponse> {
    serde_json::from_str::<Final>(data).ok().and_then(|f| f.response)
}

/// Reads the final event's usage into `outcome`; returns the response's id.
fn read_usage(data: &str, outcome: &mut StreamOutcome) -> Option<String> {
    let response = read_final(data)?;
    if let Some(raw) = response.usage {
        outcome.usage = Some(raw.into_usage(Protocol::OpenAiResponses));
        outcome.usage_final = true;
    }
    response.id
}
