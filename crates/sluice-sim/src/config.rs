//! Configuration: serde structs (strict, `deny_unknown_fields`) plus validation.
//!
//! Process settings (host, port) live on the command line; this file holds the simulated
//! provider's policy: models, their limits, latency and faults.

use serde::{Deserialize, Serialize};

pub use crate::faults::FaultConfig;
pub use crate::latency::{Completion, LatencyConfig};
use crate::tokens::Encoding;

/// Default short window length, simulated milliseconds.
pub const DEFAULT_WINDOW_MS: f64 = 1000.0;
/// Default fraction of the per-minute budget allowed inside one short window.
pub const DEFAULT_WINDOW_FRACTION: f64 = 0.1;
/// Default cap on generated tokens when a request sets no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u64 = 1024;
/// Default embedding vector length.
pub const DEFAULT_EMBEDDING_DIMS: usize = 64;
/// Azure derives RPM from TPM: 6 requests per minute per 1,000 tokens per minute.
pub const AZURE_RPM_PER_1000_TPM: u64 = 6;

/// The whole simulated provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Simulated minutes per real minute (10 → per-minute limits apply per 6 real seconds).
    #[serde(default = "one")]
    pub time_scale: f64,
    /// Seed of the random draws (faults, completion lengths, jitter); random when absent.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Latency of models that do not set their own.
    #[serde(default)]
    pub latency: LatencyConfig,
    /// Faults of models that do not set their own.
    #[serde(default)]
    pub faults: FaultConfig,
    /// The models served.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// Google's credentials: Gemini API keys, service accounts for Vertex tokens.
    #[serde(default)]
    pub google: crate::google::auth::GoogleConfig,
    /// Keep each model's admissions per real second and report them, with each model's
    /// busiest provider minute, in `GET /_stats` (`model_timeline`, `busiest_minute`).
    #[serde(default)]
    pub model_timeline: bool,
}

fn one() -> f64 {
    1.0
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            time_scale: 1.0,
            seed: None,
            latency: LatencyConfig::default(),
            faults: FaultConfig::default(),
            models: Vec::new(),
            google: crate::google::auth::GoogleConfig::default(),
            model_timeline: false,
        }
    }
}

/// API shape of a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// `/v1/chat/completions`, `/v1/embeddings`.
    #[default]
    Openai,
    /// `/v1/messages`.
    Anthropic,
}

/// Provider flavour on top of the shape: headers, error bodies, limit derivation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// OpenAI itself.
    Openai,
    /// Azure OpenAI: RPM derived from TPM, Azure error body.
    Azure,
    /// Gemini's OpenAI-compatible API: TPM counts input only, `RESOURCE_EXHAUSTED` bodies.
    Gemini,
    /// Anthropic.
    Anthropic,
    /// AWS Bedrock's Converse API over the Anthropic shape: SigV4, event streams, and a
    /// TPM quota that reserves `max_tokens` and burns output `output_weight`×.
    Bedrock,
}

/// How an OpenAI-shaped request is charged against TPM at admission.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenRule {
    /// Prompt tokens plus `max_tokens` (or `max_completion_tokens`, or `default_max_tokens`).
    #[default]
    PromptPlusMax,
    /// OpenAI's documented rule: max(`max_tokens`, characters of the request / 4).
    MaxOfMaxTokensAndChars,
}

/// When Anthropic output tokens are charged against OTPM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputAccounting {
    /// Actual output, after generation; admission needs a non-empty bucket (current docs).
    #[default]
    Actual,
    /// `max_tokens` at admission, the unused part refunded at the end (older docs).
    MaxTokens,
}

/// Limits of one model. Absent limits are unlimited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests per minute.
    #[serde(default)]
    pub rpm: Option<u64>,
    /// Tokens per minute (OpenAI shape).
    #[serde(default)]
    pub tpm: Option<u64>,
    /// Input tokens per minute (Anthropic shape; cache reads excluded).
    #[serde(default)]
    pub itpm: Option<u64>,
    /// Output tokens per minute (Anthropic shape).
    #[serde(default)]
    pub otpm: Option<u64>,
    /// Requests per day.
    #[serde(default)]
    pub rpd: Option<u64>,
    /// Tokens per day (all admitted tokens).
    #[serde(default)]
    pub tpd: Option<u64>,
    /// Maximum requests in flight.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Status when over `max_concurrency`: 429 or 529.
    #[serde(default = "default_concurrency_status")]
    pub concurrency_status: u16,
    /// Short window length in simulated milliseconds.
    #[serde(default = "default_window_ms")]
    pub window_ms: f64,
    /// Fraction of a per-minute limit allowed inside one short window (1.0 disables it);
    /// a sliding window only.
    #[serde(default = "default_window_fraction")]
    pub window_fraction: f64,
    /// How the short window is enforced.
    #[serde(default)]
    pub window_kind: WindowKind,
}

/// How a model enforces its short window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowKind {
    /// At most `window_fraction` of the limit inside any sliding `window_ms`.
    #[default]
    Sliding,
    /// OpenAI's quantization: the per-minute limit enforced as `window_ms` worth at a time
    /// (60,000 RPM as 1,000 per second) — a short bucket of one window's worth refilled at
    /// the minute's rate. A request above that passes only when the bucket is full (nothing
    /// sent for a window), and leaves it in debt.
    Quantized,
}

fn default_concurrency_status() -> u16 {
    429
}
fn default_window_ms() -> f64 {
    DEFAULT_WINDOW_MS
}
fn default_window_fraction() -> f64 {
    DEFAULT_WINDOW_FRACTION
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            rpm: None,
            tpm: None,
            itpm: None,
            otpm: None,
            rpd: None,
            tpd: None,
            max_concurrency: None,
            concurrency_status: default_concurrency_status(),
            window_ms: DEFAULT_WINDOW_MS,
            window_fraction: DEFAULT_WINDOW_FRACTION,
            window_kind: WindowKind::Sliding,
        }
    }
}

/// One simulated model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The model name clients send.
    pub name: String,
    /// API shape.
    #[serde(default)]
    pub shape: Shape,
    /// Provider flavour; defaults to the shape's own provider.
    #[serde(default)]
    pub flavor: Option<Flavor>,
    /// Rate limits.
    #[serde(default)]
    pub limits: Limits,
    /// TPM admission rule (OpenAI shape).
    #[serde(default)]
    pub token_rule: TokenRule,
    /// OTPM accounting (Anthropic shape).
    #[serde(default)]
    pub output_accounting: OutputAccounting,
    /// Whether rejected requests still use a request unit; default true for OpenAI flavours.
    #[serde(default)]
    pub count_rejected: Option<bool>,
    /// Length of generated completions.
    #[serde(default)]
    pub completion: Completion,
    /// Cap on generated tokens when the request sets no `max_tokens`.
    #[serde(default = "default_max_tokens")]
    pub default_max_tokens: u64,
    /// Fraction of Anthropic input reported as `cache_read_input_tokens` (not charged to ITPM).
    #[serde(default)]
    pub cached_input_fraction: f64,
    /// Keep a real prompt cache per model (deployment), by the provider's rules: reported as
    /// cached tokens, and Anthropic cache reads not charged to ITPM. Off by default; exclusive
    /// with `cached_input_fraction`.
    #[serde(default)]
    pub prompt_cache: bool,
    /// Embedding vector length.
    #[serde(default = "default_embedding_dims")]
    pub embedding_dims: usize,
    /// Tokenizer; defaults from the model name (OpenAI) or cl100k_base (Anthropic).
    #[serde(default)]
    pub encoding: Option<Encoding>,
    /// Latency of this model (overrides the top-level one).
    #[serde(default)]
    pub latency: Option<LatencyConfig>,
    /// Faults of this model (override the top-level ones).
    #[serde(default)]
    pub faults: Option<FaultConfig>,
    /// Bedrock: quota tokens each output token burns against `tpm` (5 for Claude 3.7+).
    #[serde(default = "one_u64")]
    pub output_weight: u64,
}

fn one_u64() -> u64 {
    1
}

fn default_max_tokens() -> u64 {
    DEFAULT_MAX_TOKENS
}
fn default_embedding_dims() -> usize {
    DEFAULT_EMBEDDING_DIMS
}

impl ModelConfig {
    /// An unlimited OpenAI-shaped model.
    #[must_use]
    pub fn openai(name: &str) -> Self {
        Self::new(name, Shape::Openai)
    }

    /// An unlimited Anthropic-shaped model.
    #[must_use]
    pub fn anthropic(name: &str) -> Self {
        Self::new(name, Shape::Anthropic)
    }

    fn new(name: &str, shape: Shape) -> Self {
        Self {
            name: name.to_owned(),
            shape,
            flavor: None,
            limits: Limits::default(),
            token_rule: TokenRule::default(),
            output_accounting: OutputAccounting::default(),
            count_rejected: None,
            completion: Completion::default(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
            cached_input_fraction: 0.0,
            prompt_cache: false,
            embedding_dims: DEFAULT_EMBEDDING_DIMS,
            encoding: None,
            latency: None,
            faults: None,
            output_weight: 1,
        }
    }

    /// Sets the limits.
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The flavour, defaulted from the shape.
    #[must_use]
    pub fn flavor(&self) -> Flavor {
        self.flavor.unwrap_or(match self.shape {
            Shape::Openai => Flavor::Openai,
            Shape::Anthropic => Flavor::Anthropic,
        })
    }

    /// The shape of its limits: Bedrock's quota is a TPM (with RPM), as OpenAI's is.
    #[must_use]
    pub fn quota_shape(&self) -> Shape {
        if self.flavor() == Flavor::Bedrock { Shape::Openai } else { self.shape }
    }

    /// The tokenizer encoding, defaulted from the name and shape.
    #[must_use]
    pub fn encoding(&self) -> Encoding {
        self.encoding.unwrap_or(match self.shape {
            Shape::Openai => Encoding::for_openai_model(&self.name),
            Shape::Anthropic => Encoding::Cl100kBase,
        })
    }

    /// Whether rejected requests use a request unit.
    #[must_use]
    pub fn count_rejected(&self) -> bool {
        self.count_rejected.unwrap_or(self.shape == Shape::Openai)
    }
}

impl Limits {
    /// These limits enforced OpenAI's quantized way, `window_ms` (simulated) worth at a time.
    #[must_use]
    pub fn quantized(mut self, window_ms: f64) -> Self {
        self.window_kind = WindowKind::Quantized;
        self.window_ms = window_ms;
        self
    }

    /// The limits in force for a flavour (Azure derives RPM from TPM when RPM is unset).
    #[must_use]
    pub fn effective(&self, flavor: Flavor) -> Self {
        let mut out = self.clone();
        if flavor == Flavor::Azure && out.rpm.is_none() {
            out.rpm = out.tpm.map(|tpm| (tpm * AZURE_RPM_PER_1000_TPM / 1000).max(1));
        }
        out
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
