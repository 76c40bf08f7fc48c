//! Errors a simulated provider answers with, rendered in each flavour's real JSON shape.

use serde_json::Value;

use crate::admission::{Dim, Rejection};
use crate::config::Flavor;

/// An error response, before it is put into a flavour's shape.
#[derive(Debug, Clone)]
pub enum ApiError {
    /// The body is not valid JSON (400).
    BadJson,
    /// A required field is missing or invalid (400).
    Invalid {
        /// What is wrong.
        message: String,
        /// The offending parameter.
        param: Option<&'static str>,
    },
    /// The model is not served on this API (404).
    NotFound(String),
    /// A rate limit refused the request (429).
    Limited {
        /// The model.
        model: String,
        /// The refusal.
        rejection: Rejection,
        /// Real seconds to wait, rounded up.
        retry_after: u64,
    },
    /// Too many requests in flight (429 or 529).
    Concurrency {
        /// The model.
        model: String,
        /// 429 or 529.
        status: u16,
    },
    /// An injected server error (500, 502, 503, 529).
    Fault(u16),
}

impl ApiError {
    /// The HTTP status.
    #[must_use]
    pub fn status(&self) -> u16 {
        match self {
            Self::BadJson | Self::Invalid { .. } => 400,
            Self::NotFound(_) => 404,
            Self::Limited { .. } => 429,
            Self::Concurrency { status, .. } => *status,
            Self::Fault(status) => *status,
        }
    }

    /// The JSON body in `flavor`'s shape.
    #[must_use]
    pub fn body(&self, flavor: Flavor, request_id: &str) -> Value {
        match flavor {
            // Bedrock's answers are built in Anthropic's shape, then turned into Bedrock's.
            Flavor::Anthropic | Flavor::Bedrock => crate::anthropic::errors::body(self, request_id),
            Flavor::Azure if self.status() == 429 => crate::openai::errors::azure_429(self),
            Flavor::Azure if self.status() == 401 => crate::openai::errors::azure_401(),
            Flavor::Gemini if self.status() == 429 => crate::openai::errors::gemini_429(self),
            _ => crate::openai::errors::body(self),
        }
    }
}

/// Words naming a dimension in error messages: (`tokens`, `TPM`, `min`).
#[must_use]
pub fn dim_words(dim: Dim) -> (&'static str, &'static str, &'static str) {
    match dim {
        Dim::Rpm => ("requests", "RPM", "min"),
        Dim::Tpm => ("tokens", "TPM", "min"),
        Dim::Itpm => ("input tokens", "ITPM", "min"),
        Dim::Otpm => ("output tokens", "OTPM", "min"),
        Dim::Rpd => ("requests", "RPD", "day"),
        Dim::Tpd => ("tokens", "TPD", "day"),
    }
}
