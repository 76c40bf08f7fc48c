//! Prompt caches over real HTTP on an injected clock: one per model (deployment), by the
//! providers' rules, reported in their usage fields and counted in `/_stats`.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use sluice_sim::tokens::{Encoding, Tokenizer};
use sluice_sim::{FakeClock, SimConfig, SimHandle, SimProvider};

async fn start_on(toml: &str) -> (SimHandle, Arc<FakeClock>) {
    let config = SimConfig::from_toml_str(toml).unwrap();
    let clock = Arc::new(FakeClock::new(Duration::from_secs(1_700_000_000)));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    (SimProvider::serve(config, listener, clock.clone()).unwrap(), clock)
}

/// A text of about `words` tokens.
fn long(words: usize) -> String {
    "word ".repeat(words)
}

async fn chat_cached(client: &reqwest::Client, sim: &SimHandle, body: &Value) -> u64 {
    let response = post(client, sim, "/v1/chat/completions", body).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    body["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap()
}

const OPENAI: &str = r#"
[[models]]
name = "gpt-a"
prompt_cache = true
[[models]]
name = "gpt-b"
prompt_cache = true
"#;

#[tokio::test]
async fn openai_caches_long_prefixes_per_model_in_steps() {
    let (sim, _clock) = start_on(OPENAI).await;
    let client = client();
    let prompt = long(2000);
    let first = chat("gpt-a", &prompt, 5);
    assert_eq!(chat_cached(&client, &sim, &first).await, 0, "a cold cache");
    // The same conversation one turn later reads the earlier prompt.
    let mut next = first.clone();
    next["messages"]
        .as_array_mut()
        .unwrap()
        .extend([json!({"role": "assistant", "content": "sure"}), json!({"role": "user", "content": "more"})]);
    let cached = chat_cached(&client, &sim, &next).await;
    let prefix = 3 + 1 + Tokenizer::new(Encoding::for_openai_model("gpt-a")).count(&prompt);
    assert_eq!(cached, prefix / 128 * 128, "the first message, in 128-token steps");
    assert!(cached >= 1024);
    assert_eq!(chat_cached(&client, &sim, &first).await, cached, "a repeat hits too");
    // Another deployment has its own cache.
    assert_eq!(chat_cached(&client, &sim, &chat("gpt-b", &prompt, 5)).await, 0);

    // Below 1,024 tokens nothing is cached, however often it is sent.
    let short = chat("gpt-a", &long(900), 5);
    for _ in 0..3 {
        assert_eq!(chat_cached(&client, &sim, &short).await, 0);
    }

    // The Responses API reports its hits under `input_tokens_details`.
    let request = json!({"model": "gpt-a", "input": prompt});
    for expected_hit in [false, true] {
        let response: Value = post(&client, &sim, "/v1/responses", &request).await.json().await.unwrap();
        let cached = response["usage"]["input_tokens_details"]["cached_tokens"].as_u64().unwrap();
        assert_eq!(cached >= 1024, expected_hit, "{cached}");
    }

    let stats = stats_over_http(&client, &sim).await;
    let a = &stats.prompt_cache["gpt-a"];
    assert_eq!((a.hits, a.misses, a.uncacheable), (3, 2, 3));
    assert_eq!(stats.prompt_cache["gpt-b"].misses, 1);
    assert!((a.hit_share() - 0.6).abs() < 1e-9);
    assert_eq!(stats.tokens.cached_input_used, a.read_tokens);
}

#[tokio::test]
async fn openai_prompt_cache_key_separates_equal_prefixes() {
    let (sim, _clock) = start_on(OPENAI).await;
    let client = client();
    let keyed = |key: &str| {
        let mut body = chat("gpt-a", &long(2000), 5);
        body["prompt_cache_key"] = key.into();
        body
    };
    assert_eq!(chat_cached(&client, &sim, &keyed("tenant-1")).await, 0);
    assert!(chat_cached(&client, &sim, &keyed("tenant-1")).await >= 1024);
    assert_eq!(chat_cached(&client, &sim, &keyed("tenant-2")).await, 0, "another key, another entry");
    assert_eq!(chat_cached(&client, &sim, &chat("gpt-a", &long(2000), 5)).await, 0, "no key, another entry");
}

/// `(input_tokens, cache_creation_input_tokens, cache_read_input_tokens)` and the ITPM left
/// (0 when unlimited).
async fn message_usage(client: &reqwest::Client, sim: &SimHandle, body: &Value) -> ((u64, u64, u64), u64) {
    let response = post(client, sim, "/v1/messages", body).await;
    assert_eq!(response.status(), 200);
    let remaining = response.headers().get("anthropic-ratelimit-input-tokens-remaining");
    let remaining = remaining.map_or(0, |v| v.to_str().unwrap().parse().unwrap());
    let body: Value = response.json().await.unwrap();
    let usage = &body["usage"];
    let field = |name: &str| usage[name].as_u64().unwrap();
    ((field("input_tokens"), field("cache_creation_input_tokens"), field("cache_read_input_tokens")), remaining)
}

fn with_system(model: &str, system: &str, marked: bool) -> Value {
    let mut block = json!({"type": "text", "text": system});
    if marked {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
    json!({"model": model, "max_tokens": 10, "system": [block], "messages": [{"role": "user", "content": "hi"}]})
}

const ANTHROPIC: &str = r#"
[[models]]
name = "claude-a"
shape = "anthropic"
prompt_cache = true
limits = { itpm = 5000, window_fraction = 1.0 }
[[models]]
name = "claude-b"
shape = "anthropic"
prompt_cache = true
"#;

#[tokio::test]
async fn anthropic_caches_at_breakpoints_expires_and_refreshes_on_hits() {
    let (sim, clock) = start_on(ANTHROPIC).await;
    let client = client();
    let system = long(3000);
    let tok = Tokenizer::new(Encoding::Cl100kBase);
    let (prefix, rest) = (tok.count(&system), 3 + tok.count("hi"));
    let body = with_system("claude-a", &system, true);

    // Written on the first request (creation counts toward ITPM), read on the second (which
    // is not charged: both fit 5,000 ITPM on a frozen clock, where uncached they would not).
    let (usage, remaining) = message_usage(&client, &sim, &body).await;
    assert_eq!(usage, (rest, prefix, 0));
    assert_eq!(remaining, 5000 - prefix - rest);
    let (usage, remaining) = message_usage(&client, &sim, &body).await;
    assert_eq!(usage, (rest, 0, prefix));
    assert_eq!(remaining, 5000 - prefix - 2 * rest, "cache reads are not charged to ITPM");
    assert_eq!(message_usage(&client, &sim, &with_system("claude-b", &system, true)).await.0, (rest, prefix, 0));

    // A hit refreshes the five minutes: 299 s, 299 s later it still hits.
    for _ in 0..2 {
        clock.advance(Duration::from_secs(299));
        assert_eq!(message_usage(&client, &sim, &body).await.0, (rest, 0, prefix));
    }
    // Five idle minutes later it is gone and written again.
    clock.advance(Duration::from_secs(300));
    assert_eq!(message_usage(&client, &sim, &body).await.0, (rest, prefix, 0));

    // No breakpoint, or a prefix under 1,024 tokens: nothing cached.
    let unmarked = with_system("claude-b", &long(3000), false);
    let short = with_system("claude-b", &long(900), true);
    for _ in 0..2 {
        assert_eq!(message_usage(&client, &sim, &unmarked).await.0.1, 0);
        let (usage, _) = message_usage(&client, &sim, &short).await;
        assert_eq!((usage.1, usage.2), (0, 0));
    }

    let stats = sim.stats();
    let a = &stats.prompt_cache["claude-a"];
    assert_eq!((a.hits, a.misses, a.read_tokens, a.created_tokens), (3, 2, 3 * prefix, 2 * prefix));
    assert_eq!(stats.prompt_cache["claude-b"].uncacheable, 4);
}

#[tokio::test]
async fn anthropic_streams_report_cache_use_in_message_start() {
    let (sim, _clock) = start_on(ANTHROPIC).await;
    let client = client();
    let mut body = with_system("claude-b", &long(2000), true);
    body["stream"] = true.into();
    let mut reads = Vec::new();
    for _ in 0..2 {
        let events = read_sse(post(&client, &sim, "/v1/messages", &body).await).await.unwrap();
        let start: Value = serde_json::from_str(&events[0].1).unwrap();
        reads.push(start["message"]["usage"]["cache_read_input_tokens"].as_u64().unwrap());
    }
    assert_eq!(reads[0], 0);
    assert!(reads[1] >= 1024, "{reads:?}");
}
