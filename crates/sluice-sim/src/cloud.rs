//! The cloud URL surfaces over the OpenAI shape: Gemini's OpenAI-compatible
//! `/v1beta/openai/chat/completions`, and Azure OpenAI's classic
//! `/openai/deployments/{deployment}/chat/completions?api-version=…` and v1
//! `/openai/v1/chat/completions` (and `embeddings` on both). Each serves only models of its flavour (and
//! `/v1/chat/completions` no Gemini model); Azure's require
//! the `api-key` header (or an Entra ID `Authorization: Bearer` token) and answer 401 in
//! Azure's words without one.
//!
//! Azure serves the Responses API without a deployment in the path, the deployment named by
//! the body's `model`: `POST /openai/responses?api-version=…` and `/openai/v1/responses`,
//! and `GET`/`DELETE /openai/responses/{id}`, `POST …/{id}/cancel`, `GET
//! …/{id}/input_items` under both prefixes
//! (<https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/responses>).
//! `/openai/deployments/{deployment}/responses` is no Azure path: 404.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;

use crate::config::{Flavor, Shape};
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::sim::Sim;

/// `POST /v1/chat/completions`: any OpenAI-shaped model but a Gemini one (Gemini has no
/// such path: a client that appends `/v1/…` to its base URL meets a 404, as it does there).
pub async fn openai_chat(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = model_name(&body);
    if let Some(name) = name.filter(|n| sim.model(n, Shape::Openai).is_some_and(|m| m.flavor == Flavor::Gemini)) {
        return crate::openai::invalid(&sim, &ApiError::NotFound(name));
    }
    if has_extra_body(&body) {
        // OpenAI refuses a parameter it does not know; `extra_body` is the one only
        // Google's compatibility layer reads, which a gateway must not pass on.
        let message = "Unrecognized request argument supplied: extra_body".to_owned();
        return crate::openai::invalid(&sim, &ApiError::Invalid { message, param: Some("extra_body") });
    }
    crate::openai::chat(State(sim), ctl, headers, body).await
}

/// Whether a chat body carries a top-level `extra_body`.
fn has_extra_body(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|v| v.get("extra_body").is_some())
}

/// `POST /v1beta/openai/chat/completions`: a Gemini-flavoured model's chat.
pub async fn gemini_chat(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(response) = not_served_as(&sim, &body, Flavor::Gemini) {
        return response;
    }
    crate::openai::chat(State(sim), ctl, headers, body).await
}

/// `/openai/v1/{chat/completions|embeddings|responses}` (`POST`) and
/// `/openai/v1/responses/{id}…`: an Azure-flavoured model's answer, the model (the
/// deployment name) in the body.
pub async fn azure_v1(
    State(sim): State<Arc<Sim>>,
    method: Method,
    Path(endpoint): Path<String>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(response) = azure_refusal(&sim, &headers) {
        return response;
    }
    if let Some(rest) = endpoint.strip_prefix("responses/") {
        return stored(sim, &method, rest).await;
    }
    if method != Method::POST {
        return crate::openai::invalid(&sim, &ApiError::NotFound(endpoint));
    }
    if let Some(response) = not_served_as(&sim, &body, Flavor::Azure) {
        return response;
    }
    if endpoint == "responses" {
        return crate::openai::responses::responses(State(sim), ctl, headers, body).await;
    }
    azure_endpoint(sim, &endpoint, ctl, headers, body).await
}

/// `POST /openai/responses?api-version=…`: a response of the Azure deployment the body's
/// `model` names.
pub async fn azure_responses(
    State(sim): State<Arc<Sim>>,
    Query(query): Query<HashMap<String, String>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let refused = azure_refusal(&sim, &headers)
        .or_else(|| unversioned(&sim, &query))
        .or_else(|| not_served_as(&sim, &body, Flavor::Azure));
    match refused {
        Some(response) => response,
        None => crate::openai::responses::responses(State(sim), ctl, headers, body).await,
    }
}

/// `GET`/`DELETE /openai/responses/{id}?api-version=…`, `POST …/{id}/cancel`, `GET
/// …/{id}/input_items`: a stored response.
pub async fn azure_response(
    State(sim): State<Arc<Sim>>,
    method: Method,
    Path(rest): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    match azure_refusal(&sim, &headers).or_else(|| unversioned(&sim, &query)) {
        Some(response) => response,
        None => stored(sim, &method, &rest).await,
    }
}

/// The stored-response call `rest` (`{id}`, `{id}/cancel`, `{id}/input_items`) names.
async fn stored(sim: Arc<Sim>, method: &Method, rest: &str) -> Response {
    use crate::openai::responses_store as store;
    let (id, op) = rest.split_once('/').unwrap_or((rest, ""));
    let id = Path(id.to_owned());
    match (method.as_str(), op) {
        ("GET", "") => store::retrieve(State(sim), id).await,
        ("DELETE", "") => store::delete(State(sim), id).await,
        ("POST", "cancel") => store::cancel(State(sim), id).await,
        ("GET", "input_items") => store::items(State(sim), id).await,
        _ => crate::openai::invalid(&sim, &ApiError::NotFound(format!("responses/{rest}"))),
    }
}

/// Azure's 400 for a classic-surface call without `api-version`.
fn unversioned(sim: &Sim, query: &HashMap<String, String>) -> Option<Response> {
    if query.get("api-version").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    let message = "The api-version query parameter (?api-version=) is required for all requests.".to_owned();
    Some(crate::openai::invalid(sim, &ApiError::Invalid { message, param: Some("api-version") }))
}

/// `POST /openai/deployments/{deployment}/{chat/completions|embeddings}?api-version=…`: the
/// deployment in the path names the model (a body's `model` is ignored, as Azure does).
pub async fn azure_classic(
    State(sim): State<Arc<Sim>>,
    Path((deployment, endpoint)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match azure_classic_body(&sim, deployment, &query, &headers, &body) {
        Ok(body) => azure_endpoint(sim, &endpoint, ctl, headers, body).await,
        Err(refusal) => *refusal,
    }
}

/// The OpenAI-shaped handler of an Azure endpoint; 404 for one the simulator lacks (and
/// for `responses` under a deployment path, which Azure does not serve).
async fn azure_endpoint(
    sim: Arc<Sim>,
    endpoint: &str,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match endpoint {
        "chat/completions" => crate::openai::chat(State(sim), ctl, headers, body).await,
        "embeddings" => crate::openai::embeddings::embeddings(State(sim), ctl, headers, body).await,
        other => crate::openai::invalid(&sim, &ApiError::NotFound(other.to_owned())),
    }
}

/// The body a classic-path request is served with (its `model` the path's deployment), or
/// Azure's refusal: no key (401), no `api-version` (400), not an Azure model (404).
fn azure_classic_body(
    sim: &Sim,
    deployment: String,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Bytes, Box<Response>> {
    if let Some(response) = azure_refusal(sim, headers) {
        return Err(Box::new(response));
    }
    if let Some(response) = unversioned(sim, query) {
        return Err(Box::new(response));
    }
    let Ok(mut request) = serde_json::from_slice::<Value>(body) else {
        return Err(Box::new(crate::openai::invalid(sim, &ApiError::BadJson)));
    };
    if let Some(object) = request.as_object_mut() {
        object.insert("model".into(), Value::String(deployment));
    }
    let body = Bytes::from(serde_json::to_vec(&request).unwrap_or_default());
    match not_served_as(sim, &body, Flavor::Azure) {
        Some(response) => Err(Box::new(response)),
        None => Ok(body),
    }
}

/// A non-empty `api-key` (not a Bearer token), or an `Authorization: Bearer` token; else
/// Azure's 401.
fn azure_refusal(sim: &Sim, headers: &HeaderMap) -> Option<Response> {
    let present = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    // A Bearer token sent as the `api-key` is no key: Azure refuses it as invalid.
    let key = present("api-key").filter(|k| !k.is_empty() && !k.starts_with("Bearer "));
    let token = present("authorization").and_then(|v| v.strip_prefix("Bearer ")).filter(|t| !t.trim().is_empty());
    if key.is_some() || token.is_some() {
        return None;
    }
    sim.invalid();
    Some(crate::respond::error(sim, Flavor::Azure, None, &ApiError::Fault(401)))
}

/// A 404 (as for an unknown model) when the body's model is not one of `flavor`'s.
fn not_served_as(sim: &Sim, body: &[u8], flavor: Flavor) -> Option<Response> {
    let name = model_name(body)?;
    let model = sim.model(&name, Shape::Openai)?;
    (model.flavor != flavor).then(|| crate::openai::invalid(sim, &ApiError::NotFound(name)))
}

fn model_name(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(body).ok().and_then(|v| v.get("model")?.as_str().map(str::to_owned))
}
