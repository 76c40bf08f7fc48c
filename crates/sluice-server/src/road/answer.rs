//! The provider's answer, read for the attempt and relayed to the client. Its head is
//! judged first: a transport failure or a provider error becomes the attempt's failure
//! (classified; a provider 429 in [`provider_429`] pauses the deployment for every
//! instance; 5xx count against the breaker), a success teaches the adaptive state. A
//! non-stream body is read whole within the attempt's deadline, settled on its usage and
//! passed back (translated if needed); [`pass_through`] keeps the head a client may read
//! (status, content type, request id). Streams: passed through chunk by chunk
//! (backpressure comes from the client's reads), watched by a tap for usage and by a
//! [`DeliveredCount`] for the output that passed, settled when they end, break, or the
//! client leaves. Settling goes through the [`Settle`] the driver hands in (the settle
//! step's guard); this step imports no other.
//!
//! A stream never hangs: a provider silent for the deployment's `stream_idle_timeout`
//! (before the first piece too) and a stream still running when the shutdown grace is
//! over both end with the protocol's explicit error event; neither is retried (bytes went
//! to the client).
//!
//! A client that leaves mid-stream does not end the provider's answer at once: the rest is
//! read (and dropped) for up to the deployment's `stream_drain_timeout`, so the provider's
//! final usage settles the request rather than a count of what passed. Draining runs on
//! the gateway's background tracker, which shutdown waits for, and stops at the shutdown
//! cut.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode, header};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use sluice_provider::{
    ConverseToAnthropicStream, DeliveredCount, ErrorClass, Phase, Protocol, classify_with_hints, read_answer,
};
use sluice_quota::clock::within;
use sluice_quota::{Clock, Cost, Nanos, Settlement};
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use super::context::{Attempt, Quote, Request, Settle, Streamed, Terms, hit_labels, refusal_info};
use crate::crossing::{Crossing, Pipe};
use crate::error::{self, Envelope, GatewayError, RateLimitInfo};
use crate::metrics::{Bound, Hit};
use crate::state::{Gateway, Route};
use sluice_upstream::client::{self as upstream, BodyError, UpstreamError};
use sluice_upstream::scrub;

/// How long a deployment is paused after a provider 429 that gave no hint.
const PROVIDER_429_PAUSE: Duration = Duration::from_secs(1);
/// The longest pause taken from a provider hint (a daily-quota hint is not a reason to stall).
const MAX_PROVIDER_PAUSE: Duration = Duration::from_secs(120);
/// Largest provider response body the gateway buffers (non-stream).
const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Largest provider error body read.
const MAX_ERROR_BYTES: usize = 1024 * 1024;

/// Reads `response`, the answer `route` sent to `req`'s attempt (or why none came), within
/// `deadline` for a non-stream body: the attempt's outcome. `crossing` carries it back to
/// the client's protocol (`force_usage`: the usage chunk was asked for, the client did not
/// ask, so it is hidden again); `settle` settles the reservation of `terms` once the
/// usage is known, or on its fallback when dropped.
pub async fn answer<S: Settle>(
    req: &Request<'_>,
    route: &Route,
    (terms, settle): (Terms, S),
    crossing: Crossing,
    (response, deadline): (Result<http::Response<Incoming>, UpstreamError>, Nanos),
    force_usage: bool,
) -> Attempt {
    let (gateway, request) = (req.gateway, req.request);
    let response = match response {
        Ok(response) => response,
        Err(failure) => return transport_failure(failure, settle, route, gateway),
    };
    if response.status().is_success() {
        let now_ms = gateway.services.clock.unix_millis();
        let hints = sluice_provider::parse_hints(response.headers(), None, Some(now_ms));
        route.adaptive.on_response(response.status().as_u16(), &hints).await;
    }
    let call = Call { req, route, terms: &terms, crossing, deadline };
    if !response.status().is_success() {
        return provider_error(response, settle, &call).await;
    }
    route.breaker.success();
    let created = gateway.services.clock.unix_seconds();
    if request.stream {
        let include_usage = request.client_wants_stream_usage;
        let mut pipe = crossing.pipe(request.protocol, &request.model, force_usage, include_usage, created);
        if let Some(decoder) = sluice_upstream::google::stream_decoder(&route.target, &request.model, created) {
            pipe = Pipe::Decoded(Box::new(decoder), Box::new(pipe));
        }
        let watch = Watch::new(route, gateway, request.protocol);
        let wire = sluice_upstream::providers::wire_stream(&route.target, response.headers(), &request.model);
        return Attempt::Done(stream(response, settle, terms, (wire, pipe), watch));
    }
    match buffered(response, settle, &call, &request.model, created).await {
        Ok(response) => Attempt::Done(response),
        Err((class, error)) => Attempt::Failed { class, error },
    }
}

/// What a stream is watched for: its deployment's silence and drain bounds, the shutdown
/// cut, and the output it delivers.
struct Watch {
    bounds: Bounds,
    delivered: DeliveredCount,
}

/// A stream's time bounds (on the gateway's clock) and where its drain runs.
struct Bounds {
    clock: Arc<dyn Clock>,
    deployment: Arc<str>,
    idle: Duration,
    drain: Duration,
    cut: watch::Receiver<bool>,
    background: TaskTracker,
}

impl Watch {
    /// The watch of a `protocol` (the client's) stream from `route`.
    fn new(route: &Route, gateway: &Gateway, protocol: Protocol) -> Self {
        let bounds = Bounds {
            clock: Arc::clone(&gateway.services.clock),
            deployment: Arc::clone(&route.name),
            idle: route.stream_idle_timeout,
            drain: route.stream_drain_timeout,
            cut: gateway.services.streams.subscribe(),
            background: gateway.services.background.clone(),
        };
        Self {
            bounds,
            delivered: DeliveredCount::new(protocol, Arc::clone(&gateway.services.estimator), route.tokenizer),
        }
    }
}

/// A stream not yet settled: what it reads, how it is piped, what settles it.
struct Flow<S> {
    body: Incoming,
    /// Reads the provider's own stream framing into the pipe's (Bedrock's event stream).
    wire: Option<ConverseToAnthropicStream>,
    pipe: Pipe,
    settle: S,
    terms: Terms,
    /// The output that passed to the client (or, draining, was read).
    delivered: DeliveredCount,
}

struct Relay<S: Settle> {
    /// Taken when the stream is settled, or handed to a drain when the client leaves.
    flow: Option<Flow<S>>,
    bounds: Bounds,
}

/// Why a stream ends before its provider ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The provider broke off (or ended without its terminal event).
    Interrupted,
    /// Nothing came for the idle timeout.
    Stalled,
    /// The gateway's shutdown grace is over.
    ShuttingDown,
}

/// Relays a successful streaming response to the client through `pipe` (after `wire`,
/// when the provider frames its stream its own way); `settle` settles it when it ends.
fn stream<S: Settle>(
    response: http::Response<Incoming>,
    settle: S,
    terms: Terms,
    (wire, pipe): (Option<ConverseToAnthropicStream>, Pipe),
    watch: Watch,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let Watch { bounds, delivered } = watch;
    let relay = Relay { flow: Some(Flow { body, wire, pipe, settle, terms, delivered }), bounds };
    let chunks = futures_util::stream::unfold(relay, next_chunk);
    let mut response = pass_through(parts.status, &parts.headers, Body::from_stream(chunks));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

/// A response with the provider's status, content type and request id.
pub fn pass_through(status: StatusCode, upstream: &HeaderMap, body: Body) -> Response<Body> {
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

async fn next_chunk<S: Settle>(mut relay: Relay<S>) -> Option<(Result<Bytes, Infallible>, Relay<S>)> {
    loop {
        let flow = relay.flow.as_mut()?;
        let frame = tokio::select! {
            biased;
            () = cut(&mut relay.bounds.cut) => Err(End::ShuttingDown),
            frame = within(relay.bounds.clock.as_ref(), relay.bounds.idle, flow.body.frame()) => frame.ok_or(End::Stalled),
        };
        let end = match frame {
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else { continue };
                let out = flow.push(&data);
                flow.remember().await;
                if !out.is_empty() {
                    flow.delivered.observe(&out);
                    if let Some(line) = flow.settle.access() {
                        line.first_piece();
                    }
                    return Some((Ok(out), relay));
                }
                continue;
            }
            Ok(Some(Err(_)) | None) => End::Interrupted,
            Err(end) => end,
        };
        if end == End::Stalled {
            let (deployment, idle) = (&relay.bounds.deployment, relay.bounds.idle);
            tracing::warn!(%deployment, ?idle, "provider stream stalled; ended with an error event");
        }
        let mut flow = relay.flow.take()?;
        if let Some(line) = flow.settle.access() {
            line.stream_ended(match end {
                End::Interrupted if flow.pipe.ended() => "completed",
                End::Interrupted => "provider_cut",
                End::Stalled => "provider_stalled",
                End::ShuttingDown => "shutdown",
            });
        }
        let tail = flow.end(&interruption(flow.terms.protocol, end));
        flow.settle();
        return (!tail.is_empty()).then_some((Ok(tail), relay));
    }
}

/// Resolves once the cut is signalled (never, if its sender is gone).
async fn cut(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|cut| *cut).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl<S: Settle> Flow<S> {
    /// Bytes for the client from an upstream chunk.
    fn push(&mut self, data: &Bytes) -> Bytes {
        match self.wire.as_mut() {
            Some(wire) => {
                let data = wire.push(data);
                self.pipe.push(&data)
            }
            None => self.pipe.push(data),
        }
    }

    /// The last bytes (counted as passed): what the wire and the pipe still hold, and
    /// `interruption` when the provider's stream ended without its terminal event.
    fn end(&mut self, interruption: &[u8]) -> Bytes {
        let mut tail = bytes::BytesMut::new();
        if let Some(wire) = self.wire.as_mut() {
            tail.extend_from_slice(&self.pipe.push(&wire.finish()));
        }
        tail.extend_from_slice(&self.pipe.end(interruption));
        let tail = tail.freeze();
        self.delivered.observe(&tail);
        tail
    }

    /// Once a Responses stream's usage is in, remembers what it left behind, before the
    /// client has the final event (its continuation then finds the record).
    async fn remember(&mut self) {
        let (Some(usage), Some(id)) = (self.pipe.usage(), self.pipe.response_id()) else { return };
        let Some(memo) = self.terms.memo.take() else { return };
        memo.record(id, Some(&usage)).await;
    }

    /// Settles on the provider's final usage, or on the output counted passing.
    fn settle(self) {
        if let Some(line) = self.settle.access() {
            line.finish_reasons(self.delivered.finish_reasons());
        }
        let counted = self.delivered.tokens();
        let seen = Streamed { usage: self.pipe.usage(), usage_final: self.pipe.usage_final(), counted };
        self.settle.streamed(&self.terms, seen);
    }

    /// The client left: reads the rest of the provider's answer (dropping it) until it
    /// ends, for at most `limit`, a silence of `idle`, or the shutdown `cut`; then settles.
    /// What is read counts as output too: the provider generated it.
    async fn drain(mut self, clock: Arc<dyn Clock>, limit: Duration, idle: Duration, mut cut: watch::Receiver<bool>) {
        let read = async {
            while !self.pipe.ended() {
                match within(clock.as_ref(), idle, self.body.frame()).await {
                    Some(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            let out = self.push(&data);
                            self.delivered.observe(&out);
                            self.remember().await;
                        }
                    }
                    Some(Some(Err(_)) | None) | None => break,
                }
            }
        };
        tokio::select! {
            biased;
            () = self::cut(&mut cut) => {}
            _ = within(clock.as_ref(), limit, read) => {}
        }
        self.end(b"");
        self.settle();
    }
}

impl<S: Settle> Drop for Relay<S> {
    fn drop(&mut self) {
        let Some(flow) = self.flow.take() else { return };
        // The client went away mid-stream: drain the provider's answer for its usage, or
        // settle on what passed.
        if let Some(line) = flow.settle.access() {
            line.stream_ended(if flow.pipe.ended() { "completed" } else { "client_cut" });
        }
        let bounds = &self.bounds;
        let shutting_down = *bounds.cut.borrow();
        if bounds.drain.is_zero()
            || shutting_down
            || flow.pipe.ended()
            || tokio::runtime::Handle::try_current().is_err()
        {
            flow.settle();
            return;
        }
        let clock = Arc::clone(&bounds.clock);
        bounds.background.spawn(flow.drain(clock, bounds.drain, bounds.idle, bounds.cut.clone()));
    }
}

/// The explicit event a client receives when its stream ends early.
fn interruption(protocol: Protocol, end: End) -> Vec<u8> {
    let (message, code) = match end {
        End::Interrupted => ("the provider's stream was interrupted", "upstream_stream_interrupted"),
        End::Stalled => {
            ("the provider's stream stalled: nothing came within the idle timeout", "upstream_stream_stalled")
        }
        End::ShuttingDown => ("the gateway is shutting down; the stream was ended", "shutting_down"),
    };
    let event = match protocol {
        Protocol::AnthropicMessages => {
            let error = error::plain_body(Envelope::Anthropic, "api_error", message, None);
            format!("event: error\ndata: {error}\n\n")
        }
        // The Responses protocol's own error event (the client's SDK yields it as such).
        Protocol::OpenAiResponses => {
            let error = error::responses_error_event(code, message);
            format!("event: error\ndata: {error}\n\n")
        }
        _ => {
            let error = error::plain_body(Envelope::OpenAi, "stream_interrupted", message, Some(code));
            format!("data: {error}\n\n")
        }
    };
    event.into_bytes()
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

fn transport_failure<S: Settle>(failure: UpstreamError, settle: S, route: &Route, gateway: &Gateway) -> Attempt {
    let provider = route.provider.to_string();
    let (class, error) = match failure {
        UpstreamError::Connect => {
            // Never reached the provider: everything comes back.
            settle.settle(Settlement::default());
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
    let opened = route.breaker.failure(gateway.services.clock.now(), hint);
    let pause = match opened {
        Some(cooldown) => {
            tracing::warn!(deployment = %route.name, ?cooldown, "breaker open: deployment held back");
            gateway.services.metrics.cooldown(&route.name, "breaker");
            cooldown
        }
        // A pool's member is held back for the fleet at once: the others serve meanwhile.
        None if route.pooled => {
            gateway.services.metrics.cooldown(&route.name, "pool_failure");
            // 1 s at the first failure, doubling with each one after it until the breaker
            // opens; a provider's longer hint wins (at most 10 s).
            let run = route.breaker.failures().saturating_sub(1).min(4);
            let pause = crate::pool::FAILURE_PAUSE.saturating_mul(1 << run);
            hint.map_or(pause, |h| h.max(pause)).min(crate::pool::FAILURE_PAUSE.saturating_mul(10))
        }
        None => return,
    };
    let store = Arc::clone(&gateway.services.store);
    let scope = route.scope;
    gateway.services.background.spawn(async move {
        if let Err(e) = store.pause(scope, pause).await {
            tracing::warn!(error = %e, "could not record the breaker's pause");
        }
    });
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
    call.req.gateway.services.metrics.upstream_failure(&route.counters.labels, reason);
    (class, error)
}

async fn buffered<S: Settle>(
    response: http::Response<hyper::body::Incoming>,
    settle: S,
    call: &Call<'_>,
    client_model: &str,
    created: u64,
) -> Result<Response<Body>, (ErrorClass, GatewayError)> {
    let (parts, body) = response.into_parts();
    // Unread or cut: the estimate stands (the provider may have done the work); the drop
    // guard settles with it.
    let bytes =
        upstream::read_body(body, MAX_RESPONSE_BYTES, call.req.gateway.services.clock.sleep_until(call.deadline))
            .await
            .map_err(|e| body_failure(call, e, "a response", MAX_RESPONSE_BYTES))?;
    let bytes =
        sluice_upstream::providers::wire_response(&call.route.target, &parts.headers, bytes, client_model, created)
            .map_err(|e| bad_response(call, &e))?;
    let terms = call.terms;
    let upstream_protocol = call.crossing.upstream(terms.protocol);
    // Usage and finish reasons in one read of the provider's answer.
    let answered = read_answer(upstream_protocol, &bytes);
    let usage = answered.usage;
    settle.answered(terms, usage);
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
    // The reasons as the client reads them: the provider's own when nothing crosses.
    let finish_reasons = match call.crossing {
        Crossing::Same => answered.finish_reasons,
        _ => sluice_provider::finish_reasons(terms.protocol, &body),
    };
    call.req.access.finish_reasons(&finish_reasons);
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
    call.req.gateway.services.metrics.upstream_failure(&route.counters.labels, "bad_response");
    (ErrorClass::Other, GatewayError::UpstreamBadResponse(route.name.to_string()))
}

async fn provider_error<S: Settle>(
    response: http::Response<hyper::body::Incoming>,
    settle: S,
    call: &Call<'_>,
) -> Attempt {
    let (route, gateway) = (call.route, call.req.gateway);
    // The provider saw the request: its request unit stays spent, tokens come back.
    settle.settle(Settlement { used: Cost::request(0, 0), upstream: Cost::request(0, 0) });
    let (parts, body) = response.into_parts();
    let read =
        upstream::read_body(body, MAX_ERROR_BYTES, call.req.gateway.services.clock.sleep_until(call.deadline)).await;
    let bytes = read.clone().unwrap_or_default();
    let bytes =
        sluice_upstream::providers::wire_error(&route.target, parts.status.as_u16(), &parts.headers, bytes.to_vec());
    // The provider's hints are read once: for classification, the pause and the adaptive state.
    let now_ms = gateway.services.clock.unix_millis();
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
        gateway.services.metrics.upstream_failure(&route.counters.labels, "auth");
        // Refused credentials count against the deployment's health: a run of them opens
        // its breaker and a pool places around it, on every instance, until its cool-down.
        health_failure(route, gateway, None);
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
    if let Err(e) = gateway.services.store.pause(route.scope, pause).await {
        tracing::warn!(error = %e, "could not record the provider's pause");
    }
    gateway.services.metrics.cooldown(&route.name, "provider_429");
    // The provider's own quota refused: the deployment is what bound it.
    let bound = Bound { scope_kind: "deployment", dimension: crate::binding::NONE };
    gateway.services.metrics.bound_decision("provider_rejected", "provider", bound);
    let hit = Hit { limit_type: "provider".into(), scope_kind: bound.scope_kind, ..hit_labels(route) };
    call.req.access.bound(bound.scope_kind, Some(&route.name), bound.dimension);
    gateway.services.metrics.rate_limit_hits.get_or_create(&hit).inc();
    let terms = call.terms;
    let quote =
        Quote { input: terms.input, output: terms.output, output_weight: terms.output_weight, money: terms.money };
    let (caller, profile) = (call.req.caller, call.req.profile);
    GatewayError::RateLimited(Box::new(RateLimitInfo {
        limiter: "provider".into(),
        // Everyone waits out the pause: a client told so, on either protocol.
        retry_after: Some(wait.unwrap_or(pause)),
        gateway_decision: "admitted_then_provider_rejected",
        ..refusal_info(caller, profile, route, quote)
    }))
}
