//! The gateway's resolved view of a configuration: keys, profiles and deployments with
//! their scope handles in the quota store, ready for the request path ([`Gateway`], swapped
//! whole by a reload), over the long-lived [`Services`] every gateway since start shares.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_config::{Config, OutputCounting, ProviderApi, ProviderKind, Tokenizer};
use sluice_provider::{Estimator, TokenizerKind, tokenizer_for_model};
use sluice_quota::{Clock, QuotaStore, ScopeId, ScopeKey, ScopeKind};

use crate::metrics::{Metrics, RouteCounters};
use sluice_quota::queue::DeploymentQueue;
use sluice_quota::retry::{Breaker, RetryBudget};
use sluice_redis::choose::redis_target;
use sluice_upstream::Upstream;
use sluice_upstream::secret::{self, SecretError};

pub use crate::tenancy::{Caller, Directory, TeamEntry, TenantEntry};

/// A model profile clients can name.
#[derive(Debug)]
pub struct Profile {
    /// The profile's name.
    pub name: Arc<str>,
    /// Its scope.
    pub scope: ScopeId,
    /// Index into [`Gateway::deployments`].
    pub deployment: usize,
    /// Output reservation when the client sends no `max_tokens`.
    pub default_max_tokens: u64,
    /// Input reserved for a Responses request's unseen context (`previous_response_id`).
    pub context_reserve_tokens: u64,
    /// The other OpenAI endpoints served for it (`passthrough`).
    pub passthrough: Vec<sluice_config::Passthrough>,
    /// Ordered fallbacks.
    pub fallbacks: Vec<sluice_config::Fallback>,
    /// Degradation of simple work.
    pub degrade: Option<sluice_config::Degrade>,
    /// Its pool, when several deployments serve it (`deployments = [...]`); `deployment`
    /// is then the pool's first member of its lowest tier.
    pub pool: Option<Arc<crate::pool::Pool>>,
}

/// An upstream deployment with everything needed to call it.
#[derive(Debug)]
pub struct Route {
    /// The deployment's name.
    pub name: Arc<str>,
    /// Its scope.
    pub scope: ScopeId,
    /// Provider account name.
    pub provider: Arc<str>,
    /// Where and how it is reached: the provider seam's input.
    pub target: sluice_upstream::Target,
    /// Its prices, when priced.
    pub price: Option<sluice_config::Price>,
    /// Input estimation.
    pub tokenizer: TokenizerKind,
    /// Input estimate factor.
    pub input_safety_factor: f64,
    /// Output charging rule.
    pub output_counting: OutputCounting,
    /// Quota tokens each output token burns on the deployment.
    pub output_weight: u64,
    /// The provider account's scope the deployment shares, if it names one.
    pub account: Option<ScopeId>,
    /// Its counters.
    pub counters: RouteCounters,
    /// Requests waiting for it.
    pub queue: Arc<DeploymentQueue>,
    /// How far (tokens) one tenant may run ahead of a waiting one: the largest token burst
    /// of the deployment's limits, if it has token limits.
    pub fair_slack: Option<u64>,
    /// Adaptive limits and estimators: the request path calls
    /// `adaptive.output_reservation`/`input_reservation` when pricing, `on_admitted` after a
    /// grant, `on_response` with each provider answer, `observe` with the usage.
    pub adaptive: Arc<sluice_adapt::Adaptive>,
    /// Longest one attempt may take (headers; non-stream: the whole answer).
    pub attempt_timeout: Duration,
    /// Longest silence between two pieces of a stream.
    pub stream_idle_timeout: Duration,
    /// How long a stream whose client left is read on for its final usage.
    pub stream_drain_timeout: Duration,
    /// Consecutive-failure breaker.
    pub breaker: Breaker,
    /// Retries this deployment may still take.
    pub retry_budget: RetryBudget,
    /// The tenants' guaranteed shares, measuring guaranteed vs borrowed tokens.
    pub guarantee: sluice_quota::guarantee::Guarantee,
    /// Its time to an answer's headers, learned (pools placed by `latency`).
    pub latency: crate::pool::Latency,
    /// Whether a pool has it as a member: then one failure holds it back for the fleet
    /// a moment ([`crate::pool::FAILURE_PAUSE`]), the other members serving meanwhile.
    pub pooled: bool,
    /// Where it runs (`region`): a caller limited to regions is placed here only when
    /// this is one of them ([`sluice_config::Allowed::admits`]).
    pub region: Option<Arc<str>>,
    /// Its labels (`labels`), for callers limited to labelled deployments.
    pub labels: Vec<Arc<str>>,
    /// The most tokens one request may hold here (input plus output), when stated: a
    /// request that does not fit is never sent here.
    pub context_window: Option<std::num::NonZeroU64>,
}

/// Everything a request handler needs, shared by all requests: the policy compiled from a
/// configuration (the fields here, swapped whole by a reload) over the [`Services`] every
/// gateway built since start shares.
#[derive(Debug)]
pub struct Gateway {
    /// The services built once at start, kept by every reload.
    pub services: Arc<Services>,
    /// The upstream HTTP client (built from the configuration: CA files, proxy).
    pub upstream: Upstream,
    /// Callers by SHA-256 of their key.
    pub callers: HashMap<[u8; 32], Caller>,
    /// The configured tenants, teams and classes runtime keys resolve against.
    pub directory: Directory,
    /// Profiles by name.
    pub profiles: HashMap<Arc<str>, Profile>,
    /// Deployments.
    pub deployments: Vec<Route>,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// The access log's settings.
    pub access_log: sluice_config::AccessLog,
    /// How slow a request body may arrive.
    pub body_pace: sluice_config::BodyPace,
    /// Reservation lease.
    pub lease: Duration,
    /// Money budgets' settings (their time zone).
    pub budgets: sluice_config::Budgets,
    /// Upstream total timeout.
    pub upstream_timeout: Duration,
    /// Task names the configuration knows (every profile's `degrade_to.tasks`): the only
    /// ones a metric label repeats.
    pub tasks: std::collections::HashSet<String>,
    /// `[usage]`: retention and flush interval of the rollups.
    pub usage_settings: sluice_config::UsageSettings,
    /// `[pricing] currency`: what costs are in.
    pub currency: Arc<str>,
}

/// The process's long-lived services: built once at start ([`Services::new`]) and shared by
/// every gateway built since, so a reload keeps them.
#[derive(Debug)]
pub struct Services {
    /// The quota store.
    pub store: Arc<dyn QuotaStore>,
    /// The gateway's clock.
    pub clock: Arc<dyn Clock>,
    /// Request-path metrics.
    pub metrics: Arc<Metrics>,
    /// Input token estimation.
    pub estimator: Arc<Estimator>,
    /// The keys created through the admin API (they live in the store; a reload resolves
    /// them again against its tenants and classes).
    pub runtime_keys: Arc<crate::keys::RuntimeKeys>,
    /// The operation log (idempotency). `[server]` and `[store]` need a restart.
    pub oplog: Arc<sluice_recall::oplog::OpLog>,
    /// The Responses API's remembered responses.
    pub responses: Arc<sluice_recall::remembered::Responses>,
    /// Ends the streams still running when the shutdown grace is over.
    pub streams: crate::streams::StreamCut,
    /// Work a request leaves behind (a remote settlement, the breaker's pause): tracked
    /// so that shutdown waits for it.
    pub background: tokio_util::task::TaskTracker,
    /// Where request spans go once trace export is on ([`crate::AppState::export_traces`]).
    pub spans: Arc<std::sync::OnceLock<crate::telemetry::Spans>>,
    /// Usage counted and not yet written to the store.
    pub usage: Arc<crate::usage::UsageBook>,
}

impl Services {
    /// The services of a process serving `config` on `store`.
    ///
    /// # Errors
    /// When the tokenizers fail to load.
    pub fn new(
        config: &Config,
        store: Arc<dyn QuotaStore>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
    ) -> Result<Self, BuildError> {
        let estimator = Arc::new(Estimator::new().map_err(|e| BuildError::Estimator(e.to_string()))?);
        let dropped = metrics.spend.usage_dropped.clone();
        let usage = Arc::new(crate::usage::UsageBook::new(Arc::clone(&clock), move || {
            dropped.inc();
        }));
        Ok(Self {
            estimator,
            runtime_keys: Arc::default(),
            oplog: Arc::new(sluice_recall::oplog::from_config(config, redis_target(&config.store), Arc::clone(&clock))),
            responses: Arc::new(sluice_recall::remembered::from_config(
                config,
                redis_target(&config.store),
                Arc::clone(&clock),
            )),
            streams: crate::streams::StreamCut::default(),
            background: tokio_util::task::TaskTracker::new(),
            spans: Arc::default(),
            usage,
            metrics,
            clock,
            store,
        })
    }
}

/// Why a gateway could not be built from a valid configuration.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A provider key is missing.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The tokenizer tables failed to load.
    #[error("tokenizer: {0}")]
    Estimator(String),
    /// The upstream CA file or proxy is unusable.
    #[error("upstream: {0}")]
    Upstream(String),
    /// The metrics token's variable is unset or its file unreadable or empty.
    #[error("[admin] {0}")]
    MetricsToken(String),
}

impl Gateway {
    /// Registers every scope of `config` in the services' store and loads provider keys.
    ///
    /// # Errors
    /// When a provider key cannot be loaded or the upstream CA file or proxy is unusable.
    pub fn build(config: &Config, services: Arc<Services>) -> Result<Self, BuildError> {
        let store = &services.store;
        let deployments = routes(config, store, &services.clock, &services.metrics)?;
        let profiles = config
            .models
            .iter()
            .map(|m| {
                let scope = store.register(ScopeKey::new(ScopeKind::ModelProfile, m.name.clone()), m.limits.clone());
                let profile = Profile {
                    name: m.name.clone(),
                    scope,
                    deployment: m.deployment,
                    default_max_tokens: m.default_max_tokens,
                    context_reserve_tokens: m.context_reserve_tokens,
                    passthrough: m.passthrough.clone(),
                    fallbacks: m.fallbacks.clone(),
                    degrade: m.degrade_to.clone(),
                    pool: (m.pool.len() > 1).then(|| {
                        let queue = DeploymentQueue::new(Arc::clone(store), Arc::clone(&services.clock));
                        let capacities = m
                            .pool
                            .iter()
                            .map(|member| crate::pool::capacity(&config.deployments[member.deployment].limits));
                        let pool = crate::pool::Pool::new(m.pool.clone(), m.strategy, queue)
                            .with_capacities(capacities.collect());
                        Arc::new(pool.with_affinity_header(m.affinity_header.clone()))
                    }),
                };
                (m.name.clone(), profile)
            })
            .collect();
        let (callers, directory) = callers(config, store.as_ref());
        let gateway = Self {
            callers,
            directory,
            profiles,
            deployments,
            upstream: Upstream::reaching(config.server.connect_timeout, reach(config)?),
            max_body_bytes: config.server.max_body_bytes,
            access_log: config.server.access_log,
            body_pace: config.server.body,
            lease: config.server.lease,
            budgets: config.budgets.clone(),
            upstream_timeout: config.server.upstream_timeout,
            tasks: config.models.iter().filter_map(|m| m.degrade_to.as_ref()).flat_map(|d| d.tasks.clone()).collect(),
            usage_settings: config.usage.clone(),
            currency: Arc::clone(&config.pricing.currency),
            services,
        };
        gateway.link_pools();
        gateway.services.metrics.declare(config);
        Ok(gateway)
    }

    /// Makes each pool member's returned capacity wake its pools' queues.
    fn link_pools(&self) {
        for pool in self.profiles.values().filter_map(|p| p.pool.as_ref()) {
            for member in &pool.members {
                self.deployments[member.deployment].queue.wakes(&pool.queue);
            }
        }
    }
}

impl Gateway {
    /// What runtime keys are resolved against: the configured tenancy and the quota store.
    #[must_use]
    pub fn tenancy(&self) -> crate::tenancy::Tenancy<'_> {
        crate::tenancy::Tenancy {
            directory: &self.directory,
            store: self.services.store.as_ref(),
            configured_keys: self.callers.len(),
        }
    }

    /// Today's budget periods, by this instance's clock in `[budgets] time_zone`.
    #[must_use]
    pub fn calendar(&self) -> sluice_quota::Calendar {
        crate::budgets::calendar(self.services.clock.as_ref(), self.budgets.utc_offset_seconds)
    }

    /// The `task_type` label of a request declaring `task`: a task the configuration names,
    /// `default` for none, `other` for any other, so clients cannot create series at will.
    #[must_use]
    pub fn task_label<'a>(&'a self, task: Option<&str>) -> &'a str {
        match task {
            None => "default",
            Some(task) => self.tasks.get(task).map_or("other", String::as_str),
        }
    }

    /// After a reload built `self` aside (on the old gateway's services): deployments that
    /// kept their name keep their queue (requests waiting in it stay) and their learned
    /// adaptive state (the factor, the output sketch), which takes the new limits and settings.
    pub fn keep_learned(&mut self, old: &Gateway, config: &Config) {
        for (route, d) in self.deployments.iter_mut().zip(&config.deployments) {
            let Some(previous) = old.deployments.iter().find(|o| o.name == route.name) else { continue };
            route.queue = Arc::clone(&previous.queue);
            previous.adaptive.reconfigure(d);
            route.adaptive = Arc::clone(&previous.adaptive);
        }
        // Pools that kept their name keep their queue (and, with the same members and
        // strategy, what they learned of their members and sessions).
        for (name, profile) in &mut self.profiles {
            let (Some(pool), Some(previous)) =
                (&mut profile.pool, old.profiles.get(name).and_then(|p| p.pool.as_ref()))
            else {
                continue;
            };
            let same = previous.members == pool.members
                && previous.capacities == pool.capacities
                && previous.strategy == pool.strategy
                && previous.affinity_header == pool.affinity_header;
            let members_same = same
                && previous
                    .members
                    .iter()
                    .all(|m| old.deployments[m.deployment].name == self.deployments[m.deployment].name);
            *pool = if members_same {
                Arc::clone(previous)
            } else {
                let fresh = crate::pool::Pool::new(pool.members.clone(), pool.strategy, Arc::clone(&previous.queue))
                    .with_capacities(pool.capacities.clone());
                Arc::new(fresh.with_affinity_header(pool.affinity_header.clone()))
            };
        }
        self.link_pools();
    }
}

fn routes(
    config: &Config,
    store: &Arc<dyn QuotaStore>,
    clock: &Arc<dyn Clock>,
    metrics: &Metrics,
) -> Result<Vec<Route>, SecretError> {
    let total_weight: u64 = config.tenants.iter().map(|t| u64::from(t.weight.get())).sum();
    let accounts: Vec<ScopeId> = config
        .accounts
        .iter()
        .map(|a| store.register(ScopeKey::new(ScopeKind::Account, a.name.clone()), a.limits.clone()))
        .collect();
    config
        .deployments
        .iter()
        .map(|d| {
            let provider = &config.providers[d.provider];
            // Azure's `api-key` and Gemini's `x-goog-api-key` carry the bare key.
            let bare = matches!(provider.api, ProviderApi::Azure(_) | ProviderApi::GeminiNative);
            let bearer = provider.kind != ProviderKind::Anthropic && !bare;
            let key = secret::Credential::load(&provider.name, &provider.api_key, bearer)?;
            let tokenizer = match d.tokenizer {
                Tokenizer::Auto => tokenizer_for_model(&d.model),
                Tokenizer::O200k => TokenizerKind::O200k,
                Tokenizer::Cl100k => TokenizerKind::Cl100k,
                Tokenizer::Approx(chars_per_token) => TokenizerKind::Approx { chars_per_token },
            };
            let labels = crate::metrics::Upstream { provider: provider.name.to_string(), model: d.model.clone() };
            let fair_slack = d
                .limits
                .rates
                .iter()
                .filter(|r| r.dimension != sluice_quota::Dimension::Requests)
                .map(|r| r.burst.get())
                .max();
            let scope = store.register(ScopeKey::new(ScopeKind::Deployment, d.name.clone()), d.limits.clone());
            let wiring = sluice_adapt::Wiring {
                store: Arc::clone(store),
                clock: Arc::clone(clock),
                metrics: Arc::clone(&metrics.adaptive),
            };
            let adaptive = sluice_adapt::Adaptive::new(d, provider.kind, scope, labels.clone(), wiring);
            Ok(Route {
                guarantee: sluice_quota::guarantee::Guarantee::new(&d.limits, total_weight),
                latency: crate::pool::Latency::default(),
                pooled: config.models.iter().any(|m| {
                    m.pool.len() > 1 && m.pool.iter().any(|p| config.deployments[p.deployment].name == d.name)
                }),
                adaptive: Arc::new(adaptive),
                attempt_timeout: d.attempt_timeout,
                stream_idle_timeout: d.stream_idle_timeout,
                stream_drain_timeout: d.stream_drain_timeout,
                breaker: Breaker::new(d.breaker_failures, d.breaker_cooldown),
                retry_budget: RetryBudget::default(),
                fair_slack,
                queue: DeploymentQueue::new(Arc::clone(store), Arc::clone(clock)),
                counters: RouteCounters::new(metrics, labels),
                name: d.name.clone(),
                scope,
                provider: provider.name.clone(),
                target: sluice_upstream::Target {
                    name: d.name.clone(),
                    kind: provider.kind,
                    base_url: provider.base_url.clone(),
                    model: d.model.clone(),
                    key,
                    api: provider.api.clone(),
                    azure_deployment: d.azure_deployment.clone(),
                },
                price: d.price,
                tokenizer,
                input_safety_factor: d.input_safety_factor,
                output_counting: d.output_counting,
                output_weight: d.output_weight,
                account: d.account.and_then(|i| accounts.get(i).copied()),
                region: d.region.clone(),
                labels: d.labels.clone(),
                context_window: d.context_window,
            })
        })
        .collect()
}

fn callers(config: &Config, store: &dyn QuotaStore) -> (HashMap<[u8; 32], Caller>, Directory) {
    let (org_name, org_limits) = &config.org;
    let org = store.register(ScopeKey::new(ScopeKind::Org, org_name.clone()), org_limits.clone());
    let tenants: Vec<ScopeId> = config
        .tenants
        .iter()
        .map(|t| store.register(ScopeKey::new(ScopeKind::Tenant, t.name.clone()), t.limits.clone()))
        .collect();
    let mut directory = Directory { org: Some(org), classes: config.classes.clone(), ..Directory::default() };
    for (index, (tenant, scope)) in config.tenants.iter().zip(&tenants).enumerate() {
        let teams = tenant
            .teams
            .iter()
            .map(|team| {
                let entry = TeamEntry {
                    scope: team_scope(store, tenant, *scope, team),
                    allowed: tenant.allowed.narrowed(&team.allowed),
                };
                (team.name.clone(), entry)
            })
            .collect();
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let allowed = tenant.allowed.clone();
        let entry = TenantEntry { index, weight: tenant.weight, scope: *scope, allowed, teams };
        directory.tenants.insert(tenant.name.clone(), entry);
    }
    let callers: HashMap<[u8; 32], Caller> = config
        .keys
        .iter()
        .enumerate()
        .map(|(key_index, k)| {
            let tenant = &config.tenants[k.tenant];
            let mut scopes = vec![org, tenants[k.tenant]];
            let team = k.team.map(|i| &tenant.teams[i]);
            if let Some(team) = team {
                scopes.push(team_scope(store, tenant, tenants[k.tenant], team));
            }
            let key = store.register(ScopeKey::new(ScopeKind::ApiKey, k.id.clone()), k.limits.clone());
            store.keep_with(key, tenants[k.tenant]);
            scopes.push(key);
            let caller = Caller {
                key_id: k.id.clone(),
                tenant: tenant.name.clone(),
                team: team.map(|t| Arc::clone(&t.name)),
                tenant_index: u32::try_from(k.tenant).unwrap_or(u32::MAX),
                weight: tenant.weight,
                key_index: u32::try_from(key_index).unwrap_or(u32::MAX),
                class: config.classes[k.class].clone(),
                class_index: k.class,
                scopes: scopes.into(),
                models: None,
                allowed: config.allowed(k),
            };
            (k.sha256, caller)
        })
        .collect();
    directory.config_keys = callers.values().map(|c| (Arc::clone(&c.key_id), c.clone())).collect();
    (callers, directory)
}

/// The team's scope (registered with its configured limits), kept beside its tenant's.
fn team_scope(
    store: &dyn QuotaStore,
    tenant: &sluice_config::Tenant,
    owner: ScopeId,
    team: &sluice_config::Team,
) -> ScopeId {
    let name = format!("{}/{}", tenant.name, team.name);
    let scope = store.register(ScopeKey::new(ScopeKind::Team, name), team.limits.clone());
    store.keep_with(scope, owner);
    scope
}

/// How providers are reached: `[server] upstream_ca_file` beside the webpki roots (and a
/// provider's own `ca_file` for its host), and `[server] upstream_proxy` or else the
/// `HTTPS_PROXY` variable, minus `NO_PROXY`'s hosts.
fn reach(config: &Config) -> Result<sluice_upstream::Reach, BuildError> {
    let server = &config.server;
    let env = |names: [&str; 2]| names.iter().find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
    let roots = server.upstream_ca_file.as_deref().map(pem_certificates).transpose()?.unwrap_or_default();
    let mut host_roots = Vec::new();
    for provider in &config.providers {
        let Some(file) = &provider.ca_file else { continue };
        let uri: http::Uri = provider.base_url.parse().map_err(|_| BuildError::Upstream(provider.base_url.clone()))?;
        let Some(authority) = uri.authority() else { continue };
        host_roots.push((authority.as_str().to_owned(), pem_certificates(file)?));
    }
    let proxy = match server.upstream_proxy.clone().or_else(|| env(["HTTPS_PROXY", "https_proxy"])) {
        None => None,
        Some(url) => {
            let uri = url.parse().map_err(|_| BuildError::Upstream(format!("proxy `{url}` is not a URL")))?;
            let no_proxy = env(["NO_PROXY", "no_proxy"]).unwrap_or_default();
            let no_proxy = no_proxy.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_owned).collect();
            Some(sluice_upstream::Proxy { uri, no_proxy })
        }
    };
    Ok(sluice_upstream::Reach { roots, host_roots, proxy })
}

/// The certificates of a PEM CA file; a file without one is an error.
fn pem_certificates(file: &std::path::Path) -> Result<Vec<rustls_pki_types::CertificateDer<'static>>, BuildError> {
    use rustls_pki_types::pem::PemObject as _;
    let unreadable = || BuildError::Upstream(format!("CA file `{}` holds no readable certificate", file.display()));
    let certs: Vec<_> =
        rustls_pki_types::CertificateDer::pem_file_iter(file).and_then(Iterator::collect).map_err(|_| unreadable())?;
    if certs.is_empty() {
        return Err(unreadable());
    }
    Ok(certs)
}
