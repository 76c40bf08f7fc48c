//! Every way a request can fail, and the one mapping of those failures to HTTP.
//!
//! Bodies use the OpenAI error envelope (`error.message`, `error.type`, `error.code`),
//! which both official SDKs parse; on Anthropic endpoints the envelope also carries the
//! top-level `"type": "error"` of Anthropic's shape. Mapping has no side effects.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_provider::RequestError;
use sluice_recall::oplog::BeginError;
use sluice_recall::remembered::Unowned;

/// `x-sluice-ratelimit-scope`: the kind of the caller's binding scope (`tenant`, `team`,
/// `api_key`; on a refusal, whichever scope refused).
pub const SCOPE: HeaderName = HeaderName::from_static("x-sluice-ratelimit-scope");

/// Who was refused and why, for the structured 429 body.
#[derive(Debug, Clone)]
pub struct RateLimitInfo {
    /// The limiter, e.g. `output_tpm`.
    pub limiter: String,
    /// The level of the scope that refused (`tenant`, `deployment`, ...).
    pub scope: &'static str,
    /// The refusing scope's configured name (`acme/search` for a team), or the
    /// deployment's when its queue refused with no limit refusal on record.
    pub scope_name: String,
    /// The refusing limiter's dimension ([`crate::binding::dimension`]), `none` without one.
    pub dimension: &'static str,
    /// The refusal in words with its figures ([`crate::binding::describe`]), e.g.
    /// `team acme/search: 20,000 TPM, 19,400 used, resets in 12 s`; empty when no limit
    /// refusal is on record.
    pub binding: String,
    /// Provider account name.
    pub provider: String,
    /// The profile the client asked for.
    pub model_profile: String,
    /// The model sent upstream.
    pub provider_model: String,
    /// When to come back, if ever.
    pub retry_after: Option<Duration>,
    /// The caller's tenant.
    pub tenant_id: String,
    /// The caller's key id (never the key).
    pub api_key_id: String,
    /// The caller's traffic class.
    pub request_class: String,
    /// What the request was estimated to cost.
    pub estimated_input_tokens: u64,
    /// What the request reserved for output.
    pub estimated_output_tokens: u64,
    /// `rejected_before_send` or `admitted_then_provider_rejected`.
    pub gateway_decision: &'static str,
}

impl RateLimitInfo {
    /// The binding scope in words when known, else the refusing scope's level.
    fn named(&self) -> &str {
        if self.binding.is_empty() { self.scope } else { &self.binding }
    }
}

/// A failed request. Converted to a response only by [`ErrorResponse`].
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No key, or one that matches no configured key.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// The body is not a valid request.
    #[error("{}", .0.message)]
    BadRequest(RequestError),
    /// The body exceeds the configured maximum.
    #[error("request body exceeds {0} bytes")]
    BodyTooLarge(usize),
    /// The body did not arrive within its deadline (`[server] body_read_timeout`, extended
    /// by what was received at `body_min_rate`).
    #[error("the request body did not arrive in time; the connection is closed")]
    BodyTimedOut,
    /// The `model` names no profile.
    #[error("model `{0}` does not exist or is not available to this key")]
    UnknownModel(String),
    /// The profile's deployment speaks another protocol than this endpoint.
    #[error("model `{model}` is served through {endpoint}; call that endpoint instead")]
    WrongEndpoint {
        /// The profile.
        model: String,
        /// The endpoint that serves it.
        endpoint: &'static str,
    },
    /// An OpenAI endpoint this gateway does not serve for the request (not listed in the
    /// profile's `passthrough`, no model profile named, or a deployment that is not
    /// OpenAI's): refused rather than sent past admission.
    #[error("sluice does not serve {path} {why}")]
    EndpointNotServed {
        /// The path, cut to [`SHOWN_PATH_CHARS`].
        path: String,
        /// Why, e.g. "for model `fast`: add \"images\" to its passthrough".
        why: String,
    },
    /// A limit refuses now; retry later.
    #[error("rate limit `{}` reached for {}; retry later", .0.limiter, .0.named())]
    RateLimited(Box<RateLimitInfo>),
    /// The request is larger than a limit can ever allow.
    #[error("request needs {needed} on `{}` but the {} limit allows at most {capacity}; lower max_tokens or the prompt", .info.limiter, .info.scope)]
    NeverFits {
        /// The details.
        info: Box<RateLimitInfo>,
        /// What it needs.
        needed: u64,
        /// The most the limiter allows.
        capacity: u64,
    },
    /// The request's estimated cost is more than a whole money budget on its path: no day
    /// or month will take it. Amounts in the price tables' currency.
    #[error("the request's estimated cost {needed:.6} is more than the whole {} budget of {capacity:.6} per period; lower max_tokens or the prompt", .info.scope)]
    OverBudget {
        /// The details.
        info: Box<RateLimitInfo>,
        /// The estimated cost.
        needed: f64,
        /// The budget per period.
        capacity: f64,
    },
    /// The quota store could not decide.
    #[error("the quota store is unavailable; try again shortly")]
    StoreUnavailable,
    /// The provider could not be reached (nothing was sent).
    #[error("provider `{0}` could not be reached")]
    UpstreamUnreachable(String),
    /// The provider did not answer in time.
    #[error("provider `{0}` did not answer in time")]
    UpstreamTimeout(String),
    /// Too many failed dashboard logins or admin API keys from this address; locked out for this long.
    #[error("too many failed logins from this address; try again in {}s", .0.as_secs().max(1))]
    LoginThrottled(Duration),
    /// The provider sent its headers, then nothing more in time: a stalled answer.
    #[error("deployment `{0}` stopped sending its answer; it may be retried")]
    UpstreamStalled(String),
    /// The provider refused the gateway's own credentials (401, 403): the operator's
    /// problem, reported to the tenant without the provider's text.
    #[error("the provider refused the gateway's credentials for deployment `{0}`; the operator must fix them")]
    UpstreamAuthFailed(String),
    /// The deployment's breaker is open: it failed repeatedly and is held back for a while.
    #[error("deployment `{deployment}` is failing and held back; retry later")]
    ProviderUnavailable {
        /// The deployment.
        deployment: String,
        /// When the hold ends.
        retry_after: Duration,
    },
    /// The provider's answer is larger than the gateway reads.
    #[error("deployment `{deployment}` sent {what} larger than the gateway reads ({limit} bytes)")]
    UpstreamTooLarge {
        /// The deployment.
        deployment: String,
        /// `a response` or `an error response`.
        what: &'static str,
        /// The most the gateway reads.
        limit: usize,
    },
    /// The provider's success answer could not be read as a response of its protocol.
    #[error("deployment `{0}` sent a response that could not be read")]
    UpstreamBadResponse(String),
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The same idempotency key is still in flight after the wait.
    #[error("an operation with this Idempotency-Key is still in flight; retry later")]
    IdempotencyInFlight,
    /// The idempotency key was used for another request (another fingerprint).
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyKeyReused,
    /// The idempotency key's operation was a stream that started: its answer cannot be
    /// replayed, and sending it again would call the provider again.
    #[error(
        "the stream sent with this Idempotency-Key already started and cannot be replayed; use a new key to send it again"
    )]
    IdempotencyStreamCompleted,
    /// The request does not fit the context window of any deployment that may serve it.
    #[error(
        "this request needs about {needed} tokens (its input and max output); the largest context window that serves model `{model}` holds {largest}"
    )]
    ContextTooLong {
        /// The model profile asked for.
        model: String,
        /// Its input estimate plus the output it asks for.
        needed: u64,
        /// The largest window among the deployments it may go to.
        largest: u64,
    },
    /// No deployment serving the model is one the caller's `regions`/`labels` allow.
    #[error("no deployment serving model `{model}` is one this key may use ({allowed})")]
    NoAllowedDeployment {
        /// The model profile asked for.
        model: String,
        /// The caller's limits, in words.
        allowed: String,
    },
    /// The key asked for a traffic class (or job priority) more urgent than its own.
    #[error("{message}")]
    ClassNotAllowed {
        /// The field that asked: `class` or `priority`.
        param: &'static str,
        /// What was refused and what is allowed.
        message: String,
    },
    /// A tenant's stored files would exceed `[jobs] max_tenant_file_bytes`.
    #[error(
        "this file ({size} bytes) and the {used} bytes this tenant's files take would exceed the quota of {quota} bytes (`[jobs] max_tenant_file_bytes`); delete files first"
    )]
    FileQuotaExceeded {
        /// The quota.
        quota: u64,
        /// Bytes the tenant's files take now.
        used: u64,
        /// The new file's bytes.
        size: u64,
    },
    /// No job, file, batch, response or provider-side object with this id belongs to the caller's tenant (another tenant's
    /// id gets this too, so ids do not reveal what exists).
    #[error("no such {}", .0.noun())]
    NotFound(Stored),
    /// Async jobs (and so files and batches) are not enabled on this instance.
    #[error("async jobs are not enabled here")]
    JobsDisabled,
    /// The job store failed; `during` says on what, `cause` is for the log, never the body.
    #[error("the job store is unavailable; try again shortly")]
    JobStoreUnavailable {
        /// The operation that failed, e.g. `submit`.
        during: &'static str,
        /// The store's error, for the log.
        cause: String,
    },
    /// A Files or Batches API parameter is invalid: `code` names the rule.
    #[error("{message}")]
    InvalidParameter {
        /// `invalid_purpose`, `invalid_multipart`, `missing_field` or `invalid_value`.
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// An uploaded file is larger than `[jobs] max_file_bytes`.
    #[error("{0}")]
    FileTooLarge(String),
    /// The batch has finished (or is being cancelled) and cannot be cancelled.
    #[error("{0}")]
    BatchNotCancellable(String),
    /// The provider's own error answer, passed on after every allowed attempt failed.
    #[error("the provider answered with an error")]
    Upstream(Box<axum::response::Response>),
    /// An admin API request that the keys' state refuses (a configured key changed, an id
    /// taken, a key already revoked, an unknown key): `code` names the rule.
    #[error("{message}")]
    AdminRefused {
        /// 403, 404 or 409.
        status: AdminStatus,
        /// The rule, e.g. `config_key_read_only`.
        code: &'static str,
        /// What was refused and why.
        message: String,
    },
    /// A key changed (or was revoked) after the change was read: the change was not
    /// written. The answer carries the key's version now.
    #[error("key `{id}` changed while this change was made (its version is now {version}); read it and try again")]
    KeyChanged {
        /// The key.
        id: String,
        /// Its version now.
        version: u64,
    },
    /// No endpoint at this path.
    #[error(
        "sluice serves no {method} {path}; its API is /v1/chat/completions, /v1/responses, /v1/embeddings, /v1/messages, /v1/models, /v1/jobs, /v1/files and /v1/batches"
    )]
    UnknownRoute {
        /// The request's method.
        method: String,
        /// Its path, cut to [`SHOWN_PATH_CHARS`].
        path: String,
    },
    /// The path is served, but not with this method.
    #[error("{path} does not take {method}")]
    MethodNotAllowed {
        /// The request's method.
        method: String,
        /// Its path, cut to [`SHOWN_PATH_CHARS`].
        path: String,
    },
}

/// The status of a [`GatewayError::AdminRefused`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminStatus {
    /// 403: the change is never allowed (a configured key is read-only).
    Forbidden,
    /// 404: nothing of that name the caller may see.
    NotFound,
    /// 409: the state does not allow it now (an id taken, a key revoked).
    Conflict,
}

/// What a [`GatewayError::NotFound`] looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// An async job.
    Job,
    /// An uploaded file.
    File,
    /// A batch.
    Batch,
    /// A stored Responses API response.
    Response,
    /// A conversation (`/v1/conversations`, `conversation` on `/v1/responses`).
    Conversation,
    /// Another provider-side object created through passthrough (a vector store, a
    /// fine-tuning job, an upload).
    Object,
}

impl Stored {
    fn noun(self) -> &'static str {
        match self {
            Self::Job => "job",
            Self::File => "file",
            Self::Batch => "batch",
            Self::Response => "response",
            Self::Conversation => "conversation",
            Self::Object => "object",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Self::Job => "job_not_found",
            Self::File => "file_not_found",
            Self::Batch => "batch_not_found",
            Self::Response => "response_not_found",
            Self::Conversation => "conversation_not_found",
            Self::Object => "object_not_found",
        }
    }
}

/// The operation log's refusals: 422 for a reused key, 409 in flight or streamed, 503.
impl From<BeginError> for GatewayError {
    fn from(e: BeginError) -> Self {
        match e {
            BeginError::KeyReused => Self::IdempotencyKeyReused,
            BeginError::InFlight => Self::IdempotencyInFlight,
            BeginError::StreamCompleted => Self::IdempotencyStreamCompleted,
            BeginError::StoreUnavailable => Self::StoreUnavailable,
        }
    }
}

/// An id the caller's tenant does not own: 404 (`what` not found), or 503.
impl From<Unowned<Stored>> for GatewayError {
    fn from(e: Unowned<Stored>) -> Self {
        match e {
            Unowned::NotFound(what) => Self::NotFound(what),
            Unowned::StoreUnavailable => Self::StoreUnavailable,
        }
    }
}

/// The Responses API's own error event (`{"type": "error", "code", "message", "param"}`),
/// which ends a Responses stream early; the client's SDK yields it as an error event.
#[must_use]
pub fn responses_error_event(code: &str, message: &str) -> Value {
    json!({"type": "error", "code": code, "message": message, "param": null})
}

/// The most characters of a request path an error message repeats.
pub const SHOWN_PATH_CHARS: usize = 200;

/// An error body in `envelope`'s shape that carries only a type, a message and (OpenAI) a
/// code: a provider's error carried across protocols, and the event that ends a stream
/// early. Every error body the gateway writes is built in this file.
#[must_use]
pub fn plain_body(envelope: Envelope, kind: &str, message: &str, code: Option<&str>) -> Value {
    match envelope {
        Envelope::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Envelope::OpenAi => json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    }
}

/// `path`, cut to [`SHOWN_PATH_CHARS`] characters.
#[must_use]
pub fn shown_path(path: &str) -> String {
    match path.char_indices().nth(SHOWN_PATH_CHARS) {
        Some((end, _)) => format!("{}...", &path[..end]),
        None => path.to_owned(),
    }
}

impl GatewayError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::BadRequest(_)
            | Self::WrongEndpoint { .. }
            | Self::NeverFits { .. }
            | Self::OverBudget { .. }
            | Self::InvalidParameter { .. } => StatusCode::BAD_REQUEST,
            Self::BodyTooLarge(_) | Self::FileQuotaExceeded { .. } | Self::FileTooLarge(_) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::BodyTimedOut => StatusCode::REQUEST_TIMEOUT,
            Self::UnknownModel(_)
            | Self::UnknownRoute { .. }
            | Self::NotFound(_)
            | Self::JobsDisabled
            | Self::EndpointNotServed { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::RateLimited(_) | Self::LoginThrottled(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::StoreUnavailable | Self::ShuttingDown | Self::JobStoreUnavailable { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::UpstreamUnreachable(_)
            | Self::UpstreamAuthFailed(_)
            | Self::UpstreamTooLarge { .. }
            | Self::UpstreamBadResponse(_) => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout(_) | Self::UpstreamStalled(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::ProviderUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Upstream(response) => response.status(),
            Self::IdempotencyInFlight | Self::IdempotencyStreamCompleted | Self::BatchNotCancellable(_) => {
                StatusCode::CONFLICT
            }
            Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::ClassNotAllowed { .. } | Self::NoAllowedDeployment { .. } => StatusCode::FORBIDDEN,
            Self::ContextTooLong { .. } => StatusCode::BAD_REQUEST,
            Self::KeyChanged { .. } => StatusCode::CONFLICT,
            Self::AdminRefused { status, .. } => match status {
                AdminStatus::Forbidden => StatusCode::FORBIDDEN,
                AdminStatus::NotFound => StatusCode::NOT_FOUND,
                AdminStatus::Conflict => StatusCode::CONFLICT,
            },
        }
    }

    fn kind_and_code(&self) -> (&'static str, &'static str) {
        match self {
            Self::Unauthorized(_) => ("authentication_error", "invalid_api_key"),
            Self::BadRequest(e) => ("invalid_request_error", e.code.as_str()),
            Self::BodyTooLarge(_) => ("invalid_request_error", "body_too_large"),
            Self::BodyTimedOut => ("invalid_request_error", "body_timeout"),
            Self::FileQuotaExceeded { .. } => ("invalid_request_error", "file_quota_exceeded"),
            Self::UnknownModel(_) => ("invalid_request_error", "model_not_found"),
            Self::WrongEndpoint { .. } => ("invalid_request_error", "wrong_endpoint"),
            Self::RateLimited(_) => ("rate_limited", "rate_limit_exceeded"),
            Self::NeverFits { .. } => ("invalid_request_error", "request_exceeds_limit"),
            Self::OverBudget { .. } => ("invalid_request_error", "request_exceeds_budget"),
            Self::LoginThrottled(_) => ("rate_limited", "too_many_failed_logins"),
            Self::StoreUnavailable => ("service_unavailable", "store_unavailable"),
            Self::UpstreamUnreachable(_) => ("upstream_error", "upstream_unreachable"),
            // A stall is a timeout to the client; the message tells them apart.
            Self::UpstreamTimeout(_) | Self::UpstreamStalled(_) => ("upstream_error", "upstream_timeout"),
            Self::UpstreamAuthFailed(_) => ("upstream_error", "upstream_auth_failed"),
            Self::ProviderUnavailable { .. } => ("service_unavailable", "provider_unavailable"),
            Self::UpstreamTooLarge { .. } => ("upstream_error", "upstream_response_too_large"),
            Self::UpstreamBadResponse(_) => ("upstream_error", "upstream_bad_response"),
            Self::ShuttingDown => ("service_unavailable", "shutting_down"),
            Self::Upstream(_) => ("upstream_error", "provider_error"),
            Self::IdempotencyInFlight => ("conflict", "idempotency_in_flight"),
            Self::IdempotencyKeyReused => ("invalid_request_error", "idempotency_key_reused"),
            Self::IdempotencyStreamCompleted => ("conflict", "idempotency_stream_completed"),
            Self::ClassNotAllowed { .. } => ("permission_error", "class_not_allowed"),
            Self::NoAllowedDeployment { .. } => ("permission_error", "no_allowed_deployment"),
            Self::ContextTooLong { .. } => ("invalid_request_error", "context_length_exceeded"),
            Self::UnknownRoute { .. } => ("not_found_error", "unknown_route"),
            Self::EndpointNotServed { .. } => ("not_found_error", "endpoint_not_served"),
            Self::MethodNotAllowed { .. } => ("invalid_request_error", "method_not_allowed"),
            Self::NotFound(what) => ("invalid_request_error", what.code()),
            Self::JobsDisabled => ("invalid_request_error", "jobs_disabled"),
            Self::JobStoreUnavailable { .. } => ("service_unavailable", "job_store_unavailable"),
            Self::InvalidParameter { code, .. } => ("invalid_request_error", code),
            Self::FileTooLarge(_) => ("invalid_request_error", "file_too_large"),
            Self::BatchNotCancellable(_) => ("invalid_request_error", "batch_not_cancellable"),
            Self::AdminRefused { code, .. } => ("invalid_request_error", code),
            Self::KeyChanged { .. } => ("invalid_request_error", "key_changed"),
        }
    }

    fn body(&self, trace_id: &str) -> Value {
        let (kind, code) = self.kind_and_code();
        let param = match self {
            Self::BadRequest(e) => e.param.clone().map_or(Value::Null, Value::String),
            Self::UnknownModel(_) | Self::WrongEndpoint { .. } => Value::String("model".into()),
            Self::IdempotencyKeyReused | Self::IdempotencyStreamCompleted => Value::String("Idempotency-Key".into()),
            Self::ClassNotAllowed { param, .. } => Value::String((*param).into()),
            Self::FileQuotaExceeded { .. } => Value::String("file".into()),
            _ => Value::Null,
        };
        let mut error =
            json!({ "message": self.to_string(), "type": kind, "code": code, "param": param, "trace_id": trace_id });
        if let Self::RateLimited(info) | Self::NeverFits { info, .. } | Self::OverBudget { info, .. } = self {
            extend_with_limit(&mut error, info);
        }
        if let (Self::FileQuotaExceeded { quota, used, size }, Value::Object(map)) = (self, &mut error) {
            map.insert("quota_bytes".into(), json!(quota));
            map.insert("used_bytes".into(), json!(used));
            map.insert("file_bytes".into(), json!(size));
        }
        if let (Self::KeyChanged { version, .. }, Value::Object(map)) = (self, &mut error) {
            map.insert("current_version".into(), json!(version));
        }
        json!({ "error": error })
    }
}

fn extend_with_limit(error: &mut Value, info: &RateLimitInfo) {
    let Value::Object(map) = error else { return };
    let fields = json!({
        "limiter": info.limiter,
        "scope": info.scope,
        "scope_name": info.scope_name,
        "dimension": info.dimension,
        "provider": info.provider,
        "model_profile": info.model_profile,
        "provider_model": info.provider_model,
        "retry_after_ms": info.retry_after.map(|d| d.as_millis()),
        "tenant_id": info.tenant_id,
        "api_key_id": info.api_key_id,
        "request_class": info.request_class,
        "estimated_input_tokens": info.estimated_input_tokens,
        "estimated_output_tokens": info.estimated_output_tokens,
        "gateway_decision": info.gateway_decision,
        "fallback_allowed": false,
    });
    if let Value::Object(extra) = fields {
        map.extend(extra);
    }
}

/// An operator surface that is not configured (no admin key), or a route a tenant admin
/// may not know of: a bare `404`, as if it did not exist.
#[must_use]
pub fn absent() -> Response {
    StatusCode::NOT_FOUND.into_response()
}

/// `/readyz` refusing: plain text for probes (`draining`, or why admission is refused).
#[must_use]
pub fn not_ready(why: &'static str) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
}

/// `/metrics` when the registry could not be written out.
#[must_use]
pub fn metrics_unwritable() -> Response {
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// Bedrock's status and error name for a sluice status: botocore raises the named error as
/// its own exception class (`ThrottlingException` is retried by its retry modes)
/// (<https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html>).
fn bedrock_error_type(status: StatusCode) -> (StatusCode, &'static str) {
    match status.as_u16() {
        // A missing or unknown key: AWS answers credentials it does not take with 403.
        401 | 403 => (StatusCode::FORBIDDEN, "AccessDeniedException"),
        404 => (status, "ResourceNotFoundException"),
        408 | 504 => (status, "ModelTimeoutException"),
        409 => (status, "ConflictException"),
        429 => (status, "ThrottlingException"),
        503 | 529 => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableException"),
        400..=499 => (status, "ValidationException"),
        _ => (status, "InternalServerException"),
    }
}

/// A Bedrock error response: `{"message": …}` with the error's name in `x-amzn-errortype`.
fn bedrock_error(status: StatusCode, kind: &'static str, message: &str) -> Response {
    let headers = [
        (HeaderName::from_static("x-amzn-errortype"), HeaderValue::from_static(kind)),
        (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
    ];
    (status, headers, json!({"message": message}).to_string()).into_response()
}

/// A refusal with sluice's `status` (its own, or a provider's passed on) in Bedrock's
/// shape, saying `message` (the caller adds back sluice's headers).
#[must_use]
pub fn bedrock_refusal(status: StatusCode, message: &str) -> Response {
    let (status, kind) = bedrock_error_type(status);
    bedrock_error(status, kind, message)
}

/// A Bedrock runtime path naming an operation sluice does not serve.
#[must_use]
pub fn bedrock_unknown_operation(message: &str) -> Response {
    bedrock_error(StatusCode::NOT_FOUND, "UnknownOperationException", message)
}

/// The road's answer could not be read back into Bedrock's shape.
#[must_use]
pub fn bedrock_unreadable_answer() -> Response {
    bedrock_error(StatusCode::BAD_GATEWAY, "InternalServerException", "the answer could not be read")
}

/// The road's answer could not be read back into Gemini's shape: a 502 in Google's error
/// object, sluice's headers (`parts`) kept.
#[must_use]
pub fn gemini_unreadable_answer(mut parts: axum::http::response::Parts) -> Response {
    parts.status = StatusCode::BAD_GATEWAY;
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=UTF-8"));
    let error = json!({"error": {"message": "the answer could not be read", "code": "bad_upstream_response"}});
    let body = sluice_provider::openai_error_to_gemini(502, error.to_string().as_bytes(), None);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// The status of the dashboard's login page when a key or a ticket was refused (the page
/// says which).
pub const LOGIN_REFUSED: StatusCode = StatusCode::UNAUTHORIZED;

/// Which envelope the client's API expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// OpenAI's `{"error": {...}}`.
    OpenAi,
    /// Anthropic's `{"type": "error", "error": {...}}`.
    Anthropic,
}

/// An error ready to be sent: the failure, the envelope and the trace id.
#[derive(Debug)]
pub struct ErrorResponse {
    /// The failure.
    pub error: GatewayError,
    /// The envelope.
    pub envelope: Envelope,
    /// The request's trace id.
    pub trace_id: String,
}

impl IntoResponse for ErrorResponse {
    fn into_response(self) -> Response {
        if let GatewayError::Upstream(response) = self.error {
            return *response;
        }
        let status = self.error.status();
        let mut body = self.error.body(&self.trace_id);
        if self.envelope == Envelope::Anthropic
            && let Value::Object(map) = &mut body
        {
            map.insert("type".into(), Value::String("error".into()));
        }
        let mut response = (status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        crate::trace::stamp(headers, &self.trace_id);
        if let GatewayError::RateLimited(info)
        | GatewayError::NeverFits { info, .. }
        | GatewayError::OverBudget { info, .. } = &self.error
        {
            headers.insert(SCOPE, HeaderValue::from_static(info.scope));
        }
        let retry = match &self.error {
            GatewayError::RateLimited(info) => info.retry_after,
            GatewayError::LoginThrottled(wait) => Some(*wait),
            GatewayError::ProviderUnavailable { retry_after, .. } => Some(*retry_after),
            GatewayError::StoreUnavailable | GatewayError::ShuttingDown | GatewayError::IdempotencyInFlight => {
                Some(Duration::from_secs(1))
            }
            _ => None,
        };
        if let Some(wait) = retry {
            let secs = wait.as_millis().div_ceil(1000).max(1);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(u64::try_from(secs).unwrap_or(u64::MAX)));
            let ms = u64::try_from(wait.as_millis().max(1)).unwrap_or(u64::MAX);
            headers.insert("retry-after-ms", HeaderValue::from(ms));
            headers.insert("x-should-retry", HeaderValue::from_static("true"));
        } else if status.is_client_error() {
            headers.insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(error: GatewayError) -> (StatusCode, Value) {
        let response = ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: "t-1".into() }.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or_default())
    }

    #[tokio::test]
    async fn job_file_and_batch_refusals_use_the_one_envelope() {
        let cases = [
            (GatewayError::NotFound(Stored::Job), 404, "job_not_found", "no such job"),
            (GatewayError::NotFound(Stored::File), 404, "file_not_found", "no such file"),
            (GatewayError::NotFound(Stored::Batch), 404, "batch_not_found", "no such batch"),
            (GatewayError::JobsDisabled, 404, "jobs_disabled", "async jobs are not enabled here"),
            (GatewayError::FileTooLarge("too big".into()), 413, "file_too_large", "too big"),
            (GatewayError::BatchNotCancellable("done".into()), 409, "batch_not_cancellable", "done"),
            (
                GatewayError::InvalidParameter { code: "invalid_purpose", message: "bad purpose".into() },
                400,
                "invalid_purpose",
                "bad purpose",
            ),
        ];
        for (error, status, code, message) in cases {
            let (got, body) = answer(error).await;
            assert_eq!(got.as_u16(), status, "{code}");
            assert_eq!(body["error"]["code"], code);
            assert_eq!(body["error"]["message"], message);
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert_eq!(body["error"]["trace_id"], "t-1");
        }
    }

    #[tokio::test]
    async fn a_job_store_failure_keeps_its_cause_out_of_the_body() {
        let error = GatewayError::JobStoreUnavailable { during: "submit", cause: "redb: disk full at /var/x".into() };
        let (status, body) = answer(error).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "job_store_unavailable");
        assert_eq!(body["error"]["type"], "service_unavailable");
        assert!(!body.to_string().contains("disk full"), "{body}");
    }

    #[test]
    fn sluice_statuses_take_bedrocks_error_names() {
        let kind = |status| bedrock_error_type(status);
        assert_eq!(kind(StatusCode::TOO_MANY_REQUESTS), (StatusCode::TOO_MANY_REQUESTS, "ThrottlingException"));
        assert_eq!(kind(StatusCode::UNAUTHORIZED), (StatusCode::FORBIDDEN, "AccessDeniedException"));
        assert_eq!(kind(StatusCode::PAYLOAD_TOO_LARGE).1, "ValidationException");
        assert_eq!(kind(StatusCode::BAD_GATEWAY).1, "InternalServerException");
        assert_eq!(kind(StatusCode::from_u16(529).unwrap_or_default()).0, StatusCode::SERVICE_UNAVAILABLE);
    }
}
