//! The audit log of admin changes: who (`root` or a tenant admin key's id), what (the
//! action, the key, the names of the fields changed — never a secret) and when, kept as
//! records in the job store (never retired) and read newest first through
//! `GET /admin/audit?limit=N&cursor=C`. A tenant admin reads its own tenant's entries.

use crate::schemas::ReadRefusals;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rand::Rng as _;
use serde::Deserialize;
use serde_json::json;
use sluice_jobs::Doc;
use sluice_server::error::GatewayError;
use sluice_server::keys::{AUDIT_KIND, AUDIT_OWNER, AuditEntry, KeyRecord, hex};

use super::keys::{Ctx, begin, unavailable};
use super::routes::{bad, fail};
use crate::AdminState;

/// Entries per page when `limit` is not given.
const DEFAULT_PAGE: usize = 50;
/// Most entries per page.
const MAX_PAGE: usize = 500;

/// What a change was made to: a key (its id and tenant) or a tenant.
pub(super) struct Target<'a> {
    /// The key's id, for a key.
    pub key_id: Option<&'a str>,
    /// The tenant.
    pub tenant: &'a str,
}

impl<'a> From<&'a KeyRecord> for Target<'a> {
    fn from(record: &'a KeyRecord) -> Self {
        Self { key_id: Some(&record.id), tenant: &record.tenant }
    }
}

/// Writes the audit entry of `action` on `target`.
pub(super) async fn write(
    ctx: &Ctx,
    action: &str,
    target: Target<'_>,
    fields: Vec<String>,
) -> Result<(), GatewayError> {
    let id = format!("{:016}-{}", ctx.now_ms, hex(&rand::rng().random::<[u8; 4]>()));
    let entry = AuditEntry {
        id: id.clone(),
        at_ms: ctx.now_ms,
        actor: ctx.actor.name(),
        action: action.to_owned(),
        key_id: target.key_id.map(str::to_owned),
        tenant: target.tenant.to_owned(),
        fields,
    };
    let body = serde_json::to_vec(&entry).unwrap_or_default();
    let doc = Doc { kind: AUDIT_KIND.into(), owner: AUDIT_OWNER.into(), id, body };
    ctx.store.put_record(doc).await.map(drop).map_err(unavailable)
}

/// `GET /admin/audit`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Page {
    limit: Option<usize>,
    before: Option<String>,
    cursor: Option<String>,
}

/// `GET /admin/audit`: the newest entries first; `next_cursor` is the `cursor` of the next
/// page (`next`, the same as an entry id, the `before` of the next page).
/// `GET /admin/audit`: the audit log, newest first.
#[utoipa::path(
    get,
    path = "/admin/audit",
    operation_id = "list_audit",
    tag = "records",
    params(("limit" = Option<usize>, Query, description = "Entries per page (1 to 500)"), ("cursor" = Option<String>, Query, description = "`next_cursor` of the previous page"), ("before" = Option<String>, Query, description = "Entries older than this id")),
    responses(
        (status = 200, description = "`items` and `next_cursor`", body = Object),
        ReadRefusals,
    )
)]
pub(crate) async fn list(
    State(state): State<AdminState>,
    headers: HeaderMap,
    page: Result<Query<Page>, QueryRejection>,
) -> Response {
    let ctx = match begin(&state, headers) {
        Ok(ctx) => ctx,
        Err(response) => return *response,
    };
    let Ok(Query(page)) = page else {
        return bad(&ctx.headers, "query", "the query takes `limit` (1 to 500) and `cursor` (or `before`)".into());
    };
    let before = match page.cursor.as_deref().map(super::page::decode) {
        Some(None) => return bad(&ctx.headers, "cursor", "cursor is not a next_cursor of this list".into()),
        Some(Some(id)) => Some(id),
        None => page.before,
    };
    let limit = page.limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return bad(&ctx.headers, "limit", format!("limit is 1 to {MAX_PAGE}"));
    }
    let docs = match ctx.store.list_docs(AUDIT_KIND, AUDIT_OWNER).await {
        Ok(docs) => docs,
        Err(e) => return fail(&ctx.headers, unavailable(e)),
    };
    let entries = docs.iter().filter_map(|d| serde_json::from_slice::<AuditEntry>(&d.body).ok());
    let visible = entries.filter(|e| ctx.actor.sees(&e.tenant));
    let after_cursor = visible.skip_while(|e| before.as_ref().is_some_and(|b| e.id >= *b));
    let mut data: Vec<AuditEntry> = after_cursor.take(limit.saturating_add(1)).collect();
    let more = data.len() > limit;
    data.truncate(limit);
    let next = if more { data.last().map(|e| e.id.clone()) } else { None };
    let next_cursor = next.as_deref().map(|id| hex(id.as_bytes()));
    axum::Json(json!({"object": "list", "data": data, "next": next, "has_more": more, "next_cursor": next_cursor}))
        .into_response()
}
