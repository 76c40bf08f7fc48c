//! Output reservations: `strict` reserves `max_tokens`; `p95` reserves the 95th percentile
//! of the route's observed outputs, capped by `max_tokens`, once enough were observed.
//! Settlement corrects either way (unused capacity returns, overruns become debt).
//!
//! `p95` is meaningful only where the provider counts generated tokens (Anthropic OTPM,
//! `output_counting = "actual"`): a provider that charges `max_tokens` on arrival (OpenAI,
//! Azure) would see more than sluice reserved, and answer 429.

use crate::quantile::QuantileSketch;

/// How output is reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputEstimate {
    /// Reserve `max_tokens`.
    #[default]
    Strict,
    /// Reserve min(`max_tokens`, p95 of observed output) after `warmup` observations.
    P95 {
        /// Observations before the p95 is trusted.
        warmup: u64,
    },
}

/// Observations after which the weight of older ones has halved.
pub const HALF_LIFE: u64 = 1_000;
/// The quantile reserved in `p95` mode.
pub const QUANTILE: f64 = 0.95;

/// A route's output estimator.
#[derive(Debug, Clone)]
pub struct OutputEstimator {
    mode: OutputEstimate,
    sketch: QuantileSketch,
}

impl OutputEstimator {
    /// An estimator in `mode` that has observed nothing.
    #[must_use]
    pub fn new(mode: OutputEstimate) -> Self {
        Self { mode, sketch: QuantileSketch::new(HALF_LIFE) }
    }

    /// The mode.
    #[must_use]
    pub fn mode(&self) -> OutputEstimate {
        self.mode
    }

    /// Output tokens to reserve for a request allowing `max_tokens`: never more than
    /// `max_tokens`, at least 1 when `max_tokens` is.
    #[must_use]
    pub fn reservation(&self, max_tokens: u64) -> u64 {
        match self.mode {
            OutputEstimate::Strict => max_tokens,
            OutputEstimate::P95 { warmup } if self.sketch.observed() < warmup.max(1) => max_tokens,
            OutputEstimate::P95 { .. } => {
                let p95 = self.sketch.quantile(QUANTILE).unwrap_or(max_tokens);
                p95.max(1).min(max_tokens)
            }
        }
    }

    /// Records the output a finished request really generated.
    pub fn observe(&mut self, output_tokens: u64) {
        self.sketch.observe(output_tokens);
    }

    /// Observations so far.
    #[must_use]
    pub fn observed(&self) -> u64 {
        self.sketch.observed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_reserves_max_tokens_and_p95_learns_after_warmup() {
        let mut strict = OutputEstimator::new(OutputEstimate::Strict);
        let mut p95 = OutputEstimator::new(OutputEstimate::P95 { warmup: 50 });
        for i in 0..49 {
            strict.observe(100 + i % 10);
            p95.observe(100 + i % 10);
        }
        assert_eq!(p95.reservation(400), 400, "not warmed up");
        p95.observe(100);
        assert!((109..=120).contains(&p95.reservation(400)), "{}", p95.reservation(400));
        assert_eq!(p95.reservation(50), 50, "capped by max_tokens");
        assert_eq!(strict.reservation(400), 400);
        assert_eq!(p95.reservation(0), 0);
    }
}
