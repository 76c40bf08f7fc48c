//! Error classification: what a failed provider call means for retrying, falling back and
//! deployment health (SPEC §5).
//!
//! The status code decides whether a failure is worth retrying; the body (each provider's
//! error `type`/`code`/`status`, see `providers`) only names the reason more precisely,
//! and is trusted only when it agrees on retryability. The one exception is the billing
//! 429s — OpenAI `insufficient_quota`, Anthropic `enforced_spend_limit_reached` — which
//! look like rate limits but never clear by waiting. A 2xx status with an error body (an
//! error event inside a started stream) is classified by the body alone.
//!
//! Layout: `class` (the classes, phases and provider flavors), `fields` (reading error
//! bodies), `providers` (body → class per provider), `transport` (failures below HTTP).

mod class;
mod fields;
mod providers;
mod transport;

use http::HeaderMap;

use crate::hints::{self, RateLimitHints};
pub use class::{ErrorClass, Phase, ProviderFlavor};
use fields::ErrorFields;
pub use transport::{TransportFailure, classify_transport};

/// Classifies a provider's HTTP error response.
///
/// Hints are read from `headers` and `body` without a wall clock: absolute instants count
/// only when the response has a `Date` header. Callers that already ran
/// [`parse_hints`](crate::parse_hints) use [`classify_with_hints`]. Never panics, whatever
/// the bytes; bodies over [`MAX_HINT_BODY_BYTES`](crate::MAX_HINT_BODY_BYTES) are not read.
///
/// ```
/// use http::HeaderMap;
/// use sluice_provider::{ErrorClass, ProviderFlavor, classify};
///
/// let body = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
/// let class = classify(529, &HeaderMap::new(), body, ProviderFlavor::Anthropic);
/// assert_eq!(class, ErrorClass::Overloaded);
/// assert!(class.retryable());
/// ```
#[must_use]
pub fn classify(status: u16, headers: &HeaderMap, body: &[u8], provider: ProviderFlavor) -> ErrorClass {
    let json = hints::error_json(body);
    let details = json.as_ref().map(hints::gemini_details).unwrap_or_default();
    let fields = json.as_ref().map(ErrorFields::from_json).unwrap_or_default();
    decide(status, &hints::from_parts(headers, &details, None), &fields, provider)
}

/// [`classify`] with hints the caller has already read (with its clock).
#[must_use]
pub fn classify_with_hints(status: u16, hints: &RateLimitHints, body: &[u8], provider: ProviderFlavor) -> ErrorClass {
    let fields = hints::error_json(body).as_ref().map(ErrorFields::from_json).unwrap_or_default();
    decide(status, hints, &fields, provider)
}

fn decide(status: u16, hints: &RateLimitHints, fields: &ErrorFields, provider: ProviderFlavor) -> ErrorClass {
    let named = providers::from_body(provider, fields);
    let class = match (from_status(status, provider), named) {
        (None, named) => named.unwrap_or(ErrorClass::Other),
        (Some(base), Some(named)) if agrees(base, named) => named,
        (Some(base), _) => base,
    };
    match class {
        ErrorClass::RateLimited { .. } => {
            ErrorClass::RateLimited { retry_after: hints.earliest_retry(), daily: hints.daily_quota }
        }
        other => other,
    }
}

/// The body may refine the status's class when both agree on retrying, or to tell a
/// billing stop from a rate limit.
fn agrees(base: ErrorClass, named: ErrorClass) -> bool {
    base.retryable() == named.retryable()
        || matches!((base, named), (ErrorClass::RateLimited { .. }, ErrorClass::SpendLimit))
}

/// The class a status implies on its own; `None` for non-error statuses.
const fn from_status(status: u16, provider: ProviderFlavor) -> Option<ErrorClass> {
    Some(match status {
        400 | 413 | 422 => ErrorClass::Validation,
        401 => ErrorClass::Auth,
        402 => ErrorClass::SpendLimit,
        403 => ErrorClass::Permission,
        404 => ErrorClass::NotFound,
        408 => ErrorClass::ServerError,
        429 => ErrorClass::RateLimited { retry_after: None, daily: false },
        // Ollama answers 503 only when its request queue is full.
        503 if matches!(provider, ProviderFlavor::Ollama) => ErrorClass::Overloaded,
        529 => ErrorClass::Overloaded,
        501 | 505 => ErrorClass::Other,
        500..=599 => ErrorClass::ServerError,
        400..=499 => ErrorClass::Other,
        _ => return None,
    })
}
