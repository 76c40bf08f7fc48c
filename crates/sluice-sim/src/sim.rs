//! The simulator's shared state: models with their limiters and RNGs, stats, the clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng};

use crate::admission::{Cost, Dim, LimitKind, ModelLimiter, Rejection};
use crate::clock::Clock;
use crate::config::{FaultConfig, Flavor, LatencyConfig, Limits, ModelConfig, Shape, SimConfig};
use crate::faults::FaultKind;
use crate::latency::Delays;
use crate::prompt_cache::{CacheUse, Lookup, Plan, PromptCache};
use crate::stats::{Served, Stats, StatsSnapshot};
use crate::tokens::Tokenizer;
use crate::validate::ConfigError;

/// One served model.
#[derive(Debug)]
pub struct ModelState {
    /// Its configuration (limits as configured at start; see [`ModelState::limits`]).
    pub config: ModelConfig,
    /// Flavour (resolved).
    pub flavor: Flavor,
    /// Latency in force.
    pub latency: LatencyConfig,
    /// Tokenizer.
    pub tokenizer: Tokenizer,
    inner: Mutex<ModelInner>,
    in_flight: AtomicU32,
}

#[derive(Debug)]
struct ModelInner {
    limits: Limits,
    faults: FaultConfig,
    limiter: ModelLimiter,
    rng: StdRng,
    /// Its prompt cache, when the model keeps one.
    cache: Option<PromptCache>,
}

impl ModelState {
    /// The limits in force now (they change with [`Sim::set_limits`]).
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.inner.lock().limits.clone()
    }

    /// The faults in force now (they change with [`Sim::set_faults`]).
    #[must_use]
    pub fn faults(&self) -> FaultConfig {
        self.inner.lock().faults.clone()
    }
}

/// Rate-limit status at the time of a decision, in simulated seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    /// `(limit, remaining, seconds to full)` of requests, tokens, input and output tokens.
    pub dims: [Option<(f64, f64, f64)>; 4],
}

/// Index of a dimension in [`Snapshot::dims`].
pub const SNAPSHOT_DIMS: [Dim; 4] = [Dim::Rpm, Dim::Tpm, Dim::Itpm, Dim::Otpm];

/// An admitted request: what was drawn for it and its in-flight slot.
#[derive(Debug)]
pub struct Ticket {
    /// The fault to inject, if any.
    pub fault: Option<FaultKind>,
    /// Output tokens to generate.
    pub output: u64,
    /// A `stream_drop` fault: the content chunks sent before the cut.
    pub drop_after: u32,
    /// Delays to apply.
    pub delays: Delays,
    /// Rate-limit status after admission.
    pub snapshot: Snapshot,
    /// Output tokens reserved at admission (OTPM `max_tokens` mode).
    pub reserved_output: u64,
    _slot: InFlight,
}

/// A refused request.
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// A rate limit refused it.
    Limited(Rejection, Snapshot),
    /// Too many requests in flight.
    Concurrency(u16, Snapshot),
}

/// Holds one in-flight slot of a model until dropped (with the count before taking it).
#[derive(Debug)]
struct InFlight(Arc<ModelState>, u32);

impl InFlight {
    fn take(model: &Arc<ModelState>) -> Self {
        Self(Arc::clone(model), model.in_flight.fetch_add(1, Ordering::AcqRel))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a request asks of admission.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// Cost at admission.
    pub cost: Cost,
    /// Whether it streams.
    pub stream: bool,
    /// Cap on generated tokens.
    pub cap: u64,
}

/// The shared state behind every connection.
#[derive(Debug)]
pub struct Sim {
    clock: Arc<dyn Clock>,
    time_scale: f64,
    models: HashMap<String, Arc<ModelState>>,
    stats: Mutex<Stats>,
    epoch: Mutex<std::time::Duration>,
    seq: AtomicU64,
    seed: u64,
    /// Real seconds in a provider minute when admissions are kept per model (`model_timeline`).
    minute_seconds: Option<usize>,
    /// The Responses API responses kept (their objects, input items and contexts).
    pub responses: crate::openai::responses_kept::StoredResponses,
    /// The conversations it keeps.
    pub conversations: crate::openai::conversations_kept::StoredConversations,
    /// Google's API keys, issued access tokens and Vertex project quotas.
    google: crate::google::state::Google,
}

impl Sim {
    /// Builds the state from a validated config.
    ///
    /// # Errors
    /// When the config is invalid.
    pub fn new(config: &SimConfig, clock: Arc<dyn Clock>) -> Result<Self, ConfigError> {
        config.validate()?;
        let seed = config.seed.unwrap_or_else(rand::random);
        let minute_seconds = config.model_timeline.then(|| minute_seconds(config.time_scale));
        let mut sim = Self {
            clock,
            time_scale: config.time_scale,
            models: HashMap::new(),
            stats: Mutex::new(new_stats(minute_seconds)),
            epoch: Mutex::new(std::time::Duration::ZERO),
            seq: AtomicU64::new(0),
            seed,
            minute_seconds,
            responses: crate::openai::responses_kept::StoredResponses::default(),
            conversations: crate::openai::conversations_kept::StoredConversations::default(),
            google: crate::google::state::Google::new(&config.google),
        };
        *sim.epoch.lock() = sim.clock.elapsed();
        let now = sim.sim_now();
        for (i, m) in config.models.iter().enumerate() {
            let flavor = m.flavor();
            let limits = m.limits.effective(flavor);
            let inner = ModelInner {
                limiter: ModelLimiter::new(&limits, m.output_accounting, m.count_rejected(), now),
                limits,
                faults: m.faults.clone().unwrap_or_else(|| config.faults.clone()),
                rng: StdRng::seed_from_u64(seed.wrapping_add(i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                cache: m.prompt_cache.then(PromptCache::default),
            };
            let state = ModelState {
                config: m.clone(),
                flavor,
                latency: m.latency.clone().unwrap_or_else(|| config.latency.clone()),
                tokenizer: Tokenizer::new(m.encoding()),
                inner: Mutex::new(inner),
                in_flight: AtomicU32::new(0),
            };
            sim.models.insert(m.name.clone(), Arc::new(state));
        }
        Ok(sim)
    }

    /// Simulated seconds since start.
    #[must_use]
    pub fn sim_now(&self) -> f64 {
        self.clock.elapsed().as_secs_f64() * self.time_scale
    }

    /// The time scale.
    #[must_use]
    pub fn time_scale(&self) -> f64 {
        self.time_scale
    }

    /// The clock.
    #[must_use]
    pub fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    /// A served model of the given shape.
    #[must_use]
    pub fn model(&self, name: &str, shape: Shape) -> Option<&Arc<ModelState>> {
        self.models.get(name).filter(|m| m.config.shape == shape)
    }

    /// All models, sorted by name.
    #[must_use]
    pub fn models(&self) -> Vec<&Arc<ModelState>> {
        let mut all: Vec<_> = self.models.values().collect();
        all.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        all
    }

    /// Google's credential checks and project quotas.
    #[must_use]
    pub fn google(&self) -> &crate::google::state::Google {
        &self.google
    }

    /// A fresh request id.
    #[must_use]
    pub fn request_id(&self) -> String {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("req_{:08x}{n:016x}", self.seed as u32)
    }

    /// Runs admission for one request of `model`.
    ///
    /// # Errors
    /// A [`Refusal`] when a limit or the in-flight cap refuses it.
    pub fn admit(&self, model: &Arc<ModelState>, ask: &Ask) -> Result<Ticket, Box<Refusal>> {
        let name = &model.config.name;
        let now = self.sim_now();
        let slot = InFlight::take(model);
        let mut guard = model.inner.lock();
        let inner = &mut *guard;
        if inner.limits.max_concurrency.is_some_and(|max| slot.1 >= max) {
            let refusal = Refusal::Concurrency(inner.limits.concurrency_status, snapshot(&mut inner.limiter, now));
            drop(guard);
            self.stats.lock().on_refused(name, LimitKind::Concurrency);
            return Err(Box::new(refusal));
        }
        if let Err(rejection) = inner.limiter.admit(now, &ask.cost) {
            let refusal = Refusal::Limited(rejection, snapshot(&mut inner.limiter, now));
            drop(guard);
            self.stats.lock().on_refused(name, rejection.dim.kind());
            return Err(Box::new(refusal));
        }
        let fault = inner.faults.draw(&mut inner.rng, ask.stream);
        let output = model.config.completion.draw(&mut inner.rng, ask.cap);
        let delays = model.latency.draw(&mut inner.rng);
        let drop_after = if inner.faults.stream_drop_anywhere {
            let chunks = output.div_ceil(u64::from(model.latency.chunk_tokens.max(1)));
            u32::try_from(inner.rng.random_range(0..=chunks)).unwrap_or(u32::MAX)
        } else {
            inner.faults.stream_drop_after_chunks
        };
        let snapshot = snapshot(&mut inner.limiter, now);
        drop(guard);
        let cost = ask.cost;
        self.stats.lock().on_admitted(name, self.real_second(), round(cost.tokens + cost.input + cost.output), fault);
        Ok(Ticket { fault, output, drop_after, delays, snapshot, reserved_output: round(cost.output), _slot: slot })
    }

    fn real_second(&self) -> u64 {
        self.clock.elapsed().saturating_sub(*self.epoch.lock()).as_secs()
    }

    /// Looks a request's prompt up in `model`'s prompt cache, changing nothing; `None` when
    /// the model keeps no cache.
    #[must_use]
    pub fn cache_peek(&self, model: &ModelState, plan: Plan) -> Option<CacheUse> {
        let now = self.sim_now();
        let lookup: Lookup = model.inner.lock().cache.as_ref()?.peek(now, &plan);
        Some(CacheUse { plan, lookup })
    }

    /// Commits an admitted request's cache use: refreshes what it read, writes its prefixes,
    /// and counts the hit or miss.
    pub fn cache_commit(&self, model: &ModelState, cache: &CacheUse) {
        let now = self.sim_now();
        if let Some(kept) = model.inner.lock().cache.as_mut() {
            kept.commit(now, &cache.plan, &cache.lookup);
        }
        self.stats.lock().on_prompt_cache(&model.config.name, &cache.lookup);
    }

    /// Records a successful response and settles output tokens.
    pub fn complete(&self, model: &ModelState, reserved_output: u64, served: &Served<'_>) {
        self.settle_output(model, reserved_output, served.output);
        self.stats.lock().on_served(served);
    }

    /// Settles output tokens of a request that generated `output` tokens.
    #[expect(clippy::cast_precision_loss, reason = "token counts are far below 2^52")]
    pub fn settle_output(&self, model: &ModelState, reserved_output: u64, output: u64) {
        let now = self.sim_now();
        let mut inner = model.inner.lock();
        inner.limiter.settle_output(now, reserved_output as f64, output as f64);
        if model.flavor == Flavor::Bedrock {
            // Bedrock reserved `max_tokens` on TPM and now charges output × its weight.
            let burned = output.saturating_mul(model.config.output_weight);
            inner.limiter.settle_tokens(now, reserved_output as f64, burned as f64);
        }
    }

    /// Records an invalid request.
    pub fn invalid(&self) {
        self.stats.lock().on_invalid();
    }

    /// A copy of the stats.
    #[must_use]
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.lock().snapshot()
    }

    /// Clears the stats, refills every bucket and empties the prompt caches (remembered
    /// contexts stay).
    pub fn reset(&self) {
        let now = self.sim_now();
        for model in self.models.values() {
            let mut inner = model.inner.lock();
            let c = &model.config;
            inner.limiter = ModelLimiter::new(&inner.limits, c.output_accounting, c.count_rejected(), now);
            if let Some(cache) = inner.cache.as_mut() {
                *cache = PromptCache::default();
            }
        }
        *self.stats.lock() = new_stats(self.minute_seconds);
        *self.epoch.lock() = self.clock.elapsed();
    }

    /// Limits in force per model.
    #[must_use]
    pub fn limits(&self) -> Vec<(String, Limits)> {
        self.models().into_iter().map(|m| (m.config.name.clone(), m.limits())).collect()
    }

    /// Replaces a model's limits at runtime (a tier change), keeping what was used.
    ///
    /// # Errors
    /// When the model is unknown or the limits are invalid.
    pub fn set_limits(&self, name: &str, limits: &Limits) -> Result<(), ConfigError> {
        let Some(model) = self.models.get(name) else {
            return Err(ConfigError(format!("unknown model `{name}`")));
        };
        limits.validate(&format!("model `{name}`"), model.config.quota_shape())?;
        let limits = limits.effective(model.flavor);
        let now = self.sim_now();
        let mut inner = model.inner.lock();
        inner.limiter.set_limits(now, &limits);
        inner.limits = limits;
        Ok(())
    }

    /// Faults in force per model.
    #[must_use]
    pub fn faults(&self) -> Vec<(String, FaultConfig)> {
        self.models().into_iter().map(|m| (m.config.name.clone(), m.faults())).collect()
    }

    /// Replaces a model's faults at runtime (an outage starting or ending); requests already
    /// admitted keep the fault drawn for them.
    ///
    /// # Errors
    /// When the model is unknown or the faults are invalid.
    pub fn set_faults(&self, name: &str, faults: &FaultConfig) -> Result<(), ConfigError> {
        let Some(model) = self.models.get(name) else {
            return Err(ConfigError(format!("unknown model `{name}`")));
        };
        faults.validate(&format!("model `{name}` faults"))?;
        model.inner.lock().faults = faults.clone();
        Ok(())
    }
}

/// Real seconds in one simulated minute, at least one.
#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a positive, validated time scale")]
fn minute_seconds(time_scale: f64) -> usize {
    (60.0 / time_scale).round().max(1.0) as usize
}

fn new_stats(minute_seconds: Option<usize>) -> Stats {
    minute_seconds.map_or_else(Stats::default, Stats::per_model)
}

fn snapshot(limiter: &mut ModelLimiter, now: f64) -> Snapshot {
    Snapshot { dims: SNAPSHOT_DIMS.map(|d| limiter.status(now, d)) }
}

#[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "token counts are small and positive")]
fn round(v: f64) -> u64 {
    v.max(0.0).round() as u64
}
