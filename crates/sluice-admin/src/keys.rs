//! `/admin/keys`: create, list, read, update, rotate and revoke runtime keys. Each change
//! is read from the store, applied, and written back as the key's record only over what
//! it was read from (a compare-and-set on the key's version, which bumps the keys' version
//! every instance polls), then written to the audit log. A change that lost to a
//! concurrent one answers 409 with the key's version now; a revoke reads again and wins.
//! Tenant admin keys are changed by the root admin only. A secret is shown once, in the
//! answer that created it; only its SHA-256 is stored.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rand::Rng as _;
use serde_json::{Value, json};
use sluice_jobs::{Doc, DocKey, JobStore};
use sluice_provider::{RequestError, RequestErrorCode};
use sluice_server::error::{AdminStatus, GatewayError};
use sluice_server::keys::{self, KEY_KIND, KEY_OWNER, KeyRecord, Role, SecretHash, hex};
use sluice_server::read_body;
use sluice_server::state::{Caller, Gateway};

use super::actor::{Actor, actor};
use super::keys_input::{self as input, Create, Rotate, Update};
use super::page::{self, PageQuery};
use super::routes::{bad, fail};
use crate::AdminState;
use crate::schemas::{ChangeRefusals, ReadRefusals};
use crate::table::{Table, Verb};

/// The keys routes.
pub(super) fn table() -> Table {
    Table::new()
        .add(Verb::Get, "/admin/keys", list)
        .add(Verb::Post, "/admin/keys", create)
        .add(Verb::Get, "/admin/keys/{id}", read)
        .add(Verb::Patch, "/admin/keys/{id}", update)
        .add(Verb::Post, "/admin/keys/{id}/rotate", rotate)
        .add(Verb::Post, "/admin/keys/{id}/revoke", revoke)
        .add(Verb::Get, "/admin/audit", super::audit::list)
        .add(Verb::Get, "/admin/usage", super::usage::usage)
}

/// What every keys handler works with.
pub(super) struct Ctx {
    pub headers: HeaderMap,
    pub actor: Actor,
    pub store: Arc<dyn JobStore>,
    pub gateway: Arc<Gateway>,
    pub now_ms: u64,
}

/// The context of an admin request, or the response refusing it.
pub(super) fn begin(state: &AdminState, headers: HeaderMap) -> Result<Ctx, Box<Response>> {
    let actor = actor(state, &headers).map_err(|refused| Box::new(refused.respond(&headers)))?;
    let Some(jobs) = &state.jobs else {
        let message = "runtime keys need the job store (`[jobs]`), which this instance has not opened".to_owned();
        return Err(Box::new(fail(&headers, refuse(AdminStatus::NotFound, "runtime_keys_disabled", message))));
    };
    let gateway = state.current();
    let now_ms = gateway.services.clock.unix_millis();
    Ok(Ctx { headers, actor, store: Arc::clone(&jobs.store), gateway, now_ms })
}

pub(super) fn refuse(status: AdminStatus, code: &'static str, message: String) -> GatewayError {
    GatewayError::AdminRefused { status, code, message }
}

/// The job store failed during an admin call.
pub(super) fn unavailable(e: impl std::fmt::Display) -> GatewayError {
    GatewayError::JobStoreUnavailable { during: "admin", cause: e.to_string() }
}

/// A 400 naming the field.
pub(super) fn invalid((param, message): (String, String)) -> GatewayError {
    GatewayError::BadRequest(RequestError { param: Some(param), message, code: RequestErrorCode::InvalidValue })
}

fn not_found(id: &str) -> GatewayError {
    refuse(AdminStatus::NotFound, "key_not_found", format!("no key `{id}`"))
}

pub(super) async fn body_of<T: serde::de::DeserializeOwned>(ctx: &Ctx, body: Body) -> Result<T, GatewayError> {
    let bytes = read_body(body, ctx.gateway.max_body_bytes).await?;
    input::parse(&bytes).map_err(invalid)
}

/// The handler's answer: its response, or its error in the structured body.
pub(super) fn answer(ctx: &Ctx, result: Result<Response, GatewayError>) -> Response {
    result.unwrap_or_else(|e| fail(&ctx.headers, e))
}

fn new_secret() -> (String, SecretHash) {
    let secret = format!("sk-sluice-{}", hex(&rand::rng().random::<[u8; 24]>()));
    let sha256 = hex(&sluice_config::hash_key(&secret));
    (secret, SecretHash { sha256, until: None })
}

/// How often a revoke reads the key again after a concurrent change got in first.
const REVOKE_TRIES: usize = 16;

/// A stored key as read, with the bytes it was read from (what its change is written over).
struct Loaded {
    record: KeyRecord,
    read: Vec<u8>,
}

/// The stored key `id` the actor may see (a config key or another tenant's is refused).
async fn load(ctx: &Ctx, id: &str) -> Result<Loaded, GatewayError> {
    if ctx.gateway.directory.config_keys.get(id).is_some_and(|c| ctx.actor.sees(&c.tenant)) {
        let message = format!("key `{id}` is defined in the configuration file: change it there");
        return Err(refuse(AdminStatus::Forbidden, "config_key_read_only", message));
    }
    let key = DocKey { kind: KEY_KIND, owner: KEY_OWNER, id };
    let read = ctx.store.get_doc(key).await.map_err(unavailable)?.ok_or_else(|| not_found(id))?;
    let record = serde_json::from_slice::<KeyRecord>(&read).ok().filter(|r| ctx.actor.sees(&r.tenant));
    record.map(|record| Loaded { record, read }).ok_or_else(|| not_found(id))
}

/// Writes `record`, its version one up, over `over` (the bytes it was read from; `None`
/// for a new key) in one compare-and-set. `false`: the stored key is no longer `over` (a
/// concurrent change got in first) and nothing was written.
async fn write(ctx: &Ctx, record: &mut KeyRecord, over: Option<Vec<u8>>) -> Result<bool, GatewayError> {
    record.version = record.version.saturating_add(1);
    let body = serde_json::to_vec(record).map_err(unavailable)?;
    let doc = Doc { kind: KEY_KIND.into(), owner: KEY_OWNER.into(), id: record.id.clone(), body };
    Ok(ctx.store.swap_record(doc, over).await.map_err(unavailable)?.is_some())
}

/// Audits a written change and brings this instance's keys up to date.
async fn written(ctx: &Ctx, record: &KeyRecord, action: &str, fields: Vec<String>) -> Result<(), GatewayError> {
    tracing::info!(actor = %ctx.actor.name(), action, key = %record.id, version = record.version, "admin: key changed");
    super::audit::write(ctx, action, record.into(), fields).await?;
    keys::poll::refresh(ctx.store.as_ref(), &ctx.gateway, false).await.map_err(unavailable)
}

/// The 409 of a change that lost to a concurrent one: the key's version now.
async fn lost(ctx: &Ctx, id: &str) -> GatewayError {
    match load(ctx, id).await {
        Ok(Loaded { record, .. }) => GatewayError::KeyChanged { id: id.to_owned(), version: record.version },
        Err(e) => e,
    }
}

/// Refuses a change of a tenant admin key by anyone but the root admin.
fn may_change(ctx: &Ctx, record: &KeyRecord) -> Result<(), GatewayError> {
    if record.role == Role::TenantAdmin && ctx.actor != Actor::Root {
        let message = "only the root admin key creates and changes tenant admin keys".to_owned();
        return Err(refuse(AdminStatus::Forbidden, "root_only", message));
    }
    Ok(())
}

/// Refuses a tenant admin's request that sets a key's `regions` or `labels` (`set`): where
/// a tenant's data may go is the root admin's to say.
fn root_constraints(ctx: &Ctx, set: bool) -> Result<(), GatewayError> {
    if set && ctx.actor != Actor::Root {
        let message = "only the root admin key sets a key's regions and labels".to_owned();
        return Err(refuse(AdminStatus::Forbidden, "root_only", message));
    }
    Ok(())
}

/// Refuses a key the actor may not write: another tenant's (as unknown), or an admin key
/// made by a tenant admin.
fn authorize(ctx: &Ctx, record: &KeyRecord) -> Result<(), GatewayError> {
    if !ctx.actor.sees(&record.tenant) {
        let message = format!("no tenant named `{}` is configured", record.tenant);
        return Err(refuse(AdminStatus::NotFound, "tenant_not_found", message));
    }
    may_change(ctx, record)?;
    input::check(record, &ctx.gateway, ctx.now_ms / 1000).map_err(invalid)
}

/// `POST /admin/keys`: a runtime key; its secret is shown in this answer only.
#[utoipa::path(
    post,
    path = "/admin/keys",
    operation_id = "create_key",
    tag = "keys",
    request_body = Create,
    responses(
        (status = 201, description = "`key` (the record) and `secret`", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn create(State(state): State<AdminState>, headers: HeaderMap, body: Body) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = create_key(&ctx, body).await;
    answer(&ctx, result)
}

async fn create_key(ctx: &Ctx, body: Body) -> Result<Response, GatewayError> {
    let ask: Create = body_of(ctx, body).await?;
    root_constraints(ctx, ask.regions.is_some() || ask.labels.is_some())?;
    let namespaced = ctx.actor != Actor::Root;
    let id = input::key_id(ask.id.as_deref(), &ask.tenant, namespaced).map_err(invalid)?;
    let (secret, hash) = new_secret();
    let now_s = ctx.now_ms / 1000;
    // What the root admin sets stays the root admin's: a tenant admin cannot loosen it.
    let root_limits = if ctx.actor == Actor::Root { ask.limits.clone() } else { serde_json::Map::new() };
    let mut record = KeyRecord {
        id,
        tenant: ask.tenant,
        team: ask.team,
        class: ask.class,
        limits: ask.limits,
        root_limits,
        metadata: ask.metadata,
        models: ask.models,
        regions: ask.regions,
        labels: ask.labels,
        expires_at: ask.expires_at,
        revoked_at: None,
        created_at: now_s,
        updated_at: now_s,
        role: ask.role,
        secrets: vec![hash],
        version: 0,
    };
    authorize(ctx, &record)?;
    // Written only where no key is: two creates of one id cannot both succeed.
    if ctx.gateway.directory.config_keys.contains_key(record.id.as_str()) || !write(ctx, &mut record, None).await? {
        let message = format!("a key with id `{}` exists (configured or created before)", record.id);
        return Err(refuse(AdminStatus::Conflict, "key_id_taken", message));
    }
    let fields = ["tenant", "team", "class", "limits", "metadata", "models", "regions", "labels", "expires_at", "role"];
    written(ctx, &record, "key.create", fields.iter().map(|f| (*f).to_owned()).collect()).await?;
    let body = json!({"key": record.view(ctx.now_ms), "secret": secret});
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// `GET /admin/keys`: runtime and configured keys, a page at a time (a tenant admin sees its tenant's).
#[utoipa::path(
    get,
    path = "/admin/keys",
    operation_id = "list_keys",
    tag = "keys",
    params(("limit" = Option<usize>, Query, description = "Items per page (1 to 500)"), ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page")),
    responses(
        (status = 200, description = "`items` and `next_cursor`", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn list(
    State(state): State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let page = match query.map_err(|_| ("query", QUERY.to_owned())).and_then(|Query(q)| q.page()) {
        Ok(page) => page,
        Err((param, message)) => return bad(&ctx.headers, param, message),
    };
    let configured = ctx.gateway.directory.config_keys.values().filter(|c| ctx.actor.sees(&c.tenant));
    let mut items: Vec<(String, Value)> =
        configured.map(|c| (sort_key(0, &c.key_id, &c.tenant), config_view(c))).collect();
    let docs = match ctx.store.list_docs(KEY_KIND, KEY_OWNER).await {
        Ok(docs) => docs,
        Err(e) => return fail(&ctx.headers, unavailable(e)),
    };
    let records = docs.iter().filter_map(|d| serde_json::from_slice::<KeyRecord>(&d.body).ok());
    let visible = records.filter(|r| ctx.actor.sees(&r.tenant));
    items.extend(visible.map(|r| (sort_key(1, &r.id, &r.tenant), r.view(ctx.now_ms))));
    axum::Json(page::answer(items, &page)).into_response()
}

/// What `GET /admin/keys` takes.
const QUERY: &str = "the query takes `limit` and `cursor`";

/// A key's place in the listing: file keys first, then by id (and tenant: ids are unique
/// per tenant).
fn sort_key(source: u8, id: &str, tenant: &str) -> String {
    format!("{source}\u{0}{id}\u{0}{tenant}")
}

/// A configured key as the admin API shows it.
fn config_view(caller: &Caller) -> Value {
    json!({"id": &*caller.key_id, "source": "config", "role": "client", "status": "active",
        "tenant": &*caller.tenant, "team": caller.team.as_deref(), "class": &*caller.class.name})
}

/// `GET /admin/keys/{id}`: one key's record.
#[utoipa::path(
    get,
    path = "/admin/keys/{id}",
    operation_id = "read_key",
    tag = "keys",
    params(("id" = String, Path, description = "The key's id")),
    responses(
        (status = 200, description = "The key's record (never its secret)", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn read(State(state): State<AdminState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    if let Some(caller) = ctx.gateway.directory.config_keys.get(id.as_str()).filter(|c| ctx.actor.sees(&c.tenant)) {
        return axum::Json(config_view(caller)).into_response();
    }
    match load(&ctx, &id).await {
        Ok(Loaded { record, .. }) => axum::Json(record.view(ctx.now_ms)).into_response(),
        Err(e) => fail(&ctx.headers, e),
    }
}

/// `PATCH /admin/keys/{id}`: changes a runtime key (absent fields stay; `null` clears).
#[utoipa::path(
    patch,
    path = "/admin/keys/{id}",
    operation_id = "update_key",
    tag = "keys",
    params(("id" = String, Path, description = "The key's id")),
    request_body = Update,
    responses(
        (status = 200, description = "The key's record now", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn update(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = update_key(&ctx, &id, body).await;
    answer(&ctx, result)
}

async fn update_key(ctx: &Ctx, id: &str, body: Body) -> Result<Response, GatewayError> {
    let Loaded { mut record, read } = load(ctx, id).await?;
    let change: Update = body_of(ctx, body).await?;
    may_change(ctx, &record)?;
    if record.revoked_at.is_some() {
        return Err(revoked(id));
    }
    root_constraints(ctx, change.regions.is_some() || change.labels.is_some())?;
    let fields = change.fields();
    if fields.is_empty() {
        return Err(invalid(("body".into(), "nothing to change: send at least one field".into())));
    }
    if let Some(limits) = &change.limits {
        if ctx.actor == Actor::Root {
            record.root_limits.clone_from(limits);
        } else {
            let why = input::within_root(limits, &record.root_limits);
            why.map_err(|message| refuse(AdminStatus::Forbidden, "root_limits", message))?;
        }
    }
    change.apply(&mut record);
    authorize(ctx, &record)?;
    record.updated_at = ctx.now_ms / 1000;
    if !write(ctx, &mut record, Some(read)).await? {
        return Err(lost(ctx, id).await);
    }
    written(ctx, &record, "key.update", fields).await?;
    Ok(axum::Json(record.view(ctx.now_ms)).into_response())
}

fn revoked(id: &str) -> GatewayError {
    refuse(AdminStatus::Conflict, "key_revoked", format!("key `{id}` is revoked; create a new key"))
}

/// `POST /admin/keys/{id}/rotate`: a new secret; the old one keeps working for the grace.
#[utoipa::path(
    post,
    path = "/admin/keys/{id}/rotate",
    operation_id = "rotate_key",
    tag = "keys",
    params(("id" = String, Path, description = "The key's id")),
    request_body = Rotate,
    responses(
        (status = 200, description = "`key` and the new `secret`", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn rotate(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = rotate_key(&ctx, &id, body).await;
    answer(&ctx, result)
}

async fn rotate_key(ctx: &Ctx, id: &str, body: Body) -> Result<Response, GatewayError> {
    let Loaded { mut record, read } = load(ctx, id).await?;
    let ask: Rotate = body_of(ctx, body).await?;
    may_change(ctx, &record)?;
    if record.revoked_at.is_some() {
        return Err(revoked(id));
    }
    let grace = ask.grace_seconds.unwrap_or(input::DEFAULT_GRACE_SECONDS);
    if grace > input::MAX_GRACE_SECONDS {
        let message = format!("grace_seconds is at most {}", input::MAX_GRACE_SECONDS);
        return Err(invalid(("grace_seconds".into(), message)));
    }
    let until = ctx.now_ms.saturating_add(grace.saturating_mul(1000));
    // Secrets already out of their grace go; the current one gets the new grace.
    record.secrets.retain(|s| s.until.is_none_or(|u| u > ctx.now_ms));
    for old in &mut record.secrets {
        old.until = Some(old.until.map_or(until, |u| u.min(until)));
    }
    let (secret, hash) = new_secret();
    record.secrets.push(hash);
    record.updated_at = ctx.now_ms / 1000;
    if !write(ctx, &mut record, Some(read)).await? {
        // The new secret was never stored: it is dropped unseen.
        return Err(lost(ctx, id).await);
    }
    written(ctx, &record, "key.rotate", vec!["secret".into()]).await?;
    Ok(axum::Json(json!({"key": record.view(ctx.now_ms), "secret": secret, "previous_secret_valid_until_ms": until}))
        .into_response())
}

/// `POST /admin/keys/{id}/revoke`: the key stops working on every instance.
#[utoipa::path(
    post,
    path = "/admin/keys/{id}/revoke",
    operation_id = "revoke_key",
    tag = "keys",
    params(("id" = String, Path, description = "The key's id")),
    responses(
        (status = 200, description = "The key's record, revoked", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn revoke(State(state): State<AdminState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = revoke_key(&ctx, &id).await;
    answer(&ctx, result)
}

/// Revokes `id`. Revocation is terminal and wins: a change that got in first is read
/// again and revoked over (a revoked key takes no further change), so a revoke that
/// answers 200 leaves the key revoked whatever raced it, its rotated-out secrets too.
async fn revoke_key(ctx: &Ctx, id: &str) -> Result<Response, GatewayError> {
    for _ in 0..REVOKE_TRIES {
        let Loaded { mut record, read } = load(ctx, id).await?;
        may_change(ctx, &record)?;
        if record.revoked_at.is_some() {
            return Err(revoked(id));
        }
        record.revoked_at = Some(ctx.now_ms / 1000);
        record.updated_at = ctx.now_ms / 1000;
        // A revoked key never authenticates again: its hashes, in grace or not, are not kept.
        record.secrets.clear();
        if write(ctx, &mut record, Some(read)).await? {
            written(ctx, &record, "key.revoke", vec!["revoked_at".into()]).await?;
            return Ok(axum::Json(record.view(ctx.now_ms)).into_response());
        }
    }
    Err(lost(ctx, id).await)
}
