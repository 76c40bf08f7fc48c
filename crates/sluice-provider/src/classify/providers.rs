//! What each provider's error body says the failure is, before the status code has its say
//! (see [`super::classify`] for how the two combine).
//!
//! Types and codes are matched exactly. Messages are matched only where a provider has no
//! code for the case, with phrases taken from its real errors:
//! - Anthropic reports context overflow as a plain `invalid_request_error` whose message
//!   starts "prompt is too long: N tokens > M maximum" (or, for input plus `max_tokens`,
//!   "... exceed context limit ..."). A reworded message falls back to `Validation`, which
//!   is also not retryable — the cost of a miss is a lost fallback to a longer-context
//!   model, never a wrong retry.
//! - Azure tells capacity ("experiencing high demand") from quota only in the message.
//! - Gemini reports context overflow and a bad API key as `INVALID_ARGUMENT` with messages
//!   "... exceeds the maximum number of tokens allowed ..." and "API key not valid".

use super::class::{ErrorClass, ProviderFlavor};
use super::fields::ErrorFields;

const RATE_LIMITED: ErrorClass = ErrorClass::RateLimited { retry_after: None, daily: false };

/// The class the body names, or `None` when it names nothing known.
pub(super) fn from_body(provider: ProviderFlavor, f: &ErrorFields) -> Option<ErrorClass> {
    match provider {
        ProviderFlavor::Anthropic => anthropic(f),
        ProviderFlavor::Gemini => gemini(f),
        ProviderFlavor::OpenAi | ProviderFlavor::Azure | ProviderFlavor::Ollama => openai_like(f),
    }
}

fn openai_like(f: &ErrorFields) -> Option<ErrorClass> {
    Some(if f.named(&["context_length_exceeded"]) || f.says(&["maximum context length"]) {
        ErrorClass::ContextLength
    } else if f.named(&["insufficient_quota", "billing_hard_limit_reached", "billing_not_active"]) {
        ErrorClass::SpendLimit
    } else if f.named(&["content_filter", "content_policy_violation", "invalid_prompt", "ResponsibleAIPolicyViolation"])
    {
        ErrorClass::SafetyRefusal
    } else if f.named(&["invalid_api_key", "invalid_authentication", "authentication_error"]) {
        ErrorClass::Auth
    } else if f.named(&["model_not_found", "DeploymentNotFound", "deployment_not_found"]) {
        ErrorClass::NotFound
    } else if f.says(&["high demand", "overloaded", "server busy"]) {
        ErrorClass::Overloaded
    } else if f.named(&["rate_limit_exceeded", "429"]) {
        RATE_LIMITED
    } else if f.named(&["server_error"]) {
        ErrorClass::ServerError
    } else if f.named(&["invalid_request_error"]) {
        ErrorClass::Validation
    } else {
        return None;
    })
}

fn anthropic(f: &ErrorFields) -> Option<ErrorClass> {
    Some(match f.kind.as_str() {
        "rate_limit_error" if f.code == "enforced_spend_limit_reached" => ErrorClass::SpendLimit,
        "rate_limit_error" => RATE_LIMITED,
        "overloaded_error" => ErrorClass::Overloaded,
        "api_error" | "timeout_error" => ErrorClass::ServerError,
        "invalid_request_error" if f.says(&["prompt is too long", "exceed context limit"]) => ErrorClass::ContextLength,
        "invalid_request_error" | "request_too_large" => ErrorClass::Validation,
        "authentication_error" => ErrorClass::Auth,
        "permission_error" => ErrorClass::Permission,
        "not_found_error" => ErrorClass::NotFound,
        "billing_error" => ErrorClass::SpendLimit,
        _ => return None,
    })
}

fn gemini(f: &ErrorFields) -> Option<ErrorClass> {
    Some(match f.status.as_str() {
        "RESOURCE_EXHAUSTED" => RATE_LIMITED,
        "INVALID_ARGUMENT" if f.says(&["api key not valid", "api key expired"]) => ErrorClass::Auth,
        "INVALID_ARGUMENT" if f.says(&["exceeds the maximum number of tokens"]) => ErrorClass::ContextLength,
        "INVALID_ARGUMENT" | "OUT_OF_RANGE" => ErrorClass::Validation,
        "FAILED_PRECONDITION" | "PERMISSION_DENIED" => ErrorClass::Permission,
        "UNAUTHENTICATED" => ErrorClass::Auth,
        "NOT_FOUND" => ErrorClass::NotFound,
        "UNAVAILABLE" => ErrorClass::Overloaded,
        "INTERNAL" | "DEADLINE_EXCEEDED" | "UNKNOWN" => ErrorClass::ServerError,
        _ => return None,
    })
}
