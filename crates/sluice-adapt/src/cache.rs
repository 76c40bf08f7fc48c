//! The recent prompt-cache hit ratio of a route, for cache-aware input reservations.
//!
//! Anthropic does not count cache reads toward input TPM, so a route whose prompts are
//! mostly cached needs far less input reserved than its prompts' size. The tracker keeps
//! an exponentially weighted average of the share of input tokens read from the cache,
//! and discounts the input estimate by it once warmed up. Settlement corrects the rest.

/// Weight of the newest observation in the average.
pub const ALPHA: f64 = 0.05;
/// Observations before the ratio is used.
pub const WARMUP: u64 = 20;
/// The largest discount: some input is always reserved.
pub const MAX_RATIO: f64 = 0.95;

/// See the module docs.
#[derive(Debug, Clone, Default)]
pub struct CacheTracker {
    ratio: f64,
    observed: u64,
}

impl CacheTracker {
    /// A tracker that has seen nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a response's usage: input tokens charged (uncached plus cache writes) and
    /// input tokens read from the cache.
    pub fn observe(&mut self, charged_input: u64, cache_read: u64) {
        let total = charged_input.saturating_add(cache_read);
        if total == 0 {
            return;
        }
        let hit = cache_read as f64 / total as f64;
        self.ratio = if self.observed == 0 { hit } else { self.ratio + ALPHA * (hit - self.ratio) };
        self.observed = self.observed.saturating_add(1);
    }

    /// The recent share of input read from the cache, once warmed up.
    #[must_use]
    pub fn ratio(&self) -> Option<f64> {
        (self.observed >= WARMUP).then_some(self.ratio.clamp(0.0, MAX_RATIO))
    }

    /// Input tokens to reserve for a prompt estimated at `estimate` tokens: the estimate
    /// less the expected cache reads (at least 1 for a non-empty prompt).
    #[must_use]
    pub fn input_reservation(&self, estimate: u64) -> u64 {
        match self.ratio() {
            None => estimate,
            Some(ratio) => ((estimate as f64 * (1.0 - ratio)).ceil() as u64).clamp(estimate.min(1), estimate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discounts_by_the_recent_hit_ratio_after_warmup() {
        let mut t = CacheTracker::new();
        for _ in 0..WARMUP - 1 {
            t.observe(200, 800);
        }
        assert_eq!(t.input_reservation(1_000), 1_000);
        t.observe(200, 800);
        assert_eq!(t.input_reservation(1_000), 200);
        // Prompts stop hitting the cache: the discount fades.
        for _ in 0..100 {
            t.observe(1_000, 0);
        }
        assert!(t.input_reservation(1_000) > 990);
        t.observe(0, 0);
        assert_eq!(CacheTracker::new().input_reservation(0), 0);
    }

    #[test]
    fn always_reserves_something() {
        let mut t = CacheTracker::new();
        for _ in 0..100 {
            t.observe(0, 1_000);
        }
        assert!((50..=51).contains(&t.input_reservation(1_000)));
        assert_eq!(t.input_reservation(1), 1);
    }
}
