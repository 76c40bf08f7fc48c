//! The call to the provider: the upstream request a deployment is sent (its body in the
//! deployment's protocol, its key, its protocol's headers, the trace; the path from
//! [`endpoint_path`], the one list of the proxied endpoints), and the send bounded by
//! the deployment's attempt timeout. Returns the [`Sent`] answer's head; imports no other
//! step.

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use sluice_provider::{ErrorClass, Protocol};
use sluice_quota::{Cost, Nanos};
use tokio::sync::oneshot;

use super::context::{Attempt, Request, endpoint_path, untranslatable};
use crate::crossing::Crossing;
use crate::error::GatewayError;
use crate::state::{Gateway, Route};
use crate::trace::Trace;
use sluice_upstream::{UpstreamError, Wired};

/// The request `req` sends to `route`: its body as `crossing` carries it to the
/// deployment (with the usage chunk asked for when `force_usage`), under the deployment's
/// key, refreshed first when it is minted ([`build_upstream`]).
///
/// # Errors
/// The attempt's end, before anything reached the provider: refused when the deployment's
/// protocol cannot carry the request, an auth failure when no key could be had.
pub async fn prepare(
    req: &Request<'_>,
    route: &Route,
    crossing: Crossing,
    force_usage: bool,
) -> Result<http::Request<Full<Bytes>>, Attempt> {
    let (gateway, request) = (req.gateway, req.request);
    let upstream_protocol = crossing.upstream(request.protocol);
    let body = crossing
        .request_body(request, route.target.body_model(), req.profile.default_max_tokens, force_usage)
        .and_then(|body| sluice_upstream::providers::wire_body(&route.target, upstream_protocol, req.headers, body));
    let body = match body {
        Ok(body) => body,
        Err(e) => return Err(Attempt::Refused(untranslatable(route, &e))),
    };
    if let Err(e) = route.target.key.refresh(&gateway.upstream, gateway.services.clock.unix_seconds()).await {
        tracing::warn!(deployment = %route.name, error = %e, "no access token for the provider");
        gateway.services.metrics.upstream_failure(&route.counters.labels, "auth");
        return Err(Attempt::Failed {
            class: ErrorClass::Auth,
            error: GatewayError::UpstreamAuthFailed(route.name.to_string()),
        });
    }
    let at = (request.stream, gateway.services.clock.unix_millis());
    Ok(build_upstream(route, upstream_protocol, req.headers, body, req.trace, at))
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");

/// The request `route` is sent: `body` in `protocol` (a stream when `stream`), with the
/// headers its wire asks for (InvokeModel's `accept`), the deployment's key, the client's
/// Anthropic version and beta flags, and the trace's
/// `traceparent`; signed last when the deployment signs (at `unix_millis`).
pub fn build_upstream(
    route: &Route,
    protocol: Protocol,
    client_headers: &HeaderMap,
    body: Vec<u8>,
    trace: &Trace,
    (stream, unix_millis): (bool, u64),
) -> http::Request<Full<Bytes>> {
    let body = Bytes::from(body);
    let mut request = http::Request::new(Full::new(body.clone()));
    *request.method_mut() = http::Method::POST;
    // A URL that does not parse goes nowhere: the send fails as unreachable.
    *request.uri_mut() = sluice_upstream::providers::upstream_url(&route.target, endpoint_path(protocol), stream)
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    let headers = request.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::USER_AGENT, HeaderValue::from_static(concat!("sluice/", env!("CARGO_PKG_VERSION"))));
    if let Ok(traceparent) = HeaderValue::from_str(&trace.traceparent) {
        headers.insert(TRACEPARENT, traceparent);
    }
    for (name, value) in sluice_upstream::providers::wire_headers(&route.target, stream) {
        headers.insert(name, value);
    }
    for (name, value) in sluice_upstream::providers::auth_headers(&route.target, client_headers) {
        headers.append(name, value);
    }
    sluice_upstream::providers::sign(&route.target, &mut request, &body, unix_millis);
    request
}

/// A sent request: the provider's response head (or why none came) and the deadline by
/// which a non-stream answer must be whole.
pub struct Sent {
    /// The response head, or the transport failure.
    pub response: Result<http::Response<Incoming>, UpstreamError>,
    /// When a non-stream body must be in, on the gateway's clock: the same bound as its headers.
    pub deadline: Nanos,
}

/// Sends `outgoing` to `route`, bounded by its attempt timeout (at most the gateway's).
/// A request granted at `granted` that reaches the wire later than [`LATE_TO_WIRE`]
/// re-anchors the deployment's short windows there ([`anchor_at_wire`]) with `cost`, what
/// its reservation holds upstream, while its answer is awaited.
pub async fn send(
    gateway: &Gateway,
    route: &Route,
    outgoing: http::Request<Full<Bytes>>,
    (cost, granted): (Cost, Nanos),
) -> Sent {
    let timeout = route.attempt_timeout.min(gateway.upstream_timeout);
    let deadline = gateway.services.clock.now().after(timeout);
    let (stamp, wire) = oneshot::channel();
    let clock = std::sync::Arc::clone(&gateway.services.clock);
    let outgoing = outgoing.map(|body| {
        Wired::new(body, move || {
            // Nobody listening any more (the send ended first): nothing to anchor.
            let _ = stamp.send(clock.now());
        })
    });
    let sending = gateway.upstream.send(outgoing, timeout);
    let (response, ()) = tokio::join!(sending, anchor_at_wire(gateway, route, cost, granted, wire));
    Sent { response, deadline }
}

/// How late after its grant a request may reach the wire before it re-anchors the
/// deployment's short windows: a later one moved the provider's window by more than the
/// send guard's least (5 ms) should absorb beside the jitter of the next request.
pub const LATE_TO_WIRE: std::time::Duration = std::time::Duration::from_millis(1);

/// Once the request is on the wire (`wire` says when), if that was more than
/// [`LATE_TO_WIRE`] after its grant: the deployment's (and its provider account's) guarded
/// buckets are re-anchored at that instant for every instance ([`sluice_quota::QuotaStore::sent`]),
/// so the next request is paced from where the provider's window really started. The
/// provider anchors its window at a request's arrival; the bucket at its admission: a
/// request whose task resumed late, or that opened a connection first, would otherwise let
/// the next one, sent on time, meet a window the provider has not finished.
async fn anchor_at_wire(gateway: &Gateway, route: &Route, cost: Cost, granted: Nanos, wire: oneshot::Receiver<Nanos>) {
    let Ok(at) = wire.await else { return };
    if at.since(granted) <= LATE_TO_WIRE {
        return;
    }
    let since = gateway.services.clock.now().since(at);
    for scope in [route.account, Some(route.scope)].into_iter().flatten() {
        if let Err(e) = gateway.services.store.sent(scope, cost, since).await {
            tracing::debug!(error = %e, "re-anchoring a late request's window failed");
        }
    }
}
