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
//! Layout: `fields` (reading error bodies), `providers` (body → class per provider),
//! `transport` (failures below HTTP).

mod fields;
mod providers;
mod transport;

use std::time::Duration;

use http::HeaderMap;

use crate::hints::{self, RateLimitHints};
use fields::ErrorFields;
pub use transport::{Phase, TransportFailure, classify_transport};

/// Which provider's error conventions a response follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderFlavor {
    /// OpenAI API.
    OpenAi,
    /// Azure OpenAI: OpenAI shapes, plus Azure codes and `retry-after-ms`.
    Azure,
    /// Anthropic Messages API.
    Anthropic,
    /// Google Gemini API (`google.rpc.Status` errors).
    Gemini,
    /// Ollama, natively or through its OpenAI-compatible endpoint.
    Ollama,
}

impl ProviderFlavor {
    /// A stable lower-case name, fit for metric labels.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Azure => "azure",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Ollama => "ollama",
        }
    }
}

/// Why a provider call failed, as far as retrying and routing care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Our quota at the provider is spent for now (429). `retry_after` is the provider's
    /// hint, or the reset of an exhausted window; `daily` means a per-day quota tripped.
    RateLimited {
        /// Earliest time a retry can pass, when the provider said.
        retry_after: Option<Duration>,
        /// A per-day quota was exceeded: waiting seconds will not help.
        daily: bool,
    },
    /// The provider is out of capacity for everyone (Anthropic 529, Azure "high demand",
    /// Gemini `UNAVAILABLE`, Ollama's full queue): retry, and count against its health.
    Overloaded,
    /// A 5xx (500, 502, 503, 504 and gateway 52x) or a 408.
    ServerError,
    /// A timeout below HTTP; see [`Phase`].
    Timeout {
        /// How far the request had got.
        phase: Phase,
    },
    /// A refused, reset or closed connection; see [`Phase`].
    ConnectionReset {
        /// How far the request had got.
        phase: Phase,
    },
    /// The request is malformed or unacceptable as sent (400, 413, 422).
    Validation,
    /// The prompt (plus `max_tokens`) does not fit the model's context: a fallback to a
    /// longer-context model may help, a retry will not.
    ContextLength,
    /// Bad or missing credentials (401).
    Auth,
    /// Valid credentials without access to this model, region or feature (403).
    Permission,
    /// Unknown model, deployment or endpoint (404).
    NotFound,
    /// The provider's content policy refused the request.
    SafetyRefusal,
    /// A billing limit (OpenAI `insufficient_quota`, Anthropic spend cap, 402): 429-shaped
    /// at times, but nothing clears it until someone pays or raises the cap.
    SpendLimit,
    /// Anything else (including 501, 505, 409); not retried.
    Other,
}

impl ErrorClass {
    /// Whether retrying the same operation is worthwhile and safe without knowing more.
    ///
    /// True for rate limits (except daily quotas), overload, server errors and failures
    /// that never reached the provider. False for [`uncertain`](Self::uncertain) failures —
    /// see [`may_retry`](Self::may_retry) — and for everything deterministic.
    #[must_use]
    pub const fn retryable(&self) -> bool {
        match self {
            Self::RateLimited { daily, .. } => !*daily,
            Self::Overloaded | Self::ServerError => true,
            Self::Timeout { phase } | Self::ConnectionReset { phase } => matches!(phase, Phase::Connect),
            _ => false,
        }
    }

    /// Whether the provider may or may not have processed (and billed) the request: a
    /// reset or timeout after sending, before the response head.
    #[must_use]
    pub const fn uncertain(&self) -> bool {
        matches!(
            self,
            Self::Timeout { phase: Phase::BeforeHeaders } | Self::ConnectionReset { phase: Phase::BeforeHeaders }
        )
    }

    /// Whether a retry is allowed for an operation that is (`idempotent = true`: it carries
    /// an idempotency key and the operation log does not show it completed) or is not
    /// idempotent.
    #[must_use]
    pub const fn may_retry(&self, idempotent: bool) -> bool {
        self.retryable() || (idempotent && self.uncertain())
    }

    /// The provider-side wait hint of a rate limit.
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A stable lower-case name, fit for metric labels.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::Overloaded => "overloaded",
            Self::ServerError => "server_error",
            Self::Timeout { .. } => "timeout",
            Self::ConnectionReset { .. } => "connection_reset",
            Self::Validation => "validation",
            Self::ContextLength => "context_length",
            Self::Auth => "auth",
            Self::Permission => "permission",
            Self::NotFound => "not_found",
            Self::SafetyRefusal => "safety_refusal",
            Self::SpendLimit => "spend_limit",
            Self::Other => "other",
        }
    }
}

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
