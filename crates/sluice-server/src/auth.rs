//! Gateway keys: `Authorization: Bearer KEY`, `x-api-key: KEY`, (Azure OpenAI clients)
//! `api-key: KEY` or (Google's clients) `x-goog-api-key: KEY`, matched by SHA-256: first against the configured keys, then against the
//! runtime keys (created through the admin API; a lock-free map read, see [`crate::keys`]).

use std::sync::Arc;

use axum::http::HeaderMap;
use sluice_config::hash_key;

use crate::error::GatewayError;
use crate::state::{Caller, Gateway};

/// The caller behind the request's key.
///
/// # Errors
/// [`GatewayError::Unauthorized`] without a key or with an unknown one.
pub fn authenticate(gateway: &Gateway, headers: &HeaderMap) -> Result<Caller, GatewayError> {
    caller_of(gateway, headers).map_err(GatewayError::Unauthorized)
}

/// The caller behind the request's key, or why there is none.
fn caller_of(gateway: &Gateway, headers: &HeaderMap) -> Result<Caller, &'static str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    let key = bearer
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .or_else(|| headers.get("api-key").and_then(|v| v.to_str().ok()))
        .or_else(|| headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or("missing API key: send `Authorization: Bearer KEY`, `x-api-key: KEY`, `api-key: KEY` or `x-goog-api-key: KEY`")?;
    let hash = hash_key(key);
    if let Some(caller) = gateway.callers.get(&hash) {
        return Ok(caller.clone());
    }
    // A runtime key: revoked, expired and tenant-admin keys do not call the API.
    let runtime = gateway.services.runtime_keys.lookup(&hash, gateway.services.clock.unix_millis());
    runtime.and_then(|r| r.caller).ok_or("invalid API key")
}

/// A proxied request's caller, authenticated once before its body is read (by the layer
/// that also gives it its rate-limit headers) and handed on in the request's extensions,
/// with the gateway it was found in: a reload in between cannot change who it is.
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The gateway in force when the request came in.
    pub gateway: Arc<Gateway>,
    caller: Result<Caller, &'static str>,
}

impl Authenticated {
    /// Authenticates the request with `headers` on `gateway`.
    #[must_use]
    pub fn of(gateway: Arc<Gateway>, headers: &HeaderMap) -> Self {
        let caller = caller_of(&gateway, headers);
        Self { gateway, caller }
    }

    /// The caller.
    ///
    /// # Errors
    /// [`GatewayError::Unauthorized`] without a key or with an unknown one.
    pub fn caller(&self) -> Result<&Caller, GatewayError> {
        self.caller.as_ref().map_err(|why| GatewayError::Unauthorized(why))
    }
}
