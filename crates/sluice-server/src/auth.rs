//! Gateway keys: `Authorization: Bearer KEY` or `x-api-key: KEY`, matched by SHA-256.

use axum::http::HeaderMap;
use sluice_config::hash_key;

use crate::error::GatewayError;
use crate::state::{Caller, Gateway};

/// The caller behind the request's key.
///
/// # Errors
/// [`GatewayError::Unauthorized`] without a key or with an unknown one.
pub fn authenticate<'g>(gateway: &'g Gateway, headers: &HeaderMap) -> Result<&'g Caller, GatewayError> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    let key = bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or(GatewayError::Unauthorized("missing API key: send `Authorization: Bearer KEY` or `x-api-key: KEY`"))?;
    gateway.callers.get(&hash_key(key)).ok_or(GatewayError::Unauthorized("invalid API key"))
}
