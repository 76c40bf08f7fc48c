//! A deployment as the provider seam sees it: where it is, what it speaks, how its
//! requests are addressed and authenticated.

use std::sync::Arc;

use sluice_config::{ProviderApi, ProviderKind};

use crate::secret::Credential;

/// Where a deployment is and how it is reached.
#[derive(Debug)]
pub struct Target {
    /// The deployment's name (in logs; never sent).
    pub name: Arc<str>,
    /// Its protocol.
    pub kind: ProviderKind,
    /// Base URL.
    pub base_url: String,
    /// Model name sent upstream.
    pub model: String,
    /// The key or token, if the provider needs one.
    pub key: Credential,
    /// How its upstream URLs are built and its key presented.
    pub api: ProviderApi,
    /// On Azure, the deployment name in the classic URL.
    pub azure_deployment: Option<String>,
}

impl Target {
    /// The `model` its request bodies name: on Azure the deployment name, which the v1
    /// surface and the Responses API read the deployment from (as the `AzureOpenAI` client
    /// sends it; the classic deployment paths ignore it), elsewhere the model.
    #[must_use]
    pub fn body_model(&self) -> &str {
        match (&self.api, &self.azure_deployment) {
            (ProviderApi::Azure(_), Some(deployment)) => deployment,
            _ => &self.model,
        }
    }
}
