//! The gateway's Prometheus metrics, registered into a registry created by the caller.
//!
//! Labels come only from configuration (provider, model, scope, class and task names) or
//! closed sets (status codes, limiter names, decisions): never free text a client sent. A
//! client's model that names no profile counts as `none`; its task header, unless the
//! configuration names that task, as `other` ([`crate::Gateway::task_label`]).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use sluice_adapt::labels::Upstream;

/// `provider`, `model`, `status`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
    /// HTTP status returned to the client.
    pub status: u16,
}

/// `provider`, `model`, `limit_type`, `scope_kind`, `dimension`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Hit {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
    /// The limiter (`rpm`, `output_tpm`, ..., or `provider` for an upstream 429).
    pub limit_type: String,
    /// The binding scope's kind (`org`, `tenant`, `team`, `api_key`, `model_profile`,
    /// `account`, `deployment`), or `none` when no limit refusal is on record.
    pub scope_kind: &'static str,
    /// The binding dimension (see [`crate::binding::dimension`]).
    pub dimension: &'static str,
}

/// `provider`, `model`, `error_type`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Retry {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
    /// The error class that was retried (`rate_limited`, `server_error`, ...).
    pub error_type: &'static str,
}

/// `provider`, `model`, `reason`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamFailure {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
    /// `auth` (the provider refused the gateway's key), `stalled`, `too_large`,
    /// `bad_response`.
    pub reason: &'static str,
}

/// `from_provider`, `to_provider`, `reason`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Fallback {
    /// The provider that could not serve.
    pub from_provider: String,
    /// The provider that served instead.
    pub to_provider: String,
    /// Why (`provider_5xx`, `rate_limit_after_retry_budget`, `primary_unavailable`, ...).
    pub reason: &'static str,
}

/// `pool`, `deployment`, `reason`: where a pool's request was placed, and why.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Placement {
    /// The model profile whose pool it is.
    pub pool: String,
    /// The member that took it.
    pub deployment: String,
    /// Why: the strategy's name (`headroom`, `weighted`, `latency`, `cost`), `affinity`,
    /// `spill` (a member placed before it refused), `queued` (granted after a wait) or
    /// `only` (one member was possible).
    pub reason: &'static str,
}

/// `deployment`, `reason`: a deployment held back for every instance.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Cooldown {
    /// The deployment.
    pub deployment: String,
    /// Why: `breaker` (a run of failures or refused credentials) or `provider_429`.
    pub reason: &'static str,
}

/// `task_type`: a configured task, `default` or `other`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Task {
    /// The task type.
    pub task_type: String,
}

/// `decision`, `limiter`, `scope_kind`, `dimension`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decision {
    /// `admitted`, `rejected`, `never_fits`, `provider_rejected`, `store_error`.
    pub decision: &'static str,
    /// The limiter that refused, or empty.
    pub limiter: String,
    /// The refusing scope's kind, or `none` (admissions, store errors, a queue with no
    /// limit refusal on record).
    pub scope_kind: &'static str,
    /// The refusing limiter's dimension, or `none`.
    pub dimension: &'static str,
}

/// The scope kind and dimension that bound a refusal or a wait: bounded label values
/// ([`crate::binding`]), never a scope's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// `org`, `tenant`, `team`, `api_key`, `model_profile`, `account`, `deployment` or `none`.
    pub scope_kind: &'static str,
    /// `requests`, `tokens`, `input_tokens`, `output_tokens`, `concurrency`, `money` or `none`.
    pub dimension: &'static str,
}

impl Bound {
    /// Nothing bound it (no limit refusal on record).
    pub const NONE: Self = Self { scope_kind: crate::binding::NONE, dimension: crate::binding::NONE };

    /// What bound a request `rejection` refused.
    #[must_use]
    pub fn of(rejection: &sluice_quota::Rejection) -> Self {
        Self { scope_kind: rejection.scope.kind.as_str(), dimension: crate::binding::dimension(rejection.limiter) }
    }
}

/// `priority` (the traffic class), `task_type`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The traffic class.
    pub priority: String,
    /// The task type.
    pub task_type: String,
}

/// `priority`, `task_type`, `scope_kind`, `dimension`: a wait in a deployment's queue and
/// the scope and dimension that held it (the last refusal on record, `none` without one).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WaitLabels {
    /// The traffic class.
    pub priority: String,
    /// The task type.
    pub task_type: String,
    /// The binding scope's kind, or `none`.
    pub scope_kind: &'static str,
    /// The binding dimension, or `none`.
    pub dimension: &'static str,
}

/// `class`, `source` (`request`, `job`), `direction` (`late`, `early`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EtaLabels {
    /// The traffic class.
    pub class: String,
    /// `request`: a request admitted after waiting in a deployment's queue; `job`: an async
    /// job whose first attempt finished.
    pub source: &'static str,
    /// `late`: it took longer than the ETA said; `early`: no longer.
    pub direction: &'static str,
}

/// `result` of a configuration reload: `ok` or `error`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `ok`: the new configuration is in force; `error`: it was refused, the previous one stays.
    pub result: &'static str,
}

/// Configuration reloads (SIGHUP or a change of the file seen by its watch).
#[derive(Debug, Default)]
pub struct ReloadMetrics {
    /// `sluice_config_reload_total{result}`, both results present from the start.
    pub total: Family<ReloadLabels, Counter>,
    /// `sluice_config_last_reload_success_timestamp_seconds`: when the configuration in
    /// force was loaded (the start, or the last good reload), Unix seconds.
    pub last_success: Gauge,
}

impl ReloadMetrics {
    fn register(&self, registry: &mut Registry) {
        for result in ["ok", "error"] {
            let _ = self.total.get_or_create(&ReloadLabels { result });
        }
        let help = "Configuration reloads by result (error: refused, the previous configuration stays in force)";
        registry.register("sluice_config_reload", help, self.total.clone());
        registry.register(
            "sluice_config_last_reload_success_timestamp_seconds",
            "When the configuration in force was loaded (start or last good reload), Unix seconds",
            self.last_success.clone(),
        );
    }

    /// Counts one reload; a good one at `unix_seconds` is the configuration in force.
    pub fn reloaded(&self, ok: bool, unix_seconds: i64) {
        self.total.get_or_create(&ReloadLabels { result: if ok { "ok" } else { "error" } }).inc();
        if ok {
            self.last_success.set(unix_seconds);
        }
    }
}

/// Bucket bounds of the queue wait histogram, in seconds: 1 ms to 10 min.
const WAIT_BUCKETS: [f64; 16] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0, 600.0];

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

/// Counters of the request path.
#[derive(Debug)]
pub struct Metrics {
    /// `sluice_requests_total{provider,model,status}`.
    pub requests: Family<Outcome, Counter>,
    /// `sluice_tokens_reserved_total{provider,model}`.
    pub tokens_reserved: Family<Upstream, Counter>,
    /// `sluice_tokens_used_total{provider,model}`.
    pub tokens_used: Family<Upstream, Counter>,
    /// `sluice_rate_limit_hits_total{provider,model,limit_type,scope_kind,dimension}`.
    pub rate_limit_hits: Family<Hit, Counter>,
    /// `sluice_decisions_total{decision,limiter,scope_kind,dimension}`.
    pub decisions: Family<Decision, Counter>,
    /// Its `admitted` series, resolved once: every admission counts it.
    admitted: Counter,
    /// `sluice_queue_depth{priority,task_type}`.
    pub queue_depth: Family<QueueLabels, Gauge>,
    /// `sluice_queue_wait_seconds{priority,task_type,scope_kind,dimension}`.
    pub queue_wait: Family<WaitLabels, Histogram, fn() -> Histogram>,
    /// `sluice_queue_eta_error_seconds{class,source,direction}`: how far the actual wait
    /// was from the ETA the queue would have answered.
    pub eta_error: Family<EtaLabels, Histogram, fn() -> Histogram>,
    /// Guaranteed, borrowed and reclaimed per tenant.
    pub shares: crate::shares::ShareMetrics,
    /// `sluice_spend_total{tenant,currency}`.
    pub spend: crate::spend::SpendMetrics,
    /// `sluice_store_resets_total`: times the job store was found to have lost its data.
    pub store_resets: Counter,
    /// `sluice_retries_total{provider,model,error_type}`.
    pub retries: Family<Retry, Counter>,
    /// `sluice_fallbacks_total{from_provider,to_provider,reason}`.
    pub fallbacks: Family<Fallback, Counter>,
    /// `sluice_pool_placements_total{pool,deployment,reason}`.
    pub placements: Family<Placement, Counter>,
    /// `sluice_cooldowns_total{deployment,reason}`.
    pub cooldowns: Family<Cooldown, Counter>,
    /// `sluice_upstream_failures_total{provider,model,reason}`: provider failures that are
    /// the operator's to look at (refused credentials, stalls, oversized or unreadable answers).
    pub upstream_failures: Family<UpstreamFailure, Counter>,
    /// `sluice_duplicate_suppressed_total{task_type}`.
    pub duplicates_suppressed: Family<Task, Counter>,
    /// `sluice_store_errors_total`: failed calls to the shared quota store.
    pub store_errors: Counter,
    /// `sluice_store_degraded`: 1 while the shared store is unreachable.
    pub store_degraded: Gauge,
    /// Request latency, time to first token, in-flight gauges and tokens by tenant.
    pub timing: crate::timing::Timing,
    /// `sluice_trace_spans_dropped_total`: spans not exported because the queue was full.
    pub spans_dropped: Counter,
    /// Async job counters and states.
    pub jobs: JobMetrics,
    /// Live bucket levels and open reservations, refreshed at each scrape.
    pub buckets: BucketMetrics,
    /// Money budgets' use, refreshed at each scrape.
    pub budgets: crate::budgets::BudgetMetrics,
    /// Adaptive limits: effective factors, provider limit changes, output reserved vs used.
    pub adaptive: std::sync::Arc<sluice_adapt::AdaptiveMetrics>,
    /// Configuration reloads.
    pub reloads: ReloadMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let decisions = Family::<Decision, Counter>::default();
        let none = Bound::NONE;
        let admitted = Decision {
            decision: "admitted",
            limiter: String::new(),
            scope_kind: none.scope_kind,
            dimension: none.dimension,
        };
        let admitted = decisions.get_or_create(&admitted).clone();
        Self {
            requests: Family::default(),
            tokens_reserved: Family::default(),
            tokens_used: Family::default(),
            rate_limit_hits: Family::default(),
            decisions,
            admitted,
            queue_depth: Family::default(),
            queue_wait: Family::new_with_constructor(wait_histogram),
            eta_error: Family::new_with_constructor(wait_histogram),
            shares: crate::shares::ShareMetrics::default(),
            spend: crate::spend::SpendMetrics::default(),
            store_resets: Counter::default(),
            retries: Family::default(),
            fallbacks: Family::default(),
            placements: Family::default(),
            cooldowns: Family::default(),
            upstream_failures: Family::default(),
            duplicates_suppressed: Family::default(),
            store_errors: Counter::default(),
            store_degraded: Gauge::default(),
            spans_dropped: Counter::default(),
            timing: crate::timing::Timing::default(),
            jobs: JobMetrics::default(),
            buckets: BucketMetrics::default(),
            budgets: crate::budgets::BudgetMetrics::default(),
            adaptive: std::sync::Arc::default(),
            reloads: ReloadMetrics::default(),
        }
    }
}

impl Metrics {
    /// The request path's first metrics, under `sluice_`; with `legacy_aliases`
    /// (`[metrics] legacy_aliases = true`) each again under its first name `llm_*` (same
    /// series, same labels) for queries not yet moved.
    fn register_request_path(&self, registry: &mut Registry, legacy_aliases: bool) {
        let both = Aliased { legacy: legacy_aliases };
        both.register(registry, "requests", "Requests by provider, model and status returned", &self.requests);
        both.register(
            registry,
            "tokens_reserved",
            "Tokens reserved at admission (input estimate + output reservation) by requests that used any, counted when they settle",
            &self.tokens_reserved,
        );
        let used = "Tokens really used, as the provider reported (input + output)";
        both.register(registry, "tokens_used", used, &self.tokens_used);
        let hits = "Requests refused by a limit, by the limiter (provider = an upstream 429)";
        both.register(registry, "rate_limit_hits", hits, &self.rate_limit_hits);
        both.register(registry, "retries", "Upstream attempts retried, by error type", &self.retries);
        both.register(registry, "fallbacks", "Requests served by a fallback, by reason", &self.fallbacks);
        let duplicates = "Repeats of an operation answered from the operation log instead of the provider";
        both.register(registry, "duplicate_suppressed", duplicates, &self.duplicates_suppressed);
        both.register(registry, "queue_depth", "Requests waiting for capacity", &self.queue_depth);
        let wait = "Time requests waited for capacity (admitted or not)";
        both.register(registry, "queue_wait_seconds", wait, &self.queue_wait);
    }

    /// Registers every metric into `registry`; the `llm_*` aliases only with
    /// `legacy_aliases`.
    #[must_use]
    pub fn register(registry: &mut Registry, legacy_aliases: bool) -> Self {
        let metrics = Self::default();
        metrics.register_request_path(registry, legacy_aliases);
        registry.register("sluice_decisions", "Admission decisions by outcome and limiter", metrics.decisions.clone());
        registry.register(
            "sluice_upstream_failures",
            "Provider failures for the operator: refused credentials (auth), stalls, oversized or unreadable answers",
            metrics.upstream_failures.clone(),
        );
        registry.register(
            "sluice_store_errors",
            "Failed calls to the shared quota store",
            metrics.store_errors.clone(),
        );
        registry.register(
            "sluice_store_degraded",
            "1 while the shared quota store is unreachable (fail_closed or fail_open_local in force)",
            metrics.store_degraded.clone(),
        );
        let placements = metrics.placements.clone();
        registry.register("sluice_pool_placements", "Pool requests admitted, by member and reason", placements);
        let cooldowns = metrics.cooldowns.clone();
        registry.register("sluice_cooldowns", "Deployments held back for every instance, by reason", cooldowns);
        metrics.timing.register(registry);
        registry.register(
            "sluice_trace_spans_dropped",
            "Spans not exported because the export queue was full",
            metrics.spans_dropped.clone(),
        );
        registry.register(
            "sluice_queue_eta_error_seconds",
            "Distance between the actual wait and the ETA given (late: longer than said; early: not longer)",
            metrics.eta_error.clone(),
        );
        metrics.shares.register(registry);
        metrics.spend.register(registry);
        registry.register(
            "sluice_store_resets",
            "Times the job store was found to have lost its data (a new epoch): runtime keys were read again",
            metrics.store_resets.clone(),
        );
        metrics.jobs.register(registry);
        metrics.buckets.register(registry);
        metrics.budgets.register(registry);
        metrics.adaptive.register(registry);
        metrics.reloads.register(registry);
        metrics
    }

    /// Creates, at zero, the series `config` makes possible that dashboards and alerts
    /// divide by or compare with, so that they read 0 rather than "no data" before the
    /// first event: each class's queue wait, each deployment's provider 429s, each
    /// configured fallback by reason. Called for every configuration built (start and
    /// reloads); series of what a reload removed stay at their last value.
    pub fn declare(&self, config: &sluice_config::Config) {
        let none = Bound::NONE;
        for class in &config.classes {
            let task_type = DEFAULT_TASK_TYPE.to_owned();
            let depth = QueueLabels { priority: class.name.to_string(), task_type: task_type.clone() };
            let _ = self.queue_depth.get_or_create(&depth);
            let wait = WaitLabels {
                priority: class.name.to_string(),
                task_type,
                scope_kind: none.scope_kind,
                dimension: none.dimension,
            };
            let _ = self.queue_wait.get_or_create(&wait);
        }
        let upstream = |deployment: usize| {
            let d = &config.deployments[deployment];
            (config.providers[d.provider].name.to_string(), d.model.clone())
        };
        for i in 0..config.deployments.len() {
            let (provider, model) = upstream(i);
            // As a provider 429 counts it (`road::answer`): the deployment bound it.
            let hit = Hit {
                provider,
                model,
                limit_type: "provider".into(),
                scope_kind: "deployment",
                dimension: none.dimension,
            };
            let _ = self.rate_limit_hits.get_or_create(&hit);
        }
        for profile in &config.models {
            let (from_provider, _) = upstream(profile.deployment);
            for fallback in &profile.fallbacks {
                let (to_provider, _) = upstream(fallback.deployment);
                for when in &fallback.when {
                    let key = Fallback {
                        from_provider: from_provider.clone(),
                        to_provider: to_provider.clone(),
                        reason: when.as_str(),
                    };
                    let _ = self.fallbacks.get_or_create(&key);
                }
            }
        }
    }

    /// Brings the store gauges up to date (called before each scrape).
    pub fn observe_store(&self, health: sluice_quota::StoreHealth) {
        self.store_degraded.set(i64::from(health.degraded));
        let seen = self.store_errors.get();
        if health.errors > seen {
            self.store_errors.inc_by(health.errors - seen);
        }
    }

    /// Counts a retried upstream attempt.
    pub fn retry(&self, labels: &Upstream, error_type: &'static str) {
        let key = Retry { provider: labels.provider.clone(), model: labels.model.clone(), error_type };
        self.retries.get_or_create(&key).inc();
    }

    /// Counts a provider failure that is the operator's to look at.
    pub fn upstream_failure(&self, labels: &Upstream, reason: &'static str) {
        let key = UpstreamFailure { provider: labels.provider.clone(), model: labels.model.clone(), reason };
        self.upstream_failures.get_or_create(&key).inc();
    }

    /// Counts a request served by a fallback.
    pub fn fallback(&self, from: &Upstream, to: &Upstream, reason: &'static str) {
        let key = Fallback { from_provider: from.provider.clone(), to_provider: to.provider.clone(), reason };
        self.fallbacks.get_or_create(&key).inc();
    }

    /// Counts a pool's request admitted on `deployment` for `reason`.
    pub fn placed(&self, pool: &str, deployment: &str, reason: &'static str) {
        let key = Placement { pool: pool.to_owned(), deployment: deployment.to_owned(), reason };
        self.placements.get_or_create(&key).inc();
    }

    /// Counts `deployment` held back for every instance for `reason`.
    pub fn cooldown(&self, deployment: &str, reason: &'static str) {
        let key = Cooldown { deployment: deployment.to_owned(), reason };
        self.cooldowns.get_or_create(&key).inc();
    }

    /// Counts a suppressed duplicate.
    pub fn duplicate_suppressed(&self, task_type: &str) {
        self.duplicates_suppressed.get_or_create(&Task { task_type: task_type.to_owned() }).inc();
    }

    /// Records how far `actual` was from the ETA `predicted` for a `source` of `class`.
    pub fn eta_error(&self, class: &str, source: &'static str, predicted: Duration, actual: Duration) {
        let direction = if actual > predicted { "late" } else { "early" };
        let error = actual.abs_diff(predicted);
        let labels = EtaLabels { class: class.to_owned(), source, direction };
        self.eta_error.get_or_create(&labels).observe(error.as_secs_f64());
    }

    /// Counts one admission.
    pub fn admitted(&self) {
        self.admitted.inc();
    }

    /// Counts one admission decision other than an admission ([`Metrics::admitted`]),
    /// bound by no scope (a store error, a breaker's hold, a provider's 429).
    pub fn decision(&self, decision: &'static str, limiter: &str) {
        self.bound_decision(decision, limiter, Bound::NONE);
    }

    /// Counts one refusal by `limiter`, bound by `bound`.
    pub fn bound_decision(&self, decision: &'static str, limiter: &str, bound: Bound) {
        let Bound { scope_kind, dimension } = bound;
        self.decisions.get_or_create(&Decision { decision, limiter: limiter.to_owned(), scope_kind, dimension }).inc();
    }
}

/// Registers a metric as `sluice_{name}` and, when `legacy`, as `llm_{name}` too.
struct Aliased {
    legacy: bool,
}

impl Aliased {
    fn register<M: prometheus_client::registry::Metric + Clone>(
        &self,
        registry: &mut Registry,
        name: &str,
        help: &str,
        metric: &M,
    ) {
        registry.register(format!("sluice_{name}"), help, metric.clone());
        if self.legacy {
            registry.register(format!("llm_{name}"), help, metric.clone());
        }
    }
}

/// The task type of a request that names none, or a task the configuration does not.
pub const DEFAULT_TASK_TYPE: &str = "default";

/// The counters of one deployment, resolved once so the request path does no lookups.
#[derive(Debug, Clone)]
pub struct RouteCounters {
    /// Labels of the deployment.
    pub labels: Upstream,
    /// Its `sluice_tokens_reserved_total`.
    pub reserved: Counter<u64, AtomicU64>,
    /// Its `sluice_tokens_used_total`.
    pub used: Counter<u64, AtomicU64>,
    /// Its `sluice_requests_total` of status 200, the most counted.
    pub ok: Counter<u64, AtomicU64>,
}

impl RouteCounters {
    /// Resolves the counters for `labels`.
    #[must_use]
    pub fn new(metrics: &Metrics, labels: Upstream) -> Self {
        let reserved = metrics.tokens_reserved.get_or_create(&labels).clone();
        let used = metrics.tokens_used.get_or_create(&labels).clone();
        let ok = Outcome { provider: labels.provider.clone(), model: labels.model.clone(), status: 200 };
        let ok = metrics.requests.get_or_create(&ok).clone();
        Self { labels, reserved, used, ok }
    }
}

/// `scope_kind`, `scope`, `limiter`: one bucket. Scope names come from the configuration.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BucketLabels {
    /// `deployment`, `model_profile`, `tenant`, `team`, `api_key`, `org`.
    pub scope_kind: &'static str,
    /// The scope's configured name.
    pub scope: String,
    /// `rpm`, `tpm`, `output_tpm`, ..., or `concurrency`.
    pub limiter: String,
}

/// `scope_kind`, `scope`: one scope.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    /// The scope's level.
    pub scope_kind: &'static str,
    /// The scope's configured name.
    pub scope: String,
}

/// Bucket fill levels per scope and limiter, set from store snapshots at scrape time.
#[derive(Debug, Default)]
pub struct BucketMetrics {
    /// `sluice_bucket_remaining{scope_kind,scope,limiter}`: units available now
    /// (`concurrency`: free slots).
    pub remaining: Family<BucketLabels, Gauge>,
    /// `sluice_bucket_limit{scope_kind,scope,limiter}`: the limit per period
    /// (`concurrency`: the cap).
    pub limit: Family<BucketLabels, Gauge>,
    /// `sluice_bucket_burst{scope_kind,scope,limiter}`: the most a full bucket holds.
    pub burst: Family<BucketLabels, Gauge>,
    /// `sluice_scope_in_flight{scope_kind,scope}`: requests holding a reservation.
    pub in_flight: Family<ScopeLabels, Gauge>,
    /// `sluice_scope_paused{scope_kind,scope}`: 1 while an operator holds the scope.
    pub paused: Family<ScopeLabels, Gauge>,
    /// `sluice_reservations_open`: reservations of this instance not yet settled.
    pub reservations_open: Gauge,
}

impl BucketMetrics {
    fn register(&self, registry: &mut Registry) {
        let buckets = [
            ("sluice_bucket_remaining", "Units a bucket can give now (free slots for concurrency)", &self.remaining),
            ("sluice_bucket_limit", "A bucket's limit per period (the cap for concurrency)", &self.limit),
            ("sluice_bucket_burst", "The most a full bucket holds", &self.burst),
        ];
        for (name, help, family) in buckets {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "sluice_scope_in_flight",
            "Requests holding a reservation on a scope",
            self.in_flight.clone(),
        );
        registry.register("sluice_scope_paused", "1 while an operator pauses the scope", self.paused.clone());
        registry.register(
            "sluice_reservations_open",
            "Reservations made by this instance and not yet settled or expired",
            self.reservations_open.clone(),
        );
    }
}

/// `state` of a job (`queued`, `delayed`, `running`, `dead_letter`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobStateLabel {
    /// The state.
    pub state: &'static str,
}

/// The async jobs' metrics.
#[derive(Debug, Default)]
pub struct JobMetrics {
    /// `sluice_jobs_submitted_total`: jobs created (idempotent repeats not counted).
    pub submitted: Counter,
    /// `sluice_jobs_completed_total`: answers recorded.
    pub completed: Counter,
    /// `sluice_jobs_failed_total`: jobs failed for good (not retryable).
    pub failed: Counter,
    /// `sluice_jobs_dead_lettered_total`: jobs that used up their attempts.
    pub dead_lettered: Counter,
    /// `sluice_jobs_retried_total`: failed attempts scheduled again.
    pub retried: Counter,
    /// `sluice_jobs_uncertain_reruns_total`: jobs run again after their lease expired while
    /// running (the lost attempt may have reached the provider).
    pub uncertain_reruns: Counter,
    /// `sluice_jobs{state}`: jobs per state in the store (refreshed every few seconds).
    pub states: Family<JobStateLabel, Gauge>,
}

impl JobMetrics {
    fn register(&self, registry: &mut Registry) {
        let counters = [
            ("sluice_jobs_submitted", "Async jobs submitted", &self.submitted),
            ("sluice_jobs_completed", "Async jobs completed (answer recorded)", &self.completed),
            ("sluice_jobs_failed", "Async jobs failed for good (not retryable)", &self.failed),
            ("sluice_jobs_dead_lettered", "Async jobs moved to the dead letter", &self.dead_lettered),
            ("sluice_jobs_retried", "Failed job attempts scheduled again", &self.retried),
            (
                "sluice_jobs_uncertain_reruns",
                "Jobs run again after their lease expired while running (possible duplicates)",
                &self.uncertain_reruns,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
        registry.register("sluice_jobs", "Async jobs per state in the job store", self.states.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exported(legacy_aliases: bool, config: &str) -> String {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry, legacy_aliases);
        metrics.declare(&sluice_config::parse(config).unwrap());
        metrics.requests.get_or_create(&Outcome { provider: "p".into(), model: "m".into(), status: 200 }).inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    const CONFIG: &str = r#"
[[providers]]
name = "p"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "K"

[[providers]]
name = "q"
kind = "openai"
base_url = "http://127.0.0.1:9"
api_key_env = "K"

[[deployments]]
name = "d"
provider = "p"
model = "m"

[[deployments]]
name = "e"
provider = "q"
model = "n"

[[models]]
name = "chat"
deployment = "d"
fallbacks = [{ deployment = "e", when = ["provider_5xx", "primary_unavailable"] }]

[[classes]]
name = "interactive"
"#;

    #[test]
    fn the_llm_aliases_are_exported_only_when_asked_for() {
        let text = exported(false, CONFIG);
        assert!(text.contains("sluice_requests_total{provider=\"p\",model=\"m\",status=\"200\"} 1"), "{text}");
        assert!(!text.contains("llm_"), "{text}");
        let text = exported(true, CONFIG);
        // The families with a series here (an empty family exports nothing at all).
        let aliased = ["requests", "rate_limit_hits", "fallbacks", "queue_depth", "queue_wait_seconds"];
        for name in aliased {
            assert!(text.contains(&format!("# TYPE llm_{name} ")), "llm_{name} missing:\n{text}");
            assert!(text.contains(&format!("# TYPE sluice_{name} ")), "sluice_{name} missing:\n{text}");
        }
        assert_eq!(text.matches("# TYPE llm_").count(), aliased.len(), "no other family has an alias");
        assert!(text.contains("llm_requests_total{provider=\"p\",model=\"m\",status=\"200\"} 1"), "the same series");
    }

    #[test]
    fn queue_waits_provider_429s_and_fallbacks_are_exported_at_zero_from_the_start() {
        let text = exported(false, CONFIG);
        let zero = [
            "sluice_queue_wait_seconds_count{priority=\"interactive\",task_type=\"default\",scope_kind=\"none\",dimension=\"none\"} 0",
            "sluice_queue_depth{priority=\"interactive\",task_type=\"default\"} 0",
            "sluice_rate_limit_hits_total{provider=\"p\",model=\"m\",limit_type=\"provider\",scope_kind=\"deployment\",dimension=\"none\"} 0",
            "sluice_rate_limit_hits_total{provider=\"q\",model=\"n\",limit_type=\"provider\",scope_kind=\"deployment\",dimension=\"none\"} 0",
            "sluice_fallbacks_total{from_provider=\"p\",to_provider=\"q\",reason=\"provider_5xx\"} 0",
            "sluice_fallbacks_total{from_provider=\"p\",to_provider=\"q\",reason=\"primary_unavailable\"} 0",
            "sluice_config_reload_total{result=\"ok\"} 0",
            "sluice_config_reload_total{result=\"error\"} 0",
        ];
        for series in zero {
            assert!(text.contains(series), "{series} missing:\n{text}");
        }
    }
}
