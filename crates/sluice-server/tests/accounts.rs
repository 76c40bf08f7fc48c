//! Provider accounts: two deployments that share an account's quota never exceed it
//! together, while each stays within its own.
#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

mod common;

use common::*;
use sluice_sim::config::{ModelConfig, SimConfig};

fn sim() -> SimConfig {
    SimConfig { models: vec![ModelConfig::openai("gpt-a"), ModelConfig::openai("gpt-b")], ..SimConfig::default() }
}

/// Per-day request limits (whole bursts, nothing refills while the test runs): 8 on each
/// deployment, 10 on the account when `shared`.
fn policy(shared: bool) -> String {
    let account = if shared { "account = \"acct\"" } else { "" };
    format!(
        r#"
[[accounts]]
name = "acct"
limits = {{ rpd = 10, burst_seconds = 86400 }}

[[deployments]]
name = "da"
provider = "sim"
model = "gpt-a"
{account}
limits = {{ rpd = 8, burst_seconds = 86400 }}

[[deployments]]
name = "db"
provider = "sim"
model = "gpt-b"
{account}
limits = {{ rpd = 8, burst_seconds = 86400 }}

[[models]]
name = "a"
deployment = "da"

[[models]]
name = "b"
deployment = "db"

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

/// How many of `n` requests to profile `model` were admitted (and served).
async fn admitted(env: &Env, model: &str, n: usize) -> usize {
    let mut served = 0;
    for _ in 0..n {
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat(model, 4, 8)).await;
        assert!(status == 200 || status == 429, "{status}: {body}");
        if status == 200 {
            served += 1;
        } else {
            assert_eq!(body["error"]["gateway_decision"], "rejected_before_send", "{body}");
        }
    }
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_deployments_sharing_an_account_never_exceed_it_together() {
    // Without the account, each deployment admits what its own limit allows: more than
    // the account's 10 together (so the shared run below could fail).
    let env = start(sim(), &policy(false)).await;
    let (a, b) = (admitted(&env, "a", 12).await, admitted(&env, "b", 12).await);
    assert!(a <= 8 && b <= 8, "each within its own: {a}, {b}");
    assert!(a + b > 10, "alone they take more than the account allows: {a} + {b}");
    env.shutdown().await;

    let env = start(sim(), &policy(true)).await;
    let (a, b) = (admitted(&env, "a", 12).await, admitted(&env, "b", 12).await);
    assert!(a <= 8 && b <= 8, "each within its own: {a}, {b}");
    assert!(a + b <= 10, "together within the account: {a} + {b}");
    assert!(b >= 1, "the account's rest is the other deployment's: {a} + {b}");
    assert_eq!(env.sim.stats().served as usize, a + b, "nothing refused was sent");
    env.shutdown().await;
}
