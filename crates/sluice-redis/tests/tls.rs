//! `rediss://`: the server's certificate is checked against the configured CA (the
//! conformance suite runs the whole store over TLS; here what must fail does).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ReserveError, ScopeKey, ScopeKind};
use sluice_redis::local::LocalRedis;
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

mod certs;

fn store(url: String, tls: Tls) -> Arc<dyn QuotaStore> {
    let topology = Topology::Standalone(url);
    Arc::new(RedisStore::new(RedisConfig { topology, prefix: "tls".into(), timeout: Duration::from_secs(2), tls }))
}

async fn reserve(store: &dyn QuotaStore) -> Result<(), ReserveError> {
    let limits = Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, 60).unwrap());
    let scope = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), limits);
    store.reserve(&[scope], Cost::request(1, 1), Duration::from_secs(30)).await.map(|_| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signed_by_another_ca_is_refused_and_the_right_ca_admits() {
    let certs = certs::Certs::generate();
    let other = certs::Certs::generate();
    let server = LocalRedis::start_tls(&certs.server).expect("redis-server built with TLS");
    let wrong = Tls { ca_file: Some(other.server.ca_file.clone()), client: None, ..Tls::default() };
    let refused = reserve(&*store(server.url(), wrong)).await;
    assert!(matches!(refused, Err(ReserveError::Store(_))), "{refused:?}");
    let right = Tls { ca_file: Some(certs.server.ca_file.clone()), client: None, ..Tls::default() };
    reserve(&*store(server.url(), right)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_ca_file_is_a_store_error_naming_no_secret() {
    let certs = certs::Certs::generate();
    let server = LocalRedis::start_tls(&certs.server).expect("redis-server built with TLS");
    let missing = Tls { ca_file: Some(certs.dir.join("absent.pem")), client: None, ..Tls::default() };
    let refused = reserve(&*store(server.url(), missing)).await;
    assert!(matches!(refused, Err(ReserveError::Store(_))), "{refused:?}");
}
