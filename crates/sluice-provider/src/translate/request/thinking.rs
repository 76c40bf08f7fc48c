//! OpenAI chat's `reasoning_effort` as Anthropic's extended thinking.
//!
//! A level becomes `thinking: {type: "enabled", budget_tokens: N}`, the budgets being
//! LiteLLM's for OpenAI-shaped clients of Claude (`low` 1,024, `medium` 2,048, `high`
//! 4,096; <https://docs.litellm.ai/docs/reasoning_content>), `minimal` taking Anthropic's
//! floor of 1,024 like `low`; `none` asks for no thinking. Anthropic's rules
//! (<https://docs.claude.com/en/docs/build-with-claude/extended-thinking>, "Max tokens and
//! context window size" and "Feature compatibility") are checked here, so that the client
//! gets a 400 naming its own field rather than the provider's words about a field it never
//! wrote:
//!
//! - `budget_tokens` is below `max_tokens`. The client's `max_tokens` /
//!   `max_completion_tokens` bounds reasoning and answer together, as OpenAI's does for its
//!   reasoning models, so one at or below the budget is refused, never raised; without one,
//!   `max_tokens` is the default answer allowance plus the budget.
//! - `temperature` may only be 1 and `top_p` no lower than 0.95 (`top_k` does not exist in
//!   OpenAI chat); OpenAI's reasoning models refuse a `temperature` other than 1 likewise.
//! - Tool use may not be forced: `tool_choice` `required` or a named function is refused.

use serde_json::Value;

use crate::protocol::Protocol;
use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object, object};

/// The budget of each `reasoning_effort` level (`None`: no thinking).
const LEVELS: &[(&str, Option<u64>)] =
    &[("none", None), ("minimal", Some(1_024)), ("low", Some(1_024)), ("medium", Some(2_048)), ("high", Some(4_096))];

/// The lowest `top_p` Anthropic takes with thinking on.
const MIN_TOP_P: f64 = 0.95;

/// The `thinking` object and `max_tokens` for `body`'s `reasoning_effort` (`None`: the
/// request asks for no thinking). `max_tokens` is the client's limit, if it set one.
pub(super) fn from_effort(
    body: &Object,
    max_tokens: Option<u64>,
    default_max_tokens: u64,
) -> Result<Option<(Value, u64)>, TranslateError> {
    let Some(effort) = json::opt_str(body, "reasoning_effort", "")? else { return Ok(None) };
    let Some(&(_, budget)) = LEVELS.iter().find(|(level, _)| *level == effort) else {
        let reason = "Anthropic's thinking budgets are defined for none, minimal, low, medium and high";
        return Err(TranslateError::unsupported("reasoning_effort", Protocol::AnthropicMessages, reason));
    };
    let Some(budget) = budget else { return Ok(None) };
    let max_tokens = match max_tokens {
        Some(max) if max <= budget => {
            let field = if json::present(body, "max_completion_tokens").is_some() {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            let reason = format!(
                "must be greater than the thinking budget of reasoning_effort `{effort}` ({budget} tokens): Anthropic \
                 counts thinking within the output limit"
            );
            return Err(TranslateError::invalid(field, reason));
        }
        Some(max) => max,
        None => default_max_tokens.saturating_add(budget),
    };
    check_sampling(body)?;
    let thinking = object([("type", Value::from("enabled")), ("budget_tokens", Value::from(budget))]);
    Ok(Some((Value::Object(thinking), max_tokens)))
}

/// Refuses the sampling and tool-choice settings Anthropic's thinking does not take.
fn check_sampling(body: &Object) -> Result<(), TranslateError> {
    let target = Protocol::AnthropicMessages;
    if json::present(body, "temperature").and_then(Value::as_f64).is_some_and(|t| (t - 1.0).abs() > f64::EPSILON) {
        return Err(TranslateError::unsupported(
            "temperature",
            target,
            "Anthropic's thinking takes temperature 1 only",
        ));
    }
    if json::present(body, "top_p").and_then(Value::as_f64).is_some_and(|p| p < MIN_TOP_P) {
        return Err(TranslateError::unsupported("top_p", target, "Anthropic's thinking takes a top_p of 0.95 or more"));
    }
    let forced = match json::present(body, "tool_choice") {
        Some(Value::String(mode)) => mode == "required",
        Some(Value::Object(_)) => true,
        _ => false,
    };
    if forced {
        let reason = "Anthropic's thinking cannot be combined with forced tool use";
        return Err(TranslateError::unsupported("tool_choice", target, reason));
    }
    Ok(())
}

/// An assistant message's `thinking_blocks` (the blocks an Anthropic-shaped answer carried,
/// as [`crate::anthropic_to_openai_response`] hands them out), checked and passed on
/// unchanged: `thinking` with its `thinking` text and `signature`, `redacted_thinking` with
/// its `data`.
pub(super) fn replayed_blocks(message: &Object, path: &str) -> Result<Vec<Value>, TranslateError> {
    let list = json::opt_array(message, "thinking_blocks", path)?;
    let mut blocks = Vec::with_capacity(list.len());
    for (k, block) in list.iter().enumerate() {
        let at = format!("{path}.thinking_blocks[{k}]");
        let obj = json::as_object(block, &at)?;
        match json::req_str(obj, "type", &at)? {
            "thinking" => {
                json::req_str(obj, "thinking", &at)?;
                json::req_str(obj, "signature", &at)?;
            }
            "redacted_thinking" => {
                json::req_str(obj, "data", &at)?;
            }
            _ => return Err(TranslateError::invalid(format!("{at}.type"), "must be thinking or redacted_thinking")),
        }
        blocks.push(block.clone());
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn body(value: Value) -> Object {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn each_level_has_its_budget_and_none_asks_for_no_thinking() {
        for (level, budget) in [("minimal", 1024), ("low", 1024), ("medium", 2048), ("high", 4096)] {
            let (thinking, max) =
                from_effort(&body(json!({"reasoning_effort": level})), Some(8192), 4096).unwrap().unwrap();
            assert_eq!(thinking, json!({"type": "enabled", "budget_tokens": budget}), "{level}");
            assert_eq!(max, 8192);
        }
        assert_eq!(from_effort(&body(json!({"reasoning_effort": "none"})), None, 4096).unwrap(), None);
        assert_eq!(from_effort(&body(json!({})), None, 4096).unwrap(), None);
        let err = from_effort(&body(json!({"reasoning_effort": "xhigh"})), None, 4096).unwrap_err();
        assert_eq!(err.field(), Some("reasoning_effort"));
    }

    #[test]
    fn the_budget_stays_below_max_tokens() {
        let (_, max) = from_effort(&body(json!({"reasoning_effort": "high"})), None, 1000).unwrap().unwrap();
        assert_eq!(max, 5096, "without a client limit the answer keeps the default allowance");
        let err =
            from_effort(&body(json!({"reasoning_effort": "low", "max_tokens": 1024})), Some(1024), 4096).unwrap_err();
        assert_eq!(err.field(), Some("max_tokens"));
        let err = from_effort(&body(json!({"reasoning_effort": "medium", "max_completion_tokens": 100})), Some(100), 0)
            .unwrap_err();
        assert_eq!(err.field(), Some("max_completion_tokens"));
        assert!(err.to_string().contains("2048 tokens"), "{err}");
    }

    #[test]
    fn sampling_and_forced_tools_follow_anthropics_rules() {
        let with = |extra: Value| {
            let mut b = body(json!({"reasoning_effort": "low"}));
            b.extend(body(extra));
            from_effort(&b, Some(2048), 0)
        };
        assert!(with(json!({"temperature": 1.0, "top_p": 0.95, "tool_choice": "auto"})).is_ok());
        assert_eq!(with(json!({"temperature": 0.2})).unwrap_err().field(), Some("temperature"));
        assert_eq!(with(json!({"top_p": 0.5})).unwrap_err().field(), Some("top_p"));
        assert_eq!(with(json!({"tool_choice": "required"})).unwrap_err().field(), Some("tool_choice"));
        let named = json!({"tool_choice": {"type": "function", "function": {"name": "f"}}});
        assert_eq!(with(named).unwrap_err().field(), Some("tool_choice"));
    }

    #[test]
    fn replayed_blocks_pass_unchanged_and_malformed_ones_are_refused() {
        let blocks = json!([{"type": "redacted_thinking", "data": "EmwKAhgB"},
            {"type": "thinking", "thinking": "Let me see.", "signature": "sig=="}]);
        let message = body(json!({"role": "assistant", "thinking_blocks": blocks}));
        assert_eq!(Value::Array(replayed_blocks(&message, "messages[1]").unwrap()), blocks);
        let unsigned = body(json!({"thinking_blocks": [{"type": "thinking", "thinking": "x"}]}));
        assert_eq!(
            replayed_blocks(&unsigned, "messages[1]").unwrap_err().field(),
            Some("messages[1].thinking_blocks[0].signature")
        );
        let other = body(json!({"thinking_blocks": [{"type": "text", "text": "x"}]}));
        assert!(replayed_blocks(&other, "m").is_err());
    }
}
