//! Streams: passed through chunk by chunk (backpressure comes from the client's reads),
//! watched by a tap for usage, settled when they end, break, or the client leaves.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::Response;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use sluice_provider::{Protocol, StreamTap};

use crate::admit::Admitted;
use crate::proxy::pass_through;
use crate::settle::SettleGuard;

struct Relay {
    body: Incoming,
    tap: StreamTap,
    guard: Option<SettleGuard>,
    admitted: Admitted,
}

/// Relays a successful streaming response to the client.
pub fn stream(
    response: http::Response<Incoming>,
    guard: SettleGuard,
    admitted: Admitted,
    hide_usage: bool,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let relay = Relay { body, tap: StreamTap::new(admitted.protocol, hide_usage), guard: Some(guard), admitted };
    let chunks = futures_util::stream::unfold(relay, next_chunk);
    pass_through(parts.status, &parts.headers, Body::from_stream(chunks))
}

async fn next_chunk(mut relay: Relay) -> Option<(Result<Bytes, Infallible>, Relay)> {
    relay.guard.as_ref()?;
    loop {
        match relay.body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                let out = relay.tap.push(&data);
                if !out.is_empty() {
                    return Some((Ok(out), relay));
                }
            }
            Some(Err(_)) => {
                let mut tail = BytesMut::from(relay.tap.flush().as_ref());
                tail.extend_from_slice(interruption(relay.admitted.protocol));
                relay.finish();
                return Some((Ok(tail.freeze()), relay));
            }
            None => {
                let tail = relay.tap.flush();
                relay.finish();
                return (!tail.is_empty()).then_some((Ok(tail), relay));
            }
        }
    }
}

impl Relay {
    fn finish(&mut self) {
        let Some(guard) = self.guard.take() else { return };
        let outcome = self.tap.outcome();
        let settlement = match outcome.usage {
            Some(usage) => self.admitted.settlement(usage),
            None => self.admitted.partial(outcome.content_deltas),
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
