//! The configuration file as written: serde structs, strict about unknown fields.

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub org: RawOrg,
    #[serde(default, rename = "providers")]
    pub providers: Vec<RawProvider>,
    #[serde(default)]
    pub accounts: Vec<RawAccount>,
    #[serde(default)]
    pub deployments: Vec<RawDeployment>,
    #[serde(default)]
    pub models: Vec<RawModel>,
    #[serde(default)]
    pub tenants: Vec<RawTenant>,
    #[serde(default)]
    pub keys: Vec<RawKey>,
    #[serde(default)]
    pub classes: Vec<RawClass>,
    #[serde(default)]
    pub jobs: RawJobs,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub telemetry: RawTelemetry,
    #[serde(default)]
    pub budgets: RawBudgets,
    #[serde(default)]
    pub pricing: RawPricing,
    #[serde(default)]
    pub usage: RawUsageSettings,
    pub ledger: Option<RawLedger>,
    #[serde(default)]
    pub metrics: RawMetrics,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub legacy_aliases: Option<bool>,
}

/// `[ledger]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLedger {
    pub url: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub flush_every: Option<Spanned<String>>,
}

/// `[pricing]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPricing {
    pub currency: Option<Spanned<String>>,
}

/// `[usage]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUsageSettings {
    pub retention_days: Option<Spanned<u64>>,
    pub flush_interval: Option<Spanned<String>>,
}

/// Settings of every money budget.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBudgets {
    pub time_zone: Option<Spanned<String>>,
    pub warn_at: Option<Spanned<Vec<f64>>>,
    pub webhook_url: Option<Spanned<String>>,
    pub check_interval: Option<Spanned<String>>,
}

/// A scope's money budgets, in the price tables' currency.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    pub day: Option<Spanned<f64>>,
    pub month: Option<Spanned<f64>>,
}

/// Trace export.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    pub otlp_endpoint: Option<Spanned<String>>,
}

/// The operator surface: admin API and dashboard.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub key_sha256: Option<Spanned<String>>,
    pub listen: Option<Spanned<String>>,
    pub metrics_token_env: Option<Spanned<String>>,
    pub metrics_token_file: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<Spanned<String>>,
    pub max_body_bytes: Option<Spanned<u64>>,
    pub upstream_timeout: Option<Spanned<String>>,
    pub connect_timeout: Option<Spanned<String>>,
    pub lease: Option<Spanned<String>>,
    pub shutdown_grace: Option<Spanned<String>>,
    pub idempotency_ttl: Option<Spanned<String>>,
    pub tls_cert: Option<Spanned<String>>,
    pub tls_key: Option<Spanned<String>>,
    pub upstream_ca_file: Option<Spanned<String>>,
    pub upstream_proxy: Option<Spanned<String>>,
    pub idempotency_wait: Option<Spanned<String>>,
    pub body_read_timeout: Option<Spanned<String>>,
    pub body_min_rate: Option<Spanned<u64>>,
    pub max_connections: Option<Spanned<u64>>,
    pub max_connections_per_peer: Option<Spanned<u64>>,
    pub access_log: Option<bool>,
    pub access_log_sample: Option<Spanned<f64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub kind: Option<Spanned<String>>,
    pub url: Option<Spanned<String>>,
    pub cluster: Option<Spanned<Vec<String>>>,
    pub prefix: Option<Spanned<String>>,
    pub timeout: Option<Spanned<String>>,
    pub on_unavailable: Option<Spanned<String>>,
    pub instances: Option<Spanned<u64>>,
    pub tls_ca_file: Option<Spanned<String>>,
    pub tls_cert_file: Option<Spanned<String>>,
    pub tls_key_file: Option<Spanned<String>>,
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
    pub password_file: Option<Spanned<String>>,
    pub sentinel: Option<RawSentinel>,
}

/// `[store.sentinel]`: a master found through Sentinel.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSentinel {
    pub master: Spanned<String>,
    pub nodes: Spanned<Vec<String>>,
    pub db: Option<Spanned<i64>>,
    pub username: Option<Spanned<String>>,
    pub password_env: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOrg {
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub limits: RawLimits,
}

/// Limits of one scope. Names follow the providers' own vocabulary.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub rpm: Option<Spanned<u64>>,
    pub tpm: Option<Spanned<u64>>,
    pub input_tpm: Option<Spanned<u64>>,
    pub output_tpm: Option<Spanned<u64>>,
    pub rpd: Option<Spanned<u64>>,
    pub tpd: Option<Spanned<u64>>,
    pub concurrency: Option<Spanned<u64>>,
    pub burst_seconds: Option<Spanned<f64>>,
    pub budget: Option<RawBudget>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub name: Spanned<String>,
    pub kind: Spanned<String>,
    pub base_url: Spanned<String>,
    pub api_key_env: Option<Spanned<String>>,
    pub api_key_file: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    pub api_surface: Option<Spanned<String>>,
    pub api_version: Option<Spanned<String>>,
    pub service_account_file: Option<Spanned<String>>,
    pub project: Option<Spanned<String>>,
    pub region: Option<Spanned<String>>,
    pub publisher: Option<Spanned<String>>,
    pub aws_credentials_file: Option<Spanned<String>>,
    pub bedrock_api: Option<Spanned<String>>,
    pub ca_file: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeployment {
    pub name: Spanned<String>,
    pub provider: Spanned<String>,
    pub model: Spanned<String>,
    pub azure_deployment: Option<Spanned<String>>,
    pub output_weight: Option<Spanned<u64>>,
    pub account: Option<Spanned<String>>,
    #[serde(default)]
    pub limits: RawLimits,
    pub tokenizer: Option<Spanned<String>>,
    pub input_safety_factor: Option<Spanned<f64>>,
    pub output_counting: Option<Spanned<String>>,
    pub attempt_timeout: Option<Spanned<String>>,
    pub stream_idle_timeout: Option<Spanned<String>>,
    pub stream_drain_timeout: Option<Spanned<String>>,
    pub breaker_failures: Option<Spanned<u64>>,
    pub breaker_cooldown: Option<Spanned<String>>,
    pub preset: Option<Spanned<String>>,
    pub adopt_provider_limits: Option<Spanned<bool>>,
    pub decrease_factor: Option<Spanned<f64>>,
    pub recovery: Option<Spanned<String>>,
    pub min_factor: Option<Spanned<f64>>,
    pub ramp_up_per_second: Option<Spanned<f64>>,
    pub output_estimate: Option<Spanned<String>>,
    pub output_warmup: Option<Spanned<u64>>,
    pub cache_aware_input: Option<Spanned<bool>>,
    pub learn_window: Option<Spanned<bool>>,
    pub window_floor: Option<Spanned<String>>,
    pub window_hold: Option<Spanned<String>>,
    pub window_regrow: Option<Spanned<String>>,
    pub price: Option<Spanned<RawPrice>>,
    pub region: Option<Spanned<String>>,
    pub labels: Option<Vec<Spanned<String>>>,
    pub context_window: Option<Spanned<u64>>,
}

/// A deployment's prices per 1 M tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrice {
    pub input: Option<Spanned<f64>>,
    pub output: Option<Spanned<f64>>,
    pub cached_input: Option<Spanned<f64>>,
    pub reasoning: Option<Spanned<f64>>,
}

/// A provider account: a quota several deployments share.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccount {
    pub name: Spanned<String>,
    #[serde(default)]
    pub limits: RawLimits,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub name: Spanned<String>,
    pub deployment: Option<Spanned<String>>,
    /// A pool: deployment names, or tables `{ deployment, weight, tier }`, read member by
    /// member in validation (so each error names its member and field).
    pub deployments: Option<Spanned<Vec<toml::Value>>>,
    pub strategy: Option<Spanned<String>>,
    pub affinity_header: Option<Spanned<String>>,
    pub default_max_tokens: Option<Spanned<u64>>,
    pub context_reserve_tokens: Option<Spanned<u64>>,
    pub passthrough: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub fallbacks: Vec<RawFallback>,
    pub degrade_to: Option<RawDegrade>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFallback {
    pub deployment: Spanned<String>,
    pub when: Spanned<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDegrade {
    pub deployment: Spanned<String>,
    #[serde(default)]
    pub classes: Vec<Spanned<String>>,
    #[serde(default)]
    pub tasks: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTenant {
    pub name: Spanned<String>,
    pub weight: Option<Spanned<u64>>,
    #[serde(default)]
    pub limits: RawLimits,
    /// Regions one of which a deployment serving it must be in.
    pub regions: Option<Spanned<Vec<Spanned<String>>>>,
    /// Labels a deployment serving it must all carry.
    pub labels: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub teams: Vec<RawTeam>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTeam {
    pub name: Spanned<String>,
    #[serde(default)]
    pub limits: RawLimits,
    /// Regions one of which a deployment serving it must be in.
    pub regions: Option<Spanned<Vec<Spanned<String>>>>,
    /// Labels a deployment serving it must all carry.
    pub labels: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKey {
    pub id: Spanned<String>,
    pub tenant: Spanned<String>,
    pub team: Option<Spanned<String>>,
    pub sha256: Spanned<String>,
    pub class: Option<Spanned<String>>,
    #[serde(default)]
    pub limits: RawLimits,
    /// Regions one of which a deployment serving it must be in.
    pub regions: Option<Spanned<Vec<Spanned<String>>>>,
    /// Labels a deployment serving it must all carry.
    pub labels: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClass {
    pub name: Spanned<String>,
    pub max_wait: Option<Spanned<String>>,
    pub priority: Option<Spanned<u8>>,
    pub share: Option<Spanned<f64>>,
    pub max_queue: Option<Spanned<u64>>,
    pub max_attempts: Option<Spanned<u64>>,
    pub retry_attempts: Option<Spanned<u64>>,
    pub retry_within: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJobs {
    pub path: Option<Spanned<String>>,
    pub workers: Option<Spanned<u64>>,
    pub visibility_timeout: Option<Spanned<String>>,
    pub max_file_bytes: Option<Spanned<u64>>,
    pub max_tenant_file_bytes: Option<Spanned<u64>>,
    pub max_batch_lines: Option<Spanned<u64>>,
}
