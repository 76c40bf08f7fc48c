//! Building responses: status, body, request id and rate-limit headers per flavour.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::admission::Rejection;
use crate::config::Flavor;
use crate::errors::ApiError;
use crate::sim::{ModelState, Refusal, Sim, Snapshot};
use crate::wire_time::{go_duration, real_duration, retry_after_ms, retry_after_secs, rfc3339};

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const EVENT_STREAM: HeaderValue = HeaderValue::from_static("text/event-stream; charset=utf-8");
const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");

/// A JSON response with the flavour's headers.
pub fn json(sim: &Sim, flavor: Flavor, snapshot: Option<&Snapshot>, status: StatusCode, body: Vec<u8>) -> Response {
    let id = sim.request_id();
    finish(sim, flavor, snapshot, status, Body::from(body), &id)
}

/// A 200 JSON response with the flavour's headers and a streamed `body`.
pub fn json_body(sim: &Sim, flavor: Flavor, snapshot: Option<&Snapshot>, body: Body) -> Response {
    let id = sim.request_id();
    finish(sim, flavor, snapshot, StatusCode::OK, body, &id)
}

/// A server-sent-events response with the flavour's headers.
pub fn sse(sim: &Sim, flavor: Flavor, snapshot: Option<&Snapshot>, body: Body) -> Response {
    let id = sim.request_id();
    let mut response = finish(sim, flavor, snapshot, StatusCode::OK, body, &id);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, EVENT_STREAM);
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An error in the flavour's shape; 429s carry `retry-after` and `retry-after-ms`.
pub fn error(sim: &Sim, flavor: Flavor, snapshot: Option<&Snapshot>, err: &ApiError) -> Response {
    noted_error(sim, flavor, snapshot, err, "")
}

/// [`error`] with `note` appended to the body's `error.message`.
pub fn noted_error(sim: &Sim, flavor: Flavor, snapshot: Option<&Snapshot>, err: &ApiError, note: &str) -> Response {
    let id = sim.request_id();
    let status = StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = err.body(flavor, &id);
    if let Some(serde_json::Value::String(message)) = body.pointer_mut("/error/message") {
        message.push_str(note);
    }
    let body = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = finish(sim, flavor, snapshot, status, Body::from(body), &id);
    let wait = match err {
        ApiError::Limited { rejection, .. } => rejection.wait.map(|w| real_duration(w, sim.time_scale())),
        ApiError::Concurrency { .. } => Some(Duration::from_secs(1)),
        _ => None,
    };
    if let Some(wait) = wait {
        hint(&mut response, wait);
    }
    response
}

/// Sets `retry-after` (whole seconds, at least 1) and `retry-after-ms` to `wait`.
pub fn hint(response: &mut Response, wait: Duration) {
    let headers = response.headers_mut();
    headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(wait).max(1)));
    headers.insert(RETRY_AFTER_MS, HeaderValue::from(u64::try_from(retry_after_ms(wait)).unwrap_or(u64::MAX)));
}

/// The response to a refused request.
pub fn refusal(sim: &Sim, model: &ModelState, refusal: &Refusal) -> Response {
    let name = model.config.name.clone();
    let (err, snapshot) = match refusal {
        Refusal::Limited(rejection, snapshot) => (limited(sim, name, *rejection), snapshot),
        Refusal::Concurrency(status, snapshot) => (ApiError::Concurrency { model: name, status: *status }, snapshot),
    };
    error(sim, model.flavor, Some(snapshot), &err)
}

fn limited(sim: &Sim, model: String, rejection: Rejection) -> ApiError {
    let wait = rejection.wait.map_or(Duration::ZERO, |w| real_duration(w, sim.time_scale()));
    ApiError::Limited { model, rejection, retry_after: retry_after_secs(wait).max(1) }
}

fn finish(
    sim: &Sim,
    flavor: Flavor,
    snapshot: Option<&Snapshot>,
    status: StatusCode,
    body: Body,
    id: &str,
) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, JSON);
    let id_header = if flavor == Flavor::Anthropic { "request-id" } else { "x-request-id" };
    if let Ok(value) = HeaderValue::from_str(id) {
        if flavor == Flavor::Azure {
            // Azure's API Management front door names every answer, and its region.
            headers.insert(HeaderName::from_static("apim-request-id"), value.clone());
            headers.insert(HeaderName::from_static("x-ms-region"), HeaderValue::from_static("Sim Region"));
        }
        headers.insert(HeaderName::from_static(id_header), value);
    }
    if let Some(snapshot) = snapshot {
        match flavor {
            Flavor::Openai | Flavor::Azure => openai_headers(headers, sim, snapshot),
            Flavor::Anthropic => anthropic_headers(headers, sim, snapshot),
            Flavor::Gemini | Flavor::Bedrock => {}
        }
    }
    response
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "limits are small non-negative integers")]
fn int(v: f64) -> HeaderValue {
    HeaderValue::from(v.max(0.0).round() as u64)
}

fn openai_headers(headers: &mut HeaderMap, sim: &Sim, snapshot: &Snapshot) {
    const NAMES: [[&str; 3]; 2] = [
        ["x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"],
        ["x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"],
    ];
    for (names, dim) in NAMES.iter().zip(&snapshot.dims[..2]) {
        let Some((limit, remaining, reset)) = dim else { continue };
        let reset = go_duration(real_duration(*reset, sim.time_scale()));
        headers.insert(HeaderName::from_static(names[0]), int(*limit));
        headers.insert(HeaderName::from_static(names[1]), int(*remaining));
        if let Ok(value) = HeaderValue::from_str(&reset) {
            headers.insert(HeaderName::from_static(names[2]), value);
        }
    }
}

fn anthropic_headers(headers: &mut HeaderMap, sim: &Sim, snapshot: &Snapshot) {
    let [requests, _, input, output] = snapshot.dims;
    let tightest = match (input, output) {
        (Some(i), Some(o)) => Some(if o.1 < i.1 { o } else { i }),
        (i, o) => i.or(o),
    };
    let dims = [("requests", requests), ("input-tokens", input), ("output-tokens", output), ("tokens", tightest)];
    let now = sim.clock().unix_now();
    for (name, dim) in dims {
        let Some((limit, remaining, reset)) = dim else { continue };
        let at = rfc3339(now + real_duration(reset, sim.time_scale()));
        let key = |part: &str| HeaderName::from_bytes(format!("anthropic-ratelimit-{name}-{part}").as_bytes());
        for (part, value) in
            [("limit", Ok(int(limit))), ("remaining", Ok(int(remaining))), ("reset", HeaderValue::from_str(&at))]
        {
            if let (Ok(key), Ok(value)) = (key(part), value) {
                headers.insert(key, value);
            }
        }
    }
}
