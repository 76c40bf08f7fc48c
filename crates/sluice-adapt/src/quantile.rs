//! A streaming quantile sketch in bounded memory: logarithmic buckets with exponential
//! decay.
//!
//! Each value falls into the bucket `[γ^(i-1), γ^i)` (γ = [`GAMMA`], 0 has its own), so a
//! quantile is known to within `γ - 1` relative error and is reported as its bucket's
//! upper bound — never below the true value's bucket, which suits reservations. Newer
//! observations weigh more: an observation's weight halves every `half_life` newer ones,
//! so the sketch follows a route whose outputs change. Memory is [`BUCKETS`] floats.

/// Ratio between bucket bounds (8 % relative error).
pub const GAMMA: f64 = 1.08;
/// Number of buckets: values up to γ^(BUCKETS-1) ≈ 10^8 are told apart; larger ones share
/// the last bucket.
pub const BUCKETS: usize = 240;

/// See the module docs.
#[derive(Debug, Clone)]
pub struct QuantileSketch {
    counts: Vec<f64>,
    total: f64,
    weight: f64,
    growth: f64,
    observed: u64,
}

impl QuantileSketch {
    /// An empty sketch whose observations' weight halves every `half_life` observations
    /// (at least 1).
    #[must_use]
    pub fn new(half_life: u64) -> Self {
        let growth = 2f64.powf(1.0 / half_life.max(1) as f64);
        Self { counts: vec![0.0; BUCKETS], total: 0.0, weight: 1.0, growth, observed: 0 }
    }

    fn bucket(value: u64) -> usize {
        if value == 0 {
            return 0;
        }
        let i = 1 + ((value as f64).ln() / GAMMA.ln()).floor() as usize;
        i.min(BUCKETS - 1)
    }

    fn upper(bucket: usize) -> u64 {
        if bucket == 0 {
            return 0;
        }
        if bucket == BUCKETS - 1 {
            return u64::MAX;
        }
        GAMMA.powi(i32::try_from(bucket).unwrap_or(i32::MAX)).ceil() as u64
    }

    /// Adds one observation.
    pub fn observe(&mut self, value: u64) {
        self.weight *= self.growth;
        if self.weight > 1e100 {
            // Renormalise: only ratios matter.
            let scale = 1.0 / self.weight;
            self.counts.iter_mut().for_each(|c| *c *= scale);
            self.total *= scale;
            self.weight = 1.0;
        }
        self.counts[Self::bucket(value)] += self.weight;
        self.total += self.weight;
        self.observed = self.observed.saturating_add(1);
    }

    /// Observations so far (unweighted).
    #[must_use]
    pub fn observed(&self) -> u64 {
        self.observed
    }

    /// The upper bound of the bucket holding the `q` quantile (`q` in [0, 1]); `None`
    /// before any observation.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.observed == 0 {
            return None;
        }
        let target = q.clamp(0.0, 1.0) * self.total;
        let mut seen = 0.0;
        for (i, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= target && *count > 0.0 {
                return Some(Self::upper(i));
            }
        }
        self.counts.iter().rposition(|c| *c > 0.0).map(Self::upper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_hold_each_value() {
        for v in [1u64, 2, 7, 100, 1_000, 4_096, 123_456, 10_000_000] {
            let b = QuantileSketch::bucket(v);
            assert!(QuantileSketch::upper(b) >= v, "{v}");
            assert!(QuantileSketch::upper(b) as f64 <= v as f64 * GAMMA + 1.0, "{v}");
        }
        assert_eq!(QuantileSketch::bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn follows_a_change_of_distribution() {
        let mut sketch = QuantileSketch::new(200);
        for _ in 0..2_000 {
            sketch.observe(1_000);
        }
        for _ in 0..2_000 {
            sketch.observe(100);
        }
        let p95 = sketch.quantile(0.95).unwrap_or_default();
        assert!((100..=110).contains(&p95), "{p95}");
    }
}
