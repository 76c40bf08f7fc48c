//! Redis credentials kept out of the URL (`[store] password_file`, `password_env`): a real
//! `redis-server` with `requirepass` admits with the right password read through the
//! configuration, and refuses a wrong one with an error that never shows the password.
//! (`password_env` end to end, through `sluice serve`: crates/sluice/tests/config_ops.rs.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ReserveError, ScopeKey, ScopeKind};
use sluice_redis::local::LocalRedis;
use sluice_redis::{RedisConfig, RedisStore};

const PASSWORD: &str = "correct-horse-battery-staple";

/// A store for `[store]` lines `store`, as `sluice serve` builds it from the file.
fn store(store: &str) -> RedisStore {
    let config = sluice_config::parse(store).unwrap();
    let (topology, tls) = sluice_redis::choose::redis_target(&config.store).unwrap();
    RedisStore::new(RedisConfig { topology, prefix: "auth".into(), timeout: Duration::from_secs(2), tls })
}

/// A fresh directory named after `name`, holding `right` (the password as `content`) and
/// `wrong` (another).
fn password_files(name: &str, content: &str) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (right, wrong) = (dir.join("right"), dir.join("wrong"));
    std::fs::write(&right, content).unwrap();
    std::fs::write(&wrong, "not-the-password-at-all").unwrap();
    (dir, right, wrong)
}

/// What the store said of a wrong password: a store error that shows neither password.
fn refused_unshown(refused: Result<(), ReserveError>) -> String {
    let Err(ReserveError::Store(error)) = refused else { panic!("a wrong password was accepted: {refused:?}") };
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains("not-the-password") && !shown.contains(PASSWORD), "the password is shown: {shown}");
    shown
}

async fn reserve(store: &dyn QuotaStore) -> Result<(), ReserveError> {
    let limits = Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 60_000).unwrap());
    let scope = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), limits);
    store.reserve(&[scope], Cost::request(1, 1), Duration::from_secs(30)).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_file_opens_a_server_that_requires_one_and_a_wrong_one_is_refused_unshown() {
    let server = LocalRedis::start_with_password(PASSWORD).unwrap();
    // A mounted Secret often ends with a newline: the content is trimmed.
    let (dir, right, wrong) = password_files("auth", &format!("{PASSWORD}\n"));
    let with = |file: &std::path::Path, user: &str| {
        format!("[store]\nkind = \"redis\"\nurl = \"{}\"\n{user}password_file = \"{}\"\n", server.url(), file.display())
    };

    reserve(&store(&with(&right, ""))).await.unwrap();
    // `requirepass` is the `default` user's password: naming that user works too.
    reserve(&store(&with(&right, "username = \"default\"\n"))).await.unwrap();

    let shown = refused_unshown(reserve(&store(&with(&wrong, ""))).await);
    assert!(
        shown.to_lowercase().contains("wrongpass") || shown.contains("auth"),
        "not an authentication error: {shown}"
    );

    // Without any password the server's refusal is what the store reports.
    let none = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\n", server.url());
    let refused = reserve(&store(&none)).await;
    assert!(matches!(refused, Err(ReserveError::Store(_))), "{refused:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_nodes_require_a_password_is_reached_with_the_stores_credentials() {
    let cluster = sluice_redis::local::LocalCluster::start_with_password(3, PASSWORD).unwrap();
    let (dir, right, wrong) = password_files("auth-cluster", PASSWORD);
    let seeds: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let with = |file: &std::path::Path| {
        format!("[store]\nkind = \"redis\"\ncluster = [{}]\npassword_file = \"{}\"\n", seeds.join(", "), file.display())
    };
    // Scopes in several slots: the client authenticates to every master it is sent to.
    let admitting = store(&with(&right));
    let limits = Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 60_000).unwrap());
    for tenant in ["a", "b", "c", "d", "e", "f"] {
        let scope = admitting.register(ScopeKey::new(ScopeKind::Tenant, tenant), limits.clone());
        let _grant = admitting.reserve(&[scope], Cost::request(1, 1), Duration::from_secs(30)).await.unwrap();
    }
    refused_unshown(reserve(&store(&with(&wrong))).await);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_group_whose_servers_require_a_password_is_reached_with_the_stores_credentials() {
    let group = sluice_redis::local::LocalSentinel::start_with_password(1, PASSWORD).unwrap();
    let (dir, right, wrong) = password_files("auth-sentinel", PASSWORD);
    let nodes: Vec<String> = group.target().nodes.iter().map(|u| format!("\"{u}\"")).collect();
    let with = |file: &std::path::Path| {
        format!(
            "[store]\nkind = \"redis\"\npassword_file = \"{}\"\n\n[store.sentinel]\nmaster = \"{}\"\nnodes = [{}]\n",
            file.display(),
            sluice_redis::local::MASTER_NAME,
            nodes.join(", ")
        )
    };
    // The sentinels name the master; the store's password opens it.
    reserve(&store(&with(&right))).await.unwrap();
    refused_unshown(reserve(&store(&with(&wrong))).await);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn credentials_are_never_in_a_debug_print() {
    let auth = sluice_redis::Auth { username: Some("sluice".into()), password: Some(PASSWORD.into()) };
    let shown = format!("{auth:?}");
    assert!(shown.contains("sluice") && shown.contains("[redacted]") && !shown.contains(PASSWORD), "{shown}");
}
