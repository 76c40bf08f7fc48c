//! OpenAI's legacy `POST /v1/completions` (not streamed here) under the same limits as
//! chat, and `POST /v1/moderations`, answered at once (moderation is not rate-limited
//! like generation).

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::response::{ChatUsage, finish_reason};
use super::{invalid, resolve};
use crate::admission::Cost;
use crate::config::Flavor;
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::flow::{self, Prepared};
use crate::sim::{Ask, Sim};

/// `POST /v1/completions`.
#[derive(Debug, Deserialize)]
struct CompletionRequest {
    model: Option<String>,
    #[serde(default)]
    prompt: Option<Value>,
    max_tokens: Option<u64>,
    stream: Option<bool>,
    user: Option<String>,
}

impl CompletionRequest {
    fn prompt_text(&self) -> String {
        match &self.prompt {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"),
            _ => String::new(),
        }
    }
}

fn prepare(sim: &Sim, req: &CompletionRequest, headers: &HeaderMap) -> Result<Prepared, ApiError> {
    let model = resolve(sim, req.model.as_deref())?;
    if req.stream.unwrap_or(false) {
        let message = "the simulated provider does not stream legacy completions".into();
        return Err(ApiError::Invalid { message, param: Some("stream") });
    }
    let text = req.prompt_text();
    let input = model.tokenizer.count(&text).max(1);
    // OpenAI's default for legacy completions.
    let cap = req.max_tokens.unwrap_or(16);
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    let cost = Cost { tokens: (input + cap) as f64, ..Cost::default() };
    let tenant = crate::text::tenant(headers, req.user.as_deref());
    let ask = Ask { cost, stream: false, cap };
    Ok(Prepared { model, ask, input, cached: 0, tenant, marker: crate::text::marker(&text), prompt_cache: None })
}

/// `POST /v1/completions`: `choices[].text` with chat's usage.
pub async fn completions(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let Ok(req) = serde_json::from_slice::<CompletionRequest>(&body) else { return invalid(&sim, &ApiError::BadJson) };
    let prepared = match prepare(&sim, &req, &headers) {
        Ok(prepared) => prepared,
        Err(err) => return invalid(&sim, &err),
    };
    let ticket = match flow::admit(&sim, ctl.as_ref(), &prepared, &headers).await {
        Ok(ticket) => ticket,
        Err(response) => return response,
    };
    flow::generate(&ticket).await;
    let body = json!({
        "id": format!("cmpl-{}", sim.request_id().trim_start_matches("req_")),
        "object": "text_completion",
        "created": sim.clock().unix_now().as_secs(),
        "model": prepared.model.config.name,
        "choices": [{"text": crate::text::filler(ticket.output), "index": 0, "logprobs": null,
            "finish_reason": finish_reason(ticket.output, prepared.ask.cap)}],
        "usage": ChatUsage::new(prepared.input, ticket.output),
    });
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(ticket.output));
    let body = serde_json::to_vec(&body).unwrap_or_default();
    crate::respond::json(&sim, prepared.model.flavor, Some(&ticket.snapshot), StatusCode::OK, body)
}

/// `POST /v1/moderations`: nothing is ever flagged.
pub async fn moderations(State(sim): State<Arc<Sim>>, body: Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else { return invalid(&sim, &ApiError::BadJson) };
    let model = req.get("model").and_then(Value::as_str).unwrap_or("omni-moderation-latest");
    let body = json!({
        "id": format!("modr-{}", sim.request_id().trim_start_matches("req_")),
        "model": model,
        "results": [{"flagged": false, "categories": {}, "category_scores": {}}],
    });
    let body = serde_json::to_vec(&body).unwrap_or_default();
    crate::respond::json(&sim, Flavor::Openai, None, StatusCode::OK, body)
}
