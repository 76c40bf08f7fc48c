//! The life of a proxied request: authenticate, parse, price, reserve, send, settle.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use axum::response::IntoResponse as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use sluice_config::ProviderKind;
use sluice_provider::{Protocol, parse_request, upstream_body, usage_from_response};
use sluice_quota::{Cost, Settlement};

use crate::admit::{self, Admitted};
use crate::auth::authenticate;
use crate::error::{Envelope, ErrorResponse, GatewayError};
use crate::metrics::{Hit, Outcome};
use crate::relay;
use crate::settle::SettleGuard;
use crate::state::{Caller, Gateway, Route};
use crate::trace::Trace;
use crate::upstream::UpstreamError;

/// How long a deployment is paused after a provider 429 that gave no hint.
const PROVIDER_429_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest pause taken from a provider hint (a daily-quota hint is not a reason to stall).
const MAX_PROVIDER_PAUSE: std::time::Duration = std::time::Duration::from_secs(120);

/// Largest provider response body the gateway buffers (non-stream).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Handles one OpenAI- or Anthropic-shaped request end to end.
pub async fn handle(gateway: Arc<Gateway>, protocol: Protocol, request: axum::extract::Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let trace = Trace::from_headers(&parts.headers);
    let envelope = if protocol == Protocol::AnthropicMessages { Envelope::Anthropic } else { Envelope::OpenAi };
    let mut routed = None;
    let mut response = match proxy(&gateway, protocol, &parts.headers, body, &trace, &mut routed).await {
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
    routed: &mut Option<usize>,
) -> Result<Response<Body>, GatewayError> {
    let caller = authenticate(gateway, headers)?;
    let bytes = read_body(body, gateway.max_body_bytes).await?;
    forward(gateway, caller, protocol, headers, &bytes, trace, routed).await
}

/// The request path after authentication: parse, admit, send, settle. Async jobs run
/// through here too, with the job's caller and stored body.
pub(crate) async fn forward(
    gateway: &Gateway,
    caller: &Caller,
    protocol: Protocol,
    headers: &HeaderMap,
    bytes: &[u8],
    trace: &Trace,
    routed: &mut Option<usize>,
) -> Result<Response<Body>, GatewayError> {
    let request = parse_request(protocol, bytes).map_err(GatewayError::BadRequest)?;
    let admitted = admit::admit(gateway, caller, &request, routed).await?;
    let route = &gateway.deployments[admitted.deployment];
    let force_usage = request.stream && protocol == Protocol::OpenAiChat && !request.client_wants_stream_usage;
    let outgoing = build_upstream(route, protocol, headers, upstream_body(&request, &route.model, force_usage), trace);
    let used = route.counters.used.clone();
    let guard = SettleGuard::new(
        Arc::clone(&gateway.store),
        admitted.grant_id,
        admitted.sent_unanswered(),
        used,
        Arc::clone(&route.queue),
    );
    let response = match gateway.upstream.send(outgoing, gateway.upstream_timeout).await {
        Ok(response) => response,
        Err(UpstreamError::Connect) => {
            guard.settle(Settlement::default());
            return Err(GatewayError::UpstreamUnreachable(route.provider.to_string()));
        }
        Err(UpstreamError::Timeout) => return Err(GatewayError::UpstreamTimeout(route.provider.to_string())),
        Err(UpstreamError::NoResponse) => return Err(GatewayError::UpstreamUnreachable(route.provider.to_string())),
    };
    if !response.status().is_success() {
        return provider_error(response, guard, &admitted, route, gateway).await;
    }
    if request.stream {
        return Ok(relay::stream(response, guard, admitted, force_usage));
    }
    buffered(response, guard, &admitted, route).await
}

pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(GatewayError::BodyTooLarge(limit)),
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

fn build_upstream(
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

async fn buffered(
    response: http::Response<hyper::body::Incoming>,
    guard: SettleGuard,
    admitted: &Admitted,
    route: &Route,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = response.into_parts();
    let bytes = match Limited::new(body, MAX_RESPONSE_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return Err(GatewayError::UpstreamUnreachable(route.provider.to_string())),
    };
    let settlement = match usage_from_response(admitted.protocol, &bytes) {
        Some(usage) => admitted.settlement(usage),
        None => admitted.sent_unanswered(),
    };
    guard.settle(settlement);
    Ok(pass_through(parts.status, &parts.headers, Body::from(bytes)))
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

async fn provider_error(
    response: http::Response<hyper::body::Incoming>,
    guard: SettleGuard,
    admitted: &Admitted,
    route: &Route,
    gateway: &Gateway,
) -> Result<Response<Body>, GatewayError> {
    // The provider saw the request: its request unit stays spent, tokens come back.
    guard.settle(Settlement { used: Cost::request(0, 0), upstream: Cost::request(0, 0) });
    let (parts, body) = response.into_parts();
    let bytes = Limited::new(body, 1024 * 1024).collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    if parts.status == StatusCode::TOO_MANY_REQUESTS {
        let wait = crate::hints::retry_after(&parts.headers);
        // Coordinated backoff: every user of the store waits out the provider's hint.
        let pause = wait.unwrap_or(PROVIDER_429_PAUSE).min(MAX_PROVIDER_PAUSE);
        if let Err(e) = gateway.store.pause(route.scope, pause).await {
            tracing::warn!(error = %e, "could not record the provider's pause");
        }
        gateway.metrics.decision("provider_rejected", "provider");
        let hit = Hit { limit_type: "provider".into(), ..admit::hit_labels(route) };
        gateway.metrics.rate_limit_hits.get_or_create(&hit).inc();
        return Err(GatewayError::RateLimited(Box::new(admitted.provider_rejection(route, wait))));
    }
    Ok(pass_through(parts.status, &parts.headers, Body::from(bytes)))
}
