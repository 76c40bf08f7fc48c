//! The job-store behaviour suite, one function per case, shared by every store's tests
//! (`sluice-jobs/tests/conformance.rs` for the embedded and Redis stores,
//! `sluice-ledger/tests/jobs.rs` for Redis with the records in Postgres).
#![allow(dead_code, reason = "each test crate runs the cases its store has")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::sync::Arc;
use std::time::Duration;

use sluice_jobs::{
    Doc, DocKey, Endpoint, Failure, JobId, JobResult, JobState, JobStore, NewJob, Retention, Retry, UsageCounts,
    UsageKey,
};

/// A store under test and whatever keeps it alive (a temp dir, a server).
pub struct Backend {
    pub store: Arc<dyn JobStore>,
    pub _keep: Box<dyn std::any::Any + Send>,
    /// Whether it is Redis (which forgets old rollups by expiry, on its own clock).
    pub redis: bool,
}

pub fn new_job(tenant: &str, idempotency_key: Option<&str>, priority: u8, max_attempts: u32) -> NewJob {
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

pub const VISIBILITY: Duration = Duration::from_secs(30);

pub fn answer() -> JobResult {
    JobResult { status: 200, body: r#"{"id":"chatcmpl-1"}"#.into() }
}

pub fn retry(delay_ms: u64, counted: bool) -> Failure {
    Failure { error: "provider answered 503".into(), retry: Retry::After { delay_ms, counted } }
}

pub async fn submission_is_idempotent_per_tenant(b: Backend) {
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

pub async fn many_submitted_at_once_are_each_stored_or_found(b: Backend) {
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

pub async fn leases_by_priority_then_age(b: Backend) {
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

pub async fn completion_is_recorded_once(b: Backend) {
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

pub async fn retries_wait_for_not_before_then_dead_letter(b: Backend) {
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

pub async fn permanent_and_uncounted_failures(b: Backend) {
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

pub async fn an_expired_lease_is_run_again_and_the_old_holder_cannot_record(b: Backend) {
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

pub fn doc(kind: &str, owner: &str, id: &str, body: &[u8]) -> Doc {
    Doc { kind: kind.into(), owner: owner.into(), id: id.into(), body: body.to_vec() }
}

pub fn key<'a>(kind: &'a str, owner: &'a str, id: &'a str) -> DocKey<'a> {
    DocKey { kind, owner, id }
}

pub async fn documents_are_owner_scoped_listed_newest_first_and_deleted(b: Backend) {
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

pub async fn records_bump_their_kind_version_and_list_like_documents(b: Backend) {
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

pub async fn a_record_is_swapped_only_from_the_body_expected(b: Backend) {
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

pub async fn a_reader_gets_the_records_written_since_its_version(b: Backend) {
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

pub async fn cancel_stops_only_jobs_not_started(b: Backend) {
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

pub fn usage_key(day: u32, tenant: &str, key: &str) -> UsageKey {
    UsageKey {
        day,
        tenant: tenant.into(),
        team: String::new(),
        key: key.into(),
        profile: "fast".into(),
        deployment: "d".into(),
    }
}

pub fn counts(requests: u64, input: u64, cost_nanos: u64) -> UsageCounts {
    UsageCounts {
        requests,
        input_tokens: input,
        output_tokens: 2 * input,
        reasoning_tokens: 1,
        cost_nanos,
        ..Default::default()
    }
}

pub async fn usage_rollups_add_up_per_day_and_group(b: Backend) {
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

pub async fn usage_rollups_older_than_the_retention_are_pruned(b: Backend) {
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
pub async fn a_usage_batch_is_applied_once_however_often_it_is_written(b: Backend) {
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

/// Every case of the suite on `$backend` (a function in the calling module that returns a
/// [`Backend`]).
macro_rules! every_case {
    ($backend:ident) => {
        conformance!($backend:
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
    };
}
