//! What a failure is, as retrying and routing see it: its class ([`ErrorClass`]), how far
//! the request had got when the connection failed ([`Phase`]), and whose error conventions
//! the response follows ([`ProviderFlavor`]). Below the status, body and transport readers,
//! which all produce an [`ErrorClass`].

use std::time::Duration;

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

/// How far the request had got when the connection failed or timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Connecting (DNS, TCP, TLS): nothing was sent.
    Connect,
    /// Sent, waiting for the response head.
    BeforeHeaders,
    /// Response head received; the body or stream was under way.
    Streaming,
}

impl Phase {
    /// A stable lower-case name, fit for metric labels.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Connect => "connect",
            Self::BeforeHeaders => "before_headers",
            Self::Streaming => "streaming",
        }
    }
}
