//! Gemini's thinking models as the simulator serves them: `generationConfig.thinkingConfig`
//! checked per model family, thinking tokens reported as `thoughtsTokenCount`, and thought
//! signatures issued and verified.
//!
//! - The family is read from the model name: `gemini-2.5-*` takes a `thinkingBudget`
//!   (Pro 128–32,768 and never 0, Flash 0–24,576, Flash-Lite 0 or 512–24,576, -1 dynamic);
//!   `gemini-3*` a `thinkingLevel` (`low`, `high`; `minimal`, `medium` on Flash) or a
//!   budget; both at once is refused; any other model (`gemini-2.0-flash`, a name of the
//!   simulator's own such as `gemini-flash`) does not think and refuses a thinking config
//!   (<https://ai.google.dev/gemini-api/docs/thinking>).
//! - A thinking model's answer to a request with function declarations carries a
//!   `thoughtSignature` on its first `functionCall` part; Gemini 3's text answers carry one
//!   on their last part (<https://ai.google.dev/gemini-api/docs/thought-signatures>). A
//!   signature is an HMAC of the model, the function's name and its arguments, so one
//!   altered, moved to another call or sent to another model does not verify.
//! - On the way back, every signature in the history must verify (`Corrupted thought
//!   signature.`), and on Gemini 3 the first `functionCall` part of each model turn of the
//!   current turn (the steps after the last user message that is not only function
//!   responses) must carry its signature: without it Gemini 3 answers 400 `Function call is
//!   missing a thought_signature in functionCall parts`. Gemini 2.5 takes a call without
//!   its signature (it reasons worse, it does not refuse). Google's documented dummy,
//!   `skip_thought_signature_validator`, passes as a signature.

use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// The key the simulator signs thoughts with.
const KEY: &[u8] = b"sluice-sim thought signatures";

/// The signature Google documents for histories that never had one.
const DUMMY: &str = "skip_thought_signature_validator";

/// How a model thinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Gemini 2.5: budgets from `min` to `max` tokens (`off`: 0 turns thinking off).
    Budget {
        /// Smallest budget but 0.
        min: i64,
        /// Largest budget.
        max: i64,
        /// Whether 0 turns thinking off (Pro cannot).
        off: bool,
    },
    /// Gemini 3: levels (`flash` takes `minimal` and `medium` too).
    Level {
        /// A Flash model.
        flash: bool,
    },
    /// A model that does not think.
    None,
}

/// The family of the model named `name`.
#[must_use]
pub fn family(name: &str) -> Family {
    let name = name.to_ascii_lowercase();
    if name.starts_with("gemini-2.5") {
        return if name.contains("-pro") {
            Family::Budget { min: 128, max: 32_768, off: false }
        } else if name.contains("flash-lite") {
            Family::Budget { min: 512, max: 24_576, off: true }
        } else {
            Family::Budget { min: 1, max: 24_576, off: true }
        };
    }
    let major: Option<u32> = name
        .strip_prefix("gemini-")
        .map(|rest| rest.chars().take_while(char::is_ascii_digit).collect::<String>())
        .and_then(|digits| digits.parse().ok());
    match major {
        Some(major) if major >= 3 => Family::Level { flash: name.contains("flash") },
        _ => Family::None,
    }
}

/// What a request's thinking config comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thinking {
    /// The model's family.
    pub family: Family,
    /// Thinking tokens the answer reports (0: it did not think).
    pub thoughts: u64,
    /// Whether the answer shows a summary of its thoughts (`includeThoughts`).
    pub summarized: bool,
}

impl Thinking {
    /// Whether the answer thought (and so carries signatures).
    #[must_use]
    pub fn on(&self) -> bool {
        self.thoughts > 0
    }

    /// The thought summary part the answer starts with, when asked for
    /// (<https://ai.google.dev/gemini-api/docs/thinking#summaries>: a text part marked
    /// `thought: true`).
    #[must_use]
    pub fn summary(&self) -> Option<Value> {
        (self.on() && self.summarized)
            .then(|| serde_json::json!({"text": "**Weighing the request** I read what is asked and plan the answer.", "thought": true}))
    }

    /// Whether its text answers carry a signature too (Gemini 3).
    #[must_use]
    pub fn signs_text(&self) -> bool {
        self.on() && matches!(self.family, Family::Level { .. })
    }
}

/// The thinking of model `name` under `config` (a request's `generationConfig`).
///
/// # Errors
/// Google's message for a config the model does not take.
pub fn thinking(name: &str, config: Option<&Value>) -> Result<Thinking, String> {
    let family = family(name);
    let config = config.and_then(|c| c.get("thinkingConfig")).filter(|c| !c.is_null());
    let Some(config) = config else {
        // Dynamic thinking by default; Gemini 3 defaults to `high`.
        let thoughts = match family {
            Family::Budget { .. } => 32,
            Family::Level { .. } => level_tokens("high"),
            Family::None => 0,
        };
        return Ok(Thinking { family, thoughts, summarized: false });
    };
    if family == Family::None {
        return Err(format!("Thinking is not supported by models/{name}."));
    }
    let summarized = match config.get("includeThoughts").filter(|i| !i.is_null()) {
        None => false,
        Some(Value::Bool(include)) => *include,
        Some(_) => return Err("include_thoughts must be a boolean.".to_owned()),
    };
    let budget = config.get("thinkingBudget").filter(|b| !b.is_null());
    let level = config.get("thinkingLevel").filter(|l| !l.is_null());
    let thoughts = match (budget, level) {
        (Some(_), Some(_)) => {
            return Err("thinking_budget and thinking_level are not supported together.".to_owned());
        }
        (Some(budget), None) => budget_tokens(family, budget)?,
        (None, Some(level)) => {
            let Family::Level { flash } = family else {
                return Err(format!("Thinking level is not supported for models/{name}; use thinking_budget."));
            };
            let level = level.as_str().unwrap_or_default().to_ascii_lowercase();
            match level.as_str() {
                "low" | "high" => level_tokens(&level),
                "minimal" | "medium" if flash => level_tokens(&level),
                _ => return Err(format!("Thinking level {level} is not supported for models/{name}.")),
            }
        }
        (None, None) => 32,
    };
    Ok(Thinking { family, thoughts, summarized })
}

fn level_tokens(level: &str) -> u64 {
    match level {
        "minimal" => 4,
        "low" => 8,
        "medium" => 64,
        _ => 192,
    }
}

/// A budget's thinking tokens (a 128th of it; -1 is dynamic), or Google's refusal.
fn budget_tokens(family: Family, budget: &Value) -> Result<u64, String> {
    let Some(budget) = budget.as_i64() else { return Err("thinking_budget must be an integer.".to_owned()) };
    let (min, max, off) = match family {
        Family::Budget { min, max, off } => (min, max, off),
        // Gemini 3 takes a budget for compatibility, within the widest range.
        _ => (1, 32_768, false),
    };
    match budget {
        -1 => Ok(32),
        0 if off => Ok(0),
        0 => Err("Budget 0 is invalid. This model only works in thinking mode.".to_owned()),
        b if (min..=max).contains(&b) => Ok(u64::try_from(b / 128).unwrap_or(0).max(1)),
        b => Err(format!("The thinking budget {b} is invalid. Please choose a value between {min} and {max}.")),
    }
}

/// Signatures issued and verified.
#[derive(Debug, Default)]
pub struct Signatures {
    verified: AtomicUsize,
}

impl Signatures {
    /// Signatures that came back and verified so far.
    #[must_use]
    pub fn verified(&self) -> usize {
        self.verified.load(Ordering::Relaxed)
    }

    /// Checks the signatures of `contents` sent to model `name` (see the module's rules).
    ///
    /// # Errors
    /// Google's message: a signature that does not verify, or on Gemini 3 a function call
    /// of the current turn without its signature.
    pub fn check(&self, name: &str, contents: &[Value]) -> Result<(), String> {
        let current = contents.iter().rposition(is_user_prompt).map_or(0, |i| i + 1);
        let mut verified = 0;
        for (position, content) in contents.iter().enumerate() {
            if content.get("role").and_then(Value::as_str) != Some("model") {
                continue;
            }
            let parts = content.get("parts").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            for part in parts {
                let Some(signature) = part.get("thoughtSignature").and_then(Value::as_str) else { continue };
                if signature != DUMMY && !same_bytes(signature, &sign_part(name, part)) {
                    return Err("Corrupted thought signature.".to_owned());
                }
                verified += 1;
            }
            let first_call = parts.iter().find_map(|p| Some((p, p.get("functionCall")?)));
            let strict = matches!(family(name), Family::Level { .. }) && position >= current;
            if let Some((part, call)) = first_call.filter(|_| strict)
                && part.get("thoughtSignature").is_none()
            {
                let function = call.get("name").and_then(Value::as_str).unwrap_or_default();
                return Err(format!(
                    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{function}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                    position + 1
                ));
            }
        }
        self.verified.fetch_add(verified, Ordering::Relaxed);
        Ok(())
    }
}

/// Whether two signatures are the same bytes: a `bytes` field in proto3 JSON may come in
/// standard or URL-safe base64, padded or not (<https://protobuf.dev/programming-guides/json/>),
/// and google-genai sends them back URL-safe.
fn same_bytes(sent: &str, expected: &str) -> bool {
    let decode = |text: &str| {
        let standard: String = text
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect();
        base64::engine::general_purpose::STANDARD_NO_PAD.decode(standard).ok()
    };
    decode(sent).is_some_and(|bytes| Some(bytes) == decode(expected))
}

/// A user content that starts a turn: one with a part that is not a function response.
fn is_user_prompt(content: &Value) -> bool {
    content.get("role").and_then(Value::as_str).is_none_or(|r| r == "user")
        && content
            .get("parts")
            .and_then(Value::as_array)
            .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_none()))
}

/// The signature model `name` gives `part`: over its function call, or over "text".
#[must_use]
pub fn sign_part(name: &str, part: &Value) -> String {
    let subject = match part.get("functionCall") {
        Some(call) => {
            let function = call.get("name").and_then(Value::as_str).unwrap_or_default();
            format!("call\n{function}\n{}", canonical(call.get("args").unwrap_or(&Value::Null)))
        }
        None => "text".to_owned(),
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, KEY);
    STANDARD.encode(ring::hmac::sign(&key, format!("{name}\n{subject}").as_bytes()).as_ref())
}

/// `value` as JSON text with every object's keys sorted, whatever order it came in.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> =
                keys.iter().map(|k| format!("{}:{}", Value::from(k.as_str()), canonical(&map[k.as_str()]))).collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn thinking_configs_are_checked_per_family() {
        let config = |c: Value| json!({"thinkingConfig": c});
        let flash = thinking("gemini-2.5-flash", Some(&config(json!({"thinkingBudget": 8192})))).unwrap();
        assert_eq!(flash.thoughts, 64);
        assert!(!thinking("gemini-2.5-flash", Some(&config(json!({"thinkingBudget": 0})))).unwrap().on());
        let pro_off = thinking("gemini-2.5-pro", Some(&config(json!({"thinkingBudget": 0})))).unwrap_err();
        assert!(pro_off.contains("only works in thinking mode"), "{pro_off}");
        assert!(thinking("gemini-2.5-flash", Some(&config(json!({"thinkingBudget": 40000})))).is_err());
        assert!(thinking("gemini-2.5-flash", Some(&config(json!({"thinkingLevel": "low"})))).is_err());
        let three = thinking("gemini-3-pro-preview", Some(&config(json!({"thinkingLevel": "LOW"})))).unwrap();
        assert_eq!(three.thoughts, 8);
        assert!(three.signs_text());
        assert!(thinking("gemini-3-pro-preview", Some(&config(json!({"thinkingLevel": "minimal"})))).is_err());
        assert!(thinking("gemini-3-flash-preview", Some(&config(json!({"thinkingLevel": "minimal"})))).is_ok());
        let both = config(json!({"thinkingLevel": "low", "thinkingBudget": 1024}));
        assert!(thinking("gemini-3-flash-preview", Some(&both)).is_err());
        assert!(thinking("gemini-flash", Some(&config(json!({"thinkingBudget": 1024})))).is_err());
        assert!(!thinking("gemini-flash", None).unwrap().on(), "no config on a model that does not think");
    }

    #[test]
    fn thought_summaries_come_only_when_asked_and_when_the_model_thought() {
        let config = |c: Value| json!({"thinkingConfig": c});
        let asked =
            thinking("gemini-2.5-flash", Some(&config(json!({"thinkingBudget": 1024, "includeThoughts": true}))));
        let summary = asked.unwrap().summary().unwrap();
        assert_eq!(summary["thought"], true);
        assert!(summary["text"].as_str().is_some_and(|t| !t.is_empty()));
        let unasked = thinking("gemini-2.5-flash", Some(&config(json!({"thinkingBudget": 1024})))).unwrap();
        assert!(unasked.summary().is_none());
        let off = config(json!({"thinkingBudget": 0, "includeThoughts": true}));
        assert!(thinking("gemini-2.5-flash", Some(&off)).unwrap().summary().is_none(), "no thinking, no thoughts");
        let wrong = thinking("gemini-2.5-flash", Some(&config(json!({"includeThoughts": "yes"})))).unwrap_err();
        assert!(wrong.contains("include_thoughts"), "{wrong}");
    }

    #[test]
    fn signatures_verify_only_on_their_call_and_gemini_3_wants_them_in_the_current_turn() {
        let call = json!({"functionCall": {"name": "weather", "args": {"b": 1, "a": [2, {"d": 3, "c": 4}]}}});
        let signature = sign_part("gemini-3-flash-preview", &call);
        let reordered = json!({"functionCall": {"name": "weather", "args": {"a": [2, {"c": 4, "d": 3}], "b": 1}}});
        assert_eq!(sign_part("gemini-3-flash-preview", &reordered), signature, "key order does not matter");
        let signed = |sig: &str| {
            let mut part = call.clone();
            part["thoughtSignature"] = json!(sig);
            part
        };
        let turn = |model_part: Value| {
            vec![
                json!({"role": "user", "parts": [{"text": "weather?"}]}),
                json!({"role": "model", "parts": [model_part]}),
                json!({"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {}}}]}),
            ]
        };
        let signatures = Signatures::default();
        signatures.check("gemini-3-flash-preview", &turn(signed(&signature))).unwrap();
        assert_eq!(signatures.verified(), 1);
        // The same bytes in URL-safe base64 without padding, as google-genai sends them back.
        let url_safe: String = signature
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        signatures.check("gemini-3-flash-preview", &turn(signed(&url_safe))).unwrap();
        let missing = signatures.check("gemini-3-flash-preview", &turn(call.clone())).unwrap_err();
        assert!(missing.starts_with("Function call is missing a thought_signature"), "{missing}");
        assert!(missing.contains("default_api:weather"), "{missing}");
        let altered = signatures.check("gemini-3-flash-preview", &turn(signed("AAAA"))).unwrap_err();
        assert_eq!(altered, "Corrupted thought signature.");
        let other_model = signatures.check("gemini-3-pro-preview", &turn(signed(&signature))).unwrap_err();
        assert_eq!(other_model, "Corrupted thought signature.");
        signatures.check("gemini-2.5-flash", &turn(call.clone())).unwrap();
        signatures.check("gemini-3-flash-preview", &turn(signed(DUMMY))).unwrap();
        // An earlier turn (before a new user prompt) is not held to it.
        let mut older = turn(call);
        older.push(json!({"role": "model", "parts": [{"text": "3 degrees"}]}));
        older.push(json!({"role": "user", "parts": [{"text": "thanks"}]}));
        signatures.check("gemini-3-flash-preview", &older).unwrap();
    }
}
