//! The error of a configuration the simulator refuses. It sits below [`crate::config`],
//! so the latency and fault settings that check themselves can return it; [`crate::validate`]
//! re-exports it.

/// A configuration the simulator refuses, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid simulator config: {0}")]
pub struct ConfigError(pub String);
