//! Attempts of one request: admission on a deployment, the upstream call, and what a
//! failure leads to — a retry on the same deployment (backoff with full jitter, the
//! provider's hint as the floor, within the class's budget and the deployment's retry
//! budget, every retry re-entering admission), a fallback whose `when` conditions match,
//! or degradation of simple work to a cheaper deployment when the primary has no capacity
//! now. Nothing is retried once response bytes went to the client; a non-stream answer
//! cut or stalled after its headers is (none of it reached the client). Every attempt is
//! bounded: headers and a non-stream body by `attempt_timeout`, a stream's gaps by the
//! relay's idle timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode};
use sluice_config::{ProviderKind, When};
use sluice_provider::{
    ErrorClass, ParsedRequest, Phase, Protocol, ProviderFlavor, classify_with_hints, usage_from_response,
};
use sluice_quota::{Cost, Settlement};

use crate::admit::{self, Admitted, Mode};
use crate::crossing::Crossing;
use crate::error::GatewayError;
use crate::metrics::Hit;
use crate::proxy::{build_upstream, pass_through};
use crate::ratelimit_headers::Early;
use crate::retry::backoff;
use crate::settle::SettleGuard;
use crate::state::{Caller, Gateway, Profile, Route};
use crate::trace::Trace;
use crate::upstream::{self, BodyError, UpstreamError};
use crate::{relay, scrub};

/// How long a deployment is paused after a provider 429 that gave no hint.
const PROVIDER_429_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause taken from a provider hint (a daily-quota hint is not a reason to stall).
const MAX_PROVIDER_PAUSE: Duration = Duration::from_secs(120);
/// Largest provider response body the gateway buffers (non-stream).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Largest provider error body read.
const MAX_ERROR_BYTES: usize = 1024 * 1024;

/// One request's context through its attempts.
pub struct Request<'a> {
    /// The gateway.
    pub gateway: &'a Gateway,
    /// Who asks.
    pub caller: &'a Caller,
    /// What.
    pub request: &'a ParsedRequest,
    /// For which profile.
    pub profile: &'a Profile,
    /// The task name (`x-sluice-task` or `metadata.task`), if any.
    pub task: Option<&'a str>,
    /// Client headers (Anthropic version and beta pass through).
    pub headers: &'a HeaderMap,
    /// The trace.
    pub trace: &'a Trace,
    /// The client's rate-limit headers, told of each reservation made.
    pub early: Option<&'a Early>,
}

/// What one attempt came to.
enum Attempt {
    /// A response for the client (success, or a provider error not worth retrying).
    Done(Response<Body>),
    /// Not admitted.
    Refused(GatewayError),
    /// The upstream call failed; `error` is what the client gets if nothing else works.
    Failed { class: ErrorClass, error: GatewayError },
}

/// Runs the request to a response: primary, retries, fallbacks, degradation.
///
/// # Errors
/// The last failure when every allowed attempt failed, or the admission refusal.
pub async fn run(req: &Request<'_>, routed: &mut Option<usize>) -> Result<Response<Body>, GatewayError> {
    let gateway = req.gateway;
    let class = &req.caller.class;
    let started = gateway.clock.now();
    let primary = req.profile.deployment;
    let (mut target, mut mode) = (primary, Mode::Wait);
    if degradable(req) {
        mode = Mode::NoWait;
    }
    let mut retries = 0u32;
    let mut next_fallback = 0usize;
    let mut reason: Option<&'static str> = None;
    gateway.deployments[primary].retry_budget.deposit();
    loop {
        let route = &gateway.deployments[target];
        let outcome = if mode == Mode::Wait && target == primary && fallback_now(req, route) {
            Attempt::Refused(unavailable(route, gateway))
        } else {
            once(req, target, mode, routed).await
        };
        let (class_of_failure, error) = match outcome {
            Attempt::Done(response) => {
                if let Some(reason) = reason.filter(|_| target != primary) {
                    let from = &gateway.deployments[primary].counters.labels;
                    gateway.metrics.fallback(from, &route.counters.labels, reason);
                }
                return Ok(response);
            }
            Attempt::Refused(error) if mode == Mode::NoWait => {
                // The primary has no capacity now: simple work goes to the degradation target.
                let Some(degrade) = &req.profile.degrade else { return Err(error) };
                let _ = error;
                target = degrade.deployment;
                mode = Mode::Wait;
                reason = Some("degraded");
                continue;
            }
            Attempt::Refused(error) => (None, error),
            Attempt::Failed { class, error } => (Some(class), error),
        };
        let elapsed = gateway.clock.now().since(started);
        if let Some(failure) = class_of_failure
            && retries + 1 < class.retry_attempts
            && may_retry(failure)
        {
            let wait = backoff(retries, failure.retry_after(), &mut rand::rng());
            if elapsed + wait < class.retry_within && route.retry_budget.withdraw() {
                gateway.metrics.retry(&route.counters.labels, failure.as_str());
                retries += 1;
                tokio::time::sleep(wait).await;
                continue;
            }
        }
        let when = condition(class_of_failure, &error);
        match when.and_then(|w| pick_fallback(req.profile, &mut next_fallback, w)) {
            Some((deployment, why)) => {
                target = deployment;
                reason = Some(why.as_str());
                retries = 0;
                gateway.deployments[target].retry_budget.deposit();
            }
            None => return Err(error),
        }
    }
}

/// Whether a failed attempt may be tried again. A non-stream answer cut or stalled after
/// its headers never reached the client: as uncertain as a failure before the headers
/// (streams never come back here once their headers are in).
fn may_retry(failure: ErrorClass) -> bool {
    let after_headers = matches!(
        failure,
        ErrorClass::Timeout { phase: Phase::Streaming } | ErrorClass::ConnectionReset { phase: Phase::Streaming }
    );
    failure.may_retry(true) || after_headers
}

/// Whether the request may be degraded (its class or task is listed).
fn degradable(req: &Request<'_>) -> bool {
    let Some(degrade) = &req.profile.degrade else { return false };
    let class_index = req.caller.class_index;
    degrade.classes.contains(&class_index) || req.task.is_some_and(|t| degrade.tasks.iter().any(|d| d == t))
}

/// Whether the primary's breaker is open and a fallback takes over when it is unavailable.
fn fallback_now(req: &Request<'_>, route: &Route) -> bool {
    route.breaker.is_open(req.gateway.clock.now())
        && req.profile.fallbacks.iter().any(|f| f.when.contains(&When::PrimaryUnavailable))
}

/// The refusal of a deployment whose breaker is open.
fn unavailable(route: &Route, gateway: &Gateway) -> GatewayError {
    let retry_after = route.breaker.remaining(gateway.clock.now());
    GatewayError::ProviderUnavailable { deployment: route.name.to_string(), retry_after }
}

/// Which `when` condition a final failure meets.
fn condition(failure: Option<ErrorClass>, error: &GatewayError) -> Option<When> {
    match failure {
        Some(ErrorClass::ServerError | ErrorClass::Overloaded) => Some(When::Provider5xx),
        Some(ErrorClass::RateLimited { .. }) => Some(When::RateLimitAfterRetryBudget),
        Some(ErrorClass::ContextLength) => Some(When::ContextLengthNeeded),
        Some(ErrorClass::Timeout { .. } | ErrorClass::ConnectionReset { .. }) => Some(When::PrimaryUnavailable),
        Some(_) => None,
        None => match error {
            GatewayError::UpstreamUnreachable(_) | GatewayError::ProviderUnavailable { .. } => {
                Some(When::PrimaryUnavailable)
            }
            GatewayError::RateLimited(_) => Some(When::QueueWaitExceeded),
            _ => None,
        },
    }
}

/// The next fallback (after those already tried) whose conditions include `when`.
fn pick_fallback(profile: &Profile, next: &mut usize, when: When) -> Option<(usize, When)> {
    while let Some(fallback) = profile.fallbacks.get(*next) {
        *next += 1;
        if fallback.when.contains(&when) {
            return Some((fallback.deployment, when));
        }
    }
    None
}

fn flavor(kind: ProviderKind) -> ProviderFlavor {
    match kind {
        ProviderKind::OpenAi => ProviderFlavor::OpenAi,
        ProviderKind::Anthropic => ProviderFlavor::Anthropic,
        ProviderKind::Ollama => ProviderFlavor::Ollama,
    }
}

/// One admission and one upstream call on `deployment`.
async fn once(req: &Request<'_>, deployment: usize, mode: Mode, routed: &mut Option<usize>) -> Attempt {
    let gateway = req.gateway;
    let route = &gateway.deployments[deployment];
    let request = req.request;
    let mut admitted = match admit::admit(gateway, req.caller, request, req.profile, deployment, mode, routed).await {
        Ok(admitted) => admitted,
        Err(error) => return Attempt::Refused(error),
    };
    if let Some(early) = req.early {
        early.admitted(std::mem::take(&mut admitted.after));
    }
    let crossing = Crossing::of(request.protocol, route.kind);
    let upstream_protocol = crossing.upstream(request.protocol);
    let force_usage = request.stream && upstream_protocol == Protocol::OpenAiChat && !request.client_wants_stream_usage;
    let guard = SettleGuard::new(
        Arc::clone(&gateway.store),
        admitted.grant_id,
        admitted.sent_unanswered(),
        route.counters.used.clone(),
        Arc::clone(&route.queue),
        gateway.background.clone(),
    );
    let body = match crossing.request_body(request, &route.model, req.profile.default_max_tokens, force_usage) {
        Ok(body) => body,
        Err(e) => {
            guard.settle(Settlement::default());
            let message = format!("this request cannot be served by deployment `{}`: {e}", route.name);
            let code = sluice_provider::RequestErrorCode::InvalidValue;
            let error = sluice_provider::RequestError { param: e.field().map(str::to_owned), message, code };
            return Attempt::Refused(GatewayError::BadRequest(error));
        }
    };
    let outgoing = build_upstream(route, upstream_protocol, req.headers, body, req.trace);
    let timeout = route.attempt_timeout.min(gateway.upstream_timeout);
    // A non-stream answer must be whole by the same deadline as its headers.
    let deadline = tokio::time::Instant::now() + timeout;
    let sent = gateway.upstream.send(outgoing, timeout).await;
    let response = match sent {
        Ok(response) => response,
        Err(failure) => return transport_failure(failure, guard, route, gateway),
    };
    if response.status().is_success() {
        let now_ms = gateway.clock.unix_millis();
        let hints = sluice_provider::parse_hints(response.headers(), None, Some(now_ms));
        route.adaptive.on_response(response.status().as_u16(), &hints).await;
    }
    let call = Call { gateway, route, admitted: &admitted, crossing, deadline };
    if !response.status().is_success() {
        return provider_error(response, guard, &call).await;
    }
    route.breaker.success();
    let created = gateway.clock.unix_seconds();
    if request.stream {
        let include_usage = request.client_wants_stream_usage;
        let pipe = crossing.pipe(request.protocol, &request.model, force_usage, include_usage, created);
        let watch = relay::Watch::new(route, &gateway.streams);
        return Attempt::Done(relay::stream(response, guard, admitted, pipe, watch));
    }
    match buffered(response, guard, &call, &request.model, created).await {
        Ok(response) => Attempt::Done(response),
        Err((class, error)) => Attempt::Failed { class, error },
    }
}

/// One upstream call's context, once its response headers are in.
struct Call<'a> {
    gateway: &'a Gateway,
    route: &'a Route,
    admitted: &'a Admitted,
    crossing: Crossing,
    /// When the whole answer (non-stream) must be in.
    deadline: tokio::time::Instant,
}

fn transport_failure(failure: UpstreamError, guard: SettleGuard, route: &Route, gateway: &Gateway) -> Attempt {
    let provider = route.provider.to_string();
    let (class, error) = match failure {
        UpstreamError::Connect => {
            // Never reached the provider: everything comes back.
            guard.settle(Settlement::default());
            (ErrorClass::ConnectionReset { phase: Phase::Connect }, GatewayError::UpstreamUnreachable(provider))
        }
        // Sent, no answer: the estimate stands (the drop guard settles with it).
        UpstreamError::Timeout => {
            (ErrorClass::Timeout { phase: Phase::BeforeHeaders }, GatewayError::UpstreamTimeout(provider))
        }
        UpstreamError::NoResponse => {
            (ErrorClass::ConnectionReset { phase: Phase::BeforeHeaders }, GatewayError::UpstreamUnreachable(provider))
        }
    };
    health_failure(route, gateway, None);
    Attempt::Failed { class, error }
}

/// Counts a failure against the deployment's health; an opened breaker pauses the
/// deployment in the store, for every instance.
fn health_failure(route: &Route, gateway: &Gateway, hint: Option<Duration>) {
    if let Some(cooldown) = route.breaker.failure(gateway.clock.now(), hint) {
        tracing::warn!(deployment = %route.name, ?cooldown, "breaker open: deployment held back");
        let store = Arc::clone(&gateway.store);
        let scope = route.scope;
        gateway.background.spawn(async move {
            if let Err(e) = store.pause(scope, cooldown).await {
                tracing::warn!(error = %e, "could not record the breaker's pause");
            }
        });
    }
}

/// A body that could not be read whole: how it is classed (a stall is a timeout after the
/// headers, retryable) and what the client is told. Logged and counted for the operator.
fn body_failure(call: &Call<'_>, failure: BodyError, what: &'static str, limit: usize) -> (ErrorClass, GatewayError) {
    let route = call.route;
    let deployment = route.name.to_string();
    let (class, error, reason) = match failure {
        BodyError::Stalled => {
            health_failure(route, call.gateway, None);
            tracing::warn!(deployment = %route.name, timeout = ?route.attempt_timeout, "provider stalled mid-answer; the attempt is cut");
            let class = ErrorClass::Timeout { phase: Phase::Streaming };
            (class, GatewayError::UpstreamStalled(deployment), "stalled")
        }
        BodyError::TooLarge => {
            tracing::warn!(deployment = %route.name, limit, "provider sent {what} larger than the gateway reads");
            (ErrorClass::Other, GatewayError::UpstreamTooLarge { deployment, what, limit }, "too_large")
        }
        BodyError::Broken => {
            let class = ErrorClass::ConnectionReset { phase: Phase::Streaming };
            return (class, GatewayError::UpstreamUnreachable(route.provider.to_string()));
        }
    };
    call.gateway.metrics.upstream_failure(&route.counters.labels, reason);
    (class, error)
}

async fn buffered(
    response: http::Response<hyper::body::Incoming>,
    guard: SettleGuard,
    call: &Call<'_>,
    client_model: &str,
    created: u64,
) -> Result<Response<Body>, (ErrorClass, GatewayError)> {
    let (parts, body) = response.into_parts();
    // Unread or cut: the estimate stands (the provider may have done the work); the drop
    // guard settles with it.
    let bytes = upstream::read_body(body, MAX_RESPONSE_BYTES, call.deadline)
        .await
        .map_err(|e| body_failure(call, e, "a response", MAX_RESPONSE_BYTES))?;
    let admitted = call.admitted;
    let upstream_protocol = call.crossing.upstream(admitted.protocol);
    let settlement = match usage_from_response(upstream_protocol, &bytes) {
        Some(usage) => admitted.settlement(usage),
        None => admitted.sent_unanswered(),
    };
    guard.settle(settlement);
    let body = match call.crossing.response_body(&bytes, client_model, created) {
        Ok(body) => body,
        Err(e) => {
            let route = call.route;
            tracing::warn!(deployment = %route.name, error = %e, "could not translate a provider response");
            call.gateway.metrics.upstream_failure(&route.counters.labels, "bad_response");
            return Err((ErrorClass::Other, GatewayError::UpstreamBadResponse(route.name.to_string())));
        }
    };
    let mut response = pass_through(parts.status, &parts.headers, Body::from(body));
    if call.crossing != Crossing::Same {
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    }
    Ok(response)
}

async fn provider_error(
    response: http::Response<hyper::body::Incoming>,
    guard: SettleGuard,
    call: &Call<'_>,
) -> Attempt {
    let (route, gateway) = (call.route, call.gateway);
    // The provider saw the request: its request unit stays spent, tokens come back.
    guard.settle(Settlement { used: Cost::request(0, 0), upstream: Cost::request(0, 0) });
    let (parts, body) = response.into_parts();
    let read = upstream::read_body(body, MAX_ERROR_BYTES, call.deadline).await;
    let bytes = read.clone().unwrap_or_default();
    // The provider's hints are read once: for classification, the pause and the adaptive state.
    let now_ms = gateway.clock.unix_millis();
    let hints = sluice_provider::parse_hints(&parts.headers, Some(&bytes), Some(now_ms));
    let class = classify_with_hints(parts.status.as_u16(), &hints, &bytes, flavor(route.kind));
    if parts.status == StatusCode::TOO_MANY_REQUESTS {
        route.adaptive.on_response(parts.status.as_u16(), &hints).await;
        let wait = hints.retry_after.or(class.retry_after());
        // Coordinated backoff: every user of the store waits out the provider's hint.
        let pause = wait.unwrap_or(PROVIDER_429_PAUSE).min(MAX_PROVIDER_PAUSE);
        if let Err(e) = gateway.store.pause(route.scope, pause).await {
            tracing::warn!(error = %e, "could not record the provider's pause");
        }
        gateway.metrics.decision("provider_rejected", "provider");
        let hit = Hit { limit_type: "provider".into(), ..admit::hit_labels(route) };
        gateway.metrics.rate_limit_hits.get_or_create(&hit).inc();
        let error = GatewayError::RateLimited(Box::new(call.admitted.provider_rejection(route, wait)));
        return Attempt::Failed { class, error };
    }
    if matches!(class, ErrorClass::ServerError | ErrorClass::Overloaded) {
        health_failure(route, gateway, class.retry_after());
    }
    if let Err(failure) = read {
        let (_, error) = body_failure(call, failure, "an error response", MAX_ERROR_BYTES);
        return Attempt::Failed { class, error };
    }
    if matches!(class, ErrorClass::Auth | ErrorClass::Permission) {
        // The gateway's key was refused: the operator's problem; the provider's text (which
        // may quote the key) stays out of the logs and away from the tenant.
        tracing::warn!(deployment = %route.name, status = parts.status.as_u16(), "provider refused the gateway's credentials");
        gateway.metrics.upstream_failure(&route.counters.labels, "auth");
        return Attempt::Failed { class, error: GatewayError::UpstreamAuthFailed(route.name.to_string()) };
    }
    let passed = passed_error(parts.status, &parts.headers, &bytes, call);
    if class.retryable() || class == ErrorClass::ContextLength {
        return Attempt::Failed { class, error: GatewayError::Upstream(Box::new(passed)) };
    }
    Attempt::Done(passed)
}

/// The provider's error for the client, anything that looks like a key scrubbed; served by
/// the other protocol, in the client's own shape, so its SDK reads the provider's message.
fn passed_error(status: StatusCode, headers: &http::HeaderMap, bytes: &[u8], call: &Call<'_>) -> Response<Body> {
    let key = call.route.key.as_ref().and_then(|k| k.secret());
    let bytes = scrub::scrub_bytes(bytes, key);
    let mut passed = match call.crossing.error_body(status.as_u16(), &bytes) {
        Some(body) => pass_through(status, headers, Body::from(body)),
        None => pass_through(status, headers, Body::from(bytes)),
    };
    if call.crossing != Crossing::Same {
        passed.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    }
    passed
}
