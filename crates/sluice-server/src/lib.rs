//! The sluice HTTP gateway: OpenAI- and Anthropic-compatible endpoints that decide
//! *before sending* whether each request may go.
//!
//! Layout: [`app`] builds the router over a shared [`Gateway`] ([`state`]), [`serve`]
//! (over [`sluice_listener`], which serves the connections)
//! runs it on a bound listener until shutdown; `road/` is the life of a proxied
//! request, a driver (`road/mod.rs`: accept → loop { plan → admit → send → answer } →
//! settle) over one file per step, none importing another, and `error` is the one place
//! failures become HTTP responses.
//!
//! Failure semantics: every reservation is settled exactly once (by the handler, the
//! stream relay, or the drop guard) or expires by its lease; a request that cannot be
//! admitted is refused before anything is sent.

mod access;
mod admin_plane;
mod auth;
mod bedrock;
pub mod binding;
pub mod budget_warnings;
pub mod budgets;
mod catalog;
mod crossing;
mod deadline;
pub mod error;
mod google_api;
pub mod inventory;
pub mod jobs;
pub mod keys;
pub mod limits_json;
mod metered;
pub mod metrics;
mod passthrough;
pub mod pool;
pub mod ratelimit_headers;
mod responses_api;
mod road;
mod served;
pub mod shares;
mod spans;
pub mod spend;
pub mod state;
mod streams;
pub mod telemetry;
pub mod tenancy;
pub mod timing;
pub mod trace;
pub mod usage;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sluice_listener::{connections, tls};
use sluice_provider::Protocol;

pub use road::read_body;
pub use sluice_upstream::SecretError;
pub use state::{BuildError, Gateway};
pub use streams::StreamCut;

/// The router's shared state: one allocation, so that the clones axum makes of it for
/// every request's layers and handler cost one reference count, not one per field.
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The gateway.
    pub gateway: Arc<Gateway>,
    /// Set once shutdown begins; readiness turns false.
    pub draining: Arc<AtomicBool>,
    /// Every metric the process exports on `/metrics`.
    pub registry: Arc<prometheus_client::registry::Registry>,
    /// Async jobs, when a job store is configured.
    pub jobs: Option<Arc<jobs::Jobs>>,
    /// The configured scopes and classes (the gauges', readiness's and the operator
    /// surface's view of them).
    pub admin: Arc<inventory::Admin>,
    /// Routes mounted beside the gateway's own ([`AppState::with_surface`]).
    pub surfaces: Vec<Arc<dyn Surface>>,
    /// Serves HTTPS when set (`[server] tls_cert` / `tls_key`).
    pub tls: Option<tls::Tls>,
    /// The gateway in force: swapped whole by [`AppState::reload`]. `gateway` is the one
    /// built at start; handlers read [`AppState::current`].
    pub live: Arc<arc_swap::ArcSwap<Gateway>>,
    /// The caps on open client connections (`[server] max_connections`, per peer).
    pub caps: connections::Caps,
    /// Whether readiness needs the quota store to answer: a shared store that fails
    /// closed refuses every admission while it is away.
    pub ready_needs_store: bool,
    /// Where the admin plane is served (`[admin] listen`): on its own listener, or beside
    /// the API on the public one.
    pub admin_listen: sluice_config::AdminListen,
    /// SHA-256 of the bearer token `/metrics` asks for (`[admin] metrics_token_env` /
    /// `metrics_token_file`), read once at start.
    pub metrics_token: Option<[u8; 32]>,
}

impl AppState {
    /// Builds the gateway for `config` on `store`, with its metrics in a new registry.
    ///
    /// # Errors
    /// When a provider key is missing or the tokenizers fail to load.
    pub fn build(config: &sluice_config::Config, store: Arc<dyn sluice_quota::QuotaStore>) -> Result<Self, BuildError> {
        Self::build_with_clock(config, store, Arc::new(sluice_quota::SystemClock::new()))
    }

    /// [`AppState::build`] on a given clock.
    ///
    /// # Errors
    /// As [`AppState::build`].
    pub fn build_with_clock(
        config: &sluice_config::Config,
        store: Arc<dyn sluice_quota::QuotaStore>,
        clock: Arc<dyn sluice_quota::Clock>,
    ) -> Result<Self, BuildError> {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Arc::new(metrics::Metrics::register(&mut registry, config.metrics.legacy_aliases));
        let services = Arc::new(state::Services::new(config, store, clock, metrics)?);
        let gateway = Arc::new(Gateway::build(config, services)?);
        let admin = Arc::new(inventory::Admin::new(config, &gateway));
        let caps = connections::Caps::from_config(&config.server);
        caps.register(&mut registry);
        let metrics_token = config.admin.metrics_token.as_ref().map(admin_plane::read_token).transpose()?;
        Ok(Self(Arc::new(Shared {
            admin_listen: config.admin.listen,
            metrics_token,
            admin,
            live: Arc::new(arc_swap::ArcSwap::new(Arc::clone(&gateway))),
            gateway,
            draining: Arc::new(AtomicBool::new(false)),
            registry: Arc::new(registry),
            jobs: None,
            surfaces: Vec::new(),
            tls: None,
            caps,
            ready_needs_store: config.store.kind != sluice_config::StoreKind::Memory
                && config.store.on_unavailable == sluice_config::Unavailable::FailClosed,
        })))
    }

    /// The gateway in force (the latest good reload, else the one built at start).
    #[must_use]
    pub fn current(&self) -> Arc<Gateway> {
        self.live.load_full()
    }

    /// Replaces the policy with `config`'s, atomically: the new gateway is built aside on
    /// the old one's services (scopes re-registered on the shared store, buckets keep their
    /// fill fraction), keeps the queues and the learned adaptive state of deployments that
    /// kept their name, and is swapped in whole. Requests in flight finish on the gateway
    /// they started with. `[server]` and `[store]` are not applied (they need a restart).
    ///
    /// # Errors
    /// When a provider key is missing or the upstream CA file or proxy is unusable; the old
    /// gateway stays.
    pub fn reload(&self, config: &sluice_config::Config) -> Result<(), BuildError> {
        let old = self.current();
        let mut new = Gateway::build(config, Arc::clone(&old.services))?;
        // The admin inventory registers every scope with its configured limits; what the
        // adaptive controllers learned is applied on top of that, not overwritten by it.
        self.admin.reconfigure(config, &new);
        new.keep_learned(&old, config);
        // Runtime keys name tenants, teams and classes: resolved again against the new ones.
        new.services.runtime_keys.reresolve(new.tenancy());
        let new = Arc::new(new);
        self.live.store(Arc::clone(&new));
        if let Some(jobs) = &self.jobs {
            jobs.reconfigure(config);
        }
        Ok(())
    }

    /// Serves HTTPS when `config` names a certificate and key.
    ///
    /// # Errors
    /// When the files cannot be read or do not form a usable pair.
    pub fn with_tls(mut self, config: &sluice_config::Config) -> Result<Self, tls::TlsError> {
        if let Some((cert, key)) = &config.server.tls {
            Arc::make_mut(&mut self.0).tls = Some(tls::acceptor(cert, key)?);
        }
        Ok(self)
    }

    /// Exports request spans with `exporter` from now on (see [`telemetry`]); the returned
    /// handle exports what is queued at shutdown.
    pub fn export_traces<E>(&self, exporter: E) -> telemetry::Exporting
    where
        E: opentelemetry_sdk::trace::SpanExporter + 'static,
    {
        let (spans, exporting) = telemetry::spawn(exporter, self.gateway.services.metrics.spans_dropped.clone());
        let _ = self.gateway.services.spans.set(spans);
        exporting
    }

    /// Mounts `surface`'s routes beside the gateway's own (see [`Surface`]).
    #[must_use]
    pub fn with_surface(mut self, surface: Arc<dyn Surface>) -> Self {
        Arc::make_mut(&mut self.0).surfaces.push(surface);
        self
    }

    /// Enables async jobs on `store` with the settings and classes of `config`.
    #[must_use]
    pub fn with_jobs(mut self, store: Arc<dyn sluice_jobs::JobStore>, config: &sluice_config::Config) -> Self {
        let jobs = Arc::new(jobs::Jobs::new(store, config, Arc::clone(&self.gateway.services.clock)));
        Arc::make_mut(&mut self.0).jobs = Some(jobs);
        self
    }
}

/// Routes served beside the gateway's own: the operator surface (the admin API and
/// dashboard of `sluice-admin`), which sits above this crate and is mounted by whoever
/// builds the [`AppState`] ([`AppState::with_surface`]). [`admin_app`] (or [`app`], with
/// the admin plane shared) merges each one's routes before the fallback; what a surface keeps for the life of the process (sessions, a
/// throttle) it keeps itself, as `router` may be called once per serving thread.
pub trait Surface: std::fmt::Debug + Send + Sync {
    /// The surface's routes over `state`.
    fn router(&self, state: &AppState) -> Router<AppState>;
}

/// Vertex AI's publisher model paths (`{action}` is `{model}:{method}`), v1 and v1beta1.
const VERTEX_PUBLISHER_V1: &str = "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{action}";
const VERTEX_PUBLISHER_V1BETA1: &str =
    "/v1beta1/projects/{project}/locations/{location}/publishers/{publisher}/models/{action}";

/// What the public listener serves: the API, and with `[admin] listen = "shared"` the
/// admin plane beside it ([`admin_app`]); apart, the admin paths answer 404
/// `unknown_route` here like any path the gateway does not serve.
pub fn app(state: AppState) -> Router {
    let admin = match state.admin_listen {
        sluice_config::AdminListen::Shared => admin_plane::routes(&state),
        sluice_config::AdminListen::Apart(_) => Router::new(),
    };
    // The fallbacks after the merge: a method fallback reaches only the routes there when
    // it is set, and the shared admin routes must answer a wrong method as the API does.
    api()
        .merge(admin)
        .fallback(catalog::unknown_route)
        .method_not_allowed_fallback(catalog::method_not_allowed)
        .with_state(state)
}

/// What the admin listener serves (`[admin] listen`): `/metrics` (behind the metrics
/// token when one is set) and every mounted [`Surface`] (`/admin/*`, `/dashboard`); any
/// other path answers 404 `unknown_route`.
pub fn admin_app(state: AppState) -> Router {
    admin_plane::routes(&state)
        .fallback(catalog::unknown_route)
        .method_not_allowed_fallback(catalog::method_not_allowed)
        .with_state(state)
}

/// The API: the proxied endpoints, the catalog, jobs, files, batches and the probes.
fn api() -> Router<AppState> {
    // The proxied endpoints authenticate once, before their bodies, in
    // `ratelimit_headers::around`, which also gives them the caller's rate-limit headers.
    let path = road::endpoint_path;
    Router::new()
        .route(path(Protocol::OpenAiChat), post(chat))
        .route(path(Protocol::OpenAiResponses), post(responses))
        .route("/v1/responses/input_tokens", post(responses_api::input_tokens))
        .route("/v1/responses/{id}", get(responses_api::retrieve).delete(responses_api::delete))
        .route("/v1/responses/{id}/cancel", post(responses_api::cancel))
        .route("/v1/responses/{id}/input_items", get(responses_api::input_items))
        .route(path(Protocol::OpenAiEmbeddings), post(embeddings))
        .route(path(Protocol::OpenAiCompletions), post(completions))
        .route(path(Protocol::AnthropicMessages), post(messages))
        // Azure OpenAI's client shapes: the deployment in the path names a model profile.
        .route("/openai/deployments/{deployment}/chat/completions", post(azure_chat))
        .route("/openai/v1/chat/completions", post(chat))
        // Azure's v1 surface serves embeddings beside chat, the deployment in the body's
        // `model` (<https://learn.microsoft.com/en-us/azure/ai-services/openai/api-version-lifecycle>).
        .route("/openai/v1/embeddings", post(embeddings))
        .route("/openai/deployments/{deployment}/embeddings", post(azure_embeddings))
        .route("/openai/deployments/{deployment}/completions", post(azure_completions))
        .route("/openai/deployments/{deployment}/responses", post(azure_responses))
        // The AzureOpenAI client's Responses path (no deployment in it: `model` names the
        // profile), classic and v1.
        .route("/openai/responses", post(responses))
        .route("/openai/v1/responses", post(responses))
        // Bedrock runtime clients (boto3 `bedrock-runtime`): `modelId` names the profile.
        .route("/model/{model}/{operation}", post(bedrock::runtime))
        .route("/v1/messages/count_tokens", post(catalog::count_tokens))
        .route("/v1/models", get(models_list))
        .route("/v1/models/{*model}", get(models_get))
        // Google's client shapes (Gemini API, Vertex AI publisher models): see `google_api`.
        .route("/v1/models/{*model}", post(google_api::models))
        .route("/v1beta/models", get(google_api::list_models))
        .route("/v1beta/models/{*model}", post(google_api::models).get(google_api::get_model))
        .route(VERTEX_PUBLISHER_V1, post(google_api::publisher))
        .route(VERTEX_PUBLISHER_V1BETA1, post(google_api::publisher))
        .route("/v1/publishers/{publisher}/models/{action}", post(google_api::publisher))
        .route("/v1beta1/publishers/{publisher}/models/{action}", post(google_api::publisher))
        .route("/v1/jobs", post(jobs::submit))
        .route("/v1/jobs/{id}", get(jobs::poll))
        // Uploads are bounded by `[jobs] max_file_bytes` in the handler, not axum's default.
        .route("/v1/files", post(jobs::files::upload).get(jobs::files::list).layer(DefaultBodyLimit::disable()))
        .route("/v1/files/{id}", get(jobs::files::get).delete(jobs::files::delete))
        .route("/v1/files/{id}/content", get(jobs::files::download))
        .route("/v1/batches", post(jobs::batches::create).get(jobs::batches::list))
        .route("/v1/batches/{id}", get(jobs::batches::get))
        .route("/v1/batches/{id}/cancel", post(jobs::batches::cancel))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
}

/// A proxied endpoint's request: its caller authenticated and its rate-limit headers
/// added ([`ratelimit_headers::around`]); submitted as an async job when the client prefers
/// that and the endpoint takes jobs (`job`), else served on the request's road.
async fn proxied(
    state: &AppState,
    protocol: Protocol,
    job: Option<sluice_jobs::Endpoint>,
    request: Request,
) -> Response {
    ratelimit_headers::around(state, protocol, request, |request| async move {
        if let Some(endpoint) = job.filter(|_| jobs::prefers_async(request.headers())) {
            return jobs::submit_inline(state.clone(), endpoint, request).await;
        }
        road::handle(state.current(), protocol, request).await
    })
    .await
}

/// `GET /v1/models`: OpenAI's or Anthropic's model list, or Gemini's for a Google client
/// (google-genai asks on `/v1` as well as `/v1beta`).
async fn models_list(state: State<AppState>, query: axum::extract::RawQuery, request: Request) -> Response {
    if google_api::from_google(request.headers(), query.0.as_deref()) {
        return google_api::list_models(state, query, request).await;
    }
    catalog::list(state, request.headers().clone()).await
}

/// `GET /v1/models/{model}`: as [`models_list`], for one model.
async fn models_get(
    state: State<AppState>,
    name: axum::extract::Path<String>,
    query: axum::extract::RawQuery,
    request: Request,
) -> Response {
    if google_api::from_google(request.headers(), query.0.as_deref()) {
        return google_api::get_model(state, name, query, request).await;
    }
    catalog::get(state, request.headers().clone(), name).await
}

async fn chat(State(state): State<AppState>, request: Request) -> Response {
    proxied(&state, Protocol::OpenAiChat, Some(sluice_jobs::Endpoint::ChatCompletions), request).await
}

async fn responses(State(state): State<AppState>, request: Request) -> Response {
    proxied(&state, Protocol::OpenAiResponses, None, request).await
}

async fn completions(State(state): State<AppState>, request: Request) -> Response {
    proxied(&state, Protocol::OpenAiCompletions, None, request).await
}

async fn embeddings(State(state): State<AppState>, request: Request) -> Response {
    proxied(&state, Protocol::OpenAiEmbeddings, None, request).await
}

/// `POST /openai/deployments/{deployment}/chat/completions?api-version=…`: Azure OpenAI's
/// classic path; `deployment` names the model profile (the body's `model` is replaced, as
/// Azure ignores it), `api-version` is accepted and not needed.
async fn azure_chat(
    State(state): State<AppState>,
    axum::extract::Path(deployment): axum::extract::Path<String>,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(road::ModelFromPath(deployment));
    chat(State(state), request).await
}

/// `POST /openai/deployments/{deployment}/embeddings`: as [`azure_chat`], for embeddings.
async fn azure_embeddings(
    State(state): State<AppState>,
    axum::extract::Path(deployment): axum::extract::Path<String>,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(road::ModelFromPath(deployment));
    embeddings(State(state), request).await
}

/// `POST /openai/deployments/{deployment}/completions`: as [`azure_chat`], for legacy
/// completions.
async fn azure_completions(
    State(state): State<AppState>,
    axum::extract::Path(deployment): axum::extract::Path<String>,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(road::ModelFromPath(deployment));
    completions(State(state), request).await
}

/// `POST /openai/deployments/{deployment}/responses`: the path an `AzureOpenAI` client
/// built with `azure_deployment` sends Responses to; as [`azure_chat`].
async fn azure_responses(
    State(state): State<AppState>,
    axum::extract::Path(deployment): axum::extract::Path<String>,
    mut request: Request,
) -> Response {
    request.extensions_mut().insert(road::ModelFromPath(deployment));
    responses(State(state), request).await
}

async fn messages(State(state): State<AppState>, request: Request) -> Response {
    proxied(&state, Protocol::AnthropicMessages, Some(sluice_jobs::Endpoint::Messages), request).await
}

pub(crate) async fn metrics_text(State(state): State<AppState>, headers: http::HeaderMap) -> Response {
    if !admin_plane::metrics_allowed(&state, &headers) {
        return admin_plane::metrics_refused(&headers);
    }
    let gateway = state.current();
    gateway.services.metrics.observe_store(gateway.services.store.health());
    state.admin.observe(&gateway).await;
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &state.registry).is_err() {
        return error::metrics_unwritable();
    }
    ([(http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

async fn ready(State(state): State<AppState>) -> Response {
    if state.draining.load(Ordering::Relaxed) {
        return error::not_ready("draining");
    }
    if state.ready_needs_store && !store_answers(&state).await {
        let why = "quota store unreachable: admission is refused (fail_closed) until it is back";
        return error::not_ready(why);
    }
    match state.current().services.runtime_keys.store_reset_at_ms() {
        // Still ready: the keys were read again. The operator should know the store forgot.
        Some(at) => {
            format!("ready\njob store lost its data at unix ms {at}: runtime keys were read again").into_response()
        }
        None => "ready".into_response(),
    }
}

/// Whether the quota store answers a read now (bounded by `[store] timeout`). Asked on
/// every probe rather than read from the store's health, which learns of an outage and a
/// recovery only from admissions: a load balancer that routed away would send none.
async fn store_answers(state: &AppState) -> bool {
    let policy = state.admin.policy();
    let Some(entry) = policy.inventory.entries.first() else { return true };
    state.current().services.store.snapshot(entry.id).await.is_ok()
}

/// Lets shrunk limits recover on deployments without traffic (adaptive recovery is
/// otherwise applied on the next admission or response).
async fn recover_idle(state: AppState) {
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        for route in &state.current().deployments {
            route.adaptive.poll().await;
        }
    }
}

/// Serves `state` on `listener` until `shutdown` resolves, then drains in-flight requests.
///
/// The connections are served by [`sluice_listener::serve`]: HTTP/1.1, and HTTP/2 (h2c
/// with prior knowledge on a plain listener, `h2` by ALPN over TLS; see
/// [`sluice_listener::http_version`]), with `TCP_NODELAY` on every accepted socket, a
/// [`sluice_listener::HEADER_READ_TIMEOUT`] per request head (HTTP/1.1; for the first bytes
/// of any connection), heads of at most [`sluice_listener::MAX_HEAD_BYTES`], and HTTP/2
/// connections closed once idle ([`sluice_listener::idle`]); a socket past the connection
/// caps ([`connections::Caps`]) is closed at once. On shutdown it stops accepting,
/// marks the state draining (readiness turns false), lets every connection finish the
/// request it is serving, and returns once all connections are closed and the background
/// work they left (remote settlements, breaker pauses) is done.
///
/// # Errors
/// None today: accept failures (e.g. out of file descriptors) are logged and retried.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let draining = Arc::clone(&state.draining);
    let background = state.gateway.services.background.clone();
    let tls = state.tls.clone();
    let recovery = tokio::spawn(recover_idle(state.clone()));
    let caps = state.caps.clone();
    let live = Arc::clone(&state.live);
    // The body deadline in force when a request comes (a reload may change it).
    let pace = move || live.load().body_pace;
    let shutdown = async move {
        shutdown.await;
        draining.store(true, Ordering::Relaxed);
    };
    sluice_listener::serve(listener, app(state), sluice_listener::Options { tls, caps, pace }, shutdown).await;
    // Then the work requests left behind (settlements on a remote store, breaker pauses),
    // so that no reservation is left to its lease by a clean shutdown.
    background.close();
    background.wait().await;
    recovery.abort();
    // Waited for, so that when `serve` returns nothing of it holds the state any more.
    let _ = recovery.await;
    Ok(())
}

/// Serves the admin plane ([`admin_app`]) on `listener` until `shutdown` resolves, then
/// lets its connections finish what they are serving: the same connection handling as
/// [`serve`] (TLS when configured, the connection caps, the head and body deadlines).
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let tls = state.tls.clone();
    let caps = state.caps.clone();
    let live = Arc::clone(&state.live);
    let pace = move || live.load().body_pace;
    sluice_listener::serve(listener, admin_app(state), sluice_listener::Options { tls, caps, pace }, shutdown).await;
}

/// How long connections get to deliver the error event of their cut streams before
/// [`serve_with_grace`] stops waiting for them.
const CUT_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

/// [`serve`] with a bounded drain: once `shutdown` resolves, in-flight requests get
/// `grace` to finish (`[server] shutdown_grace`); then every stream still running ends with
/// its protocol's explicit error event, and the connections get a moment to deliver it
/// before the rest are given up.
///
/// # Errors
/// As [`serve`].
pub async fn serve_with_grace(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: std::time::Duration,
) -> std::io::Result<()> {
    // Reloaded gateways share the first one's services, and so its cut.
    let streams = state.gateway.services.streams.clone();
    let (began, begun) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        shutdown.await;
        let _ = began.send(());
    };
    let mut served = std::pin::pin!(serve(listener, state, shutdown));
    let over = async {
        if begun.await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = &mut served => return result,
        () = over => {}
    }
    tracing::warn!(?grace, "shutdown grace period over; ending the streams still running");
    streams.cut();
    match tokio::time::timeout(CUT_FLUSH, served).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("closing the connections still open");
            Ok(())
        }
    }
}

/// A gateway serving in the background on a bound address; for embedding and tests.
#[derive(Debug)]
pub struct Running {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    admin: Option<AdminRunning>,
    state: AppState,
}

/// The admin listener of a [`Running`] gateway.
#[derive(Debug)]
struct AdminRunning {
    addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Builds a gateway for `config` on `store` and serves it on `listen` (port 0: a free
    /// port), with the configuration's shutdown grace.
    ///
    /// # Errors
    /// When a provider key is missing or the address cannot be bound.
    pub async fn start(
        config: &sluice_config::Config,
        store: Arc<dyn sluice_quota::QuotaStore>,
        listen: std::net::SocketAddr,
    ) -> Result<Self, StartError> {
        Self::start_with_clock(config, store, Arc::new(sluice_quota::SystemClock::new()), listen).await
    }

    /// [`Running::start`] on `clock` (a fake clock in tests: every admission decision, queue
    /// deadline and retry hint reads it).
    ///
    /// # Errors
    /// When a provider key is missing or the address cannot be bound.
    pub async fn start_with_clock(
        config: &sluice_config::Config,
        store: Arc<dyn sluice_quota::QuotaStore>,
        clock: Arc<dyn sluice_quota::Clock>,
        listen: std::net::SocketAddr,
    ) -> Result<Self, StartError> {
        let state = AppState::build_with_clock(config, store, clock)?.with_tls(config)?;
        Self::start_state(state, listen, config.server.shutdown_grace).await
    }

    /// Serves `state` as built by the caller (with its surfaces mounted: see
    /// [`AppState::with_surface`]) on `listen` (port 0: a free port), with shutdown grace
    /// `grace`. With the admin plane apart (`[admin] listen` an address) it is served on
    /// a second listener at a free port of `listen`'s address ([`Running::admin_url`]):
    /// like `listen`, the configured address is the caller's to choose, and tests run side
    /// by side.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start_state(
        state: AppState,
        listen: std::net::SocketAddr,
        grace: std::time::Duration,
    ) -> Result<Self, StartError> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let admin = match state.admin_listen {
            sluice_config::AdminListen::Shared => None,
            sluice_config::AdminListen::Apart(_) => {
                let listener = tokio::net::TcpListener::bind(std::net::SocketAddr::new(listen.ip(), 0)).await?;
                let addr = listener.local_addr()?;
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let stopped = async {
                    let _ = stopped.await;
                };
                let task = tokio::spawn(serve_admin(listener, state.clone(), stopped));
                Some(AdminRunning { addr, stop, task })
            }
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let stopped = async {
            let _ = stopped.await;
        };
        let task = tokio::spawn(serve_with_grace(listener, state.clone(), stopped, grace));
        Ok(Self { addr, stop: Some(stop), task, admin, state })
    }

    /// The bound address.
    #[must_use]
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `http://ADDR`, or `https://ADDR` when serving TLS.
    #[must_use]
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// The admin plane's URL: the admin listener's, or [`Running::url`] when shared.
    #[must_use]
    pub fn admin_url(&self) -> String {
        let addr = self.admin.as_ref().map_or(self.addr, |admin| admin.addr);
        format!("{}://{addr}", self.scheme())
    }

    fn scheme(&self) -> &'static str {
        if self.state.tls.is_some() { "https" } else { "http" }
    }

    /// The shared state (gateway and store).
    #[must_use]
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Stops accepting, drains in-flight requests (streams still running at the end of the
    /// grace are ended with their error event), and waits for the server to end; then
    /// stops the admin listener.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
        if let Some(admin) = self.admin.take() {
            let _ = admin.stop.send(());
            let _ = admin.task.await;
        }
    }
}

/// Why an in-process gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration could not be turned into a gateway.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The socket could not be bound.
    #[error("binding: {0}")]
    Io(#[from] std::io::Error),
    /// The TLS certificate or key could not be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}
