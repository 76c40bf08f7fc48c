//! The Responses API beyond creating a response: `GET /v1/responses/{id}`,
//! `DELETE /v1/responses/{id}`, `POST /v1/responses/{id}/cancel`,
//! `GET /v1/responses/{id}/input_items`, and `POST /v1/responses/input_tokens`.
//!
//! A stored response is the provider's: each call goes to the deployment that created it
//! (remembered with its id, see [`sluice_recall::remembered`]) and costs one request on the
//! caller's path and that deployment (their request limits and concurrency), no tokens:
//! polling a `background: true` response is admitted this way. Only the tenant whose
//! request created a response may reach it; for anyone else, and for ids sluice never
//! relayed, the answer is the same 404 `response_not_found`. `input_tokens` is answered by
//! sluice alone, from the estimate admission would reserve.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, Response, header};
use axum::response::IntoResponse as _;
use serde_json::json;
use sluice_provider::{Protocol, parse_request, usage_from_response};

use crate::AppState;
use crate::auth::authenticate;
use crate::catalog::COUNT_TOKENS_MAX_BODY;
use crate::error::{Envelope, ErrorResponse, GatewayError, Stored};
use crate::passthrough::{self, Call};
use crate::road::{estimate_input, hidden_context, read_body};
use crate::state::{Gateway, Route};
use crate::trace::{self, Trace};
use crate::{metered, road};
use sluice_recall::remembered::{Memo, ResponseKey};

/// What is asked of a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Retrieve,
    Delete,
    Cancel,
    InputItems,
}

impl Op {
    fn method(self) -> Method {
        match self {
            Self::Retrieve | Self::InputItems => Method::GET,
            Self::Delete => Method::DELETE,
            Self::Cancel => Method::POST,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Self::Retrieve | Self::Delete => "",
            Self::Cancel => "/cancel",
            Self::InputItems => "/input_items",
        }
    }
}

/// `GET /v1/responses/{id}`.
pub async fn retrieve(State(state): State<AppState>, Path(id): Path<String>, request: Request) -> Response<Body> {
    by_id(&state, Op::Retrieve, id, request).await
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>, request: Request) -> Response<Body> {
    by_id(&state, Op::Delete, id, request).await
}

/// `POST /v1/responses/{id}/cancel`.
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>, request: Request) -> Response<Body> {
    by_id(&state, Op::Cancel, id, request).await
}

/// `GET /v1/responses/{id}/input_items`.
pub async fn input_items(State(state): State<AppState>, Path(id): Path<String>, request: Request) -> Response<Body> {
    by_id(&state, Op::InputItems, id, request).await
}

async fn by_id(state: &AppState, op: Op, id: String, request: Request) -> Response<Body> {
    let gateway = state.current();
    let trace = Trace::from_headers(request.headers());
    let access = crate::access::beside_the_road(&gateway, &trace, &request);
    let result = relay(&gateway, op, id, request, &trace).await;
    road::finished(&access, &result);
    answer(result, &trace)
}

fn answer(result: Result<Response<Body>, GatewayError>, trace: &Trace) -> Response<Body> {
    let mut response = result.unwrap_or_else(|error| {
        ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: trace.id.clone() }.into_response()
    });
    trace::stamp(response.headers_mut(), &trace.id);
    response
}

/// The deployment that created the caller's response `key`.
///
/// # Errors
/// 404 when the tenant has no such response (or its deployment is gone), 503 when the
/// store cannot answer.
async fn owner<'g>(gateway: &'g Gateway, key: &ResponseKey) -> Result<&'g Route, GatewayError> {
    let deployment = gateway.services.responses.owned(key, Stored::Response).await?.deployment;
    gateway.deployments.iter().find(|r| r.name == deployment).ok_or(GatewayError::NotFound(Stored::Response))
}

async fn relay(
    gateway: &Gateway,
    op: Op,
    id: String,
    request: Request,
    trace: &Trace,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = request.into_parts();
    let caller = &authenticate(gateway, &parts.headers)?;
    let key = ResponseKey { tenant: Arc::clone(&caller.tenant), id };
    let route = owner(gateway, &key).await?;
    let call = Call {
        method: op.method(),
        endpoint: format!("/v1/responses/{}{}", key.id, op.suffix()),
        query: parts.uri.query().map(str::to_owned),
        content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
        body: read_body(body, gateway.max_body_bytes).await?,
    };
    let sent = passthrough::send(gateway, route, call, trace);
    let answer = metered::run_upstream(gateway, caller, route.scope, sent).await?;
    road::count(gateway, gateway.deployments.iter().position(|r| r.name == route.name), answer.status);
    if answer.status.is_success() {
        learned(gateway, op, &key, route, &answer.body).await;
    }
    Ok(answer.into_response())
}

/// What a successful call teaches: a deleted response is forgotten; a read or cancelled
/// one that carries its usage (a background response that finished) leaves its context.
async fn learned(gateway: &Gateway, op: Op, key: &ResponseKey, route: &Route, body: &[u8]) {
    match op {
        Op::Delete => gateway.services.responses.forget(key).await,
        Op::Retrieve | Op::Cancel => {
            let Some(usage) = usage_from_response(Protocol::OpenAiResponses, body) else { return };
            let memo = Memo {
                responses: Arc::clone(&gateway.services.responses),
                tenant: Arc::clone(&key.tenant),
                deployment: Arc::clone(&route.name),
            };
            memo.record(&key.id, Some(&usage)).await;
        }
        Op::InputItems => {}
    }
}

/// `POST /v1/responses/input_tokens`: the input tokens sluice would reserve for this
/// Responses request on its model's deployment (the continued context included), as
/// `{"object": "response.input_tokens", "input_tokens": N}`. Answered by sluice alone; it
/// costs one request, no tokens, on the caller's own scopes (as `/v1/messages/count_tokens`).
pub async fn input_tokens(State(state): State<AppState>, request: Request) -> Response<Body> {
    let gateway = state.current();
    let trace = Trace::from_headers(request.headers());
    let (parts, body) = request.into_parts();
    let result = async {
        let caller = &authenticate(&gateway, &parts.headers)?;
        let tokens = metered::run(&gateway, caller, count(&gateway, caller, body)).await?;
        let mut response =
            axum::Json(json!({"object": "response.input_tokens", "input_tokens": tokens})).into_response();
        response.headers_mut().insert("x-sluice-estimate", HeaderValue::from_static("true"));
        Ok(response)
    };
    answer(result.await, &trace)
}

async fn count(gateway: &Gateway, caller: &crate::state::Caller, body: Body) -> Result<u64, GatewayError> {
    let bytes = read_body(body, gateway.max_body_bytes.min(COUNT_TOKENS_MAX_BODY)).await?;
    let request = parse_request(Protocol::OpenAiResponses, &bytes).map_err(GatewayError::BadRequest)?;
    let profile = gateway
        .profiles
        .get(request.model.as_str())
        .filter(|_| caller.may_name(&request.model))
        .ok_or_else(|| GatewayError::UnknownModel(request.model.clone()))?;
    let own = estimate_input(gateway, &request, &gateway.deployments[profile.deployment]);
    if !request.continues_hidden_context() {
        return Ok(own);
    }
    let hidden = hidden_context(gateway, caller, &request).await?.and_then(|r| r.context);
    let hidden = hidden.unwrap_or(profile.context_reserve_tokens);
    Ok(own.saturating_add(hidden))
}
