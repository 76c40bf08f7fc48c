//! Chaos scenario `redis-restart`: 3 gateway instances share one Redis; 9 clients saturate
//! the provider's RPM through them for 10 s, during which Redis is killed (at 2 s) and
//! restarted empty (at 6 s). Run once with `fail_closed` and once with `fail_open_local`.
//!
//! Invariants: the provider never answers 429; the provider admitted no more than one
//! shared limit allows over the run (its burst plus its rate × the run, + 5 %) — the
//! simulated provider's own bucket is a minute deep, so this catches over-admission that a
//! provider already at its limit would answer with 429s; every instance serves again
//! within 3 s of the restart; no request takes longer than 3 s (the class's 2 s `max_wait`
//! plus the store's 250 ms timeout and slack); every request gets an HTTP answer; the
//! gateways stay up.

use std::path::Path;
use std::time::Duration;

use sluice_redis::local::LocalRedis;
use sluice_sim::{Limits, ModelConfig, SimConfig, SimProvider};
use tokio::time::Instant;

use crate::attempts::{self, Attempt, Load};
use crate::chaos_check::{Check, ms};
use crate::fleet::{self, KEY};
use crate::process::GatewayProcess;

/// The provider's (and the deployment's) requests per minute.
const RPM: u64 = 3_000;
const RUN: Duration = Duration::from_secs(10);
const DOWN_AT: Duration = Duration::from_secs(2);
const UP_AT: Duration = Duration::from_secs(6);
const RECOVER_WITHIN: Duration = Duration::from_secs(3);
const BOUND: Duration = Duration::from_secs(3);
const INSTANCES: usize = 3;
/// The deployment's burst, seconds of its rate (the config default).
const BURST_SECONDS: f64 = 3.0;
/// Tolerance on the shared limit's allowance (requests finishing after the run, rounding).
const ALLOWANCE_SLACK: f64 = 1.05;

/// The failure modes exercised.
const MODES: [&str; 2] = ["fail_closed", "fail_open_local"];

fn body(client: usize) -> serde_json::Value {
    serde_json::json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": 8,
        "user": format!("client-{client}"),
    })
}

/// One round of both modes.
///
/// # Errors
/// When Redis, the simulator or a gateway cannot start, or Redis cannot be restarted.
pub async fn round(binary: &Path, round: u32) -> anyhow::Result<Vec<Check>> {
    let mut checks = Vec::new();
    for mode in MODES {
        checks.extend(one_mode(binary, round, mode).await?);
    }
    Ok(checks)
}

/// What one outage showed.
struct Outage {
    attempts: Vec<Attempt>,
    down: Duration,
    up: Duration,
}

async fn one_mode(binary: &Path, round: u32, mode: &str) -> anyhow::Result<Vec<Check>> {
    let mut redis = tokio::task::spawn_blocking(LocalRedis::start).await??;
    let limits = Limits { rpm: Some(RPM), ..Limits::default() };
    let sim_config =
        SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini").with_limits(limits)], ..SimConfig::default() };
    let sim = SimProvider::start(sim_config).await?;
    let store = fleet::redis_store(&redis.url(), &crate::deploy::run_prefix("chaos"), mode);
    let config = fleet::config(&sim.url(), &store, &format!("rpm = {RPM}"), "30s");
    let mut gateways = fleet::start(binary, INSTANCES, &config).await?;
    let outage = outage(&mut redis, &gateways).await?;
    let stats = sim.stats();
    let provider = Provider { served: stats.served, refused: stats.rate_limited.total() };
    let alive = gateways.iter_mut().all(GatewayProcess::alive);
    drop(gateways);
    sim.shutdown().await;
    Ok(judge(&format!("redis-restart {mode}"), round, &outage, provider, alive))
}

/// What the provider saw over the run.
#[derive(Debug, Clone, Copy)]
struct Provider {
    served: u64,
    refused: u64,
}

/// Requests one shared limit lets through over the run: a full burst, then the rate.
fn allowance() -> f64 {
    let per_second = RPM as f64 / 60.0;
    per_second * (BURST_SECONDS + RUN.as_secs_f64())
}

async fn outage(redis: &mut LocalRedis, gateways: &[GatewayProcess]) -> anyhow::Result<Outage> {
    let origin = Instant::now();
    let load = Load { clients: 9, run: RUN, max_wait: Duration::from_millis(200) };
    let running = tokio::spawn(attempts::run_load(fleet::urls(gateways), load, origin, KEY, body));
    tokio::time::sleep_until(origin + DOWN_AT).await;
    tokio::task::block_in_place(|| redis.kill());
    let down = origin.elapsed();
    tokio::time::sleep_until(origin + UP_AT).await;
    tokio::task::block_in_place(|| redis.restart())?;
    let up = origin.elapsed();
    let attempts = running.await?;
    Ok(Outage { attempts, down, up })
}

fn judge(name: &str, round: u32, o: &Outage, provider: Provider, alive: bool) -> Vec<Check> {
    let back = attempts::back_after(&o.attempts, INSTANCES, o.up);
    let recovered = back.iter().all(|b| b.is_some_and(|b| b <= RECOVER_WITHIN));
    let back_ms: Vec<String> =
        back.iter().map(|b| b.map_or_else(|| "never".into(), |b| format!("{} ms", ms(b)))).collect();
    let away = o.attempts.iter().filter(|a| a.sent >= o.down && a.done() < o.up);
    let (mut served_away, mut refused_away) = (0, 0);
    for a in away {
        match a.status {
            200 => served_away += 1,
            _ => refused_away += 1,
        }
    }
    let slowest = attempts::slowest(&o.attempts);
    let unanswered = o.attempts.iter().filter(|a| a.status == 0).count();
    let allowed = allowance();
    vec![
        Check::new(
            name,
            round,
            "no provider 429",
            provider.refused == 0,
            format!(
                "provider 429s {}; while Redis was away ({} ms): {served_away} served, {refused_away} refused",
                provider.refused,
                ms(o.up - o.down)
            ),
        ),
        Check::new(
            name,
            round,
            "admitted ≤ one shared limit's burst + rate × run",
            provider.served as f64 <= allowed * ALLOWANCE_SLACK,
            format!(
                "provider served {} in {} s; one limit allows {allowed:.0} ({:.2}×); answered 200 before / during / after the outage: {}",
                provider.served,
                RUN.as_secs(),
                provider.served as f64 / allowed,
                phases(o)
            ),
        ),
        Check::new(
            name,
            round,
            "every instance serves within 3 s of the restart",
            recovered,
            format!("first 200 after restart per instance: {}", back_ms.join(", ")),
        ),
        Check::new(name, round, "no request past 3 s", slowest <= BOUND, format!("slowest {} ms", ms(slowest))),
        Check::new(
            name,
            round,
            "every request answered",
            unanswered == 0,
            format!("{unanswered} unanswered of {}; {:?}", o.attempts.len(), attempts::summary(&o.attempts)),
        ),
        Check::new(name, round, "gateways alive", alive, String::new()),
    ]
}

/// Successful answers before Redis went away, while it was away, and after it came back.
fn phases(o: &Outage) -> String {
    let ok = |from: Duration, to: Duration| {
        o.attempts.iter().filter(|a| a.status == 200 && a.done() >= from && a.done() < to).count()
    };
    let (before, away, after) = (ok(Duration::ZERO, o.down), ok(o.down, o.up), ok(o.up, Duration::MAX));
    format!("{before} / {away} / {after}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(instance: usize, sent_ms: u64, took_ms: u64, status: u16) -> Attempt {
        let (sent, took) = (Duration::from_millis(sent_ms), Duration::from_millis(took_ms));
        Attempt { instance, sent, took, status, decision: String::new() }
    }

    fn failed(checks: &[Check]) -> Vec<&'static str> {
        checks.iter().filter(|c| !c.pass).map(|c| c.invariant).collect()
    }

    #[test]
    fn a_clean_outage_passes_every_invariant() {
        let attempts = (0..INSTANCES).map(|i| at(i, 6_100, 20, 200)).collect();
        let o = Outage { attempts, down: Duration::from_secs(2), up: Duration::from_secs(6) };
        let provider = Provider { served: 600, refused: 0 };
        assert!(failed(&judge("x", 1, &o, provider, true)).is_empty());
    }

    #[test]
    fn hangs_silence_slow_recovery_and_429s_are_failures() {
        let attempts = vec![at(0, 6_100, 20, 200), at(1, 3_000, 10_000, 0), at(2, 9_500, 20, 200)];
        let o = Outage { attempts, down: Duration::from_secs(2), up: Duration::from_secs(6) };
        let provider = Provider { served: 900, refused: 2 };
        let broken = failed(&judge("x", 1, &o, provider, false));
        assert_eq!(
            broken,
            [
                "no provider 429",
                "admitted ≤ one shared limit's burst + rate × run",
                "every instance serves within 3 s of the restart",
                "no request past 3 s",
                "every request answered",
                "gateways alive"
            ]
        );
    }
}
