//! One behaviour suite for every job store: the embedded redb store (temp files), Redis
//! standalone, behind Sentinel and a 3-master Redis Cluster (real `redis-server` processes on 127.0.0.1).
//! Time is real (Redis uses its own clock), so waits carry margins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{
    Doc, DocKey, EmbeddedJobStore, Endpoint, Failure, JobId, JobResult, JobState, JobStore, NewJob, RedisJobConfig,
    RedisJobStore, Retention, Retry, UsageCounts, UsageKey,
};
use sluice_quota::SystemClock;
use sluice_redis::local::{LocalCluster, LocalRedis, LocalSentinel};
use sluice_redis::{Tls, Topology};

/// A store under test and whatever keeps it alive (a temp dir, a server).
struct Backend {
    store: Arc<dyn JobStore>,
    _keep: Box<dyn std::any::Any + Send>,
    /// Whether it is Redis (which forgets old rollups by expiry, on its own clock).
    redis: bool,
}

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

fn new_job(tenant: &str, idempotency_key: Option<&str>, priority: u8, max_attempts: u32) -> NewJob {
    NewJob {
        id: JobId::random(),
        tenant: tenant.into(),
        key_id: format!("{tenant}-key"),
        idempotency_key: idempotency_key.map(str::to_owned),
        endpoint: Endpoint::ChatCompletions,
        body: r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#.into(),
        class: "batch".into(),
        priority,
        max_attempts,
    }
}

const VISIBILITY: Duration = Duration::from_secs(30);

fn answer() -> JobResult {
    JobResult { status: 200, body: r#"{"id":"chatcmpl-1"}"#.into() }
}

fn retry(delay_ms: u64, counted: bool) -> Failure {
    Failure { error: "provider answered 503".into(), retry: Retry::After { delay_ms, counted } }
}

async fn submission_is_idempotent_per_tenant(b: Backend) {
    let s = &b.store;
    let first = s.submit(new_job("acme", Some("k-1"), 0, 5)).await.unwrap();
    assert!(first.created);
    assert_eq!(first.job.state, JobState::Queued);
    let again = s.submit(new_job("acme", Some("k-1"), 0, 5)).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.job.id, first.job.id);
    let other_tenant = s.submit(new_job("globex", Some("k-1"), 0, 5)).await.unwrap();
    assert!(other_tenant.created);
    assert_ne!(other_tenant.job.id, first.job.id);
    let no_key = s.submit(new_job("acme", None, 0, 5)).await.unwrap();
    assert!(no_key.created);
    let stored = s.get(&first.job.id).await.unwrap().unwrap();
    assert_eq!((stored.tenant.as_str(), stored.key_id.as_str()), ("acme", "acme-key"));
    assert_eq!(stored.body, first.job.body);
    assert_eq!(stored.idempotency_key.as_deref(), Some("k-1"));
    assert!(s.get(&JobId::random()).await.unwrap().is_none());
    assert_eq!(s.counts().await.unwrap().queued, 3);
}

async fn many_submitted_at_once_are_each_stored_or_found(b: Backend) {
    let s = &b.store;
    let earlier = s.submit(new_job("acme", Some("k-1"), 0, 5)).await.unwrap().job.id;
    let news = vec![
        new_job("acme", None, 0, 5),
        new_job("acme", Some("k-1"), 0, 5),
        new_job("acme", Some("k-2"), 0, 5),
        new_job("acme", Some("k-2"), 0, 5),
    ];
    let ids: Vec<JobId> = news.iter().map(|n| n.id.clone()).collect();
    let submitted = s.submit_many(news).await.unwrap();
    assert_eq!(submitted.len(), 4, "one answer per job");
    assert!(submitted[0].created);
    assert_eq!(submitted[0].job.id, ids[0]);
    assert!(!submitted[1].created);
    assert_eq!(submitted[1].job.id, earlier, "an idempotency key already known finds its job");
    // A key repeated in the same call: one of the two is stored, the other finds it.
    assert_ne!(submitted[2].created, submitted[3].created);
    assert_eq!(submitted[2].job.id, submitted[3].job.id);
    assert!(ids[2..].contains(&submitted[2].job.id));
    assert_eq!(s.counts().await.unwrap().queued, 3);
    assert!(s.submit_many(Vec::new()).await.unwrap().is_empty());
}

async fn leases_by_priority_then_age(b: Backend) {
    let s = &b.store;
    let late = s.submit(new_job("t", None, 5, 5)).await.unwrap().job.id;
    let urgent = s.submit(new_job("t", None, 1, 5)).await.unwrap().job.id;
    let later = s.submit(new_job("t", None, 5, 5)).await.unwrap().job.id;
    let mut order = Vec::new();
    for _ in 0..3 {
        let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        assert_eq!((leased.job.state, leased.job.attempts), (JobState::Running, 1));
        order.push(leased.job.id);
    }
    assert_eq!(order, [urgent, late, later]);
    assert!(s.lease_next("w", VISIBILITY).await.unwrap().leased.is_none(), "a valid lease is never leased again");
    assert_eq!(s.counts().await.unwrap().running, 3);
}

async fn completion_is_recorded_once(b: Backend) {
    let s = &b.store;
    let id = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert!(s.renew(&id, leased.token, VISIBILITY).await.unwrap());
    assert!(s.complete(&id, leased.token, answer()).await.unwrap());
    assert!(!s.complete(&id, leased.token, answer()).await.unwrap(), "a second completion is refused");
    assert!(!s.renew(&id, leased.token, VISIBILITY).await.unwrap());
    let job = s.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.result), (JobState::Completed, Some(answer())));
    assert_eq!(s.counts().await.unwrap(), sluice_jobs::Counts::default());
}

async fn retries_wait_for_not_before_then_dead_letter(b: Backend) {
    let s = &b.store;
    let id = s.submit(new_job("t", None, 0, 2)).await.unwrap().job.id;
    let first = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert_eq!(s.fail(&id, first.token, retry(400, true)).await.unwrap(), Some(JobState::Delayed));
    assert_eq!(s.counts().await.unwrap().delayed, 1);
    assert!(s.lease_next("w", VISIBILITY).await.unwrap().leased.is_none(), "not before not_before");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let second = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert_eq!((second.job.id.clone(), second.job.attempts), (id.clone(), 2));
    assert_eq!(second.job.error.as_deref(), Some("provider answered 503"));
    assert_eq!(s.fail(&id, first.token, retry(0, true)).await.unwrap(), None, "an old token is stale");
    assert_eq!(s.fail(&id, second.token, retry(0, true)).await.unwrap(), Some(JobState::DeadLetter));
    let job = s.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::DeadLetter, 2));
    assert_eq!(s.counts().await.unwrap().dead_letter, 1);
    assert!(s.lease_next("w", VISIBILITY).await.unwrap().leased.is_none());
}

async fn permanent_and_uncounted_failures(b: Backend) {
    let s = &b.store;
    let id = s.submit(new_job("t", None, 0, 1)).await.unwrap().job.id;
    for _ in 0..3 {
        let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
        assert_eq!(leased.job.attempts, 1);
        assert_eq!(s.fail(&id, leased.token, retry(0, false)).await.unwrap(), Some(JobState::Delayed));
    }
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    let never = Failure { error: "invalid model".into(), retry: Retry::Never };
    assert_eq!(s.fail(&id, leased.token, never).await.unwrap(), Some(JobState::Failed));
    let job = s.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.error.as_deref()), (JobState::Failed, Some("invalid model")));
}

async fn an_expired_lease_is_run_again_and_the_old_holder_cannot_record(b: Backend) {
    let s = &b.store;
    let id = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
    let short = Duration::from_millis(300);
    let lost = s.lease_next("w1", short).await.unwrap().leased.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(s.renew(&id, lost.token, short).await.unwrap(), "renewed while valid");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(s.lease_next("w2", short).await.unwrap().leased.is_none(), "the renewed lease still holds");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let outcome = s.lease_next("w2", VISIBILITY).await.unwrap();
    assert_eq!((outcome.recovered, outcome.recovered_dead), (1, 0));
    let rerun = outcome.leased.unwrap();
    assert_eq!((rerun.job.reruns, rerun.job.attempts, rerun.job.worker.as_str()), (1, 2, "w2"));
    assert!(!s.complete(&id, lost.token, answer()).await.unwrap());
    assert!(s.complete(&id, rerun.token, answer()).await.unwrap());
    assert_eq!(s.get(&id).await.unwrap().unwrap().reruns, 1);
}

fn doc(kind: &str, owner: &str, id: &str, body: &[u8]) -> Doc {
    Doc { kind: kind.into(), owner: owner.into(), id: id.into(), body: body.to_vec() }
}

fn key<'a>(kind: &'a str, owner: &'a str, id: &'a str) -> DocKey<'a> {
    DocKey { kind, owner, id }
}

async fn documents_are_owner_scoped_listed_newest_first_and_deleted(b: Backend) {
    let s = &b.store;
    let binary: Vec<u8> = (0..=255).collect();
    s.put_doc(doc("file", "acme", "f1", &binary)).await.unwrap();
    s.put_doc(doc("file", "acme", "f2", b"two")).await.unwrap();
    s.put_doc(doc("batch", "acme", "f1", b"a batch")).await.unwrap();
    s.put_doc(doc("file", "globex", "f1", b"globex's")).await.unwrap();
    assert_eq!(s.get_doc(key("file", "acme", "f1")).await.unwrap(), Some(binary.clone()));
    assert_eq!(s.get_doc(key("batch", "acme", "f1")).await.unwrap(), Some(b"a batch".to_vec()));
    assert_eq!(s.get_doc(key("file", "globex", "f1")).await.unwrap(), Some(b"globex's".to_vec()));
    assert_eq!(s.get_doc(key("file", "acme", "nope")).await.unwrap(), None);
    assert_eq!(s.get_doc(key("file", "initech", "f1")).await.unwrap(), None, "owner-scoped");
    // A rewrite replaces the body and keeps the document's place in the listing.
    s.put_doc(doc("file", "acme", "f1", b"rewritten")).await.unwrap();
    let listed = s.list_docs("file", "acme").await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["f2", "f1"]);
    assert_eq!(listed[1].body, b"rewritten");
    assert_eq!(listed[1].owner, "acme");
    assert!(s.list_docs("file", "initech").await.unwrap().is_empty());
    assert!(s.delete_doc(key("file", "acme", "f2")).await.unwrap());
    assert!(!s.delete_doc(key("file", "acme", "f2")).await.unwrap());
    assert!(!s.delete_doc(key("file", "initech", "f1")).await.unwrap());
    assert_eq!(s.get_doc(key("file", "acme", "f2")).await.unwrap(), None);
    let ids: Vec<String> = s.list_docs("file", "acme").await.unwrap().into_iter().map(|d| d.id).collect();
    assert_eq!(ids, ["f1"]);
    assert_eq!(s.get_doc(key("file", "globex", "f1")).await.unwrap(), Some(b"globex's".to_vec()));
}

async fn records_bump_their_kind_version_and_list_like_documents(b: Backend) {
    let s = &b.store;
    assert_eq!(s.doc_version("key").await.unwrap(), 0);
    assert_eq!(s.put_record(doc("key", "runtime", "k1", b"one")).await.unwrap(), 1);
    assert_eq!(s.put_record(doc("key", "runtime", "k2", b"two")).await.unwrap(), 2);
    assert_eq!(s.put_record(doc("key", "runtime", "k1", b"one again")).await.unwrap(), 3);
    assert_eq!(s.put_record(doc("audit", "admin", "a1", b"x")).await.unwrap(), 1, "versions are per kind");
    assert_eq!(s.doc_version("key").await.unwrap(), 3);
    assert_eq!(s.doc_version("audit").await.unwrap(), 1);
    let listed = s.list_docs("key", "runtime").await.unwrap();
    let ids: Vec<&str> = listed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["k2", "k1"], "newest first by first write");
    assert_eq!(listed[1].body, b"one again");
}

async fn a_record_is_swapped_only_from_the_body_expected(b: Backend) {
    let s = &b.store;
    let k1 = || key("key", "runtime", "k1");
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"v1"), Some(b"v0".to_vec())).await.unwrap(), None);
    assert_eq!(s.get_doc(k1()).await.unwrap(), None, "nothing written when a document was expected");
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"v1"), None).await.unwrap(), Some(1));
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"v1 again"), None).await.unwrap(), None, "it exists");
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"v2"), Some(b"v1".to_vec())).await.unwrap(), Some(2));
    // A writer that read v1 before the change loses, and v2 stays.
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"stale"), Some(b"v1".to_vec())).await.unwrap(), None);
    assert_eq!(s.get_doc(k1()).await.unwrap(), Some(b"v2".to_vec()));
    assert_eq!(s.doc_version("key").await.unwrap(), 2, "a lost swap leaves the version");
    assert_eq!(s.list_docs("key", "runtime").await.unwrap().len(), 1);
}

async fn a_reader_gets_the_records_written_since_its_version(b: Backend) {
    let s = &b.store;
    s.put_record(doc("key", "runtime", "k1", b"v1")).await.unwrap();
    s.put_record(doc("key", "runtime", "k2", b"w1")).await.unwrap();
    assert_eq!(s.swap_record(doc("key", "runtime", "k1", b"v2"), Some(b"v1".to_vec())).await.unwrap(), Some(3));
    let since = |v| s.records_since("key", "runtime", v);
    let all = since(0).await.unwrap();
    assert_eq!(all.version, 3);
    let body = |id: &str, b: &[u8]| (id.to_owned(), Some(b.to_vec()));
    assert_eq!(all.docs, Some(vec![body("k1", b"v2"), body("k2", b"w1")]), "each once, at its latest");
    assert_eq!(since(2).await.unwrap().docs, Some(vec![body("k1", b"v2")]));
    assert_eq!(since(3).await.unwrap().docs, Some(vec![]));
    let ahead = since(9).await.unwrap();
    assert_eq!((ahead.version, ahead.docs), (3, None), "a reader ahead of the store (reset) lists everything");
}

async fn cancel_stops_only_jobs_not_started(b: Backend) {
    let s = &b.store;
    let running = s.submit(new_job("t", None, 0, 5)).await.unwrap().job.id;
    let delayed = s.submit(new_job("t", None, 1, 5)).await.unwrap().job.id;
    let queued = s.submit(new_job("t", None, 2, 5)).await.unwrap().job.id;
    let leased = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert_eq!(leased.job.id, running);
    let second = s.lease_next("w", VISIBILITY).await.unwrap().leased.unwrap();
    assert_eq!(s.fail(&delayed, second.token, retry(60_000, true)).await.unwrap(), Some(JobState::Delayed));
    assert_eq!(s.cancel(&queued).await.unwrap(), Some(JobState::Failed));
    assert_eq!(s.cancel(&delayed).await.unwrap(), Some(JobState::Failed));
    assert_eq!(s.cancel(&running).await.unwrap(), Some(JobState::Running));
    assert_eq!(s.cancel(&JobId::random()).await.unwrap(), None);
    let job = s.get(&queued).await.unwrap().unwrap();
    assert_eq!((job.state, job.error.as_deref()), (JobState::Failed, Some("cancelled")));
    let counts = s.counts().await.unwrap();
    assert_eq!((counts.queued, counts.delayed, counts.running), (0, 0, 1));
    assert!(s.lease_next("w", VISIBILITY).await.unwrap().leased.is_none(), "a cancelled job is never leased");
    assert!(s.complete(&running, leased.token, answer()).await.unwrap(), "a running job finishes");
    assert_eq!(s.cancel(&running).await.unwrap(), Some(JobState::Completed));
}

fn usage_key(day: u32, tenant: &str, key: &str) -> UsageKey {
    UsageKey {
        day,
        tenant: tenant.into(),
        team: String::new(),
        key: key.into(),
        profile: "fast".into(),
        deployment: "d".into(),
    }
}

fn counts(requests: u64, input: u64, cost_nanos: u64) -> UsageCounts {
    UsageCounts {
        requests,
        input_tokens: input,
        output_tokens: 2 * input,
        reasoning_tokens: 1,
        cost_nanos,
        ..Default::default()
    }
}

async fn usage_rollups_add_up_per_day_and_group(b: Backend) {
    let s = &b.store;
    let keep = Retention { today: 30_000, days: 400 };
    // A hostile name is one group, whatever it contains.
    let hostile = "a\",\"b|c\n=1";
    let rows =
        vec![(usage_key(30_000, "t", "k"), counts(1, 10, 5)), (usage_key(30_000, hostile, "k"), counts(2, 7, 1))];
    assert!(s.add_usage("first", rows, keep).await.unwrap());
    // A second instance adds to the same row; another day is its own row.
    let rows = vec![
        (usage_key(30_000, "t", "k"), counts(3, 5, 1_000_000_000_000)),
        (usage_key(29_999, "t", "k"), counts(1, 1, 1)),
    ];
    assert!(s.add_usage("second", rows, keep).await.unwrap());
    let mut got = s.usage_between(30_000, 30_000).await.unwrap();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            (usage_key(30_000, hostile, "k"), counts(2, 7, 1)),
            (usage_key(30_000, "t", "k"), {
                let mut c = counts(4, 15, 1_000_000_000_005);
                c.reasoning_tokens = 2;
                c
            })
        ]
    );
    assert_eq!(s.usage_between(29_999, 30_000).await.unwrap().len(), 3);
    assert!(s.usage_between(30_001, 30_010).await.unwrap().is_empty());
}

async fn usage_rollups_older_than_the_retention_are_pruned(b: Backend) {
    let s = &b.store;
    let old = vec![(usage_key(30_100, "t", "k"), counts(1, 1, 1)), (usage_key(30_105, "t", "k"), counts(1, 1, 1))];
    s.add_usage("old", old, Retention { today: 30_105, days: 10 }).await.unwrap();
    assert_eq!(s.usage_between(30_090, 30_120).await.unwrap().len(), 2);
    // Today moved on: day 100 is now past a 10-day retention, day 105 is not.
    s.add_usage("today", vec![(usage_key(30_111, "t", "k"), counts(1, 1, 1))], Retention { today: 30_111, days: 10 })
        .await
        .unwrap();
    let days = |rows: Vec<(UsageKey, UsageCounts)>| rows.into_iter().map(|(k, _)| k.day).collect::<Vec<_>>();
    let kept = days(s.usage_between(30_090, 30_120).await.unwrap());
    assert!(kept.contains(&30_105) && kept.contains(&30_111), "{kept:?}");
    // Redis forgets a day when its hash expires (at the retention's end, in real time);
    // the embedded store at the next write.
    if kept.contains(&30_100) {
        assert!(b.redis, "the embedded store keeps day 30_100: {kept:?}");
    }
    // A row already outside the retention is not written at all.
    s.add_usage("outside", vec![(usage_key(30_050, "t", "k"), counts(1, 1, 1))], Retention { today: 30_111, days: 10 })
        .await
        .unwrap();
    assert!(s.usage_between(30_050, 30_050).await.unwrap().is_empty());
}

/// A batch written again (its first write landed though the caller saw an error) counts
/// once; another batch with the same rows counts too.
async fn a_usage_batch_is_applied_once_however_often_it_is_written(b: Backend) {
    let s = &b.store;
    let keep = Retention { today: 30_000, days: 400 };
    // Its own tenant: on a cluster this runs after other usage tests on the same store.
    let rows =
        vec![(usage_key(29_999, "once", "k"), counts(1, 3, 1)), (usage_key(30_000, "once", "k"), counts(2, 10, 5))];
    let stored = || async {
        let all = s.usage_between(29_999, 30_000).await.unwrap();
        let mut mine: Vec<_> = all.into_iter().filter(|(k, _)| k.tenant == "once").collect();
        mine.sort_by(|a, b| a.0.cmp(&b.0));
        mine
    };
    assert!(s.add_usage("node-a-1", rows.clone(), keep).await.unwrap(), "a new batch is added");
    for _ in 0..3 {
        assert!(!s.add_usage("node-a-1", rows.clone(), keep).await.unwrap(), "a batch applied before is not");
    }
    assert_eq!(stored().await, rows, "the same batch applied four times counts once");
    // Another batch (another flush, another instance) with the same rows adds them again.
    assert!(s.add_usage("node-a-2", rows.clone(), keep).await.unwrap());
    assert!(s.add_usage("node-b-1", rows[1..].to_vec(), keep).await.unwrap());
    let got = stored().await;
    let (older, today) = (got[0].1, got[1].1);
    assert_eq!((older.requests, older.input_tokens, older.cost_nanos), (2, 6, 2));
    assert_eq!((today.requests, today.input_tokens, today.cost_nanos), (6, 30, 15));
}

macro_rules! conformance {
    ($backend:ident: $($test:ident),+ $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::$backend()).await;
                }
            )+
        }
    };
}

conformance!(embedded:
    submission_is_idempotent_per_tenant,
    many_submitted_at_once_are_each_stored_or_found,
    documents_are_owner_scoped_listed_newest_first_and_deleted,
    records_bump_their_kind_version_and_list_like_documents,
    a_record_is_swapped_only_from_the_body_expected,
    a_reader_gets_the_records_written_since_its_version,
    cancel_stops_only_jobs_not_started,
    leases_by_priority_then_age,
    completion_is_recorded_once,
    retries_wait_for_not_before_then_dead_letter,
    permanent_and_uncounted_failures,
    an_expired_lease_is_run_again_and_the_old_holder_cannot_record,
    usage_rollups_add_up_per_day_and_group,
    usage_rollups_older_than_the_retention_are_pruned,
    a_usage_batch_is_applied_once_however_often_it_is_written,
);
conformance!(standalone:
    submission_is_idempotent_per_tenant,
    many_submitted_at_once_are_each_stored_or_found,
    documents_are_owner_scoped_listed_newest_first_and_deleted,
    records_bump_their_kind_version_and_list_like_documents,
    a_record_is_swapped_only_from_the_body_expected,
    a_reader_gets_the_records_written_since_its_version,
    cancel_stops_only_jobs_not_started,
    leases_by_priority_then_age,
    completion_is_recorded_once,
    retries_wait_for_not_before_then_dead_letter,
    permanent_and_uncounted_failures,
    an_expired_lease_is_run_again_and_the_old_holder_cannot_record,
    usage_rollups_add_up_per_day_and_group,
    usage_rollups_older_than_the_retention_are_pruned,
    a_usage_batch_is_applied_once_however_often_it_is_written,
);

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
