//! Adaptive limits, without IO: what sluice learns from the provider and from its own
//! traffic, as pure state machines that take `now` ([`sluice_quota::Nanos`]) as an argument.
//!
//! Layout:
//! - [`aimd`]: the effective-limit factor — multiplicative decrease on unexpected provider
//!   429s (at most once per interval), additive recovery toward 1.
//! - [`ramp`]: the ramp-up guard — admitted rate may rise only by a slope per second.
//! - [`provider`]: what a provider's rate-limit headers mean for local state: buckets to
//!   tighten, tier changes, limits to adopt; and scaling limits by a factor.
//! - [`window`]: the learned short window — the burst shrinks on a provider 429 that came
//!   while the minute had room, and grows back slowly.
//! - [`controller`]: these combined per deployment into the limits to apply.
//! - [`quantile`]: a bounded-memory streaming quantile sketch (log buckets with decay).
//! - [`output`]: output reservations, `strict` (`max_tokens`) or `p95` (learned).
//! - [`cache`]: the recent cache-hit ratio of a route, for cache-aware input estimates.
//!
//! Beside the pure state machines, their application on the request path:
//! - [`deployment`]: one deployment's [`Adaptive`] — feeds the controller with the
//!   provider's answers, registers the limits it decides with the quota store, tightens
//!   buckets, and counts what it does as metrics. It does no IO of its own: the store is a
//!   [`sluice_quota::QuotaStore`], the time a [`sluice_quota::Clock`].
//! - [`labels`]: the label sets the per-deployment metrics share (the gateway's metrics
//!   registry uses them too).
//!
//! Failure semantics: nothing here fails (a store call [`deployment`] makes that fails is
//! logged and skipped); the factor stays in `[floor, 1]`, reservations
//! never exceed what the caller asked for, and limits are never loosened beyond
//! configuration unless the operator asked to adopt the provider's.

pub mod aimd;
pub mod cache;
pub mod controller;
pub mod deployment;
pub mod labels;
pub mod output;
pub mod provider;
pub mod quantile;
pub mod ramp;
pub mod window;

pub use aimd::{Aimd, AimdSettings};
pub use cache::CacheTracker;
pub use controller::{Controller, ControllerSettings, Reaction};
pub use deployment::{Adaptive, AdaptiveMetrics, Wiring};
pub use output::{OutputEstimate, OutputEstimator};
pub use provider::{ProviderWindow, TierChange, Tighten};
pub use quantile::QuantileSketch;
pub use ramp::{Ramp, RampSettings};
pub use window::{LearnedWindow, WindowSettings};
