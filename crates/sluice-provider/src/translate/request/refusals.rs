//! Request fields whose meaning the other protocol cannot carry: translating them away
//! would silently change what the client gets back, so the request is not translated.

use serde_json::Value;

use crate::protocol::Protocol;
use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object};

/// A request field that blocks translation when `active` holds for its (non-null) value.
pub(super) struct Refusal {
    field: &'static str,
    active: fn(&Value) -> bool,
    reason: &'static str,
}

/// OpenAI chat fields Anthropic has no counterpart for (`n` is checked via the parsed
/// request's choice count).
pub(super) const OPENAI_ONLY: &[Refusal] = &[
    Refusal { field: "logprobs", active: is_true, reason: "Anthropic reports no token log-probabilities" },
    Refusal { field: "top_logprobs", active: any, reason: "Anthropic reports no token log-probabilities" },
    Refusal { field: "logit_bias", active: non_empty, reason: "Anthropic cannot bias tokens" },
    Refusal { field: "response_format", active: not_text_format, reason: "Anthropic has no JSON output mode" },
    Refusal { field: "audio", active: any, reason: "Anthropic produces no audio" },
    Refusal { field: "modalities", active: beyond_text, reason: "Anthropic produces text only" },
    Refusal { field: "functions", active: any, reason: "legacy function calling (use tools)" },
    Refusal { field: "function_call", active: any, reason: "legacy function calling (use tool_choice)" },
    Refusal { field: "web_search_options", active: any, reason: "web search is an OpenAI-hosted tool" },
];

/// Anthropic messages fields OpenAI chat has no counterpart for.
pub(super) const ANTHROPIC_ONLY: &[Refusal] = &[
    Refusal { field: "thinking", active: thinking_enabled, reason: "OpenAI chat returns no thinking blocks" },
    Refusal { field: "mcp_servers", active: non_empty, reason: "MCP connectors run only on Anthropic" },
    Refusal { field: "container", active: any, reason: "code-execution containers run only on Anthropic" },
];

/// [`ANTHROPIC_ONLY`] toward a Gemini deployment, which thinks and shows its thoughts.
pub(super) const ANTHROPIC_ONLY_BUT_THINKING: &[Refusal] = ANTHROPIC_ONLY.split_at(1).1;

/// The first active refusal of `table` in `body` (or `choices > 1`) as an error.
pub(super) fn check(body: &Object, table: &[Refusal], target: Protocol, choices: u32) -> Result<(), TranslateError> {
    if choices > 1 {
        return Err(TranslateError::unsupported("n", target, "Anthropic returns one answer per request"));
    }
    for refusal in table {
        if json::present(body, refusal.field).is_some_and(refusal.active) {
            return Err(TranslateError::unsupported(refusal.field, target, refusal.reason));
        }
    }
    Ok(())
}

fn any(_: &Value) -> bool {
    true
}

fn is_true(value: &Value) -> bool {
    value.as_bool() == Some(true)
}

fn non_empty(value: &Value) -> bool {
    match value {
        Value::Object(map) => !map.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => true,
    }
}

fn not_text_format(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) != Some("text")
}

fn beyond_text(value: &Value) -> bool {
    value.as_array().is_some_and(|list| list.iter().any(|m| m.as_str() != Some("text")))
}

fn thinking_enabled(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str) != Some("disabled")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toward_gemini_only_thinking_is_let_through() {
        assert_eq!(ANTHROPIC_ONLY[0].field, "thinking");
        let fields: Vec<&str> = ANTHROPIC_ONLY_BUT_THINKING.iter().map(|r| r.field).collect();
        assert_eq!(fields, ["mcp_servers", "container"]);
    }
}
