//! Limits hold over real HTTP against the strict simulated provider: scope caps below
//! the provider's, and the provider's own limit used to the last percent without a 429.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{BATCH_KEY, Env, KEY, chat, mean_rate, saturate, sha, start};
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};

fn sim(rpm: u64, tpm: u64, completion: Completion) -> SimConfig {
    let limits = Limits { rpm: Some(rpm), tpm: Some(tpm), ..Limits::default() };
    let model = ModelConfig { completion, ..ModelConfig::openai("gpt-4o-mini").with_limits(limits) };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

/// Deployment at the provider's limits; an acme tenant with two teams and keys.
fn policy(deployment_limits: &str, tenant_limits: &str, team_limits: &str) -> String {
    format!(
        r#"
[[deployments]]
name = "sim-mini"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ {deployment_limits} }}

[[models]]
name = "fast"
deployment = "sim-mini"
default_max_tokens = 256

[[tenants]]
name = "acme"
limits = {{ {tenant_limits} }}

  [[tenants.teams]]
  name = "search"
  limits = {{ {team_limits} }}

  [[tenants.teams]]
  name = "batch"

[[keys]]
id = "search-key"
tenant = "acme"
team = "search"
sha256 = "{search}"

[[keys]]
id = "batch-key"
tenant = "acme"
team = "batch"
class = "batch"
sha256 = "{batch}"

[[classes]]
name = "batch"
max_wait = "10m"
"#,
        search = sha(KEY),
        batch = sha(BATCH_KEY),
    )
}

/// Long enough that the saturated seconds 3..7 come after any initial burst, even when a
/// loaded machine starts the clients a second late.
const RUN: Duration = Duration::from_secs(7);

fn provider_429s(env: &Env) -> u64 {
    env.sim.stats().rate_limited.total()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_a_many_small_calls_is_rpm_bound_and_uses_the_limit() {
    // 6,000 RPM = 100 requests/s; ~200-token calls never get near 10M TPM.
    let env = Arc::new(
        start(
            sim(6_000, 10_000_000, Completion::Fixed { tokens: 50 }),
            &policy("rpm = 6000, tpm = 10000000", "rpm = 100000", "rpm = 100000"),
        )
        .await,
    );
    let results = saturate(&env, KEY, chat("fast", 180, 100), 24, RUN).await;
    assert!(results.iter().all(|(status, _)| *status == 200), "{:?}", results.iter().find(|r| r.0 != 200));
    assert_eq!(provider_429s(&env), 0);
    let rate = mean_rate(&env.sim, 3, 7, false);
    let utilization = rate / 100.0;
    assert!((0.95..=1.05).contains(&utilization), "RPM utilization {utilization:.3}");
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_b_large_calls_is_tpm_bound_and_uses_the_limit() {
    // 3,000,000 TPM = 50,000 tokens/s; each call ~4,500 prompt + 500 max_tokens = ~10 calls/s.
    let env = Arc::new(
        start(
            sim(100_000, 3_000_000, Completion::Fixed { tokens: 500 }),
            &policy("rpm = 100000, tpm = 3000000", "tpm = 100000000", "tpm = 100000000"),
        )
        .await,
    );
    let results = saturate(&env, KEY, chat("fast", 4_500, 500), 16, RUN).await;
    assert!(results.iter().all(|(status, _)| *status == 200), "{:?}", results.iter().find(|r| r.0 != 200));
    assert_eq!(provider_429s(&env), 0);
    let rate = mean_rate(&env.sim, 3, 7, true);
    let utilization = rate / 50_000.0;
    assert!((0.95..=1.05).contains(&utilization), "TPM utilization {utilization:.3}");
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cap_below_the_provider_cap_holds() {
    // Tenant: 1,200 RPM = 20/s, one second of it at once; provider: 6,000 RPM.
    let env = Arc::new(
        start(
            sim(6_000, 10_000_000, Completion::Fixed { tokens: 20 }),
            &policy("rpm = 6000, tpm = 10000000", "rpm = 1200, burst_seconds = 1", "rpm = 100000"),
        )
        .await,
    );
    let results = saturate(&env, KEY, chat("fast", 50, 50), 8, RUN).await;
    assert!(results.iter().all(|(status, _)| *status == 200));
    // In the first k seconds, at most the burst (1 s = 20) plus 20/s; at least 95 % of
    // the paced rate in the saturated seconds.
    let mut admitted = 0;
    for second in env.sim.stats().timeline {
        admitted += second.requests;
        let bound = 20 + 20 * (second.second + 1) + 1;
        assert!(admitted <= bound, "{admitted} admitted by second {}: more than {bound}", second.second + 1);
    }
    let rate = mean_rate(&env.sim, 3, 7, false);
    assert!((19.0..=21.0).contains(&rate), "tenant-paced rate {rate}");
    assert_eq!(provider_429s(&env), 0);
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_cap_below_the_tenant_cap_holds_and_the_other_team_keeps_the_rest() {
    // Team search: 600 RPM = 10/s; tenant: 1,800 RPM = 30/s; the batch team takes what is
    // left. Both pass one second's worth at once, so the pacing shows within seconds.
    let env = Arc::new(
        start(
            sim(6_000, 10_000_000, Completion::Fixed { tokens: 20 }),
            &policy("rpm = 6000, tpm = 10000000", "rpm = 1800, burst_seconds = 1", "rpm = 600, burst_seconds = 1"),
        )
        .await,
    );
    let started = tokio::time::Instant::now();
    let search = saturate(&env, KEY, chat("fast", 50, 50), 6, RUN);
    let batch = saturate(&env, BATCH_KEY, chat("fast", 50, 50), 6, RUN);
    let (search, batch) = tokio::join!(search, batch);
    let elapsed = started.elapsed().as_secs_f64();
    let stats = env.sim.stats();
    let total_rate = mean_rate(&env.sim, 3, 7, false);
    assert!((28.5..=31.5).contains(&total_rate), "tenant-paced rate {total_rate}");
    // Search is held to 10/s (+ its 1 s burst); batch gets the rest of the tenant's 30/s.
    let search_ok = search.iter().filter(|r| r.0 == 200).count() as f64;
    assert!(search_ok <= 10.0 + 10.0 * elapsed + 1.0, "search served {search_ok} in {elapsed:.2} s");
    assert!(search_ok >= 0.9 * 10.0 * RUN.as_secs_f64(), "search served {search_ok}");
    assert!(batch.len() as f64 > search_ok, "batch {} vs search {search_ok}", batch.len());
    assert_eq!(stats.rate_limited.total(), 0);
    Arc::into_inner(env).unwrap().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unused_output_reservations_are_refunded_to_the_callers_scopes() {
    // The tenant may spend 6,000 tokens per minute with all of it available at once.
    // Each call reserves ~1,010 tokens but uses ~20: without refunds only 5 would pass.
    let tenant = "tpm = 6000, burst_seconds = 60";
    let env = start(
        sim(6_000, 10_000_000, Completion::Fixed { tokens: 10 }),
        &policy("rpm = 6000, tpm = 10000000", tenant, "rpm = 6000"),
    )
    .await;
    for i in 0..30 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 1_000)).await;
        assert_eq!(status, 200, "call {i}: {body}");
    }
    // The provider counted every reserved max_tokens (OpenAI's rule): the tokens it admitted
    // are far above what the tenant's bucket was charged in the end.
    let stats = env.sim.stats();
    assert!(stats.tokens.admitted >= 30 * 1_000, "{:?}", stats.tokens);
    assert_eq!(stats.tokens.output_used, 30 * 10);
    env.shutdown().await;
}
