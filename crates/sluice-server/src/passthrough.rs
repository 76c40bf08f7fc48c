//! Calls to a deployment that carry no tokens sluice can count: reading, cancelling or
//! deleting a stored response, and the OpenAI endpoints passed through as they are
//! (moderations, images, audio…). The client's body and content type go up unchanged with
//! the deployment's key; the answer comes back whole, anything that looks like a key
//! scrubbed from it. Admission (one request on the caller's path and the deployment) is
//! the caller's: see [`crate::metered::run_upstream`].

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use bytes::Bytes;
use http_body_util::Full;

use crate::error::GatewayError;
use crate::request::{auth_headers, pass_through, upstream_url};
use crate::scrub;
use crate::state::{Gateway, Route};
use crate::trace::Trace;
use crate::upstream::{self, UpstreamError};

/// Largest answer read from such a call (an image or audio answer included).
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// One call: where it goes on the deployment and what it carries.
#[derive(Debug)]
pub struct Call {
    /// The method.
    pub method: Method,
    /// The OpenAI path, from `/v1`.
    pub endpoint: String,
    /// The client's query string, if any.
    pub query: Option<String>,
    /// The client's content type (JSON, multipart), if it sent a body.
    pub content_type: Option<HeaderValue>,
    /// The client's body, unchanged.
    pub body: Bytes,
}

/// The provider's answer, read whole.
#[derive(Debug)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its head.
    pub headers: HeaderMap,
    /// Its body, scrubbed of anything that looks like the deployment's key.
    pub body: Bytes,
}

impl Answer {
    /// The answer for the client: the provider's status, content type and request id.
    #[must_use]
    pub fn into_response(self) -> Response<Body> {
        pass_through(self.status, &self.headers, Body::from(self.body))
    }
}

/// Sends `call` to `route`, bounded by its attempt timeout, and reads the answer.
///
/// # Errors
/// The provider could not be reached, did not answer in time, or sent too much.
pub async fn send(gateway: &Gateway, route: &Route, call: Call, trace: &Trace) -> Result<Answer, GatewayError> {
    let mut uri = upstream_url(route, &call.endpoint);
    if let Some(query) = call.query.as_deref().filter(|q| !q.is_empty()) {
        uri.push(if uri.contains('?') { '&' } else { '?' });
        uri.push_str(query);
    }
    let mut builder = http::Request::builder()
        .method(call.method)
        .uri(uri)
        .header(header::USER_AGENT, concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .header("traceparent", &trace.traceparent);
    if let Some(content_type) = call.content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    for (name, value) in auth_headers(route, &HeaderMap::new()) {
        builder = builder.header(name, value);
    }
    let provider = || route.provider.to_string();
    let request = builder.body(Full::new(call.body)).map_err(|_| GatewayError::UpstreamUnreachable(provider()))?;
    let timeout = route.attempt_timeout.min(gateway.upstream_timeout);
    let deadline = tokio::time::Instant::now() + timeout;
    let response = gateway.upstream.send(request, timeout).await.map_err(|e| match e {
        UpstreamError::Timeout => GatewayError::UpstreamTimeout(provider()),
        UpstreamError::Connect | UpstreamError::NoResponse => GatewayError::UpstreamUnreachable(provider()),
    })?;
    let (parts, body) = response.into_parts();
    let bytes = upstream::read_body(body, MAX_ANSWER_BYTES, deadline).await.map_err(|e| match e {
        upstream::BodyError::Stalled => GatewayError::UpstreamStalled(route.name.to_string()),
        upstream::BodyError::TooLarge => GatewayError::UpstreamTooLarge {
            deployment: route.name.to_string(),
            what: "an answer",
            limit: MAX_ANSWER_BYTES,
        },
        upstream::BodyError::Broken => GatewayError::UpstreamUnreachable(provider()),
    })?;
    let body = if parts.status.is_success() {
        bytes
    } else {
        let key = route.key.current();
        scrub::scrub_bytes(&bytes, key.as_ref().and_then(|k| k.secret()))
    };
    Ok(Answer { status: parts.status, headers: parts.headers, body })
}
