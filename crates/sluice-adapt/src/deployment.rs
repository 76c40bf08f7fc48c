//! Adaptive limits on the request path: each deployment's [`Adaptive`] applies what the
//! pure controller ([`crate::controller`]) decides — re-registers the deployment's limits with the
//! store, tightens buckets to the provider's counts, logs and counts tier changes — and
//! holds the route's output and cache-hit estimators.
//!
//! The request path calls, per deployment (`route.adaptive`):
//! - [`Adaptive::output_reservation`] and [`Adaptive::input_reservation`] when pricing;
//! - [`Adaptive::on_admitted`] after a grant (feeds the ramp-up guard);
//! - [`Adaptive::on_response`] with every provider answer's status and hints;
//! - [`Adaptive::observe`] with the usage a finished call reported.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sluice_config::{Deployment, ProviderKind};
use sluice_provider::{RateLimitHints, Usage, Window};
use sluice_quota::{Clock, Cost, Dimension, LimiterName, QuotaStore, ScopeId, ScopeKey, ScopeKind};

use crate::aimd::AimdSettings;
use crate::cache::CacheTracker;
use crate::controller::{Controller, ControllerSettings, Reaction};
use crate::labels::Upstream;
use crate::output::{OutputEstimate, OutputEstimator};
use crate::provider::ProviderWindow;
use crate::ramp::RampSettings;
use crate::window::WindowSettings;

/// `provider`, `model`, `limit` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// Provider account.
    pub provider: String,
    /// Upstream model.
    pub model: String,
    /// `requests`, `tokens`, `input_tokens`, `output_tokens`.
    pub limit: String,
}

/// Adaptive-limit metrics.
#[derive(Debug, Default)]
pub struct AdaptiveMetrics {
    /// `sluice_adaptive_factor_permille{provider,model}`: the effective share of the limit.
    pub factor: Family<Upstream, Gauge>,
    /// `sluice_adaptive_decreases_total{provider,model}`: AIMD decreases after provider 429s.
    pub decreases: Family<Upstream, Counter>,
    /// `sluice_burst_window_seconds{provider,model}`: the burst window in force (learned).
    pub burst_window: Family<Upstream, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// `sluice_short_window_429s_total{provider,model}`: provider 429s that came while the
    /// minute had room (a shorter window enforced).
    pub short_window_429s: Family<Upstream, Counter>,
    /// `sluice_provider_limit_changes_total{provider,model,limit}`: reported limits differing from config.
    pub limit_changes: Family<LimitLabels, Counter>,
    /// `sluice_provider_reported_limit{provider,model,limit}`: the last limit the provider reported.
    pub reported_limit: Family<LimitLabels, Gauge>,
    /// `sluice_output_reserved_tokens_total{provider,model}`: output tokens reserved.
    pub output_reserved: Family<Upstream, Counter>,
    /// `sluice_output_used_tokens_total{provider,model}`: output tokens generated.
    pub output_used: Family<Upstream, Counter>,
}

impl AdaptiveMetrics {
    /// Registers every family in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "sluice_adaptive_factor_permille",
            "Effective share of each deployment's limit, in thousandths",
            self.factor.clone(),
        );
        registry.register(
            "sluice_adaptive_decreases",
            "Effective-limit decreases after unexpected provider 429s",
            self.decreases.clone(),
        );
        registry.register(
            "sluice_burst_window_seconds",
            "Burst window in force per deployment: configured, or shorter as learned from provider 429s",
            self.burst_window.clone(),
        );
        registry.register(
            "sluice_short_window_429s",
            "Provider 429s that came while the provider reported per-minute capacity left",
            self.short_window_429s.clone(),
        );
        registry.register(
            "sluice_provider_limit_changes",
            "Provider-reported limits that differ from configuration",
            self.limit_changes.clone(),
        );
        registry.register(
            "sluice_provider_reported_limit",
            "The last per-minute limit a provider reported",
            self.reported_limit.clone(),
        );
        registry.register(
            "sluice_output_reserved_tokens",
            "Output tokens reserved at admission",
            self.output_reserved.clone(),
        );
        registry.register(
            "sluice_output_used_tokens",
            "Output tokens the provider reported generated",
            self.output_used.clone(),
        );
    }
}

/// One deployment's adaptive state. See the module docs.
#[derive(Debug)]
pub struct Adaptive {
    key: ScopeKey,
    scope: ScopeId,
    labels: Upstream,
    /// Its series of `output_used` and `output_reserved`, resolved once (every request
    /// counts both).
    output_used: Counter,
    output_reserved: Counter,
    store: Arc<dyn QuotaStore>,
    clock: Arc<dyn Clock>,
    metrics: Arc<AdaptiveMetrics>,
    controller: Mutex<Controller>,
    output: Mutex<OutputEstimator>,
    cache: Option<Mutex<CacheTracker>>,
}

/// The controller settings of a deployment's config.
#[must_use]
pub fn settings(d: &Deployment) -> ControllerSettings {
    let a = &d.adaptive;
    ControllerSettings {
        aimd: AimdSettings {
            decrease: a.decrease,
            recovery: a.recovery,
            floor: a.min_factor,
            ..AimdSettings::default()
        },
        ramp: a.ramp_up.map(|slope| RampSettings { slope, window: RampSettings::WINDOW }),
        adopt_provider_limits: a.adopt_provider_limits,
        window: WindowSettings {
            enabled: a.window.enabled,
            floor: a.window.floor,
            hold: a.window.hold,
            regrow: a.window.regrow,
            ..WindowSettings::default()
        },
    }
}

fn output_mode(d: &Deployment) -> OutputEstimate {
    match d.adaptive.output_estimate {
        sluice_config::OutputEstimate::Strict => OutputEstimate::Strict,
        sluice_config::OutputEstimate::P95 { warmup } => OutputEstimate::P95 { warmup },
    }
}

/// What the adaptive state of a deployment needs from its surroundings.
#[derive(Debug, Clone)]
pub struct Wiring {
    /// The shared quota store.
    pub store: Arc<dyn QuotaStore>,
    /// The gateway's clock.
    pub clock: Arc<dyn Clock>,
    /// Where to count.
    pub metrics: Arc<AdaptiveMetrics>,
}

impl Adaptive {
    /// The adaptive state of deployment `d` (registered as `scope`), at factor 1.
    #[must_use]
    pub fn new(d: &Deployment, kind: ProviderKind, scope: ScopeId, labels: Upstream, wiring: Wiring) -> Self {
        let now = wiring.clock.now();
        let cache =
            (d.adaptive.cache_aware_input && kind == ProviderKind::Anthropic).then(|| Mutex::new(CacheTracker::new()));
        let output_used = wiring.metrics.output_used.get_or_create(&labels).clone();
        let output_reserved = wiring.metrics.output_reserved.get_or_create(&labels).clone();
        Self {
            key: ScopeKey::new(ScopeKind::Deployment, d.name.clone()),
            scope,
            labels,
            output_used,
            output_reserved,
            controller: Mutex::new(Controller::new(d.limits.clone(), settings(d), now)),
            output: Mutex::new(OutputEstimator::new(output_mode(d))),
            cache,
            store: wiring.store,
            clock: wiring.clock,
            metrics: wiring.metrics,
        }
    }

    /// A reload changed the deployment's config: new limits and settings, learned state
    /// kept (the AIMD factor, the output sketch while the mode is unchanged). Registers the
    /// limits now in force.
    pub fn reconfigure(&self, d: &Deployment) {
        let limits = self.controller.lock().reconfigure(d.limits.clone(), settings(d), self.clock.now());
        self.store.register(self.key.clone(), limits);
        let mode = output_mode(d);
        let mut output = self.output.lock();
        if output.mode() != mode {
            *output = OutputEstimator::new(mode);
        }
    }

    /// Output tokens to reserve for a request allowing `max_tokens` (`strict`: all of them;
    /// `p95`: the route's learned p95, capped by `max_tokens`). Counted as reserved only
    /// once granted ([`Adaptive::on_admitted`]): a priced request may still be refused.
    #[must_use]
    pub fn output_reservation(&self, max_tokens: u64) -> u64 {
        self.output.lock().reservation(max_tokens)
    }

    /// Input tokens to reserve for a prompt estimated at `estimate`: less the expected
    /// cache reads when `cache_aware_input` is on (Anthropic), else the estimate.
    #[must_use]
    pub fn input_reservation(&self, estimate: u64) -> u64 {
        self.cache.as_ref().map_or(estimate, |c| c.lock().input_reservation(estimate))
    }

    /// The usage a finished call reported: teaches the output and cache estimators.
    pub fn observe(&self, usage: &Usage) {
        self.output.lock().observe(usage.output_tokens);
        self.output_used.inc_by(usage.output_tokens);
        if let Some(cache) = &self.cache {
            let charged = usage.input_tokens.saturating_add(usage.cache_creation_input_tokens);
            cache.lock().observe(charged, usage.cache_read_input_tokens);
        }
    }

    /// A grant of `cost` through this deployment (the ramp-up guard counts admissions; its
    /// output counts as reserved).
    pub fn on_admitted(&self, cost: Cost) {
        self.output_reserved.inc_by(cost.output_tokens);
        let applied = self.controller.lock().on_admitted(self.clock.now(), cost);
        self.apply(applied);
    }

    /// A provider's answer to a request sluice admitted: its status and rate-limit hints.
    /// A 429 shrinks the effective limit (not for a daily quota, which no rate fixes);
    /// remaining counts below local state tighten the buckets for every instance; a
    /// reported limit different from config is logged, counted, and adopted if configured.
    /// A 429 with no per-minute count while sluice's own buckets show the minute has room
    /// is a short window's refusal (see [`Controller::on_unreported_429`]).
    ///
    /// Returns, for a 429 judged a short window's, the burst window in force when it came:
    /// how long the deployment waits when the provider gave no hint (one window, not more).
    pub async fn on_response(&self, status: u16, hints: &RateLimitHints) -> Option<Duration> {
        let unexpected = status == 429 && !hints.daily_quota;
        let windows = windows(hints);
        let unreported = unexpected && windows.iter().all(|w| w.remaining.is_none());
        let own_room = unreported && self.minute_has_room().await;
        let (reaction, window) = {
            let mut controller = self.controller.lock();
            let now = self.clock.now();
            let window = controller.burst_window(now);
            let reaction = if own_room {
                controller.on_unreported_429(now, &windows)
            } else {
                controller.on_response(now, &windows, unexpected)
            };
            (reaction, window)
        };
        for change in &reaction.tier_changes {
            let limit = LimitLabels {
                provider: self.labels.provider.clone(),
                model: self.labels.model.clone(),
                limit: change.dimension.as_str().into(),
            };
            self.metrics.limit_changes.get_or_create(&limit).inc();
            self.metrics.reported_limit.get_or_create(&limit).set(i64::try_from(change.reported).unwrap_or(i64::MAX));
            tracing::warn!(deployment = %self.key.name, limit = change.dimension.as_str(), configured = change.configured, reported = change.reported, "the provider reports a different per-minute limit than configured");
        }
        if reaction.decreased {
            self.metrics.decreases.get_or_create(&self.labels).inc();
        }
        if reaction.short_window {
            self.metrics.short_window_429s.get_or_create(&self.labels).inc();
        }
        self.apply(reaction.apply.clone());
        if reaction.shrunk.is_some() {
            self.share(&reaction).await;
        }
        for t in &reaction.tighten {
            if let Err(e) = self.store.tighten(self.scope, t.dimension, t.remaining, t.reset).await {
                tracing::debug!(error = %e, "could not tighten to the provider's count");
            }
        }
        reaction.short_window.then_some(window)
    }

    /// Whether every per-minute bucket of the deployment still holds capacity: sluice paces
    /// the minute, so while its own buckets have room it has not sent the minute's worth.
    /// `false` when the store cannot say or the deployment has no per-minute limit.
    async fn minute_has_room(&self) -> bool {
        let Ok(Some(snapshot)) = self.store.snapshot(self.scope).await else { return false };
        let minute = |r: &&sluice_quota::RateSnapshot| matches!(r.limiter, LimiterName::Rate { period, .. } if period == Duration::from_secs(60));
        let mut per_minute = snapshot.rates.iter().filter(minute).peekable();
        per_minute.peek().is_some() && per_minute.all(|r| r.remaining > 0)
    }

    /// Recovery without traffic: applies the recovered factor (and burst window) when it
    /// moved enough, and a shorter window another instance learned.
    pub async fn poll(&self) {
        let applied = self.controller.lock().poll(self.clock.now());
        self.apply(applied);
        self.share(&Reaction::default()).await;
    }

    /// Tells the store a window this instance just learned, and adopts the shortest one any
    /// instance learned (a shared store keeps it for the hold; a memory store keeps none).
    async fn share(&self, reaction: &Reaction) {
        let hold = self.controller.lock().window_settings().hold;
        let shared = match self.store.share_window(self.scope, reaction.shrunk, hold).await {
            Ok(shared) => shared,
            Err(e) => {
                tracing::debug!(error = %e, "could not share the learned burst window");
                return;
            }
        };
        if let Some(window) = shared.filter(|w| Some(*w) != reaction.shrunk) {
            let applied = self.controller.lock().adopt_window(window, self.clock.now());
            self.apply(applied);
        }
    }

    fn apply(&self, limits: Option<sluice_quota::Limits>) {
        let Some(limits) = limits else { return };
        self.store.register(self.key.clone(), limits);
        let now = self.clock.now();
        let (factor, window) = {
            let controller = self.controller.lock();
            (controller.factor(now), controller.burst_window(now))
        };
        self.metrics.factor.get_or_create(&self.labels).set((factor * 1000.0).round() as i64);
        self.metrics.burst_window.get_or_create(&self.labels).set(window.as_secs_f64());
    }
}

/// A provider's windows in sluice's dimensions; remaining counts carry their rounding error.
fn windows(hints: &RateLimitHints) -> Vec<ProviderWindow> {
    let window = |dimension, w: &Option<Window>| {
        w.map(|w| ProviderWindow {
            dimension,
            limit: w.limit,
            remaining: w.remaining.map(|r| {
                let r = r.saturating_add(w.remaining_error);
                w.limit.map_or(r, |l| r.min(l))
            }),
            reset: w.reset,
        })
    };
    [
        window(Dimension::Requests, &hints.requests),
        window(Dimension::TotalTokens, &hints.tokens),
        window(Dimension::InputTokens, &hints.input_tokens),
        window(Dimension::OutputTokens, &hints.output_tokens),
    ]
    .into_iter()
    .flatten()
    .collect()
}
