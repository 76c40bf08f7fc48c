//! Google's shapes: the Gemini API's native `models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse` (an `x-goog-api-key` checked), Vertex AI's
//! `projects/{project}/locations/{region}/publishers/{google|anthropic}/models/{model}:…`
//! (a Bearer token this simulator issued at `POST /token`), Claude on Vertex
//! (`:rawPredict` / `:streamRawPredict`, an `anthropic_version` such as
//! `vertex-2023-10-16` in the body, no `model`, no `alt` parameter: the stream is
//! Anthropic's own SSE), and errors in Google's envelope (`RESOURCE_EXHAUSTED` with
//! `RetryInfo` from the shared Gemini 429).

pub mod auth;
mod gemini;
pub mod quota;
pub(crate) mod state;
pub mod thinking;

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::config::Flavor;
use crate::conn::ConnCtl;
use crate::sim::Sim;
pub use state::Google;

/// An error in Google's envelope: `{"error": {"code", "message", "status"}}`.
pub fn error(sim: &Sim, code: u16, message: &str, status: &str) -> Response {
    sim.invalid();
    let body = json!({"error": {"code": code, "message": message, "status": status}});
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    crate::respond::json(sim, Flavor::Gemini, None, status, serde_json::to_vec(&body).unwrap_or_default())
}

/// `{model}:{verb}` split, with whether the verb streams; `None` for an unknown verb.
fn model_verb(rest: &str) -> Option<(&str, &str, bool)> {
    let (model, verb) = rest.rsplit_once(':')?;
    let stream = match verb {
        "generateContent" | "rawPredict" => false,
        "streamGenerateContent" | "streamRawPredict" => true,
        _ => return None,
    };
    Some((model, verb, stream))
}

fn not_found(sim: &Sim, rest: &str) -> Response {
    error(sim, 404, &format!("The requested method {rest} was not found."), "NOT_FOUND")
}

/// `POST /v1beta/models/{model}:generateContent` (and `:streamGenerateContent`; also under
/// `/v1/models/`, the version Google's SDK calls by default).
pub async fn gemini_native(
    State(sim): State<Arc<Sim>>,
    Path(rest): Path<String>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = headers.get("x-goog-api-key").and_then(|v| v.to_str().ok());
    if !sim.google().auth.key_ok(key) {
        return error(&sim, 400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT");
    }
    match model_verb(&rest) {
        Some((model, "generateContent" | "streamGenerateContent", stream)) => {
            gemini::generate(Arc::clone(&sim), model, stream, ctl, &headers, &body).await
        }
        _ => not_found(&sim, &rest),
    }
}

/// `POST /v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{model}:{verb}`.
pub async fn vertex(
    State(sim): State<Arc<Sim>>,
    Path((project, region, publisher, rest)): Path<(String, String, String, String)>,
    RawQuery(query): RawQuery,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if !sim.google().auth.token_ok(token, sim.clock().unix_now().as_secs()) {
        let message = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.";
        return error(&sim, 401, message, "UNAUTHENTICATED");
    }
    if let Err(wait) = sim.google().quotas.take(&project, &region, sim.sim_now()) {
        return project_exhausted(&sim, &project, &region, wait);
    }
    match (publisher.as_str(), model_verb(&rest)) {
        ("google", Some((model, "generateContent" | "streamGenerateContent", stream))) => {
            gemini::generate(Arc::clone(&sim), model, stream, ctl, &headers, &body).await
        }
        ("anthropic", Some((_, "rawPredict" | "streamRawPredict", _))) if has_alt(query.as_deref()) => {
            // Claude's prediction is Anthropic's own body and SSE stream, asked for as
            // Google documents and `AnthropicVertex` sends it: without `alt`
            // (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude).
            error(
                &sim,
                400,
                "Invalid parameter alt: Claude's rawPredict and streamRawPredict take no alt.",
                "INVALID_ARGUMENT",
            )
        }
        ("anthropic", Some((model, "rawPredict" | "streamRawPredict", _))) => match claude_body(&sim, model, &body) {
            Ok(body) => crate::anthropic::messages(State(sim), ctl, headers, body).await,
            Err(response) => *response,
        },
        _ => not_found(&sim, &rest),
    }
}

fn has_alt(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|pair| pair.split('=').next() == Some("alt")))
}

/// Vertex's 429 for a project and region out of quota, with `RetryInfo` (whole seconds,
/// at least 1, in real time).
fn project_exhausted(sim: &Sim, project: &str, region: &str, wait: f64) -> Response {
    let real = crate::wire_time::real_duration(wait, sim.time_scale());
    let delay = crate::wire_time::retry_after_secs(real).max(1);
    let message = format!(
        "Quota exceeded for aiplatform.googleapis.com/generate_content_requests_per_minute_per_project of project {project} in region {region}."
    );
    let body = json!({"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{delay}s")}
    ]}});
    let body = serde_json::to_vec(&body).unwrap_or_default();
    crate::respond::json(sim, Flavor::Gemini, None, StatusCode::TOO_MANY_REQUESTS, body)
}

/// A Vertex Claude body as a messages body: `anthropic_version` required and dropped, the
/// path's model put in; a `model` in the body is refused, as Vertex does.
fn claude_body(sim: &Sim, model: &str, body: &[u8]) -> Result<Bytes, Box<Response>> {
    let refuse = |message: &str| Box::new(error(sim, 400, message, "INVALID_ARGUMENT"));
    let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(body) else {
        return Err(refuse("Invalid JSON payload received."));
    };
    // Vertex documents `vertex-2023-10-16`; Anthropic's SDKs send their API version date.
    let version = map.remove("anthropic_version");
    if version.as_ref().and_then(Value::as_str).is_none_or(|v| v.trim().is_empty()) {
        return Err(refuse("anthropic_version: Field required (e.g. vertex-2023-10-16)"));
    }
    if map.contains_key("model") {
        return Err(refuse("model: Extra inputs are not permitted"));
    }
    map.insert("model".into(), Value::from(model));
    Ok(Bytes::from(serde_json::to_vec(&map).unwrap_or_default()))
}

/// `POST /token`: an access token for a service account's signed JWT assertion.
pub async fn token(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let form = String::from_utf8_lossy(&body);
    let now = sim.clock().unix_now().as_secs();
    match sim.google().auth.grant(&form, now, &sim.request_id()) {
        Ok((token, ttl)) => {
            axum::Json(json!({"access_token": token, "expires_in": ttl, "token_type": "Bearer"})).into_response()
        }
        Err(auth::Refused(why)) => {
            sim.invalid();
            let body = json!({"error": "invalid_grant", "error_description": why});
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        }
    }
}
