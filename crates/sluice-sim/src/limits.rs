//! Pure limit math: continuously refilled buckets and short windows.
//!
//! All times are *simulated* seconds (`f64`) passed in by the caller; nothing here reads a
//! clock. A [`Meter`] is one limit dimension: a minute (or day) [`Bucket`] plus an optional
//! short window that caps how much of the budget may be spent at once — either a sliding
//! [`Window`] or, as OpenAI describes its quantized limits (60,000 RPM enforced as 1,000
//! requests per second), a short [`Bucket`] holding one window's worth of the rate.

/// Number of slots a [`Window`] is divided into (its time resolution is `len / SLOTS`).
pub const SLOTS: usize = 20;

/// A bucket refilled continuously up to `capacity`; its level may go negative (debt).
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    capacity: f64,
    rate: f64,
    level: f64,
    at: f64,
}

impl Bucket {
    /// A full bucket holding `capacity`, refilled from empty to full in `period` seconds.
    #[must_use]
    pub fn full(capacity: f64, period: f64, now: f64) -> Self {
        let rate = if period > 0.0 { capacity / period } else { f64::INFINITY };
        Self { capacity, rate, level: capacity, at: now }
    }

    fn refill(&mut self, now: f64) {
        if now > self.at {
            self.level = (self.level + (now - self.at) * self.rate).min(self.capacity);
            self.at = now;
        }
    }

    /// The capacity (the configured limit).
    #[must_use]
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// The level at `now` (negative when in debt).
    pub fn level(&mut self, now: f64) -> f64 {
        self.refill(now);
        self.level
    }

    /// Seconds until the level reaches `cost`; `None` when `cost` exceeds the capacity.
    pub fn wait_for(&mut self, now: f64, cost: f64) -> Option<f64> {
        self.refill(now);
        if cost > self.capacity {
            None
        } else if self.level >= cost {
            Some(0.0)
        } else {
            Some((cost - self.level) / self.rate)
        }
    }

    /// Debits `cost` (the level may go negative).
    pub fn take(&mut self, now: f64, cost: f64) {
        self.refill(now);
        self.level -= cost;
    }

    /// Debits up to `cost` without pushing the level below zero.
    pub fn take_clamped(&mut self, now: f64, cost: f64) {
        self.refill(now);
        if self.level > 0.0 {
            self.level = (self.level - cost).max(0.0);
        }
    }

    /// Credits `amount` back, never above capacity.
    pub fn refund(&mut self, now: f64, amount: f64) {
        self.refill(now);
        self.level = (self.level + amount).min(self.capacity);
    }

    /// Seconds until the bucket is full again.
    pub fn time_to_full(&mut self, now: f64) -> f64 {
        self.refill(now);
        ((self.capacity - self.level) / self.rate).max(0.0)
    }

    /// Changes the capacity, keeping what was used: a tier change mid-run.
    pub fn set_capacity(&mut self, now: f64, capacity: f64, period: f64) {
        self.refill(now);
        let used = self.capacity - self.level;
        *self = Self::full(capacity, period, now);
        self.level = capacity - used;
    }
}

/// A sliding window of `len` seconds made of [`SLOTS`] slots, summing recent costs.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    slot_len: f64,
    ids: [u64; SLOTS],
    sums: [f64; SLOTS],
}

impl Window {
    /// An empty window `len` seconds long.
    #[must_use]
    pub fn new(len: f64) -> Self {
        Self { slot_len: len / SLOTS as f64, ids: [u64::MAX; SLOTS], sums: [0.0; SLOTS] }
    }

    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "time is non-negative and far below 2^53 slots"
    )]
    fn slot_id(&self, now: f64) -> u64 {
        (now.max(0.0) / self.slot_len).floor() as u64
    }

    fn live(&self, id: u64, current: u64) -> bool {
        id <= current && id + SLOTS as u64 > current
    }

    /// Sum of the costs added in the last window.
    #[must_use]
    pub fn sum(&self, now: f64) -> f64 {
        let current = self.slot_id(now);
        (0..SLOTS).filter(|&i| self.live(self.ids[i], current)).map(|i| self.sums[i]).sum()
    }

    /// Adds `cost` at `now`.
    pub fn add(&mut self, now: f64, cost: f64) {
        let id = self.slot_id(now);
        let index = slot_index(id);
        if self.ids[index] != id {
            self.ids[index] = id;
            self.sums[index] = 0.0;
        }
        self.sums[index] += cost;
    }

    /// Seconds until `cost` fits under `allowance`, or the window is empty (a single large
    /// request is admitted into an otherwise empty window).
    #[must_use]
    pub fn wait_for(&self, now: f64, cost: f64, allowance: f64) -> f64 {
        let current = self.slot_id(now);
        let mut sum = self.sum(now);
        if sum <= 0.0 || sum + cost <= allowance {
            return 0.0;
        }
        for age in (0..SLOTS as u64).rev() {
            let Some(id) = current.checked_sub(age) else { continue };
            let index = slot_index(id);
            if self.ids[index] != id || self.sums[index] <= 0.0 {
                continue;
            }
            sum -= self.sums[index];
            if sum <= 1e-9 || sum + cost <= allowance {
                let expires = (id + SLOTS as u64) as f64 * self.slot_len;
                return (expires - now).max(0.0);
            }
        }
        self.slot_len * SLOTS as f64
    }
}

#[expect(clippy::cast_possible_truncation, reason = "the modulus is below SLOTS")]
fn slot_index(id: u64) -> usize {
    (id % SLOTS as u64) as usize
}

/// Short-window enforcement settings of a [`Meter`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowRule {
    /// Window length in simulated seconds.
    pub len: f64,
    /// Fraction of the bucket capacity allowed inside one window.
    pub fraction: f64,
    /// Sliding sum, or a quantized short bucket.
    pub quantized: bool,
}

/// The short-window half of a [`Meter`].
#[derive(Debug, Clone, PartialEq)]
#[expect(clippy::large_enum_variant, reason = "one per metered dimension; boxing buys nothing")]
enum Short {
    /// At most `allowance` inside any sliding window.
    Sliding(Window, f64),
    /// A bucket of one window's worth refilled at the meter's rate: a cost above it passes
    /// only when the bucket is full (idle for a window), and leaves it in debt.
    Quantized(Bucket),
}

impl Short {
    fn new(rule: WindowRule, limit: f64, period: f64, now: f64) -> Self {
        if rule.quantized {
            let capacity = limit * rule.len / period;
            Self::Quantized(Bucket::full(capacity, rule.len, now))
        } else {
            Self::Sliding(Window::new(rule.len), rule.fraction * limit)
        }
    }

    fn wait_for(&mut self, now: f64, cost: f64) -> f64 {
        match self {
            Self::Sliding(window, allowance) => window.wait_for(now, cost, *allowance),
            Self::Quantized(bucket) => {
                let need = cost.min(bucket.capacity());
                bucket.wait_for(now, need).unwrap_or(0.0)
            }
        }
    }

    fn add(&mut self, now: f64, cost: f64) {
        match self {
            Self::Sliding(window, _) => window.add(now, cost),
            Self::Quantized(bucket) => bucket.take(now, cost),
        }
    }

    /// The same rule with `limit`, keeping the history when the shape is unchanged.
    fn relimit(self, rule: WindowRule, limit: f64, period: f64, now: f64) -> Self {
        match (self, Self::new(rule, limit, period, now)) {
            (Self::Sliding(old, _), Self::Sliding(fresh, allowance)) if old.slot_len == fresh.slot_len => {
                Self::Sliding(old, allowance)
            }
            (Self::Quantized(mut old), Self::Quantized(fresh)) => {
                old.set_capacity(now, fresh.capacity(), rule.len);
                Self::Quantized(old)
            }
            (_, fresh) => fresh,
        }
    }
}

/// When a cost can be admitted by a meter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wait {
    /// Now.
    Now,
    /// After this many simulated seconds.
    After(f64),
    /// Never: the cost exceeds the bucket's capacity.
    Never,
}

impl Wait {
    fn from_secs(secs: f64) -> Self {
        if secs > 0.0 { Self::After(secs) } else { Self::Now }
    }
}

/// One limit dimension: a bucket plus an optional short window.
#[derive(Debug, Clone, PartialEq)]
pub struct Meter {
    bucket: Bucket,
    window: Option<Short>,
}

impl Meter {
    /// A full meter of `limit` per `period` seconds, with an optional short window.
    #[must_use]
    pub fn new(limit: f64, period: f64, rule: Option<WindowRule>, now: f64) -> Self {
        let window = rule.map(|r| Short::new(r, limit, period, now));
        Self { bucket: Bucket::full(limit, period, now), window }
    }

    /// When `cost` fits both the bucket and the window.
    pub fn wait_for(&mut self, now: f64, cost: f64) -> Wait {
        let Some(bucket_wait) = self.bucket.wait_for(now, cost) else { return Wait::Never };
        let window_wait = self.window.as_mut().map_or(0.0, |w| w.wait_for(now, cost));
        Wait::from_secs(bucket_wait.max(window_wait))
    }

    /// Debits `cost` from the bucket and records it in the window.
    pub fn take(&mut self, now: f64, cost: f64) {
        self.bucket.take(now, cost);
        self.note(now, cost);
    }

    /// Debits a rejected request's unit: never below zero, but it fills the window.
    pub fn take_rejected(&mut self, now: f64, cost: f64) {
        self.bucket.take_clamped(now, cost);
        self.note(now, cost);
    }

    fn note(&mut self, now: f64, cost: f64) {
        if let Some(window) = &mut self.window {
            window.add(now, cost);
        }
    }

    /// Credits `amount` back to the bucket (the window keeps its history).
    pub fn refund(&mut self, now: f64, amount: f64) {
        self.bucket.refund(now, amount);
    }

    /// The limit, the whole part of the remaining level (at least 0), and seconds to full.
    pub fn status(&mut self, now: f64) -> (f64, f64, f64) {
        let level = self.bucket.level(now).max(0.0).floor();
        (self.bucket.capacity(), level, self.bucket.time_to_full(now))
    }

    /// Changes the limit at runtime, keeping what was used.
    pub fn set_limit(&mut self, now: f64, limit: f64, period: f64, rule: Option<WindowRule>) {
        self.bucket.set_capacity(now, limit, period);
        let history = self.window.take();
        self.window = rule.map(|r| match history {
            Some(old) => old.relimit(r, limit, period, now),
            None => Short::new(r, limit, period, now),
        });
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
