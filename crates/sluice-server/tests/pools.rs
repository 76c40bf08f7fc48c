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
    let admin = format!("[admin]\nkey_sha256 = \"{}\"\n", sha("admin-secret"));
    let env = start(sim(None), &format!("{admin}{}", policy([3, 2, 1], r#"deployments = ["da", "db", "dc"]"#))).await;
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
    // The operator sees the pool, its members and that each is spent.
    let url = format!("{}/admin/state", env.gateway.url());
    let state: serde_json::Value =
        env.http.get(url).bearer_auth("admin-secret").send().await.unwrap().json().await.unwrap();
    let pool = &state["pools"][0];
    assert_eq!(pool["model"], "chat", "{state}");
    let members: Vec<&str> =
        pool["members"].as_array().unwrap().iter().map(|m| m["deployment"].as_str().unwrap()).collect();
    assert_eq!(members, ["da", "db", "dc"]);
    assert!(pool["members"].as_array().unwrap().iter().all(|m| m["free"] == 0.0), "{pool}");
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
    // Its first failure held it back for every request after it (a moment's pause in the
    // store; the twelve requests take less than that).
    assert_eq!(failed, 1, "{failed} requests went to the failing member");
    let metrics = env.metrics().await;
    assert!(metrics.contains("sluice_cooldowns_total{deployment=\"db\",reason=\"pool_failure\"} 1"), "{metrics}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_header_names_the_session() {
    let pool = "deployments = [\"da\", \"db\", \"dc\"]\naffinity_header = \"X-Session\"";
    let env = start(sim(None), &policy([100, 100, 100], pool)).await;
    let url = format!("{}/v1/chat/completions", env.gateway.url());
    for session in ["one", "two", "three"] {
        let before = served(&env);
        for _ in 0..4 {
            let request = env.http.post(&url).bearer_auth(KEY).header("x-session", session);
            let response = request.json(&chat("chat", 4, 8)).send().await.unwrap();
            assert_eq!(response.status(), 200);
        }
        let after = served(&env);
        let moved = after.iter().zip(before).filter(|(a, b)| **a > *b).count();
        assert_eq!(moved, 1, "session {session} on one member: {before:?} -> {after:?}");
    }
    env.shutdown().await;
}

/// Which member served between `before` and now (exactly one must have).
fn one_member(env: &Env, before: [u64; 3]) -> usize {
    let after = served(env);
    let moved: Vec<usize> = (0..3).filter(|&i| after[i] > before[i]).collect();
    assert_eq!(moved.len(), 1, "{before:?} -> {after:?}");
    moved[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_response_goes_to_the_member_that_holds_it() {
    let env = start(sim(None), &policy([100, 100, 100], r#"deployments = ["da", "db", "dc"]"#)).await;
    let mut first_members = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let before = served(&env);
        let first = serde_json::json!({"model": "chat", "input": "hello there", "max_output_tokens": 16});
        let (status, _, created) = env.post("/v1/responses", KEY, &first).await;
        assert_eq!(status, 200, "{created}");
        let member = one_member(&env, before);
        first_members.insert(member);
        for _ in 0..2 {
            let before = served(&env);
            let next = serde_json::json!({"model": "chat", "input": "and then?", "max_output_tokens": 16,
                                          "previous_response_id": created["id"]});
            let (status, _, answer) = env.post("/v1/responses", KEY, &next).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(one_member(&env, before), member, "the continuation went where its response lives");
        }
    }
    assert!(first_members.len() > 1, "first requests spread over the members: {first_members:?}");
    env.shutdown().await;
}

/// Hits and misses of the simulated deployments' prompt caches, summed.
fn cache_hits(env: &Env) -> (u64, u64) {
    let stats = env.sim.stats();
    stats.prompt_cache.values().fold((0, 0), |(h, m), u| (h + u.hits, m + u.misses))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn affinity_keeps_a_sessions_prompt_cache_warm() {
    let cached = |name: &str| ModelConfig { prompt_cache: true, ..ModelConfig::openai(name) };
    let models = vec![cached("gpt-a"), cached("gpt-b"), cached("gpt-c")];
    let sim = SimConfig { seed: Some(5), models, ..SimConfig::default() };
    let env = start(sim, &policy([100, 100, 100], r#"deployments = ["da", "db", "dc"]"#)).await;
    // Four sessions, each a long shared prefix (well over the 1,024 cacheable tokens)
    // sent five times, interleaved as concurrent users would be.
    let prefix = |session: usize| format!("session {session} context: ") + &"lorem ipsum dolor sit amet ".repeat(400);
    let ask = |session: usize, keyed: bool| {
        let mut body = chat("chat", 4, 8);
        body["messages"] =
            serde_json::json!([{"role": "system", "content": prefix(session)}, {"role": "user", "content": "next?"}]);
        if keyed {
            body["prompt_cache_key"] = format!("s{session}").into();
        }
        body
    };
    for keyed in [false, true] {
        env.sim.reset();
        for _round in 0..5 {
            for session in 0..4 {
                let (status, _, answer) =
                    env.post("/v1/chat/completions", KEY, &ask(session + usize::from(keyed) * 10, keyed)).await;
                assert_eq!(status, 200, "{answer}");
            }
        }
        let (hits, misses) = cache_hits(&env);
        assert_eq!(hits + misses, 20, "every request was cacheable");
        if keyed {
            // The first of each session misses; every later one finds its member warm.
            assert_eq!(hits, 16, "with affinity: {hits} hits, {misses} misses");
        } else {
            // Placed by headroom alone, a session's requests spread over the members.
            assert!(hits < 16, "without a session key: {hits} hits, {misses} misses");
        }
    }
    env.shutdown().await;
}

/// `policy` with each deployment placed: `da` in eu-west, `db` in eu-north, `dc` in
/// us-east with a context window of `window` tokens, and `extra` after the models.
fn placed_policy(limits: [u64; 3], window: u64, tenant: &str) -> String {
    policy(limits, r#"deployments = ["da", "db", "dc"]"#)
        .replace("model = \"gpt-a\"\n", "model = \"gpt-a\"\nregion = \"eu-west\"\n")
        .replace("model = \"gpt-b\"\n", "model = \"gpt-b\"\nregion = \"eu-north\"\ncontext_window = 100000\n")
        .replace(
            "model = \"gpt-c\"\n",
            &format!("model = \"gpt-c\"\nregion = \"us-east\"\ncontext_window = {window}\n"),
        )
        .replace("name = \"acme\"\n", &format!("name = \"acme\"\n{tenant}\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_limited_to_regions_is_never_placed_outside_them() {
    let env = start(sim(None), &placed_policy([5, 5, 100], 100_000, r#"regions = ["eu-west", "eu-north"]"#)).await;
    for i in 0..10 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
        assert_eq!(status, 200, "request {i}: {body}");
    }
    // The EU members are spent; the US member has room but is not the tenant's.
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(served(&env), [5, 5, 0], "nothing went outside the tenant's regions");
    env.shutdown().await;
    // A profile whose one deployment is outside the tenant's regions: refused, not sent.
    let single = placed_policy([5, 5, 100], 100_000, r#"regions = ["eu-west"]"#)
        .replace(r#"deployments = ["da", "db", "dc"]"#, r#"deployment = "dc""#);
    let env = start(sim(None), &single).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 4, 8)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("no_allowed_deployment")), "{body}");
    assert_eq!(env.sim.stats().requests, 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_goes_only_where_it_fits_the_context_window() {
    // `dc` holds 64 tokens; `da` states no window, `db` 100,000.
    let env = start(sim(None), &placed_policy([100, 100, 100], 64, "")).await;
    for _ in 0..6 {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 40, 200)).await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(served(&env)[2], 0, "nothing too long for dc was sent there");
    env.shutdown().await;
    // A tenant limited to the small member's region: no member it may use fits.
    let env = start(sim(None), &placed_policy([100, 100, 100], 64, r#"regions = ["us-east"]"#)).await;
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 40, 200)).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "context_length_exceeded", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("64"), "names the window: {body}");
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("chat", 2, 8)).await;
    assert_eq!(status, 200, "a short one fits: {body}");
    assert_eq!(served(&env), [0, 0, 1]);
    env.shutdown().await;
}
