//! The OpenAI shape: `POST /v1/chat/completions` and `POST /v1/responses` (plain and SSE),
//! and `POST /v1/embeddings`.

pub mod completions;
pub mod conversations;
pub(crate) mod conversations_kept;
pub mod embeddings;
pub mod errors;
pub mod request;
pub mod response;
pub mod responses;
pub mod responses_body;
pub(crate) mod responses_kept;
pub mod responses_request;
pub mod responses_store;
pub mod stream;
pub mod tools;

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use crate::admission::Cost;
use crate::config::{Flavor, Shape, TokenRule};
use crate::conn::ConnCtl;
use crate::errors::ApiError;
use crate::flow::{self, Prepared};
use crate::sim::{Ask, ModelState, Sim, Ticket};
use request::ChatRequest;
use response::{AssistantMessage, ChatUsage, Choice, Completion, FINGERPRINT, finish_reason};

/// Answers `err` in the OpenAI shape and counts it as invalid.
pub(crate) fn invalid(sim: &Sim, err: &ApiError) -> Response {
    sim.invalid();
    crate::respond::error(sim, Flavor::Openai, None, err)
}

/// The OpenAI-shaped model a request names.
///
/// # Errors
/// When the name is missing or no such model is served.
pub(crate) fn resolve(sim: &Sim, name: Option<&str>) -> Result<Arc<ModelState>, ApiError> {
    let Some(name) = name else {
        return Err(ApiError::Invalid { message: "you must provide a model parameter".into(), param: None });
    };
    sim.model(name, Shape::Openai).cloned().ok_or_else(|| ApiError::NotFound(name.to_owned()))
}

#[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
fn tpm_cost(model: &ModelState, req: &ChatRequest<'_>, prompt: u64, cap: u64) -> f64 {
    let tokens = match (model.flavor, model.config.token_rule) {
        (Flavor::Gemini, _) => prompt,
        (_, TokenRule::PromptPlusMax) => prompt + cap,
        (_, TokenRule::MaxOfMaxTokensAndChars) => {
            req.max_completion_tokens.or(req.max_tokens).unwrap_or(0).max(req.char_estimate())
        }
    };
    tokens as f64
}

/// `POST /v1/chat/completions`.
pub async fn chat(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ctl = ctl.map(|Extension(ctl)| ctl);
    let Ok(req) = serde_json::from_slice::<ChatRequest<'_>>(&body) else { return invalid(&sim, &ApiError::BadJson) };
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
    let flavor = prepared.model.flavor;
    let id = format!("chatcmpl-{}", sim.request_id().trim_start_matches("req_"));
    let created = sim.clock().unix_now().as_secs();
    if prepared.ask.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        let snapshot = ticket.snapshot;
        let body = match call {
            Some(call) => {
                let render = tools::ToolStream::new(id, created, &prepared, include_usage, call, ticket.output);
                crate::pacer::body(Arc::clone(&sim), prepared, ticket, render)
            }
            None => {
                let render = stream::ChatStream::new(id, created, &prepared, include_usage);
                crate::pacer::body(Arc::clone(&sim), prepared, ticket, render)
            }
        };
        return crate::respond::sse(&sim, flavor, Some(&snapshot), body);
    }
    flow::generate(&ticket).await;
    let body = match &call {
        Some(call) => tools::completion_body(&prepared, call, &id, created, ticket.output),
        None => completion_body(&prepared, &ticket, &id, created),
    };
    sim.complete(&prepared.model, ticket.reserved_output, &prepared.served(ticket.output));
    crate::respond::json(&sim, flavor, Some(&ticket.snapshot), StatusCode::OK, body)
}

/// Validates and counts a chat request.
fn prepare(sim: &Sim, req: &ChatRequest<'_>, headers: &HeaderMap) -> Result<Prepared, ApiError> {
    let model = resolve(sim, req.model.as_deref())?;
    if req.messages.as_ref().is_none_or(Vec::is_empty) {
        let message = "Missing required parameter: 'messages'.".into();
        return Err(ApiError::Invalid { message, param: Some("messages") });
    }
    let prompt = req.prompt_tokens(&model.tokenizer);
    let prompt_cache =
        if model.config.prompt_cache { sim.cache_peek(&model, req.cache_plan(&model.tokenizer)) } else { None };
    let cached = prompt_cache.as_ref().map_or(0, |c| c.lookup.read);
    let cap = req.max_completion_tokens.or(req.max_tokens).unwrap_or(model.config.default_max_tokens);
    let stream = req.stream.unwrap_or(false);
    let ask = Ask { cost: Cost { tokens: tpm_cost(&model, req, prompt, cap), ..Cost::default() }, stream, cap };
    let tenant = crate::text::tenant(headers, req.user.as_deref());
    let marker = crate::text::marker(&req.last_text());
    Ok(Prepared { model, ask, input: prompt, cached, tenant, marker, prompt_cache })
}

/// The `chat.completion` body of a non-streamed answer.
fn completion_body(prepared: &Prepared, ticket: &Ticket, id: &str, created: u64) -> Vec<u8> {
    let text = crate::text::filler(ticket.output);
    let completion = Completion {
        id,
        object: "chat.completion",
        created,
        model: &prepared.model.config.name,
        choices: [Choice {
            index: 0,
            message: AssistantMessage { role: "assistant", content: &text, refusal: None, annotations: [] },
            logprobs: None,
            finish_reason: finish_reason(ticket.output, prepared.ask.cap),
        }],
        usage: ChatUsage::new(prepared.input, ticket.output).with_cached(prepared.cached),
        service_tier: "default",
        system_fingerprint: FINGERPRINT,
    };
    serde_json::to_vec(&completion).unwrap_or_default()
}
