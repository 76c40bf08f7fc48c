//! Time over real HTTP: latency pacing in real milliseconds, and limits on an injected clock.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use common::*;
use sluice_sim::{FakeClock, SimConfig, SimProvider};

#[tokio::test]
async fn latency_delays_answers_and_paces_streams() {
    let sim = start(
        r#"[[models]]
        name = "gpt-4o-mini"
        completion = { dist = "fixed", tokens = 12 }
        latency = { ttft_ms = 150.0, per_token_ms = 10.0, chunk_tokens = 3 }
        "#,
    )
    .await;
    let client = client();
    let started = Instant::now();
    let plain = post(&client, &sim, "/v1/chat/completions", &chat("gpt-4o-mini", "hi", 100)).await;
    assert_eq!(plain.status(), 200);
    let elapsed = started.elapsed();
    // 150 ms + 12 × 10 ms.
    assert!(elapsed >= Duration::from_millis(270) && elapsed < Duration::from_secs(3), "{elapsed:?}");

    let mut body = chat("gpt-4o-mini", "hi", 100);
    body["stream"] = true.into();
    let started = Instant::now();
    let response = post(&client, &sim, "/v1/chat/completions", &body).await;
    let headers_after = started.elapsed();
    let events = read_sse(response).await.unwrap();
    let total = started.elapsed();
    assert!(headers_after < Duration::from_millis(150), "headers come before the first token: {headers_after:?}");
    assert!(total >= Duration::from_millis(270), "{total:?}");
    // Role chunk, four chunks of three tokens, finish chunk, [DONE].
    assert_eq!(events.len(), 7, "{events:?}");
}

#[tokio::test]
async fn limits_follow_the_injected_clock_and_time_scale() {
    let toml = "time_scale = 10.0\n[[models]]\nname = \"gpt-4o\"\nlimits = { rpm = 60 }\n";
    let config = SimConfig::from_toml_str(toml).unwrap();
    let clock = Arc::new(FakeClock::new(Duration::from_secs(1_700_000_000)));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let sim = SimProvider::serve(config, listener, clock.clone()).unwrap();
    let client = client();
    let body = chat("gpt-4o", "hi", 5);
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(post(&client, &sim, "/v1/chat/completions", &body).await.status().as_u16());
    }
    // Frozen time: exactly the window's 6 requests pass.
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
    let limited = post(&client, &sim, "/v1/chat/completions", &body).await;
    // The window (1 simulated second) frees up in 0.1 real s; the bucket has 60 - 9 left.
    assert_eq!(header(&limited, "retry-after-ms"), "100");
    assert_eq!(header(&limited, "retry-after"), "1");
    // 9 requests used of 60: the bucket is full again after 9 simulated s = 900 real ms.
    assert_eq!(header(&limited, "x-ratelimit-reset-requests"), "900ms");
    clock.advance(Duration::from_millis(99));
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &body).await.status(), 429);
    clock.advance(Duration::from_millis(2));
    assert_eq!(post(&client, &sim, "/v1/chat/completions", &body).await.status(), 200);
    sim.shutdown().await;
}
