//! Routes: the provider APIs plus the control endpoints (`/_stats`, `/_reset`, `/_limits`,
//! `/_faults`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::config::{FaultConfig, Limits, Shape};
use crate::sim::Sim;

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The simulator's routes over shared state.
pub fn router(sim: Arc<Sim>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(crate::cloud::openai_chat))
        .route("/v1/responses", post(crate::openai::responses::responses))
        .route(
            "/v1/responses/{id}",
            get(crate::openai::responses_store::retrieve).delete(crate::openai::responses_store::delete),
        )
        .route("/v1/responses/{id}/cancel", post(crate::openai::responses_store::cancel))
        .route("/v1/responses/{id}/input_items", get(crate::openai::responses_store::items))
        .route("/v1/conversations", post(crate::openai::conversations::create))
        .route(
            "/v1/conversations/{id}",
            get(crate::openai::conversations::retrieve).delete(crate::openai::conversations::delete),
        )
        .route("/v1/conversations/{id}/items", get(crate::openai::conversations::items))
        .route("/v1/embeddings", post(crate::openai::embeddings::embeddings))
        .route("/v1/completions", post(crate::openai::completions::completions))
        .route("/v1/moderations", post(crate::openai::completions::moderations))
        .route("/v1/messages", post(crate::bedrock::anthropic_messages))
        .route("/model/{model}/{action}", post(crate::bedrock::converse))
        .route("/v1beta/openai/chat/completions", post(crate::cloud::gemini_chat))
        .route("/v1beta/models/{*rest}", post(crate::google::gemini_native))
        .route("/v1/models/{*rest}", post(crate::google::gemini_native))
        .route(
            "/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{*rest}",
            post(crate::google::vertex),
        )
        .route("/token", post(crate::google::token))
        .route(
            "/openai/v1/{*endpoint}",
            post(crate::cloud::azure_v1).get(crate::cloud::azure_v1).delete(crate::cloud::azure_v1),
        )
        .route("/openai/responses", post(crate::cloud::azure_responses))
        .route(
            "/openai/responses/{*rest}",
            get(crate::cloud::azure_response).post(crate::cloud::azure_response).delete(crate::cloud::azure_response),
        )
        .route("/openai/deployments/{deployment}/{*endpoint}", post(crate::cloud::azure_classic))
        .route("/v1/models", get(models))
        .route("/_stats", get(stats))
        .route("/_reset", post(reset))
        .route("/_limits", get(limits).post(set_limits))
        .route("/_faults", get(faults).post(set_faults))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                Json(json!({"error": {"message": "no such route", "type": "invalid_request_error"}})),
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(sim)
}

/// `GET /v1/models`: the OpenAI list, or Anthropic's when `anthropic-version` is sent.
async fn models(State(sim): State<Arc<Sim>>, headers: HeaderMap) -> Response {
    let created = sim.clock().unix_origin().as_secs();
    if headers.contains_key("anthropic-version") {
        let data: Vec<_> = sim
            .models()
            .into_iter()
            .filter(|m| m.config.shape == Shape::Anthropic)
            .map(|m| json!({"type": "model", "id": m.config.name, "display_name": m.config.name, "created_at": crate::wire_time::rfc3339(sim.clock().unix_origin())}))
            .collect();
        let first = data.first().and_then(|m| m.get("id").cloned());
        let last = data.last().and_then(|m| m.get("id").cloned());
        return Json(json!({"data": data, "has_more": false, "first_id": first, "last_id": last})).into_response();
    }
    let data: Vec<_> = sim
        .models()
        .into_iter()
        .map(|m| json!({"id": m.config.name, "object": "model", "created": created, "owned_by": "sluice-sim"}))
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

/// The stats, and the Gemini thought signatures that came back and verified.
async fn stats(State(sim): State<Arc<Sim>>) -> Response {
    let mut body = serde_json::to_value(sim.stats()).unwrap_or_default();
    if let Some(body) = body.as_object_mut() {
        body.insert("thought_signatures_verified".into(), sim.google().signatures.verified().into());
    }
    Json(body).into_response()
}

async fn reset(State(sim): State<Arc<Sim>>) -> Response {
    sim.reset();
    Json(json!({"reset": true})).into_response()
}

async fn limits(State(sim): State<Arc<Sim>>) -> Response {
    let all: BTreeMap<String, Limits> = sim.limits().into_iter().collect();
    Json(all).into_response()
}

/// Body of `POST /_limits`: the model and its new limits (absent limits become unlimited).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetLimits {
    model: String,
    limits: Limits,
}

async fn set_limits(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let request: SetLimits = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, Json(json!({"error": error.to_string()}))).into_response(),
    };
    match sim.set_limits(&request.model, &request.limits) {
        Ok(()) => limits(State(sim)).await,
        Err(error) => (StatusCode::BAD_REQUEST, Json(json!({"error": error.to_string()}))).into_response(),
    }
}

async fn faults(State(sim): State<Arc<Sim>>) -> Response {
    let all: BTreeMap<String, FaultConfig> = sim.faults().into_iter().collect();
    Json(all).into_response()
}

/// Body of `POST /_faults`: the model and its new fault rates (absent rates become 0).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetFaults {
    model: String,
    faults: FaultConfig,
}

async fn set_faults(State(sim): State<Arc<Sim>>, body: axum::body::Bytes) -> Response {
    let request: SetFaults = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, Json(json!({"error": error.to_string()}))).into_response(),
    };
    match sim.set_faults(&request.model, &request.faults) {
        Ok(()) => faults(State(sim)).await,
        Err(error) => (StatusCode::BAD_REQUEST, Json(json!({"error": error.to_string()}))).into_response(),
    }
}
