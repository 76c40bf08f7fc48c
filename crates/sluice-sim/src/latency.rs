//! Latency and completion-length models, drawn from an injected RNG.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::config_error::ConfigError;

/// Default tokens per streamed chunk.
pub const DEFAULT_CHUNK_TOKENS: u32 = 3;
/// Default completion length.
pub const DEFAULT_COMPLETION_TOKENS: u64 = 16;

/// Time to first token plus a per-output-token delay, in real milliseconds (not scaled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyConfig {
    /// Time to first token, ms.
    #[serde(default)]
    pub ttft_ms: f64,
    /// Delay per output token, ms.
    #[serde(default)]
    pub per_token_ms: f64,
    /// Relative jitter: each delay is scaled by a uniform factor in `1 ± jitter`.
    #[serde(default)]
    pub jitter: f64,
    /// Tokens per streamed chunk.
    #[serde(default = "default_chunk_tokens")]
    pub chunk_tokens: u32,
}

fn default_chunk_tokens() -> u32 {
    DEFAULT_CHUNK_TOKENS
}

impl Default for LatencyConfig {
    fn default() -> Self {
        Self { ttft_ms: 0.0, per_token_ms: 0.0, jitter: 0.0, chunk_tokens: DEFAULT_CHUNK_TOKENS }
    }
}

impl LatencyConfig {
    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(self.ttft_ms) || !ok(self.per_token_ms) {
            return Err(ConfigError(format!("{at}: latency values must be non-negative")));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(ConfigError(format!("{at}: jitter must be within 0..=1")));
        }
        if self.chunk_tokens == 0 {
            return Err(ConfigError(format!("{at}: chunk_tokens must be positive")));
        }
        Ok(())
    }

    /// Whether every delay is zero (respond immediately).
    #[must_use]
    pub fn is_zero(&self) -> bool {
        self.ttft_ms <= 0.0 && self.per_token_ms <= 0.0
    }

    /// Draws the delays of one response.
    pub fn draw(&self, rng: &mut impl Rng) -> Delays {
        if self.is_zero() {
            return Delays::default();
        }
        let factor = if self.jitter > 0.0 { 1.0 + self.jitter * (rng.random::<f64>() * 2.0 - 1.0) } else { 1.0 };
        Delays { ttft: ms(self.ttft_ms * factor), per_token: ms(self.per_token_ms * factor) }
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64((v.max(0.0) / 1000.0).min(1e6))
}

/// Drawn delays of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Delays {
    /// Before the first token.
    pub ttft: Duration,
    /// Per output token.
    pub per_token: Duration,
}

impl Delays {
    /// Total time to generate `tokens` tokens.
    #[must_use]
    pub fn total(&self, tokens: u64) -> Duration {
        self.ttft + self.per_token.saturating_mul(u32::try_from(tokens).unwrap_or(u32::MAX))
    }
}

/// Distribution of completion lengths (in tokens), always capped by `max_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Completion {
    /// Always `tokens`.
    Fixed {
        /// Completion length.
        tokens: u64,
    },
    /// Uniform in `min..=max`.
    Uniform {
        /// Shortest.
        min: u64,
        /// Longest.
        max: u64,
    },
    /// Approximately normal (sum of uniforms), clamped at 1.
    Normal {
        /// Mean length.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
    },
}

impl Default for Completion {
    fn default() -> Self {
        Self::Fixed { tokens: DEFAULT_COMPLETION_TOKENS }
    }
}

impl Completion {
    pub(crate) fn validate(&self, at: &str) -> Result<(), ConfigError> {
        let bad = match self {
            Self::Fixed { tokens } => *tokens == 0,
            Self::Uniform { min, max } => *min == 0 || min > max,
            Self::Normal { mean, stddev } => {
                !(mean.is_finite() && *mean >= 1.0 && stddev.is_finite() && *stddev >= 0.0)
            }
        };
        if bad {
            return Err(ConfigError(format!("{at}: completion lengths must be at least 1 (and min <= max)")));
        }
        Ok(())
    }

    /// Draws a length, capped at `cap`.
    pub fn draw(&self, rng: &mut impl Rng, cap: u64) -> u64 {
        let n = match self {
            Self::Fixed { tokens } => *tokens,
            Self::Uniform { min, max } => rng.random_range(*min..=*max),
            Self::Normal { mean, stddev } => {
                // Irwin–Hall: the sum of 12 uniforms minus 6 is close to a standard normal.
                let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                round_positive(mean + stddev * z)
            }
        };
        n.clamp(1, cap.max(1))
    }
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to a small positive range")]
fn round_positive(v: f64) -> u64 {
    v.round().clamp(1.0, 1e12) as u64
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn zero_latency_draws_nothing() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(LatencyConfig::default().draw(&mut rng), Delays::default());
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let mut rng = StdRng::seed_from_u64(1);
        let cfg = LatencyConfig { ttft_ms: 100.0, per_token_ms: 10.0, jitter: 0.2, chunk_tokens: 3 };
        for _ in 0..1000 {
            let d = cfg.draw(&mut rng);
            assert!(d.ttft >= Duration::from_millis(80) && d.ttft <= Duration::from_millis(120));
        }
        let d = Delays { ttft: Duration::from_millis(100), per_token: Duration::from_millis(10) };
        assert_eq!(d.total(5), Duration::from_millis(150));
    }

    #[test]
    fn completion_lengths_respect_the_cap() {
        let mut rng = StdRng::seed_from_u64(7);
        assert_eq!(Completion::Fixed { tokens: 50 }.draw(&mut rng, 20), 20);
        let uniform = Completion::Uniform { min: 10, max: 20 };
        let normal = Completion::Normal { mean: 100.0, stddev: 10.0 };
        let mut sum = 0;
        for _ in 0..1000 {
            assert!((10..=20).contains(&uniform.draw(&mut rng, 1000)));
            let n = normal.draw(&mut rng, 1000);
            assert!((40..=160).contains(&n));
            sum += n;
        }
        assert!((95_000..=105_000).contains(&sum), "{sum}");
    }
}
