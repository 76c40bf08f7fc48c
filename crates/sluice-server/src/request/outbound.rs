//! The call to the provider: the proxied endpoints' paths (listed once, here), the
//! upstream request a deployment is sent (its key, its protocol's headers, the trace),
//! and the send bounded by the deployment's attempt timeout.

use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use sluice_provider::Protocol;

use crate::state::{Gateway, Route};
use crate::trace::Trace;
use crate::upstream::UpstreamError;

/// The endpoint of `protocol`: where clients send it and where it goes upstream.
#[must_use]
pub fn endpoint_path(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::OpenAiChat => "/v1/chat/completions",
        Protocol::OpenAiResponses => "/v1/responses",
        Protocol::OpenAiEmbeddings => "/v1/embeddings",
        Protocol::OpenAiCompletions => "/v1/completions",
        Protocol::AnthropicMessages => "/v1/messages",
    }
}

/// The request `route` is sent: `body` in `protocol` (a stream when `stream`), with the
/// deployment's key, the client's Anthropic version and beta flags, and the trace's
/// `traceparent`; signed last when the deployment signs (at `unix_millis`).
pub fn build_upstream(
    route: &Route,
    protocol: Protocol,
    client_headers: &HeaderMap,
    body: Vec<u8>,
    trace: &Trace,
    (stream, unix_millis): (bool, u64),
) -> http::Request<Full<Bytes>> {
    let uri = super::providers::upstream_url(route, endpoint_path(protocol), stream);
    let mut builder = http::Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::USER_AGENT, concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .header("traceparent", &trace.traceparent);
    for (name, value) in super::providers::auth_headers(route, client_headers) {
        builder = builder.header(name, value);
    }
    let body = Bytes::from(body);
    let mut request =
        builder.body(Full::new(body.clone())).unwrap_or_else(|_| http::Request::new(Full::new(Bytes::new())));
    super::providers::sign(route, &mut request, &body, unix_millis);
    request
}

/// A sent request: the provider's response head (or why none came) and the deadline by
/// which a non-stream answer must be whole.
pub struct Sent {
    /// The response head, or the transport failure.
    pub response: Result<http::Response<Incoming>, UpstreamError>,
    /// When a non-stream body must be in: the same bound as its headers.
    pub deadline: tokio::time::Instant,
}

/// Sends `outgoing` to `route`, bounded by its attempt timeout (at most the gateway's).
pub async fn send(gateway: &Gateway, route: &Route, outgoing: http::Request<Full<Bytes>>) -> Sent {
    let timeout = route.attempt_timeout.min(gateway.upstream_timeout);
    let deadline = tokio::time::Instant::now() + timeout;
    let response = gateway.upstream.send(outgoing, timeout).await;
    Sent { response, deadline }
}
