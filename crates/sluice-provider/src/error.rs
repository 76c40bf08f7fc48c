//! Error types of the protocol layer.

use std::fmt;

/// Why a client request was refused before anything was sent upstream (an HTTP 400).
///
/// `message` is short human text; it never echoes the (possibly huge) offending input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    /// The offending field as a path, e.g. `messages[2].content` or `max_tokens`;
    /// `None` when the body as a whole is at fault (not JSON, not an object, too deep).
    pub param: Option<String>,
    /// What is wrong, for the client.
    pub message: String,
    /// The class of problem, for mapping to an error `type`/`code` in the response body.
    pub code: RequestErrorCode,
}

/// Class of a [`RequestError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestErrorCode {
    /// The body is not valid JSON (or nests deeper than serde_json's limit of 128).
    InvalidJson,
    /// A field has the wrong JSON type.
    InvalidType,
    /// A required field is absent (or `null`).
    MissingField,
    /// A field has the right type but an unacceptable value.
    InvalidValue,
}

impl RequestErrorCode {
    /// A stable snake_case name, e.g. for an error body's `code`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidType => "invalid_type",
            Self::MissingField => "missing_field",
            Self::InvalidValue => "invalid_value",
        }
    }
}

impl fmt::Display for RequestErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RequestError {
    pub(crate) fn new(code: RequestErrorCode, param: Option<String>, message: String) -> Self {
        Self { param, message, code }
    }

    pub(crate) fn missing(param: impl Into<String>) -> Self {
        let param = param.into();
        let message = format!("missing required parameter '{param}'");
        Self::new(RequestErrorCode::MissingField, Some(param), message)
    }

    pub(crate) fn wrong_type(param: impl Into<String>, expected: &str) -> Self {
        let param = param.into();
        let message = format!("'{param}' must be {expected}");
        Self::new(RequestErrorCode::InvalidType, Some(param), message)
    }

    pub(crate) fn invalid(param: impl Into<String>, why: &str) -> Self {
        let param = param.into();
        let message = format!("'{param}' {why}");
        Self::new(RequestErrorCode::InvalidValue, Some(param), message)
    }
}

/// The tokenizer tables could not be built (a broken build of the embedded BPE files).
#[derive(Debug, thiserror::Error)]
#[error("cannot load the {encoding} tokenizer: {reason}")]
pub struct EstimatorError {
    /// Which encoding failed, e.g. `o200k_base`.
    pub encoding: &'static str,
    /// The loader's error text.
    pub reason: String,
}
