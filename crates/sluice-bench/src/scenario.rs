//! The demo's provider and gateway configuration, derived from its arguments.
//!
//! Time: the simulated provider runs `time_scale` simulated minutes per real minute, so
//! its 500 RPM / 30,000 TPM become `500 × time_scale` and `30,000 × time_scale` per real
//! minute. The gateway is configured with those real-time figures.

use sluice_sim::{Completion, LatencyConfig, Limits, ModelConfig, SimConfig};

use crate::harness::key_hash;

/// The model name the clients send (the simulator's model and the gateway's profile).
pub const MODEL: &str = "gpt-4o";
/// Gateway key of the interactive users.
pub const INTERACTIVE_KEY: &str = "sk-demo-interactive";
/// Gateway key of the batch job.
pub const BATCH_KEY: &str = "sk-demo-batch";
/// The gateway's burst at the deployment, in simulated seconds of the limit.
///
/// The simulator refuses more than a tenth of the minute's budget (6 s worth) inside any
/// simulated second; a burst of 4 s worth plus one second of refill stays below that
/// with a second's worth to spare for scheduling jitter.
pub const DEPLOYMENT_BURST_SIM_SECONDS: f64 = 4.0;

/// The provider side of the scenario.
#[derive(Debug, Clone, Copy)]
pub struct Provider {
    /// Requests per simulated minute.
    pub rpm: u64,
    /// Tokens per simulated minute.
    pub tpm: u64,
    /// Simulated minutes per real minute.
    pub time_scale: f64,
    /// Time to first token, real ms.
    pub ttft_ms: f64,
    /// Delay per output token, real ms.
    pub per_token_ms: f64,
    /// Mean completion length, tokens (capped by each request's `max_tokens`).
    pub completion_mean: f64,
    /// The provider enforces its per-minute limits quantized, this many simulated seconds'
    /// worth at a time; `None`: its sliding window (a tenth of the minute per second).
    pub window: Option<f64>,
    /// The deployment's burst at the gateway, in simulated seconds of the limit.
    pub burst_sim_seconds: f64,
}

impl Provider {
    /// Requests per real second.
    #[must_use]
    pub fn rps(&self) -> f64 {
        self.rpm as f64 * self.time_scale / 60.0
    }

    /// Tokens per real second.
    #[must_use]
    pub fn tps(&self) -> f64 {
        self.tpm as f64 * self.time_scale / 60.0
    }

    /// The simulated provider: one OpenAI-shaped model with these limits and latency.
    #[must_use]
    pub fn sim_config(&self, seed: u64) -> SimConfig {
        let mut limits = Limits { rpm: Some(self.rpm), tpm: Some(self.tpm), ..Limits::default() };
        if let Some(window) = self.window {
            limits = limits.quantized(window * 1000.0);
        }
        let mut model = ModelConfig::openai(MODEL).with_limits(limits);
        model.completion = Completion::Normal { mean: self.completion_mean, stddev: self.completion_mean / 4.0 };
        let latency = LatencyConfig {
            ttft_ms: self.ttft_ms,
            per_token_ms: self.per_token_ms,
            jitter: 0.2,
            ..LatencyConfig::default()
        };
        SimConfig {
            time_scale: self.time_scale,
            seed: Some(seed),
            latency,
            models: vec![model],
            ..SimConfig::default()
        }
    }

    /// The gateway in front of the simulator at `sim_url`: the provider's limits in real
    /// time on the deployment; the batch class waits in the queue (up to 10 minutes) and
    /// may use only `batch_share` of the deployment's burst, so interactive requests always
    /// find headroom; batch still gets every token interactive traffic leaves.
    #[must_use]
    ///
    /// `store` is the `[store]` table ([`memory_store`] or [`redis_store`]).
    pub fn gateway_config(&self, sim_url: &str, batch_share: f64, store: &str) -> String {
        let scaled = |v: u64| (v as f64 * self.time_scale).round() as u64;
        let (rpm, tpm) = (scaled(self.rpm), scaled(self.tpm));
        let burst = self.burst_sim_seconds / self.time_scale;
        // The default share of a lower class is left to the default, so a run with it is
        // a run of sluice's defaults.
        let default_share = f64::from(sluice_config::LOWER_CLASS_SHARE_PERMILLE) / 1000.0;
        let share =
            if (batch_share - default_share).abs() < 1e-9 { String::new() } else { format!("share = {batch_share}") };
        format!(
            r#"
[org]
name = "demo"

{store}

[[providers]]
name = "sim"
kind = "openai"
base_url = "{sim_url}"
api_key_file = "{{key_file}}"

[[deployments]]
name = "sim-{MODEL}"
provider = "sim"
model = "{MODEL}"
limits = {{ rpm = {rpm}, tpm = {tpm}, burst_seconds = {burst} }}

[[models]]
name = "{MODEL}"
deployment = "sim-{MODEL}"

[[tenants]]
name = "acme"

  [[tenants.teams]]
  name = "assistants"

  [[tenants.teams]]
  name = "reports"

[[classes]]
name = "interactive"
max_wait = "5s"

[[classes]]
name = "batch"
priority = 5
max_wait = "10m"
{share}

[[keys]]
id = "assistants-1"
tenant = "acme"
team = "assistants"
class = "interactive"
sha256 = "{interactive}"

[[keys]]
id = "reports-batch-1"
tenant = "acme"
team = "reports"
class = "batch"
sha256 = "{batch}"
"#,
            interactive = key_hash(INTERACTIVE_KEY),
            batch = key_hash(BATCH_KEY),
        )
    }
}

/// The `[store]` table of in-process buckets (each gateway its own).
#[must_use]
pub fn memory_store() -> String {
    "[store]\nkind = \"memory\"".to_owned()
}

/// The `[store]` table of a Redis server shared by `instances` gateways, under `prefix`
/// (one per run, so a reused server holds no earlier run's buckets).
#[must_use]
pub fn redis_store(url: &str, prefix: &str, instances: usize) -> String {
    format!(
        "[store]\nkind = \"redis\"\nurl = \"{url}\"\nprefix = \"{prefix}\"\n\
         on_unavailable = \"fail_closed\"\ninstances = {instances}"
    )
}
