//! Calls to a deployment that carry no tokens sluice can count: reading, cancelling or
//! deleting a stored response, and the OpenAI endpoints passed through as they are
//! (moderations, images, audio…). The client's body and content type go up unchanged with
//! the deployment's key; the answer comes back whole, anything that looks like a key
//! scrubbed from it. Admission (one request on the caller's path and the deployment) is
//! the caller's: see [`crate::metered::run_upstream`].

mod model;
mod owned;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};
use axum::response::IntoResponse as _;
use bytes::Bytes;
use http_body_util::Full;
use sluice_config::Passthrough;

use crate::AppState;
use crate::auth::authenticate;
use crate::error::{Envelope, ErrorResponse, GatewayError, shown_path};
use crate::metered;
use crate::road::{pass_through, read_body};
use crate::served::allowed;
use crate::state::{Gateway, Route};
use crate::trace::Trace;
use model::{model_of, with_model};
use owned::Named;
use sluice_recall::remembered::{Memo, ResponseKey};
use sluice_upstream::client::{self as upstream, UpstreamError};
use sluice_upstream::providers::{auth_headers, upstream_url};
use sluice_upstream::scrub;

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
    let mut uri = upstream_url(&route.target, &call.endpoint, false);
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
    for (name, value) in auth_headers(&route.target, &HeaderMap::new()) {
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
    let bytes =
        upstream::read_body(body, MAX_ANSWER_BYTES, tokio::time::sleep_until(deadline)).await.map_err(|e| match e {
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
        let key = route.target.key.current();
        scrub::scrub_bytes(&bytes, key.as_ref().and_then(|k| k.secret()))
    };
    Ok(Answer { status: parts.status, headers: parts.headers, body })
}

/// OpenAI API paths (their first segment after `/v1/`) sluice never passes through: they
/// hold state across calls (assistants, threads), open other transports (realtime), or
/// have no model to route by. Refused with a 404 `endpoint_not_served`.
const NEVER_SERVED: [&str; 8] =
    ["assistants", "threads", "evals", "containers", "realtime", "videos", "chatkit", "organization"];

/// The header naming the model profile of a request whose body names none.
pub const MODEL_HEADER: &str = "x-sluice-model";

/// What sluice does with an OpenAI path it has no route for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// A family a profile may pass through.
    Listed(Passthrough),
    /// An OpenAI endpoint never passed through.
    Never,
}

/// Whether `path` could reach another path upstream than it names: a dot segment, an
/// encoded dot or slash, or a backslash (`/v1/images/../chat/completions` would be chat
/// completions without their token admission).
fn escapes(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.split('/').any(|segment| segment == "." || segment == "..")
        || ["%2e", "%2f", "%5c", "\\"].iter().any(|bad| lower.contains(bad))
}

/// The family of `path`, when it is an OpenAI API path (`/v1/<family>…`); a path that could
/// reach another one upstream is never passed through.
#[must_use]
pub fn family_of(path: &str) -> Option<Family> {
    if escapes(path) {
        return path.starts_with("/v1/").then_some(Family::Never);
    }
    let first = path.strip_prefix("/v1/")?.split('/').next()?;
    if let Some(listed) = Passthrough::named(first).filter(|p| *p != Passthrough::Completions) {
        return Some(Family::Listed(listed));
    }
    NEVER_SERVED.contains(&first).then_some(Family::Never)
}

/// Any OpenAI path without a route of its own: passed through under admission when the
/// model profile it names lists its family, else refused with a 404 naming the path.
/// Paths that are not OpenAI's get the 404 `unknown_route`.
pub async fn serve(state: &AppState, request: axum::extract::Request, family: Family) -> Response<Body> {
    let gateway = state.current();
    let trace = Trace::from_headers(request.headers());
    let access = crate::access::beside_the_road(&gateway, &trace, &request);
    let result = relay(&gateway, request, family, &trace).await;
    crate::road::finished(&access, &result);
    let mut response = match result {
        Ok(response) => response,
        Err(error) => ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: trace.id.clone() }.into_response(),
    };
    crate::trace::stamp(response.headers_mut(), &trace.id);
    response
}

async fn relay(
    gateway: &Gateway,
    request: axum::extract::Request,
    family: Family,
    trace: &Trace,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let caller = &authenticate(gateway, &parts.headers)?;
    let Family::Listed(family) = family else {
        let why = "(it is not offered through sluice)".to_owned();
        return Err(GatewayError::EndpointNotServed { path: shown_path(&path), why });
    };
    let objects = owned::named(family, &parts.method, &path);
    if objects == Named::Shared {
        let why = "(it would reach every tenant's objects under the deployment's provider key)".to_owned();
        return Err(GatewayError::EndpointNotServed { path: shown_path(&path), why });
    }
    let bytes = read_body(body, gateway.max_body_bytes).await?;
    let Some(named) = model_of(&parts.headers, &bytes, parts.uri.query()) else {
        let why = format!("without a model profile: name one in `model` or the {MODEL_HEADER} header");
        return Err(GatewayError::EndpointNotServed { path: shown_path(&path), why });
    };
    let profile = gateway
        .profiles
        .get(named.as_str())
        .filter(|_| caller.may_name(&named))
        .ok_or_else(|| GatewayError::UnknownModel(named.clone()))?;
    let route = allowed(gateway, profile, family, &path)?;
    if let Named::Object { id, what, .. } = objects {
        gateway
            .services
            .responses
            .owned(&ResponseKey { tenant: Arc::clone(&caller.tenant), id: id.to_owned() }, what)
            .await?;
    }
    let method = parts.method.clone();
    let call = Call {
        method: parts.method.clone(),
        body: with_model(&parts.headers, bytes, &named, route.target.body_model()),
        endpoint: path.clone(),
        query: parts.uri.query().map(str::to_owned),
        content_type: parts.headers.get(header::CONTENT_TYPE).cloned(),
    };
    let answer = metered::run_upstream(gateway, caller, route.scope, send(gateway, route, call, trace)).await?;
    crate::road::count(gateway, Some(profile.deployment), answer.status);
    if answer.status.is_success() {
        let memo = Memo {
            responses: Arc::clone(&gateway.services.responses),
            tenant: Arc::clone(&caller.tenant),
            deployment: Arc::clone(&route.name),
        };
        learned(&memo, objects, &method, &answer.body).await;
    }
    Ok(answer.into_response())
}

/// What a successful call teaches: a created object (and a completed upload's file) is
/// the caller's tenant's; a deleted one is forgotten.
async fn learned(memo: &Memo, objects: Named<'_>, method: &Method, body: &[u8]) {
    match objects {
        Named::Create => memo.record_body(body, None).await,
        Named::Object { id, whole: true, .. } if *method == Method::DELETE => {
            memo.responses.forget(&ResponseKey { tenant: Arc::clone(&memo.tenant), id: id.to_owned() }).await;
        }
        Named::Object { .. } => {
            let file = serde_json::from_slice::<serde_json::Value>(body).ok();
            if let Some(id) = file.as_ref().and_then(|f| f.get("file")?.get("id")?.as_str()) {
                memo.record(id, None).await;
            }
        }
        Named::Nothing | Named::Shared => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_could_reach_another_endpoint_are_never_passed_through() {
        assert_eq!(family_of("/v1/images/generations"), Some(Family::Listed(Passthrough::Images)));
        assert_eq!(family_of("/v1/assistants"), Some(Family::Never));
        assert_eq!(family_of("/v1/nothing"), None);
        for path in [
            "/v1/images/../chat/completions",
            "/v1/images/%2e%2e/chat/completions",
            "/v1/images%2F..%2Fchat",
            "/v1/audio/./x",
            "/v1/images\\..\\chat",
        ] {
            assert_eq!(family_of(path), Some(Family::Never), "{path}");
        }
    }
}
