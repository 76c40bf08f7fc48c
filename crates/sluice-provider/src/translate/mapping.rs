//! The small vocabularies both protocols share under different names: stop reasons, ids and
//! usage counters.

use serde_json::Value;

use super::json::object;
use crate::usage::Usage;

/// OpenAI's id prefix for chat completions.
const OPENAI_ID_PREFIX: &str = "chatcmpl-";
/// Anthropic's id prefix for messages.
const ANTHROPIC_ID_PREFIX: &str = "msg_";

/// Anthropic `stop_reason` → OpenAI `finish_reason`.
///
/// `end_turn`, `stop_sequence` and `pause_turn` (a server-tool pause, which ends this
/// response) → `stop`; `max_tokens` and `model_context_window_exceeded` → `length`;
/// `tool_use` → `tool_calls`; `refusal` → `content_filter`; anything else → `stop`.
pub(crate) fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
}

/// OpenAI `finish_reason` → Anthropic `stop_reason`.
///
/// `stop` → `end_turn` (OpenAI does not say whether a stop sequence matched, and its text
/// never includes it either way); `length` → `max_tokens`; `tool_calls` and the legacy
/// `function_call` → `tool_use`; `content_filter` → `refusal`; anything else → `end_turn`.
pub(crate) fn stop_reason(finish_reason: Option<&str>) -> &'static str {
    match finish_reason {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ => "end_turn",
    }
}

/// An Anthropic message id as an OpenAI completion id: `msg_X` → `chatcmpl-X`.
pub(crate) fn openai_id(anthropic_id: &str) -> String {
    let bare = anthropic_id.strip_prefix(ANTHROPIC_ID_PREFIX).unwrap_or(anthropic_id);
    format!("{OPENAI_ID_PREFIX}{bare}")
}

/// An OpenAI completion id as an Anthropic message id: `chatcmpl-X` → `msg_X`.
pub(crate) fn anthropic_id(openai_id: &str) -> String {
    let bare = openai_id.strip_prefix(OPENAI_ID_PREFIX).unwrap_or(openai_id);
    format!("{ANTHROPIC_ID_PREFIX}{bare}")
}

/// Anthropic-reported usage as an OpenAI `usage` object. OpenAI's `prompt_tokens` counts
/// every input token, cached or not, so Anthropic's three input counters are added up.
pub(crate) fn openai_usage(usage: &Usage) -> Value {
    let prompt = usage
        .input_tokens
        .saturating_add(usage.cache_read_input_tokens)
        .saturating_add(usage.cache_creation_input_tokens);
    let details = object([("cached_tokens", Value::from(usage.cache_read_input_tokens))]);
    Value::Object(object([
        ("prompt_tokens", Value::from(prompt)),
        ("completion_tokens", Value::from(usage.output_tokens)),
        ("total_tokens", Value::from(prompt.saturating_add(usage.output_tokens))),
        ("prompt_tokens_details", Value::Object(details)),
    ]))
}

/// OpenAI-reported usage as an Anthropic `usage` object. Anthropic's `input_tokens`
/// excludes cache reads, so the cached part is moved out of it.
pub(crate) fn anthropic_usage(usage: &Usage) -> Value {
    Value::Object(object([
        ("input_tokens", Value::from(usage.input_tokens.saturating_sub(usage.cache_read_input_tokens))),
        ("cache_creation_input_tokens", Value::from(0_u64)),
        ("cache_read_input_tokens", Value::from(usage.cache_read_input_tokens)),
        ("output_tokens", Value::from(usage.output_tokens)),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_round_trip_where_both_have_them() {
        for (anthropic, openai) in
            [("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"), ("refusal", "content_filter")]
        {
            assert_eq!(finish_reason(Some(anthropic)), openai);
            assert_eq!(stop_reason(Some(openai)), anthropic);
        }
        assert_eq!(finish_reason(Some("stop_sequence")), "stop");
        assert_eq!(finish_reason(None), "stop");
        assert_eq!(stop_reason(Some("function_call")), "tool_use");
    }

    #[test]
    fn ids_swap_prefixes() {
        assert_eq!(openai_id("msg_01XFDUDYJgAACzvnptvVoYEL"), "chatcmpl-01XFDUDYJgAACzvnptvVoYEL");
        assert_eq!(anthropic_id("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"), "msg_B9MBs8CjcvOU2jLn4n570S5qMJKcT");
        assert_eq!(anthropic_id(&openai_id("msg_x")), "msg_x");
        assert_eq!(openai_id("abc"), "chatcmpl-abc");
    }

    #[test]
    fn usage_moves_cache_reads_in_and_out_of_input() {
        let anthropic = Usage {
            input_tokens: 50,
            output_tokens: 7,
            cache_read_input_tokens: 1000,
            cache_creation_input_tokens: 200,
            reasoning_tokens: 0,
        };
        let openai = openai_usage(&anthropic);
        assert_eq!(openai["prompt_tokens"], 1250);
        assert_eq!(openai["total_tokens"], 1257);
        assert_eq!(openai["prompt_tokens_details"]["cached_tokens"], 1000);
        let back = Usage { input_tokens: 1250, output_tokens: 7, cache_read_input_tokens: 1000, ..Usage::default() };
        let anthropic_json = anthropic_usage(&back);
        assert_eq!(anthropic_json["input_tokens"], 250);
        assert_eq!(anthropic_json["cache_read_input_tokens"], 1000);
        assert_eq!(anthropic_json["output_tokens"], 7);
    }
}
