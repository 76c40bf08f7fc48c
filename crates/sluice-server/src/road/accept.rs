//! Accepting a proxied request: its body (read whole, within its deadline: [`read_body`];
//! its `model` named by the path: [`named_by_path`]), the parse, the profile, the task,
//! its one deadline, the context it continues ([`accept`]); the idempotency key ([`once`],
//! [`record`]); and what the request came to, for its access line and metrics
//! ([`finished`], [`count`]). Its caller was authenticated once, before the body, by the
//! rate-limit header layer. Imports no other step.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Limited};
use sluice_config::Passthrough;
use sluice_provider::{ParsedRequest, Protocol, parse_request};
use sluice_quota::Nanos;
use sluice_recall::oplog::{self, Begin, Fingerprint, OpId, OpLog, Stored};
use sluice_recall::remembered::ResponseKey;

use super::context::{Request, Served, endpoint_path, untranslatable};
use crate::access::Line;
use crate::error::{self, GatewayError};
use crate::metrics::Outcome;
use crate::state::{Caller, Gateway, Profile};

/// Tells the access-log line what the request came to: its status, and for a rate limit
/// the gateway's decision and the limiter.
pub fn finished(access: &Line, result: &Result<Response<Body>, GatewayError>) {
    match result {
        Ok(response) => access.finished(response.status().as_u16(), None),
        Err(GatewayError::RateLimited(info)) => {
            access.finished(StatusCode::TOO_MANY_REQUESTS.as_u16(), Some((info.gateway_decision, &info.limiter)));
        }
        Err(error) => access.finished(error.status().as_u16(), None),
    }
}

/// The model profile a request's path names (Azure OpenAI's
/// `/openai/deployments/{deployment}/…`), which replaces the body's `model`.
#[derive(Debug, Clone)]
pub struct ModelFromPath(pub String);

/// `body` with its `model` set to the one the path names; a body that is not a JSON object
/// is left for the parser to refuse. Live requests and async submissions alike.
pub fn named_by_path(named: Option<&ModelFromPath>, body: Bytes) -> Bytes {
    let Some(ModelFromPath(model)) = named else { return body };
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_slice(&body) else { return body };
    object.insert("model".to_owned(), serde_json::Value::String(model.clone()));
    serde_json::to_vec(&object).map_or(body, Bytes::from)
}

/// Counts the request in `sluice_requests_total` under the deployment it was last admitted
/// on; requests refused before routing count under provider and model `none`.
pub fn count(gateway: &Gateway, deployment: Option<usize>, status: StatusCode) {
    let counters = deployment.and_then(|i| gateway.deployments.get(i)).map(|r| &r.counters);
    if let Some(counters) = counters.filter(|_| status == StatusCode::OK) {
        counters.ok.inc();
        return;
    }
    let labels = counters.map(|c| &c.labels);
    let (provider, model) = labels.map_or(("none", "none"), |l| (l.provider.as_str(), l.model.as_str()));
    let outcome = Outcome { provider: provider.to_owned(), model: model.to_owned(), status: status.as_u16() };
    gateway.services.metrics.requests.get_or_create(&outcome).inc();
}

/// A request accepted for its attempts: parsed, its profile found (and served on its
/// endpoint), its task, its one deadline, and the context it continues.
pub struct Accepted<'g> {
    /// The parsed request.
    pub request: ParsedRequest,
    /// The profile its `model` names.
    pub profile: &'g Profile,
    /// The task it declares (`x-sluice-task` or `metadata.task`), if any.
    pub task: Option<String>,
    /// When every wait of the request ends, by the gateway's clock.
    pub deadline: Nanos,
    /// What the client said of its deadline.
    pub client_deadline: crate::deadline::ClientDeadline,
    /// The context remembered of the response it continues ([`hidden_context`]).
    pub hidden_context: Option<u64>,
    /// The deployment that created the response it continues.
    pub continues_on: Option<Arc<str>>,
}

/// Accepts a `protocol` request of `caller` (its body `bytes`) for its attempts: parses it,
/// finds its profile (told to `access`), reads its task and sets its one deadline, from its
/// arrival here. Async jobs come through here too, with the job's caller and stored body.
///
/// # Errors
/// The request's refusal before any deployment is tried: unparsable, an unknown (or
/// forbidden) model, an endpoint its profile does not serve, kept state its deployment
/// cannot carry, or a continued id its tenant does not own.
pub async fn accept<'g>(
    gateway: &'g Gateway,
    caller: &Caller,
    protocol: Protocol,
    headers: &HeaderMap,
    bytes: &[u8],
    access: &Line,
) -> Result<Accepted<'g>, GatewayError> {
    let request = parse_request(protocol, bytes).map_err(GatewayError::BadRequest)?;
    // A key restricted to some profiles is told the others do not exist.
    let Some(profile) = gateway.profiles.get(request.model.as_str()).filter(|_| caller.may_name(&request.model)) else {
        return Err(GatewayError::UnknownModel(request.model.clone()));
    };
    access.profile(&profile.name);
    if protocol == Protocol::OpenAiCompletions {
        crate::served::allowed(gateway, profile, Passthrough::Completions, "/v1/completions")?;
    }
    let task = task_of(headers, &request);
    // One deadline for every wait of the request, from its arrival here.
    let client_wait = crate::deadline::client_wait(headers);
    let deadline = gateway.services.clock.now().after(crate::deadline::effective(caller.class.max_wait, client_wait));
    // A Responses request its deployment must translate cannot carry OpenAI's kept state
    // (`previous_response_id`, `conversation`): refused for the field, as its translation
    // would be, before any id it names is looked up.
    let primary = &gateway.deployments[profile.deployment];
    if crate::crossing::Crossing::of(protocol, &primary.target) == crate::crossing::Crossing::ResponsesToAnthropic
        && let Err(e) = crate::crossing::Crossing::ResponsesToAnthropic.request_body(
            &request,
            &primary.target.model,
            profile.default_max_tokens,
            false,
        )
    {
        return Err(untranslatable(primary, &e));
    }
    let continued = hidden_context(gateway, caller, &request).await?;
    let (hidden_context, continues_on) = continued.map_or((None, None), |r| (r.context, Some(r.deployment)));
    let client_deadline = crate::deadline::ClientDeadline::of(caller.class.max_wait, client_wait);
    Ok(Accepted { request, profile, task, deadline, client_deadline, hidden_context, continues_on })
}

/// What a request's idempotency key makes of its attempts.
pub enum Once {
    /// No key: the attempts run.
    Unkeyed,
    /// A repeat of a completed operation: its stored answer (a replay, no deployment tried).
    Replay(Served),
    /// The first of its key: the attempts run, and what they came to is recorded
    /// ([`record`]).
    Keyed(OpId, Fingerprint),
}

/// What `req`'s idempotency key makes of it: at most one run of its attempts per key; a
/// repeat gets the stored answer.
///
/// # Errors
/// A malformed key, a key in use by a different request or still in flight.
pub async fn once(req: &Request<'_>, protocol: Protocol) -> Result<Once, GatewayError> {
    let Some(key) = oplog::idempotency_key(req.headers).map_err(GatewayError::BadRequest)? else {
        return Ok(Once::Unkeyed);
    };
    let gateway = req.gateway;
    let op = OpId { tenant: Arc::clone(&req.caller.tenant), key };
    let fingerprint = oplog::fingerprint(endpoint_path(protocol), &req.request.body);
    match gateway.services.oplog.begin(&op, &fingerprint).await? {
        Begin::Replay(stored) => {
            gateway.services.metrics.duplicate_suppressed(gateway.task_label(req.task));
            Ok(Once::Replay(Served { deployment: None, result: Ok(replay(stored)), access: None }))
        }
        Begin::Proceed => Ok(Once::Keyed(op, fingerprint)),
    }
}

/// Keeps a non-stream success in the operation log, and a stream that started as
/// streamed (its body is not kept: repeats get a 409, never a second provider call);
/// anything else is forgotten so the client may try again.
pub async fn record(
    log: &OpLog,
    op: &OpId,
    fingerprint: &Fingerprint,
    stream: bool,
    result: Result<Response<Body>, GatewayError>,
) -> Result<Response<Body>, GatewayError> {
    let response = match result {
        Ok(response) if response.status().is_success() => response,
        other => {
            log.abandon(op, fingerprint).await;
            return other;
        }
    };
    if stream {
        log.streamed(op, fingerprint).await;
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let Ok(collected) = body.collect().await else {
        log.abandon(op, fingerprint).await;
        return Err(GatewayError::UpstreamUnreachable("provider".into()));
    };
    let bytes = collected.to_bytes();
    let content_type = parts.headers.get(header::CONTENT_TYPE).cloned();
    let stored = Stored { status: parts.status.as_u16(), content_type, body: bytes.clone() };
    log.complete(op, fingerprint, stored).await;
    Ok(Response::from_parts(parts, Body::from(bytes)))
}

fn replay(stored: Stored) -> Response<Body> {
    let mut response = Response::new(Body::from(stored.body));
    *response.status_mut() = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    if let Some(content_type) = stored.content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    }
    response.headers_mut().insert("x-sluice-idempotent-replay", HeaderValue::from_static("true"));
    response
}

/// What is remembered of the response a Responses `request` continues
/// (`previous_response_id`: its context and the deployment that holds it), once the
/// caller's tenant is found to own it; the conversation (`conversation`, an id or
/// `{"id": …}`) and the vector stores its `file_search` tools name must be the tenant's
/// too. `None` when it continues no response; a context not known yet is `None` inside
/// (the profile's conservative figure is reserved).
///
/// # Errors
/// 404 `response_not_found`, `conversation_not_found` or `object_not_found` when the
/// tenant has no such id (another tenant's id is answered alike, before any upstream
/// call); 400 for more than [`MAX_VECTOR_STORES`] vector stores; 503 when the store
/// cannot answer.
pub(crate) async fn hidden_context(
    gateway: &Gateway,
    caller: &Caller,
    request: &ParsedRequest,
) -> Result<Option<sluice_recall::remembered::Remembered>, GatewayError> {
    if request.protocol != Protocol::OpenAiResponses {
        return Ok(None);
    }
    let key = |id: &str| ResponseKey { tenant: Arc::clone(&caller.tenant), id: id.to_owned() };
    let stores: Vec<&str> = vector_stores_of(&request.body).take(MAX_VECTOR_STORES + 1).collect();
    if stores.len() > MAX_VECTOR_STORES {
        let message = format!("file_search tools may name at most {MAX_VECTOR_STORES} vector_store_ids");
        let code = sluice_provider::RequestErrorCode::InvalidValue;
        return Err(GatewayError::BadRequest(sluice_provider::RequestError {
            param: Some("tools".into()),
            message,
            code,
        }));
    }
    for id in stores {
        gateway.services.responses.owned(&key(id), error::Stored::Object).await?;
    }
    if let Some(id) = conversation_of(&request.body) {
        gateway.services.responses.owned(&key(id), error::Stored::Conversation).await?;
    }
    match request.body.get("previous_response_id").and_then(serde_json::Value::as_str) {
        Some(id) => Ok(Some(gateway.services.responses.owned(&key(id), error::Stored::Response).await?)),
        None => Ok(None),
    }
}

/// Most vector stores a Responses request's `file_search` tools may name (each is looked
/// up before the request is sent).
const MAX_VECTOR_STORES: usize = 16;

/// The vector stores a Responses body's `file_search` tools search (`vector_store_ids`).
fn vector_stores_of(body: &serde_json::Map<String, serde_json::Value>) -> impl Iterator<Item = &str> {
    let tools = body.get("tools").and_then(serde_json::Value::as_array).into_iter().flatten();
    let ids = tools.filter_map(|tool| tool.get("vector_store_ids")?.as_array()).flatten();
    ids.map(|id| id.as_str().unwrap_or_default())
}

/// The conversation a Responses body names: `"conversation": "conv_…"` or `{"id": "conv_…"}`.
fn conversation_of(body: &serde_json::Map<String, serde_json::Value>) -> Option<&str> {
    let conversation = body.get("conversation")?;
    conversation.as_str().or_else(|| conversation.get("id")?.as_str())
}

/// The task a request declares: the `x-sluice-task` header, else `metadata.task`.
fn task_of(headers: &HeaderMap, request: &ParsedRequest) -> Option<String> {
    let header = headers.get("x-sluice-task").and_then(|v| v.to_str().ok()).map(str::trim).filter(|t| !t.is_empty());
    let metadata = || request.body.get("metadata")?.get("task")?.as_str().map(str::to_owned);
    header.map(str::to_owned).or_else(metadata).filter(|t| t.len() <= 64)
}

/// Reads a client's request body whole: at most `limit` bytes, within the body deadline.
///
/// # Errors
/// Too large, too slow, or unreadable.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, GatewayError> {
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(GatewayError::BodyTooLarge(limit)),
        Err(e) if sluice_listener::body_pace::BodyTimedOut::caused(&*e) => Err(GatewayError::BodyTimedOut),
        Err(_) => Err(GatewayError::BadRequest(sluice_provider::RequestError {
            param: None,
            message: "the request body could not be read".into(),
            code: sluice_provider::RequestErrorCode::InvalidJson,
        })),
    }
}
