//! `/admin/tenants`: tenants (and their teams) created and changed at run time, for the
//! root admin key. The file's tenants stay read-only; a runtime tenant takes part in
//! everything a key of it does (its limits, its teams' limits, fair sharing by weight), and
//! reaches every instance as keys do (the store's version, polled).

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_jobs::{Doc, DocKey};
use sluice_server::error::{AdminStatus, GatewayError};
use sluice_server::keys::{self, KEY_OWNER, TENANT_KIND, TenantRecord};
use sluice_server::state::Gateway;

use super::actor::Actor;
use super::audit::Target;
use super::keys::{Ctx, answer, begin, body_of, invalid, refuse, unavailable};
use super::keys_input::check_id;
use super::page::{self, Items, PageQuery};
use super::routes::bad;
use crate::AdminState;
use crate::schemas::{ChangeRefusals, ReadRefusals};
use crate::table::{Table, Verb};

/// The largest weight a tenant may have.
const MAX_WEIGHT: u32 = 1000;
/// Most teams of one tenant.
const MAX_TEAMS: usize = 256;

/// The tenants routes.
pub(super) fn table() -> Table {
    Table::new()
        .add(Verb::Get, "/admin/tenants", list)
        .add(Verb::Post, "/admin/tenants", create)
        .add(Verb::Patch, "/admin/tenants/{name}", update)
        .add(Verb::Get, "/admin/teams", teams)
}

/// `POST /admin/tenants` and `PATCH /admin/tenants/{name}` (which takes no `name`).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Ask {
    /// The tenant's name (`POST` only).
    name: Option<String>,
    /// Its fair-share weight (1 to 1000).
    weight: Option<u32>,
    /// Its limits, as in the config file.
    #[schema(value_type = Option<Object>)]
    limits: Option<Map<String, Value>>,
    /// Its teams, each with its limits.
    #[schema(value_type = Option<std::collections::BTreeMap<String, Object>>)]
    teams: Option<std::collections::BTreeMap<String, Map<String, Value>>>,
}

/// The context of a root-only request (a tenant admin is told the route does not exist).
fn root(state: &AdminState, headers: HeaderMap) -> Result<Ctx, Box<Response>> {
    let ctx = begin(state, headers)?;
    if ctx.actor != Actor::Root {
        return Err(Box::new(sluice_server::error::absent()));
    }
    Ok(ctx)
}

fn check(record: &TenantRecord) -> Result<(), GatewayError> {
    check_id(&record.name)
        .map_err(|(_, message)| invalid(("name".into(), message.replace("key id", "tenant name"))))?;
    if !(1..=MAX_WEIGHT).contains(&record.weight) {
        return Err(invalid(("weight".into(), format!("weight is 1 to {MAX_WEIGHT}"))));
    }
    sluice_server::limits_json::limits_of(&record.limits).map_err(invalid)?;
    if record.teams.len() > MAX_TEAMS {
        return Err(invalid(("teams".into(), format!("at most {MAX_TEAMS} teams"))));
    }
    for (name, limits) in &record.teams {
        check_id(name)
            .map_err(|(_, message)| invalid((format!("teams.{name}"), message.replace("key id", "team name"))))?;
        sluice_server::limits_json::limits_of(limits)
            .map_err(|(field, message)| invalid((format!("teams.{name}.{field}"), message)))?;
    }
    Ok(())
}

async fn stored(ctx: &Ctx, name: &str) -> Result<Option<TenantRecord>, GatewayError> {
    let body =
        ctx.store.get_doc(DocKey { kind: TENANT_KIND, owner: KEY_OWNER, id: name }).await.map_err(unavailable)?;
    Ok(body.and_then(|b| serde_json::from_slice(&b).ok()))
}

async fn save(ctx: &Ctx, record: &TenantRecord, action: &str, fields: Vec<String>) -> Result<Response, GatewayError> {
    let body = serde_json::to_vec(record).map_err(unavailable)?;
    let doc = Doc { kind: TENANT_KIND.into(), owner: KEY_OWNER.into(), id: record.name.clone(), body };
    ctx.store.put_record(doc).await.map_err(unavailable)?;
    tracing::info!(action, tenant = %record.name, "admin: tenant changed");
    super::audit::write(ctx, action, Target { key_id: None, tenant: &record.name }, fields).await?;
    keys::poll::refresh(ctx.store.as_ref(), &ctx.gateway, false).await.map_err(unavailable)?;
    Ok(axum::Json(record.view()).into_response())
}

/// `POST /admin/tenants`: a runtime tenant with its teams.
#[utoipa::path(
    post,
    path = "/admin/tenants",
    operation_id = "create_tenant",
    tag = "tenants",
    request_body = Ask,
    responses(
        (status = 201, description = "The tenant's record", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn create(State(state): State<AdminState>, headers: HeaderMap, body: Body) -> Response {
    let ctx = match root(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = create_tenant(&ctx, body).await;
    answer(&ctx, result.map(|r| (StatusCode::CREATED, r).into_response()))
}

async fn create_tenant(ctx: &Ctx, body: Body) -> Result<Response, GatewayError> {
    let ask: Ask = body_of(ctx, body).await?;
    let Some(name) = ask.name else { return Err(invalid(("name".into(), "a tenant needs a name".into()))) };
    let now_s = ctx.now_ms / 1000;
    let record = TenantRecord {
        name,
        weight: ask.weight.unwrap_or(1),
        limits: ask.limits.unwrap_or_default(),
        teams: ask.teams.unwrap_or_default(),
        created_at: now_s,
        updated_at: now_s,
    };
    check(&record)?;
    if ctx.gateway.directory.tenants.contains_key(record.name.as_str()) || stored(ctx, &record.name).await?.is_some() {
        let message = format!("a tenant named `{}` exists (in the file or created before)", record.name);
        return Err(refuse(AdminStatus::Conflict, "tenant_name_taken", message));
    }
    save(ctx, &record, "tenant.create", vec!["name".into(), "weight".into(), "limits".into(), "teams".into()]).await
}

/// `GET /admin/tenants`: configured and runtime tenants, a page at a time.
#[utoipa::path(
    get,
    path = "/admin/tenants",
    operation_id = "list_tenants",
    tag = "tenants",
    params(("limit" = Option<usize>, Query, description = "Items per page (1 to 500)"), ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page")),
    responses(
        (status = 200, description = "`items` and `next_cursor`", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn list(
    state: State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    listing(state, headers, query, tenant_items).await
}

/// `GET /admin/teams`: every team with its tenant, a page at a time.
#[utoipa::path(
    get,
    path = "/admin/teams",
    operation_id = "list_teams",
    tag = "tenants",
    params(("limit" = Option<usize>, Query, description = "Items per page (1 to 500)"), ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page")),
    responses(
        (status = 200, description = "`items` and `next_cursor`", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn teams(
    state: State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    listing(state, headers, query, team_items).await
}

/// A page of what `items` makes of the file's tenants and the stored ones.
async fn listing(
    State(state): State<AdminState>,
    headers: HeaderMap,
    query: Result<Query<PageQuery>, QueryRejection>,
    items: fn(&Gateway, Vec<TenantRecord>) -> Items,
) -> Response {
    let ctx = match root(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let page = match query
        .map_err(|_| ("query", "the query takes `limit` and `cursor`".to_owned()))
        .and_then(|Query(q)| q.page())
    {
        Ok(page) => page,
        Err((param, message)) => return bad(&ctx.headers, param, message),
    };
    match ctx.store.list_docs(TENANT_KIND, KEY_OWNER).await {
        Ok(docs) => {
            let records = docs.iter().filter_map(|d| serde_json::from_slice::<TenantRecord>(&d.body).ok()).collect();
            axum::Json(page::answer(items(&ctx.gateway, records), &page)).into_response()
        }
        Err(e) => answer(&ctx, Err(unavailable(e))),
    }
}

/// The tenants, the file's first, then by name.
fn tenant_items(gateway: &Gateway, records: Vec<TenantRecord>) -> Vec<(String, Value)> {
    let configured = gateway.directory.tenants.iter().map(|(name, t)| {
        let teams: Vec<&str> = t.teams.keys().map(|n| &**n).collect();
        (
            format!("0\u{0}{name}"),
            json!({"name": &**name, "source": "config", "weight": t.weight.get(), "teams": teams}),
        )
    });
    let mut items: Vec<(String, Value)> = configured.collect();
    items.extend(records.iter().map(|r| (format!("1\u{0}{}", r.name), r.view())));
    items
}

/// The teams of every tenant, by tenant and name.
fn team_items(gateway: &Gateway, records: Vec<TenantRecord>) -> Vec<(String, Value)> {
    let mut items = Vec::new();
    for (tenant, t) in &gateway.directory.tenants {
        items.extend(t.teams.keys().map(|name| {
            let view = json!({"tenant": &**tenant, "name": &**name, "source": "config"});
            (format!("{tenant}\u{0}{name}"), view)
        }));
    }
    for record in records {
        items.extend(record.teams.into_iter().map(|(name, limits)| {
            let key = format!("{}\u{0}{name}", record.name);
            (key, json!({"tenant": record.name, "name": name, "source": "runtime", "limits": limits}))
        }));
    }
    items
}

/// `PATCH /admin/tenants/{name}`: changes a runtime tenant (absent fields stay).
#[utoipa::path(
    patch,
    path = "/admin/tenants/{name}",
    operation_id = "update_tenant",
    tag = "tenants",
    params(("name" = String, Path, description = "The tenant's name")),
    request_body = Ask,
    responses(
        (status = 200, description = "The tenant's record now", body = Object),
        ChangeRefusals,
    )
)]
pub(crate) async fn update(
    State(state): State<AdminState>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Body,
) -> Response {
    let ctx = match root(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let result = update_tenant(&ctx, &name, body).await;
    answer(&ctx, result)
}

async fn update_tenant(ctx: &Ctx, name: &str, body: Body) -> Result<Response, GatewayError> {
    if ctx.gateway.directory.tenants.contains_key(name) {
        let message = format!("tenant `{name}` is defined in the configuration file: change it there");
        return Err(refuse(AdminStatus::Forbidden, "config_tenant_read_only", message));
    }
    let Some(mut record) = stored(ctx, name).await? else {
        return Err(refuse(AdminStatus::NotFound, "tenant_not_found", format!("no tenant `{name}`")));
    };
    let ask: Ask = body_of(ctx, body).await?;
    if ask.name.is_some() {
        return Err(invalid(("name".into(), "a tenant cannot be renamed".into())));
    }
    let fields: Vec<String> =
        [("weight", ask.weight.is_some()), ("limits", ask.limits.is_some()), ("teams", ask.teams.is_some())]
            .into_iter()
            .filter(|(_, set)| *set)
            .map(|(n, _)| n.to_owned())
            .collect();
    if fields.is_empty() {
        return Err(invalid(("body".into(), "nothing to change: send weight, limits or teams".into())));
    }
    record.weight = ask.weight.unwrap_or(record.weight);
    record.limits = ask.limits.unwrap_or(record.limits);
    record.teams = ask.teams.unwrap_or(record.teams);
    record.updated_at = ctx.now_ms / 1000;
    check(&record)?;
    save(ctx, &record, "tenant.update", fields).await
}
