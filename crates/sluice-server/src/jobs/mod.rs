//! Async jobs over HTTP: submit with `POST /v1/jobs` (or `Prefer: respond-async` on the
//! chat and messages endpoints), poll with `GET /v1/jobs/{id}`. The workers that run them
//! are in [`worker`].
//!
//! A job belongs to the tenant of the key that submitted it; other tenants' keys get 404
//! for it, so ids do not reveal that a job exists. Submission is idempotent per tenant by
//! `Idempotency-Key`: a repeat returns the first job (200); the same key with another
//! request is refused (422).
//!
//! The folder holds the routes that run later than the request that asked: jobs here,
//! `files` and `batches` (with the pure line handling in [`sluice_jobs::batch_lines`])
//! over the same job store, and the `worker`s that run what was queued.

pub mod batches;
pub mod files;
pub mod worker;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice_config::{Config, ProviderKind, TrafficClass};
use sluice_jobs::{Endpoint, Job, JobId, JobState, JobStore, NewJob};
use sluice_provider::{ParsedRequest, Protocol, RequestError, RequestErrorCode, parse_request};
use sluice_quota::Nanos;
use tokio::sync::Notify;

use crate::AppState;
use crate::auth::{Authenticated, authenticate};
use crate::error::{Envelope, ErrorResponse, GatewayError, Stored};
use crate::road::check_fits;
use crate::road::{ModelFromPath, named_by_path, read_body};
use crate::state::{Caller, Gateway, Profile};
use crate::trace::Trace;

/// Run time assumed for a job before any has finished here (for ETAs).
const INITIAL_RUN_SECS: f64 = 1.0;
/// Weight of the newest run in the run-time average.
const RUN_TIME_WEIGHT: f64 = 0.1;
/// ETAs remembered for jobs submitted here and not yet run (the oldest are forgotten:
/// jobs run by another instance never report back here).
const MAX_ETAS: usize = 10_000;

/// The ETAs given for jobs submitted on this instance, until their first attempt ends.
#[derive(Debug, Default)]
struct Etas {
    given: HashMap<JobId, (Nanos, Duration)>,
    order: VecDeque<JobId>,
}

/// The async-job side of the gateway.
#[derive(Debug)]
pub struct Jobs {
    /// Where jobs live.
    pub store: Arc<dyn JobStore>,
    /// The gateway's clock: timestamps of files and batches.
    pub clock: Arc<dyn sluice_quota::Clock>,
    /// Traffic classes by name (a job may name one other than its key's), as configured
    /// now: replaced on every reload.
    classes: arc_swap::ArcSwap<HashMap<Arc<str>, TrafficClass>>,
    /// Workers per instance.
    pub workers: usize,
    /// Lease visibility timeout.
    pub visibility: Duration,
    /// Wakes idle workers of this instance when a job is submitted here.
    pub wake: Notify,
    /// Largest file accepted by `POST /v1/files`.
    pub max_file_bytes: usize,
    /// Most requests in one batch.
    pub max_batch_lines: usize,
    /// Bytes of stored files one tenant may keep.
    pub max_tenant_file_bytes: u64,
    /// Held by an upload while it checks the tenant's quota and stores.
    pub(crate) uploads: tokio::sync::Mutex<()>,
    run_secs: Mutex<f64>,
    etas: Mutex<Etas>,
}

impl Jobs {
    /// Jobs on `store` with the settings and classes of `config`, stamped by `clock`.
    #[must_use]
    pub fn new(store: Arc<dyn JobStore>, config: &Config, clock: Arc<dyn sluice_quota::Clock>) -> Self {
        Self {
            store,
            clock,
            classes: arc_swap::ArcSwap::from_pointee(classes_of(config)),
            workers: config.jobs.workers,
            visibility: config.jobs.visibility_timeout,
            wake: Notify::new(),
            max_file_bytes: config.jobs.max_file_bytes,
            max_batch_lines: config.jobs.max_batch_lines,
            max_tenant_file_bytes: config.jobs.max_tenant_file_bytes,
            uploads: tokio::sync::Mutex::new(()),
            run_secs: Mutex::new(INITIAL_RUN_SECS),
            etas: Mutex::default(),
        }
    }

    /// Follows a reloaded configuration's traffic classes.
    pub fn reconfigure(&self, config: &Config) {
        self.classes.store(Arc::new(classes_of(config)));
    }

    /// The traffic class named `name` in the configuration in force.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<TrafficClass> {
        self.classes.load().get(name).cloned()
    }

    /// Remembers the ETA `eta` given at `now` for a job just created here.
    fn gave_eta(&self, id: &JobId, now: Nanos, eta: Duration) {
        let mut etas = self.etas.lock().unwrap_or_else(PoisonError::into_inner);
        etas.given.insert(id.clone(), (now, eta));
        etas.order.push_back(id.clone());
        while etas.order.len() > MAX_ETAS {
            if let Some(oldest) = etas.order.pop_front() {
                etas.given.remove(&oldest);
            }
        }
    }

    /// A job's first attempt on this instance ended: if it was submitted here, records how
    /// far the time since submission was from the `eta_sec` it was given
    /// (`sluice_queue_eta_error_seconds{source="job"}`). Later attempts are not counted.
    pub fn attempt_ended(&self, gateway: &Gateway, job: &Job) {
        let given = self.etas.lock().unwrap_or_else(PoisonError::into_inner).given.remove(&job.id);
        if let Some((submitted, eta)) = given {
            // The stored class was checked at submission, but may have left the configuration.
            let class = self.class(&job.class).map_or_else(|| "other".into(), |c| c.name);
            gateway.services.metrics.eta_error(&class, "job", eta, gateway.services.clock.now().since(submitted));
        }
    }

    /// Records how long a job took, for ETAs.
    pub fn observe_run(&self, took: Duration) {
        let mut average = self.run_secs.lock().unwrap_or_else(PoisonError::into_inner);
        *average += RUN_TIME_WEIGHT * (took.as_secs_f64() - *average);
    }

    /// The estimated wait for a new job: the jobs ahead of it (queued and running, plus
    /// requests waiting in its deployment's queue) at the recent run time per worker.
    async fn eta_secs(&self, gateway: &Gateway, deployment: usize) -> u64 {
        let counts = self.store.counts().await.unwrap_or_default();
        let waiting = gateway.deployments.get(deployment).map_or(0, |r| r.queue.depth());
        let ahead = counts.queued.saturating_add(counts.running).saturating_add(waiting as u64);
        let per_job = *self.run_secs.lock().unwrap_or_else(PoisonError::into_inner);
        let workers = self.workers.max(1) as f64;
        ((ahead as f64 + 1.0) * per_job / workers).ceil() as u64
    }
}

/// Whether the client asked for an asynchronous answer (`Prefer: respond-async`).
#[must_use]
pub fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split([',', ';']))
        .any(|token| token.trim().eq_ignore_ascii_case("respond-async"))
}

/// `POST /v1/jobs` with `{"endpoint", "body", "class"?, "priority"?}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobRequest {
    endpoint: String,
    body: Value,
    class: Option<String>,
    priority: Option<u8>,
}

/// The store failed: an error naming the operation, logged where it is answered.
pub(crate) fn store_failed(during: &'static str) -> impl FnOnce(sluice_jobs::JobStoreError) -> GatewayError {
    move |e| GatewayError::JobStoreUnavailable { during, cause: e.to_string() }
}

/// A job, file or batch request's failure as its response; a store failure is logged
/// here, once (without the request).
pub(crate) fn refuse(error: GatewayError, trace: &Trace) -> Response {
    if let GatewayError::JobStoreUnavailable { during, cause } = &error {
        tracing::warn!(error = %cause, "job store failed on {during}");
    }
    ErrorResponse { error, envelope: Envelope::OpenAi, trace_id: trace.id.clone() }.into_response()
}

pub(crate) fn bad(param: &str, code: RequestErrorCode, message: impl Into<String>) -> GatewayError {
    GatewayError::BadRequest(RequestError { param: Some(param.to_owned()), message: message.into(), code })
}

/// A list route's `limit` query parameter: `default` when absent, else a whole number from
/// 1 to `max`; out of range, the message that says so (each route words its own refusal).
pub(crate) fn list_limit(query: &HashMap<String, String>, default: usize, max: usize) -> Result<usize, String> {
    match query.get("limit").map(|l| l.parse::<usize>()) {
        None => Ok(default),
        Some(Ok(n)) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(format!("limit must be between 1 and {max}")),
    }
}

/// How many of `ids` (newest first) a list skips: those up to and including the query's
/// `after` id; none when `after` is absent or names nothing listed.
pub(crate) fn list_skip<'a>(query: &HashMap<String, String>, mut ids: impl Iterator<Item = &'a str>) -> usize {
    query.get("after").and_then(|after| ids.position(|id| id == after)).map_or(0, |i| i + 1)
}

/// One page of an OpenAI list: `data` shown after skipping `skip` of `total` entries.
pub(crate) fn list_page(data: Vec<Value>, total: usize, skip: usize) -> Value {
    let has_more = total > skip + data.len();
    let (first, last) = (data.first().map(|v| v["id"].clone()), data.last().map(|v| v["id"].clone()));
    json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": has_more})
}

/// The gateway in force, the jobs and the authenticated caller of a job, file or batch
/// request: refused when jobs are not enabled here or the key is unknown.
pub(crate) fn context(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(Arc<Gateway>, Arc<Jobs>, Caller), GatewayError> {
    let jobs = jobs_of(state)?;
    let gateway = state.current();
    let caller = authenticate(&gateway, headers)?;
    Ok((gateway, jobs, caller))
}

/// The jobs, when enabled here.
fn jobs_of(state: &AppState) -> Result<Arc<Jobs>, GatewayError> {
    state.jobs.clone().ok_or(GatewayError::JobsDisabled)
}

fn protocol(endpoint: Endpoint) -> Protocol {
    match endpoint {
        Endpoint::ChatCompletions => Protocol::OpenAiChat,
        Endpoint::Messages => Protocol::AnthropicMessages,
    }
}

/// `POST /v1/jobs`.
pub async fn submit(State(state): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let trace = Trace::from_headers(&parts.headers);
    let result = async {
        let (gateway, jobs, caller) = context(&state, &parts.headers)?;
        let bytes = read_body(body, gateway.max_body_bytes).await?;
        let request: JobRequest = serde_json::from_slice(&bytes)
            .map_err(|e| bad("body", RequestErrorCode::InvalidJson, format!("not a job request: {e}")))?;
        let endpoint = Endpoint::from_path(&request.endpoint).ok_or_else(|| {
            bad("endpoint", RequestErrorCode::InvalidValue, "endpoint must be /v1/chat/completions or /v1/messages")
        })?;
        let body = serde_json::to_vec(&request.body).unwrap_or_default();
        let ask = Ask { endpoint, body, class: request.class, priority: request.priority };
        enqueue(&gateway, &jobs, &caller, ask, &parts.headers).await
    }
    .await;
    result.unwrap_or_else(|refusal| refuse(refusal, &trace))
}

/// A chat or messages request with `Prefer: respond-async`.
pub async fn submit_inline(state: AppState, endpoint: Endpoint, request: Request) -> Response {
    let (mut parts, body) = request.into_parts();
    let trace = Trace::from_headers(&parts.headers);
    let result = async {
        let (gateway, jobs, caller) = match parts.extensions.remove::<Authenticated>() {
            // The rate-limit layer in front of the proxied routes has found the caller.
            Some(found) => (Arc::clone(&found.gateway), jobs_of(&state)?, found.caller()?.clone()),
            None => context(&state, &parts.headers)?,
        };
        let body = read_body(body, gateway.max_body_bytes).await?;
        let body = named_by_path(parts.extensions.get::<ModelFromPath>(), body).to_vec();
        let ask = Ask { endpoint, body, class: None, priority: None };
        enqueue(&gateway, &jobs, &caller, ask, &parts.headers).await
    }
    .await;
    result.unwrap_or_else(|refusal| refuse(refusal, &trace))
}

/// What a submission asks for.
pub(crate) struct Ask {
    pub(crate) endpoint: Endpoint,
    pub(crate) body: Vec<u8>,
    pub(crate) class: Option<String>,
    pub(crate) priority: Option<u8>,
}

/// Validates the request as the endpoint would, then stores the job.
async fn enqueue(
    gateway: &Gateway,
    jobs: &Jobs,
    caller: &Caller,
    ask: Ask,
    headers: &HeaderMap,
) -> Result<Response, GatewayError> {
    let (mut new, deployment) = prepare(gateway, jobs, caller, ask).await?;
    new.idempotency_key = sluice_recall::oplog::idempotency_key(headers).map_err(GatewayError::BadRequest)?;
    let (endpoint, body) = (new.endpoint, new.body.clone());
    let submitted = jobs.store.submit(new).await.map_err(store_failed("submit"))?;
    let job = submitted.job;
    if !submitted.created && (job.endpoint != endpoint || job.body != body) {
        return Err(GatewayError::IdempotencyKeyReused);
    }
    let status = if submitted.created {
        gateway.services.metrics.jobs.submitted.inc();
        jobs.wake.notify_one();
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    let eta = jobs.eta_secs(gateway, deployment).await;
    if submitted.created {
        jobs.gave_eta(&job.id, gateway.services.clock.now(), Duration::from_secs(eta));
    }
    let body = json!({"status": api_status(job.state), "job_id": job.id.as_str(), "eta_sec": eta});
    let mut response = (status, axum::Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Validates a job's request as its endpoint would (body, stream, model, class, a request
/// that can never fit) and builds the job (no idempotency key), with the index of the
/// deployment its model runs on.
pub(crate) async fn prepare(
    gateway: &Gateway,
    jobs: &Jobs,
    caller: &Caller,
    ask: Ask,
) -> Result<(NewJob, usize), GatewayError> {
    let parsed = parse_request(protocol(ask.endpoint), &ask.body).map_err(GatewayError::BadRequest)?;
    if parsed.stream {
        return Err(bad(
            "stream",
            RequestErrorCode::InvalidValue,
            "streaming requests cannot run as async jobs; send `stream: false` or call the endpoint directly",
        ));
    }
    // A key restricted to some profiles is told the others do not exist.
    let profile = gateway
        .profiles
        .get(parsed.model.as_str())
        .filter(|_| caller.may_name(&parsed.model))
        .ok_or(GatewayError::UnknownModel(parsed.model.clone()))?;
    let anthropic = gateway.deployments[profile.deployment].target.kind == ProviderKind::Anthropic;
    if anthropic != (ask.endpoint == Endpoint::Messages) {
        let endpoint = if anthropic { "/v1/messages" } else { "/v1/chat/completions" };
        return Err(GatewayError::WrongEndpoint { model: parsed.model.clone(), endpoint });
    }
    let named =
        match ask.class.as_deref() {
            None => None,
            Some(name) => Some(jobs.class(name).ok_or_else(|| {
                bad("class", RequestErrorCode::InvalidValue, format!("no traffic class named `{name}`"))
            })?),
        };
    let class = named.as_ref().unwrap_or(&caller.class);
    let priority = allowed(caller, class, ask.priority)?;
    never_fits(gateway, caller, &parsed, profile).await?;
    let new = NewJob {
        id: JobId::random(),
        tenant: caller.tenant.to_string(),
        key_id: caller.key_id.to_string(),
        idempotency_key: None,
        endpoint: ask.endpoint,
        body: String::from_utf8_lossy(&ask.body).into_owned(),
        class: class.name.to_string(),
        priority,
        max_attempts: class.max_attempts,
    };
    Ok((new, profile.deployment))
}

/// The job priority `class` and `priority` give a job of `caller`, if its key may ask for
/// them: its own class or a less urgent one (a higher or equal `priority` number), and a
/// priority no more urgent than that class's own. Job priority orders the ready queue
/// across classes, so a more urgent number would jump ahead of more urgent classes.
fn allowed(caller: &Caller, class: &TrafficClass, priority: Option<u8>) -> Result<u8, GatewayError> {
    if !may_use(caller, class) {
        let message = format!(
            "class `{}` is more urgent than this key's class `{}` allows; use that class or a less urgent one",
            class.name, caller.class.name
        );
        return Err(GatewayError::ClassNotAllowed { param: "class", message });
    }
    match priority {
        Some(p) if p < class.priority => {
            let message = format!(
                "priority {p} is more urgent than class `{}` allows (its priority {} or more)",
                class.name, class.priority
            );
            Err(GatewayError::ClassNotAllowed { param: "priority", message })
        }
        Some(p) => Ok(p),
        None => Ok(class.priority),
    }
}

/// Whether a key of `caller` may run jobs in `class` (its own or a less urgent one).
pub(crate) fn may_use(caller: &Caller, class: &TrafficClass) -> bool {
    class.priority >= caller.class.priority
}

/// The 400 the live endpoint would answer at once for a request that can never fit on its
/// model's deployment. Simple work may run on the degradation target instead, so a
/// profile with one refuses only what fits on neither.
async fn never_fits(
    gateway: &Gateway,
    caller: &Caller,
    request: &ParsedRequest,
    profile: &Profile,
) -> Result<(), GatewayError> {
    let Err(refused) = check_fits(gateway, caller, request, profile, profile.deployment).await else { return Ok(()) };
    match &profile.degrade {
        Some(degrade) if check_fits(gateway, caller, request, profile, degrade.deployment).await.is_ok() => Ok(()),
        _ => Err(refused),
    }
}

/// The status clients see: a job waiting for a retry is still `queued`.
fn api_status(state: JobState) -> &'static str {
    match state {
        JobState::Queued | JobState::Delayed => "queued",
        other => other.as_str(),
    }
}

/// `GET /v1/jobs/{id}`.
pub async fn poll(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let trace = Trace::from_headers(&headers);
    let result = async {
        let (_, jobs, caller) = context(&state, &headers)?;
        let id = JobId::parse(&id).ok_or(GatewayError::NotFound(Stored::Job))?;
        let job = jobs.store.get(&id).await.map_err(store_failed("get"))?;
        // Another tenant's job is reported exactly like a missing one.
        let job = job.filter(|j| *j.tenant == *caller.tenant).ok_or(GatewayError::NotFound(Stored::Job))?;
        Ok::<_, GatewayError>(axum::Json(view(&job)).into_response())
    }
    .await;
    result.unwrap_or_else(|refusal| refuse(refusal, &trace))
}

/// A job as its owner sees it.
fn view(job: &Job) -> Value {
    let mut out = json!({
        "job_id": job.id.as_str(),
        "object": "job",
        "status": api_status(job.state),
        "endpoint": job.endpoint.path(),
        "class": job.class,
        "priority": job.priority,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "reruns": job.reruns,
    });
    if let (Some(result), Value::Object(map)) = (&job.result, &mut out) {
        let body = serde_json::from_str(&result.body).unwrap_or_else(|_| Value::String(result.body.clone()));
        map.insert("result".into(), json!({"status": result.status, "body": body}));
    }
    if let (Some(error), Value::Object(map)) = (&job.error, &mut out) {
        map.insert("error".into(), Value::String(error.clone()));
    }
    out
}

fn classes_of(config: &Config) -> HashMap<Arc<str>, TrafficClass> {
    config.classes.iter().map(|c| (c.name.clone(), c.clone())).collect()
}

#[cfg(test)]
mod list_tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn limit_defaults_and_refuses_out_of_range() {
        assert_eq!(list_limit(&query(&[]), 20, 100), Ok(20));
        assert_eq!(list_limit(&query(&[("limit", "100")]), 20, 100), Ok(100));
        let refused = Err("limit must be between 1 and 10000".to_owned());
        for bad in ["0", "10001", "x"] {
            assert_eq!(list_limit(&query(&[("limit", bad)]), 10_000, 10_000), refused);
        }
    }

    #[test]
    fn a_page_skips_through_after_and_says_whether_more_follow() {
        let ids = ["c", "b", "a"];
        let q = query(&[("after", "c")]);
        let skip = list_skip(&q, ids.iter().copied());
        assert_eq!(skip, 1);
        assert_eq!(list_skip(&query(&[("after", "zz")]), ids.iter().copied()), 0);
        let page = list_page(vec![json!({"id": "b"})], ids.len(), skip);
        assert_eq!(
            page,
            json!({"object": "list", "data": [{"id": "b"}], "first_id": "b", "last_id": "b", "has_more": true})
        );
    }
}
