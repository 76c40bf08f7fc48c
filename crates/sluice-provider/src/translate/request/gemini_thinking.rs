//! Anthropic's extended thinking toward a Gemini deployment, over the OpenAI chat shape the
//! Gemini layer reads (`extra_body.google.thinking_config`, `extra_content` signatures).
//!
//! - `thinking: {type: "enabled", budget_tokens: N}` asks Gemini for a thinking budget of
//!   `N` with its thought summaries (`thinking_budget: N, include_thoughts: true`); Gemini
//!   checks the budget against the model's own range, and, like Anthropic, counts thinking
//!   within the output limit (`max_tokens` → `maxOutputTokens`). `{type: "adaptive"}` lets
//!   the model decide how much to think (Gemini's default), thoughts included. `{type:
//!   "disabled"}` sends nothing: the model's default stands (some Gemini models cannot stop
//!   thinking) and no thoughts are shown.
//! - Back to the client, the summaries are the `thinking` text, and each thought signature
//!   (<https://ai.google.dev/gemini-api/docs/thought-signatures>) is the `signature` of a
//!   `thinking` block placed just before the block of the part that carried it (a
//!   `tool_use`, or the text), prefixed `gemini:`; see
//!   [`openai_to_anthropic_response`](crate::openai_to_anthropic_response).
//! - Replayed, a `thinking` block with such a signature gives it to the next `tool_use` or
//!   text of its turn (or to the turn's text when none follows); other thinking blocks (a
//!   Claude answer's, whose signatures only Anthropic can read) are dropped.

use serde_json::{Value, json};

use crate::translate::error::TranslateError;
use crate::translate::gemini::{extra_content, from_anthropic_signature, google_extra_body};
use crate::translate::json::{self, Object};

/// The `extra_body` asking a Gemini deployment for the thinking of `body`'s `thinking`
/// (`None`: the request sets none, or disables it).
///
/// # Errors
/// A `thinking` that is not an object, of an unknown type, or enabled without a positive
/// integer `budget_tokens`.
pub(super) fn extra_body(body: &Object) -> Result<Option<Value>, TranslateError> {
    let Some(thinking) = json::present(body, "thinking") else { return Ok(None) };
    let thinking = json::as_object(thinking, "thinking")?;
    let config = match json::req_str(thinking, "type", "thinking")? {
        "disabled" => return Ok(None),
        "adaptive" => json!({"include_thoughts": true}),
        "enabled" => {
            let budget = json::present(thinking, "budget_tokens").and_then(Value::as_u64).filter(|b| *b > 0);
            let Some(budget) = budget else {
                return Err(TranslateError::invalid("thinking.budget_tokens", "must be a positive integer"));
            };
            json!({"thinking_budget": budget, "include_thoughts": true})
        }
        other => {
            return Err(TranslateError::invalid("thinking.type", format!("unknown type `{other}`")));
        }
    };
    Ok(Some(google_extra_body(config)))
}

/// The Gemini thought signature a replayed `thinking` block carries (`None` for a block of
/// another provider's, or one without a signature).
pub(super) fn replayed_signature<'a>(block: &'a Object, path: &str) -> Result<Option<&'a str>, TranslateError> {
    if json::req_str(block, "type", path)? != "thinking" {
        return Ok(None);
    }
    Ok(json::opt_str(block, "signature", path)?.and_then(from_anthropic_signature))
}

/// Puts `signature` where the Gemini layer reads it back on `holder` (a tool call or the
/// assistant message).
pub(super) fn sign(holder: &mut Value, signature: &str) {
    if let Some(holder) = holder.as_object_mut() {
        holder.insert("extra_content".to_owned(), extra_content(signature));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::json;

    use super::*;

    fn extra(thinking: Value) -> Result<Option<Value>, TranslateError> {
        extra_body(json!({"thinking": thinking}).as_object().unwrap())
    }

    #[test]
    fn a_budget_asks_for_it_with_the_thoughts_and_disabled_asks_nothing() {
        assert_eq!(
            extra(json!({"type": "enabled", "budget_tokens": 2048})).unwrap(),
            Some(json!({"google": {"thinking_config": {"thinking_budget": 2048, "include_thoughts": true}}}))
        );
        assert_eq!(
            extra(json!({"type": "adaptive"})).unwrap(),
            Some(json!({"google": {"thinking_config": {"include_thoughts": true}}}))
        );
        assert_eq!(extra(json!({"type": "disabled"})).unwrap(), None);
        assert_eq!(extra_body(json!({}).as_object().unwrap()).unwrap(), None);
    }

    #[test]
    fn a_malformed_thinking_is_refused_naming_the_field() {
        assert_eq!(extra(json!({"type": "enabled"})).unwrap_err().field(), Some("thinking.budget_tokens"));
        assert_eq!(
            extra(json!({"type": "enabled", "budget_tokens": -5})).unwrap_err().field(),
            Some("thinking.budget_tokens")
        );
        assert_eq!(extra(json!({"type": "sometimes"})).unwrap_err().field(), Some("thinking.type"));
        assert_eq!(extra(json!("on")).unwrap_err().field(), Some("thinking"));
    }

    #[test]
    fn only_geminis_signatures_are_replayed() {
        let block = |signature: &str| json!({"type": "thinking", "thinking": "t", "signature": signature});
        let ours = block("gemini:c2ln");
        assert_eq!(replayed_signature(ours.as_object().unwrap(), "b").unwrap(), Some("c2ln"));
        let claudes = block("EqQBCkYIBxgCKkA");
        assert_eq!(replayed_signature(claudes.as_object().unwrap(), "b").unwrap(), None);
        let empty = block("gemini:");
        assert_eq!(replayed_signature(empty.as_object().unwrap(), "b").unwrap(), None);
        let redacted = json!({"type": "redacted_thinking", "data": "gemini:x"});
        assert_eq!(replayed_signature(redacted.as_object().unwrap(), "b").unwrap(), None);
    }
}
