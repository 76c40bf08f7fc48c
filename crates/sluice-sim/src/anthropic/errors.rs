//! Anthropic-shaped error bodies: `{"type": "error", "error": {"type", "message"}, "request_id"}`.

use serde_json::{Value, json};

use crate::api_error::{ApiError, dim_words};

/// The body of `err`.
#[must_use]
pub fn body(err: &ApiError, request_id: &str) -> Value {
    let (kind, message) = parts(err);
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id})
}

fn parts(err: &ApiError) -> (&'static str, String) {
    match err {
        ApiError::BadJson => (
            "invalid_request_error",
            "There was an issue with the format or content of your request: invalid JSON body.".into(),
        ),
        ApiError::Invalid { message, .. } => ("invalid_request_error", message.clone()),
        ApiError::NotFound(model) => ("not_found_error", format!("model: {model}")),
        ApiError::Limited { rejection, .. } => {
            let (what, _, per) = dim_words(rejection.dim);
            let limit = rejection.limit.round();
            let message = if rejection.wait.is_none() {
                format!(
                    "This request would exceed your organization's rate limit of {limit} {what} per {per} and can never fit: reduce its size."
                )
            } else {
                format!(
                    "This request would exceed your organization's rate limit of {limit} {what} per {per}. Please try again later."
                )
            };
            ("rate_limit_error", message)
        }
        ApiError::Concurrency { status: 529, .. } | ApiError::Fault(529) => ("overloaded_error", "Overloaded".into()),
        ApiError::Concurrency { .. } => {
            ("rate_limit_error", "Too many concurrent requests. Please try again shortly.".into())
        }
        ApiError::Fault(400) => ("invalid_request_error", "The request was rejected.".into()),
        ApiError::Fault(401) => ("authentication_error", "invalid x-api-key".into()),
        ApiError::Fault(429) => ("rate_limit_error", "Rate limited. Please try again later.".into()),
        ApiError::Fault(_) => ("api_error", "Internal server error".into()),
    }
}
