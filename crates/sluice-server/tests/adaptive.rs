//! Adaptive limits and hot reload through the gateway's state, on the memory store and a
//! fake clock: what a provider's answers do to the deployment's limits, and what a reload
//! keeps. (End-to-end runs against the simulated provider come with the request-path calls.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_provider::{RateLimitHints, Window};
use sluice_quota::{FakeClock, MemoryStore, QuotaStore};
use sluice_server::AppState;

fn config(tpm: u64, extra: &str) -> sluice_config::Config {
    config_with(&format!("rpm = 600, tpm = {tpm}"), extra)
}

fn config_with(limits: &str, extra: &str) -> sluice_config::Config {
    let text = format!(
        r#"
[[providers]]
name = "local"
kind = "ollama"
base_url = "http://127.0.0.1:9"

[[deployments]]
name = "d"
provider = "local"
model = "llama"
limits = {{ {limits} }}
{extra}

[[models]]
name = "m"
deployment = "d"

[[tenants]]
name = "t"

[[keys]]
id = "k"
tenant = "t"
sha256 = "f9d2f05f48aa3417bcc39581f50a6ce2128f608cbacb7f2ddc28e6b1e07d5d46"
"#
    );
    sluice_config::parse(&text).unwrap()
}

fn state(config: &sluice_config::Config) -> (AppState, FakeClock) {
    let clock = FakeClock::default();
    let store: Arc<dyn QuotaStore> = Arc::new(MemoryStore::new(Arc::new(clock.clone())));
    (AppState::build_with_clock(config, store, Arc::new(clock.clone())).unwrap(), clock)
}

async fn tpm_limit(state: &AppState) -> (u64, u64) {
    let gateway = state.current();
    let route = &gateway.deployments[0];
    let snapshot = gateway.services.store.snapshot(route.scope).await.unwrap().unwrap();
    let tpm = snapshot.rates.iter().find(|r| r.limiter.to_string() == "tpm").unwrap();
    (tpm.limit, tpm.remaining)
}

fn tokens(limit: u64, remaining: u64) -> RateLimitHints {
    let window = Window { limit: Some(limit), remaining: Some(remaining), remaining_error: 0, reset: None };
    RateLimitHints { tokens: Some(window), ..RateLimitHints::default() }
}

/// Empties the deployment's token bucket, as sluice sending the minute's pace would.
async fn spend_the_tokens(state: &AppState) {
    let gateway = state.current();
    let scope = gateway.deployments[0].scope;
    gateway.services.store.tighten(scope, sluice_quota::Dimension::TotalTokens, 0, None).await.unwrap();
}

#[tokio::test]
async fn a_provider_429_shrinks_the_limit_and_it_recovers() {
    let (state, clock) = state(&config(60_000, ""));
    let adaptive = Arc::clone(&state.current().deployments[0].adaptive);
    spend_the_tokens(&state).await;
    adaptive.on_response(429, &RateLimitHints::default()).await;
    assert_eq!(tpm_limit(&state).await.0, 42_000);
    // A second 429 within the second counts once.
    clock.advance(Duration::from_millis(300));
    spend_the_tokens(&state).await;
    adaptive.on_response(429, &RateLimitHints::default()).await;
    assert_eq!(tpm_limit(&state).await.0, 42_000);
    // A minute later, without 429s, the limit is whole again.
    clock.advance(Duration::from_secs(60));
    adaptive.poll().await;
    assert_eq!(tpm_limit(&state).await.0, 60_000);
    // A daily-quota 429 is no reason to shrink a per-minute rate.
    let daily = RateLimitHints { daily_quota: true, ..RateLimitHints::default() };
    adaptive.on_response(429, &daily).await;
    assert_eq!(tpm_limit(&state).await.0, 60_000);
}

async fn tpm_burst(state: &AppState) -> u64 {
    let gateway = state.current();
    let snapshot = gateway.services.store.snapshot(gateway.deployments[0].scope).await.unwrap().unwrap();
    snapshot.rates.iter().find(|r| r.limiter.to_string() == "tpm").unwrap().burst
}

#[tokio::test]
async fn a_429_while_the_minute_has_room_shrinks_the_burst_not_the_rate() {
    let (state, clock) = state(&config_with("rpm = 600, tpm = 60000, burst_seconds = 3", ""));
    let adaptive = Arc::clone(&state.current().deployments[0].adaptive);
    assert_eq!(tpm_burst(&state).await, 3_000);
    adaptive.on_response(429, &tokens(60_000, 55_000)).await;
    assert_eq!(tpm_limit(&state).await.0, 60_000, "the rate stays");
    assert_eq!(tpm_burst(&state).await, 1_500, "the burst window halves");
    let gateway = state.current();
    let labels = &gateway.deployments[0].counters.labels;
    assert_eq!(gateway.services.metrics.adaptive.burst_window.get_or_create(labels).get(), 1.5, "seconds");
    assert_eq!(gateway.services.metrics.adaptive.short_window_429s.get_or_create(labels).get(), 1);
    assert_eq!(gateway.services.metrics.adaptive.decreases.get_or_create(labels).get(), 0);
    // Held while 429s may still come, then grown back to the configured window.
    clock.advance(Duration::from_secs(30));
    adaptive.poll().await;
    assert_eq!(tpm_burst(&state).await, 1_500);
    clock.advance(Duration::from_secs(3_600));
    adaptive.poll().await;
    assert_eq!(tpm_burst(&state).await, 3_000);
}

#[tokio::test]
async fn a_429_without_counts_while_sluices_buckets_have_room_shrinks_the_burst_not_the_rate() {
    let (state, _clock) = state(&config(60_000, ""));
    let adaptive = Arc::clone(&state.current().deployments[0].adaptive);
    assert_eq!(tpm_burst(&state).await, 1_000, "the default one-second burst");
    // No rate-limit headers, and sluice's own buckets hold most of the minute's pace: the
    // minute cannot be what refused.
    let pause = adaptive.on_response(429, &RateLimitHints::default()).await;
    assert_eq!(pause, Some(Duration::from_secs(1)), "the deployment waits one window");
    assert_eq!(tpm_limit(&state).await.0, 60_000, "the rate stays");
    assert_eq!(tpm_burst(&state).await, 500, "the burst window halves");
    let gateway = state.current();
    let labels = &gateway.deployments[0].counters.labels;
    assert_eq!(gateway.services.metrics.adaptive.short_window_429s.get_or_create(labels).get(), 1);
    assert_eq!(gateway.services.metrics.adaptive.decreases.get_or_create(labels).get(), 0);
    // With sluice's own token bucket spent, the same answer may be the minute's: the rate
    // comes down, and the pause is the default one.
    spend_the_tokens(&state).await;
    assert_eq!(adaptive.on_response(429, &RateLimitHints::default()).await, None);
    assert_eq!(tpm_limit(&state).await.0, 42_000);
    assert_eq!(gateway.services.metrics.adaptive.decreases.get_or_create(labels).get(), 1);
}

#[tokio::test]
async fn the_window_is_learned_by_the_deployments_settings_or_not_at_all() {
    let (floored, _clock) = state(&config(60_000, "window_floor = \"800ms\"\nwindow_hold = \"10s\""));
    let adaptive = Arc::clone(&floored.current().deployments[0].adaptive);
    adaptive.on_response(429, &tokens(60_000, 55_000)).await;
    assert_eq!(tpm_burst(&floored).await, 800, "halved, but not below the floor");
    // Still shrunk within the hold, growing back after it.
    adaptive.poll().await;
    assert_eq!(tpm_burst(&floored).await, 800);

    let (off, _clock) = state(&config(60_000, "learn_window = false"));
    let adaptive = Arc::clone(&off.current().deployments[0].adaptive);
    assert_eq!(adaptive.on_response(429, &tokens(60_000, 55_000)).await, None);
    assert_eq!(tpm_limit(&off).await.0, 42_000, "every 429 lowers the rate");
    assert_eq!(tpm_burst(&off).await, 700, "and the window stays one second of it");
}

#[tokio::test]
async fn low_remaining_tightens_and_reported_limits_are_adopted_only_when_asked() {
    let (state, _clock) = state(&config(60_000, ""));
    let adaptive = Arc::clone(&state.current().deployments[0].adaptive);
    adaptive.on_response(200, &tokens(30_000, 100)).await;
    let (limit, remaining) = tpm_limit(&state).await;
    assert_eq!(limit, 60_000, "not adopted without adopt_provider_limits");
    assert!(remaining <= 100, "tightened to the provider's count: {remaining}");

    let (adopting, _clock) = self::state(&config(60_000, "adopt_provider_limits = true"));
    let adaptive = Arc::clone(&adopting.current().deployments[0].adaptive);
    adaptive.on_response(200, &tokens(30_000, 29_000)).await;
    assert_eq!(tpm_limit(&adopting).await.0, 30_000, "the provider halved its limit");
    adaptive.on_response(200, &tokens(90_000, 89_000)).await;
    assert_eq!(tpm_limit(&adopting).await.0, 90_000, "and raised it again");
}

#[tokio::test]
async fn p95_reserves_what_the_route_really_generates() {
    let extra = "output_counting = \"actual\"\noutput_estimate = \"p95\"\noutput_warmup = 10";
    let (state, _clock) = state(&config(60_000, extra));
    let adaptive = Arc::clone(&state.current().deployments[0].adaptive);
    assert_eq!(adaptive.output_reservation(400), 400, "strict until warmed up");
    for _ in 0..10 {
        adaptive.observe(&sluice_provider::Usage { output_tokens: 100, ..sluice_provider::Usage::default() });
    }
    assert!((100..=110).contains(&adaptive.output_reservation(400)));
}

#[tokio::test]
async fn a_reload_swaps_the_policy_and_keeps_queues_and_learned_state() {
    let (state, _clock) = state(&config(60_000, ""));
    let before = state.current();
    spend_the_tokens(&state).await;
    before.deployments[0].adaptive.on_response(429, &RateLimitHints::default()).await;
    state.reload(&config(120_000, "")).unwrap();
    let after = state.current();
    assert!(!Arc::ptr_eq(&before, &after), "a new gateway is in force");
    assert!(Arc::ptr_eq(&before.deployments[0].queue, &after.deployments[0].queue), "waiters keep their queue");
    assert!(Arc::ptr_eq(&before.deployments[0].adaptive, &after.deployments[0].adaptive));
    // The new limit, still under the factor the 429 taught.
    assert_eq!(tpm_limit(&state).await.0, 84_000);
    // The gateway a request started on stays usable: same scopes, same store.
    assert_eq!(before.deployments[0].scope, after.deployments[0].scope);
}

#[tokio::test]
async fn output_counts_as_reserved_only_once_granted() {
    // A request priced and then refused (or re-priced on every retry) reserved nothing:
    // `sluice_output_reserved_tokens_total` counts grants, not quotes.
    let (state, _clock) = state(&config(60_000, ""));
    let gateway = state.current();
    let route = &gateway.deployments[0];
    let reserved = || gateway.services.metrics.adaptive.output_reserved.get_or_create(&route.counters.labels).get();
    for _ in 0..3 {
        assert_eq!(route.adaptive.output_reservation(400), 400);
    }
    assert_eq!(reserved(), 0, "priced, not granted");
    route.adaptive.on_admitted(sluice_quota::Cost::request(10, 400));
    assert_eq!(reserved(), 400);
}
