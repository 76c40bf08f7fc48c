//! The provider enforces a shorter window than configured: a simulated provider admitting
//! one second's worth at a time (OpenAI's quantized limits) behind a gateway configured
//! with `burst_seconds = 3`. The provider's 429s come while its headers still show most of
//! the minute left: sluice shrinks the deployment's burst window (not its rate) until they
//! stop — on one instance, and on three instances sharing one Redis, where the instances
//! that never saw a 429 take the learned window too. Real HTTP on 127.0.0.1, wall-clock
//! time with generous bounds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::time::Duration;

use serde_json::{Value, json};
use sluice_bench::attempts::{Load, run_load};
use sluice_bench::deploy::{Gateways, StoreKind};
use sluice_bench::scenario::{INTERACTIVE_KEY, MODEL, Provider};
use sluice_sim::{SimHandle, SimProvider};
use tokio::time::Instant;

/// One test at a time: each measures 429s on a 2-core machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// 100 requests a second, enforced one second's worth at a time.
fn provider() -> Provider {
    Provider {
        rpm: 6_000,
        tpm: 100_000_000,
        time_scale: 1.0,
        ttft_ms: 20.0,
        per_token_ms: 0.0,
        completion_mean: 8.0,
        window: Some(1.0),
        burst_sim_seconds: 3.0,
    }
}

fn body(client: usize) -> Value {
    json!({
        "model": MODEL,
        "user": format!("client-{client}"),
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hello there"}],
    })
}

async fn start(instances: usize, store: StoreKind) -> (SimHandle, Gateways) {
    let p = provider();
    let sim = SimProvider::start(p.sim_config(7)).await.unwrap();
    let config = |table: &str| p.gateway_config(&sim.url(), 1.0, table);
    let gateways = Gateways::start(instances, store, None, config).await.unwrap();
    (sim, gateways)
}

/// 24 clients on `urls` for `run`, honouring the gateway's `retry-after-ms`.
async fn load(urls: &[String], run: Duration) {
    let load = Load { clients: 24, run, max_wait: Duration::from_secs(1) };
    run_load(urls.to_vec(), load, Instant::now(), INTERACTIVE_KEY, body).await;
}

/// The burst window each instance's deployment uses (ms), and its request bucket's burst.
async fn windows(gateways: &Gateways) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    for running in &gateways.instances {
        let gateway = running.state().current();
        let route = &gateway.deployments[0];
        // `sluice_burst_window_seconds`, in whole milliseconds.
        let seconds = gateway.services.metrics.adaptive.burst_window.get_or_create(&route.counters.labels).get();
        let window = (seconds * 1000.0).round() as i64;
        let snapshot = gateway.services.store.snapshot(route.scope).await.unwrap().unwrap();
        let rpm = snapshot.rates.iter().find(|r| r.limiter.to_string() == "rpm").unwrap();
        out.push((window, rpm.burst));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_learns_the_providers_one_second_window_and_the_429s_stop() {
    let _serial = SERIAL.lock().await;
    let (sim, gateways) = start(1, StoreKind::Memory).await;
    sim.reset();
    load(&gateways.urls(), Duration::from_secs(8)).await;
    let learning = sim.stats().rate_limited.total();
    let learned = windows(&gateways).await;
    load(&gateways.urls(), Duration::from_secs(6)).await;
    let stats = sim.stats();
    let after = stats.rate_limited.total() - learning;
    eprintln!("429s while learning {learning}, after {after}; windows {learned:?}; served {}", stats.served);
    assert!(learning > 0, "the configured 3 s burst should meet the provider's 1 s window");
    let (window, burst) = learned[0];
    assert!((250..=1_000).contains(&window), "the burst window shrank to the provider's: {learned:?}");
    assert!(burst <= 100, "at most one second of 100 requests a second: {learned:?}");
    assert_eq!(after, 0, "the provider still refused once the window was learned");
    gateways.shutdown().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_redis_all_use_the_window_one_of_them_learned() {
    let _serial = SERIAL.lock().await;
    let (sim, gateways) = start(3, StoreKind::Redis).await;
    sim.reset();
    let urls = gateways.urls();
    // Only the first instance sends, so only it meets the provider's 429s.
    load(&urls[..1], Duration::from_secs(8)).await;
    // The others adopt the shared window on their next poll (every 500 ms).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let learned = windows(&gateways).await;
    let learning = sim.stats().rate_limited.total();
    assert!(learning > 0, "the configured 3 s burst should meet the provider's 1 s window");
    assert_eq!(learned.len(), 3, "a window for each instance: {learned:?}");
    for (window, burst) in &learned {
        assert!((250..=1_000).contains(window), "every instance uses the learned window: {learned:?}");
        assert!(*burst <= 100, "{learned:?}");
    }
    // Now all three send: with the learned window none of them overruns the provider.
    load(&urls, Duration::from_secs(6)).await;
    let after = sim.stats().rate_limited.total() - learning;
    eprintln!("3 instances: 429s while learning {learning}, after {after}; windows {learned:?}");
    assert_eq!(after, 0, "an instance still overran the provider's window");
    gateways.shutdown().await;
    sim.shutdown().await;
}
