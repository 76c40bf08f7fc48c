//! Attempts of one request: each asks [`routing`](super::routing) where to go, is
//! admitted there, sent, and its answer read; what a failure leads to (a retry, a
//! fallback, degradation) is the routing plan's decision. Nothing is retried once response
//! bytes went to the client; a non-stream answer cut or stalled after its headers is (none
//! of it reached the client). Every attempt is bounded: headers and a non-stream body by
//! `attempt_timeout`, a stream's gaps by the relay's idle timeout.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Response, StatusCode};
use sluice_provider::{ErrorClass, Phase, classify_with_hints, usage_from_response};
use sluice_quota::{Cost, Nanos, Settlement};

use super::admission::{self, Admitted, Mode};
use super::context::Request;
use super::outbound::{self, Sent};
use super::relay::{self, pass_through};
use super::routing::{self, Next, Plan, RetryLimits};
use super::settle::{SettleGuard, Terms, UsageSource};
use crate::access::Line;
use crate::crossing::{Crossing, Pipe};
use crate::error::{GatewayError, RateLimitInfo};
use crate::metrics::{Bound, Hit};
use crate::state::{Gateway, Route};
use sluice_upstream::client::{self as upstream, BodyError, UpstreamError};
use sluice_upstream::scrub;

/// How long a deployment is paused after a provider 429 that gave no hint.
const PROVIDER_429_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause taken from a provider hint (a daily-quota hint is not a reason to stall).
const MAX_PROVIDER_PAUSE: Duration = Duration::from_secs(120);
/// The time a response's request spent waiting in queues, in milliseconds (absent when it
/// did not queue).
const QUEUED_MS: &str = "x-sluice-queued-ms";
/// The wait predicted when the request joined its queues (their ETAs then), beside
/// [`QUEUED_MS`].
const PREDICTED_MS: &str = "x-sluice-predicted-ms";
/// Largest provider response body the gateway buffers (non-stream).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Largest provider error body read.
const MAX_ERROR_BYTES: usize = 1024 * 1024;

/// What a request came to, and the deployment it was last admitted on (none when it was
/// refused before any deployment was tried): the request metrics' labels.
pub struct Served {
    /// The deployment of the last admission asked.
    pub deployment: Option<usize>,
    /// The response, or the failure the client gets.
    pub result: Result<Response<Body>, GatewayError>,
    /// The request's access-log line (none before the caller was known).
    pub access: Option<Arc<Line>>,
}

impl Served {
    /// A request refused before any deployment was tried.
    #[must_use]
    pub fn refused(error: GatewayError) -> Self {
        Self { deployment: None, result: Err(error), access: None }
    }

    /// With its access-log line.
    #[must_use]
    pub fn logged(self, access: Arc<Line>) -> Self {
        Self { access: Some(access), ..self }
    }
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

/// Runs the request to a response: primary, retries, fallbacks, degradation, as its
/// routing [`Plan`] decides. The result is the last failure when every allowed attempt
/// failed, or the admission refusal.
pub async fn run(req: &Request<'_>) -> Served {
    let gateway = req.gateway;
    let class = &req.caller.class;
    let started = gateway.clock.now();
    let deadline = req.deadline.since(started);
    let limits = RetryLimits { attempts: class.retry_attempts, within: class.retry_within, deadline };
    let degradable = routing::degradable(req.profile, req.caller.class_index, req.task);
    let mut plan = Plan::new(req.profile, limits, degradable);
    let mut deployment = None;
    gateway.deployments[plan.target()].retry_budget.deposit();
    loop {
        let route = &gateway.deployments[plan.target()];
        let outcome = if plan.skips_primary(route.breaker.is_open(gateway.clock.now())) {
            Attempt::Refused(unavailable(route, gateway))
        } else {
            deployment = Some(plan.target());
            once(req, plan.target(), plan.mode()).await
        };
        let (class, error) = match outcome {
            Attempt::Done(mut response) => {
                if let Some(reason) = plan.rerouted() {
                    let from = &gateway.deployments[req.profile.deployment].counters.labels;
                    gateway.metrics.fallback(from, &route.counters.labels, reason);
                }
                if let Some(queued) = req.queued() {
                    let ms = |d: Duration| http::HeaderValue::from(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                    response.headers_mut().insert(QUEUED_MS, ms(queued.waited));
                    response.headers_mut().insert(PREDICTED_MS, ms(queued.predicted));
                }
                return Served { deployment, result: Ok(response), access: None };
            }
            Attempt::Refused(error) => (None, error),
            Attempt::Failed { class, error } => (Some(class), error),
        };
        let elapsed = gateway.clock.now().since(started);
        // Decided before any wait: the random source is not held across it.
        let next = plan.next(class, &error, elapsed, &mut rand::rng(), || route.retry_budget.withdraw());
        match next {
            Next::Retry { wait, class } => {
                gateway.metrics.retry(&route.counters.labels, class.as_str());
                gateway.clock.sleep(wait).await;
            }
            Next::Fallback => gateway.deployments[plan.target()].retry_budget.deposit(),
            Next::Degrade => {}
            Next::GiveUp => return Served { deployment, result: Err(error), access: None },
        }
    }
}

/// The refusal of a deployment whose breaker is open.
fn unavailable(route: &Route, gateway: &Gateway) -> GatewayError {
    let retry_after = route.breaker.remaining(gateway.clock.now());
    GatewayError::ProviderUnavailable { deployment: route.name.to_string(), retry_after }
}

/// One admission and one upstream call on `deployment`.
async fn once(req: &Request<'_>, deployment: usize, mode: Mode) -> Attempt {
    let gateway = req.gateway;
    let route = &gateway.deployments[deployment];
    let request = req.request;
    req.access.attempt(&route.name);
    let Admitted { terms, after, granted } = match admission::admit(req, deployment, mode).await {
        Ok(admitted) => admitted,
        Err(error) => return Attempt::Refused(error),
    };
    if let Some(early) = req.early {
        early.admitted(after);
    }
    let crossing = Crossing::of(request.protocol, route.target.kind);
    let upstream_protocol = crossing.upstream(request.protocol);
    let force_usage = request.stream && upstream_protocol.is_openai_chunks() && !request.client_wants_stream_usage;
    let guard = SettleGuard::new(
        Arc::clone(&gateway.store),
        terms.id,
        terms.sent_unanswered(),
        route.counters.used.clone(),
        Arc::clone(&route.queue),
        gateway.background.clone(),
    )
    .reporting_to(Arc::clone(req.access))
    .reserving(route.counters.reserved.clone(), terms.input.saturating_add(terms.output))
    .counting_unanswered(terms.unanswered_usage());
    let body = crossing
        .request_body(request, &route.target.model, req.profile.default_max_tokens, force_usage)
        .and_then(|body| sluice_upstream::providers::wire_body(&route.target, upstream_protocol, body));
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            guard.settle(Settlement::default());
            return Attempt::Refused(untranslatable(route, &e));
        }
    };
    if let Err(e) = route.target.key.refresh(&gateway.upstream, gateway.clock.unix_seconds()).await {
        // Never reached the provider: everything comes back.
        guard.settle(Settlement::default());
        tracing::warn!(deployment = %route.name, error = %e, "no access token for the provider");
        gateway.metrics.upstream_failure(&route.counters.labels, "auth");
        return Attempt::Failed {
            class: ErrorClass::Auth,
            error: GatewayError::UpstreamAuthFailed(route.name.to_string()),
        };
    }
    let at = (request.stream, gateway.clock.unix_millis());
    let outgoing = outbound::build_upstream(route, upstream_protocol, req.headers, body, req.trace, at);
    let sent_at = gateway.clock.now();
    let Sent { response, deadline } = outbound::send(gateway, route, outgoing, (&terms, granted)).await;
    req.access.answered(gateway.clock.now().since(sent_at));
    let response = match response {
        Ok(response) => response,
        Err(failure) => return transport_failure(failure, guard, route, gateway),
    };
    if response.status().is_success() {
        let now_ms = gateway.clock.unix_millis();
        let hints = sluice_provider::parse_hints(response.headers(), None, Some(now_ms));
        route.adaptive.on_response(response.status().as_u16(), &hints).await;
    }
    let call = Call { req, route, terms: &terms, crossing, deadline };
    if !response.status().is_success() {
        return provider_error(response, guard, &call).await;
    }
    route.breaker.success();
    let created = gateway.clock.unix_seconds();
    if request.stream {
        let include_usage = request.client_wants_stream_usage;
        let mut pipe = crossing.pipe(request.protocol, &request.model, force_usage, include_usage, created);
        if let Some(decoder) = sluice_upstream::google::stream_decoder(&route.target, &request.model, created) {
            pipe = Pipe::Decoded(Box::new(decoder), Box::new(pipe));
        }
        let watch = relay::Watch::new(route, gateway, request.protocol);
        let wire = sluice_upstream::providers::wire_stream(&route.target, response.headers(), &request.model);
        return Attempt::Done(relay::stream(response, guard, terms, (wire, pipe), watch));
    }
    match buffered(response, guard, &call, &request.model, created).await {
        Ok(response) => Attempt::Done(response),
        Err((class, error)) => Attempt::Failed { class, error },
    }
}

/// The refusal of a request the deployment's protocol cannot carry (translation failed).
pub(super) fn untranslatable(route: &Route, e: &sluice_provider::TranslateError) -> GatewayError {
    let message = format!("this request cannot be served by deployment `{}`: {e}", route.name);
    let code = sluice_provider::RequestErrorCode::InvalidValue;
    GatewayError::BadRequest(sluice_provider::RequestError { param: e.field().map(str::to_owned), message, code })
}

/// One upstream call's context, once its response headers are in.
struct Call<'a> {
    req: &'a Request<'a>,
    route: &'a Route,
    terms: &'a Terms,
    crossing: Crossing,
    /// When the whole answer (non-stream) must be in.
    deadline: Nanos,
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
            health_failure(route, call.req.gateway, None);
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
    call.req.gateway.metrics.upstream_failure(&route.counters.labels, reason);
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
    let bytes = upstream::read_body(body, MAX_RESPONSE_BYTES, call.req.gateway.clock.sleep_until(call.deadline))
        .await
        .map_err(|e| body_failure(call, e, "a response", MAX_RESPONSE_BYTES))?;
    let bytes =
        sluice_upstream::providers::wire_response(&call.route.target, &parts.headers, bytes, client_model, created)
            .map_err(|e| bad_response(call, &e))?;
    let terms = call.terms;
    let upstream_protocol = call.crossing.upstream(terms.protocol);
    let usage = usage_from_response(upstream_protocol, &bytes);
    let (settlement, source) = match usage {
        Some(usage) => (terms.settlement(usage), UsageSource::Reported),
        None => {
            terms.unanswered_usage().record();
            (terms.sent_unanswered(), UsageSource::Estimated)
        }
    };
    guard.settle_as(settlement, source);
    if let Some(memo) = &terms.memo {
        // Before the client has the id, so its continuation finds the record.
        memo.record_body(&bytes, usage.as_ref()).await;
    }
    // Nothing crosses: the provider's bytes go to the client as they are, uncopied.
    let body = match call.crossing {
        Crossing::Same => bytes,
        crossing => match crossing.response_body(&bytes, client_model, created) {
            Ok(body) => bytes::Bytes::from(body),
            Err(e) => return Err(bad_response(call, &e)),
        },
    };
    let mut response = pass_through(parts.status, &parts.headers, Body::from(body));
    if call.crossing != Crossing::Same {
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    }
    Ok(response)
}

/// A success body that could not be translated for the client: logged, counted, a 502.
fn bad_response(call: &Call<'_>, e: &sluice_provider::TranslateError) -> (ErrorClass, GatewayError) {
    let route = call.route;
    tracing::warn!(deployment = %route.name, error = %e, "could not translate a provider response");
    call.req.gateway.metrics.upstream_failure(&route.counters.labels, "bad_response");
    (ErrorClass::Other, GatewayError::UpstreamBadResponse(route.name.to_string()))
}

async fn provider_error(
    response: http::Response<hyper::body::Incoming>,
    guard: SettleGuard,
    call: &Call<'_>,
) -> Attempt {
    let (route, gateway) = (call.route, call.req.gateway);
    // The provider saw the request: its request unit stays spent, tokens come back.
    guard.settle(Settlement { used: Cost::request(0, 0), upstream: Cost::request(0, 0) });
    let (parts, body) = response.into_parts();
    let read = upstream::read_body(body, MAX_ERROR_BYTES, call.req.gateway.clock.sleep_until(call.deadline)).await;
    let bytes = read.clone().unwrap_or_default();
    let bytes =
        sluice_upstream::providers::wire_error(&route.target, parts.status.as_u16(), &parts.headers, bytes.to_vec());
    // The provider's hints are read once: for classification, the pause and the adaptive state.
    let now_ms = gateway.clock.unix_millis();
    let hints = sluice_provider::parse_hints(&parts.headers, Some(&bytes), Some(now_ms));
    let class = classify_with_hints(
        parts.status.as_u16(),
        &hints,
        &bytes,
        sluice_upstream::providers::error_flavor(route.target.kind, &route.target.api),
    );
    if parts.status == StatusCode::TOO_MANY_REQUESTS {
        let error = provider_429(call, &hints, class).await;
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
    let bytes =
        crate::crossing::google_error_body(&route.target.api, route.target.kind, parts.status.as_u16(), bytes.into());
    let passed = passed_error(parts.status, &parts.headers, &bytes, call);
    if class.retryable() || class == ErrorClass::ContextLength {
        return Attempt::Failed { class, error: GatewayError::Upstream(Box::new(passed)) };
    }
    Attempt::Done(passed)
}

/// The provider's error for the client, anything that looks like a key scrubbed; served by
/// the other protocol, in the client's own shape, so its SDK reads the provider's message.
fn passed_error(status: StatusCode, headers: &http::HeaderMap, bytes: &[u8], call: &Call<'_>) -> Response<Body> {
    let key = call.route.target.key.current();
    let bytes = scrub::scrub_bytes(bytes, key.as_ref().and_then(|k| k.secret()));
    let mut passed = match call.crossing.error_body(status.as_u16(), &bytes) {
        Some(body) => pass_through(status, headers, Body::from(body)),
        None => pass_through(status, headers, Body::from(bytes)),
    };
    if call.crossing != Crossing::Same {
        passed.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    }
    passed
}

/// A provider 429 on what the gateway admitted: the deployment's adaptive limits learn of
/// it, every user of the store waits out the provider's hint (coordinated backoff), and
/// the client's 429 says the gateway had admitted the request.
async fn provider_429(call: &Call<'_>, hints: &sluice_provider::RateLimitHints, class: ErrorClass) -> GatewayError {
    let (route, gateway) = (call.route, call.req.gateway);
    let short_window = route.adaptive.on_response(StatusCode::TOO_MANY_REQUESTS.as_u16(), hints).await;
    let wait = hints.retry_after.or(class.retry_after());
    // Without a hint, a short window's refusal waits one window; any other, the default.
    let pause = wait.or(short_window).unwrap_or(PROVIDER_429_PAUSE).min(MAX_PROVIDER_PAUSE);
    if let Err(e) = gateway.store.pause(route.scope, pause).await {
        tracing::warn!(error = %e, "could not record the provider's pause");
    }
    // The provider's own quota refused: the deployment is what bound it.
    let bound = Bound { scope_kind: "deployment", dimension: crate::binding::NONE };
    gateway.metrics.bound_decision("provider_rejected", "provider", bound);
    let hit = Hit { limit_type: "provider".into(), scope_kind: bound.scope_kind, ..admission::hit_labels(route) };
    call.req.access.bound(bound.scope_kind, Some(&route.name), bound.dimension);
    gateway.metrics.rate_limit_hits.get_or_create(&hit).inc();
    let terms = call.terms;
    let quote = admission::Quote {
        input: terms.input,
        output: terms.output,
        output_weight: terms.output_weight,
        money: terms.money,
    };
    let (caller, profile) = (call.req.caller, call.req.profile);
    GatewayError::RateLimited(Box::new(RateLimitInfo {
        limiter: "provider".into(),
        // Everyone waits out the pause: a client told so, on either protocol.
        retry_after: Some(wait.unwrap_or(pause)),
        gateway_decision: "admitted_then_provider_rejected",
        ..admission::refusal_info(caller, profile, route, quote)
    }))
}
