//! One deadline per request, over real HTTP on tokio's paused clock (the gateway's clock
//! follows it): waits on the primary and on a fallback add up to no more than the class's
//! `max_wait`; a client's own deadline (`x-sluice-max-wait-ms`) shorter than the predicted
//! wait is refused at once with the prediction; a request that queued says how long.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Env, KEY, TokioClock, chat, sha, start_clocked};
use serde_json::Value;
use sluice_sim::config::{Completion, LatencyConfig, Limits, ModelConfig, SimConfig};
use tokio::time::Instant;

/// Both models answer after a minute, so two requests hold both deployments' only slots.
fn slow_sim() -> SimConfig {
    let latency = LatencyConfig { ttft_ms: 60_000.0, ..LatencyConfig::default() };
    let model = |name: &str| ModelConfig {
        completion: Completion::Fixed { tokens: 1 },
        latency: Some(latency.clone()),
        ..ModelConfig::openai(name).with_limits(Limits { rpm: Some(1_000_000), ..Limits::default() })
    };
    SimConfig { models: vec![model("gpt-4o-mini"), model("gpt-4o")], ..SimConfig::default() }
}

/// `fast` on `primary`, falling back to `backup` when its queue wait runs out; one slot each;
/// `p` and `b` reach each deployment alone. The default class waits at most 2 s.
fn fallback_policy() -> String {
    format!(
        r#"
[[deployments]]
name = "primary"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 1000000, concurrency = 1 }}

[[deployments]]
name = "backup"
provider = "sim"
model = "gpt-4o"
limits = {{ rpm = 1000000, concurrency = 1 }}

[[models]]
name = "fast"
deployment = "primary"
default_max_tokens = 8
fallbacks = [{{ deployment = "backup", when = ["queue_wait_exceeded"] }}]

[[models]]
name = "p"
deployment = "primary"

[[models]]
name = "b"
deployment = "backup"

[[tenants]]
name = "t"

[[keys]]
id = "k"
tenant = "t"
sha256 = "{}"
"#,
        sha(KEY)
    )
}

async fn post(env: &Env, body: &Value, max_wait_ms: Option<&str>) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = env.http.post(format!("{}/v1/chat/completions", env.gateway.url())).bearer_auth(KEY).json(body);
    if let Some(ms) = max_wait_ms {
        request = request.header("x-sluice-max-wait-ms", ms);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.json().await.unwrap())
}

fn header_ms(headers: &reqwest::header::HeaderMap, name: &str) -> Option<u64> {
    headers.get(name).map(|v| v.to_str().unwrap().parse().unwrap())
}

#[tokio::test(start_paused = true)]
async fn waits_on_the_primary_and_the_fallback_share_one_max_wait() {
    let env = std::sync::Arc::new(start_clocked(slow_sim(), &fallback_policy(), TokioClock::new()).await);
    // Both slots taken by answers a minute away.
    let mut holders = Vec::new();
    for model in ["p", "b"] {
        let env = std::sync::Arc::clone(&env);
        holders.push(tokio::spawn(async move { env.post("/v1/chat/completions", KEY, &chat(model, 4, 1)).await.0 }));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let arrived = Instant::now();
    let (status, _, body) = post(&env, &chat("fast", 4, 1), None).await;
    let waited = arrived.elapsed();
    assert_eq!(status, 429, "{body}");
    // Refused by the fallback (its model is the backup's), after waiting on the primary.
    assert_eq!(body["error"]["provider_model"], "gpt-4o", "{body}");
    assert!(waited >= Duration::from_secs(2), "the primary's queue was waited in: {waited:?}");
    assert!(waited <= Duration::from_millis(2_050), "one max_wait for both, not two: {waited:?}");
    for holder in holders {
        assert_eq!(holder.await.unwrap(), 200);
    }
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

fn paced_sim() -> SimConfig {
    let limits = Limits { rpm: Some(1_000_000), tpm: Some(100_000_000), ..Limits::default() };
    let model = ModelConfig { completion: Completion::Fixed { tokens: 1 }, ..ModelConfig::openai("gpt-4o-mini") };
    SimConfig { models: vec![model.with_limits(limits)], ..SimConfig::default() }
}

/// One deployment passing one request a second (`rpm = 60`); the class waits up to 10 s.
fn paced_policy() -> String {
    format!(
        r#"
[[deployments]]
name = "d"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 60 }}

[[models]]
name = "fast"
deployment = "d"

[[classes]]
name = "interactive"
max_wait = "10s"

[[tenants]]
name = "t"

[[keys]]
id = "k"
tenant = "t"
sha256 = "{}"
"#,
        sha(KEY)
    )
}

#[tokio::test(start_paused = true)]
async fn a_client_deadline_shorter_than_the_predicted_wait_is_refused_at_once_and_a_queued_answer_says_how_long() {
    let env = start_clocked(paced_sim(), &paced_policy(), TokioClock::new()).await;
    // Idle for a while: the deployment's window is whole.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, headers, body) = post(&env, &chat("fast", 4, 1), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header_ms(&headers, "x-sluice-queued-ms"), None, "granted at once");

    // The next slot is a second away; this client waits 300 ms: refused at once, told when.
    let arrived = Instant::now();
    let (status, headers, body) = post(&env, &chat("fast", 4, 1), Some("300")).await;
    assert_eq!(status, 429, "{body}");
    assert!(arrived.elapsed() < Duration::from_millis(50), "not held: {:?}", arrived.elapsed());
    let retry = header_ms(&headers, "retry-after-ms").unwrap();
    assert!((300..=1_100).contains(&retry), "the predicted grant, past the deadline: {retry} ms");
    assert_eq!(body["error"]["retry_after_ms"], retry);
    // A deadline just past the prediction is within the prediction's margin of error: a wait
    // that would likely run out is refused at once too, not at the deadline.
    let within_margin = (retry + retry / 20).to_string();
    let arrived = Instant::now();
    let (status, headers, body) = post(&env, &chat("fast", 4, 1), Some(&within_margin)).await;
    assert_eq!(status, 429, "{body}");
    assert!(arrived.elapsed() < Duration::from_millis(50), "not held: {:?}", arrived.elapsed());
    assert!(header_ms(&headers, "retry-after-ms").is_some());
    let metrics = env.metrics().await;
    // The class's series exists from the start, at zero.
    let queued: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_queue_wait_seconds_count{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(queued, 0.0, "nothing queued yet:\n{metrics}");

    // Without a deadline of its own (or with a long one) it waits its turn, and says so.
    let (status, headers, body) = post(&env, &chat("fast", 4, 1), Some("5000")).await;
    assert_eq!(status, 200, "{body}");
    let queued = header_ms(&headers, "x-sluice-queued-ms").unwrap();
    assert!((500..=1_100).contains(&queued), "queued {queued} ms for the next slot");
    // The wait predicted when it joined the queue travels beside it.
    let predicted = header_ms(&headers, "x-sluice-predicted-ms").unwrap();
    assert!(predicted <= 5_000, "predicted {predicted} ms, within its deadline");
    // A garbage deadline is ignored: the class's 10 s apply, and it queues too.
    let (status, headers, _) = post(&env, &chat("fast", 4, 1), Some("soon")).await;
    assert_eq!(status, 200);
    assert!(header_ms(&headers, "x-sluice-queued-ms").is_some());
    env.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn behind_a_queue_the_prediction_is_the_queues_and_a_shorter_client_deadline_is_refused_at_once() {
    let env = std::sync::Arc::new(start_clocked(paced_sim(), &paced_policy(), TokioClock::new()).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(post(&env, &chat("fast", 4, 1), None).await.0, 200);
    // One request waits for the next slot, a second away ...
    let ahead = {
        let env = std::sync::Arc::clone(&env);
        tokio::spawn(async move { post(&env, &chat("fast", 4, 1), None).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    // ... so one behind it, whose client waits half a second, is told at once when it could pass.
    let arrived = Instant::now();
    let (status, headers, body) = post(&env, &chat("fast", 4, 1), Some("500")).await;
    assert_eq!(status, 429, "{body}");
    assert!(arrived.elapsed() < Duration::from_millis(50), "not held: {:?}", arrived.elapsed());
    let retry = header_ms(&headers, "retry-after-ms").unwrap();
    assert!(retry > 500, "the queue's prediction, past the deadline: {retry} ms");
    let (status, headers, _) = ahead.await.unwrap();
    assert_eq!(status, 200);
    assert!(header_ms(&headers, "x-sluice-queued-ms").is_some());
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

/// One deployment of 60,000 TPM with the default one-second burst (a thousand tokens at a
/// time, the last 20 ms of it a guard); the class waits up to 10 s.
fn windowed_policy() -> String {
    paced_policy().replace("limits = { rpm = 60 }", "limits = { tpm = 60000 }")
}

#[tokio::test(start_paused = true)]
async fn a_client_that_hangs_up_takes_its_claim_on_the_window_with_it() {
    let env = std::sync::Arc::new(start_clocked(paced_sim(), &windowed_policy(), TokioClock::new()).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // About 305 tokens: the window keeps about 700.
    let (status, headers, body) = post(&env, &chat("fast", 4, 300), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header_ms(&headers, "x-sluice-queued-ms"), None);
    // About 1,005 tokens need the window idle, about 330 ms away: refused, the request
    // claims that window and waits; its client hangs up 50 ms later.
    let large = {
        let env = std::sync::Arc::clone(&env);
        tokio::spawn(async move { post(&env, &chat("fast", 4, 1_000), Some("10000")).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    large.abort();
    assert!(large.await.unwrap_err().is_cancelled());
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The window has room for another 305 tokens, and nobody claims it any more: admitted
    // at once (a claim left behind would hold it back until about 580 ms).
    let (status, headers, body) = post(&env, &chat("fast", 4, 300), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(header_ms(&headers, "x-sluice-queued-ms"), None, "held back by a claim whose request went");
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

/// Sends `body` with `x-stainless-retry-count: retries` (as the OpenAI and Anthropic SDKs
/// do on their retries) and says when it was answered.
async fn post_retry(env: &Env, retries: u32) -> (u16, Instant) {
    let response = env
        .http
        .post(format!("{}/v1/chat/completions", env.gateway.url()))
        .bearer_auth(KEY)
        .header("x-stainless-retry-count", retries.to_string())
        .json(&chat("fast", 4, 1))
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), Instant::now())
}

#[tokio::test(start_paused = true)]
async fn a_retried_request_waits_ahead_of_first_attempts_so_the_same_client_is_not_refused_again() {
    let env = std::sync::Arc::new(start_clocked(paced_sim(), &paced_policy(), TokioClock::new()).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(post(&env, &chat("fast", 4, 1), None).await.0, 200);
    // Three first attempts queue for the next slots, a second apart ...
    let mut first = Vec::new();
    for _ in 0..3 {
        let env = std::sync::Arc::clone(&env);
        first.push(tokio::spawn(async move { post_retry(&env, 0).await }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // ... then a request its SDK retries for the second time arrives, and one retried once.
    let twice = {
        let env = std::sync::Arc::clone(&env);
        tokio::spawn(async move { post_retry(&env, 2).await })
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    let once = post_retry(&env, 1).await;
    let twice = twice.await.unwrap();
    let mut firsts = Vec::new();
    for handle in first {
        firsts.push(handle.await.unwrap());
    }
    for (status, _) in [once, twice].iter().chain(&firsts) {
        assert_eq!(*status, 200);
    }
    // Served in order of retries, then of arrival: the retries took the first two slots.
    assert!(twice.1 < once.1, "the second retry before the first");
    let earliest_first = firsts.iter().map(|(_, at)| *at).min().unwrap();
    assert!(once.1 < earliest_first, "a retry before every first attempt");
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}

/// Sends a chat request with `headers`; its status and how long its answer took.
async fn post_timed(env: &Env, headers: &[(&str, &str)]) -> (u16, Duration) {
    let mut request =
        env.http.post(format!("{}/v1/chat/completions", env.gateway.url())).bearer_auth(KEY).json(&chat("fast", 4, 1));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let sent = Instant::now();
    let response = request.send().await.unwrap();
    (response.status().as_u16(), sent.elapsed())
}

#[tokio::test(start_paused = true)]
async fn when_the_class_binds_a_first_attempt_is_refused_on_its_prediction_and_a_retry_waits_it_out() {
    // One request a second, and a class that waits 3 s; the SDKs say they wait 600 s.
    let policy = paced_policy().replace(r#"max_wait = "10s""#, r#"max_wait = "3s""#);
    let env = std::sync::Arc::new(start_clocked(paced_sim(), &policy, TokioClock::new()).await);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(post(&env, &chat("fast", 4, 1), None).await.0, 200);
    // Five requests pass through the queue, a second apart, sent in three groups so that
    // each waits less than the class's 3 s and the line never empties: its rate is known
    // from the four gaps between their grants.
    let mut ahead = Vec::new();
    for (group, then) in [(2, 1_480), (2, 1_980), (1, 2_080)] {
        for _ in 0..group {
            let env = std::sync::Arc::clone(&env);
            ahead.push(tokio::spawn(async move { post_timed(&env, &[]).await }));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(then)).await;
    }
    // Three retries queue for the next three slots.
    for _ in 0..3 {
        let env = std::sync::Arc::clone(&env);
        ahead.push(tokio::spawn(async move { post_timed(&env, &[("x-stainless-retry-count", "1")]).await }));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sdk = [("x-stainless-timeout", "600")];
    // A first attempt predicted past the class's 3 s is refused at once, told when to come back.
    let (status, took) = post_timed(&env, &sdk).await;
    assert_eq!(status, 429);
    assert!(took < Duration::from_millis(50), "refused at once: {took:?}");
    // A retry predicted past it too waits its 3 s out instead: its turn may come sooner
    // than predicted, and its next refusal may be its client's last.
    let (_, took) = post_timed(&env, &[("x-stainless-timeout", "600"), ("x-stainless-retry-count", "1")]).await;
    assert!(took >= Duration::from_millis(2_900), "waited, not refused on the prediction: {took:?}");
    for handle in ahead {
        assert_eq!(handle.await.unwrap().0, 200);
    }
    std::sync::Arc::into_inner(env).unwrap().shutdown().await;
}
