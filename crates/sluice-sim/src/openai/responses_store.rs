//! The responses the simulated provider keeps, as OpenAI stores them: each one's `response`
//! object, its input items and the context it leaves for a continuation (the store itself is
//! in `responses_kept`, below the shared state); and the routes that read them: `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}`,
//! `POST /v1/responses/{id}/cancel`, `GET /v1/responses/{id}/input_items`.
//!
//! A `background: true` response is answered `queued`; the provider "runs" it at once, and
//! the next read finds it `completed` (its context is then known). Cancelling a queued one
//! makes it `cancelled`; a finished one cannot be cancelled (400, as OpenAI answers).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};

pub use super::responses_kept::StoredResponses;
use crate::config::Flavor;
use crate::errors::ApiError;
use crate::sim::Sim;

/// The input items of a request's `input` (a string is one user message), with ids.
#[must_use]
pub fn input_items(input: Option<&Value>, response_id: &str) -> Vec<Value> {
    let items = match input {
        Some(Value::String(text)) => {
            vec![json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})]
        }
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    let stem = response_id.trim_start_matches("resp_");
    let with_id = |(i, mut item): (usize, Value)| {
        if let Value::Object(map) = &mut item {
            map.entry("id").or_insert_with(|| json!(format!("item_{stem}_{i}")));
        }
        item
    };
    items.into_iter().enumerate().map(with_id).collect()
}

fn not_found(sim: &Sim, id: &str) -> Response {
    let message = format!("Response with id '{id}' not found.");
    super::invalid(sim, &ApiError::Invalid { message, param: None }).map_status(StatusCode::NOT_FOUND)
}

trait MapStatus {
    fn map_status(self, status: StatusCode) -> Self;
}

impl MapStatus for Response {
    fn map_status(mut self, status: StatusCode) -> Self {
        *self.status_mut() = status;
        self
    }
}

fn ok(sim: &Sim, body: &Value) -> Response {
    crate::respond::json(sim, Flavor::Openai, None, StatusCode::OK, serde_json::to_vec(body).unwrap_or_default())
}

/// `GET /v1/responses/{id}`.
pub async fn retrieve(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    match sim.responses.read(&id) {
        Some(response) => ok(&sim, &response),
        None => not_found(&sim, &id),
    }
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    if !sim.responses.delete(&id) {
        return not_found(&sim, &id);
    }
    ok(&sim, &json!({"id": id, "object": "response", "deleted": true}))
}

/// `POST /v1/responses/{id}/cancel`.
pub async fn cancel(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    match sim.responses.cancel(&id) {
        Some(Ok(response)) => ok(&sim, &response),
        Some(Err(err)) => super::invalid(&sim, &err),
        None => not_found(&sim, &id),
    }
}

/// `GET /v1/responses/{id}/input_items` (one page, newest first as OpenAI's default).
pub async fn items(State(sim): State<Arc<Sim>>, Path(id): Path<String>) -> Response {
    let Some(mut data) = sim.responses.input(&id) else { return not_found(&sim, &id) };
    data.reverse();
    let first = data.first().and_then(|i| i.get("id")).cloned();
    let last = data.last().and_then(|i| i.get("id")).cloned();
    ok(&sim, &json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": false}))
}
