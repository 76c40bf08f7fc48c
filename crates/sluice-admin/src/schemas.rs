//! The response shapes the OpenAPI document names ([`crate::openapi`]): the error
//! envelope, and the answers the handlers serialize from these types.

use serde::Serialize;
use utoipa::ToSchema;

/// The error envelope every refusal carries (OpenAI's shape).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ApiError {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The error's fields.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// A sentence for a person.
    pub message: String,
    /// The error's family (`invalid_request_error`, `authentication_error`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// A stable code to branch on (`key_not_found`, `tenant_name_taken`, ...).
    pub code: Option<String>,
    /// The request field at fault, if one is.
    pub param: Option<String>,
}

/// What a tenant's pause or resume answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TenantHold<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// Whether it is paused now.
    pub paused: bool,
    /// Where the hold applies: `all instances` (a store hold).
    pub scope: &'static str,
}

/// What a class's pause or resume answers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ClassHold<'a> {
    /// The class.
    pub class: &'a str,
    /// Whether it is paused now.
    pub paused: bool,
    /// Where the hold applies: `this instance` (its queues).
    pub scope: &'static str,
    /// Every class of the same priority: they pause and resume together.
    pub classes: Vec<&'a str>,
}

/// `POST /admin/dashboard/ticket`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Ticket {
    /// The dashboard path that opens a session once.
    pub url: String,
    /// Seconds the ticket stays good.
    pub expires_in_sec: u64,
}

/// The refusals of a read: a bad query, no or a wrong key, nothing of that name the caller
/// may see (or no admin key configured, or runtime keys off), a job store that did not
/// answer. Describes responses for the OpenAPI document; never built.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code, reason = "a description of responses for the OpenAPI document, never built")]
pub(crate) enum ReadRefusals {
    /// An invalid field or query.
    #[response(status = 400)]
    Invalid(ApiError),
    /// No admin key, or a wrong one.
    #[response(status = 401)]
    Unauthorized(ApiError),
    /// No admin key is configured, runtime keys are off, or nothing of that name.
    #[response(status = 404)]
    NotFound(ApiError),
    /// The job store did not answer.
    #[response(status = 503)]
    Unavailable(ApiError),
}

/// The refusals of a change: a read's ([`ReadRefusals`]), and a change never allowed
/// (a configured record is read-only, a root-only route) or not allowed now (lost to a
/// concurrent change, a name taken, a key revoked). Never built.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code, reason = "a description of responses for the OpenAPI document, never built")]
pub(crate) enum ChangeRefusals {
    /// An invalid field or query.
    #[response(status = 400)]
    Invalid(ApiError),
    /// No admin key, or a wrong one.
    #[response(status = 401)]
    Unauthorized(ApiError),
    /// Not allowed: a configured record is read-only, or the route is the root admin's.
    #[response(status = 403)]
    Forbidden(ApiError),
    /// No admin key is configured, runtime keys are off, or nothing of that name.
    #[response(status = 404)]
    NotFound(ApiError),
    /// Lost to a concurrent change, a name taken, or a key revoked.
    #[response(status = 409)]
    Conflict(ApiError),
    /// The job store did not answer.
    #[response(status = 503)]
    Unavailable(ApiError),
}

/// The refusals of a route over live state: a name or value it does not know, no or a
/// wrong key, no admin key configured. Never built.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code, reason = "a description of responses for the OpenAPI document, never built")]
pub(crate) enum StateRefusals {
    /// No such name, or an invalid value.
    #[response(status = 400)]
    Invalid(ApiError),
    /// No admin key, or a wrong one.
    #[response(status = 401)]
    Unauthorized(ApiError),
    /// No admin key is configured.
    #[response(status = 404)]
    NoAdmin,
}
