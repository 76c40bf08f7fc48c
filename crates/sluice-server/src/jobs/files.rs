//! The OpenAI Files API, as much as batches need: `POST /v1/files` (multipart, purpose
//! `batch`), `GET /v1/files`, `GET /v1/files/{id}`, `GET /v1/files/{id}/content`,
//! `DELETE /v1/files/{id}`.
//!
//! A file is two documents in the job store (see `sluice_jobs::doc`), owned by the
//! uploading key's tenant: its description (`file`) and its bytes (`file_content`, written
//! first, so a listed file always has content). Batch output and error files are stored the
//! same way by [`super::batches`]. Other tenants' keys get 404, as for jobs. A tenant's
//! stored files may take at most `[jobs] max_tenant_file_bytes`; an upload beyond is
//! refused with 413 (batch results are counted, never refused).

use axum::body::Body;
use std::collections::HashMap;

use axum::extract::{FromRequest as _, Multipart, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::Limited;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_jobs::{Doc, DocKey, JobStore};

use super::{Jobs, context, list_limit, list_page, list_skip, refuse, store_failed};
use crate::AppState;
use crate::error::{GatewayError, Stored};
use crate::trace::Trace;

/// Document kind of a file's description.
const FILE: &str = "file";
/// Document kind of a file's bytes.
const CONTENT: &str = "file_content";
/// Room for the multipart framing and the other fields around the file.
const FORM_OVERHEAD: usize = 64 * 1024;
/// Most files one listing returns (OpenAI's own maximum).
const MAX_LISTED: usize = 10_000;
/// The one purpose uploads may have: sluice runs batches, nothing else uses files.
const BATCH: &str = "batch";

/// A file's description, as stored and as OpenAI shows it (plus `object`/`status`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileInfo {
    pub(crate) id: String,
    pub(crate) bytes: usize,
    pub(crate) created_at: u64,
    pub(crate) filename: String,
    pub(crate) purpose: String,
}

impl FileInfo {
    fn view(&self) -> serde_json::Value {
        json!({"id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at,
            "filename": self.filename, "purpose": self.purpose, "status": "processed", "status_details": null})
    }
}

/// A new file id: `file-` and 24 hex digits.
fn new_id() -> String {
    use rand::Rng as _;
    format!("file-{:024x}", rand::rng().random::<u128>() >> 32)
}

/// Whether `text` may be a file id (so arbitrary path segments never reach a store).
pub(crate) fn valid_id(text: &str) -> bool {
    text.strip_prefix("file-")
        .is_some_and(|rest| (1..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

pub(crate) fn missing_file() -> GatewayError {
    GatewayError::NotFound(Stored::File)
}

/// Stores a file (bytes first, then the description).
pub(crate) async fn store(
    store: &dyn JobStore,
    owner: &str,
    info: &FileInfo,
    bytes: Vec<u8>,
) -> Result<(), GatewayError> {
    let doc = |kind: &str, body| Doc { kind: kind.into(), owner: owner.into(), id: info.id.clone(), body };
    store.put_doc(doc(CONTENT, bytes)).await.map_err(store_failed("put file"))?;
    let described = serde_json::to_vec(info).unwrap_or_default();
    store.put_doc(doc(FILE, described)).await.map_err(store_failed("put file"))
}

/// The owner's file `id`, if any.
pub(crate) async fn describe(store: &dyn JobStore, owner: &str, id: &str) -> Result<Option<FileInfo>, GatewayError> {
    if !valid_id(id) {
        return Ok(None);
    }
    let found = store.get_doc(DocKey { kind: FILE, owner, id }).await.map_err(store_failed("get file"))?;
    Ok(found.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// The owner's file `id`'s bytes, if any.
pub(crate) async fn content(store: &dyn JobStore, owner: &str, id: &str) -> Result<Option<Vec<u8>>, GatewayError> {
    if !valid_id(id) {
        return Ok(None);
    }
    store.get_doc(DocKey { kind: CONTENT, owner, id }).await.map_err(store_failed("get file content"))
}

/// Runs `work` for an authenticated caller with jobs enabled; refusals become responses.
async fn answer<F>(state: &AppState, headers: &HeaderMap, work: F) -> Response
where
    F: AsyncFnOnce(&Jobs, &str) -> Result<Response, GatewayError>,
{
    let trace = Trace::from_headers(headers);
    let result = async {
        let (_, jobs, caller) = context(state, headers)?;
        work(&jobs, &caller.tenant).await
    }
    .await;
    result.unwrap_or_else(|refusal| refuse(refusal, &trace))
}

/// `POST /v1/files`: multipart with `purpose` and `file`.
pub async fn upload(State(state): State<AppState>, request: Request) -> Response {
    let headers = request.headers().clone();
    answer(&state, &headers, async |jobs, owner| {
        let (purpose, filename, bytes) = read_form(request, jobs.max_file_bytes).await?;
        if purpose != BATCH {
            let message = format!("purpose must be `{BATCH}` (the only use of files here), not `{purpose}`");
            return Err(GatewayError::InvalidParameter { code: "invalid_purpose", message });
        }
        let created_at = jobs.clock.unix_seconds();
        let info = FileInfo { id: new_id(), bytes: bytes.len(), created_at, filename, purpose };
        // One upload at a time here checks and stores, so this instance never overshoots.
        let _turn = jobs.uploads.lock().await;
        within_quota(jobs, owner, bytes.len()).await?;
        store(&*jobs.store, owner, &info, bytes).await?;
        Ok(axum::Json(info.view()).into_response())
    })
    .await
}

/// Refuses a new file of `size` bytes when the owner's stored files would then exceed
/// `[jobs] max_tenant_file_bytes`. Usage is summed from the listing of the owner's file
/// descriptions (uploads and batch results): files deleted or past their retention have
/// left it, so nothing can drift, on the embedded store or in Redis. Two instances
/// storing for one tenant at the same moment may each pass: the quota is then exceeded
/// by at most one file per concurrent upload.
async fn within_quota(jobs: &Jobs, owner: &str, size: usize) -> Result<(), GatewayError> {
    let docs = jobs.store.list_docs(FILE, owner).await.map_err(store_failed("list files"))?;
    let used: u64 = docs
        .iter()
        .filter_map(|d| serde_json::from_slice::<FileInfo>(&d.body).ok())
        .map(|f| u64::try_from(f.bytes).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    let size = u64::try_from(size).unwrap_or(u64::MAX);
    if used.saturating_add(size) <= jobs.max_tenant_file_bytes {
        return Ok(());
    }
    Err(GatewayError::FileQuotaExceeded { quota: jobs.max_tenant_file_bytes, used, size })
}

/// Reads `purpose` and `file` from a multipart body of at most `limit` bytes of file.
async fn read_form(request: Request, limit: usize) -> Result<(String, String, Vec<u8>), GatewayError> {
    let too_large = || {
        let message = format!("the file exceeds {limit} bytes (`[jobs] max_file_bytes`)");
        GatewayError::FileTooLarge(message)
    };
    let malformed = |what: String| GatewayError::InvalidParameter { code: "invalid_multipart", message: what };
    let request = request.map(|body| Body::new(Limited::new(body, limit.saturating_add(FORM_OVERHEAD))));
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| malformed(format!("expected multipart/form-data with `purpose` and `file`: {}", e.body_text())))?;
    let (mut purpose, mut file) = (None, None);
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(malformed(format!("the form could not be read: {}", e.body_text()))),
        };
        match field.name() {
            Some("purpose") => purpose = Some(field.text().await.map_err(|e| malformed(e.body_text()))?),
            Some("file") => {
                let name = field.file_name().unwrap_or("upload.jsonl").to_owned();
                let bytes = match field.bytes().await {
                    Ok(bytes) => bytes,
                    Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
                    Err(e) => return Err(malformed(e.body_text())),
                };
                file = Some((name, bytes));
            }
            _ => {}
        }
    }
    let missing = |field: &str| GatewayError::InvalidParameter {
        code: "missing_field",
        message: format!("`{field}` is required"),
    };
    let purpose = purpose.ok_or_else(|| missing("purpose"))?;
    let (filename, bytes) = file.ok_or_else(|| missing("file"))?;
    if bytes.len() > limit {
        return Err(too_large());
    }
    Ok((purpose.trim().to_owned(), filename, bytes.to_vec()))
}

/// `GET /v1/files?purpose=&limit=&after=`: the caller's files, newest first.
pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    answer(&state, &headers, async |jobs, owner| {
        let limit = list_limit(&query, MAX_LISTED, MAX_LISTED)
            .map_err(|message| GatewayError::InvalidParameter { code: "invalid_value", message })?;
        let docs = jobs.store.list_docs(FILE, owner).await.map_err(store_failed("list files"))?;
        let files: Vec<FileInfo> = docs
            .iter()
            .filter_map(|d| serde_json::from_slice::<FileInfo>(&d.body).ok())
            .filter(|f| query.get("purpose").is_none_or(|p| *p == f.purpose))
            .collect();
        let skip = list_skip(&query, files.iter().map(|f| f.id.as_str()));
        let data: Vec<_> = files.iter().skip(skip).take(limit).map(FileInfo::view).collect();
        let page = list_page(data, files.len(), skip);
        Ok(axum::Json(page).into_response())
    })
    .await
}

/// `GET /v1/files/{id}`.
pub async fn get(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    answer(&state, &headers, async |jobs, owner| {
        let info = describe(&*jobs.store, owner, &id).await?.ok_or_else(missing_file)?;
        Ok(axum::Json(info.view()).into_response())
    })
    .await
}

/// `GET /v1/files/{id}/content`.
pub async fn download(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    answer(&state, &headers, async |jobs, owner| {
        let bytes = content(&*jobs.store, owner, &id).await?.ok_or_else(missing_file)?;
        Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
    })
    .await
}

/// `DELETE /v1/files/{id}`.
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    answer(&state, &headers, async |jobs, owner| {
        if !valid_id(&id) {
            return Err(missing_file());
        }
        let key = DocKey { kind: FILE, owner, id: &id };
        let existed = jobs.store.delete_doc(key).await.map_err(store_failed("delete file"))?;
        if !existed {
            return Err(missing_file());
        }
        let key = DocKey { kind: CONTENT, owner, id: &id };
        jobs.store.delete_doc(key).await.map_err(store_failed("delete file"))?;
        Ok(axum::Json(json!({"id": id, "object": "file", "deleted": true})).into_response())
    })
    .await
}
