//! The provider's answer on its way to the client: [`pass_through`] keeps the head a
//! client may read (status, content type, request id). Streams: passed through chunk by chunk (backpressure comes from the client's reads),
//! watched by a tap for usage and by a [`DeliveredCount`] for the output that passed,
//! settled when they end, break, or the client leaves.
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
use sluice_provider::{ConverseToAnthropicStream, DeliveredCount, Protocol};
use sluice_quota::Clock;
use sluice_quota::clock::within;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

use super::settle::{SettleGuard, Streamed, Terms};
use crate::crossing::Pipe;
use crate::error::{self, Envelope};
use crate::state::{Gateway, Route};

/// What a stream is watched for: its deployment's silence and drain bounds, the shutdown
/// cut, and the output it delivers.
pub struct Watch {
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
    #[must_use]
    pub fn new(route: &Route, gateway: &Gateway, protocol: Protocol) -> Self {
        let bounds = Bounds {
            clock: Arc::clone(&gateway.clock),
            deployment: Arc::clone(&route.name),
            idle: route.stream_idle_timeout,
            drain: route.stream_drain_timeout,
            cut: gateway.streams.subscribe(),
            background: gateway.background.clone(),
        };
        Self { bounds, delivered: DeliveredCount::new(protocol, Arc::clone(&gateway.estimator), route.tokenizer) }
    }
}

/// A stream not yet settled: what it reads, how it is piped, what settles it.
struct Flow {
    body: Incoming,
    /// Reads the provider's own stream framing into the pipe's (Bedrock's event stream).
    wire: Option<ConverseToAnthropicStream>,
    pipe: Pipe,
    guard: SettleGuard,
    terms: Terms,
    /// The output that passed to the client (or, draining, was read).
    delivered: DeliveredCount,
}

struct Relay {
    /// Taken when the stream is settled, or handed to a drain when the client leaves.
    flow: Option<Flow>,
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
/// when the provider frames its stream its own way).
pub fn stream(
    response: http::Response<Incoming>,
    guard: SettleGuard,
    terms: Terms,
    (wire, pipe): (Option<ConverseToAnthropicStream>, Pipe),
    watch: Watch,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let Watch { bounds, delivered } = watch;
    let relay = Relay { flow: Some(Flow { body, wire, pipe, guard, terms, delivered }), bounds };
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

async fn next_chunk(mut relay: Relay) -> Option<(Result<Bytes, Infallible>, Relay)> {
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
                    if let Some(line) = flow.guard.access() {
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

impl Flow {
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
        let counted = self.delivered.tokens();
        let seen = Streamed { usage: self.pipe.usage(), usage_final: self.pipe.usage_final(), counted };
        let (settlement, source) = self.terms.streamed(seen);
        self.guard.settle_as(settlement, source);
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

impl Drop for Relay {
    fn drop(&mut self) {
        let Some(flow) = self.flow.take() else { return };
        // The client went away mid-stream: drain the provider's answer for its usage, or
        // settle on what passed.
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
