//! The conversations the simulated provider keeps, as OpenAI's Conversations API does:
//! `POST /v1/conversations`, `GET` and `DELETE /v1/conversations/{id}`, and
//! `GET /v1/conversations/{id}/items`. A response created with `conversation` reads the
//! conversation's context as input and adds its own input items and tokens to it.
//! OpenAI has no endpoint listing conversations; neither does the simulator. The kept
//! conversations themselves are in `conversations_kept`, below the shared state.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

pub use super::conversations_kept::StoredConversations;
use crate::config::Flavor;
use crate::errors::ApiError;
use crate::sim::Sim;

/// The conversation a Responses request names: `"conv_…"` or `{"id": "conv_…"}`.
#[must_use]
pub fn named(conversation: Option<&Value>) -> Option<&str> {
    let conversation = conversation?;
    conversation.as_str().or_else(|| conversation.get("id")?.as_str())
}

/// The error for a conversation that does not exist.
#[must_use]
pub fn missing(id: &str) -> ApiError {
    ApiError::Invalid { message: format!("Conversation with id '{id}' not found."), param: Some("conversation") }
}

fn not_found(sim: &Sim, id: &str) -> Response {
    let mut response = super::invalid(sim, &missing(id));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

fn ok(sim: &Sim, body: &Value) -> Response {
    crate::respond::json(sim, Flavor::Openai, None, StatusCode::OK, serde_json::to_vec(body).unwrap_or_default())
}

/// `POST /v1/conversations` (`items` and `metadata` optional).
pub async fn create(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let body: Value = match body.is_empty() {
        true => json!({}),
        false => match serde_json::from_slice(&body) {
            Ok(value @ Value::Object(_)) => value,
            _ => return super::invalid(&sim, &ApiError::BadJson),
        },
    };
    let id = format!("conv_{}", sim.request_id().trim_start_matches("req_"));
    let created = sim.clock().unix_now().as_secs();
    let metadata = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let object = json!({"id": id, "object": "conversation", "created_at": created, "metadata": metadata});
    let items = super::responses_store::input_items(body.get("items"), &id);
    sim.conversations.create(&id, object.clone(), items);
    ok(&sim, &object)
}

/// `GET /v1/conversations/{id}`.
pub async fn retrieve(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    let object = sim.conversations.kept.lock().get(&id).map(|k| k.object.clone());
    object.map_or_else(|| not_found(&sim, &id), |object| ok(&sim, &object))
}

/// `DELETE /v1/conversations/{id}`.
pub async fn delete(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    if sim.conversations.kept.lock().remove(&id).is_none() {
        return not_found(&sim, &id);
    }
    ok(&sim, &json!({"id": id, "object": "conversation.deleted", "deleted": true}))
}

/// `GET /v1/conversations/{id}/items` (one page, oldest first as OpenAI's default).
pub async fn items(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    let Some(data) = sim.conversations.kept.lock().get(&id).map(|k| k.items.clone()) else {
        return not_found(&sim, &id);
    };
    let first = data.first().and_then(|i| i.get("id")).cloned();
    let last = data.last().and_then(|i| i.get("id")).cloned();
    ok(&sim, &json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": false}))
}
