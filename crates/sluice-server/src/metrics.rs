//! The gateway's Prometheus metrics, registered into a registry created by the caller.
//!
//! Labels come only from configuration (provider and model names) or closed sets (status
//! codes, limiter names, decisions): never free text.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// `provider`, `model`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Upstream {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
}

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

/// `provider`, `model`, `limit_type`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Hit {
    /// Provider account name.
    pub provider: String,
    /// Model sent upstream.
    pub model: String,
    /// The limiter (`rpm`, `output_tpm`, ..., or `provider` for an upstream 429).
    pub limit_type: String,
}

/// `decision`, `limiter`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Decision {
    /// `admitted`, `rejected`, `never_fits`, `provider_rejected`, `store_error`.
    pub decision: &'static str,
    /// The limiter that refused, or empty.
    pub limiter: String,
}

/// Counters of the request path.
#[derive(Debug, Default)]
pub struct Metrics {
    /// `llm_requests_total{provider,model,status}`.
    pub requests: Family<Outcome, Counter>,
    /// `llm_tokens_reserved_total{provider,model}`.
    pub tokens_reserved: Family<Upstream, Counter>,
    /// `llm_tokens_used_total{provider,model}`.
    pub tokens_used: Family<Upstream, Counter>,
    /// `llm_rate_limit_hits_total{provider,model,limit_type}`.
    pub rate_limit_hits: Family<Hit, Counter>,
    /// `sluice_decisions_total{decision,limiter}`.
    pub decisions: Family<Decision, Counter>,
}

impl Metrics {
    /// Registers every metric into `registry`.
    #[must_use]
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register("llm_requests", "Requests by provider, model and status returned", metrics.requests.clone());
        registry.register(
            "llm_tokens_reserved",
            "Tokens reserved at admission (input estimate + output reservation)",
            metrics.tokens_reserved.clone(),
        );
        registry.register(
            "llm_tokens_used",
            "Tokens really used, as the provider reported (input + output)",
            metrics.tokens_used.clone(),
        );
        registry.register(
            "llm_rate_limit_hits",
            "Requests refused by a limit, by the limiter (provider = an upstream 429)",
            metrics.rate_limit_hits.clone(),
        );
        registry.register("sluice_decisions", "Admission decisions by outcome and limiter", metrics.decisions.clone());
        metrics
    }

    /// Counts one admission decision.
    pub fn decision(&self, decision: &'static str, limiter: &str) {
        self.decisions.get_or_create(&Decision { decision, limiter: limiter.to_owned() }).inc();
    }
}

/// The counters of one deployment, resolved once so the request path does no lookups.
#[derive(Debug, Clone)]
pub struct RouteCounters {
    /// Labels of the deployment.
    pub labels: Upstream,
    /// Its `llm_tokens_reserved_total`.
    pub reserved: Counter<u64, AtomicU64>,
    /// Its `llm_tokens_used_total`.
    pub used: Counter<u64, AtomicU64>,
}

impl RouteCounters {
    /// Resolves the counters for `labels`.
    #[must_use]
    pub fn new(metrics: &Metrics, labels: Upstream) -> Self {
        let reserved = metrics.tokens_reserved.get_or_create(&labels).clone();
        let used = metrics.tokens_used.get_or_create(&labels).clone();
        Self { labels, reserved, used }
    }
}
