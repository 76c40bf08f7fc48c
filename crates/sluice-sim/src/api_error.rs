//! The error a simulated provider answers with, before it is put into a flavour's shape,
//! and the words naming a limit in its messages. The shapes' error modules read it;
//! [`crate::errors`] renders it and re-exports it.

use crate::admission::{Dim, Rejection};

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
    /// An injected error (400, 401, 429, 500, 502, 503, 529).
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
