//! `/admin/keys`: create, list, read, update, rotate and revoke runtime keys. Each change
//! is read from the store, applied, written back as the key's record (bumping the keys'
//! version, which every instance polls) and written to the audit log. A secret is shown
//! once, in the answer that created it; only its SHA-256 is stored.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::Rng as _;
use serde_json::{Value, json};
use sluice_jobs::{Doc, DocKey, JobStore};
use sluice_provider::{RequestError, RequestErrorCode};

use super::actor::{Actor, actor};
use super::keys_input::{self as input, Create, Rotate, Update};
use super::routes::fail;
use crate::AppState;
use crate::error::{AdminStatus, GatewayError};
use crate::keys::{self, KEY_KIND, KEY_OWNER, KeyRecord, Role, SecretHash, hex};
use crate::request::read_body;
use crate::state::{Caller, Gateway};

/// The keys routes.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/keys", get(list).post(create))
        .route("/admin/keys/{id}", get(read).patch(update))
        .route("/admin/keys/{id}/rotate", post(rotate))
        .route("/admin/keys/{id}/revoke", post(revoke))
        .route("/admin/audit", get(super::audit::list))
        .route("/admin/usage", get(super::usage::usage))
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
pub(super) fn begin(state: &AppState, headers: HeaderMap) -> Result<Ctx, Box<Response>> {
    let actor = actor(state, &headers).map_err(|refused| Box::new(refused.respond(&headers)))?;
    let Some(jobs) = &state.jobs else {
        let message = "runtime keys need the job store (`[jobs]`), which this instance has not opened".to_owned();
        return Err(Box::new(fail(&headers, refuse(AdminStatus::NotFound, "runtime_keys_disabled", message))));
    };
    let gateway = state.current();
    let now_ms = gateway.clock.unix_millis();
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

/// The stored key `id` the actor may see (a config key or another tenant's is refused).
async fn load(ctx: &Ctx, id: &str) -> Result<KeyRecord, GatewayError> {
    if ctx.gateway.directory.config_keys.get(id).is_some_and(|c| ctx.actor.sees(&c.tenant)) {
        let message = format!("key `{id}` is defined in the configuration file: change it there");
        return Err(refuse(AdminStatus::Forbidden, "config_key_read_only", message));
    }
    let key = DocKey { kind: KEY_KIND, owner: KEY_OWNER, id };
    let body = ctx.store.get_doc(key).await.map_err(unavailable)?;
    let record = body.and_then(|b| serde_json::from_slice::<KeyRecord>(&b).ok());
    record.filter(|r| ctx.actor.sees(&r.tenant)).ok_or_else(|| not_found(id))
}

/// Writes `record`, audits the change and brings this instance's keys up to date.
async fn save(ctx: &Ctx, record: &KeyRecord, action: &str, fields: Vec<String>) -> Result<(), GatewayError> {
    let body = serde_json::to_vec(record).map_err(unavailable)?;
    let doc = Doc { kind: KEY_KIND.into(), owner: KEY_OWNER.into(), id: record.id.clone(), body };
    ctx.store.put_record(doc).await.map_err(unavailable)?;
    tracing::info!(actor = %ctx.actor.name(), action, key = %record.id, "admin: key changed");
    super::audit::write(ctx, action, record.into(), fields).await?;
    keys::refresh(ctx.store.as_ref(), &ctx.gateway, false).await.map_err(unavailable)
}

/// Refuses a key the actor may not write: another tenant's (as unknown), or an admin key
/// made by a tenant admin.
fn authorize(ctx: &Ctx, record: &KeyRecord) -> Result<(), GatewayError> {
    if !ctx.actor.sees(&record.tenant) {
        let message = format!("no tenant named `{}` is configured", record.tenant);
        return Err(refuse(AdminStatus::NotFound, "tenant_not_found", message));
    }
    if record.role == Role::TenantAdmin && ctx.actor != Actor::Root {
        let message = "only the root admin key creates tenant admin keys".to_owned();
        return Err(refuse(AdminStatus::Forbidden, "root_only", message));
    }
    input::check(record, &ctx.gateway, ctx.now_ms / 1000).map_err(invalid)
}

async fn create(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = create_key(&ctx, body).await;
    answer(&ctx, result)
}

async fn create_key(ctx: &Ctx, body: Body) -> Result<Response, GatewayError> {
    let ask: Create = body_of(ctx, body).await?;
    let id = ask.id.unwrap_or_else(|| format!("key-{}", hex(&rand::rng().random::<[u8; 6]>())));
    input::check_id(&id).map_err(invalid)?;
    let (secret, hash) = new_secret();
    let now_s = ctx.now_ms / 1000;
    let record = KeyRecord {
        id,
        tenant: ask.tenant,
        team: ask.team,
        class: ask.class,
        limits: ask.limits,
        metadata: ask.metadata,
        models: ask.models,
        expires_at: ask.expires_at,
        revoked_at: None,
        created_at: now_s,
        updated_at: now_s,
        role: ask.role,
        secrets: vec![hash],
    };
    authorize(ctx, &record)?;
    let taken = ctx.gateway.directory.config_keys.contains_key(record.id.as_str())
        || ctx
            .store
            .get_doc(DocKey { kind: KEY_KIND, owner: KEY_OWNER, id: &record.id })
            .await
            .map_err(unavailable)?
            .is_some();
    if taken {
        let message = format!("a key with id `{}` exists (configured or created before)", record.id);
        return Err(refuse(AdminStatus::Conflict, "key_id_taken", message));
    }
    let fields = ["tenant", "team", "class", "limits", "metadata", "models", "expires_at", "role"];
    save(ctx, &record, "key.create", fields.iter().map(|f| (*f).to_owned()).collect()).await?;
    let body = json!({"key": record.view(ctx.now_ms), "secret": secret});
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

async fn list(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let mut data: Vec<Value> =
        ctx.gateway.directory.config_keys.values().filter(|c| ctx.actor.sees(&c.tenant)).map(config_view).collect();
    data.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let docs = match ctx.store.list_docs(KEY_KIND, KEY_OWNER).await {
        Ok(docs) => docs,
        Err(e) => return fail(&ctx.headers, unavailable(e)),
    };
    let records = docs.iter().filter_map(|d| serde_json::from_slice::<KeyRecord>(&d.body).ok());
    data.extend(records.filter(|r| ctx.actor.sees(&r.tenant)).map(|r| r.view(ctx.now_ms)));
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// A configured key as the admin API shows it.
fn config_view(caller: &Caller) -> Value {
    json!({"id": &*caller.key_id, "source": "config", "role": "client", "status": "active",
        "tenant": &*caller.tenant, "team": caller.team.as_deref(), "class": &*caller.class.name})
}

async fn read(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    if let Some(caller) = ctx.gateway.directory.config_keys.get(id.as_str()).filter(|c| ctx.actor.sees(&c.tenant)) {
        return axum::Json(config_view(caller)).into_response();
    }
    match load(&ctx, &id).await {
        Ok(record) => axum::Json(record.view(ctx.now_ms)).into_response(),
        Err(e) => fail(&ctx.headers, e),
    }
}

async fn update(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>, body: Body) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = update_key(&ctx, &id, body).await;
    answer(&ctx, result)
}

async fn update_key(ctx: &Ctx, id: &str, body: Body) -> Result<Response, GatewayError> {
    let mut record = load(ctx, id).await?;
    let change: Update = body_of(ctx, body).await?;
    if record.revoked_at.is_some() {
        return Err(revoked(id));
    }
    let fields = change.fields();
    if fields.is_empty() {
        return Err(invalid(("body".into(), "nothing to change: send at least one field".into())));
    }
    change.apply(&mut record);
    authorize(ctx, &record)?;
    record.updated_at = ctx.now_ms / 1000;
    save(ctx, &record, "key.update", fields).await?;
    Ok(axum::Json(record.view(ctx.now_ms)).into_response())
}

fn revoked(id: &str) -> GatewayError {
    refuse(AdminStatus::Conflict, "key_revoked", format!("key `{id}` is revoked; create a new key"))
}

async fn rotate(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>, body: Body) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = rotate_key(&ctx, &id, body).await;
    answer(&ctx, result)
}

async fn rotate_key(ctx: &Ctx, id: &str, body: Body) -> Result<Response, GatewayError> {
    let mut record = load(ctx, id).await?;
    let ask: Rotate = body_of(ctx, body).await?;
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
    save(ctx, &record, "key.rotate", vec!["secret".into()]).await?;
    Ok(axum::Json(json!({"key": record.view(ctx.now_ms), "secret": secret, "previous_secret_valid_until_ms": until}))
        .into_response())
}

async fn revoke(State(state): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = revoke_key(&ctx, &id).await;
    answer(&ctx, result)
}

async fn revoke_key(ctx: &Ctx, id: &str) -> Result<Response, GatewayError> {
    let mut record = load(ctx, id).await?;
    if record.revoked_at.is_some() {
        return Err(revoked(id));
    }
    record.revoked_at = Some(ctx.now_ms / 1000);
    record.updated_at = ctx.now_ms / 1000;
    // A revoked key never authenticates again: its hashes are not kept.
    record.secrets.clear();
    save(ctx, &record, "key.revoke", vec!["revoked_at".into()]).await?;
    Ok(axum::Json(record.view(ctx.now_ms)).into_response())
}
