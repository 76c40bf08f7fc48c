//! A money budget that streams in flight hold almost entirely, each reserving far more than
//! it will use: a request refused meanwhile is told to come back in a moment, not at the
//! end of the day; one of a class that waits is queued and served once the streams settle.
//! A budget truly spent still answers with the day's end.
//!
//! The gateway runs on a [`FakeClock`] that never moves (the day's end is exact); the
//! simulated provider streams on real time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::sha;
use serde_json::{Value, json};
use sluice_quota::{Calendar, Clock as _, FakeClock};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};
use sluice_sim::latency::LatencyConfig;
use tokio::time::Instant;

/// A class that does not wait.
const NOW: &str = "sk-test-budget-holds-now";
/// A class that waits up to 30 s.
const PATIENT: &str = "sk-test-budget-holds-patient";
/// Output tokens each request allows: 0.30 at 0.001 a token.
const MAX_TOKENS: u64 = 300;
/// Tokens a held stream uses of them: 0.02.
const USED: u64 = 20;

fn sim() -> SimConfig {
    // A stream of 20 tokens, one every 100 ms: about two seconds in flight.
    let slow = LatencyConfig { ttft_ms: 0.0, per_token_ms: 100.0, jitter: 0.0, chunk_tokens: 1 };
    let held = ModelConfig {
        completion: Completion::Fixed { tokens: USED },
        latency: Some(slow),
        ..ModelConfig::openai("gpt-held")
    };
    // Answers that use all they reserve, at once.
    let full = ModelConfig { completion: Completion::Fixed { tokens: MAX_TOKENS }, ..ModelConfig::openai("gpt-full") };
    SimConfig { seed: Some(7), models: vec![held, full], ..SimConfig::default() }
}

/// Tenant `acme` with 1.00 a day, on two deployments priced 0.001 per output token (input
/// free): `held` streams slowly and uses little of what it reserves, `full` uses it all.
fn policy() -> String {
    let deployment = |name: &str, model: &str| {
        format!(
            "[[deployments]]\nname = \"{name}\"\nprovider = \"sim\"\nmodel = \"{model}\"\n\
             limits = {{ rpm = 100000 }}\nprice = {{ input = 0.0, output = 1000.0 }}\n\n\
             [[models]]\nname = \"{name}\"\ndeployment = \"{name}\"\n\n"
        )
    };
    format!(
        "[[classes]]\nname = \"now\"\nmax_wait = \"1ms\"\n\n\
         [[classes]]\nname = \"patient\"\nmax_wait = \"30s\"\n\n\
         {held}{full}\
         [[tenants]]\nname = \"acme\"\nlimits = {{ budget = {{ day = 1.0 }} }}\n\n\
         [[keys]]\nid = \"now\"\ntenant = \"acme\"\nclass = \"now\"\nsha256 = \"{now}\"\n\n\
         [[keys]]\nid = \"patient\"\ntenant = \"acme\"\nclass = \"patient\"\nsha256 = \"{patient}\"\n",
        held = deployment("held", "gpt-held"),
        full = deployment("full", "gpt-full"),
        now = sha(NOW),
        patient = sha(PATIENT),
    )
}

fn chat(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": MAX_TOKENS,
        "stream": stream,
    })
}

/// The refusal's wait, from its body's `retry_after_ms`, checked against its `retry-after`
/// header (whole seconds, rounded up).
fn retry_after_ms(headers: &reqwest::header::HeaderMap, body: &Value) -> u64 {
    let ms = body["error"]["retry_after_ms"].as_u64().unwrap_or_else(|| panic!("no retry_after_ms: {body}"));
    let header: u64 = headers.get("retry-after").unwrap().to_str().unwrap().parse().unwrap();
    assert_eq!(header, ms.div_ceil(1_000), "retry-after agrees with retry_after_ms");
    ms
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_held_by_streams_in_flight_refuses_for_a_moment_and_queues_until_they_settle() {
    let clock = FakeClock::default();
    let env = common::start_clocked(sim(), &policy(), Arc::new(clock.clone())).await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());

    // Three streams reserve 0.30 each: 0.90 of the day's 1.00 is held. Each is in flight
    // once its first bytes arrived.
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut response = env.http.post(&url).bearer_auth(NOW).json(&chat("held", true)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.chunk().await.unwrap().is_some(), "the stream began");
        streams.push(response);
    }

    // A fourth would fit once they settle (each uses 0.02), not now: refused for a moment.
    let started = Instant::now();
    let (status, headers, body) = env.post("/v1/chat/completions", NOW, &chat("held", false)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["limiter"], "budget", "{body}");
    assert_eq!(body["error"]["scope"], "tenant", "{body}");
    let wait = retry_after_ms(&headers, &body);
    assert!((1..=5_000).contains(&wait), "a wait of seconds, not the day's end: {wait} ms");

    // One of a class that waits is queued, and served once the streams settle.
    let patient = {
        let http = env.http.clone();
        let url = url.clone();
        tokio::spawn(async move {
            let response = http.post(&url).bearer_auth(PATIENT).json(&chat("held", false)).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap(), Instant::now())
        })
    };
    let mut settled = None;
    for mut stream in streams {
        while stream.chunk().await.unwrap().is_some() {}
        settled = Some(Instant::now());
    }
    let (status, body, served) = tokio::time::timeout(Duration::from_secs(25), patient).await.unwrap().unwrap();
    assert_eq!(status, 200, "queued until the holds settled: {body}");
    assert_eq!(body["usage"]["completion_tokens"], USED, "{body}");
    assert!(served.duration_since(started) >= Duration::from_secs(1), "it waited for the streams to settle");
    assert!(settled.unwrap() <= served + Duration::from_millis(500), "served after the streams ended");

    // 0.08 spent, nothing held. Three answers that use all they reserve: 0.98. The next
    // one does not fit before the day ends, held or not: the day's end is its wait.
    for _ in 0..3 {
        let (status, _, body) = env.post("/v1/chat/completions", NOW, &chat("full", false)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, headers, body) = env.post("/v1/chat/completions", PATIENT, &chat("full", false)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["limiter"], "budget", "{body}");
    let day = Calendar::at(clock.unix_seconds(), 0).day.reset;
    assert_eq!(Duration::from_millis(retry_after_ms(&headers, &body)), day, "a spent budget waits for the next day");
    env.shutdown().await;
}
