//! The label set every per-deployment metric shares. It stands alone so that the metrics
//! registry and the behaviours that keep metrics of their own (adaptive limits) can both
//! use it without importing each other.

use prometheus_client::encoding::EncodeLabelSet;

/// `provider`, `model`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Upstream {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
}

/// `deployment`, `class`: names from the config (`none` before a deployment was chosen or
/// a caller known). Shared names, so that labelling a request's observations copies none.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Route {
    /// The deployment (the last one tried).
    pub deployment: std::sync::Arc<str>,
    /// The caller's traffic class.
    pub class: std::sync::Arc<str>,
}

/// `tenant`, `direction` (`input`, `output`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantTokens {
    /// The tenant (configured).
    pub tenant: std::sync::Arc<str>,
    /// `input` or `output`.
    pub direction: &'static str,
}
