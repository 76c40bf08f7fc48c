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

/// `/readyz` follows the shared store when it fails closed (a load balancer routes away
/// from an instance that would refuse everything), and comes back with it; with
/// `fail_open_local` the instance keeps serving, so it stays ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_a_fail_closed_redis_and_ignores_a_fail_open_one() {
    let mut redis = sluice_redis::local::LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let policy = format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n",
        sha(KEY)
    );
    let store = |mode: &str| {
        format!(
            "[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"200ms\"\non_unavailable = \"{mode}\"\n",
            redis.url()
        )
    };
    let sim = || SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() };
    let closed = start_with(sim(), &store("fail_closed"), &policy).await;
    let open = start_with(sim(), &store("fail_open_local"), &policy).await;
    let ready = |env: &common::Env| {
        let url = format!("{}/readyz", env.gateway.url());
        let http = env.http.clone();
        async move {
            let response = http.get(url).send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    assert_eq!(ready(&closed).await, (200, "ready".to_owned()));
    redis.kill();
    // No request has met the outage yet: readiness finds it by itself.
    let (status, why) = ready(&closed).await;
    assert_eq!(status, 503, "{why}");
    assert!(why.contains("quota store unreachable") && why.contains("fail_closed"), "{why}");
    assert_eq!(ready(&open).await.0, 200, "fail_open_local keeps serving, so it stays ready");
    redis.restart().unwrap();
    let deadline = common::Deadline::after(Duration::from_secs(20));
    while ready(&closed).await.0 != 200 {
        assert!(deadline.sleep(Duration::from_millis(200)).await, "not ready again after Redis returned");
    }
    closed.shutdown().await;
    open.shutdown().await;
}
