//! Google's state in the simulator, kept in [`crate::sim::Sim`]: the API keys and issued
//! access tokens, the Vertex project quotas, and the thought signatures verified. The routes in [`crate::google`] read it.

use super::{auth, quota, thinking};

/// Google's state in the simulator: credentials and the Vertex project quotas.
#[derive(Debug, Default)]
pub struct Google {
    /// API keys and issued tokens.
    pub auth: auth::Auth,
    /// Requests per minute per Vertex project and region.
    pub quotas: quota::ProjectQuotas,
    /// Thought signatures that came back verified.
    pub signatures: thinking::Signatures,
}

impl Google {
    /// The state `config` describes.
    #[must_use]
    pub fn new(config: &auth::GoogleConfig) -> Self {
        Self {
            auth: auth::Auth::new(config.clone()),
            quotas: quota::ProjectQuotas::new(config.vertex_rpm),
            signatures: thinking::Signatures::default(),
        }
    }
}
