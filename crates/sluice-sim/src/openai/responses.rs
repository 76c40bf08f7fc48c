//! `POST /v1/responses` (plain and SSE), under the same limits as chat.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::responses_body::{ResponseFrame, ResponsesStream};
use super::responses_request::ResponsesRequest;
use super::{invalid, resolve};
use crate::admission::Cost;
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::flow::{self, Prepared};
use crate::sim::{Ask, Sim};

/// `POST /v1/responses`.
pub async fn responses(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let Ok(req) = serde_json::from_slice::<ResponsesRequest<'_>>(&body) else {
        return invalid(&sim, &ApiError::BadJson);
    };
    let prepared = match prepare(&sim, &req, &headers) {
        Ok(prepared) => prepared,
        Err(err) => return invalid(&sim, &err),
    };
    let ticket = match flow::admit(&sim, ctl.as_ref(), &prepared, &headers).await {
        Ok(ticket) => ticket,
        Err(response) => return response,
    };
    let flavor = prepared.model.flavor;
    let id = format!("resp_{}", sim.request_id().trim_start_matches("req_"));
    if let Some(conversation) = super::conversations::named(req.conversation.as_ref()) {
        // The response's turns join the conversation (its output as planned).
        let items = super::responses_store::input_items(req.input.as_ref(), &id);
        sim.conversations.extend(conversation, &items, prepared.input + ticket.output);
    }
    let frame = ResponseFrame::new(id, sim.clock().unix_now().as_secs(), &prepared).with_input(req.input.as_ref());
    if prepared.ask.stream {
        let snapshot = ticket.snapshot;
        let render = ResponsesStream::new(frame, Arc::clone(&sim));
        let body = crate::pacer::body(Arc::clone(&sim), prepared, ticket, render);
        return crate::respond::sse(&sim, flavor, Some(&snapshot), body);
    }
    let (response, output) = finished(&req, &prepared, &frame, ticket.output);
    let background = req.background.unwrap_or(false);
    let body = if background {
        // The provider runs it: answered queued now, found finished by the next read.
        frame.keep_queued(&sim, &response, output)
    } else {
        flow::generate(&ticket).await;
        frame.keep(&sim, &response, output);
        response
    };
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(output));
    let body = serde_json::to_vec(&body).unwrap_or_default();
    crate::respond::json(&sim, flavor, Some(&ticket.snapshot), StatusCode::OK, body)
}

/// The finished `response` object and its output tokens: a call to a tool when the request
/// asks for one, else `output` tokens of text.
fn finished(req: &ResponsesRequest<'_>, prepared: &Prepared, frame: &ResponseFrame, output: u64) -> (Value, u64) {
    if let Some(call) = crate::tools::decide(req.tools.as_ref(), req.tool_choice.as_ref(), &req.last_text()) {
        let output = call.tokens(&prepared.model.tokenizer);
        return (frame.tool_call(&call, output), output);
    }
    let text = crate::text::filler(output);
    (frame.response(Some((&text, output))), output)
}

/// Validates and counts a Responses request: the TPM cost is input plus the output cap,
/// as for chat.
fn prepare(sim: &Sim, req: &ResponsesRequest<'_>, headers: &HeaderMap) -> Result<Prepared, ApiError> {
    let model = resolve(sim, req.model.as_deref())?;
    if !req.has_input() {
        let message = "Missing required parameter: 'input'.".into();
        return Err(ApiError::Invalid { message, param: Some("input") });
    }
    let context = match req.previous_response_id.as_deref() {
        None => 0,
        Some(id) => sim.responses.context_of(id).ok_or_else(|| ApiError::Invalid {
            message: format!("Previous response with id '{id}' not found."),
            param: Some("previous_response_id"),
        })?,
    };
    let conversation = match super::conversations::named(req.conversation.as_ref()) {
        None => 0,
        Some(id) => sim.conversations.context_of(id).ok_or_else(|| super::conversations::missing(id))?,
    };
    // The earlier turns count as input, as OpenAI charges them.
    let input = context + conversation + req.input_tokens(&model.tokenizer);
    let prompt_cache = if model.config.prompt_cache {
        let mut turns = Vec::new();
        if let Some(id) = req.previous_response_id.as_deref() {
            turns.push(("previous_response", id, context));
        }
        if let Some(id) = super::conversations::named(req.conversation.as_ref()) {
            turns.push(("conversation", id, conversation));
        }
        sim.cache_peek(&model, req.cache_plan(&model.tokenizer, &turns))
    } else {
        None
    };
    let cached = prompt_cache.as_ref().map_or(0, |c| c.lookup.read);
    let cap = req.max_output_tokens.unwrap_or(model.config.default_max_tokens);
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    let cost = Cost { tokens: (input + cap) as f64, ..Cost::default() };
    let ask = Ask { cost, stream: req.stream.unwrap_or(false), cap };
    let tenant = crate::text::tenant(headers, req.user.as_deref());
    let marker = crate::text::marker(&req.last_text());
    Ok(Prepared { model, ask, input, cached, tenant, marker, prompt_cache })
}
