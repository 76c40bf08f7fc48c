//! The OpenAI Batches API on top of async jobs: `POST /v1/batches`, `GET /v1/batches`,
//! `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`.
//!
//! A batch is checked whole (every line, as `/v1/jobs` checks a request) and then becomes
//! one job per line, in the `batch` traffic class when one is configured and no more urgent
//! than the key's class (else the key's class), owned by the key's tenant: queued, paced and admitted like any job. The batch
//! record and the list of its jobs are documents in the job store. Counts and status are
//! derived from the jobs when the batch is read; the first read that finds every job
//! finished writes the output and error files (ids derived from the batch's, so two
//! instances finishing it at once write the same files) and freezes the record.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{StreamExt as _, TryStreamExt as _};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sluice_jobs::{Doc, DocKey, Endpoint, Job, JobId, JobStore};

use super::files::{self, FileInfo};
use super::{Ask, Jobs, bad, context, list_limit, list_page, list_skip, may_use, prepare, refuse, store_failed};
use crate::AppState;
use crate::error::{GatewayError, Stored};
use crate::road::read_body;
use crate::state::{Caller, Gateway};
use crate::trace::Trace;
use sluice_jobs::batch_lines::{self, LineError, MAX_ERRORS, RequestCounts};

/// Jobs a batch submits per store call.
const SUBMIT_CHUNK: usize = 500;
/// Document kind of a batch record.
const BATCH: &str = "batch";
/// Document kind of a batch's `[custom_id, job_id]` list, in input order.
const BATCH_JOBS: &str = "batch_jobs";
/// The one completion window.
const WINDOW: &str = "24h";
const WINDOW_SECS: u64 = 24 * 3600;
/// The traffic class batch jobs run in when the configuration has it.
const BATCH_CLASS: &str = "batch";
/// How often an open batch's record and job list are rewritten (against the retention).
const TOUCH_EVERY_SECS: u64 = 24 * 3600;
/// Job reads in flight while a batch is refreshed.
const READ_AHEAD: usize = 16;
/// Most `metadata` pairs (OpenAI's limit).
const MAX_METADATA: usize = 16;

/// A batch as stored; shown as OpenAI shows it (plus `object`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Batch {
    id: String,
    endpoint: String,
    input_file_id: String,
    completion_window: String,
    status: String,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    created_at: u64,
    expires_at: u64,
    in_progress_at: Option<u64>,
    finalizing_at: Option<u64>,
    completed_at: Option<u64>,
    failed_at: Option<u64>,
    cancelling_at: Option<u64>,
    cancelled_at: Option<u64>,
    errors: Option<Value>,
    metadata: Option<Value>,
    request_counts: RequestCounts,
    /// When the record and its job list were last written (not shown): an open batch
    /// rewrites them daily so the store's retention never takes them while jobs run.
    #[serde(default)]
    touched_at: u64,
}

impl Batch {
    fn view(&self) -> Value {
        let mut out = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut out {
            map.insert("object".into(), "batch".into());
            map.insert("expired_at".into(), Value::Null);
            map.remove("touched_at");
        }
        out
    }

    /// A new batch (`validating`) of `asked` over the file `input_file_id`.
    fn new(asked: Asked, input_file_id: String, created_at: u64) -> Self {
        Self {
            id: format!("batch_{}", JobId::random().as_str().trim_start_matches("job_")),
            endpoint: asked.endpoint,
            input_file_id,
            completion_window: WINDOW.into(),
            status: "validating".into(),
            output_file_id: None,
            error_file_id: None,
            created_at,
            expires_at: created_at + WINDOW_SECS,
            in_progress_at: None,
            finalizing_at: None,
            completed_at: None,
            failed_at: None,
            cancelling_at: None,
            cancelled_at: None,
            errors: None,
            metadata: asked.metadata,
            request_counts: RequestCounts::default(),
            touched_at: created_at,
        }
    }

    fn is_open(&self) -> bool {
        matches!(self.status.as_str(), "validating" | "in_progress" | "finalizing" | "cancelling")
    }

    /// The output and error file ids (derived, so concurrent finishers agree).
    fn file_ids(&self) -> (String, String) {
        let tail = self.id.trim_start_matches("batch_");
        (format!("file-out{tail}"), format!("file-err{tail}"))
    }
}

/// `POST /v1/batches` body.
#[derive(Debug, Deserialize)]
struct Create {
    input_file_id: Option<String>,
    endpoint: Option<String>,
    completion_window: Option<String>,
    metadata: Option<Value>,
}

fn missing_batch() -> GatewayError {
    GatewayError::NotFound(Stored::Batch)
}

fn valid_id(text: &str) -> bool {
    text.strip_prefix("batch_").is_some_and(|hex| hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn respond(result: Result<Value, GatewayError>, headers: &HeaderMap) -> Response {
    result.map_or_else(|refusal| refuse(refusal, &Trace::from_headers(headers)), |v| axum::Json(v).into_response())
}

/// `POST /v1/batches`.
pub async fn create(State(state): State<AppState>, headers: HeaderMap, body: axum::body::Body) -> Response {
    let result = async {
        let (gateway, jobs, caller) = context(&state, &headers)?;
        let (gateway, jobs, caller) = (&*gateway, &*jobs, &caller);
        let bytes = read_body(body, gateway.max_body_bytes).await?;
        let ask = ask(&bytes)?;
        let (store, tenant) = (&*jobs.store, &*caller.tenant);
        let (file_id, input) = input_of(store, tenant, &ask.input_file_id).await?;
        let mut batch = Batch::new(ask, file_id, jobs.clock.unix_seconds());
        match check(gateway, jobs, caller, &input, &batch.endpoint).await {
            Ok(new_jobs) => start(gateway, jobs, tenant, &mut batch, new_jobs).await?,
            Err(errors) => {
                batch.status = "failed".into();
                batch.failed_at = Some(jobs.clock.unix_seconds());
                let data: Vec<Value> = errors.iter().map(LineError::view).collect();
                batch.errors = Some(json!({"object": "list", "data": data}));
                save(jobs, tenant, &batch).await?;
            }
        }
        Ok(batch.view())
    }
    .await;
    respond(result, &headers)
}

/// The id and bytes of the owner's input file `id`.
async fn input_of(store: &dyn JobStore, tenant: &str, id: &str) -> Result<(String, Vec<u8>), GatewayError> {
    let file = files::describe(store, tenant, id).await?.ok_or_else(files::missing_file)?;
    if file.purpose != "batch" {
        let message = "the input file's purpose must be `batch`";
        return Err(bad("input_file_id", sluice_provider::RequestErrorCode::InvalidValue, message));
    }
    let input = files::content(store, tenant, &file.id).await?.ok_or_else(files::missing_file)?;
    Ok((file.id, input))
}

/// The validated create request.
struct Asked {
    input_file_id: String,
    endpoint: String,
    metadata: Option<Value>,
}

fn ask(bytes: &Bytes) -> Result<Asked, GatewayError> {
    use sluice_provider::RequestErrorCode::{InvalidJson, InvalidValue, MissingField};
    let create: Create =
        serde_json::from_slice(bytes).map_err(|e| bad("body", InvalidJson, format!("not a batch request: {e}")))?;
    let input_file_id =
        create.input_file_id.ok_or_else(|| bad("input_file_id", MissingField, "input_file_id is required"))?;
    let endpoint = create.endpoint.ok_or_else(|| bad("endpoint", MissingField, "endpoint is required"))?;
    if endpoint == "/v1/embeddings" {
        return Err(bad(
            "endpoint",
            InvalidValue,
            "batches of /v1/embeddings are not supported here (async jobs run chat requests); use /v1/chat/completions",
        ));
    }
    if endpoint != Endpoint::ChatCompletions.path() {
        return Err(bad("endpoint", InvalidValue, "endpoint must be /v1/chat/completions"));
    }
    match create.completion_window.as_deref() {
        Some(WINDOW) => {}
        None => return Err(bad("completion_window", MissingField, "completion_window is required")),
        Some(_) => return Err(bad("completion_window", InvalidValue, "completion_window must be 24h")),
    }
    let metadata = match create.metadata {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) if map.len() <= MAX_METADATA && map.values().all(Value::is_string) => {
            Some(Value::Object(map))
        }
        Some(_) => return Err(bad("metadata", InvalidValue, "metadata must be an object of at most 16 string values")),
    };
    Ok(Asked { input_file_id, endpoint, metadata })
}

/// Every line checked as `/v1/jobs` checks a request; the jobs, or every error found.
async fn check(
    gateway: &Gateway,
    jobs: &Jobs,
    caller: &Caller,
    input: &[u8],
    url: &str,
) -> Result<Vec<(String, sluice_jobs::NewJob)>, Vec<LineError>> {
    let (lines, mut errors) = batch_lines::parse(input, url, jobs.max_batch_lines);
    // The batch class only when it is no more urgent than the key's own: a batch must not
    // lift a key above its class.
    let class = jobs.class(BATCH_CLASS).filter(|c| may_use(caller, c)).map(|_| BATCH_CLASS.to_owned());
    let mut out = Vec::with_capacity(lines.len());
    for line in lines {
        let ask = Ask { endpoint: Endpoint::ChatCompletions, body: line.body, class: class.clone(), priority: None };
        match prepare(gateway, jobs, caller, ask).await {
            Ok((new, _)) => out.push((line.custom_id, new)),
            Err(refusal) => errors.push(line_error(line.number, refusal)),
        }
        if errors.len() >= MAX_ERRORS {
            break;
        }
    }
    errors.sort_by_key(|e| e.line);
    errors.truncate(MAX_ERRORS);
    if errors.is_empty() { Ok(out) } else { Err(errors) }
}

fn line_error(number: usize, error: GatewayError) -> LineError {
    let (code, param, message) = match error {
        GatewayError::UnknownModel(model) => (
            "model_not_found",
            Some("body.model"),
            format!("model `{model}` does not exist or is not available to this key"),
        ),
        GatewayError::BadRequest(e) => (e.code.as_str(), Some("body"), e.message),
        e => ("invalid_request", Some("body"), e.to_string()),
    };
    LineError::at(number, code, param, message)
}

/// Submits the jobs, then records their list and the batch as in progress.
async fn start(
    gateway: &Gateway,
    jobs: &Jobs,
    tenant: &str,
    batch: &mut Batch,
    new_jobs: Vec<(String, sluice_jobs::NewJob)>,
) -> Result<(), GatewayError> {
    let store = &*jobs.store;
    save(jobs, tenant, batch).await?;
    let mut entries = Vec::with_capacity(new_jobs.len());
    // In chunks: one durable commit (embedded) or one pipelined round trip (Redis) each,
    // never one per line.
    let mut lines = new_jobs.into_iter().peekable();
    while lines.peek().is_some() {
        let (ids, chunk): (Vec<String>, Vec<sluice_jobs::NewJob>) = lines.by_ref().take(SUBMIT_CHUNK).unzip();
        let submitted = store.submit_many(chunk).await.map_err(store_failed("submit"))?;
        entries.extend(ids.into_iter().zip(submitted.into_iter().map(|s| s.job.id.0)));
        jobs.wake.notify_one();
    }
    gateway.services.metrics.jobs.submitted.inc_by(entries.len() as u64);
    save_jobs(store, tenant, &batch.id, &entries).await?;
    batch.status = "in_progress".into();
    batch.in_progress_at = Some(jobs.clock.unix_seconds());
    batch.request_counts.total = entries.len();
    save(jobs, tenant, batch).await
}

async fn save_jobs(
    store: &dyn JobStore,
    tenant: &str,
    id: &str,
    entries: &[(String, String)],
) -> Result<(), GatewayError> {
    let body = serde_json::to_vec(entries).unwrap_or_default();
    let list = Doc { kind: BATCH_JOBS.into(), owner: tenant.into(), id: id.into(), body };
    store.put_doc(list).await.map_err(store_failed("put batch"))
}

/// Writes the record (stamping `touched_at`).
async fn save(jobs: &Jobs, tenant: &str, batch: &Batch) -> Result<(), GatewayError> {
    let batch = &Batch { touched_at: jobs.clock.unix_seconds(), ..batch.clone() };
    let doc = Doc {
        kind: BATCH.into(),
        owner: tenant.into(),
        id: batch.id.clone(),
        body: serde_json::to_vec(batch).unwrap_or_default(),
    };
    jobs.store.put_doc(doc).await.map_err(store_failed("put batch"))
}

async fn load(store: &dyn JobStore, tenant: &str, id: &str) -> Result<Batch, GatewayError> {
    if !valid_id(id) {
        return Err(missing_batch());
    }
    let found = store.get_doc(DocKey { kind: BATCH, owner: tenant, id }).await.map_err(store_failed("get batch"))?;
    found.and_then(|bytes| serde_json::from_slice(&bytes).ok()).ok_or_else(missing_batch)
}

/// The batch's entries and their jobs (`None`: retired).
async fn jobs_of(
    store: &dyn JobStore,
    tenant: &str,
    id: &str,
) -> Result<(Vec<(String, String)>, Vec<Option<Job>>), GatewayError> {
    let found =
        store.get_doc(DocKey { kind: BATCH_JOBS, owner: tenant, id }).await.map_err(store_failed("get batch"))?;
    let entries: Vec<(String, String)> = found.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let ids: Vec<Option<JobId>> = entries.iter().map(|(_, job)| JobId::parse(job)).collect();
    let jobs = futures_util::stream::iter(ids)
        .map(|id| async move {
            match id {
                Some(id) => store.get(&id).await,
                None => Ok(None),
            }
        })
        .buffered(READ_AHEAD)
        .try_collect()
        .await
        .map_err(store_failed("get"))?;
    Ok((entries, jobs))
}

/// Counts and status from the jobs; the first read that finds them all finished writes
/// the output files and freezes the record.
async fn refresh(jobs: &Jobs, tenant: &str, mut batch: Batch) -> Result<Batch, GatewayError> {
    if !batch.is_open() || batch.status == "validating" {
        return Ok(batch);
    }
    let (entries, found) = jobs_of(&*jobs.store, tenant, &batch.id).await?;
    let (counts, done) = batch_lines::counts(&found);
    batch.request_counts = counts;
    if !done {
        if jobs.clock.unix_seconds().saturating_sub(batch.touched_at) >= TOUCH_EVERY_SECS {
            save_jobs(&*jobs.store, tenant, &batch.id, &entries).await?;
            save(jobs, tenant, &batch).await?;
        }
        return Ok(batch);
    }
    let (output, errors) = batch_lines::outputs(&entries, &found);
    let (output_id, error_id) = batch.file_ids();
    batch.finalizing_at = Some(jobs.clock.unix_seconds());
    if !output.is_empty() {
        write_file(jobs, tenant, &output_id, &format!("{}_output.jsonl", batch.id), output).await?;
        batch.output_file_id = Some(output_id);
    }
    if !errors.is_empty() {
        write_file(jobs, tenant, &error_id, &format!("{}_error.jsonl", batch.id), errors).await?;
        batch.error_file_id = Some(error_id);
    }
    if batch.status == "cancelling" {
        batch.status = "cancelled".into();
        batch.cancelled_at = Some(jobs.clock.unix_seconds());
    } else {
        batch.status = "completed".into();
        batch.completed_at = Some(jobs.clock.unix_seconds());
    }
    save(jobs, tenant, &batch).await?;
    Ok(batch)
}

async fn write_file(jobs: &Jobs, tenant: &str, id: &str, filename: &str, bytes: Vec<u8>) -> Result<(), GatewayError> {
    let info = FileInfo {
        id: id.into(),
        bytes: bytes.len(),
        created_at: jobs.clock.unix_seconds(),
        filename: filename.into(),
        purpose: "batch_output".into(),
    };
    files::store(&*jobs.store, tenant, &info, bytes).await
}

/// `GET /v1/batches/{id}`.
pub async fn get(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let result = async {
        let (_, jobs, caller) = context(&state, &headers)?;
        let (jobs, caller) = (&*jobs, &caller);
        let batch = load(&*jobs.store, &caller.tenant, &id).await?;
        Ok(refresh(jobs, &caller.tenant, batch).await?.view())
    }
    .await;
    respond(result, &headers)
}

/// `POST /v1/batches/{id}/cancel`: jobs not yet started are cancelled (they count as
/// failed and appear in the error file); running ones finish.
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let result = async {
        let (_, jobs, caller) = context(&state, &headers)?;
        let (jobs, caller) = (&*jobs, &caller);
        let (store, tenant) = (&*jobs.store, &*caller.tenant);
        let mut batch = load(store, tenant, &id).await?;
        match batch.status.as_str() {
            "cancelling" | "cancelled" => return Ok(refresh(jobs, tenant, batch).await?.view()),
            "completed" | "failed" | "expired" => {
                let message = format!("a batch that is {} cannot be cancelled", batch.status);
                return Err(GatewayError::BatchNotCancellable(message));
            }
            _ => {}
        }
        batch.status = "cancelling".into();
        batch.cancelling_at = Some(jobs.clock.unix_seconds());
        save(jobs, tenant, &batch).await?;
        let found = store
            .get_doc(DocKey { kind: BATCH_JOBS, owner: tenant, id: &batch.id })
            .await
            .map_err(store_failed("get batch"))?;
        let entries: Vec<(String, String)> = found.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
        for id in entries.iter().filter_map(|(_, job)| JobId::parse(job)) {
            store.cancel(&id).await.map_err(store_failed("cancel"))?;
        }
        Ok(refresh(jobs, tenant, batch).await?.view())
    }
    .await;
    respond(result, &headers)
}

/// `GET /v1/batches?limit=&after=`: newest first.
pub async fn list(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let (_, jobs, caller) = context(&state, &headers)?;
        let (jobs, caller) = (&*jobs, &caller);
        let limit = list_limit(&query, 20, 100)
            .map_err(|message| bad("limit", sluice_provider::RequestErrorCode::InvalidValue, message))?;
        let (store, tenant) = (&*jobs.store, &*caller.tenant);
        let docs = store.list_docs(BATCH, tenant).await.map_err(store_failed("list batches"))?;
        let skip = list_skip(&query, docs.iter().map(|d| d.id.as_str()));
        let mut data = Vec::new();
        for doc in docs.iter().skip(skip).take(limit) {
            if let Ok(batch) = serde_json::from_slice::<Batch>(&doc.body) {
                data.push(refresh(jobs, tenant, batch).await?.view());
            }
        }
        Ok(list_page(data, docs.len(), skip))
    }
    .await;
    respond(result, &headers)
}
