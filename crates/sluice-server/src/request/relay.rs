//! The provider's answer on its way to the client: [`pass_through`] keeps the head a
//! client may read (status, content type, request id). Streams: passed through chunk by chunk (backpressure comes from the client's reads),
//! watched by a tap for usage, settled when they end, break, or the client leaves.
//!
//! A stream never hangs: a provider silent for the deployment's `stream_idle_timeout`
//! (before the first piece too) and a stream still running when the shutdown grace is
//! over both end with the protocol's explicit error event; neither is retried (bytes went
//! to the client).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Response, StatusCode, header};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use sluice_provider::{ConverseToAnthropicStream, Protocol};
use tokio::sync::watch;

use super::settle::{SettleGuard, Terms};
use crate::crossing::Pipe;
use crate::error::{self, Envelope};
use crate::state::Route;
use crate::streams::StreamCut;

/// What a stream is watched for: its deployment's silence bound and the shutdown cut.
pub struct Watch {
    deployment: Arc<str>,
    idle: Duration,
    cut: watch::Receiver<bool>,
}

impl Watch {
    /// The watch of a stream from `route`.
    #[must_use]
    pub fn new(route: &Route, cut: &StreamCut) -> Self {
        Self { deployment: Arc::clone(&route.name), idle: route.stream_idle_timeout, cut: cut.subscribe() }
    }
}

struct Relay {
    body: Incoming,
    /// Reads the provider's own stream framing into the pipe's (Bedrock's event stream).
    wire: Option<ConverseToAnthropicStream>,
    pipe: Pipe,
    guard: Option<SettleGuard>,
    terms: Terms,
    watch: Watch,
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
    let relay = Relay { body, wire, pipe, guard: Some(guard), terms, watch };
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
    relay.guard.as_ref()?;
    loop {
        let frame = tokio::select! {
            biased;
            () = cut(&mut relay.watch.cut) => Err(End::ShuttingDown),
            frame = tokio::time::timeout(relay.watch.idle, relay.body.frame()) => frame.map_err(|_| End::Stalled),
        };
        let end = match frame {
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else { continue };
                let data = match relay.wire.as_mut() {
                    Some(wire) => wire.push(&data),
                    None => data,
                };
                let out = relay.pipe.push(&data);
                relay.remember().await;
                if !out.is_empty() {
                    if let Some(line) = relay.guard.as_ref().and_then(SettleGuard::access) {
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
            let (deployment, idle) = (&relay.watch.deployment, relay.watch.idle);
            tracing::warn!(%deployment, ?idle, "provider stream stalled; ended with an error event");
        }
        let mut tail = bytes::BytesMut::new();
        if let Some(wire) = relay.wire.as_mut() {
            tail.extend_from_slice(&relay.pipe.push(&wire.finish()));
        }
        tail.extend_from_slice(&relay.pipe.end(&interruption(relay.terms.protocol, end)));
        let tail = tail.freeze();
        relay.finish();
        return (!tail.is_empty()).then_some((Ok(tail), relay));
    }
}

/// Resolves once the cut is signalled (never, if its sender is gone).
async fn cut(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|cut| *cut).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Relay {
    /// Once a Responses stream's usage is in, remembers what it left behind, before the
    /// client has the final event (its continuation then finds the record).
    async fn remember(&mut self) {
        let (Some(usage), Some(id)) = (self.pipe.usage().0, self.pipe.response_id()) else { return };
        let Some(memo) = self.terms.memo.take() else { return };
        memo.record(id, Some(&usage)).await;
    }

    fn finish(&mut self) {
        let Some(guard) = self.guard.take() else { return };
        let settlement = match self.pipe.usage() {
            (Some(usage), _) => self.terms.settlement(usage),
            (None, Some(deltas)) => self.terms.partial(deltas),
            (None, None) => self.terms.sent_unanswered(),
        };
        guard.settle(settlement);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        // The client went away mid-stream: settle what the tap saw.
        self.finish();
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
