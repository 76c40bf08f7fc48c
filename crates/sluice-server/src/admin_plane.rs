//! The admin plane's routes as the gateway serves them: `/metrics` (behind the metrics
//! token when `[admin] metrics_token_env` / `metrics_token_file` sets one) and the mounted
//! [`Surface`](crate::Surface)s (`/admin/*`, `/dashboard`). Served on the admin listener
//! ([`crate::admin_app`]), or beside the API with `[admin] listen = "shared"` ([`crate::app`]).

use axum::Router;
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use http::HeaderMap;
use sluice_config::SecretSource;

use crate::AppState;
use crate::error::{Envelope, ErrorResponse, GatewayError};
use crate::state::BuildError;
use crate::trace::Trace;

/// `/metrics` and every surface's routes, without a fallback (the caller's router has it).
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    let surfaces = state.surfaces.iter().fold(Router::new(), |routes, surface| routes.merge(surface.router(state)));
    Router::new().route("/metrics", get(crate::metrics_text)).merge(surfaces)
}

/// The metrics token's SHA-256, read from its variable or file (trimmed; never logged).
pub(crate) fn read_token(source: &SecretSource) -> Result<[u8; 32], BuildError> {
    let token = match source {
        SecretSource::Env(name) => std::env::var(name)
            .map_err(|_| BuildError::MetricsToken(format!("metrics_token_env names {name}, which is not set")))?,
        SecretSource::File(path) => std::fs::read_to_string(path)
            .map_err(|e| BuildError::MetricsToken(format!("metrics_token_file {path}: {e}")))?,
        other => return Err(BuildError::MetricsToken(format!("unsupported token source {other:?}"))),
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(BuildError::MetricsToken(String::from("the metrics token is empty")));
    }
    Ok(sluice_config::hash_key(token))
}

/// Whether a `/metrics` request may read: no token is set, or it sends
/// `Authorization: Bearer TOKEN`.
pub(crate) fn metrics_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(expected) = &state.metrics_token else { return true };
    let sent = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|token| sluice_config::hash_key(token.trim()));
    // Digests compared: the comparison's time says nothing about the token.
    sent.as_ref() == Some(expected)
}

/// The structured 401 for a `/metrics` request without the token.
pub(crate) fn metrics_refused(headers: &HeaderMap) -> Response {
    let error = GatewayError::Unauthorized("metrics token required: send `Authorization: Bearer TOKEN`");
    ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: Trace::from_headers(headers).id }.into_response()
}
