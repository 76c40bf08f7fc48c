//! The provider seam: for each kind of upstream, where a request for an endpoint goes and
//! how it is authenticated. `outbound` asks it; each kind answers in one place, so a new
//! kind (Azure's deployment URLs, Gemini's OpenAI-compatible path) is one arm here rather
//! than a condition spread over the request road.

use axum::http::{HeaderMap, HeaderValue};
use sluice_config::ProviderKind;

use crate::state::Route;

/// The upstream URL of `endpoint` (a proxied path such as `/v1/chat/completions`) on `route`.
pub fn upstream_url(route: &Route, endpoint: &str) -> String {
    format!("{}{endpoint}", route.base_url)
}

/// The headers that authenticate a request to `route` and carry its protocol's version:
/// the key (Bearer, or Anthropic's `x-api-key`), and for Anthropic the client's
/// `anthropic-version` (a default when absent) and `anthropic-beta`.
pub fn auth_headers(route: &Route, client_headers: &HeaderMap) -> Vec<(&'static str, HeaderValue)> {
    let mut headers = Vec::new();
    if let Some(key) = &route.key {
        let name = if route.kind == ProviderKind::Anthropic { "x-api-key" } else { "authorization" };
        headers.push((name, key.header().clone()));
    }
    if route.kind == ProviderKind::Anthropic {
        let version = client_headers.get("anthropic-version").cloned();
        headers.push(("anthropic-version", version.unwrap_or(HeaderValue::from_static("2023-06-01"))));
        if let Some(beta) = client_headers.get("anthropic-beta") {
            headers.push(("anthropic-beta", beta.clone()));
        }
    }
    headers
}
