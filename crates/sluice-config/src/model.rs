//! The validated configuration: references resolved to indices, limits typed.

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::Limits;

use crate::allowed::Allowed;

/// Which wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// OpenAI's API (also Azure OpenAI's v1 surface, Gemini's and Ollama's OpenAI-compatible endpoints).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// An Ollama server's OpenAI-compatible endpoint (no key, concurrency-limited).
    Ollama,
}

/// How a provider charges output tokens against its limits at admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputCounting {
    /// The whole `max_tokens` counts when the request arrives (OpenAI, Azure).
    Reserved,
    /// Only generated tokens count (current Anthropic OTPM).
    Actual,
}

/// How input tokens are estimated before sending.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tokenizer {
    /// Choose from the provider model name.
    Auto,
    /// OpenAI o200k_base.
    O200k,
    /// OpenAI cl100k_base.
    Cl100k,
    /// Characters per token.
    Approx(f64),
}

/// Where a provider's key comes from. The key itself never enters the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An environment variable.
    Env(String),
    /// A file whose trimmed content is the key.
    File(String),
    /// A file holding a bearer token (an Entra ID access token) that an external agent
    /// refreshes: re-read when it changes.
    TokenFile(String),
    /// A Google service-account key file (JSON): OAuth access tokens are minted from it.
    ServiceAccount(String),
    /// No key (a local model server).
    None,
    /// AWS credentials for SigV4: from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    /// `AWS_SESSION_TOKEN`, or (when set) from a credentials file re-read when it changes.
    Aws {
        /// An AWS shared credentials file (its `[default]` profile).
        file: Option<String>,
    },
}

/// A provider account.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Its configured name.
    pub name: Arc<str>,
    /// Its protocol.
    pub kind: ProviderKind,
    /// Base URL without the `/v1/...` path.
    pub base_url: String,
    /// Where the key is.
    pub api_key: SecretSource,
    /// How its upstream URLs are built and its key is presented.
    pub api: ProviderApi,
    /// CA certificates (PEM) trusted for this provider's HTTPS beside the system's and
    /// `[server] upstream_ca_file`'s: a private model gateway's own CA.
    pub ca_file: Option<std::path::PathBuf>,
}

/// How a provider's upstream is addressed and authenticated beyond its wire protocol (the
/// configuration side of the provider seam).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderApi {
    /// `{base_url}/v1/…` with a Bearer key (Anthropic: `x-api-key`): OpenAI, Anthropic, Ollama.
    Plain,
    /// Gemini's OpenAI-compatible surface: `{base_url}/v1beta/openai/…`, Bearer key.
    GeminiOpenAi,
    /// Azure OpenAI: the `api-key` header (or a bearer token from a token file).
    Azure(AzureSurface),
    /// Gemini's native API: `{base_url}/v1beta/models/{model}:generateContent` (and
    /// `:streamGenerateContent?alt=sse`), the key in `x-goog-api-key`.
    GeminiNative,
    /// Vertex AI: `{base_url}/v1/projects/{project}/locations/{region}/publishers/{google |
    /// anthropic}/models/{model}:{verb}`, an OAuth access token as Bearer.
    Vertex(VertexLocation),
    /// AWS Bedrock in `region`, SigV4-signed: `{base_url}/model/{model}/converse` (or
    /// `/invoke` for Anthropic models on InvokeModel).
    Bedrock {
        /// The AWS region the requests are signed for (e.g. `us-east-1`).
        region: String,
        /// Which of Bedrock's runtime APIs the provider is called on.
        surface: BedrockSurface,
    },
}

/// Where a Vertex AI provider's models are served: one project's quota in one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexLocation {
    /// The Google Cloud project id.
    pub project: String,
    /// The region (`us-central1`, `europe-west4`, or `global`).
    pub region: String,
}

/// Which of Bedrock's runtime APIs a provider is called on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BedrockSurface {
    /// Converse and ConverseStream: one shape for every model.
    Converse,
    /// InvokeModel and InvokeModelWithResponseStream with Anthropic's own body
    /// (`anthropic_version: bedrock-2023-05-31`): Anthropic models only.
    InvokeModel,
}

/// Which of Azure OpenAI's URL surfaces a provider is called on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AzureSurface {
    /// `{base_url}/openai/deployments/{azure_deployment}/…?api-version={api_version}`.
    Classic {
        /// The `api-version` query parameter.
        api_version: String,
    },
    /// `{base_url}/openai/v1/…` (no `api-version`; the deployment is the body's `model`).
    V1,
}

/// A provider account: one quota (one Azure resource, one Bedrock account-region, one
/// Vertex project's regional quota) that every deployment naming it shares.
#[derive(Debug, Clone)]
pub struct Account {
    /// Its configured name.
    pub name: Arc<str>,
    /// The provider's limits for it (guarded, as a deployment's are).
    pub limits: Limits,
}

/// One upstream quota domain: a provider account × model (× region).
#[derive(Debug, Clone)]
pub struct Deployment {
    /// Its configured name.
    pub name: Arc<str>,
    /// What its tokens cost, when priced (`sluice_spend_total`).
    pub price: Option<Price>,
    /// Index into [`Config::providers`].
    pub provider: usize,
    /// The model name sent upstream.
    pub model: String,
    /// On an Azure provider, the deployment name in the classic URL (default: `model`).
    pub azure_deployment: Option<String>,
    /// The provider's limits for it.
    pub limits: Limits,
    /// Index into [`Config::accounts`]: the provider account whose quota it shares.
    pub account: Option<usize>,
    /// How many tokens of the deployment's TPM one output token burns (Bedrock: 5 for
    /// Claude 3.7 and later; 1 elsewhere), at admission and at settlement.
    pub output_weight: u64,
    /// Input estimation.
    pub tokenizer: Tokenizer,
    /// Factor ≥ 1 applied to the input estimate.
    pub input_safety_factor: f64,
    /// Output charging rule.
    pub output_counting: OutputCounting,
    /// Longest one attempt may take: to the response headers, and for a non-stream answer
    /// to its last byte (a hung or stalled provider is retried).
    pub attempt_timeout: Duration,
    /// Longest silence between two pieces of a streamed answer (before the first one too):
    /// past it the stream ends with the protocol's error event.
    pub stream_idle_timeout: Duration,
    /// How long a stream whose client left is still read from the provider, so that its
    /// final usage settles the request (zero: closed at once, settled on what was counted).
    pub stream_drain_timeout: Duration,
    /// Consecutive failures that open the breaker.
    pub breaker_failures: u32,
    /// How long an open breaker holds the deployment back (at least; provider hints win).
    pub breaker_cooldown: Duration,
    /// Adaptive limits: learning from the provider, estimating output and cache hits.
    pub adaptive: Adaptive,
    /// Where it runs (`region`), for callers limited to regions.
    pub region: Option<Arc<str>>,
    /// Free labels (`labels`), for callers limited to labelled deployments.
    pub labels: Vec<Arc<str>>,
    /// The most tokens one request may hold (input plus output), when stated
    /// (`context_window`): a request that does not fit is never sent here.
    pub context_window: Option<NonZeroU64>,
}

/// How output tokens are reserved at admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputEstimate {
    /// `max_tokens` (or the profile's default).
    #[default]
    Strict,
    /// min(`max_tokens`, p95 of the route's observed output), after `warmup` observations.
    P95 {
        /// Observations before the p95 is trusted.
        warmup: u64,
    },
}

/// A deployment's adaptive-limit settings (`docs/adaptive.md`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// Follow the limits the provider reports in its headers, up or down (else only log them).
    pub adopt_provider_limits: bool,
    /// Multiplier of the effective limit on an unexpected provider 429 (at most once a second).
    pub decrease: f64,
    /// Time for the effective limit to recover additively from 0 to 1.
    pub recovery: Duration,
    /// The lowest factor of the configured limit.
    pub min_factor: f64,
    /// Ramp-up guard: admitted rate may grow by this fraction of the limit per second.
    pub ramp_up: Option<f64>,
    /// Output reservation mode.
    pub output_estimate: OutputEstimate,
    /// Discount input reservations by the route's recent cache-hit ratio (Anthropic).
    pub cache_aware_input: bool,
    /// Learning the provider's short window from its 429s.
    pub window: WindowLearning,
}

/// How a deployment learns a provider window shorter than its burst (`docs/adaptive.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLearning {
    /// Learn at all (`learn_window`); off, every provider 429 lowers the rate instead.
    pub enabled: bool,
    /// The shortest window learned (`window_floor`).
    pub floor: Duration,
    /// How long a learned window is kept after the last short-window 429 (`window_hold`).
    pub hold: Duration,
    /// Time to grow back from the floor to the configured window (`window_regrow`).
    pub regrow: Duration,
}

/// What clients ask for by name.
#[derive(Debug, Clone)]
pub struct ModelProfile {
    /// The name clients put in `model`.
    pub name: Arc<str>,
    /// Index into [`Config::deployments`]: the one deployment, or the pool's first member
    /// of its lowest tier.
    pub deployment: usize,
    /// The deployments that serve the profile: one (`deployment = "…"`), or a pool
    /// (`deployments = [...]`), in the order configured.
    pub pool: Vec<Member>,
    /// How a request is placed among the pool's members that can admit it now.
    pub strategy: Placement,
    /// A request header naming the session a pool's request belongs to
    /// (`affinity_header`, lower case), beside `prompt_cache_key` and `user`: requests of
    /// one session prefer the member that served the last.
    pub affinity_header: Option<Arc<str>>,
    /// Output reservation when the client sends no `max_tokens`.
    pub default_max_tokens: u64,
    /// Input reserved for the context a Responses request continues from
    /// (`previous_response_id`, `conversation`), which the gateway cannot see.
    pub context_reserve_tokens: u64,
    /// The other OpenAI endpoints served for this profile (`passthrough`); any other is
    /// refused with a 404 `endpoint_not_served`.
    pub passthrough: Vec<Passthrough>,
    /// The profile's own limits (across all its callers).
    pub limits: Limits,
    /// Where to go when the primary cannot serve, in order.
    pub fallbacks: Vec<Fallback>,
    /// Where simple work goes when the primary has no capacity now.
    pub degrade_to: Option<Degrade>,
}

/// An OpenAI endpoint family beyond chat, Responses and embeddings that a model profile
/// may serve (`passthrough = [...]`): legacy completions are admitted on tokens, the others
/// as one request on the request limits and the deployment's concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Passthrough {
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/moderations`.
    Moderations,
    /// `/v1/images/*`.
    Images,
    /// `/v1/audio/*`.
    Audio,
    /// `/v1/fine_tuning/*`.
    FineTuning,
    /// `/v1/vector_stores/*`.
    VectorStores,
    /// `/v1/conversations/*`.
    Conversations,
    /// `/v1/uploads/*`.
    Uploads,
}

impl Passthrough {
    /// Every family, in the order the documentation lists them.
    pub const ALL: [Self; 8] = [
        Self::Completions,
        Self::Moderations,
        Self::Images,
        Self::Audio,
        Self::FineTuning,
        Self::VectorStores,
        Self::Conversations,
        Self::Uploads,
    ];

    /// What the configuration calls it; also the path segment after `/v1/`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Completions => "completions",
            Self::Moderations => "moderations",
            Self::Images => "images",
            Self::Audio => "audio",
            Self::FineTuning => "fine_tuning",
            Self::VectorStores => "vector_stores",
            Self::Conversations => "conversations",
            Self::Uploads => "uploads",
        }
    }

    /// The family of `name`, if it is one.
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// When a fallback may take over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum When {
    /// The primary answered 5xx (or 529) on every attempt the budget allowed.
    Provider5xx,
    /// The primary kept answering 429 until the retry budget ran out.
    RateLimitAfterRetryBudget,
    /// The prompt is too long for the primary (`context_length_exceeded`).
    ContextLengthNeeded,
    /// The primary cannot be reached or its breaker is open.
    PrimaryUnavailable,
    /// The request waited its class's whole `max_wait` for the primary.
    QueueWaitExceeded,
}

impl When {
    /// The reason label of this condition.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provider5xx => "provider_5xx",
            Self::RateLimitAfterRetryBudget => "rate_limit_after_retry_budget",
            Self::ContextLengthNeeded => "context_length_needed",
            Self::PrimaryUnavailable => "primary_unavailable",
            Self::QueueWaitExceeded => "queue_wait_exceeded",
        }
    }
}

/// A deployment in a model profile's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index into [`Config::deployments`].
    pub deployment: usize,
    /// Its share among the members of its tier under [`Placement::Weighted`] (1–1000).
    pub weight: u32,
    /// Lower tiers are used first: a member of tier 1 only when every member of tier 0 is
    /// saturated (provisioned throughput before pay-as-you-go, a cheaper region before a
    /// dearer one).
    pub tier: u8,
}

/// How a request is placed among the members of a pool that can admit it now (the
/// placement core's strategy, `sluice_quota::placement`).
pub use sluice_quota::placement::Strategy as Placement;

/// An ordered fallback of a model profile.
#[derive(Debug, Clone)]
pub struct Fallback {
    /// Index into [`Config::deployments`].
    pub deployment: usize,
    /// The conditions under which it takes over.
    pub when: Vec<When>,
}

/// Degradation of simple work to a cheaper or local deployment.
#[derive(Debug, Clone)]
pub struct Degrade {
    /// Index into [`Config::deployments`].
    pub deployment: usize,
    /// Classes that may be degraded (indexes into [`Config::classes`]).
    pub classes: Vec<usize>,
    /// Task names that may be degraded (from `x-sluice-task` or `metadata.task`).
    pub tasks: Vec<String>,
}

/// A tenant and its teams.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// Its name.
    pub name: Arc<str>,
    /// Its weight in fair sharing between tenants (default 1).
    pub weight: std::num::NonZeroU32,
    /// Its limits.
    pub limits: Limits,
    /// The deployments it may be served by (`regions`, `labels`), as written.
    pub allowed: Allowed,
    /// Its teams.
    pub teams: Vec<Team>,
}

/// A team inside a tenant.
#[derive(Debug, Clone)]
pub struct Team {
    /// Its name, unique in the tenant.
    pub name: Arc<str>,
    /// Its limits.
    pub limits: Limits,
    /// The deployments it may be served by, as written (its tenant's still apply).
    pub allowed: Allowed,
}

/// A gateway API key (a virtual key), known only by its SHA-256.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Public id, shown in errors and metrics (never the key).
    pub id: Arc<str>,
    /// SHA-256 of the key.
    pub sha256: [u8; 32],
    /// Index into [`Config::tenants`].
    pub tenant: usize,
    /// Index into the tenant's teams.
    pub team: Option<usize>,
    /// Index into [`Config::classes`].
    pub class: usize,
    /// The key's own limits.
    pub limits: Limits,
    /// The deployments it may be served by, as written (its tenant's and team's still
    /// apply: [`Config::allowed`]).
    pub allowed: Allowed,
}

/// A deployment's prices, per 1 M tokens, in the operator's currency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached input.
    pub input: f64,
    /// Input read from the provider's prompt cache (default: `input`).
    pub cached_input: f64,
    /// Output.
    pub output: f64,
    /// Reasoning tokens, where the provider reports them apart from the rest of the
    /// output (default: `output`, as the providers bill them).
    pub reasoning: f64,
}

/// `[pricing]`: what the price tables are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pricing {
    /// The currency every `price` is in (ISO 4217 code, e.g. `USD`); the presets apply
    /// only when it is `USD`.
    pub currency: Arc<str>,
}

/// `[usage]`: the daily usage rollups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageSettings {
    /// Days a daily rollup is kept before it is pruned.
    pub retention_days: u32,
    /// How often each instance writes what it counted to the store.
    pub flush_interval: Duration,
}

/// A traffic class.
#[derive(Debug, Clone)]
pub struct TrafficClass {
    /// Its name (e.g. `interactive`, `batch`).
    pub name: Arc<str>,
    /// The longest a request may wait for capacity before it is refused.
    pub max_wait: Duration,
    /// Lower is served first.
    pub priority: u8,
    /// The part of shared bursts this class may use, in thousandths: below 1000 it leaves
    /// headroom for higher classes.
    pub share_permille: u16,
    /// Most requests of this class waiting per deployment.
    pub max_queue: usize,
    /// Most attempts of an async job of this class before it goes to the dead letter.
    pub max_attempts: u32,
    /// Upstream attempts of one live request (first try included).
    pub retry_attempts: u32,
    /// Total time a live request may spend on retries.
    pub retry_within: Duration,
}

/// Async jobs: process settings, not reloadable.
#[derive(Debug, Clone)]
pub struct Jobs {
    /// The embedded job store's file (used when `[store]` is in memory).
    pub path: std::path::PathBuf,
    /// Workers per instance running jobs (0: this instance only accepts jobs).
    pub workers: usize,
    /// How long a leased job stays invisible to other workers without a heartbeat.
    pub visibility_timeout: Duration,
    /// Largest file accepted by `POST /v1/files`.
    pub max_file_bytes: usize,
    /// Bytes of stored files one tenant may keep; an upload beyond it is refused.
    pub max_tenant_file_bytes: u64,
    /// Most requests in one batch's input file.
    pub max_batch_lines: usize,
}

/// Process settings: not reloadable.
#[derive(Debug, Clone)]
pub struct Server {
    /// Listen address.
    pub listen: SocketAddr,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Upstream timeout: bounds every attempt as `attempt_timeout` does (the shorter wins).
    pub upstream_timeout: Duration,
    /// Upstream connect timeout.
    pub connect_timeout: Duration,
    /// How long a reservation lives if its call never reports back.
    pub lease: Duration,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace: Duration,
    /// TLS certificate chain and private key (PEM files), to serve HTTPS.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// CA certificates (PEM) trusted for upstream HTTPS beside the webpki roots.
    pub upstream_ca_file: Option<std::path::PathBuf>,
    /// `http://host:port` of a proxy for HTTPS upstreams (else `HTTPS_PROXY`).
    pub upstream_proxy: Option<String>,
    /// How long the operation log remembers a completed request (idempotency).
    pub idempotency_ttl: Duration,
    /// How long a repeat waits for the same operation in flight before a 409.
    pub idempotency_wait: Duration,
    /// How slow a client may send a request body.
    pub body: BodyPace,
    /// Most client connections open at once, per process.
    pub max_connections: NonZeroU64,
    /// Most client connections open at once from one peer address.
    pub max_connections_per_peer: NonZeroU64,
    /// The access log: one line per proxied request.
    pub access_log: AccessLog,
}

/// `[server] access_log` and `access_log_sample`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccessLog {
    /// Whether successful requests are logged at all (refusals and errors always are).
    pub enabled: bool,
    /// The share of successful requests logged, `0.0..=1.0`.
    pub sample: f64,
}

/// How slow a request body may arrive: within `timeout`, extended by one second for every
/// `min_rate` bytes received (a body that keeps up `min_rate` bytes per second on average
/// never runs out of time; one that trickles does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyPace {
    /// The deadline before any extension.
    pub timeout: Duration,
    /// Bytes per second that earn one more second each.
    pub min_rate: NonZeroU64,
}

impl BodyPace {
    /// How long a body that has sent `received` bytes may have taken in all.
    #[must_use]
    pub fn allowed(&self, received: u64) -> Duration {
        self.timeout.saturating_add(Duration::from_secs(received / self.min_rate.get()))
    }
}

/// Where quota state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In this process (the embedded default).
    Memory,
    /// A standalone Redis (or Valkey) server, by URL.
    Redis(String),
    /// A Redis Cluster, by seed node URLs.
    RedisCluster(Vec<String>),
    /// A Redis master (and replicas) watched by Sentinel.
    RedisSentinel(SentinelStore),
}

/// `[store.sentinel]`: the sentinels name the master, asked again after a failover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelStore {
    /// The sentinels' URLs (`rediss://` for TLS to sentinels and master alike).
    pub nodes: Vec<String>,
    /// The master group's name in the sentinels' configuration.
    pub master: String,
    /// Database on the master.
    pub db: i64,
}

/// A secret the configuration names but never holds: read when the gateway starts, from an
/// environment variable or from a file (a mounted Kubernetes Secret), its content trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// The variable's value.
    Env(String),
    /// The file's content.
    File(std::path::PathBuf),
}

impl Secret {
    /// The secret's value now.
    ///
    /// # Errors
    /// An unset or empty variable, an unreadable or empty file: the message names the
    /// variable or the file, never a value.
    pub fn read(&self) -> Result<String, String> {
        let value = match self {
            Self::Env(name) => std::env::var(name).map_err(|_| format!("environment variable `{name}` is not set"))?,
            Self::File(path) => {
                std::fs::read_to_string(path).map_err(|e| format!("file `{}` cannot be read: {e}", path.display()))?
            }
        };
        let value = value.trim();
        if value.is_empty() {
            return Err(match self {
                Self::Env(name) => format!("environment variable `{name}` is empty"),
                Self::File(path) => format!("file `{}` is empty", path.display()),
            });
        }
        Ok(value.to_owned())
    }
}

/// The credentials sent to Redis (`[store] username`, `password_env`, `password_file`),
/// for every topology: a standalone server, each node of a cluster, the master Sentinel
/// names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisAuth {
    /// The ACL user (Redis 6+); none: `default`.
    pub username: Option<String>,
    /// Where the password is read from; none: the URL's own, if it has one.
    pub password: Option<Secret>,
}

/// What to do while the shared store is unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// Refuse with 503 until it is back.
    FailClosed,
    /// Limit locally at `limit / instances`.
    FailOpenLocal,
}

/// Quota store settings: process settings, not reloadable.
#[derive(Debug, Clone)]
pub struct Store {
    /// Where.
    pub kind: StoreKind,
    /// Key prefix in Redis.
    pub prefix: String,
    /// Bound on each store call.
    pub timeout: Duration,
    /// Behaviour while unreachable.
    pub on_unavailable: Unavailable,
    /// Gateway instances sharing the limits (for the local share when failing open).
    pub instances: std::num::NonZeroU64,
    /// Certificates for `rediss://` URLs.
    pub tls: StoreTls,
    /// Credentials, kept out of the URLs.
    pub auth: RedisAuth,
}

/// Certificates for a Redis store over TLS; nothing set means the system's roots and no
/// client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreTls {
    /// CA certificate(s) (PEM) that replace the system roots for Redis.
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate chain and key (PEM files), for mutual TLS.
    pub client: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

/// The operator surface: process settings, not reloadable.
#[derive(Debug, Clone, Default)]
pub struct Admin {
    /// SHA-256 of the admin key; without one, the admin API and dashboard do not exist.
    pub key_sha256: Option<[u8; 32]>,
    /// Where the admin plane (`/admin/*`, `/dashboard`, `/metrics`) is served.
    pub listen: AdminListen,
    /// The bearer token `/metrics` asks for (`metrics_token_env` / `metrics_token_file`);
    /// without one, `/metrics` is open to whoever reaches the admin listener.
    pub metrics_token: Option<SecretSource>,
}

/// Where the admin plane is served (`[admin] listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminListen {
    /// On a listener of its own at this address (default `127.0.0.1:9090`); the public
    /// listener answers 404 for the admin paths.
    Apart(SocketAddr),
    /// On the public listener beside the API (`listen = "shared"`): one port, as small
    /// setups run it.
    Shared,
}

impl Default for AdminListen {
    fn default() -> Self {
        Self::Apart(SocketAddr::from(([127, 0, 0, 1], crate::defaults::ADMIN_PORT)))
    }
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Process settings.
    pub server: Server,
    /// Quota store settings.
    pub store: Store,
    /// The organisation's name and limits.
    pub org: (Arc<str>, Limits),
    /// Provider accounts.
    pub providers: Vec<Provider>,
    /// Deployments.
    pub deployments: Vec<Deployment>,
    /// Provider accounts: quotas several deployments share, above them on the path.
    pub accounts: Vec<Account>,
    /// Model profiles.
    pub models: Vec<ModelProfile>,
    /// Tenants.
    pub tenants: Vec<Tenant>,
    /// API keys.
    pub keys: Vec<ApiKey>,
    /// Traffic classes; index 0 is the default.
    pub classes: Vec<TrafficClass>,
    /// Async job settings.
    pub jobs: Jobs,
    /// Admin API and dashboard settings.
    pub admin: Admin,
    /// Trace export.
    pub telemetry: Telemetry,
    /// Settings of every money budget.
    pub budgets: Budgets,
    /// The price tables' currency.
    pub pricing: Pricing,
    /// Usage rollups.
    pub usage: UsageSettings,
    /// The fleet's store of record for money (`[ledger]`), if kept.
    pub ledger: Option<Ledger>,
    /// What `/metrics` exports.
    pub metrics: MetricsSettings,
}

/// `[metrics]`: process settings, not reloadable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSettings {
    /// Export the request path's first metrics under their old `llm_*` names too
    /// (`legacy_aliases`, default false): the same series twice, for queries not yet moved
    /// to `sluice_*`.
    pub legacy_aliases: bool,
}

/// The store of record for money (`[ledger]`): Postgres, which the Redis budgets are
/// restored from after Redis lost its memory.
#[derive(Clone, PartialEq, Eq)]
pub struct Ledger {
    /// `postgres://user@host:port/database`.
    pub url: String,
    /// The variable holding the password, if any (never the password itself).
    pub password_env: Option<String>,
    /// Bound on each call to Postgres.
    pub timeout: Duration,
    /// How often each instance writes what it spent.
    pub flush_every: Duration,
}

impl Config {
    /// The deployments configured key `key` may be served by: its tenant's, its team's and
    /// its own constraints, narrowed into one.
    #[must_use]
    pub fn allowed(&self, key: &ApiKey) -> Allowed {
        let tenant = &self.tenants[key.tenant];
        let team = key.team.and_then(|i| tenant.teams.get(i)).map_or_else(Allowed::default, |t| t.allowed.clone());
        tenant.allowed.narrowed(&team).narrowed(&key.allowed)
    }
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("Ledger")
            .field("password_env", &self.password_env)
            .field("timeout", &self.timeout)
            .field("flush_every", &self.flush_every)
            .finish_non_exhaustive()
    }
}

/// Settings of every money budget (`[budgets]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Budgets {
    /// The time zone days and months begin in, as a fixed offset east of UTC (seconds).
    pub utc_offset_seconds: i32,
    /// Soft budgets: the shares of a budget (ascending, e.g. 0.8 and 1.0) whose crossing
    /// warns (a counter and a webhook) without refusing anything. Empty: no warnings.
    pub warn_at: Vec<f64>,
    /// Where a warning is POSTed as JSON, if anywhere. Never logged: it may carry a token.
    pub webhook_url: Option<String>,
    /// How often the budgets are compared with the thresholds.
    pub check_interval: std::time::Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            utc_offset_seconds: 0,
            warn_at: Vec::new(),
            webhook_url: None,
            check_interval: std::time::Duration::from_secs(5),
        }
    }
}

/// Trace export: process settings, not reloadable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Telemetry {
    /// The OTLP/HTTP collector's base URL (`/v1/traces` is appended); without one, the
    /// standard `OTEL_EXPORTER_OTLP_*ENDPOINT` variables decide, and unset means no export.
    pub otlp_endpoint: Option<String>,
}
