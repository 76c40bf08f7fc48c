//! With the shared store unreachable and `fail_closed`, admission answers 503 quickly and
//! the outage shows in the metrics.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{KEY, chat, sha, start_with};
use sluice_sim::config::{ModelConfig, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_fails_closed_quickly_and_is_counted() {
    // Port 1 on loopback: nothing listens, connections are refused at once.
    let store = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:1\"\ntimeout = \"200ms\"\n";
    let policy = format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 1000 }}\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sha(KEY)
    );
    let sim = SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() };
    let env = start_with(sim, store, &policy).await;
    for _ in 0..3 {
        let started = tokio::time::Instant::now();
        let (status, headers, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"]["code"], "store_unavailable");
        assert!(headers.contains_key("retry-after"));
        assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    }
    let metrics = env.metrics().await;
    assert!(metrics.contains("sluice_store_degraded 1"), "{metrics}");
    let errors: f64 = metrics
        .lines()
        .find(|l| l.starts_with("sluice_store_errors_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap();
    assert!(errors >= 1.0);
    assert_eq!(env.sim.stats().requests, 0, "nothing may reach the provider without admission");
    env.shutdown().await;
}
