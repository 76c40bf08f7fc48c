//! Streams: passed through chunk by chunk (backpressure comes from the client's reads),
//! watched by a tap for usage, settled when they end, break, or the client leaves.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::Response;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use sluice_provider::Protocol;

use crate::admit::Admitted;
use crate::crossing::Pipe;
use crate::proxy::pass_through;
use crate::settle::SettleGuard;

struct Relay {
    body: Incoming,
    pipe: Pipe,
    guard: Option<SettleGuard>,
    admitted: Admitted,
}

/// Relays a successful streaming response to the client through `pipe`.
pub fn stream(
    response: http::Response<Incoming>,
    guard: SettleGuard,
    admitted: Admitted,
    pipe: Pipe,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let relay = Relay { body, pipe, guard: Some(guard), admitted };
    let chunks = futures_util::stream::unfold(relay, next_chunk);
    let mut response = pass_through(parts.status, &parts.headers, Body::from_stream(chunks));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    response
}

async fn next_chunk(mut relay: Relay) -> Option<(Result<Bytes, Infallible>, Relay)> {
    relay.guard.as_ref()?;
    loop {
        match relay.body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                let out = relay.pipe.push(&data);
                if !out.is_empty() {
                    return Some((Ok(out), relay));
                }
            }
            Some(Err(_)) | None => {
                let tail = relay.pipe.end(interruption(relay.admitted.protocol));
                relay.finish();
                return (!tail.is_empty()).then_some((Ok(tail), relay));
            }
        }
    }
}

impl Relay {
    fn finish(&mut self) {
        let Some(guard) = self.guard.take() else { return };
        let settlement = match self.pipe.usage() {
            (Some(usage), _) => self.admitted.settlement(usage),
            (None, Some(deltas)) => self.admitted.partial(deltas),
            (None, None) => self.admitted.sent_unanswered(),
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

/// The explicit event a client receives when the provider's stream breaks off.
fn interruption(protocol: Protocol) -> &'static [u8] {
    match protocol {
        Protocol::AnthropicMessages => b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the provider's stream was interrupted\"}}\n\n",
        _ => b"data: {\"error\":{\"message\":\"the provider's stream was interrupted\",\"type\":\"stream_interrupted\",\"code\":\"upstream_stream_interrupted\"}}\n\n",
    }
}
