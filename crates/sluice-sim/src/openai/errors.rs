//! OpenAI-shaped error bodies (and the Azure and Gemini 429 variants).

use std::time::Duration;

use serde_json::{Value, json};

use crate::api_error::{ApiError, dim_words};
use crate::wire_time::go_duration;

/// `{"error": {"message", "type", "param", "code"}}`.
#[must_use]
pub fn body(err: &ApiError) -> Value {
    let (message, kind, param, code) = parts(err);
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

fn parts(err: &ApiError) -> (String, &'static str, Option<&'static str>, Option<&'static str>) {
    match err {
        ApiError::BadJson => (
            "We could not parse the JSON body of your request. The API expects a JSON payload, but what was sent was not valid JSON.".into(),
            "invalid_request_error",
            None,
            None,
        ),
        ApiError::Invalid { message, param } => (message.clone(), "invalid_request_error", *param, None),
        ApiError::NotFound(model) => (
            format!("The model `{model}` does not exist or you do not have access to it."),
            "invalid_request_error",
            None,
            Some("model_not_found"),
        ),
        ApiError::Limited { model, rejection, .. } => (limited_message(model, rejection), limited_type(rejection), None, Some("rate_limit_exceeded")),
        ApiError::Concurrency { model, .. } => {
            (format!("Too many concurrent requests for {model}. Please try again shortly."), "requests", None, Some("rate_limit_exceeded"))
        }
        ApiError::Fault(status) => fault_parts(*status),
    }
}

fn limited_type(rejection: &crate::admission::Rejection) -> &'static str {
    if rejection.dim.is_tokens() { "tokens" } else { "requests" }
}

fn limited_message(model: &str, r: &crate::admission::Rejection) -> String {
    let (what, abbr, per) = dim_words(r.dim);
    let (limit, used, requested) = (r.limit.round(), r.used.round(), r.requested.round());
    match r.wait {
        None => format!(
            "Request too large for {model} in organization org-sim on {what} per {per} ({abbr}): Limit {limit}, Requested {requested}. The input or output tokens must be reduced in order to run successfully."
        ),
        Some(wait) => format!(
            "Rate limit reached for {model} in organization org-sim on {what} per {per} ({abbr}): Limit {limit}, Used {used}, Requested {requested}. Please try again in {}.",
            go_duration(Duration::from_secs_f64(wait.clamp(0.0, 1e9)))
        ),
    }
}

fn fault_parts(status: u16) -> (String, &'static str, Option<&'static str>, Option<&'static str>) {
    match status {
        400 => return ("The request was rejected.".into(), "invalid_request_error", None, None),
        401 => return ("Incorrect API key provided.".into(), "invalid_request_error", None, Some("invalid_api_key")),
        429 => {
            return (
                "Rate limit reached. Please try again later.".into(),
                "requests",
                None,
                Some("rate_limit_exceeded"),
            );
        }
        _ => {}
    }
    let message = match status {
        500 => "The server had an error while processing your request. Sorry about that!",
        502 => "Bad gateway.",
        503 => "The server is overloaded or not ready yet.",
        _ => "The service is temporarily overloaded. Please try again later.",
    };
    (message.into(), "server_error", None, None)
}

/// Azure OpenAI's 429 body: `{"error": {"code": "429", "message"}}`.
#[must_use]
pub fn azure_429(err: &ApiError) -> Value {
    let (what, after) = match err {
        ApiError::Limited { rejection, retry_after, .. } => {
            (if rejection.dim.is_tokens() { "token" } else { "call" }, *retry_after)
        }
        _ => ("call", 1),
    };
    let message = format!(
        "Requests to the ChatCompletions_Create Operation under Azure OpenAI API have exceeded {what} rate limit of your current pricing tier. Please retry after {after} seconds."
    );
    json!({"error": {"code": "429", "message": message}})
}

/// Azure OpenAI's 401 body, for a request without a valid `api-key` (or Entra ID token).
#[must_use]
pub fn azure_401() -> Value {
    let message = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.";
    json!({"error": {"code": "401", "message": message}})
}

/// Gemini's 429 body: `RESOURCE_EXHAUSTED` with `QuotaFailure` and `RetryInfo` details.
#[must_use]
pub fn gemini_429(err: &ApiError) -> Value {
    let (quota_id, after) = match err {
        ApiError::Limited { rejection, retry_after, .. } => (gemini_quota_id(rejection.dim), *retry_after),
        _ => ("GenerateRequestsPerMinutePerProjectPerModel", 1),
    };
    json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": quota_id}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{after}s")}
        ]
    }})
}

fn gemini_quota_id(dim: crate::admission::Dim) -> &'static str {
    use crate::admission::Dim;
    match dim {
        Dim::Rpd => "GenerateRequestsPerDayPerProjectPerModel",
        Dim::Tpd => "GenerateContentInputTokensPerDayPerProjectPerModel",
        d if d.is_tokens() => "GenerateContentInputTokensPerModelPerMinute",
        _ => "GenerateRequestsPerMinutePerProjectPerModel",
    }
}
