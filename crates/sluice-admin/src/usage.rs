//! `GET /admin/usage`: requests, tokens and cost from the daily rollups, grouped as asked,
//! as JSON or CSV. The root admin key reads every tenant; a tenant admin key reads its own
//! tenant only (any other tenant is a 404). The store's rollups (every instance's flushed
//! usage) are added to what this instance has not flushed yet.

use crate::schemas::ReadRefusals;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query as Params, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sluice_server::error::AdminStatus;

use self::query::Query;
use super::actor::Actor;
use super::keys::{begin, invalid, refuse, unavailable};
use super::routes::fail;
use crate::AdminState;

pub mod dates;
pub mod query;
#[cfg(test)]
mod query_tests;

/// `GET /admin/usage?from=&to=&group_by=&tenant=&format=`.
/// `GET /admin/usage`: what was used and spent, by day, grouped.
#[utoipa::path(
    get,
    path = "/admin/usage",
    operation_id = "get_usage",
    tag = "records",
    params(("from" = Option<String>, Query, description = "First day (YYYY-MM-DD), default today"), ("to" = Option<String>, Query, description = "Last day (YYYY-MM-DD), default `from`"), ("group_by" = Option<String>, Query, description = "tenant, team, key, model, deployment or class"), ("tenant" = Option<String>, Query, description = "Only this tenant's usage"), ("format" = Option<String>, Query, description = "json (default) or csv")),
    responses(
        (status = 200, description = "Rows of requests, tokens and cost", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn usage(
    State(state): State<AdminState>,
    headers: HeaderMap,
    params: Result<Params<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let fail = |error| fail(&ctx.headers, error);
    let Ok(Params(params)) = params else {
        return fail(invalid(("query".into(), "not a valid query string".into())));
    };
    let today = ctx.gateway.services.usage.today();
    let mut query = match query::parse(&params, today, wants_csv(&ctx.headers)) {
        Ok(query) => query,
        Err(e) => return fail(invalid(e)),
    };
    if let Err(name) = scope(&ctx.actor, &mut query) {
        return fail(refuse(AdminStatus::NotFound, "tenant_not_found", format!("no tenant `{name}`")));
    }
    let mut rollups = match ctx.store.usage_between(query.first, query.last).await {
        Ok(rollups) => rollups,
        Err(e) => return fail(unavailable(e)),
    };
    rollups.extend(ctx.gateway.services.usage.pending());
    let rows = match query::aggregate(rollups, &query) {
        Ok(rows) => rows,
        Err(e) => return fail(invalid(e)),
    };
    let currency = &ctx.gateway.currency;
    if query.csv {
        let mut response = query::to_csv(&rows, &query, currency).into_response();
        let type_ = HeaderValue::from_static("text/csv; charset=utf-8; header=present");
        response.headers_mut().insert(header::CONTENT_TYPE, type_);
        let name = format!("attachment; filename=\"usage-{}.csv\"", dates::civil(query.first));
        if let Ok(value) = HeaderValue::from_str(&name) {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
        }
        return response;
    }
    axum::Json(query::to_json(&rows, &query, currency)).into_response()
}

/// Narrows a tenant admin's query to its own tenant; `Err(tenant)` when it asked for another.
fn scope(actor: &Actor, query: &mut Query) -> Result<(), String> {
    let Actor::Tenant { tenant, .. } = actor else { return Ok(()) };
    match &query.tenant {
        Some(asked) if **asked != **tenant => Err(asked.clone()),
        _ => {
            query.tenant = Some(tenant.to_string());
            Ok(())
        }
    }
}

/// Whether `Accept` prefers CSV (`text/csv` named before any JSON type).
fn wants_csv(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let position = |needle: &str| accept.find(needle);
    match (position("text/csv"), position("application/json")) {
        (Some(csv), Some(json)) => csv < json,
        (Some(_), None) => true,
        _ => false,
    }
}
