//! Fault injection over real HTTP: observed rates match the configured ones (4 sigma) and
//! `/_stats` agrees with what the clients saw.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::*;
use parking_lot::Mutex;

#[derive(Debug, Default)]
struct Seen {
    ok: u64,
    slow_ok: u64,
    status: [u64; 4],
    reset: u64,
    hang: u64,
}

const N: u64 = 2000;
const WORKERS: u64 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_rates_match_the_config_and_stats_agree_with_clients() {
    let sim = start(
        r#"seed = 7
        [faults]
        error_500 = 0.05
        error_502 = 0.03
        error_503 = 0.03
        error_529 = 0.03
        reset = 0.04
        hang = 0.01
        slow_headers = 0.02
        hang_ms = 1200
        slow_headers_ms = 500
        [[models]]
        name = "gpt-4o-mini"
        "#,
    )
    .await;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let url = format!("{}/v1/chat/completions", sim.url());
    let workers = (0..WORKERS).map(|_| {
        let (seen, url) = (Arc::clone(&seen), url.clone());
        tokio::spawn(async move {
            let client = client();
            let body = chat("gpt-4o-mini", "hello", 5);
            for _ in 0..N / WORKERS {
                let started = Instant::now();
                let result = client.post(&url).json(&body).send().await;
                let elapsed = started.elapsed();
                let mut seen = seen.lock();
                match result.map(|r| r.status().as_u16()) {
                    Ok(200) if elapsed >= Duration::from_millis(480) => seen.slow_ok += 1,
                    Ok(200) => seen.ok += 1,
                    Ok(500) => seen.status[0] += 1,
                    Ok(502) => seen.status[1] += 1,
                    Ok(503) => seen.status[2] += 1,
                    Ok(529) => seen.status[3] += 1,
                    Ok(other) => panic!("status {other}"),
                    Err(_) if elapsed >= Duration::from_millis(1150) => seen.hang += 1,
                    Err(error) => {
                        assert!(error.is_request() || error.is_connect() || error.is_body(), "{error:?}");
                        seen.reset += 1;
                    }
                }
            }
        })
    });
    for worker in futures_util::future::join_all(workers).await {
        worker.unwrap();
    }
    let seen = seen.lock();
    let stats = sim.stats();
    let f = &stats.faults;
    // The server's account equals the clients' observations exactly...
    assert_eq!(stats.requests, N);
    assert_eq!(stats.served, seen.ok + seen.slow_ok);
    assert_eq!([f.error_500, f.error_502, f.error_503, f.error_529], seen.status);
    assert_eq!(f.reset, seen.reset, "{seen:?}");
    assert_eq!(f.hang, seen.hang, "{seen:?}");
    assert_eq!(f.slow_headers, seen.slow_ok, "{seen:?}");
    // ...and each observed rate is within 4 sigma of the configured one.
    let expected = [(seen.status[0], 0.05), (seen.status[1], 0.03), (seen.status[2], 0.03), (seen.status[3], 0.03)];
    for (count, p) in expected.into_iter().chain([(seen.reset, 0.04), (seen.hang, 0.01), (seen.slow_ok, 0.02)]) {
        assert!(within_4_sigma(count, N, p), "{count} of {N} at rate {p}: {seen:?}");
    }
    assert!(within_4_sigma(seen.ok, N, 0.79), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_cut_mid_way_at_the_configured_rate() {
    let sim = start(
        r#"seed = 11
        [faults]
        stream_drop = 0.25
        stream_drop_after_chunks = 2
        [[models]]
        name = "gpt-4o-mini"
        completion = { dist = "fixed", tokens = 30 }
        "#,
    )
    .await;
    let client = client();
    let mut body = chat("gpt-4o-mini", "hello", 100);
    body["stream"] = true.into();
    let n = 400;
    let (mut complete, mut cut) = (0, 0);
    for _ in 0..n {
        let response = post(&client, &sim, "/v1/chat/completions", &body).await;
        assert_eq!(response.status(), 200);
        match read_sse(response).await {
            Ok(events) => {
                assert_eq!(events.last().unwrap().1, "[DONE]");
                complete += 1;
            }
            Err(events) => {
                // Role chunk plus the two content chunks, then the cut: no [DONE].
                assert_eq!(events.len(), 3, "{events:?}");
                assert!(events.iter().all(|(_, data)| data != "[DONE]"));
                cut += 1;
            }
        }
    }
    let stats = sim.stats();
    assert_eq!(stats.faults.stream_drop, cut);
    assert_eq!(stats.served, complete);
    assert!(within_4_sigma(cut, n, 0.25), "{cut} of {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_sends_the_headers_and_a_first_chunk_then_nothing_until_the_cut() {
    let sim = start(
        r#"seed = 3
        [faults]
        stall = 1.0
        stall_ms = 1500
        [[models]]
        name = "gpt-4o-mini"
        completion = { dist = "fixed", tokens = 30 }
        "#,
    )
    .await;
    let client = client();
    let started = Instant::now();
    let response = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hello", 100)).await;
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() < Duration::from_millis(1400), "the headers waited for the stall");
    assert!(response.bytes().await.is_err(), "a stalled answer ends in a cut, not a body");
    assert!(started.elapsed() >= Duration::from_millis(1400));

    let mut body = chat("gpt-4o-mini", "hello", 100);
    body["stream"] = true.into();
    let events = read_sse(post(&client, &sim, "/v1/chat/completions", &body).await).await.unwrap_err();
    // The role chunk and one content chunk, then silence and the cut.
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(sim.stats().faults.stall, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_faults_can_echo_the_key_and_be_padded() {
    let sim = start(
        r#"seed = 3
        [faults]
        error_401 = 1.0
        echo_key = true
        error_padding_bytes = 3000
        [[models]]
        name = "gpt-4o-mini"
        [[models]]
        name = "claude-sonnet-4-5"
        shape = "anthropic"
        "#,
    )
    .await;
    let client = client();
    let url = format!("{}/v1/chat/completions", sim.url());
    let body = chat("gpt-4o-mini", "hello", 5);
    let response = client.post(&url).bearer_auth("sk-echoed-1234").json(&body).send().await.unwrap();
    assert_eq!(response.status(), 401);
    let text = response.text().await.unwrap();
    assert!(text.contains("sk-echoed-1234"), "{text}");
    assert!(text.len() > 3000);
    let url = format!("{}/v1/messages", sim.url());
    let body = message("claude-sonnet-4-5", "hello", 5);
    let response = client.post(&url).header("x-api-key", "sk-ant-echoed").json(&body).send().await.unwrap();
    assert_eq!(response.status(), 401);
    let value: serde_json::Value = response.json().await.unwrap();
    assert_eq!(value["error"]["type"], "authentication_error");
    assert!(value["error"]["message"].as_str().unwrap().contains("sk-ant-echoed"));
    assert_eq!(sim.stats().faults.error_401, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_answer_is_as_long_as_configured() {
    let sim = start(
        r#"seed = 3
        [faults]
        oversize = 1.0
        oversize_bytes = 3000000
        [[models]]
        name = "gpt-4o-mini"
        "#,
    )
    .await;
    let response = post(&client(), &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hello", 5)).await;
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    assert!(bytes.len() >= 3_000_000 && bytes.len() < 3_000_000 + (1 << 20), "{}", bytes.len());
    assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok());
}

#[tokio::test]
async fn faults_change_at_runtime_per_model() {
    let sim = start("seed = 3\n[[models]]\nname = \"a\"\n[[models]]\nname = \"b\"\n").await;
    let client = client();
    let (a, b) = (chat("a", "hi", 5), chat("b", "hi", 5));
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &a).await.status(), 200);
    // An outage of `a` alone: every request of it answers 503, `b` is untouched.
    let outage = serde_json::json!({"model": "a", "faults": {"error_503": 1.0}});
    let response = client.post(format!("{}/_faults", sim.url())).json(&outage).send().await.unwrap();
    assert_eq!(response.status(), 200);
    for _ in 0..5 {
        assert_eq!(post(&client, &sim, "/v1/chat/completions", &a).await.status(), 503);
        assert_eq!(post(&client, &sim, "/v1/chat/completions", &b).await.status(), 200);
    }
    let faults: serde_json::Value =
        client.get(format!("{}/_faults", sim.url())).send().await.unwrap().json().await.unwrap();
    assert_eq!(faults["a"]["error_503"], 1.0);
    assert_eq!(faults["b"]["error_503"], 0.0);
    assert_eq!(sim.stats().faults.error_503, 5);
    // It ends: absent rates become 0.
    let over = serde_json::json!({"model": "a", "faults": {}});
    assert_eq!(client.post(format!("{}/_faults", sim.url())).json(&over).send().await.unwrap().status(), 200);
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &a).await.status(), 200);
    // Unknown models and invalid rates are refused.
    let unknown = serde_json::json!({"model": "nope", "faults": {}});
    assert_eq!(client.post(format!("{}/_faults", sim.url())).json(&unknown).send().await.unwrap().status(), 400);
    let invalid = serde_json::json!({"model": "a", "faults": {"error_503": 1.5}});
    assert_eq!(client.post(format!("{}/_faults", sim.url())).json(&invalid).send().await.unwrap().status(), 400);
    sim.set_faults("b", &sluice_sim::FaultConfig { error_500: 1.0, ..sluice_sim::FaultConfig::default() }).unwrap();
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &b).await.status(), 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_fault_carries_its_configured_hint() {
    let sim = start(
        r#"seed = 3
        [faults]
        error_429 = 1.0
        error_429_retry_after_ms = 20000
        [[models]]
        name = "gpt-4o-mini"
        "#,
    )
    .await;
    let client = client();
    let response = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hello", 5)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "20");
    assert_eq!(response.headers()["retry-after-ms"], "20000");
    let value: serde_json::Value = response.json().await.unwrap();
    assert_eq!(value["error"]["code"], "rate_limit_exceeded");
    let stats = sim.stats();
    assert_eq!(stats.faults.error_429, 1);
}
