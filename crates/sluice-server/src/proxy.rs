//! The life of a proxied request: authenticate, parse, price, reserve, send, settle.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use axum::response::IntoResponse as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use sluice_config::ProviderKind;
use sluice_provider::{ParsedRequest, Protocol, parse_request};

use crate::attempt;
use crate::auth::authenticate;
use crate::error::{Envelope, ErrorResponse, GatewayError};
use crate::metrics::Outcome;
use crate::oplog::{self, Begin, Fingerprint, OpId, OpLog, Stored};
use crate::ratelimit_headers::Early;
use crate::state::{Caller, Gateway, Route};
use crate::trace::Trace;

/// Handles one OpenAI- or Anthropic-shaped request end to end.
pub async fn handle(gateway: Arc<Gateway>, protocol: Protocol, request: axum::extract::Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let trace = Trace::from_headers(&parts.headers);
    let envelope = if protocol == Protocol::AnthropicMessages { Envelope::Anthropic } else { Envelope::OpenAi };
    let mut routed = None;
    let early = parts.extensions.get::<Early>();
    let mut response = match proxy(&gateway, protocol, &parts.headers, body, &trace, early, &mut routed).await {
        Ok(response) => response,
        Err(error) => ErrorResponse { error, envelope, trace_id: trace.id.clone() }.into_response(),
    };
    if let Ok(v) = HeaderValue::from_str(&trace.id) {
        response.headers_mut().insert("x-sluice-trace-id", v);
    }
    count(&gateway, routed, response.status());
    response
}

/// Counts the request in `llm_requests_total`; requests refused before routing count
/// under provider and model `none`.
pub(crate) fn count(gateway: &Gateway, routed: Option<usize>, status: StatusCode) {
    let labels = routed.and_then(|i| gateway.deployments.get(i)).map(|r| &r.counters.labels);
    let (provider, model) = labels.map_or(("none", "none"), |l| (l.provider.as_str(), l.model.as_str()));
    let outcome = Outcome { provider: provider.to_owned(), model: model.to_owned(), status: status.as_u16() };
    gateway.metrics.requests.get_or_create(&outcome).inc();
}

async fn proxy(
    gateway: &Gateway,
    protocol: Protocol,
    headers: &HeaderMap,
    body: Body,
    trace: &Trace,
    early: Option<&Early>,
    routed: &mut Option<usize>,
) -> Result<Response<Body>, GatewayError> {
    let caller = authenticate(gateway, headers)?;
    let bytes = read_body(body, gateway.max_body_bytes).await?;
    forward(gateway, caller, protocol, headers, &bytes, trace, early, routed).await
}

/// The request path after authentication: parse, then attempts (admission, upstream
/// call, retries, fallbacks). Async jobs run through here too, with the job's caller and
/// stored body. `early` learns of each reservation made (a client's rate-limit headers;
/// jobs have none).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward(
    gateway: &Gateway,
    caller: &Caller,
    protocol: Protocol,
    headers: &HeaderMap,
    bytes: &[u8],
    trace: &Trace,
    early: Option<&Early>,
    routed: &mut Option<usize>,
) -> Result<Response<Body>, GatewayError> {
    let request = parse_request(protocol, bytes).map_err(GatewayError::BadRequest)?;
    let profile = gateway
        .profiles
        .get(request.model.as_str())
        .ok_or_else(|| GatewayError::UnknownModel(request.model.clone()))?;
    let task = task_of(headers, &request);
    let attempt =
        attempt::Request { gateway, caller, request: &request, profile, task: task.as_deref(), headers, trace, early };
    let Some(key) = oplog::idempotency_key(headers)? else { return attempt::run(&attempt, routed).await };
    let op = OpId { tenant: Arc::clone(&caller.tenant), key };
    let fingerprint = oplog::fingerprint(endpoint_path(protocol), &request.body);
    match gateway.oplog.begin(&op, &fingerprint).await? {
        Begin::Replay(stored) => {
            gateway.metrics.duplicate_suppressed(gateway.task_label(task.as_deref()));
            Ok(replay(stored))
        }
        Begin::Proceed => {
            let result = attempt::run(&attempt, routed).await;
            record(&gateway.oplog, &op, &fingerprint, request.stream, result).await
        }
    }
}

/// Keeps a non-stream success in the operation log, and a stream that started as
/// streamed (its body is not kept: repeats get a 409, never a second provider call);
/// anything else is forgotten so the client may try again.
async fn record(
    log: &OpLog,
    op: &OpId,
    fingerprint: &Fingerprint,
    stream: bool,
    result: Result<Response<Body>, GatewayError>,
) -> Result<Response<Body>, GatewayError> {
    let response = match result {
        Ok(response) if response.status().is_success() => response,
        other => {
            log.abandon(op, fingerprint).await;
            return other;
        }
    };
    if stream {
        log.streamed(op, fingerprint).await;
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let Ok(collected) = body.collect().await else {
        log.abandon(op, fingerprint).await;
        return Err(GatewayError::UpstreamUnreachable("provider".into()));
    };
    let bytes = collected.to_bytes();
    let content_type = parts.headers.get(header::CONTENT_TYPE).cloned();
    let stored = Stored { status: parts.status.as_u16(), content_type, body: bytes.clone() };
    log.complete(op, fingerprint, stored).await;
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

fn replay(stored: Stored) -> Response<Body> {
    let mut response = Response::new(Body::from(stored.body));
    *response.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    if let Some(content_type) = stored.content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    response.headers_mut().insert("x-sluice-idempotent-replay", HeaderValue::from_static("true"));
    response
}

/// The task a request declares: the `x-sluice-task` header, else `metadata.task`.
fn task_of(headers: &HeaderMap, request: &ParsedRequest) -> Option<String> {
    let header = headers.get("x-sluice-task").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty());
    let metadata = || request.body.get("metadata")?.get("task")?.as_str().map(str::to_owned);
    header.map(str::to_owned).or_else(metadata).filter(|t| t.len() <= 64)
}

pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(GatewayError::BodyTooLarge(limit)),
        Err(e) if crate::body_pace::BodyTimedOut::caused(&*e) => Err(GatewayError::BodyTimedOut),
        Err(_) => Err(GatewayError::BadRequest(sluice_provider::RequestError {
            param: None,
            message: "the request body could not be read".into(),
            code: sluice_provider::RequestErrorCode::InvalidJson,
        })),
    }
}

fn endpoint_path(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAiChat => "/v1/chat/completions",
        Protocol::OpenAiEmbeddings => "/v1/embeddings",
        Protocol::AnthropicMessages => "/v1/messages",
    }
}

pub(crate) fn build_upstream(
    route: &Route,
    protocol: Protocol,
    client_headers: &HeaderMap,
    body: Vec<u8>,
    trace: &Trace,
) -> http::Request<Full<Bytes>> {
    let uri = format!("{}{}", route.base_url, endpoint_path(protocol));
    let mut builder = http::Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::USER_AGENT, concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .header("traceparent", &trace.traceparent);
    if let Some(key) = &route.key {
        let name = if route.kind == ProviderKind::Anthropic { "x-api-key" } else { "authorization" };
        builder = builder.header(name, key.header().clone());
    }
    if route.kind == ProviderKind::Anthropic {
        let version = client_headers.get("anthropic-version").cloned();
        builder = builder.header("anthropic-version", version.unwrap_or(HeaderValue::from_static("2023-06-01")));
        if let Some(beta) = client_headers.get("anthropic-beta") {
            builder = builder.header("anthropic-beta", beta.clone());
        }
    }
    builder.body(Full::new(Bytes::from(body))).unwrap_or_else(|_| http::Request::new(Full::new(Bytes::new())))
}

/// A response with the provider's status, content type and request id.
pub(crate) fn pass_through(status: StatusCode, upstream: &HeaderMap, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    for name in [header::CONTENT_TYPE, header::CACHE_CONTROL] {
        if let Some(v) = upstream.get(&name) {
            response.headers_mut().insert(name, v.clone());
        }
    }
    for name in ["x-request-id", "request-id"] {
        if let Some(v) = upstream.get(name) {
            response.headers_mut().insert(name, v.clone());
        }
    }
    response
}
