//! The admin API's handlers. Every route needs the admin key (`Authorization: Bearer`);
//! `GET /admin/state` also takes the dashboard's session cookie.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_provider::{RequestError, RequestErrorCode};
use sluice_quota::{ScopeKey, ScopeKind};
use sluice_server::error::{Envelope, ErrorResponse, GatewayError};
use sluice_server::inventory::{class_refusal, kind_of};
use sluice_server::read_body;
use sluice_server::trace::Trace;

use super::auth::{AdminKey, TICKET_TTL};
use crate::AdminState;
use crate::schemas::{ApiError, ClassHold, StateRefusals, TenantHold, Ticket};
use crate::table::{Table, Verb};

/// The admin API's routes (`/admin/...`) but its OpenAPI document's.
pub(crate) fn table() -> Table {
    Table::new()
        .add(Verb::Get, "/admin/state", state)
        .add(Verb::Post, "/admin/tenants/{name}/pause", pause_tenant)
        .add(Verb::Post, "/admin/tenants/{name}/resume", resume_tenant)
        .add(Verb::Post, "/admin/classes/{name}/pause", pause_class)
        .add(Verb::Post, "/admin/classes/{name}/resume", resume_class)
        .add(Verb::Put, "/admin/limits/{kind}/{name}", put_limits)
        .add(Verb::Post, "/admin/dashboard/ticket", ticket)
        .merge(super::keys::table())
        .merge(super::tenants::table())
}

/// What a request must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The admin key as a bearer token (every change).
    Bearer,
    /// The bearer token or the dashboard's session cookie (reads).
    BearerOrCookie,
}

/// Why an admin request may not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No admin key is configured: the admin surface does not exist (404).
    NoAdmin,
    /// The key is missing or wrong (the structured 401).
    BadKey,
}

impl Refused {
    /// The response for this refusal.
    #[must_use]
    pub fn respond(self, headers: &HeaderMap) -> Response {
        match self {
            Self::NoAdmin => sluice_server::error::absent(),
            Self::BadKey => {
                fail(headers, GatewayError::Unauthorized("admin key required: send `Authorization: Bearer ADMIN_KEY`"))
            }
        }
    }
}

/// The admin key if the request may pass.
///
/// # Errors
/// [`Refused`] without an admin key configured, or without the right key.
pub fn guard<'s>(state: &'s AdminState, headers: &HeaderMap, access: Access) -> Result<&'s AdminKey, Refused> {
    let Some(key) = &state.sessions.key else { return Err(Refused::NoAdmin) };
    if key.bearer_ok(headers) || (access == Access::BearerOrCookie && key.cookie_ok(headers)) {
        return Ok(key);
    }
    // A tenant admin is told the root-only routes do not exist (a 404 reveals nothing).
    if super::actor::tenant_admin(state, headers).is_some() {
        return Err(Refused::NoAdmin);
    }
    Err(Refused::BadKey)
}

pub(super) fn fail(headers: &HeaderMap, error: GatewayError) -> Response {
    ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: Trace::from_headers(headers).id }.into_response()
}

pub(super) fn bad(headers: &HeaderMap, param: &str, message: String) -> Response {
    let error = RequestError { param: Some(param.to_owned()), message, code: RequestErrorCode::InvalidValue };
    fail(headers, GatewayError::BadRequest(error))
}

/// `GET /admin/state`: the live state the dashboard draws.
#[utoipa::path(
    get,
    path = "/admin/state",
    operation_id = "get_state",
    tag = "state",
    security(("admin_key" = []), ("dashboard_session" = [])),
    responses(
        (status = 200, description = "Deployments, pools, scopes with their limits and remaining, queues, classes, recent errors", body = Object),
        StateRefusals,
    )
)]
pub(crate) async fn state(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    if let Err(refused) = guard(&state, &headers, Access::BearerOrCookie) {
        return refused.respond(&headers);
    }
    let mut response = axum::Json(super::view::render(&state).await).into_response();
    response.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

/// `POST /admin/tenants/{name}/pause`.
#[utoipa::path(
    post,
    path = "/admin/tenants/{name}/pause",
    tag = "state",
    params(("name" = String, Path, description = "The tenant's name")),
    responses(
        (status = 200, description = "The tenant paused on every instance sharing the store", body = TenantHold),
        (status = 503, description = "The quota store did not answer", body = ApiError),
        StateRefusals,
    )
)]
pub(crate) async fn pause_tenant(state: State<AdminState>, headers: HeaderMap, name: Path<String>) -> Response {
    hold_tenant(state, headers, name, true).await
}

/// `POST /admin/tenants/{name}/resume`.
#[utoipa::path(
    post,
    path = "/admin/tenants/{name}/resume",
    tag = "state",
    params(("name" = String, Path, description = "The tenant's name")),
    responses(
        (status = 200, description = "The tenant resumed on every instance sharing the store", body = TenantHold),
        (status = 503, description = "The quota store did not answer", body = ApiError),
        StateRefusals,
    )
)]
pub(crate) async fn resume_tenant(state: State<AdminState>, headers: HeaderMap, name: Path<String>) -> Response {
    hold_tenant(state, headers, name, false).await
}

async fn hold_tenant(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    held: bool,
) -> Response {
    if let Err(refused) = guard(&state, &headers, Access::Bearer) {
        return refused.respond(&headers);
    }
    let (gateway, policy) = (state.current(), state.admin.policy());
    let inventory = &policy.inventory;
    let Some(entry) = inventory.find(ScopeKind::Tenant, &name) else {
        let known = inventory.names(ScopeKind::Tenant).join(", ");
        return bad(&headers, "name", format!("no tenant named `{name}` (known: {known})"));
    };
    if gateway.services.store.hold(entry.id, held).await.is_err() {
        return fail(&headers, GatewayError::StoreUnavailable);
    }
    if !held {
        // Waiters on this instance go at once; other instances retry within HOLD_RETRY.
        gateway.deployments.iter().for_each(|route| route.queue.capacity_returned());
    }
    tracing::info!(tenant = %entry.name, paused = held, "admin: tenant {}", if held { "paused" } else { "resumed" });
    axum::Json(TenantHold { tenant: &entry.name, paused: held, scope: "all instances" }).into_response()
}

/// `POST /admin/classes/{name}/pause`.
#[utoipa::path(
    post,
    path = "/admin/classes/{name}/pause",
    tag = "state",
    params(("name" = String, Path, description = "The class's name")),
    responses(
        (status = 200, description = "The class paused on this instance", body = ClassHold),
        StateRefusals,
    )
)]
pub(crate) async fn pause_class(state: State<AdminState>, headers: HeaderMap, name: Path<String>) -> Response {
    hold_class(state, headers, name, true)
}

/// `POST /admin/classes/{name}/resume`.
#[utoipa::path(
    post,
    path = "/admin/classes/{name}/resume",
    tag = "state",
    params(("name" = String, Path, description = "The class's name")),
    responses(
        (status = 200, description = "The class resumed on this instance", body = ClassHold),
        StateRefusals,
    )
)]
pub(crate) async fn resume_class(state: State<AdminState>, headers: HeaderMap, name: Path<String>) -> Response {
    hold_class(state, headers, name, false)
}

fn hold_class(State(state): State<AdminState>, headers: HeaderMap, Path(name): Path<String>, held: bool) -> Response {
    if let Err(refused) = guard(&state, &headers, Access::Bearer) {
        return refused.respond(&headers);
    }
    let policy = state.admin.policy();
    let classes = &policy.classes;
    let Some(class) = classes.iter().find(|c| *c.name == *name) else {
        let known: Vec<&str> = classes.iter().map(|c| &*c.name).collect();
        return bad(&headers, "name", format!("no class named `{name}` (known: {})", known.join(", ")));
    };
    for route in &state.current().deployments {
        route.queue.hold_class(class.priority, held.then(|| class_refusal(route)));
    }
    // Queues pause by priority: classes sharing it pause and resume together.
    let shared: Vec<&Arc<str>> = classes.iter().filter(|c| c.priority == class.priority).map(|c| &c.name).collect();
    for other in &shared {
        state.admin.set_class_paused(other, held);
    }
    let shared: Vec<&str> = shared.into_iter().map(|n| &**n).collect();
    tracing::info!(class = %class.name, paused = held, "admin: class {}", if held { "paused" } else { "resumed" });
    axum::Json(ClassHold { class: &class.name, paused: held, scope: "this instance", classes: shared }).into_response()
}

/// `PUT /admin/limits/{kind}/{name}`: a scope's limits on this instance's store.
#[utoipa::path(
    put,
    path = "/admin/limits/{kind}/{name}",
    tag = "state",
    params(
        ("kind" = String, Path, description = "deployment, model, tenant, team or key"),
        ("name" = String, Path, description = "The scope's name"),
    ),
    request_body(content = Object, description = "The limits as in the config file (`rpm`, `tpm`, `burst`, ...)"),
    responses(
        (status = 200, description = "The scope's limits now, with what remains of each", body = Object),
        StateRefusals,
    )
)]
pub(crate) async fn put_limits(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Path((kind, name)): Path<(String, String)>,
    body: Body,
) -> Response {
    if let Err(refused) = guard(&state, &headers, Access::Bearer) {
        return refused.respond(&headers);
    }
    // Read only once the key passed, and within `max_body_bytes` like every other route.
    let body = match read_body(body, state.current().max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return fail(&headers, error),
    };
    let Some(scope_kind) = kind_of(&kind) else {
        return bad(&headers, "kind", format!("`{kind}` is not one of deployment, model, tenant, team, key"));
    };
    let policy = state.admin.policy();
    let inventory = &policy.inventory;
    let Some(entry) = inventory.find(scope_kind, &name) else {
        let known = inventory.names(scope_kind).join(", ");
        return bad(&headers, "name", format!("no {kind} named `{name}` (known: {known})"));
    };
    let text = match sluice_server::limits_json::limits_toml(&body) {
        Ok(text) => text,
        Err((param, message)) => return bad(&headers, &param, message),
    };
    // The burst default of the scope's kind, and a deployment's send guard, as in the config.
    let limits = match sluice_config::parse_limits(scope_kind, "limits", &text) {
        Ok(limits) => limits,
        Err(e) => return bad(&headers, &e.field, e.message),
    };
    let store = &state.current().services.store;
    let id = store.register(ScopeKey::new(scope_kind, Arc::clone(&entry.name)), limits);
    tracing::info!(kind = %kind, name = %entry.name, "admin: limits changed");
    let snapshot = store.snapshot(id).await.ok().flatten();
    let limits: Vec<Value> = snapshot
        .iter()
        .flat_map(|s| &s.rates)
        .map(
            |r| json!({"limiter": r.limiter.to_string(), "limit": r.limit, "burst": r.burst, "remaining": r.remaining}),
        )
        .collect();
    axum::Json(json!({"kind": kind, "name": &*entry.name, "limits": limits})).into_response()
}

/// `POST /admin/dashboard/ticket`: a one-time dashboard login.
#[utoipa::path(
    post,
    path = "/admin/dashboard/ticket",
    operation_id = "create_dashboard_ticket",
    tag = "state",
    responses(
        (status = 200, description = "A path that opens a dashboard session once, within a minute", body = Ticket),
        StateRefusals,
    )
)]
pub(crate) async fn ticket(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let key = match guard(&state, &headers, Access::Bearer) {
        Ok(key) => key,
        Err(refused) => return refused.respond(&headers),
    };
    let ticket = key.issue_ticket(state.current().services.clock.now());
    let url = format!("/dashboard/ticket/{ticket}");
    axum::Json(Ticket { url, expires_in_sec: TICKET_TTL.as_secs() }).into_response()
}
