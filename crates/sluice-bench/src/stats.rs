//! Exact percentiles over recorded samples (the runs are small enough to keep every one).

use std::time::Duration;

use serde::Serialize;

/// Latency samples in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    micros: Vec<u64>,
}

impl Samples {
    /// Records one latency.
    pub fn record(&mut self, latency: Duration) {
        self.micros.push(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
    }

    /// Adds all samples of `other`.
    pub fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
    }

    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Whether nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    /// The summary: p50, p95, p99, p99.9 and max in milliseconds.
    #[must_use]
    pub fn summary(mut self) -> Summary {
        self.micros.sort_unstable();
        let at = |q: f64| quantile(&self.micros, q);
        Summary {
            count: self.micros.len(),
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: at(1.0),
        }
    }
}

/// Percentiles of one set of samples, in milliseconds (`None` without samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 95th percentile.
    pub p95_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// 99.9th percentile.
    pub p999_ms: Option<f64>,
    /// Largest sample.
    pub max_ms: Option<f64>,
}

/// The nearest-rank quantile `q` of sorted microsecond samples, in milliseconds.
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "small counts"
)]
fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted.get(index).map(|&us| us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s = Samples::default();
        for ms in 1..=100 {
            s.record(Duration::from_millis(ms));
        }
        let sum = s.summary();
        assert_eq!(sum.count, 100);
        assert_eq!(sum.p50_ms, Some(50.0));
        assert_eq!(sum.p99_ms, Some(99.0));
        assert_eq!(sum.p999_ms, Some(100.0));
        assert_eq!(sum.max_ms, Some(100.0));
    }

    #[test]
    fn empty_has_no_percentiles() {
        assert_eq!(Samples::default().summary().p50_ms, None);
    }
}
