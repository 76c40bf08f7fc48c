//! Caller scopes pass their whole window at once: a 20,000-TPM team sends one 15,000-token
//! request and then 1,000-token requests back to back, none of them queued, while the
//! tenant's per-minute limit still binds over its minute. On a fake clock that never moves,
//! so nothing refills between requests.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;

use common::{BATCH_KEY, Env, KEY, sha, start_clocked};
use serde_json::{Value, json};
use sluice_quota::FakeClock;
use sluice_sim::config::{Completion, Limits, ModelConfig, SimConfig};

fn sim() -> SimConfig {
    let limits = Limits { rpm: Some(1_000_000), tpm: Some(100_000_000), ..Limits::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 1 },
        ..ModelConfig::openai("gpt-4o-mini").with_limits(limits)
    };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

/// The search team: 20,000 TPM; its tenant: 24,000 TPM; neither sets `burst_seconds`.
fn policy() -> String {
    format!(
        r#"
[[deployments]]
name = "d"
provider = "sim"
model = "gpt-4o-mini"
limits = {{ rpm = 1000000, tpm = 100000000 }}

[[models]]
name = "fast"
deployment = "d"

[[tenants]]
name = "acme"
limits = {{ tpm = 24000 }}

  [[tenants.teams]]
  name = "search"
  limits = {{ tpm = 20000 }}

  [[tenants.teams]]
  name = "batch"

[[keys]]
id = "search-key"
tenant = "acme"
team = "search"
sha256 = "{search}"

[[keys]]
id = "batch-key"
tenant = "acme"
team = "batch"
sha256 = "{batch}"
"#,
        search = sha(KEY),
        batch = sha(BATCH_KEY),
    )
}

/// A chat request of about `tokens` input tokens and one output token.
fn sized(tokens: usize) -> Value {
    // " lorem" is one token in o200k; the word before and the message's framing add ten.
    let content = format!("lorem{}", " lorem".repeat(tokens - 10));
    json!({"model": "fast", "max_tokens": 1, "messages": [{"role": "user", "content": content}]})
}

/// The requests that waited in a queue, by the queue-wait histogram's count.
async fn queued(env: &Env) -> u64 {
    let text = env.metrics().await;
    text.lines()
        .filter(|l| l.starts_with("sluice_queue_wait_seconds_count"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_sends_most_of_its_minute_at_once_while_the_tenant_minute_still_binds() {
    let env = start_clocked(sim(), &policy(), Arc::new(FakeClock::default())).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &sized(15_000)).await;
    assert_eq!(status, 200, "{body}");
    let prompt = body["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!((14_900..=15_100).contains(&prompt), "a 15k-token request: {prompt}");
    let mut used = prompt + 1;
    for i in 0..4 {
        let (status, headers, body) = env.post("/v1/chat/completions", KEY, &sized(1_000)).await;
        assert_eq!(status, 200, "1k request {i}: {body}");
        assert!(headers.get("x-sluice-queued-ms").is_none(), "answered without waiting");
        used += body["usage"]["total_tokens"].as_u64().unwrap();
    }
    assert!((18_900..=19_200).contains(&used), "the team used {used} of its 20,000");
    assert_eq!(queued(&env).await, 0, "no request of the team waited in a queue");
    // The other team has no limit of its own, but the tenant has 24,000 a minute and about
    // 19,000 are gone: 6,000 more would need seconds of refill, longer than the class may
    // wait, so it is refused at once naming the tenant's tpm.
    let (status, headers, body) = env.post("/v1/chat/completions", BATCH_KEY, &sized(6_000)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!((body["error"]["limiter"].as_str(), body["error"]["scope"].as_str()), (Some("tpm"), Some("tenant")));
    let retry_ms: u64 = headers.get("retry-after-ms").unwrap().to_str().unwrap().parse().unwrap();
    // 24,000 TPM refill 400 tokens a second; the ~1,000 missing take ~2.5 s.
    assert!((2_000..=3_500).contains(&retry_ms), "retry after {retry_ms} ms");
    // What fits the rest of the minute passes at once.
    let (status, _, body) = env.post("/v1/chat/completions", BATCH_KEY, &sized(4_000)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(queued(&env).await, 0);
    env.shutdown().await;
}

#[test]
fn runtime_tenants_teams_and_keys_take_the_caller_default_too() {
    // What the admin API validates a runtime tenant's, team's or key's limits with.
    let limits = sluice_server::limits_json::limits_of(json!({"tpm": 20000}).as_object().unwrap()).unwrap();
    assert_eq!((limits.rates[0].burst.get(), limits.rates[0].guard), (20_000, false));
    let paced = sluice_server::limits_json::limits_of(json!({"tpm": 20000, "burst_seconds": 1}).as_object().unwrap());
    assert_eq!(paced.unwrap().rates[0].burst.get(), 333);
}
