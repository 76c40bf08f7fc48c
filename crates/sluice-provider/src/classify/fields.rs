//! The few fields of a provider error body that classification reads, whatever its shape:
//! - OpenAI / Azure / Ollama (OpenAI-compatible): `{"error": {"message", "type", "code"}}`,
//!   Azure adding `error.innererror.code`;
//! - Anthropic: `{"type": "error", "error": {"type", "message", "details": {"error_code"}}}`;
//! - Gemini: `{"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED"}}`, sometimes
//!   wrapped in a one-element array;
//! - Ollama native: `{"error": "model \"x\" not found, try pulling it first"}`.

use serde_json::Value;

/// How much of the message is kept for matching; the telling words come first.
const MESSAGE_PREFIX_CHARS: usize = 512;

/// Error fields, absent ones empty. Codes keep their case; the message is lower-cased.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ErrorFields {
    /// `error.type` (OpenAI, Anthropic).
    pub(super) kind: String,
    /// `error.code` when a string (OpenAI, Azure); Anthropic `error.details.error_code`.
    pub(super) code: String,
    /// Azure `error.innererror.code` (e.g. `ResponsibleAIPolicyViolation`).
    pub(super) inner_code: String,
    /// `error.status` (Gemini's canonical code name).
    pub(super) status: String,
    /// `error.message` (or a bare `error` string), lower-cased and cut to a prefix.
    pub(super) message: String,
}

impl ErrorFields {
    pub(super) fn from_json(body: &Value) -> Self {
        let body = body.as_array().and_then(|items| items.first()).unwrap_or(body);
        let Some(error) = body.get("error") else {
            return Self::default();
        };
        if let Some(text) = error.as_str() {
            return Self { message: lower_prefix(text), ..Self::default() };
        }
        let field = |pointer: &str| error.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned();
        let code = Some(field("/code")).filter(|c| !c.is_empty()).unwrap_or_else(|| field("/details/error_code"));
        Self {
            kind: field("/type"),
            code,
            inner_code: field("/innererror/code"),
            status: field("/status"),
            message: lower_prefix(error.get("message").and_then(Value::as_str).unwrap_or_default()),
        }
    }

    /// Whether the type, code or inner code is one of `names`.
    pub(super) fn named(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.kind == *n || self.code == *n || self.inner_code == *n)
    }

    /// Whether the message contains any of `needles` (lower-case).
    pub(super) fn says(&self, needles: &[&str]) -> bool {
        needles.iter().any(|n| self.message.contains(n))
    }
}

fn lower_prefix(text: &str) -> String {
    text.chars().take(MESSAGE_PREFIX_CHARS).collect::<String>().to_lowercase()
}
