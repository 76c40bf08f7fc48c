//! What Gemini's thinking models need carried across the OpenAI shape: `reasoning_effort`
//! as `generationConfig.thinkingConfig`, and thought signatures kept on the tool calls and
//! messages a client sends back.
//!
//! `reasoning_effort`, per model family (the family is read from the model name):
//!
//! | effort | Gemini 2.5 (`thinkingBudget`) | Gemini 3 (`thinkingLevel`) |
//! |---|---|---|
//! | `low` | 1,024 | `low` |
//! | `medium` | 8,192 | `medium` on Flash models; refused elsewhere |
//! | `high` | 24,576 | `high` |
//! | `minimal` | refused (no documented budget) | `minimal` on Flash models; refused elsewhere |
//! | `none` | 0 on Flash and Flash-Lite; refused on Pro (it cannot turn thinking off) | refused (Gemini 3 cannot turn thinking off) |
//!
//! Another model (Gemini 2.0, a tuned model's own name) is refused: sluice cannot tell how
//! it thinks. The budgets are the ones Google's OpenAI compatibility layer maps the efforts
//! to (<https://ai.google.dev/gemini-api/docs/openai>, "Thinking": low, medium and high are
//! 1K, 8K and 24K budgets, `none` turns thinking off); the budget ranges and the levels per
//! model are Google's thinking guide's (<https://ai.google.dev/gemini-api/docs/thinking>:
//! `thinkingBudget` for 2.5, where Pro cannot disable thinking; `thinkingLevel` for 3, `low`
//! and `high` on every model, `minimal` and `medium` on Flash).
//!
//! Thought signatures (<https://ai.google.dev/gemini-api/docs/thought-signatures>): a part
//! returned with a `thoughtSignature` must go back with it, exactly as received, on the
//! next turn (Gemini 3 refuses a function-call turn without it). An OpenAI client carries
//! it where Google's own OpenAI compatibility layer puts it, which the OpenAI SDKs keep on
//! the objects they hand back: `extra_content.google.thought_signature` on the tool call (a
//! `functionCall` part's), and on the message (a text part's).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::translate::error::TranslateError;
use crate::translate::json::{self, Object};

/// The Gemini 2.5 budget of each effort, both directions (a client's budget reads as the
/// least effort whose budget covers it).
const BUDGETS: [(&str, u64); 3] = [("low", 1024), ("medium", 8192), ("high", 24576)];

/// The levels Gemini 3 takes, which are efforts of the same names.
const LEVELS: [&str; 4] = ["minimal", "low", "medium", "high"];

/// How a Gemini model's thinking is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// Gemini 2.5: a token budget; `pro` cannot turn thinking off.
    Budget { pro: bool },
    /// Gemini 3 and later: a level; `flash` takes `minimal` and `medium` too.
    Level { flash: bool },
    /// A model whose thinking sluice cannot set.
    Unknown,
}

/// The family of `model` (`gemini-2.5-flash`, `models/gemini-3-pro-preview`,
/// `publishers/google/models/gemini-2.5-pro`…).
fn family(model: &str) -> Family {
    let name = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    if name.starts_with("gemini-2.5") {
        return Family::Budget { pro: name.contains("-pro") };
    }
    let major = name.strip_prefix("gemini-").and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    match major {
        Some(major) if major >= 3 => Family::Level { flash: name.contains("flash") },
        _ => Family::Unknown,
    }
}

/// Where an OpenAI-shaped client sets Gemini's thinking exactly, as Google's OpenAI
/// compatibility layer reads it (the OpenAI SDKs' `extra_body` is merged into the body, so
/// Google's example nests a second `extra_body`).
const GOOGLE_CONFIG: &str = "extra_body.google.thinking_config";

/// The fields of [`GOOGLE_CONFIG`] and their `thinkingConfig` names.
const GOOGLE_FIELDS: [(&str, &str); 3] = [
    ("thinking_budget", "thinkingBudget"),
    ("thinking_level", "thinkingLevel"),
    ("include_thoughts", "includeThoughts"),
];

/// The `thinkingConfig` for the request on `model`: from `reasoning_effort`, or as given in
/// `extra_body.google.thinking_config` (`thinking_budget`, `thinking_level`,
/// `include_thoughts`; Google checks the values itself); an effort takes the config's
/// `include_thoughts`. `None` when the request sets neither.
///
/// # Errors
/// An effort and a budget or level both set; an effort that is not a string, or that `model`'s family has no setting for
/// (named `reasoning_effort`, with why); a Google config field of the wrong type or unknown.
pub(super) fn thinking_config(request: &Object, model: &str) -> Result<Option<Value>, TranslateError> {
    let google = google_config(request)?;
    let Some(effort) = json::opt_str(request, "reasoning_effort", "")? else { return Ok(google.map(Value::Object)) };
    let include = match google {
        Some(google) if google.contains_key("thinkingBudget") || google.contains_key("thinkingLevel") => {
            let why = format!("and `{GOOGLE_CONFIG}` both set how much Gemini thinks; send one");
            return Err(TranslateError::invalid("reasoning_effort", why));
        }
        Some(google) => google.get("includeThoughts").cloned(),
        None => None,
    };
    let mut config = effort_config(effort, model)?;
    if let (Some(include), Some(config)) = (include, config.as_object_mut()) {
        config.insert("includeThoughts".to_owned(), include);
    }
    Ok(Some(config))
}

/// The `thinkingConfig` of `effort` on `model`.
fn effort_config(effort: &str, model: &str) -> Result<Value, TranslateError> {
    let refuse = |why: String| Err(TranslateError::invalid("reasoning_effort", why));
    let config = match (family(model), effort) {
        (Family::Budget { .. }, effort) if budget_of(effort).is_some() => {
            json!({"thinkingBudget": budget_of(effort)})
        }
        (Family::Budget { pro: false }, "none") => json!({"thinkingBudget": 0}),
        (Family::Budget { pro: true }, "none") => {
            return refuse(format!("`none` cannot be translated to Gemini: {model} cannot turn thinking off"));
        }
        (Family::Level { .. }, level @ ("low" | "high"))
        | (Family::Level { flash: true }, level @ ("minimal" | "medium")) => {
            json!({"thinkingLevel": level})
        }
        (Family::Level { .. }, "none") => {
            return refuse(format!("`none` cannot be translated to Gemini: {model} cannot turn thinking off"));
        }
        (Family::Unknown, _) => {
            return refuse(format!(
                "cannot be translated to Gemini: {model} is not a Gemini 2.5 or 3 model, whose thinking sluice sets"
            ));
        }
        (_, other) => return refuse(format!("`{other}` has no Gemini thinking setting for {model}")),
    };
    Ok(config)
}

/// `extra_body.google.thinking_config` as a `thinkingConfig`.
fn google_config(request: &Object) -> Result<Option<Object>, TranslateError> {
    let config = json::present(request, "extra_body")
        .and_then(|e| e.get("google"))
        .and_then(|g| g.get("thinking_config"))
        .filter(|c| !c.is_null());
    let Some(config) = config else { return Ok(None) };
    let config = json::as_object(config, GOOGLE_CONFIG)?;
    let mut out = Object::new();
    for (key, value) in config {
        let field = json::join(GOOGLE_CONFIG, key);
        let Some((_, name)) = GOOGLE_FIELDS.iter().find(|(snake, camel)| snake == key || camel == key) else {
            return Err(TranslateError::invalid(field, "is not a Gemini thinking setting"));
        };
        let typed = match *name {
            "thinkingBudget" => value.is_i64(),
            "thinkingLevel" => value.is_string(),
            _ => value.is_boolean(),
        };
        if !typed {
            return Err(TranslateError::invalid(field, "has the wrong type"));
        }
        out.insert((*name).to_owned(), value.clone());
    }
    Ok(Some(out))
}

/// The `extra_body.google.thinking_config` that asks a Gemini deployment for `config`
/// (the shape [`thinking_config`] reads): what a translated request carries over the
/// OpenAI chat shape.
pub(crate) fn google_extra_body(config: Value) -> Value {
    json!({"google": {"thinking_config": config}})
}

/// What a Gemini thought signature is prefixed with in an Anthropic `thinking` block's
/// `signature`, so that a replayed block is known for Gemini's (and a Claude signature is
/// never sent to Gemini).
const ANTHROPIC_SIGNATURE_PREFIX: &str = "gemini:";

/// A Gemini thought signature as an Anthropic `thinking` block's `signature`.
pub(crate) fn anthropic_signature(signature: &str) -> String {
    format!("{ANTHROPIC_SIGNATURE_PREFIX}{signature}")
}

/// The Gemini thought signature an Anthropic `thinking` block's `signature` carries (`None`
/// for another provider's).
pub(crate) fn from_anthropic_signature(signature: &str) -> Option<&str> {
    signature.strip_prefix(ANTHROPIC_SIGNATURE_PREFIX).filter(|s| !s.is_empty())
}

/// What a signed thinking block of another provider's (Claude's `thinking` or
/// `redacted_thinking`) is wrapped in, as the `thoughtSignature` of the `thought: true`
/// part a Gemini client gets for it: this prefix and the block as JSON, base64-encoded (the
/// field is bytes to Google's SDKs, which keep it and send it back as they got it).
const BLOCK_PREFIX: &[u8] = b"sluice.thinking_block:";

/// A thinking block (as an OpenAI answer's `thinking_blocks` hold it) as a Gemini
/// `thoughtSignature`.
pub(crate) fn block_signature(block: &Value) -> String {
    let mut bytes = BLOCK_PREFIX.to_vec();
    bytes.extend_from_slice(block.to_string().as_bytes());
    STANDARD.encode(bytes)
}

/// The thinking block a Gemini `thoughtSignature` wraps (`None` for Gemini's own
/// signatures): standard or URL-safe base64, padded or not, as Google's SDKs re-encode it.
pub(crate) fn block_of_signature(signature: &str) -> Option<Value> {
    let trimmed = signature.trim_end_matches('=');
    let bytes = STANDARD_NO_PAD.decode(trimmed).or_else(|_| URL_SAFE_NO_PAD.decode(trimmed)).ok()?;
    let block: Value = serde_json::from_slice(bytes.strip_prefix(BLOCK_PREFIX)?).ok()?;
    let kind = block.get("type").and_then(Value::as_str)?;
    matches!(kind, "thinking" | "redacted_thinking").then_some(block)
}

fn budget_of(effort: &str) -> Option<u64> {
    BUDGETS.iter().find(|(e, _)| *e == effort).map(|(_, budget)| *budget)
}

/// The `reasoning_effort` of a client's `thinkingConfig`: a `thinkingLevel` is the effort
/// of its name; a `thinkingBudget` the least effort whose budget covers it (`0`: `none`;
/// `-1`, dynamic, or none given: no effort, the model decides).
///
/// # Errors
/// A level that is not one of Gemini's, a budget that is not an integer.
pub(super) fn effort_of(config: &Object) -> Result<Option<&'static str>, TranslateError> {
    let path = "generationConfig.thinkingConfig";
    if let Some(level) = json::opt_str(config, "thinkingLevel", path)? {
        let level = level.to_ascii_lowercase();
        return match LEVELS.iter().find(|l| **l == level) {
            Some(effort) => Ok(Some(effort)),
            None => Err(TranslateError::invalid(format!("{path}.thinkingLevel"), format!("unknown level `{level}`"))),
        };
    }
    let Some(budget) = json::present(config, "thinkingBudget") else { return Ok(None) };
    let Some(budget) = budget.as_i64() else {
        return Err(TranslateError::invalid(format!("{path}.thinkingBudget"), "must be an integer"));
    };
    Ok(match u64::try_from(budget) {
        Err(_) => None,
        Ok(0) => Some("none"),
        Ok(budget) => Some(BUDGETS.iter().find(|(_, b)| *b >= budget).map_or("high", |(effort, _)| effort)),
    })
}

/// The thought signature a client sent back in `extra_content.google.thought_signature` of
/// `holder` (a tool call or a message).
///
/// # Errors
/// A signature that is not a string.
pub(super) fn signature_of<'a>(holder: &'a Object, path: &str) -> Result<Option<&'a str>, TranslateError> {
    let google = json::present(holder, "extra_content").and_then(|e| e.get("google")).and_then(Value::as_object);
    match google {
        Some(google) => json::opt_str(google, "thought_signature", &json::join(path, "extra_content.google")),
        None => Ok(None),
    }
}

/// The signature in `holder`'s `extra_content.google.thought_signature` (a tool call, a
/// message or a stream delta, as sluice's own OpenAI answers carry it), if a string.
pub(crate) fn extra_content_signature(holder: &Value) -> Option<&str> {
    holder.as_object().and_then(object_signature)
}

/// [`extra_content_signature`] of an object.
pub(crate) fn object_signature(holder: &Object) -> Option<&str> {
    holder.get("extra_content")?.get("google")?.get("thought_signature")?.as_str().filter(|s| !s.is_empty())
}

/// `extra_content` carrying `signature`, as the OpenAI client keeps it.
pub(crate) fn extra_content(signature: &str) -> Value {
    json!({"google": {"thought_signature": signature}})
}

/// A part's `thoughtSignature`.
pub(crate) fn part_signature(part: &Value) -> Option<&str> {
    part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn config(model: &str, effort: &str) -> Result<Option<Value>, TranslateError> {
        let request = json!({"reasoning_effort": effort});
        thinking_config(request.as_object().unwrap(), model)
    }

    #[test]
    fn gemini_2_5_takes_the_documented_budgets() {
        assert_eq!(config("gemini-2.5-flash", "low").unwrap(), Some(json!({"thinkingBudget": 1024})));
        assert_eq!(config("gemini-2.5-flash", "medium").unwrap(), Some(json!({"thinkingBudget": 8192})));
        assert_eq!(config("models/gemini-2.5-pro", "high").unwrap(), Some(json!({"thinkingBudget": 24576})));
        assert_eq!(config("gemini-2.5-flash-lite", "none").unwrap(), Some(json!({"thinkingBudget": 0})));
        let pro_off = config("gemini-2.5-pro", "none").unwrap_err();
        assert_eq!(pro_off.field(), Some("reasoning_effort"));
        assert!(pro_off.to_string().contains("cannot turn thinking off"), "{pro_off}");
        assert_eq!(config("gemini-2.5-flash", "minimal").unwrap_err().field(), Some("reasoning_effort"));
    }

    #[test]
    fn gemini_3_takes_levels_by_model() {
        assert_eq!(config("gemini-3-pro-preview", "low").unwrap(), Some(json!({"thinkingLevel": "low"})));
        assert_eq!(config("gemini-3.1-pro", "high").unwrap(), Some(json!({"thinkingLevel": "high"})));
        assert_eq!(config("gemini-3-flash-preview", "minimal").unwrap(), Some(json!({"thinkingLevel": "minimal"})));
        assert_eq!(config("gemini-3-flash-preview", "medium").unwrap(), Some(json!({"thinkingLevel": "medium"})));
        assert_eq!(config("gemini-3-pro-preview", "medium").unwrap_err().field(), Some("reasoning_effort"));
        assert_eq!(config("gemini-3-flash-preview", "none").unwrap_err().field(), Some("reasoning_effort"));
    }

    #[test]
    fn googles_own_thinking_config_is_taken_as_given_and_an_effort_takes_its_include_thoughts() {
        let config_of = |request: Value| thinking_config(request.as_object().unwrap(), "gemini-2.5-flash");
        let google = |config: Value| json!({"extra_body": {"google": {"thinking_config": config}}});
        assert_eq!(
            config_of(google(json!({"thinking_budget": 800, "include_thoughts": true}))).unwrap(),
            Some(json!({"thinkingBudget": 800, "includeThoughts": true}))
        );
        assert_eq!(config_of(google(json!({"thinkingLevel": "low"}))).unwrap(), Some(json!({"thinkingLevel": "low"})));
        let mut both = google(json!({"include_thoughts": true}));
        both["reasoning_effort"] = json!("low");
        assert_eq!(config_of(both).unwrap(), Some(json!({"thinkingBudget": 1024, "includeThoughts": true})));
        let mut twice = google(json!({"thinking_budget": 800}));
        twice["reasoning_effort"] = json!("low");
        assert_eq!(config_of(twice).unwrap_err().field(), Some("reasoning_effort"));
        let wrong = config_of(google(json!({"thinking_budget": "lots"}))).unwrap_err();
        assert_eq!(wrong.field(), Some("extra_body.google.thinking_config.thinking_budget"));
        let unknown = config_of(google(json!({"thinking_depth": 3}))).unwrap_err();
        assert_eq!(unknown.field(), Some("extra_body.google.thinking_config.thinking_depth"));
    }

    #[test]
    fn a_claude_block_rides_a_thought_signature_in_either_base64_alphabet() {
        let block = json!({"type": "thinking", "thinking": "Two cities?>", "signature": "EqQBCkYI+/Bx=="});
        let signature = block_signature(&block);
        assert_eq!(block_of_signature(&signature), Some(block.clone()));
        // google-genai hands bytes back URL-safe and may drop the padding.
        let url_safe = signature.replace('+', "-").replace('/', "_");
        assert_eq!(block_of_signature(url_safe.trim_end_matches('=')), Some(block));
        assert_eq!(block_of_signature("c2lnLW9zbG8="), None, "Gemini's own signatures are not blocks");
        assert_eq!(block_of_signature("not base64 at all!"), None);
        let not_a_block = block_signature(&json!({"type": "text", "text": "hi"}));
        assert_eq!(block_of_signature(&not_a_block), None);
    }

    #[test]
    fn other_models_and_other_values_are_refused_and_no_effort_is_nothing() {
        assert_eq!(config("gemini-2.0-flash", "low").unwrap_err().field(), Some("reasoning_effort"));
        assert_eq!(config("my-tuned-model", "high").unwrap_err().field(), Some("reasoning_effort"));
        assert_eq!(config("gemini-2.5-flash", "extreme").unwrap_err().field(), Some("reasoning_effort"));
        let request = json!({"reasoning_effort": null});
        assert_eq!(thinking_config(request.as_object().unwrap(), "gemini-2.0-flash").unwrap(), None);
        let request = json!({"reasoning_effort": 3});
        assert!(thinking_config(request.as_object().unwrap(), "gemini-2.5-flash").is_err());
    }
}
