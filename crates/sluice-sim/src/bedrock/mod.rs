//! AWS Bedrock's Converse API: `POST /model/{modelId}/converse` and `/converse-stream`,
//! SigV4-verified ([`sigv4`]; a wrong signature or an unknown key is AWS's 403), served
//! through the Anthropic shape of a `flavor = "bedrock"` model (its body, answer and SSE
//! converted to and from Converse), errors in Bedrock's words with `x-amzn-ErrorType`
//! (a quota refusal is a `ThrottlingException` 429), streams in AWS event-stream framing.
//! Converse's reasoning blocks (signed as Anthropic's thinking is, see
//! [`crate::anthropic::thinking`]) and cache points are read back to the Anthropic shape
//! and checked as Bedrock checks them; Anthropic's beta flags are read from the body
//! (`additionalModelRequestFields.anthropic_beta`, InvokeModel's `anthropic_beta`), never
//! from an `anthropic-beta` header
//! (<https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html>).
//! The quota rule (TPM takes input + `max_tokens` up front, output × `output_weight` at
//! the end) is the model's admission's.

pub mod sigv4;

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt as _;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use serde_json::{Value, json};

use crate::config::{Flavor, Shape};
use crate::conn::ConnCtl;
use crate::sim::Sim;

/// Largest Anthropic body read back to convert.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// `POST /model/{modelId}/converse` and `POST /model/{modelId}/converse-stream`.
pub async fn converse(
    State(sim): State<Arc<Sim>>,
    Path((model, action)): Path<(String, String)>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let (invoke, stream) = match action.as_str() {
        "converse" => (false, false),
        "converse-stream" => (false, true),
        "invoke" => (true, false),
        "invoke-with-response-stream" => (true, true),
        _ => return aws_error(&sim, StatusCode::NOT_FOUND, ("UnknownOperationException", "Unknown operation.")),
    };
    serve(sim, Call { model, ctl, headers, uri, body, stream, invoke }).await
}

/// `POST /v1/messages`: any Anthropic-shaped model but a Bedrock one (Bedrock has no such
/// path: a gateway that forgot to speak Converse meets a 404).
pub async fn anthropic_messages(
    State(sim): State<Arc<Sim>>,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.get("model")?.as_str().map(str::to_owned));
    if let Some(name) = name.filter(|n| sim.model(n, Shape::Anthropic).is_some_and(|m| m.flavor == Flavor::Bedrock)) {
        sim.invalid();
        return crate::respond::error(&sim, Flavor::Anthropic, None, &crate::errors::ApiError::NotFound(name));
    }
    crate::anthropic::messages(State(sim), ctl, headers, body).await
}

struct Call {
    model: String,
    ctl: Option<Extension<ConnCtl>>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
    stream: bool,
    /// InvokeModel (Anthropic's own body) rather than Converse.
    invoke: bool,
}

async fn serve(sim: Arc<Sim>, call: Call) -> Response {
    if let Err(denied) = sigv4::verify(&call.headers, &call.uri, &call.body) {
        sim.invalid();
        return aws_error(&sim, StatusCode::FORBIDDEN, denied.words());
    }
    if sim.model(&call.model, Shape::Anthropic).is_none_or(|m| m.flavor != Flavor::Bedrock) {
        sim.invalid();
        return aws_error(
            &sim,
            StatusCode::BAD_REQUEST,
            ("ValidationException", "The provided model identifier is invalid."),
        );
    }
    let malformed = "Malformed input request, please reformat your input and try again.";
    let body = if call.invoke {
        sluice_provider::invoke_to_anthropic_request(&call.body, &call.model, call.stream)
            .map_err(|_| malformed.to_owned())
    } else {
        sluice_provider::converse_to_anthropic_request(&call.body, &call.model, call.stream)
            .map_err(|e| format!("{malformed} {e}"))
    };
    let flags =
        sluice_provider::bedrock_beta_flags(&call.body, call.invoke).map_err(|_| "invalid beta flag".to_owned());
    let (body, flags) = match (body, flags) {
        (Ok(body), Ok(flags)) => (body, flags),
        (Err(words), _) | (_, Err(words)) => {
            sim.invalid();
            return aws_error(&sim, StatusCode::BAD_REQUEST, ("ValidationException", &words));
        }
    };
    let mut headers = call.headers;
    headers.remove("anthropic-beta");
    if let Some(value) = (!flags.is_empty()).then(|| HeaderValue::from_str(&flags.join(","))).and_then(Result::ok) {
        headers.insert("anthropic-beta", value);
    }
    let answer = crate::anthropic::messages(State(Arc::clone(&sim)), call.ctl, headers, Bytes::from(body)).await;
    if !answer.status().is_success() {
        return refusal(&sim, answer).await;
    }
    match (call.invoke, call.stream) {
        (_, true) => event_stream(&sim, answer, call.invoke),
        (true, false) => with_request_id(&sim, answer),
        (false, false) => converse_body(&sim, answer).await,
    }
}

/// A Bedrock error: `{"message"}` with `x-amzn-ErrorType`.
fn aws_error(sim: &Sim, status: StatusCode, (kind, message): (&str, &str)) -> Response {
    let mut response = (status, axum::Json(json!({"message": message}))).into_response();
    let kind = format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    if let Ok(value) = HeaderValue::from_str(&kind) {
        response.headers_mut().insert("x-amzn-errortype", value);
    }
    with_request_id(sim, response)
}

fn with_request_id(sim: &Sim, mut response: Response) -> Response {
    if let Ok(value) = HeaderValue::from_str(sim.request_id().trim_start_matches("req_")) {
        response.headers_mut().insert("x-amzn-requestid", value);
    }
    response
}

/// The Anthropic refusal as Bedrock words it (a quota refusal is a `ThrottlingException`).
async fn refusal(sim: &Sim, answer: Response) -> Response {
    let status = answer.status();
    let bytes = axum::body::to_bytes(answer.into_body(), MAX_BODY).await.unwrap_or_default();
    let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let message = parsed.pointer("/error/message").and_then(Value::as_str).unwrap_or("The request failed.");
    let words = match status.as_u16() {
        429 => ("ThrottlingException", "Too many requests, please wait before trying again."),
        400 | 413 => ("ValidationException", message),
        404 => ("ResourceNotFoundException", message),
        503 | 529 => ("ServiceUnavailableException", "Bedrock is unable to process your request."),
        _ => ("InternalServerException", "The server encountered an internal error."),
    };
    let status = if status.as_u16() == 529 { StatusCode::SERVICE_UNAVAILABLE } else { status };
    aws_error(sim, status, words)
}

async fn converse_body(sim: &Sim, answer: Response) -> Response {
    let bytes = axum::body::to_bytes(answer.into_body(), MAX_BODY).await.unwrap_or_default();
    match sluice_provider::anthropic_to_converse_response(&bytes, 0) {
        Ok(body) => with_request_id(sim, ([(http::header::CONTENT_TYPE, "application/json")], body).into_response()),
        Err(_) => aws_error(
            sim,
            StatusCode::INTERNAL_SERVER_ERROR,
            ("InternalServerException", "The server encountered an internal error."),
        ),
    }
}

fn event_stream(sim: &Sim, answer: Response, invoke: bool) -> Response {
    let mut frames = sluice_provider::AnthropicToConverseStream::new(invoke);
    // A stream the simulator breaks off (a `stream_drop` or `stall` fault) ends as Bedrock
    // ends one that fails mid-way: a `modelStreamErrorException` frame.
    let body = answer.into_body().into_data_stream().map(move |chunk| {
        Ok::<_, std::convert::Infallible>(match chunk {
            Ok(c) => frames.push(&c),
            Err(_) => Bytes::from(sluice_provider::converse_frame(
                "modelStreamErrorException",
                &json!({"message": "The model stream was interrupted."}),
                true,
            )),
        })
    });
    let content_type = [(http::header::CONTENT_TYPE, "application/vnd.amazon.eventstream")];
    with_request_id(sim, (content_type, Body::from_stream(body)).into_response())
}
