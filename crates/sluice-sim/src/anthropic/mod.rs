//! The Anthropic shape: `POST /v1/messages` (plain and SSE).

pub mod errors;
pub mod request;
pub mod stream;
pub mod thinking;
pub mod tools;

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::admission::Cost;
use crate::config::{Flavor, OutputAccounting, Shape};
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::flow::{self, Prepared};
use crate::sim::{Ask, ModelState, Sim};
use request::MessagesRequest;

fn invalid(sim: &Sim, err: &ApiError) -> Response {
    sim.invalid();
    crate::respond::error(sim, Flavor::Anthropic, None, err)
}

fn required(field: &str) -> ApiError {
    ApiError::Invalid { message: format!("{field}: Field required"), param: None }
}

/// `usage` as Anthropic reports it (`input_tokens` excludes cache reads and writes).
#[must_use]
pub fn usage(input: u64, created: u64, cached: u64, output: u64) -> Value {
    json!({"input_tokens": input, "cache_creation_input_tokens": created, "cache_read_input_tokens": cached, "output_tokens": output})
}

/// `usage` of `prepared` having generated `output` tokens.
#[must_use]
pub fn usage_of(prepared: &Prepared, output: u64) -> Value {
    let created = prepared.cache_created();
    usage(prepared.input - prepared.cached - created, created, prepared.cached, output)
}

/// `end_turn`, or `max_tokens` when the cap cut the answer.
#[must_use]
pub fn stop_reason(output: u64, cap: u64) -> &'static str {
    if output >= cap { "max_tokens" } else { "end_turn" }
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss,
    reason = "small token counts"
)]
fn cached_part(model: &ModelState, input: u64) -> u64 {
    (input as f64 * model.config.cached_input_fraction).floor() as u64
}

fn prepare(sim: &Sim, req: &MessagesRequest<'_>, headers: &HeaderMap) -> Result<Prepared, ApiError> {
    let Some(name) = req.model.as_deref() else { return Err(required("model")) };
    let Some(model) = sim.model(name, Shape::Anthropic).cloned() else {
        return Err(ApiError::NotFound(name.to_owned()));
    };
    if req.messages.as_ref().is_none_or(Vec::is_empty) {
        return Err(required("messages"));
    }
    let Some(cap) = req.max_tokens.filter(|n| *n > 0) else { return Err(required("max_tokens")) };
    thinking::check(req, headers, cap)?;
    let input = req.input_tokens(&model.tokenizer);
    // A model with a prompt cache reads what it holds; else a fixed fraction is reported.
    let prompt_cache =
        if model.config.prompt_cache { sim.cache_peek(&model, req.cache_plan(&model.tokenizer)) } else { None };
    let cached = prompt_cache.as_ref().map_or_else(|| cached_part(&model, input), |c| c.lookup.read);
    let reserve = match (model.flavor, model.config.output_accounting) {
        (Flavor::Bedrock, _) | (_, OutputAccounting::MaxTokens) => cap,
        (_, OutputAccounting::Actual) => 0,
    };
    // Bedrock's TPM takes the input and the whole `max_tokens` up front.
    let tokens = if model.flavor == Flavor::Bedrock { input - cached + cap } else { 0 };
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    let cost = Cost { input: (input - cached) as f64, output: reserve as f64, tokens: tokens as f64 };
    let ask = Ask { cost, stream: req.stream.unwrap_or(false), cap };
    let user = req.metadata.as_ref().and_then(|m| m.user_id.as_deref());
    let tenant = crate::text::tenant(headers, user);
    let marker = crate::text::marker(&req.last_text());
    Ok(Prepared { model, ask, input, cached, tenant, marker, prompt_cache })
}

/// `POST /v1/messages`.
pub async fn messages(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let Ok(req) = serde_json::from_slice::<MessagesRequest<'_>>(&body) else {
        return invalid(&sim, &ApiError::BadJson);
    };
    let prepared = match prepare(&sim, &req, &headers) {
        Ok(prepared) => prepared,
        Err(err) => return invalid(&sim, &err),
    };
    let mut ticket = match flow::admit(&sim, ctl.as_ref(), &prepared, &headers).await {
        Ok(ticket) => ticket,
        Err(response) => return response,
    };
    let call = crate::tools::decide(req.tools.as_ref(), req.tool_choice.as_ref(), &req.last_text());
    if let Some(call) = &call {
        ticket.output = call.tokens(&prepared.model.tokenizer);
    }
    let id = format!("msg_{}", sim.request_id().trim_start_matches("req_"));
    let thought = if thinking::enabled(&req) { thinking::blocks(&id, &req.last_text()) } else { Vec::new() };
    if prepared.ask.stream {
        let snapshot = ticket.snapshot;
        let body = match call {
            Some(call) => {
                let render = tools::ToolStream::new(id, &prepared, call, ticket.output).after(thought);
                crate::pacer::body(Arc::clone(&sim), prepared, ticket, render)
            }
            None => {
                let render = stream::MessageStream::new(id, &prepared).after(thought);
                crate::pacer::body(Arc::clone(&sim), prepared, ticket, render)
            }
        };
        return crate::respond::sse(&sim, Flavor::Anthropic, Some(&snapshot), body);
    }
    flow::generate(&ticket).await;
    let (content, stop) = match &call {
        Some(call) => (tools::block(call, &id), "tool_use"),
        None => {
            let text = crate::text::filler(ticket.output);
            (json!({"type": "text", "text": text}), stop_reason(ticket.output, prepared.ask.cap))
        }
    };
    let mut blocks = thought;
    blocks.push(content);
    let message = json!({
        "id": id, "type": "message", "role": "assistant", "model": prepared.model.config.name,
        "content": blocks,
        "stop_reason": stop, "stop_sequence": null,
        "usage": usage_of(&prepared, ticket.output),
    });
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(ticket.output));
    let body = serde_json::to_vec(&message).unwrap_or_default();
    crate::respond::json(&sim, Flavor::Anthropic, Some(&ticket.snapshot), StatusCode::OK, body)
}
