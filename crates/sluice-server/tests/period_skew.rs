//! One clock for budget periods, over HTTP: three gateways share one Redis, their own
//! clocks 0, +3 min and −3 min off, with a daily budget whose day (in a time zone chosen so)
//! ends a few seconds into the test. The day's spend is used up before midnight; at Redis's
//! midnight every gateway admits again, exactly what the budget holds, and then refuses:
//! the gateway 3 minutes ahead did not start the day early, the one 3 minutes behind did
//! not start it again, and the day's spend equals what was charged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Deadline;
use sluice_quota::{Clock, Nanos, SystemClock};
use sluice_redis::local::LocalRedis;
use sluice_sim::config::{ModelConfig, SimConfig};
use sluice_sim::latency::Completion;

/// Requests the day's budget holds.
const HOLDS: usize = 4;

/// The system clock, `offset_ms` off.
#[derive(Debug)]
struct Skewed {
    real: SystemClock,
    offset_ms: i64,
}

impl Clock for Skewed {
    fn now(&self) -> Nanos {
        self.real.now()
    }

    fn unix_millis(&self) -> u64 {
        self.real.unix_millis().saturating_add_signed(self.offset_ms)
    }

    fn sleep_until(&self, deadline: Nanos) -> sluice_quota::clock::Wait {
        self.real.sleep_until(deadline)
    }
}

/// A fixed offset east of UTC, whole minutes, in which the next midnight falls 5 to 65 s
/// after `now_s`; that midnight (unix seconds). Both gateways 3 minutes off are then on the
/// other side of it by their own clocks.
fn zone_ending_a_day_soon(now_s: u64) -> (String, u64) {
    let to_midnight = (86_400 - (now_s + 5) % 86_400) % 86_400;
    let mut offset = i64::try_from(to_midnight - to_midnight % 60).unwrap();
    let midnight = now_s + 5 + (to_midnight % 60);
    if offset >= 43_200 {
        offset -= 86_400;
    }
    let sign = if offset < 0 { '-' } else { '+' };
    let minutes = offset.abs() / 60;
    (format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60), midnight)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_gateways_minutes_apart_start_the_day_once_at_the_stores_midnight() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let model = ModelConfig { completion: Completion::Fixed { tokens: 10 }, ..ModelConfig::openai("gpt-4o-mini") };
    let sim = sluice_sim::SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await.unwrap();
    let (zone, midnight) = zone_ending_a_day_soon(SystemClock::new().unix_millis() / 1_000);
    let process = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\ntimeout = \"2s\"\n", redis.url());
    let config =
        common::config(&sim, &process, &common::priced_policy(&format!("[budgets]\ntime_zone = \"{zone}\"\n"), 0.4));
    let mut gateways = Vec::new();
    for offset_ms in [0, 180_000, -180_000] {
        let clock: Arc<dyn Clock> = Arc::new(Skewed { real: SystemClock::new(), offset_ms });
        let store = sluice_redis::choose::from_config(&config.store, Arc::clone(&clock), None);
        let listen = "127.0.0.1:0".parse().unwrap();
        gateways.push(sluice_server::Running::start_with_clock(&config, store, clock, listen).await.unwrap());
    }
    let urls: Vec<String> = gateways.iter().map(|g| g.url()).collect();
    let http = reqwest::Client::new();

    // Before midnight: the day's budget is spent on every gateway, the one ahead included.
    let mut spent = 0;
    for n in 0..HOLDS * 3 {
        if common::ask_fast(&http, &urls[n % 3]).await == 200 {
            spent += 1;
        }
    }
    assert_eq!(spent, HOLDS, "the day's budget holds {HOLDS}");
    let now_s = || SystemClock::new().unix_millis() / 1_000;
    assert!(now_s() < midnight, "the test took too long to reach midnight first");
    for url in &urls {
        assert_eq!(common::ask_fast(&http, url).await, 429, "{url} admits before the store's midnight");
    }

    // After Redis's midnight: exactly the day's budget, across all three, then refusals.
    let after = Deadline::after(Duration::from_secs(80));
    while now_s() <= midnight {
        assert!(after.sleep(Duration::from_millis(200)).await, "midnight never came");
    }
    let settle = Deadline::after(Duration::from_secs(1));
    while settle.sleep(Duration::from_millis(100)).await {}
    let mut admitted = Vec::new();
    for n in 0..HOLDS * 3 {
        admitted.push(common::ask_fast(&http, &urls[n % 3]).await);
    }
    let served = admitted.iter().filter(|s| **s == 200).count();
    assert_eq!(served, HOLDS, "the new day admitted {admitted:?}");
    assert!(admitted.iter().all(|s| *s == 200 || *s == 429), "{admitted:?}");
    for url in &urls {
        assert_eq!(common::ask_fast(&http, url).await, 429, "{url}: the day was started again");
    }
    for gateway in gateways {
        gateway.shutdown().await;
    }
    sim.shutdown().await;
}
