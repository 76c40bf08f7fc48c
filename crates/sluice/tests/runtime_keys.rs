//! Runtime keys across three `sluice serve` processes sharing one real `redis-server`: a key
//! created through the admin API on one instance calls the API on every instance, and its
//! revocation on one is in force on all three within 1 s (each instance polls the keys'
//! version every 250 ms). The `sluice keys` command drives the same API.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::time::Duration;

use common::{Gateway, gateways, redis_store};
use serde_json::{Value, json};
use sluice_bench::fleet::{Parts, config_with};
use sluice_redis::local::LocalRedis;
use sluice_sim::{SimConfig, SimProvider};
use tokio::time::Instant;

const ADMIN: &str = "sk-admin-runtime-keys";
/// The bound the documentation states for a change to reach every instance.
const BOUND: Duration = Duration::from_secs(1);

async fn fleet(redis: &LocalRedis, sim_url: &str) -> Vec<Gateway> {
    let store = redis_store(&redis.url(), "runtime-keys", "fail_closed");
    let tail = format!("[admin]\nkey_sha256 = \"{}\"\n", sluice_bench::harness::key_hash(ADMIN));
    let parts = Parts { sim_url, store: &store, limits: "rpm = 100000", lease: "30s", deployment: "", tail: &tail };
    gateways(3, &config_with(&parts))
}

async fn models(http: &reqwest::Client, url: &str, key: &str) -> u16 {
    let response = http.get(format!("{url}/v1/models")).bearer_auth(key).send().await.unwrap();
    response.status().as_u16()
}

/// How long after `since` each instance answered `want` for `key` (polled every 20 ms, at
/// most 5 s).
async fn seen_within(http: &reqwest::Client, urls: &[String], key: &str, want: u16, since: Instant) -> Vec<Duration> {
    let waits: Vec<_> = urls
        .iter()
        .map(|url| {
            let (http, url, key) = (http.clone(), url.clone(), key.to_owned());
            tokio::spawn(async move {
                loop {
                    let status = models(&http, &url, &key).await;
                    if status == want || since.elapsed() > Duration::from_secs(5) {
                        return since.elapsed();
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    let mut took = Vec::with_capacity(waits.len());
    for wait in waits {
        took.push(wait.await.unwrap());
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_on_one_instance_is_refused_by_all_three_within_a_second() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let text = "seed = 7\n\n[[models]]\nname = \"gpt-4o-mini\"\nshape = \"openai\"\n";
    let sim = SimProvider::start(SimConfig::from_toml_str(text).unwrap()).await.unwrap();
    let fleet = fleet(&redis, &sim.url()).await;
    let urls: Vec<String> = fleet.iter().map(|g| g.url.clone()).collect();
    let admin = fleet[0].admin_url.clone();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();

    let created = http.post(format!("{admin}/admin/keys")).bearer_auth(ADMIN);
    let created = created.json(&json!({"id": "fleet-key", "tenant": "acme"})).send().await.unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let at = Instant::now();
    let secret = created.json::<Value>().await.unwrap()["secret"].as_str().unwrap().to_owned();
    let took = seen_within(&http, &urls, &secret, 200, at).await;
    assert!(took.iter().all(|t| *t <= BOUND), "a new key reached the instances after {took:?}");
    // Used through the chat API on the two other instances.
    for url in &urls[1..] {
        let body = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4});
        let response = http.post(format!("{url}/v1/chat/completions")).bearer_auth(&secret).json(&body).send().await;
        assert_eq!(response.unwrap().status().as_u16(), 200, "{url}");
    }

    let revoked = http.post(format!("{admin}/admin/keys/fleet-key/revoke")).bearer_auth(ADMIN).send().await;
    assert_eq!(revoked.unwrap().status().as_u16(), 200);
    let at = Instant::now();
    let took = seen_within(&http, &urls, &secret, 401, at).await;
    assert!(took.iter().all(|t| *t <= BOUND), "revocation reached the instances after {took:?}");
    // And it stays refused everywhere.
    for url in &urls {
        assert_eq!(models(&http, url, &secret).await, 401, "{url}");
    }
    the_keys_command_creates_lists_and_revokes(&http, &urls, &admin).await;
    drop(fleet);
    sim.shutdown().await;
}

/// `sluice keys ...` against the first instance; (success, stdout, stderr).
async fn keys_command(url: &str, args: &[&str]) -> (bool, String, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    command.arg("keys").arg("--url").arg(url).args(args).env("SLUICE_ADMIN_KEY", ADMIN);
    let output = tokio::task::spawn_blocking(move || command.output()).await.unwrap().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.success(), text(output.stdout), text(output.stderr))
}

async fn the_keys_command_creates_lists_and_revokes(http: &reqwest::Client, urls: &[String], admin: &str) {
    let (ok, out, err) =
        keys_command(admin, &["create", "--tenant", "acme", "--id", "cli-key", "--metadata", "owner=ops"]).await;
    assert!(ok, "{err}");
    let secret = out.lines().next().unwrap().to_owned();
    let key: Value = serde_json::from_str(out.lines().nth(1).unwrap()).unwrap();
    assert_eq!((key["id"].as_str(), key["metadata"]["owner"].as_str()), (Some("cli-key"), Some("ops")));
    let took = seen_within(http, &urls[1..], &secret, 200, Instant::now()).await;
    assert!(took.iter().all(|t| *t <= BOUND), "{took:?}");
    let (ok, out, err) = keys_command(admin, &["list"]).await;
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l == "cli-key\truntime\tacme\t-\tactive"), "{out}");
    assert!(out.lines().any(|l| l == "fleet-key\truntime\tacme\t-\trevoked"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("acme-1\tconfig\t")), "{out}");
    let (ok, out, err) = keys_command(admin, &["revoke", "cli-key"]).await;
    assert!(ok && out.trim() == "revoked cli-key", "{out}{err}");
    let (ok, _, err) = keys_command(admin, &["revoke", "cli-key"]).await;
    assert!(!ok && err.contains("409") && err.contains("is revoked"), "{err}");
    let mut without_key = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    without_key.args(["keys", "--url", admin, "list"]).env_remove("SLUICE_ADMIN_KEY");
    let output = tokio::task::spawn_blocking(move || without_key.output()).await.unwrap().unwrap();
    assert!(!output.status.success() && String::from_utf8_lossy(&output.stderr).contains("SLUICE_ADMIN_KEY"));
}
