//! The ledger over HTTP: three gateways share one Redis and keep their spend in one
//! Postgres. A tenant has spent 0.90 of its 1.00 day when Redis restarts with nothing; it
//! can then spend at most the 0.10 left, on any gateway, and each gateway answers its
//! budget refusal (429), not an outage, once Redis is back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Deadline;
use sluice_ledger::local::LocalPostgres;
use sluice_ledger::{LedgerConfig, PostgresLedger};
use sluice_quota::{Clock, SpendRecord, SystemClock};
use sluice_redis::local::LocalRedis;
use sluice_sim::config::{ModelConfig, SimConfig};
use sluice_sim::latency::Completion;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_restarts_empty_a_tenant_at_ninety_percent_spends_at_most_the_rest() {
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let mut redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let model = ModelConfig { completion: Completion::Fixed { tokens: 10 }, ..ModelConfig::openai("gpt-4o-mini") };
    let sim = sluice_sim::SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await.unwrap();
    let process = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"1s\"\n", redis.url());
    let config = common::config(&sim, &process, &common::priced_policy("", 1.0));
    let mut gateways = Vec::new();
    for _ in 0..3 {
        let settings = LedgerConfig {
            url: postgres.url(),
            password: None,
            timeout: Duration::from_secs(5),
            flush_every: Duration::from_millis(250),
        };
        let record: Arc<dyn SpendRecord> = PostgresLedger::connect(settings).await.unwrap();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let store = sluice_redis::choose::from_config(&config.store, Arc::clone(&clock), Some(record));
        let listen = "127.0.0.1:0".parse().unwrap();
        gateways.push(sluice_server::Running::start_with_clock(&config, store, clock, listen).await.unwrap());
    }
    let urls: Vec<String> = gateways.iter().map(|g| g.url()).collect();
    let http = reqwest::Client::new();

    // 0.90 of the day, spread over the three gateways.
    for n in 0..9 {
        assert_eq!(common::ask_fast(&http, &urls[n % 3]).await, 200, "request {n} of the first 0.90");
    }
    // The last answers' settlements land (they follow the response), then Redis loses
    // everything.
    let settled = Deadline::after(Duration::from_millis(300));
    while settled.sleep(Duration::from_millis(100)).await {}
    redis.kill();
    redis.restart().expect("redis-server restarts");

    // Asked again and again on every gateway for 8 s: one more request of 0.10 is served,
    // whichever gateway takes it; then only budget refusals (once each gateway found Redis
    // back, after at most one probe of answering 503).
    let mut served = 0;
    let mut last = vec![0_u16; 3];
    let deadline = Deadline::after(Duration::from_secs(8));
    let mut n = 0;
    while deadline.sleep(Duration::from_millis(50)).await {
        let status = common::ask_fast(&http, &urls[n % 3]).await;
        assert!(matches!(status, 200 | 429 | 503), "gateway {} answered {status}", n % 3);
        if status == 200 {
            served += 1;
        }
        last[n % 3] = status;
        n += 1;
    }
    assert_eq!(served, 1, "after the restart {served} requests of 0.10 were served on a day with 0.10 left");
    assert_eq!(last, [429, 429, 429], "each gateway refuses on the budget at the end");
    for gateway in gateways {
        gateway.shutdown().await;
    }
    sim.shutdown().await;
}
