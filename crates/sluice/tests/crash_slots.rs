//! Issue #34 (item 8) acceptance: a crashed instance's reservations come back in seconds,
//! while a live instance's long stream keeps its slot. Three `sluice serve` processes share
//! one `redis-server` and a deployment with four concurrency slots, in front of the
//! simulated provider streaming slowly. One instance holds a long stream; another fills the
//! other three slots and is killed (SIGKILL); the third must take those three within 10 s,
//! must not get the fourth while the long stream runs (past the heartbeat lease), and gets it
//! once that stream has ended. Everything is real: child processes, a `redis-server`,
//! loopback HTTP, wall-clock time; the server lease is the default 11 minutes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{KEY, gateways, redis_store};
use serde_json::json;
use sluice_bench::fleet::{Parts, config_with};
use sluice_redis::local::LocalRedis;
use sluice_sim::{SimConfig, SimProvider};
use tokio::time::Instant;

/// The deployment's concurrency slots.
const SLOTS: usize = 4;
/// The simulator sends one token every this many milliseconds: a stream of `n` tokens
/// lasts `n × 50 ms`.
const PER_TOKEN_MS: u64 = 50;
/// The live instance's long stream: 16 s, twice the heartbeat lease.
const LONG_TOKENS: u64 = 320;
/// Streams that hold a slot for the rest of the test (20 s).
const HOLD_TOKENS: u64 = 400;
/// The heartbeat lease of a gateway on this store (`[store] timeout` 250 ms).
const HEARTBEAT: Duration = sluice_redis::heartbeat::HEARTBEAT_LEASE;
/// The bar: a dead instance's slots are free again this soon after it died.
const BACK_WITHIN: Duration = Duration::from_secs(10);

/// A stream admitted by a gateway (its 200 came), read to its end by a task.
struct Stream {
    started: Instant,
    reading: tokio::task::JoinHandle<(String, Instant)>,
}

/// Asks `url` for a stream of `tokens` tokens, waiting at most `max_wait_ms` for a slot:
/// the stream once admitted, else the refusal's status and body.
async fn stream(http: &reqwest::Client, url: &str, tokens: u64, max_wait_ms: u64) -> Result<Stream, (u16, String)> {
    let body = json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "tell me a long story"}],
        "max_tokens": tokens,
        "stream": true,
    });
    let sent = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("x-sluice-max-wait-ms", max_wait_ms.to_string())
        .json(&body)
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        Err(e) => return Err((0, e.to_string())),
    };
    let status = response.status().as_u16();
    if status != 200 {
        return Err((status, response.text().await.unwrap_or_default()));
    }
    let started = Instant::now();
    let reading = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        (text, Instant::now())
    });
    Ok(Stream { started, reading })
}

/// A refusal for busy slots, at once (no wait).
async fn assert_slots_busy(http: &reqwest::Client, url: &str, why: &str) {
    match stream(http, url, HOLD_TOKENS, 0).await {
        Ok(_) => panic!("a slot was free: {why}"),
        Err((status, body)) => {
            assert_eq!(status, 429, "{why}: {body}");
            assert!(body.contains("concurrency"), "{why}: refused for another reason: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_slots_come_back_while_a_live_long_stream_keeps_its_own() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let sim_text = format!(
        "seed = 8\n\n[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\n\
         completion = {{ dist = \"fixed\", tokens = 1000 }}\n\
         latency = {{ ttft_ms = 0.0, per_token_ms = {PER_TOKEN_MS}.0, jitter = 0.0, chunk_tokens = 1 }}\n"
    );
    let sim = SimProvider::start(SimConfig::from_toml_str(&sim_text).unwrap()).await.unwrap();
    let store = redis_store(&redis.url(), "crash-slots", "fail_closed");
    let text = config_with(&Parts {
        sim_url: &sim.url(),
        store: &store,
        limits: &format!("concurrency = {SLOTS}"),
        // The default lease: without heartbeats a dead instance's slots stay taken 11 minutes.
        lease: "660s",
        deployment: "",
        tail: "",
    });
    let mut all = gateways(3, &text);
    let (live, doomed, taker) = (all[0].url.clone(), all[1].url.clone(), all[2].url.clone());
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();

    // The live instance's long stream, then the doomed instance fills the other slots.
    let long = stream(&http, &live, LONG_TOKENS, 2_000).await.expect("the long stream was refused");
    let mut doomed_streams = Vec::new();
    for _ in 1..SLOTS {
        doomed_streams.push(stream(&http, &doomed, HOLD_TOKENS, 2_000).await.expect("a slot was refused"));
    }
    assert_slots_busy(&http, &taker, "every slot should be held before the kill").await;

    all[1].kill();
    let killed = Instant::now();
    drop(doomed_streams);

    // The taker asks until it holds the dead instance's slots (each ask waits up to 1 s in
    // its queue, which tries again every 25 ms). Bounded: 3 s past the bar.
    let mut taken = Vec::new();
    while taken.len() < SLOTS - 1 && killed.elapsed() < BACK_WITHIN + Duration::from_secs(3) {
        match stream(&http, &taker, HOLD_TOKENS, 1_000).await {
            Ok(stream) => taken.push(stream),
            Err((429, _)) => {}
            Err((status, body)) => panic!("unexpected answer {status}: {body}"),
        }
    }
    let back_after = killed.elapsed();
    eprintln!("the killed instance's {} slots were taken again {back_after:?} after the kill", taken.len());
    assert_eq!(taken.len(), SLOTS - 1, "the dead instance's slots did not come back ({back_after:?} after the kill)");
    assert!(back_after <= BACK_WITHIN, "the dead instance's slots came back only {back_after:?} after the kill");

    // The long stream still holds its slot past the heartbeat lease (with a margin), and
    // again shortly before it ends.
    for age in [HEARTBEAT + Duration::from_secs(3), Duration::from_millis(LONG_TOKENS * PER_TOKEN_MS - 1_500)] {
        tokio::time::sleep_until(long.started + age).await;
        assert!(!long.reading.is_finished(), "the long stream ended early, at {:?}", long.started.elapsed());
        assert_slots_busy(&http, &taker, &format!("the live long stream lost its slot at {age:?}")).await;
    }
    let (text, ended) = long.reading.await.unwrap();
    let lasted = ended - long.started;
    assert!(text.contains("data: [DONE]"), "the long stream did not end cleanly: {text}");
    assert!(lasted > HEARTBEAT * 3 / 2, "the long stream was not long: {lasted:?}");
    eprintln!("the live long stream held its slot for {lasted:?}");

    // Its settlement gives the last slot back, to anyone.
    let last = stream(&http, &taker, HOLD_TOKENS, 2_000).await;
    assert!(last.is_ok(), "the long stream's slot did not come back: {:?}", last.err());
    assert!(all[0].alive() && all[2].alive(), "a live gateway died");
}
