//! The provider seam: for each kind of upstream, where a request for an endpoint goes and
//! how it is authenticated. `outbound` asks it; each kind answers in one place, so a new
//! kind is one arm here rather than a condition spread over the request road.
//!
//! | api | URL of `/v1/chat/completions` | key |
//! |---|---|---|
//! | plain (OpenAI, Ollama) | `{base_url}/v1/chat/completions` | `Authorization: Bearer` |
//! | plain (Anthropic) | `{base_url}/v1/messages` | `x-api-key`, `anthropic-version` |
//! | Gemini (OpenAI-compatible) | `{base_url}/v1beta/openai/chat/completions` | `Authorization: Bearer` |
//! | Azure classic | `{base_url}/openai/deployments/{azure_deployment}/chat/completions?api-version=…` | `api-key` or Bearer token file |
//! | Azure v1 | `{base_url}/openai/v1/chat/completions` | `api-key` or Bearer token file |
//! | Gemini native, Vertex AI | see [`google`](super::google) | `x-goog-api-key`; OAuth Bearer |

use axum::http::{HeaderMap, HeaderValue};
use sluice_config::{AzureSurface, ProviderApi, ProviderKind};
use sluice_provider::ProviderFlavor;

use crate::secret::Credential;
use crate::state::Route;

/// The upstream URL of `endpoint` (a proxied path such as `/v1/chat/completions`) on
/// `route`; `stream` picks Google's streaming verb.
pub fn upstream_url(route: &Route, endpoint: &str, stream: bool) -> String {
    let base = &route.base_url;
    // Every proxied path starts with `/v1`; the cloud surfaces put their own prefix there.
    let rest = endpoint.strip_prefix("/v1").unwrap_or(endpoint);
    match &route.api {
        ProviderApi::Plain => format!("{base}{endpoint}"),
        ProviderApi::GeminiOpenAi => format!("{base}/v1beta/openai{rest}"),
        ProviderApi::Azure(AzureSurface::V1) => format!("{base}/openai{endpoint}"),
        ProviderApi::Azure(AzureSurface::Classic { api_version }) => {
            let deployment = route.azure_deployment.as_deref().unwrap_or(&route.model);
            format!("{base}/openai/deployments/{deployment}{rest}?api-version={api_version}")
        }
        ProviderApi::GeminiNative | ProviderApi::Vertex(_) => super::google::url(route, stream).unwrap_or_default(),
    }
}

/// The headers that authenticate a request to `route` and carry its protocol's version:
/// the key (Bearer; Anthropic's `x-api-key`; Azure's `api-key` unless it is a token file's
/// Bearer token), and for Anthropic the client's `anthropic-version` (a default when
/// absent) and `anthropic-beta`.
pub fn auth_headers(route: &Route, client_headers: &HeaderMap) -> Vec<(&'static str, HeaderValue)> {
    let mut headers = Vec::new();
    if let Some(key) = route.key.current() {
        headers.push((key_header(route), key.header().clone()));
    }
    if route.kind == ProviderKind::Anthropic {
        // Vertex takes Claude's version in the body.
        if !matches!(route.api, ProviderApi::Vertex(_)) {
            let version = client_headers.get("anthropic-version").cloned();
            headers.push(("anthropic-version", version.unwrap_or(HeaderValue::from_static("2023-06-01"))));
        }
        if let Some(beta) = client_headers.get("anthropic-beta") {
            headers.push(("anthropic-beta", beta.clone()));
        }
    }
    headers
}

fn key_header(route: &Route) -> &'static str {
    match (&route.api, &route.key) {
        (_, Credential::Refreshed(_) | Credential::Minted(_)) => "authorization",
        (ProviderApi::Azure(_), _) => "api-key",
        (ProviderApi::GeminiNative, _) => "x-goog-api-key",
        _ if route.kind == ProviderKind::Anthropic => "x-api-key",
        _ => "authorization",
    }
}

/// Whose words a provider's errors and retry hints are read in: Azure's and Gemini's
/// differ from OpenAI's though they speak its protocol (Azure's "high demand" 429 is an
/// overload, not a quota; Gemini's quota errors are `RESOURCE_EXHAUSTED`).
#[must_use]
pub fn error_flavor(kind: ProviderKind, api: &ProviderApi) -> ProviderFlavor {
    match (api, kind) {
        (ProviderApi::Azure(_), _) => ProviderFlavor::Azure,
        (ProviderApi::GeminiOpenAi | ProviderApi::GeminiNative | ProviderApi::Vertex(_), _) => ProviderFlavor::Gemini,
        (ProviderApi::Plain, ProviderKind::OpenAi) => ProviderFlavor::OpenAi,
        (ProviderApi::Plain, ProviderKind::Anthropic) => ProviderFlavor::Anthropic,
        (ProviderApi::Plain, ProviderKind::Ollama) => ProviderFlavor::Ollama,
    }
}

#[cfg(test)]
mod tests {
    use sluice_provider::{ErrorClass, classify_with_hints, parse_hints};

    use super::*;

    #[test]
    fn cloud_errors_are_read_in_their_providers_words() {
        let bad_key = br#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#;
        let hints = parse_hints(&HeaderMap::new(), Some(bad_key), None);
        let flavor = error_flavor(ProviderKind::OpenAi, &ProviderApi::GeminiOpenAi);
        assert_eq!(classify_with_hints(400, &hints, bad_key, flavor), ErrorClass::Auth, "not the client's bad request");
        let azure = ProviderApi::Azure(AzureSurface::V1);
        assert_eq!(error_flavor(ProviderKind::OpenAi, &azure), ProviderFlavor::Azure);
        assert_eq!(error_flavor(ProviderKind::Anthropic, &ProviderApi::Plain), ProviderFlavor::Anthropic);
    }
}
