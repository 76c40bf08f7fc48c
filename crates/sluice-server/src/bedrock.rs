//! Bedrock's runtime API, served to Bedrock's own clients (boto3's `bedrock-runtime` with
//! `endpoint_url` set to sluice): `POST /model/{modelId}/converse`, `/converse-stream`,
//! `/invoke` and `/invoke-with-response-stream`, where `modelId` (URL-encoded, as botocore
//! sends it) names a model profile, served by whatever deployment serves it.
//!
//! Translated at the edge: the body becomes the Anthropic Messages request the road
//! already carries (Converse through [`sluice_provider::converse_to_anthropic_request`],
//! InvokeModel's Anthropic body through [`sluice_provider::invoke_to_anthropic_request`],
//! the beta flags of either through [`sluice_provider::bedrock_beta_flags`] into the
//! `anthropic-beta` header), so it is authenticated, admitted, tenanted, metered and
//! logged as every other request is; the road's answer goes back in Bedrock's shape:
//! Converse's JSON ([`sluice_provider::anthropic_to_converse_response`]), event-stream
//! frames ([`sluice_provider::AnthropicToConverseStream`]), InvokeModel's Anthropic JSON as
//! it is. These are the simulated provider's own translations, so both ends speak the same
//! Bedrock.
//!
//! The caller's sluice key is a Bedrock API key: `Authorization: Bearer KEY`, as boto3
//! sends `AWS_BEARER_TOKEN_BEDROCK`
//! (<https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html>); botocore sends
//! it over HTTPS only, so Bedrock clients need `[server] tls_cert` / `tls_key`.
//!
//! Shapes: Converse
//! (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>),
//! ConverseStream (`API_runtime_ConverseStream.html`), InvokeModel
//! (`API_runtime_InvokeModel.html`), InvokeModelWithResponseStream
//! (`API_runtime_InvokeModelWithResponseStream.html`), errors as `{"message"}` with the
//! error's name in `x-amzn-errortype`
//! (<https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html>),
//! which botocore raises as its own typed exceptions: sluice's 429 is a
//! `ThrottlingException` (its `retry-after` kept), a bad body a `ValidationException`
//! naming the field, an unknown profile a `ResourceNotFoundException`, a missing or unknown
//! key an `AccessDeniedException` (403, as AWS answers credentials it does not accept).
//! Messages are sluice's own; a provider's refusal passed on is told by its status alone.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sluice_provider::{Protocol, RequestError, RequestErrorCode, TranslateError};
use sluice_quota::{Clock, Nanos};

use crate::AppState;
use crate::auth::Authenticated;
use crate::error::{Envelope, ErrorResponse, GatewayError};
use crate::road;
use crate::trace::Trace;

/// Largest answer body the edge reads whole to re-shape (a non-stream answer, an error).
const MAX_ANSWER_BYTES: usize = 64 * 1024 * 1024;

/// Bedrock's request id header; sluice's trace id.
const REQUEST_ID: &str = "x-amzn-requestid";

/// Which of the runtime operations a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    /// `converse` (`stream`: `converse-stream`).
    Converse { stream: bool },
    /// `invoke` (`stream`: `invoke-with-response-stream`).
    Invoke { stream: bool },
}

impl Operation {
    fn of(action: &str) -> Option<Self> {
        match action {
            "converse" => Some(Self::Converse { stream: false }),
            "converse-stream" => Some(Self::Converse { stream: true }),
            "invoke" => Some(Self::Invoke { stream: false }),
            "invoke-with-response-stream" => Some(Self::Invoke { stream: true }),
            _ => None,
        }
    }
}

/// `POST /model/{modelId}/{operation}`.
pub(crate) async fn runtime(
    State(state): State<AppState>,
    Path((model, action)): Path<(String, String)>,
    request: Request,
) -> Response {
    if action == "count-tokens" {
        return count_tokens(state, &model, request).await;
    }
    let Some(operation) = Operation::of(&action) else {
        let message = format!(
            "unknown operation `{action}`: Bedrock's runtime operations here are converse, converse-stream, invoke, invoke-with-response-stream and count-tokens"
        );
        return crate::error::bedrock_unknown_operation(&message);
    };
    let clock = Arc::clone(&state.current().services.clock);
    let started = clock.now();
    let response = crate::ratelimit_headers::around(&state, Protocol::AnthropicMessages, request, |request| async {
        match inbound(request, &model, operation).await {
            Ok(request) => road::handle(state.current(), Protocol::AnthropicMessages, request).await,
            Err(refusal) => refusal,
        }
    })
    .await;
    outbound(response, operation, clock, started).await
}

/// The request as the road's Anthropic Messages request: its body translated, its beta
/// flags in `anthropic-beta`. A request without a good key goes on untouched (the road
/// refuses it before reading its body).
///
/// # Errors
/// The refusal of a body that cannot be read or translated, logged as the road logs its
/// refusals.
async fn inbound(request: Request, model: &str, operation: Operation) -> Result<Request, Response> {
    let (mut parts, body) = request.into_parts();
    let Some(authenticated) = parts.extensions.get::<Authenticated>().cloned() else {
        return Ok(Request::from_parts(parts, body));
    };
    let Ok(caller) = authenticated.caller() else { return Ok(Request::from_parts(parts, body)) };
    let gateway = &authenticated.gateway;
    let refused = |error: GatewayError| {
        let trace = Trace::from_headers(&parts.headers);
        // A refusal of the body is never a rate limit: its line needs only the status.
        let line = crate::access::Line::new(gateway, &trace, Some(caller));
        let route = parts.extensions.get::<axum::extract::MatchedPath>().map_or(parts.uri.path(), |m| m.as_str());
        line.request(parts.method.as_str(), route);
        line.finished(error.status().as_u16(), None);
        road::count(gateway, None, error.status());
        ErrorResponse { error, envelope: Envelope::Anthropic, trace_id: trace.id }.into_response()
    };
    let bytes = match road::read_body(body, gateway.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return Err(refused(error)),
    };
    let default_max_tokens = gateway.profiles.get(model).map_or(DEFAULT_MAX_TOKENS, |p| p.default_max_tokens);
    let (body, flags) = match to_anthropic(&bytes, model, operation, default_max_tokens) {
        Ok(translated) => translated,
        Err(e) => return Err(refused(bad_request(&e))),
    };
    // Bedrock reads beta flags from the body only; the road reads them from the header.
    parts.headers.remove("anthropic-beta");
    if let Some(value) = (!flags.is_empty()).then(|| HeaderValue::from_str(&flags.join(","))).and_then(Result::ok) {
        parts.headers.insert("anthropic-beta", value);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(Request::from_parts(parts, Body::from(body)))
}

/// `POST /model/{modelId}/count-tokens`
/// (<https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html>):
/// its input read as Anthropic's body and counted as `/v1/messages/count_tokens` counts it
/// (by the profile's tokenizer, nothing sent upstream, one request on the caller's own
/// scopes), answered `{"inputTokens": n}`. The key is checked before the body is read.
async fn count_tokens(state: AppState, model: &str, request: Request) -> Response {
    let gateway = state.current();
    let (mut parts, body) = request.into_parts();
    let refused = |error: GatewayError, headers: &HeaderMap| {
        let trace_id = Trace::from_headers(headers).id;
        refusal(ErrorResponse { error, envelope: Envelope::Anthropic, trace_id }.into_response())
    };
    let body = if crate::auth::authenticate(&gateway, &parts.headers).is_ok() {
        let limit = gateway.max_body_bytes.min(crate::catalog::COUNT_TOKENS_MAX_BODY);
        let bytes = match road::read_body(body, limit).await {
            Ok(bytes) => bytes,
            Err(error) => return refused(error, &parts.headers).await,
        };
        match sluice_provider::count_tokens_to_anthropic_request(&bytes, model) {
            Ok(anthropic) => Body::from(anthropic),
            Err(e) => return refused(bad_request(&e), &parts.headers).await,
        }
    } else {
        body
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let answer = crate::catalog::count_tokens(State(state), Request::from_parts(parts, body)).await;
    if !answer.status().is_success() {
        return refusal(answer).await;
    }
    let (mut parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await.unwrap_or_default();
    let tokens = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v.get("input_tokens")?.as_u64());
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json!({"inputTokens": tokens.unwrap_or(0)}).to_string()))
}

/// `max_tokens` of a Converse request without `inferenceConfig.maxTokens` whose profile is
/// unknown (the road then refuses it for its model).
const DEFAULT_MAX_TOKENS: u64 = 1024;

/// Converse members sluice cannot honour: refused rather than silently dropped.
const REFUSED_MEMBERS: [(&str, &str); 2] = [
    ("guardrailConfig", "Bedrock guardrails are not applied by sluice"),
    ("promptVariables", "Bedrock prompt management is not served by sluice"),
];

/// The Anthropic Messages body and the beta flags of a Bedrock `body` on `model`.
fn to_anthropic(
    body: &[u8],
    model: &str,
    operation: Operation,
    default_max_tokens: u64,
) -> Result<(Vec<u8>, Vec<String>), TranslateError> {
    match operation {
        Operation::Invoke { stream } => {
            let flags = sluice_provider::bedrock_beta_flags(body, true)?;
            Ok((sluice_provider::invoke_to_anthropic_request(body, model, stream)?, flags))
        }
        Operation::Converse { stream } => {
            let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            if let Some((member, why)) =
                REFUSED_MEMBERS.iter().find(|(m, _)| value.get(m).is_some_and(|v| !v.is_null()))
            {
                return Err(TranslateError::Invalid {
                    field: (*member).to_owned(),
                    reason: format!("is not supported: {why}"),
                });
            }
            let flags = sluice_provider::bedrock_beta_flags(body, false)?;
            let anthropic = sluice_provider::converse_to_anthropic_request(body, model, stream)?;
            // Converse's `maxTokens` is optional (the model's own default applies); the
            // profile's default stands in for it, as for an OpenAI request without one.
            let mut anthropic: Value = serde_json::from_slice(&anthropic).unwrap_or(Value::Null);
            if let Some(object) = anthropic.as_object_mut() {
                object.entry("max_tokens").or_insert(Value::from(default_max_tokens));
            }
            Ok((serde_json::to_vec(&anthropic).unwrap_or_default(), flags))
        }
    }
}

/// A translation error as the road's bad request, naming the field.
fn bad_request(error: &TranslateError) -> GatewayError {
    GatewayError::BadRequest(RequestError {
        param: error.field().map(str::to_owned),
        message: error.to_string(),
        code: RequestErrorCode::InvalidValue,
    })
}

/// The road's answer in Bedrock's shape.
async fn outbound(response: Response, operation: Operation, clock: Arc<dyn Clock>, started: Nanos) -> Response {
    if !response.status().is_success() {
        return refusal(response).await;
    }
    let (mut parts, body) = response.into_parts();
    if let Some(trace) = parts.headers.get("x-sluice-trace-id").cloned() {
        parts.headers.insert(REQUEST_ID, trace);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    let latency_ms = move || u64::try_from(clock.now().since(started).as_millis()).unwrap_or(u64::MAX);
    match operation {
        Operation::Converse { stream: true } | Operation::Invoke { stream: true } => {
            let mut frames =
                sluice_provider::AnthropicToConverseStream::new(matches!(operation, Operation::Invoke { .. }));
            let mut broken = false;
            let body = body.into_data_stream().filter_map(move |chunk| {
                let out = match chunk {
                    Ok(chunk) => {
                        frames.set_latency_ms(latency_ms());
                        frames.push(&chunk)
                    }
                    // A body that breaks off without the road's own error event: Bedrock
                    // ends such a stream with a `modelStreamErrorException`.
                    Err(_) if !broken => {
                        broken = true;
                        let message = json!({"message": "the stream was interrupted"});
                        Bytes::from(sluice_provider::converse_frame("modelStreamErrorException", &message, true))
                    }
                    Err(_) => Bytes::new(),
                };
                std::future::ready((!out.is_empty()).then_some(Ok::<_, std::convert::Infallible>(out)))
            });
            let content_type = HeaderValue::from_static("application/vnd.amazon.eventstream");
            parts.headers.insert(header::CONTENT_TYPE, content_type);
            Response::from_parts(parts, Body::from_stream(body))
        }
        Operation::Converse { stream: false } => {
            let bytes = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await.unwrap_or_default();
            match sluice_provider::anthropic_to_converse_response(&bytes, latency_ms()) {
                Ok(converse) => {
                    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    Response::from_parts(parts, Body::from(converse))
                }
                Err(_) => crate::error::bedrock_unreadable_answer(),
            }
        }
        // InvokeModel answers the model's own JSON, its token counts and latency in headers.
        Operation::Invoke { stream: false } => {
            let bytes = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await.unwrap_or_default();
            let usage = serde_json::from_slice::<Value>(&bytes).ok().and_then(|v| v.get("usage").cloned());
            let count = |key: &str| usage.as_ref().and_then(|u| u.get(key)).and_then(Value::as_u64);
            let counts = [
                ("x-amzn-bedrock-input-token-count", count("input_tokens")),
                ("x-amzn-bedrock-output-token-count", count("output_tokens")),
                ("x-amzn-bedrock-invocation-latency", Some(latency_ms())),
            ];
            for (name, n) in counts {
                if let Some(n) = n {
                    parts.headers.insert(name, HeaderValue::from(n));
                }
            }
            Response::from_parts(parts, Body::from(bytes))
        }
    }
}

/// A refusal (sluice's, or a provider's passed on) in Bedrock's shape: `{"message"}` and
/// `x-amzn-errortype`, sluice's headers (`retry-after`, the trace id, rate limits) kept.
async fn refusal(response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_ANSWER_BYTES).await.unwrap_or_default();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let error = &value["error"];
    // Sluice's own refusals carry its trace id; a provider's words are not passed on.
    let own = error.get("trace_id").is_some();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .filter(|_| own)
        .map_or_else(|| format!("the provider refused the request (HTTP {})", parts.status.as_u16()), str::to_owned);
    let mut response = crate::error::bedrock_refusal(parts.status, &message);
    let mut headers = parts.headers;
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::CONTENT_TYPE);
    if let Some(trace) = headers.get("x-sluice-trace-id").cloned() {
        headers.insert(REQUEST_ID, trace);
    }
    response.headers_mut().extend(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_named_by_the_path() {
        assert_eq!(Operation::of("converse-stream"), Some(Operation::Converse { stream: true }));
        assert_eq!(Operation::of("invoke"), Some(Operation::Invoke { stream: false }));
        assert_eq!(Operation::of("apply-guardrail"), None);
    }

    #[test]
    fn converse_without_max_tokens_takes_the_profiles_default_and_refuses_guardrails() {
        let body = br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}],"additionalModelRequestFields":{"anthropic_beta":["context-1m-2025-08-07"]}}"#;
        let (anthropic, flags) =
            to_anthropic(body, "claude", Operation::Converse { stream: true }, 321).unwrap_or_default();
        let anthropic: Value = serde_json::from_slice(&anthropic).unwrap_or_default();
        assert_eq!((anthropic["max_tokens"].as_u64(), anthropic["stream"].as_bool()), (Some(321), Some(true)));
        assert_eq!(anthropic["model"], "claude");
        assert_eq!(flags, ["context-1m-2025-08-07"]);
        let guarded = br#"{"messages":[],"guardrailConfig":{"guardrailIdentifier":"g","guardrailVersion":"1"}}"#;
        let err = to_anthropic(guarded, "claude", Operation::Converse { stream: false }, 1).err();
        assert_eq!(err.as_ref().and_then(TranslateError::field), Some("guardrailConfig"));
    }
}
