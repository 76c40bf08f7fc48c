//! Configuration reload under load (SIGHUP to a real `sluice serve` process): a broken file
//! keeps the last good configuration serving and says why; a good one takes effect without
//! a failed request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Gateway, Load, config, run_load, summary};
use sluice_sim::config::{Limits, ModelConfig, SimConfig};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_keep_serving_broken_files_are_refused_and_good_ones_apply() {
    let limits = Limits { rpm: Some(100_000), ..Limits::default() };
    let sim =
        SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini").with_limits(limits)], ..SimConfig::default() };
    let sim = sluice_sim::SimProvider::start(sim).await.unwrap();
    // The deployment allows 20 requests per second at first.
    let original = config(&sim.url(), "", "rpm = 1200, burst_seconds = 1", "30s");
    let gateway = Gateway::start(&original);
    // The simulator's timeline counts from here, with the load: measured from the
    // simulator's start it would put the reload late by the gateway's start-up.
    sim.reset();
    let origin = Instant::now();
    let load = Load { clients: 8, run: Duration::from_secs(9), max_wait: Duration::from_millis(500) };
    let clients = tokio::spawn(run_load(vec![gateway.url.clone()], load, origin));

    // Second 2: a broken file. The gateway keeps serving on the old configuration.
    tokio::time::sleep_until(origin + Duration::from_secs(2)).await;
    gateway.reload(&original.replace("rpm = 1200", "rpm = \"many\""));
    // Second 5: a good file that raises the limit to 60 requests per second.
    tokio::time::sleep_until(origin + Duration::from_secs(5)).await;
    gateway.reload(&original.replace("rpm = 1200", "rpm = 3600"));

    let attempts = clients.await.unwrap();
    let failed: Vec<_> = attempts.iter().filter(|a| a.status != 200 && a.status != 429).collect();
    assert!(failed.is_empty(), "requests failed around the reloads: {:?}", summary(&attempts));
    assert!(attempts.iter().all(|a| a.decision != "admitted_then_provider_rejected"));
    let log = gateway.stderr();
    assert!(
        log.contains("reload refused") && log.contains("`rpm`"),
        "the broken file's error was not reported:\n{log}"
    );
    assert!(!log.contains("only after a restart"), "a reload of policy only was taken for a process change:\n{log}");
    // The admitted rate follows each configuration: ~20/s before, ~60/s after the reload.
    // Over three seconds a bucket may pass its rate plus one burst (one second's worth):
    // with the clients keeping it saturated that burst is spent at once, but a machine that
    // stalls them lets it fill and spill into the measured seconds. The ceilings allow that
    // one burst and no more; the old limit (20/s) and no limit (hundreds a second) both fail.
    let rate = |from: u64, to: u64| common::admitted_rate(&sim.stats(), from, to);
    let (before, after) = (rate(2, 5), rate(6, 9));
    assert!((17.0..=20.0 + 20.0 / 3.0 + 0.5).contains(&before), "before the reload: {before:.1}/s");
    assert!((50.0..=60.0 + 60.0 / 3.0 + 0.5).contains(&after), "after the reload: {after:.1}/s");
    drop(gateway);
    sim.shutdown().await;
}
