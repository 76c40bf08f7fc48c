//! Deployment pools: one model profile over several deployments, each request placed on a
//! member that admits it now, failures placed around, sessions kept on their member.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use sluice_sim::config::{ModelConfig, SimConfig};
use sluice_sim::faults::FaultConfig;

/// Three simulated deployments, `gpt-a`, `gpt-b`, `gpt-c`; `failing` answers every request
/// with a 503.
fn sim(failing: Option<&str>) -> SimConfig {
    let model = |name: &str| {
        let faults = (failing == Some(name)).then(|| FaultConfig { error_503: 1.0, ..FaultConfig::default() });
        ModelConfig { faults, ..ModelConfig::openai(name) }
    };
    SimConfig { seed: Some(5), models: vec![model("gpt-a"), model("gpt-b"), model("gpt-c")], ..SimConfig::default() }
}

/// A pool `chat` of `da`, `db`, `dc` allowing `a`, `b`, `c` requests a day each (whole
/// bursts: nothing refills while the test runs), with `pool` as its members' line.
fn policy(limits: [u64; 3], pool: &str) -> String {
    let [a, b, c] = limits;
    format!(
        r#"
[[deployments]]
name = "da"
provider = "sim"
model = "gpt-a"
limits = {{ rpd = {a}, burst_seconds = 86400 }}

[[deployments]]
name = "db"
provider = "sim"
model = "gpt-b"
limits = {{ rpd = {b}, burst_seconds = 86400 }}

[[deployments]]
name = "dc"
provider = "sim"
model = "gpt-c"
limits = {{ rpd = {c}, burst_seconds = 86400 }}

[[models]]
name = "chat"
{pool}

[[tenants]]
name = "acme"

[[keys]]
id = "acme-1"
tenant = "acme"
sha256 = "{sha}"
"#,
        sha = sha(KEY)
    )
}

/// Requests each simulated deployment served.
fn served(env: &Env) -> [u64; 3] {
    let stats = env.sim.stats();
    let of = |model: &str| stats.models.get(model).map_or(0, |u| u.served);
    [of("gpt-a"), of("gpt-b"), of("gpt-c")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_serves_the_sum_of_its_members_and_never_more_than_each_allows() {
    let env = start(sim(None), &policy([3, 2, 1], r#"deployments = ["da", "db", "dc"]"#)).await;
    for i in 0..6 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "request {i} of the pool's six: {body}");
    }
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
    assert_eq!(status, 429, "the pool's sum is spent: {body}");
    assert_eq!(body["error"]["gateway_decision"], "rejected_before_send", "{body}");
    assert_eq!(served(&env), [3, 2, 1], "each member exactly to its own limit");
    assert_eq!(env.sim.stats().models.values().map(|u| u.rate_limited).sum::<u64>(), 0, "the provider refused nothing");
    let metrics = env.metrics().await;
    assert!(metrics.contains("sluice_pool_placements_total{pool=\"chat\",deployment=\"da\""), "{metrics}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_tier_is_used_up_before_a_higher_one_takes_any() {
    let pool = r#"deployments = [{ deployment = "dc", tier = 1 }, { deployment = "da", tier = 0 }, { deployment = "db", tier = 1 }]"#;
    let env = start(sim(None), &policy([4, 10, 10], pool)).await;
    for _ in 0..4 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(served(&env), [4, 0, 0], "tier 0 first, whatever the order written");
    for _ in 0..4 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "{body}");
    }
    let [a, b, c] = served(&env);
    assert_eq!((a, b + c), (4, 4), "only the overflow went to tier 1");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_member_is_placed_around_without_a_client_error() {
    let env = start(sim(Some("gpt-b")), &policy([100, 100, 100], r#"deployments = ["da", "db", "dc"]"#)).await;
    for i in 0..12 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "request {i}: another member serves it: {body}");
    }
    let [a, b, c] = served(&env);
    assert_eq!((a + c, b), (12, 0), "every request served by the healthy members");
    let failed = env.sim.stats().faults.error_503;
    assert!(failed >= 1, "the failing member was tried");
    // Its breaker opened after its run of failures: it stopped being tried long before
    // the twelfth request.
    assert!(failed < 12, "{failed} requests still went to the failing member");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stays_on_its_member_while_it_has_room() {
    let env = start(sim(None), &policy([100, 100, 100], r#"deployments = ["da", "db", "dc"]"#)).await;
    let mut homes = std::collections::BTreeSet::new();
    for session in ["alice", "bob", "carol", "dave"] {
        let before = served(&env);
        for _ in 0..5 {
            let mut body = chat("chat", 4, 8);
            body["prompt_cache_key"] = session.into();
            let (status, _, answer) = env.post("/v1/chat/completions", KEY, &body).await;
            assert_eq!(status, 200, "{answer}");
        }
        let after = served(&env);
        let moved: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
        assert_eq!(moved.iter().filter(|&&n| n > 0).count(), 1, "{session}'s requests on one member: {moved:?}");
        homes.insert(moved.iter().position(|&n| n > 0).unwrap());
    }
    assert!(homes.len() > 1, "sessions spread over the members: {homes:?}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_naming_one_deployment_is_served_as_before() {
    let env = start(sim(None), &policy([2, 2, 2], r#"deployment = "db""#)).await;
    for _ in 0..2 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, _, _) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
    assert_eq!(status, 429);
    assert_eq!(served(&env), [0, 2, 0]);
    assert!(!env.metrics().await.contains("sluice_pool_placements_total{"), "no pool, no placements");
    env.shutdown().await;
}
