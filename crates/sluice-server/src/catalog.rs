//! What a client may ask without sending work upstream: the model list and one model (in
//! OpenAI's shape, or Anthropic's when the request carries `anthropic-version`, as the
//! Anthropic SDK's requests do), Anthropic's token count, and the structured answers for a
//! path or method sluice does not serve.

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, Response, Uri};
use axum::response::IntoResponse as _;
use serde_json::{Value, json};
use sluice_provider::{Protocol, RequestError, RequestErrorCode, parse_request};

use crate::AppState;
use crate::auth::authenticate;
use crate::error::{Envelope, ErrorResponse, GatewayError, shown_path};
use crate::metered;
use crate::road::read_body;
use crate::state::{Caller, Gateway};
use crate::trace::Trace;

/// `created` / `created_at` of every model: profiles have no creation date, so the epoch.
const CREATED_AT: &str = "1970-01-01T00:00:00Z";

/// The envelope the client expects: Anthropic's when it sent `anthropic-version` or called
/// a `/v1/messages` path, OpenAI's otherwise.
fn envelope_of(headers: &HeaderMap, path: &str) -> Envelope {
    if headers.contains_key("anthropic-version") || path.starts_with("/v1/messages") {
        Envelope::Anthropic
    } else {
        Envelope::OpenAi
    }
}

fn refuse(error: GatewayError, envelope: Envelope, headers: &HeaderMap) -> Response<Body> {
    let trace = Trace::from_headers(headers);
    ErrorResponse { error, envelope, trace_id: trace.id }.into_response()
}

fn model_object(name: &str, envelope: Envelope) -> Value {
    match envelope {
        Envelope::OpenAi => json!({"id": name, "object": "model", "created": 0, "owned_by": "sluice"}),
        Envelope::Anthropic => json!({"type": "model", "id": name, "display_name": name, "created_at": CREATED_AT}),
    }
}

/// `GET /v1/models`: every profile a key may name, sorted by name.
pub async fn list(State(state): State<AppState>, headers: HeaderMap) -> Response<Body> {
    let gateway = state.current();
    let envelope = envelope_of(&headers, "/v1/models");
    let caller = match authenticate(&gateway, &headers) {
        Ok(caller) => caller,
        Err(error) => return refuse(error, envelope, &headers),
    };
    let names = names(&gateway, &caller);
    let data: Vec<Value> = names.iter().map(|name| model_object(name, envelope)).collect();
    let body = match envelope {
        Envelope::OpenAi => json!({"object": "list", "data": data}),
        Envelope::Anthropic => json!({
            "data": data,
            "has_more": false,
            "first_id": names.first(),
            "last_id": names.last(),
        }),
    };
    axum::Json(body).into_response()
}

/// The profiles `caller` may name, sorted.
pub fn names<'g>(gateway: &'g Gateway, caller: &Caller) -> Vec<&'g str> {
    let mut names: Vec<&str> = gateway.profiles.keys().map(|n| &**n).filter(|n| caller.may_name(n)).collect();
    names.sort_unstable();
    names
}

/// `GET /v1/models/{model}`: one profile, or a 404 `model_not_found`. Profile names may
/// contain slashes (`team/chat`), so the whole rest of the path is the name.
pub async fn get(State(state): State<AppState>, headers: HeaderMap, Path(name): Path<String>) -> Response<Body> {
    let gateway = state.current();
    let envelope = envelope_of(&headers, "/v1/models");
    let caller = match authenticate(&gateway, &headers) {
        Ok(caller) => caller,
        Err(error) => return refuse(error, envelope, &headers),
    };
    match gateway.profiles.get_key_value(name.as_str()).filter(|_| caller.may_name(&name)) {
        Some((name, _)) => axum::Json(model_object(name, envelope)).into_response(),
        None => refuse(GatewayError::UnknownModel(name), envelope, &headers),
    }
}

/// The largest body `count_tokens` reads (or `max_body_bytes`, when that is smaller):
/// tokenizing costs CPU in proportion to the text.
pub const COUNT_TOKENS_MAX_BODY: usize = 1024 * 1024;

/// `POST /v1/messages/count_tokens`: the input tokens sluice would reserve for this
/// Anthropic-shaped request on its model's deployment (the tokenizer, safety factor and
/// media pricing admission uses), as `{"input_tokens": N}`. Answered by the gateway alone,
/// sending nothing upstream; it costs one request (no tokens) on the caller's own scopes, so
/// a key's request limits bound how much tokenizing it may ask for (see `metered`). The key
/// is checked before the body is read, and the body is capped at [`COUNT_TOKENS_MAX_BODY`].
/// `max_tokens` may be left out, as Anthropic's endpoint allows. The answer (a refusal too)
/// carries the caller's `anthropic-ratelimit-*` headers, as `/v1/messages` does.
pub async fn count_tokens(State(state): State<AppState>, request: Request) -> Response<Body> {
    let current = &state;
    crate::ratelimit_headers::around(current, Protocol::AnthropicMessages, request, |request| async move {
        count_tokens_for(current, request).await
    })
    .await
}

async fn count_tokens_for(state: &AppState, request: Request) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let gateway = state.current();
    match count(&gateway, &parts.headers, body).await {
        Ok(tokens) => {
            let mut response = axum::Json(json!({ "input_tokens": tokens })).into_response();
            response.headers_mut().insert("x-sluice-estimate", HeaderValue::from_static("true"));
            response
        }
        Err(error) => refuse(error, Envelope::Anthropic, &parts.headers),
    }
}

async fn count(gateway: &Gateway, headers: &HeaderMap, body: Body) -> Result<u64, GatewayError> {
    let caller = authenticate(gateway, headers)?;
    metered::run(gateway, &caller, tokens(gateway, &caller, body)).await
}

async fn tokens(gateway: &Gateway, caller: &Caller, body: Body) -> Result<u64, GatewayError> {
    let bytes = read_body(body, gateway.max_body_bytes.min(COUNT_TOKENS_MAX_BODY)).await?;
    let bytes = with_max_tokens(&bytes)?;
    let request = parse_request(Protocol::AnthropicMessages, &bytes).map_err(GatewayError::BadRequest)?;
    estimate_named(gateway, caller, &request)
}

/// The input tokens admission would reserve for `request` on the deployment of the profile
/// it names (the token-count endpoints' answer).
///
/// # Errors
/// [`GatewayError::UnknownModel`] for a profile the caller may not name.
pub fn estimate_named(
    gateway: &Gateway,
    caller: &Caller,
    request: &sluice_provider::ParsedRequest,
) -> Result<u64, GatewayError> {
    let profile = gateway
        .profiles
        .get(request.model.as_str())
        .filter(|_| caller.may_name(&request.model))
        .ok_or_else(|| GatewayError::UnknownModel(request.model.clone()))?;
    let route = &gateway.deployments[profile.deployment];
    Ok(crate::road::estimate_input(gateway, request, route))
}

/// The body with `max_tokens: 1` added when it has none, so the messages validation (which
/// requires it for generation) applies unchanged. A body that is not a JSON object is
/// returned as it is, for the validation to name what is wrong.
fn with_max_tokens(bytes: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(bytes) else { return Ok(bytes.to_vec()) };
    if body.contains_key("max_tokens") {
        return Ok(bytes.to_vec());
    }
    body.insert("max_tokens".into(), Value::from(1));
    serde_json::to_vec(&body).map_err(|e| {
        GatewayError::BadRequest(RequestError {
            param: None,
            message: format!("the request body could not be read: {e}"),
            code: RequestErrorCode::InvalidJson,
        })
    })
}

/// Any path sluice has no route for: an OpenAI API path is passed through or refused by
/// [`crate::passthrough`]; any other is a 404 in the client's envelope naming the method
/// and path.
pub async fn unknown_route(State(state): State<AppState>, request: Request) -> Response<Body> {
    if let Some(family) = crate::passthrough::family_of(request.uri().path()) {
        return crate::passthrough::serve(&state, request, family).await;
    }
    let (method, uri, headers) = (request.method().clone(), request.uri().clone(), request.headers().clone());
    let envelope = envelope_of(&headers, uri.path());
    refuse(GatewayError::UnknownRoute { method: method.to_string(), path: shown_path(uri.path()) }, envelope, &headers)
}

/// A served path called with a method it does not take: a 405 in the client's envelope.
pub async fn method_not_allowed(method: Method, uri: Uri, headers: HeaderMap) -> Response<Body> {
    let envelope = envelope_of(&headers, uri.path());
    let error = GatewayError::MethodNotAllowed { method: method.to_string(), path: shown_path(uri.path()) };
    refuse(error, envelope, &headers)
}
