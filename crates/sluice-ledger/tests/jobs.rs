//! The job store of a fleet with a ledger, against a real `redis-server` and `postgres`:
//! the whole job-store suite, then what only the ledger gives: runtime keys, tenants, the
//! audit log and usage that outlive Redis's memory, copied in once from a fleet that ran
//! without a ledger, and one winner when instances swap the same record at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{Doc, DocKey, JobStore, RedisJobConfig, RedisJobStore, Retention, UsageCounts, UsageKey};
use sluice_ledger::LedgerConfig;
use sluice_ledger::LedgerJobStore;
use sluice_ledger::local::LocalPostgres;
use sluice_redis::local::LocalRedis;
use sluice_redis::{Tls, Topology};

#[path = "../../sluice-jobs/tests/cases/mod.rs"]
#[macro_use]
mod cases;
use cases::*;

/// The record kinds the gateway keeps, with their owners (as in the conformance cases).
const RECORDS: [(&str, &str); 3] = [("key", "runtime"), ("tenant", "runtime"), ("audit", "admin")];

const KEEP: Retention = Retention { today: 30_000, days: 400 };

fn settings(server: &LocalPostgres) -> LedgerConfig {
    LedgerConfig {
        url: server.url(),
        password: None,
        timeout: Duration::from_secs(5),
        flush_every: Duration::from_secs(1),
    }
}

fn hot(redis: &LocalRedis) -> Arc<dyn JobStore> {
    Arc::new(RedisJobStore::new(RedisJobConfig {
        topology: Topology::Standalone(redis.url()),
        prefix: "ledgered".into(),
        timeout: Duration::from_secs(2),
        tls: Tls::default(),
    }))
}

async fn open(postgres: &LocalPostgres, redis: &LocalRedis) -> LedgerJobStore {
    LedgerJobStore::connect(&settings(postgres), hot(redis), &RECORDS, KEEP).await.unwrap()
}

/// Redis for the jobs, Postgres for the records and usage.
fn ledgered() -> Backend {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    // Made inside the test's own runtime (which is multi-threaded), so its connections live on.
    let store = tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(open(&postgres, &redis)));
    Backend { store: Arc::new(store), _keep: Box::new((redis, postgres)), redis: false }
}

every_case!(ledgered);

fn record(kind: &str, owner: &str, id: &str, body: &str) -> Doc {
    Doc { kind: kind.into(), owner: owner.into(), id: id.into(), body: body.as_bytes().to_vec() }
}

fn row(tenant: &str, requests: u64) -> (UsageKey, UsageCounts) {
    let key = UsageKey {
        day: KEEP.today,
        tenant: tenant.into(),
        team: String::new(),
        key: "k".into(),
        profile: "fast".into(),
        deployment: "d".into(),
    };
    (key, UsageCounts { requests, input_tokens: 10 * requests, cost_nanos: 7 * requests, ..UsageCounts::default() })
}

fn ids(docs: &[Doc]) -> Vec<&str> {
    docs.iter().map(|d| d.id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_tenants_audit_and_usage_outlive_redis_losing_its_memory() {
    let mut redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let store = open(&postgres, &redis).await;
    store.put_record(record("key", "runtime", "k1", "active")).await.unwrap();
    store.put_record(record("tenant", "runtime", "acme", r#"{"budget":{"day":0.01}}"#)).await.unwrap();
    store.put_record(record("audit", "admin", "a1", "key.create")).await.unwrap();
    let version = store.swap_record(record("key", "runtime", "k1", "revoked"), Some(b"active".to_vec())).await.unwrap();
    assert!(store.add_usage("b1", vec![row("acme", 3)], KEEP).await.unwrap());
    let epoch = store.epoch().await.unwrap();
    assert!(epoch.is_some());
    redis.restart().unwrap();
    let key = |kind, owner, id| DocKey { kind, owner, id };
    assert_eq!(store.get_doc(key("key", "runtime", "k1")).await.unwrap(), Some(b"revoked".to_vec()));
    assert_eq!(store.doc_version("key").await.unwrap(), version.unwrap(), "versions do not start over");
    assert_eq!(ids(&store.list_docs("tenant", "runtime").await.unwrap()), ["acme"]);
    assert_eq!(ids(&store.list_docs("audit", "admin").await.unwrap()), ["a1"]);
    assert_eq!(store.usage_between(KEEP.today, KEEP.today).await.unwrap(), vec![row("acme", 3)]);
    assert_eq!(store.epoch().await.unwrap(), epoch, "the records' data is the same");
    // A revoked key cannot be swapped back by a writer that read it active.
    let stale = store.swap_record(record("key", "runtime", "k1", "active"), Some(b"active".to_vec())).await.unwrap();
    assert_eq!(stale, None);
    // Another instance, started after the loss, reads the same.
    let late = open(&postgres, &redis).await;
    assert_eq!(late.get_doc(key("key", "runtime", "k1")).await.unwrap(), Some(b"revoked".to_vec()));
    let changes = late.records_since("key", "runtime", 0).await.unwrap();
    assert_eq!(changes.docs, Some(vec![("k1".to_owned(), Some(b"revoked".to_vec()))]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_fleet_kept_in_redis_is_copied_in_once_when_it_turns_the_ledger_on() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let before = hot(&redis);
    before.put_record(record("key", "runtime", "k1", "one")).await.unwrap();
    before.put_record(record("key", "runtime", "k2", "two")).await.unwrap();
    before.put_record(record("audit", "admin", "a1", "key.create")).await.unwrap();
    before.put_record(record("notes", "runtime", "n1", "not a record kind the ledger keeps")).await.unwrap();
    assert!(before.add_usage("old-1", vec![row("acme", 2), row("globex", 1)], KEEP).await.unwrap());
    // Two instances start together on the new config: one copies, the other finds it done.
    let (one, two) = tokio::join!(open(&postgres, &redis), open(&postgres, &redis));
    for store in [&one, &two] {
        let keys = store.list_docs("key", "runtime").await.unwrap();
        assert_eq!(ids(&keys), ["k2", "k1"], "newest first, as before");
        assert_eq!(keys[1].body, b"one");
        assert_eq!(ids(&store.list_docs("audit", "admin").await.unwrap()), ["a1"]);
        let usage = store.usage_between(KEEP.first_kept(), KEEP.today).await.unwrap();
        assert_eq!(usage, vec![row("acme", 2), row("globex", 1)], "copied once");
    }
    // A third start copies nothing again, though Redis still holds it all.
    let three = open(&postgres, &redis).await;
    let usage = three.usage_between(KEEP.first_kept(), KEEP.today).await.unwrap();
    assert_eq!(usage, vec![row("acme", 2), row("globex", 1)]);
    // Kinds it was not told to keep stay where they are, and cannot be written as records.
    assert!(three.put_record(record("notes", "runtime", "n2", "x")).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_instances_swapping_one_record_at_once_exactly_one_wins() {
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let (one, two) = tokio::join!(open(&postgres, &redis), open(&postgres, &redis));
    let stores = [Arc::new(one), Arc::new(two)];
    stores[0].put_record(record("key", "runtime", "k1", "v0")).await.unwrap();
    for round in 0..20 {
        let read = format!("v{round}");
        let mut racers = Vec::new();
        for writer in 0..6 {
            let store = Arc::clone(&stores[writer % 2]);
            let expected = read.clone().into_bytes();
            racers.push(tokio::spawn(async move {
                let next = record("key", "runtime", "k1", &format!("v{}", round + 1));
                store.swap_record(next, Some(expected)).await.unwrap()
            }));
        }
        let mut won = 0;
        for racer in racers {
            won += usize::from(racer.await.unwrap().is_some());
        }
        assert_eq!(won, 1, "round {round}: {won} writers won");
    }
    assert_eq!(stores[1].doc_version("key").await.unwrap(), 21, "one version per write that won");
}
