//! Chaos scenario `provider-faults`: the simulated provider answers 5 % of calls with 503,
//! resets 3 % of connections before answering and hangs on 2 % (for longer than any client
//! waits), while 12 clients ask a gateway for more than the provider's RPM.
//!
//! Invariants: no request takes longer than the gateway's own bound (the class's
//! `retry_within` + `max_wait` + the deployment's `attempt_timeout`, plus a second of
//! slack); every request gets an HTTP answer; the provider never answers 429; the gateway
//! stays up.

use std::path::Path;
use std::time::Duration;

use sluice_sim::{FaultConfig, LatencyConfig, Limits, ModelConfig, SimConfig, SimProvider};
use tokio::time::Instant;

use crate::attempts::{self, Load};
use crate::chaos_check::{Check, ms};
use crate::fleet::{self, KEY, Parts};

const NAME: &str = "provider-faults";
/// The provider's (and the deployment's) requests per minute.
const RPM: u64 = 1_200;
const RUN: Duration = Duration::from_secs(12);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
const RETRY_WITHIN: Duration = Duration::from_secs(4);
const MAX_WAIT: Duration = Duration::from_secs(2);
/// What the gateway promises at most for one request (see the module doc).
const BOUND: Duration = Duration::from_secs(8);
/// A hung call is cut by the simulator only after this (far beyond any timeout here).
const HANG_MS: u64 = 60_000;

fn sim_config(seed: u64) -> SimConfig {
    let limits = Limits { rpm: Some(RPM), ..Limits::default() };
    let faults = FaultConfig { error_503: 0.05, reset: 0.03, hang: 0.02, hang_ms: HANG_MS, ..FaultConfig::default() };
    let latency = LatencyConfig { ttft_ms: 20.0, jitter: 0.2, ..LatencyConfig::default() };
    SimConfig {
        seed: Some(seed),
        latency,
        faults,
        models: vec![ModelConfig::openai("gpt-4o-mini").with_limits(limits)],
        ..SimConfig::default()
    }
}

fn gateway_config(sim_url: &str) -> String {
    let deployment = format!("attempt_timeout = \"{}s\"", ATTEMPT_TIMEOUT.as_secs());
    let tail = format!(
        "[[classes]]\nname = \"interactive\"\nmax_wait = \"{}s\"\nretry_attempts = 3\nretry_within = \"{}s\"\n",
        MAX_WAIT.as_secs(),
        RETRY_WITHIN.as_secs()
    );
    fleet::config_with(&Parts {
        sim_url,
        store: "[store]\nkind = \"memory\"",
        limits: &format!("rpm = {RPM}"),
        lease: "30s",
        deployment: &deployment,
        tail: &tail,
    })
}

fn body(client: usize) -> serde_json::Value {
    serde_json::json!({
        "model": "chat",
        "messages": [{"role": "user", "content": format!("faults from client {client}")}],
        "max_tokens": 8,
        "user": format!("client-{client}"),
    })
}

/// One round.
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn round(binary: &Path, round: u32, seed: u64) -> anyhow::Result<Vec<Check>> {
    let sim = SimProvider::start(sim_config(seed)).await?;
    let mut gateways = fleet::start(binary, 1, &gateway_config(&sim.url())).await?;
    let load = Load { clients: 12, run: RUN, max_wait: MAX_WAIT };
    let seen = attempts::run_load(fleet::urls(&gateways), load, Instant::now(), KEY, body).await;
    let stats = sim.stats();
    let alive = gateways.iter_mut().all(crate::process::GatewayProcess::alive);
    drop(gateways);
    sim.shutdown().await;

    let slowest = attempts::slowest(&seen);
    let unanswered = seen.iter().filter(|a| a.status == 0).count();
    let f = &stats.faults;
    let injected = format!("503 {}, resets {}, hangs {}", f.error_503, f.reset, f.hang);
    let answers = format!("{} attempts: {:?}", seen.len(), attempts::summary(&seen));
    Ok(vec![
        Check::new(NAME, round, "faults injected (503, reset, hang)", f.error_503 * f.reset * f.hang > 0, injected),
        Check::new(
            NAME,
            round,
            "no request past the gateway's bound (8 s)",
            slowest <= BOUND,
            format!("slowest {} ms", ms(slowest)),
        ),
        Check::new(
            NAME,
            round,
            "every request answered",
            unanswered == 0,
            format!("{unanswered} unanswered; {answers}"),
        ),
        Check::new(
            NAME,
            round,
            "no provider 429",
            stats.rate_limited.total() == 0,
            format!(
                "provider 429s {}; served {} of {} calls",
                stats.rate_limited.total(),
                stats.served,
                stats.requests
            ),
        ),
        Check::new(NAME, round, "gateway alive", alive, String::new()),
    ])
}
