//! One behaviour suite for every job store: the embedded redb store (temp files), Redis
//! standalone, behind Sentinel and a 3-master Redis Cluster (real `redis-server` processes on 127.0.0.1).
//! Time is real (Redis uses its own clock), so waits carry margins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{EmbeddedJobStore, JobState, JobStore, RedisJobConfig, RedisJobStore, Retention};
use sluice_quota::SystemClock;
use sluice_redis::local::{LocalCluster, LocalRedis, LocalSentinel};
use sluice_redis::{Tls, Topology};

fn embedded() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedJobStore::open(&dir.path().join("jobs.redb"), Arc::new(SystemClock::new())).unwrap();
    Backend { store: Arc::new(store), _keep: Box::new(dir), redis: false }
}

fn redis_store(topology: Topology) -> RedisJobStore {
    RedisJobStore::new(RedisJobConfig {
        topology,
        prefix: "conformance".into(),
        timeout: Duration::from_secs(2),
        tls: Tls::default(),
    })
}

fn standalone() -> Backend {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    Backend { store: Arc::new(redis_store(Topology::Standalone(server.url()))), _keep: Box::new(server), redis: true }
}

fn cluster() -> Backend {
    let cluster = LocalCluster::start(3).expect("a local 3-master cluster");
    Backend { store: Arc::new(redis_store(Topology::Cluster(cluster.urls()))), _keep: Box::new(cluster), redis: true }
}

fn sentinel() -> Backend {
    let group = LocalSentinel::start(1).expect("a master, a replica and a sentinel");
    Backend { store: Arc::new(redis_store(Topology::Sentinel(group.target()))), _keep: Box::new(group), redis: true }
}

#[macro_use]
mod cases;
use cases::*;

every_case!(embedded);
every_case!(standalone);

conformance!(sentinel:
    submission_is_idempotent_per_tenant,
    completion_is_recorded_once,
    an_expired_lease_is_run_again_and_the_old_holder_cannot_record,
);

/// Jobs queued before the master dies are run from the promoted replica: the store asks
/// the sentinel for the new master and nothing replicated is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_jobs_survive_a_sentinel_failover() {
    let mut group = LocalSentinel::start(1).expect("a master, a replica and a sentinel");
    let (master_port, replica_port) = group.ports();
    let s = redis_store(Topology::Sentinel(group.target()));
    let mut queued = Vec::new();
    for i in 0..3 {
        queued.push(s.submit(new_job("acme", Some(&format!("k-{i}")), 0, 5)).await.unwrap().job.id);
    }
    let mut master = redis::Client::open(format!("redis://127.0.0.1:{master_port}")).unwrap().get_connection().unwrap();
    let acknowledged: i64 = redis::cmd("WAIT").arg(1).arg(5_000).query(&mut master).unwrap();
    assert_eq!(acknowledged, 1, "the replica did not acknowledge the jobs");
    group.kill_master();
    // Bounded: the sentinel notices in 1 s and promotes the replica.
    let mut first = None;
    for _ in 0..300 {
        if let Ok(outcome) = s.lease_next("w", VISIBILITY).await {
            first = Some(outcome.leased.expect("a queued job"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let first = first.expect("the store never reached the promoted replica");
    assert_eq!(group.master_port(), Some(replica_port));
    let mut run = vec![first.job.id.clone()];
    assert!(s.complete(&first.job.id, first.token, answer()).await.unwrap());
    while let Some(leased) = s.lease_next("w", VISIBILITY).await.unwrap().leased {
        assert!(s.complete(&leased.job.id, leased.token, answer()).await.unwrap());
        run.push(leased.job.id);
    }
    run.sort();
    queued.sort();
    assert_eq!(run, queued, "every job queued before the failover ran once after it");
}

/// The whole life cycle on a cluster: every key of a transition (and of a document
/// listing, and of the records written since a version) is in one slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_runs_the_life_cycle_in_one_slot() {
    let b = cluster();
    submission_is_idempotent_per_tenant(Backend { store: Arc::clone(&b.store), _keep: Box::new(()), redis: true })
        .await;
    let s = &b.store;
    let mut done = 0;
    while let Some(leased) = s.lease_next("w", VISIBILITY).await.unwrap().leased {
        assert!(s.complete(&leased.job.id, leased.token, answer()).await.unwrap());
        done += 1;
    }
    assert_eq!(done, 3);
    documents_are_owner_scoped_listed_newest_first_and_deleted(Backend {
        store: Arc::clone(&b.store),
        _keep: Box::new(()),
        redis: true,
    })
    .await;
    usage_rollups_add_up_per_day_and_group(Backend { store: Arc::clone(&b.store), _keep: Box::new(()), redis: true })
        .await;
    a_usage_batch_is_applied_once_however_often_it_is_written(Backend {
        store: Arc::clone(&b.store),
        _keep: Box::new(()),
        redis: true,
    })
    .await;
    a_reader_gets_the_records_written_since_its_version(Backend {
        store: Arc::clone(&b.store),
        _keep: Box::new(()),
        redis: true,
    })
    .await;
    an_expired_lease_is_run_again_and_the_old_holder_cannot_record(b).await;
}

/// Embedded only: reopening the file after a crash (no clean shutdown) keeps every job and
/// takes back at once what the dead process was running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_reopen_recovers_running_jobs_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    let (running, queued, delayed) = {
        let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
        let running = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
        let delayed = s.submit(new_job("t", None, 1, 5)).await.unwrap().job.id;
        let queued = s.submit(new_job("t", None, 2, 5)).await.unwrap().job.id;
        let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        assert_eq!(leased.job.id, running);
        let second = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        assert_eq!(s.fail(&delayed, second.token, retry(60_000, true)).await.unwrap(), Some(JobState::Delayed));
        (running, queued, delayed)
    };
    let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
    let counts = s.counts().await.unwrap();
    assert_eq!((counts.queued, counts.delayed, counts.running), (1, 1, 1));
    let outcome = s.lease_next("w", VISIBILITY).await.unwrap();
    assert_eq!(outcome.recovered, 1, "the dead process's lease is not waited out");
    let rerun = outcome.leased.unwrap();
    assert_eq!((rerun.job.id.clone(), rerun.job.reruns), (running, 1));
    let next = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert_eq!(next.job.id, queued);
    assert!(s.lease_next("w", VISIBILITY).await.unwrap().leased.is_none(), "the delay survives the restart");
    assert_eq!(s.get(&delayed).await.unwrap().unwrap().state, JobState::Delayed);
}

/// Embedded only: an answer that reached the journal but not the file (the process died
/// between the two) completes its job on reopen instead of running it again; a line the
/// crash cut short is skipped; the journal starts empty again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_reopen_completes_jobs_answered_just_before_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    let journal = dir.path().join("jobs.redb.answers");
    let (answered, other) = {
        let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
        let answered = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
        let other = s.submit(new_job("t", None, 1, 5)).await.unwrap().job.id;
        let first = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        let second = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        assert_eq!((first.job.id.clone(), second.job.id.clone()), (answered.clone(), other.clone()));
        // What `complete` journals first, written here without its commit.
        let line = serde_json::json!({"id": answered.as_str(), "token": first.token, "result": answer()});
        let stale = serde_json::json!({"id": other.as_str(), "token": second.token + 1, "result": answer()});
        let torn = r#"{"id":"#;
        std::fs::write(&journal, format!("{line}\n{stale}\n{torn}")).unwrap();
        (answered, other)
    };
    let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
    let job = s.get(&answered).await.unwrap().unwrap();
    assert_eq!((job.state, job.result, job.reruns), (JobState::Completed, Some(answer()), 0));
    // An answer under a lease the job no longer holds changes nothing.
    assert_eq!(s.get(&other).await.unwrap().unwrap().state, JobState::Running);
    let outcome = s.lease_next("w", VISIBILITY).await.unwrap();
    assert_eq!(outcome.recovered, 1, "only the unanswered job runs again");
    let rerun = outcome.leased.unwrap();
    assert_eq!(rerun.job.id, other);
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0);
    // A completion through the store is journaled as well as committed; replaying a
    // committed answer on the next open changes nothing.
    assert!(s.complete(&other, rerun.token, answer()).await.unwrap());
    assert!(std::fs::metadata(&journal).unwrap().len() > 0);
    drop(s);
    let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
    let job = s.get(&other).await.unwrap().unwrap();
    assert_eq!((job.state, job.reruns), (JobState::Completed, 1));
    assert_eq!(s.counts().await.unwrap().running, 0);
}

/// Embedded only: finished jobs are retired after the retention, with their idempotency
/// keys, as the Redis store lets them expire; queued and dead-lettered jobs stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_retires_finished_jobs_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(sluice_quota::FakeClock::default());
    let s = EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
    let old = s.submit(new_job("t", Some("k-old"), 0, 5)).await.unwrap().job.id;
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert!(s.complete(&old, leased.token, answer()).await.unwrap());
    let waiting = s.submit(new_job("t", None, 9, 5)).await.unwrap().job.id;

    clock.advance(sluice_jobs::redis_store::RETENTION - Duration::from_secs(60));
    let fresh = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert!(s.complete(&fresh, leased.token, answer()).await.unwrap());
    assert!(s.get(&old).await.unwrap().is_some(), "kept within the retention");

    clock.advance(Duration::from_secs(120));
    let next = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert!(s.complete(&next, leased.token, answer()).await.unwrap());
    assert!(s.get(&old).await.unwrap().is_none(), "retired once the retention passed");
    assert!(s.get(&fresh).await.unwrap().is_some(), "a younger finished job stays");
    assert_eq!(s.get(&waiting).await.unwrap().unwrap().state, JobState::Queued);
    // The idempotency key is free again: the same key makes a new job.
    let again = s.submit(new_job("t", Some("k-old"), 0, 5)).await.unwrap();
    assert!(again.created);
}

/// Embedded only: documents survive a reopen, and are retired once the retention has
/// passed since their last write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_documents_survive_reopen_and_retire_after_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    {
        let s = EmbeddedJobStore::open(&path, Arc::new(SystemClock::new())).unwrap();
        s.put_doc(doc("file", "acme", "f1", b"kept")).await.unwrap();
    }
    let clock = Arc::new(sluice_quota::FakeClock::default());
    let s = EmbeddedJobStore::open(&path, clock.clone()).unwrap();
    assert_eq!(s.get_doc(key("file", "acme", "f1")).await.unwrap(), Some(b"kept".to_vec()));
    s.put_doc(doc("file", "acme", "f2", b"younger")).await.unwrap();
    clock.advance(sluice_jobs::redis_store::RETENTION - Duration::from_secs(60));
    s.put_doc(doc("file", "acme", "f2", b"rewritten")).await.unwrap();
    clock.advance(Duration::from_secs(120));
    s.put_doc(doc("batch", "acme", "b1", b"new")).await.unwrap();
    assert_eq!(s.get_doc(key("file", "acme", "f1")).await.unwrap(), None, "retired");
    assert_eq!(s.get_doc(key("file", "acme", "f2")).await.unwrap(), Some(b"rewritten".to_vec()));
    let ids: Vec<String> = s.list_docs("file", "acme").await.unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(ids, ["f2"]);
}

/// Embedded only: a usage batch's id is remembered through a reopen and for
/// `USAGE_BATCH_TTL` of store time, then forgotten (as Redis lets its marker expire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_remembers_usage_batches_for_their_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.redb");
    let clock = Arc::new(sluice_quota::FakeClock::default());
    let keep = Retention { today: 30_000, days: 400 };
    let rows = || vec![(usage_key(30_000, "t", "k"), counts(1, 1, 1))];
    let s = EmbeddedJobStore::open(&path, clock.clone()).unwrap();
    assert!(s.add_usage("a-1", rows(), keep).await.unwrap());
    drop(s);
    let s = EmbeddedJobStore::open(&path, clock.clone()).unwrap();
    assert!(!s.add_usage("a-1", rows(), keep).await.unwrap(), "remembered through a reopen");
    clock.advance(sluice_jobs::USAGE_BATCH_TTL - Duration::from_secs(60));
    assert!(s.add_usage("a-2", rows(), keep).await.unwrap());
    assert!(!s.add_usage("a-1", rows(), keep).await.unwrap(), "remembered within the ttl");
    clock.advance(Duration::from_secs(120));
    // The next write forgets a-1 (older than the ttl), not a-2.
    assert!(s.add_usage("a-3", rows(), keep).await.unwrap());
    assert!(!s.add_usage("a-2", rows(), keep).await.unwrap(), "a younger id is kept");
    assert!(s.add_usage("a-1", rows(), keep).await.unwrap(), "forgotten after the ttl");
    assert_eq!(s.usage_between(30_000, 30_000).await.unwrap()[0].1.requests, 4);
}
