//! Google's own client shapes in front of any deployment: the Gemini API
//! (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent`, `:countTokens`,
//! and the same under `/v1/`), Vertex AI's publisher paths for Gemini
//! (`/{v1,v1beta1}/projects/{p}/locations/{l}/publishers/google/models/{model}:…`, and
//! without the project and location, as google-genai's express mode calls them) and for
//! Claude (`…/publishers/anthropic/models/{model}:rawPredict` / `:streamRawPredict`).
//!
//! `{model}` names a sluice model profile, served by whatever deployment kind it is on.
//! The translation is at the edge: a Gemini body becomes the OpenAI chat body the road
//! already serves ([`sluice_provider::gemini_to_openai_request`], the inverse of the
//! mapping sluice uses for Gemini upstreams), the road runs it as any chat request (the
//! same authentication, admission, tenancy, usage and access log), and its answer — JSON,
//! stream or error — is turned back into Gemini's shapes. A Vertex Claude body is an
//! Anthropic Messages body without `model` and with `anthropic_version`: the path's model
//! goes in, the version comes out, and it runs as `/v1/messages`.
//!
//! The caller's sluice key comes as `x-goog-api-key` (google-genai), `?key=` (REST
//! callers; moved into the header here and never logged), or `Authorization: Bearer`
//! (Vertex clients' access token slot).
//!
//! Shapes: <https://ai.google.dev/api/generate-content> (generateContent,
//! streamGenerateContent with `alt=sse`, else a JSON array), <https://ai.google.dev/api/tokens>
//! (countTokens: `contents` or `generateContentRequest`, answered `{"totalTokens"}`),
//! <https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference>
//! (Vertex publisher model paths), <https://docs.anthropic.com/en/api/claude-on-vertex-ai>
//! (Claude's rawPredict body), <https://cloud.google.com/apis/design/errors> (the error
//! object and its status names).

use std::collections::HashMap;
use std::future::Future;

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, Response, header};
use axum::response::IntoResponse as _;
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sluice_provider::{GeminiFraming, OpenAiToGeminiStream, Protocol, RequestError, RequestErrorCode, parse_request};

use crate::AppState;
use crate::access::Line;
use crate::auth::Authenticated;
use crate::catalog::COUNT_TOKENS_MAX_BODY;
use crate::error::{Envelope, ErrorResponse, GatewayError, shown_path};
use crate::road::{self, read_body};
use crate::trace::Trace;

/// The header google-genai sends the key in; a `?key=` is moved into it.
const GOOG_API_KEY: &str = "x-goog-api-key";

/// A Gemini method on a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Generate,
    Stream,
    CountTokens,
}

impl Method {
    fn of(name: &str) -> Option<Self> {
        match name {
            "generateContent" => Some(Self::Generate),
            "streamGenerateContent" => Some(Self::Stream),
            "countTokens" => Some(Self::CountTokens),
            _ => None,
        }
    }
}

/// `POST /v1beta/models/{model}:{method}` and `/v1/models/{model}:{method}`.
pub async fn models(
    State(state): State<AppState>,
    Path(rest): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response<Body> {
    gemini(&state, &rest, query.as_deref(), request).await
}

/// `POST /{version}/projects/{p}/locations/{l}/publishers/{publisher}/models/{model}:{method}`
/// and `/{version}/publishers/{publisher}/models/{model}:{method}` (Vertex AI).
pub async fn publisher(
    State(state): State<AppState>,
    Path(params): Path<HashMap<String, String>>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response<Body> {
    let action = params.get("action").map_or("", String::as_str);
    match params.get("publisher").map(String::as_str) {
        Some("google") => gemini(&state, action, query.as_deref(), request).await,
        Some("anthropic") => claude(&state, action, request).await,
        _ => not_found(&request).await,
    }
}

async fn gemini(state: &AppState, action: &str, query: Option<&str>, request: Request) -> Response<Body> {
    let Some((model, method)) = action.rsplit_once(':').and_then(|(m, name)| Some((m, Method::of(name)?))) else {
        return not_found(&request).await;
    };
    let sse = query.is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"));
    let framing = if sse { GeminiFraming::Sse } else { GeminiFraming::JsonArray };
    let request = key_from_query(request, query);
    let model = model.to_owned();
    let asked = model.clone();
    let response = crate::ratelimit_headers::around(state, Protocol::OpenAiChat, request, |request| async move {
        let (mut parts, body) = request.into_parts();
        let authenticated = match parts.extensions.get::<Authenticated>() {
            Some(authenticated) => authenticated.clone(),
            None => Authenticated::of(state.current(), &parts.headers),
        };
        let result = async {
            let (gateway, caller) = (&authenticated.gateway, authenticated.caller()?);
            let limit = match method {
                Method::CountTokens => gateway.max_body_bytes.min(COUNT_TOKENS_MAX_BODY),
                Method::Generate | Method::Stream => gateway.max_body_bytes,
            };
            let bytes = read_body(body, limit).await?;
            if method == Method::CountTokens {
                return Ok(Edge::Answered(counted_answer(count_tokens(gateway, caller, &bytes, &asked).await?)));
            }
            let chat = sluice_provider::gemini_to_openai_request(&bytes, &asked, method == Method::Stream)
                .map_err(|e| bad_request(&e))?;
            Ok(Edge::Road(chat))
        }
        .await;
        match result {
            Ok(Edge::Road(chat)) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                let request = Request::from_parts(parts, Body::from(chat));
                road::handle(state.current(), Protocol::OpenAiChat, request).await
            }
            Ok(Edge::Answered(response)) => logged(&authenticated, &parts, Ok(response), Envelope::OpenAi),
            Err(error) => logged(&authenticated, &parts, Err(error), Envelope::OpenAi),
        }
    })
    .await;
    if method == Method::CountTokens && response.status().is_success() {
        // Already Gemini's `{"totalTokens"}`.
        return response;
    }
    to_gemini(response, &model, method == Method::Stream, framing).await
}

/// Whether a `GET` on a path both OpenAI's and Google's clients use (`/v1/models`) comes
/// from a Google client: its key is in `x-goog-api-key` or `?key=`.
pub fn from_google(headers: &http::HeaderMap, query: Option<&str>) -> bool {
    headers.contains_key(GOOG_API_KEY) || query.is_some_and(|q| q.split('&').any(|pair| pair.starts_with("key=")))
}

/// `GET /v1beta/models` (and `/v1/models` from a Google client): the profiles the key may
/// name as one page of Gemini `Model`s (<https://ai.google.dev/api/models#method:-models.list>),
/// which google-genai's `models.list()` reads.
pub async fn list_models(State(state): State<AppState>, RawQuery(query): RawQuery, request: Request) -> Response<Body> {
    let (_, gateway, caller) = match catalogue_caller(&state, query.as_deref(), request).await {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    let models: Vec<Value> = crate::catalog::names(&gateway, &caller).into_iter().map(model_resource).collect();
    axum::Json(json!({ "models": models })).into_response()
}

/// `GET /v1beta/models/{model}` (and `/v1/models/{model}` from a Google client): one
/// profile as a Gemini `Model` (<https://ai.google.dev/api/models#method:-models.get>), or
/// Google's `NOT_FOUND`.
pub async fn get_model(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response<Body> {
    let (request, gateway, caller) = match catalogue_caller(&state, query.as_deref(), request).await {
        Ok(found) => found,
        Err(refusal) => return refusal,
    };
    let name = name.strip_prefix("models/").unwrap_or(&name);
    match gateway.profiles.get_key_value(name).filter(|_| caller.may_name(name)) {
        Some((name, _)) => axum::Json(model_resource(name)).into_response(),
        None => google_refusal(GatewayError::UnknownModel(name.to_owned()), request.headers()).await,
    }
}

/// The request of a Google client's model listing (its `?key=` moved into the header), the
/// gateway and the caller its key names; or Google's refusal of the key.
async fn catalogue_caller(
    state: &AppState,
    query: Option<&str>,
    request: Request,
) -> Result<(Request, std::sync::Arc<crate::state::Gateway>, crate::state::Caller), Response<Body>> {
    let request = key_from_query(request, query);
    let gateway = state.current();
    match crate::auth::authenticate(&gateway, request.headers()) {
        Ok(caller) => Ok((request, gateway, caller)),
        Err(error) => Err(google_refusal(error, request.headers()).await),
    }
}

/// A model profile as a Gemini `Model` resource: its name under `models/`, and the methods
/// sluice serves for it.
fn model_resource(name: &str) -> Value {
    json!({
        "name": format!("models/{name}"),
        "baseModelId": name,
        "version": "sluice",
        "displayName": name,
        "description": format!("sluice model profile `{name}`"),
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

/// A refusal made before any model is read, in Google's error object.
async fn google_refusal(error: GatewayError, headers: &http::HeaderMap) -> Response<Body> {
    to_gemini(openai_error(error, headers), "", false, GeminiFraming::Sse).await
}

/// What the edge makes of a Gemini request: the chat body for the road, or its own answer
/// (a token count).
enum Edge {
    Road(Vec<u8>),
    Answered(Response<Body>),
}

/// An answer or refusal made at the edge, before the road: in the access log as the road's
/// own, a refusal counted as one refused before routing, in `envelope` (a Gemini route's
/// OpenAI envelope is turned into Google's by [`to_gemini`]).
fn logged(
    authenticated: &Authenticated,
    parts: &axum::http::request::Parts,
    result: Result<Response<Body>, GatewayError>,
    envelope: Envelope,
) -> Response<Body> {
    let gateway = &authenticated.gateway;
    let trace = &Trace::from_headers(&parts.headers);
    let access = Line::new(gateway, trace, authenticated.caller().ok());
    let route = parts.extensions.get::<axum::extract::MatchedPath>().map_or(parts.uri.path(), |m| m.as_str());
    access.request(parts.method.as_str(), route);
    road::finished(&access, &result);
    let mut response = match result {
        Ok(response) => response,
        Err(error) => {
            let response = ErrorResponse { error, envelope, trace_id: trace.id.clone() };
            let response = response.into_response();
            road::count(gateway, None, response.status());
            response
        }
    };
    crate::trace::stamp(response.headers_mut(), &trace.id);
    response
}

/// `?key=KEY` as the `x-goog-api-key` header (when the request has no key header), and
/// the query without it, so that the key is neither logged nor passed on.
fn key_from_query(mut request: Request, query: Option<&str>) -> Request {
    let Some(query) = query else { return request };
    let (keys, rest): (Vec<&str>, Vec<&str>) = query.split('&').partition(|pair| pair.starts_with("key="));
    let Some(key) = keys.first().and_then(|pair| pair.strip_prefix("key=")) else { return request };
    let key = percent_decode(key);
    if !request.headers().contains_key(GOOG_API_KEY)
        && let Ok(value) = HeaderValue::try_from(key)
    {
        request.headers_mut().insert(GOOG_API_KEY, value);
    }
    let path = request.uri().path().to_owned();
    let uri = if rest.is_empty() { path } else { format!("{path}?{}", rest.join("&")) };
    if let Ok(uri) = uri.parse() {
        *request.uri_mut() = uri;
    }
    request
}

/// `%XX` escapes decoded (a key is ASCII; anything undecodable is kept as sent).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// A translation refusal as the 400 naming its field.
fn bad_request(error: &sluice_provider::TranslateError) -> GatewayError {
    GatewayError::BadRequest(RequestError {
        param: error.field().map(str::to_owned),
        message: error.to_string(),
        code: RequestErrorCode::InvalidValue,
    })
}

/// The input tokens sluice would reserve for the request on its model's deployment (as
/// `/v1/messages/count_tokens`: answered by sluice alone, one request and no tokens on the
/// caller's own scopes).
async fn count_tokens(
    gateway: &crate::state::Gateway,
    caller: &crate::state::Caller,
    bytes: &[u8],
    model: &str,
) -> Result<u64, GatewayError> {
    let chat = sluice_provider::gemini_count_to_openai_request(bytes, model).map_err(|e| bad_request(&e))?;
    let request = parse_request(Protocol::OpenAiChat, &chat).map_err(GatewayError::BadRequest)?;
    crate::metered::run(gateway, caller, async { crate::catalog::estimate_named(gateway, caller, &request) }).await
}

fn counted_answer(tokens: u64) -> Response<Body> {
    let mut response = axum::Json(json!({"totalTokens": tokens})).into_response();
    response.headers_mut().insert("x-sluice-estimate", HeaderValue::from_static("true"));
    response
}

/// A refusal in the OpenAI envelope, turned into Google's with every other answer by
/// [`to_gemini`].
fn openai_error(error: GatewayError, headers: &http::HeaderMap) -> Response<Body> {
    let trace = Trace::from_headers(headers);
    ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: trace.id }.into_response()
}

/// A path under the Google prefixes that names no method sluice serves: Google's 404 (the
/// request is read before the answer is awaited: a body is not shared across threads).
fn not_found(request: &Request) -> impl Future<Output = Response<Body>> + Send + use<> {
    let error =
        GatewayError::UnknownRoute { method: request.method().to_string(), path: shown_path(request.uri().path()) };
    let refusal = openai_error(error, request.headers());
    async move { to_gemini(refusal, "", false, GeminiFraming::Sse).await }
}

/// The road's answer (OpenAI chat shapes) in Gemini's: an error as Google's error object
/// (with `RetryInfo` from `retry-after`), a JSON answer as a `GenerateContentResponse`, a
/// stream as `GenerateContentResponse` chunks framed as the client asked.
async fn to_gemini(response: Response<Body>, model: &str, stream: bool, framing: GeminiFraming) -> Response<Body> {
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let json_type = HeaderValue::from_static("application/json; charset=UTF-8");
    if !parts.status.is_success() {
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
        let retry = parts.headers.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        parts.headers.insert(header::CONTENT_TYPE, json_type);
        let converted = sluice_provider::openai_error_to_gemini(parts.status.as_u16(), &bytes, retry);
        return Response::from_parts(parts, Body::from(converted));
    }
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if is_sse {
        let content_type = match framing {
            GeminiFraming::Sse => HeaderValue::from_static("text/event-stream"),
            GeminiFraming::JsonArray => json_type,
        };
        parts.headers.insert(header::CONTENT_TYPE, content_type);
        return Response::from_parts(parts, relay(body, OpenAiToGeminiStream::new(model, framing)));
    }
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let Ok(answer) = sluice_provider::openai_to_gemini_response(&bytes, model) else {
        return crate::error::gemini_unreadable_answer(parts);
    };
    if !stream {
        parts.headers.insert(header::CONTENT_TYPE, json_type);
        return Response::from_parts(parts, Body::from(answer));
    }
    // A stream asked for and a whole answer given (a stored replay): one chunk of it.
    let framed = match framing {
        GeminiFraming::Sse => {
            parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            [b"data: ".as_slice(), &answer, b"\r\n\r\n"].concat()
        }
        GeminiFraming::JsonArray => {
            parts.headers.insert(header::CONTENT_TYPE, json_type);
            [b"[".as_slice(), &answer, b"]"].concat()
        }
    };
    Response::from_parts(parts, Body::from(framed))
}

/// The road's stream body, translated chunk by chunk; its end (or a read error) ends the
/// translation, with the interruption error when the road's stream stopped short.
fn relay(body: Body, translator: OpenAiToGeminiStream) -> Body {
    let state = (body.into_data_stream(), Some(translator));
    let stream = futures_util::stream::unfold(state, |(mut body, translator)| async move {
        let mut translator = translator?;
        loop {
            match body.next().await {
                Some(Ok(chunk)) => {
                    let out = translator.push(&chunk);
                    if !out.is_empty() {
                        return Some((Ok::<Bytes, std::io::Error>(out), (body, Some(translator))));
                    }
                }
                Some(Err(_)) | None => return Some((Ok(translator.finish()), (body, None))),
            }
        }
    });
    Body::from_stream(stream)
}

/// Vertex AI's Claude paths: `{model}:rawPredict` and `{model}:streamRawPredict` (an
/// Anthropic Messages body with `anthropic_version` and no `model`), and
/// `count-tokens:rawPredict` (AnthropicVertex's token count, `model` in the body).
async fn claude(state: &AppState, action: &str, request: Request) -> Response<Body> {
    let Some((model, method)) = action.rsplit_once(':') else { return not_found(&request).await };
    let stream = match method {
        "rawPredict" => false,
        "streamRawPredict" => true,
        _ => return not_found(&request).await,
    };
    if model == "count-tokens" && !stream {
        return claude_count_tokens(state, request).await;
    }
    let model = model.to_owned();
    crate::ratelimit_headers::around(state, Protocol::AnthropicMessages, request, |request| async move {
        let (mut parts, body) = request.into_parts();
        let authenticated = match parts.extensions.get::<Authenticated>() {
            Some(authenticated) => authenticated.clone(),
            None => Authenticated::of(state.current(), &parts.headers),
        };
        if authenticated.caller().is_err() {
            // The road refuses it, logged and counted, before reading the body.
            return road::handle(state.current(), Protocol::AnthropicMessages, Request::from_parts(parts, body)).await;
        }
        let bytes = match read_body(body, authenticated.gateway.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(error) => {
                return logged(&authenticated, &parts, Err(error), Envelope::Anthropic);
            }
        };
        let bytes = vertex_body(&bytes, Some(&model), stream);
        parts.headers.remove(header::CONTENT_LENGTH);
        road::handle(state.current(), Protocol::AnthropicMessages, Request::from_parts(parts, Body::from(bytes))).await
    })
    .await
}

/// AnthropicVertex's `count-tokens:rawPredict`: the key checked first, then the body (as
/// `/v1/messages/count_tokens` reads it) without its `anthropic_version`.
async fn claude_count_tokens(state: &AppState, request: Request) -> Response<Body> {
    let (mut parts, body) = request.into_parts();
    if let Err(error) = Authenticated::of(state.current(), &parts.headers).caller() {
        return anthropic_error(error, &parts.headers);
    }
    let bytes = match read_body(body, state.current().max_body_bytes.min(COUNT_TOKENS_MAX_BODY)).await {
        Ok(bytes) => bytes,
        Err(error) => return anthropic_error(error, &parts.headers),
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    let bytes = vertex_body(&bytes, None, false);
    crate::catalog::count_tokens(State(state.clone()), Request::from_parts(parts, Body::from(bytes))).await
}

/// A Vertex Claude body as a Messages body: `anthropic_version` out, the path's `model`
/// in, `stream: true` for `:streamRawPredict`. A body that is not a JSON object is left for
/// the road to refuse.
fn vertex_body(bytes: &Bytes, model: Option<&str>, stream: bool) -> Bytes {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(bytes) else { return bytes.clone() };
    body.remove("anthropic_version");
    if let Some(model) = model {
        body.insert("model".into(), Value::from(model));
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    serde_json::to_vec(&body).map_or_else(|_| bytes.clone(), Bytes::from)
}

fn anthropic_error(error: GatewayError, headers: &http::HeaderMap) -> Response<Body> {
    let trace = Trace::from_headers(headers);
    ErrorResponse { error, envelope: Envelope::Anthropic, trace_id: trace.id }.into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests fail loudly")]
mod tests {
    use super::*;

    #[test]
    fn a_query_key_moves_into_the_header_and_out_of_the_uri() {
        let request = Request::builder()
            .uri("/v1beta/models/m:streamGenerateContent?alt=sse&key=sk%2Dabc")
            .body(Body::empty())
            .unwrap();
        let request = key_from_query(request, Some("alt=sse&key=sk%2Dabc"));
        assert_eq!(request.headers().get(GOOG_API_KEY).and_then(|v| v.to_str().ok()), Some("sk-abc"));
        assert_eq!(request.uri().to_string(), "/v1beta/models/m:streamGenerateContent?alt=sse");
    }

    #[test]
    fn a_vertex_claude_body_becomes_a_messages_body() {
        let body = Bytes::from_static(br#"{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[]}"#);
        let out: Value = serde_json::from_slice(&vertex_body(&body, Some("claude"), true)).unwrap();
        assert_eq!(out, json!({"max_tokens": 5, "messages": [], "model": "claude", "stream": true}));
        let not_json = Bytes::from_static(b"nope");
        assert_eq!(vertex_body(&not_json, Some("claude"), false), not_json);
    }
}
