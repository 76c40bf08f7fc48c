//! Why a request or response could not be translated.

use crate::protocol::Protocol;

/// A translation that cannot be done faithfully.
///
/// For requests, the gateway treats any error as "this request cannot fall back to the other
/// provider" and keeps it on its own protocol's deployments. For responses (which arrive
/// after the provider did the work) an error means the upstream body was not what its
/// protocol promises.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// The request uses a feature the target protocol has no counterpart for.
    #[error("'{field}' cannot be translated to {target}: {reason}")]
    Unsupported {
        /// The offending field as a path, e.g. `n` or `messages[1].content[0].type`.
        field: String,
        /// The protocol the translation was aiming at.
        target: Protocol,
        /// Why, for logs and the client.
        reason: &'static str,
    },
    /// The input does not have the shape its protocol requires.
    #[error("'{field}' {reason}")]
    Invalid {
        /// The offending field as a path (`body` for the whole document).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The request was parsed for another protocol than the function translates from.
    #[error("expected a {expected} request, got {found}")]
    WrongProtocol {
        /// The protocol the function translates from.
        expected: Protocol,
        /// The protocol of the request given.
        found: Protocol,
    },
}

impl TranslateError {
    pub(crate) fn unsupported(field: impl Into<String>, target: Protocol, reason: &'static str) -> Self {
        Self::Unsupported { field: field.into(), target, reason }
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid { field: field.into(), reason: reason.into() }
    }

    /// The field path the error is about, if any.
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Unsupported { field, .. } | Self::Invalid { field, .. } => Some(field),
            Self::WrongProtocol { .. } => None,
        }
    }
}
