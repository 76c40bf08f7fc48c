//! The strict simulated LLM provider: the upstream every sluice test, benchmark and demo
//! runs against, and the `sluice simulate-provider` command.
//!
//! It serves the OpenAI shape (`/v1/chat/completions`, `/v1/embeddings`, `/v1/models`) and
//! the Anthropic shape (`/v1/messages`) over real HTTP/1 (axum on hyper), enforcing
//! per-model limits the way the providers do: continuously refilled per-minute (and
//! per-day) buckets plus a short sliding window that rejects bursts, with the providers'
//! headers and error bodies. It injects faults at configured rates from a seeded RNG and
//! counts everything it did (`GET /_stats`).
//!
//! # Layout
//! - pure core, no IO: [`limits`] (bucket and window math), [`admission`] (all dimensions
//!   of a model, all-or-nothing), [`wire_time`] (Go durations, RFC 3339), [`tokens`],
//!   [`latency`], [`faults`], [`stats`], [`prompt_cache`] (per-model prompt caches),
//!   [`clock`] (the one place real time is read);
//! - configuration: [`config`] (serde, `deny_unknown_fields`) and [`validate`];
//! - HTTP: [`server`] (accept loop, [`SimHandle`]), `conn` (per-connection hyper service
//!   that can reset the socket), `app` (routes), `openai`, `anthropic`, `cloud` (the
//!   Azure and Gemini URL surfaces over the OpenAI shape), `respond`;
//! - [`cli`]: `sluice simulate-provider`.
//!
//! # Time
//! Limits run on simulated time: `real elapsed × time_scale`. Durations on the wire
//! (`retry-after`, reset headers) are converted back to real time; latency settings are
//! real milliseconds.
//!
//! # Example
//! ```no_run
//! use sluice_sim::{Limits, ModelConfig, SimConfig, SimProvider};
//! # async fn demo() -> anyhow::Result<()> {
//! let model = ModelConfig::openai("gpt-4o-mini").with_limits(Limits { rpm: Some(500), tpm: Some(30_000), ..Limits::default() });
//! let sim = SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await?;
//! println!("{}/v1/chat/completions", sim.url());
//! assert_eq!(sim.stats().served, 0);
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

pub mod admission;
pub mod anthropic;
mod api_error;
mod app;
pub mod bedrock;
pub mod cli;
pub mod clock;
mod cloud;
pub mod config;
mod config_error;
mod conn;
pub mod errors;
pub mod faults;
mod flow;
pub mod google;
pub mod latency;
pub mod limits;
pub mod openai;
mod pacer;
pub mod prompt_cache;
mod respond;
pub mod server;
pub mod sim;
pub mod stats;
pub mod text;
pub mod tokens;
pub mod tools;
pub mod validate;
pub mod wire_time;

pub use clock::{Clock, FakeClock, RealClock};
pub use config::{
    Completion, FaultConfig, Flavor, LatencyConfig, Limits, ModelConfig, OutputAccounting, Shape, SimConfig, TokenRule,
    WindowKind,
};
pub use server::{SimHandle, SimProvider};
pub use stats::StatsSnapshot;
pub use validate::ConfigError;
