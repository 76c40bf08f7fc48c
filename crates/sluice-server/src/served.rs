//! Whether a model profile serves an OpenAI endpoint family beyond chat, Responses and
//! embeddings (its `passthrough` list): asked by the request road (legacy completions) and
//! by the passthrough handler (the others), so it imports neither.

use sluice_config::{Passthrough, ProviderApi, ProviderKind};

use crate::error::{GatewayError, shown_path};
use crate::state::{Gateway, Profile, Route};

/// The primary deployment of `profile`, when it serves `family`.
///
/// # Errors
/// 404 `endpoint_not_served` when the profile does not list `family`, or its deployment
/// does not speak OpenAI's API on the wire.
pub fn allowed<'g>(
    gateway: &'g Gateway,
    profile: &Profile,
    family: Passthrough,
    path: &str,
) -> Result<&'g Route, GatewayError> {
    let route = &gateway.deployments[profile.deployment];
    let why = if !profile.passthrough.contains(&family) {
        format!("for model `{}`: its profile does not list \"{}\" in passthrough", profile.name, family.name())
    } else if route.target.kind != ProviderKind::OpenAi
        || matches!(route.target.api, ProviderApi::GeminiNative | ProviderApi::Vertex(_))
    {
        // Gemini's native API and Vertex speak OpenAI's chat alone, through a translation.
        format!("for model `{}`: its deployment `{}` is not an OpenAI one", profile.name, route.name)
    } else {
        return Ok(route);
    };
    Err(GatewayError::EndpointNotServed { path: shown_path(path), why })
}
