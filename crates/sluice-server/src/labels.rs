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
