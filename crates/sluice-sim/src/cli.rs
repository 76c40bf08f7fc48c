//! `sluice simulate-provider`: run the simulated provider from a config file or quick flags.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::clock::RealClock;
use crate::config::{LatencyConfig, Limits, ModelConfig, Shape, SimConfig};
use crate::server::SimProvider;

/// Model served when no `--config` and no `--model` is given.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

/// Options of `sluice simulate-provider`.
///
/// The first stdout line is `listening on http://HOST:PORT`; scripts read it to find the port.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// TOML config (models, limits, latency, faults); see docs/simulated-provider.md.
    /// Without it, one model is built from the quick flags (--model, --shape, --rpm, ...).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to bind; 0 picks a free port.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Simulated minutes per real minute: 10 enforces per-minute limits per 6 real seconds.
    /// Overrides the file's `time_scale`.
    #[arg(long, value_name = "FACTOR")]
    pub time_scale: Option<f64>,
    /// Seed of fault, completion-length and jitter draws. Overrides the file's `seed`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Quick model: its name [default: gpt-4o-mini].
    #[arg(long, conflicts_with = "config")]
    pub model: Option<String>,
    /// Quick model: API shape.
    #[arg(long, value_enum, conflicts_with = "config")]
    pub shape: Option<ShapeArg>,
    /// Quick model: requests per minute.
    #[arg(long, conflicts_with = "config")]
    pub rpm: Option<u64>,
    /// Quick model: tokens per minute (openai shape; input tokens per minute on an anthropic model).
    #[arg(long, conflicts_with = "config")]
    pub tpm: Option<u64>,
    /// Quick model: input tokens per minute (anthropic shape).
    #[arg(long, conflicts_with = "config")]
    pub itpm: Option<u64>,
    /// Quick model: output tokens per minute (anthropic shape).
    #[arg(long, conflicts_with = "config")]
    pub otpm: Option<u64>,
    /// Quick model: time to first token, real milliseconds.
    #[arg(long, conflicts_with = "config")]
    pub ttft_ms: Option<f64>,
    /// Quick model: delay per output token, real milliseconds.
    #[arg(long, conflicts_with = "config")]
    pub per_token_ms: Option<f64>,
}

/// API shape on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShapeArg {
    /// OpenAI (`/v1/chat/completions`, `/v1/embeddings`).
    Openai,
    /// Anthropic (`/v1/messages`).
    Anthropic,
}

impl SimArgs {
    /// The configuration these arguments describe.
    ///
    /// # Errors
    /// When the file cannot be read or the resulting config is invalid.
    pub fn config(&self) -> anyhow::Result<SimConfig> {
        let mut config = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                SimConfig::from_toml_str(&text)?
            }
            None => SimConfig { models: vec![self.quick_model()], ..SimConfig::default() },
        };
        config.time_scale = self.time_scale.unwrap_or(config.time_scale);
        config.seed = self.seed.or(config.seed);
        config.validate()?;
        Ok(config)
    }

    fn quick_model(&self) -> ModelConfig {
        let name = self.model.as_deref().unwrap_or(DEFAULT_MODEL);
        let mut model = match self.shape {
            Some(ShapeArg::Anthropic) => ModelConfig::anthropic(name),
            _ => ModelConfig::openai(name),
        };
        model.limits = Limits { rpm: self.rpm, tpm: self.tpm, itpm: self.itpm, otpm: self.otpm, ..Limits::default() };
        if model.shape == Shape::Anthropic && model.limits.tpm.is_some() {
            model.limits.itpm = model.limits.itpm.or(model.limits.tpm);
            model.limits.tpm = None;
        }
        if self.ttft_ms.is_some() || self.per_token_ms.is_some() {
            model.latency = Some(LatencyConfig {
                ttft_ms: self.ttft_ms.unwrap_or(0.0),
                per_token_ms: self.per_token_ms.unwrap_or(0.0),
                ..LatencyConfig::default()
            });
        }
        model
    }
}

/// Runs the simulated provider until interrupted (Ctrl-C).
///
/// # Errors
/// When the configuration is invalid or the socket cannot be bound.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let config = args.config()?;
    let listener = TcpListener::bind((args.host, args.port))
        .await
        .with_context(|| format!("binding {}:{}", args.host, args.port))?;
    let handle = SimProvider::serve(config, listener, Arc::new(RealClock::new()))?;
    announce(&handle.url())?;
    tokio::signal::ctrl_c().await?;
    handle.shutdown().await;
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the one stdout line scripts read to find the port")]
fn announce(url: &str) -> anyhow::Result<()> {
    println!("listening on {url}");
    std::io::stdout().flush()?;
    Ok(())
}
