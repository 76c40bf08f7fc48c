//! The in-process usage book: counts per day and group, flushed to the job store in
//! batches that the store applies at most once.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rand::Rng as _;
use sluice_quota::Clock;

use crate::store::{JobStore, JobStoreError};
use crate::usage::{Day, Retention, UsageCounts, UsageKey, day_of_millis};

/// The most groups the book holds between two flushes, pending and held aside together: a
/// bound on memory (a flush empties it; with a failing store it stays full and new groups
/// are dropped and counted). A batch held aside is never dropped: its rows may already be
/// in the store.
pub const MAX_PENDING: usize = 100_000;

/// Who used what: the group a settled request counts in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UsageTag {
    /// The tenant.
    pub tenant: Arc<str>,
    /// The team (empty: none).
    pub team: Arc<str>,
    /// The key's id.
    pub key: Arc<str>,
    /// The model profile the client named.
    pub profile: Arc<str>,
    /// The deployment that served it.
    pub deployment: Arc<str>,
}

impl UsageTag {
    fn on(&self, day: Day) -> UsageKey {
        UsageKey {
            day,
            tenant: self.tenant.to_string(),
            team: self.team.to_string(),
            key: self.key.to_string(),
            profile: self.profile.to_string(),
            deployment: self.deployment.to_string(),
        }
    }
}

/// The pending counts, by day and group: keyed by shared names, so that counting a request
/// allocates nothing once its group is known.
type Pending = HashMap<(Day, UsageTag), UsageCounts>;

/// One flush's rows under an id of their own: the store adds a batch at most once, however
/// often it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The book's random nonce and the batch's number in it: unique across instances and
    /// restarts.
    pub id: String,
    /// The rows, as the store adds them.
    pub rows: Vec<(UsageKey, UsageCounts)>,
}

/// What the book holds: counts still pending, and the batch sealed from them whose write is
/// not known to have been applied (it failed, or is under way).
#[derive(Debug, Default)]
struct Ledger {
    pending: Pending,
    held: Option<Arc<Batch>>,
    /// Batches sealed so far.
    sealed: u64,
}

impl Ledger {
    fn held_rows(&self) -> usize {
        self.held.as_ref().map_or(0, |b| b.rows.len())
    }
}

/// Usage counted on this instance and not yet written to the store. Kept across reloads.
///
/// A flush seals what is pending into a [`Batch`] and holds it aside until the store has
/// acknowledged it. A batch whose write failed stays held, unchanged (same id, same rows),
/// and is written again first at the next flush; it is never merged back into the pending
/// counts, which keep growing meanwhile. A write that failed may still have been applied
/// (a timeout while the store was frozen): the store recognises the id and does not add it
/// twice.
pub struct UsageBook {
    ledger: Mutex<Ledger>,
    /// Random per book (per process): part of every batch id.
    nonce: String,
    /// One flush at a time.
    flushing: tokio::sync::Mutex<()>,
    clock: Arc<dyn Clock>,
    /// Called once for every group dropped when full (the gateway counts them in
    /// `sluice_usage_dropped_total`).
    dropped: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for UsageBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageBook")
            .field("ledger", &self.ledger)
            .field("nonce", &self.nonce)
            .field("flushing", &self.flushing)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl UsageBook {
    /// A book reading the day from `clock`; `dropped` is called for each group dropped
    /// when full.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>, dropped: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            ledger: Mutex::default(),
            nonce: format!("{:032x}", rand::rng().random::<u128>()),
            flushing: tokio::sync::Mutex::new(()),
            clock,
            dropped: Box::new(dropped),
        }
    }

    /// Counts `counts` for `tag` today (UTC). Never waits for IO.
    pub fn record(&self, tag: &UsageTag, counts: &UsageCounts) {
        let day = day_of_millis(self.clock.unix_millis());
        // Cloning a tag clones five `Arc`s: counting allocates nothing for a known group.
        self.add(&mut self.ledger.lock(), (day, tag.clone()), counts);
    }

    /// Adds `counts` to `key`'s, or drops them when `key` is new and the book is full.
    fn add(&self, ledger: &mut Ledger, key: (Day, UsageTag), counts: &UsageCounts) {
        let full = ledger.pending.len() + ledger.held_rows() >= MAX_PENDING;
        match ledger.pending.get_mut(&key) {
            Some(total) => total.add(counts),
            None if full => (self.dropped)(),
            None => drop(ledger.pending.insert(key, *counts)),
        }
    }

    /// Everything pending, which the book forgets.
    #[must_use]
    pub fn take(&self) -> Vec<(UsageKey, UsageCounts)> {
        rows(&std::mem::take(&mut self.ledger.lock().pending))
    }

    /// A copy of what is pending (what a usage query adds to the store's rollups). A batch
    /// held aside is not in it: its write may already have been applied.
    #[must_use]
    pub fn pending(&self) -> Vec<(UsageKey, UsageCounts)> {
        rows(&self.ledger.lock().pending)
    }

    /// The batch held aside, if any: sealed, and not known to be in the store.
    #[must_use]
    pub fn held(&self) -> Option<Arc<Batch>> {
        self.ledger.lock().held.clone()
    }

    /// Seals what is pending into a new batch, held aside until [`written`](Self::written);
    /// `None` when nothing is pending or a batch is held already.
    fn seal(&self) -> Option<Arc<Batch>> {
        let mut ledger = self.ledger.lock();
        if ledger.held.is_some() || ledger.pending.is_empty() {
            return None;
        }
        ledger.sealed += 1;
        let id = format!("{}-{}", self.nonce, ledger.sealed);
        let batch = Arc::new(Batch { id, rows: rows(&std::mem::take(&mut ledger.pending)) });
        ledger.held = Some(Arc::clone(&batch));
        Some(batch)
    }

    /// The store acknowledged batch `id`: it is no longer held.
    fn written(&self, id: &str) {
        let mut ledger = self.ledger.lock();
        if ledger.held.as_ref().is_some_and(|b| b.id == id) {
            ledger.held = None;
        }
    }

    /// Today (UTC) by the book's clock.
    #[must_use]
    pub fn today(&self) -> Day {
        day_of_millis(self.clock.unix_millis())
    }
}

/// The store's rows of `pending`.
fn rows(pending: &Pending) -> Vec<(UsageKey, UsageCounts)> {
    pending.iter().map(|((day, tag), counts)| (tag.on(*day), *counts)).collect()
}

/// Writes what `book` holds to `store`, keeping `retention_days`: first the batch held
/// aside by a failed flush, as it was, then what is pending as a new batch. On failure the
/// batch stays held for the next flush (what is counted meanwhile stays pending).
///
/// # Errors
/// The store's error (the batch is kept).
pub async fn flush(book: &UsageBook, store: &dyn JobStore, retention_days: u32) -> Result<(), JobStoreError> {
    let _one = book.flushing.lock().await;
    let keep = Retention { today: book.today(), days: retention_days };
    if let Some(held) = book.held() {
        write(book, store, &held, keep).await?;
    }
    if let Some(batch) = book.seal() {
        write(book, store, &batch, keep).await?;
    }
    Ok(())
}

/// Writes `batch` to `store`; once acknowledged, `book` no longer holds it.
async fn write(book: &UsageBook, store: &dyn JobStore, batch: &Batch, keep: Retention) -> Result<(), JobStoreError> {
    let added = store.add_usage(&batch.id, batch.rows.clone(), keep).await?;
    if !added {
        tracing::info!(batch = %batch.id, "a usage batch written again had been applied before; not added twice");
    }
    book.written(&batch.id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Changes, Counts, Doc, DocKey, EmbeddedJobStore, Failure, Job, JobFuture, JobId, JobResult, JobState,
        LeaseOutcome, NewJob, Submitted,
    };
    use sluice_quota::FakeClock;
    use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

    /// A count of dropped groups a book reports to, as the gateway's counter would.
    #[derive(Debug, Clone, Default)]
    struct Counter(Arc<AtomicU64>);

    impl Counter {
        fn get(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }

        /// What the book calls for each dropped group.
        fn inc(&self) -> impl Fn() + Send + Sync + 'static {
            let count = Arc::clone(&self.0);
            move || {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// How [`Flaky`] answers a usage write.
    const APPLY: u8 = 0;
    /// The write lands, then the caller sees an error (a timeout while the store was frozen).
    const LAND_THEN_FAIL: u8 = 1;
    /// The write is refused (the store is unreachable).
    const REFUSE: u8 = 2;

    /// An embedded store whose usage writes fail as told, recording every one it was sent.
    #[derive(Debug)]
    struct Flaky {
        inner: EmbeddedJobStore,
        mode: AtomicU8,
        sent: Mutex<Vec<Sent>>,
    }

    /// A usage write a store was sent: the batch's id and its rows, sorted.
    type Sent = (String, Vec<(UsageKey, UsageCounts)>);

    impl Flaky {
        fn open(dir: &std::path::Path, clock: Arc<dyn Clock>) -> Self {
            let inner = EmbeddedJobStore::open(&dir.join("jobs.redb"), clock).unwrap();
            Self { inner, mode: AtomicU8::new(APPLY), sent: Mutex::default() }
        }

        fn set(&self, mode: u8) {
            self.mode.store(mode, Ordering::Relaxed);
        }

        /// The writes sent so far, each with its rows sorted.
        fn sent(&self) -> Vec<Sent> {
            self.sent.lock().clone()
        }
    }

    impl JobStore for Flaky {
        fn submit(&self, job: NewJob) -> JobFuture<'_, Submitted> {
            self.inner.submit(job)
        }

        fn lease_next<'a>(&'a self, worker: &'a str, visibility: std::time::Duration) -> JobFuture<'a, LeaseOutcome> {
            self.inner.lease_next(worker, visibility)
        }

        fn renew<'a>(&'a self, id: &'a JobId, token: u64, visibility: std::time::Duration) -> JobFuture<'a, bool> {
            self.inner.renew(id, token, visibility)
        }

        fn complete<'a>(&'a self, id: &'a JobId, token: u64, result: JobResult) -> JobFuture<'a, bool> {
            self.inner.complete(id, token, result)
        }

        fn fail<'a>(&'a self, id: &'a JobId, token: u64, failure: Failure) -> JobFuture<'a, Option<JobState>> {
            self.inner.fail(id, token, failure)
        }

        fn get<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<Job>> {
            self.inner.get(id)
        }

        fn counts(&self) -> JobFuture<'_, Counts> {
            self.inner.counts()
        }

        fn cancel<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<JobState>> {
            self.inner.cancel(id)
        }

        fn put_doc(&self, doc: Doc) -> JobFuture<'_, ()> {
            self.inner.put_doc(doc)
        }

        fn get_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, Option<Vec<u8>>> {
            self.inner.get_doc(key)
        }

        fn delete_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, bool> {
            self.inner.delete_doc(key)
        }

        fn list_docs<'a>(&'a self, kind: &'a str, owner: &'a str) -> JobFuture<'a, Vec<Doc>> {
            self.inner.list_docs(kind, owner)
        }

        fn put_record(&self, doc: Doc) -> JobFuture<'_, u64> {
            self.inner.put_record(doc)
        }

        fn swap_record(&self, doc: Doc, expected: Option<Vec<u8>>) -> JobFuture<'_, Option<u64>> {
            self.inner.swap_record(doc, expected)
        }

        fn doc_version<'a>(&'a self, kind: &'a str) -> JobFuture<'a, u64> {
            self.inner.doc_version(kind)
        }

        fn records_since<'a>(&'a self, kind: &'a str, owner: &'a str, since: u64) -> JobFuture<'a, Changes> {
            self.inner.records_since(kind, owner, since)
        }

        fn add_usage<'a>(
            &'a self,
            batch: &'a str,
            rows: Vec<(UsageKey, UsageCounts)>,
            keep: Retention,
        ) -> JobFuture<'a, bool> {
            let mut sorted = rows.clone();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            self.sent.lock().push((batch.to_owned(), sorted));
            Box::pin(async move {
                match self.mode.load(Ordering::Relaxed) {
                    REFUSE => Err(JobStoreError("connection refused".into())),
                    LAND_THEN_FAIL => {
                        self.inner.add_usage(batch, rows, keep).await?;
                        Err(JobStoreError("redis call timed out".into()))
                    }
                    _ => self.inner.add_usage(batch, rows, keep).await,
                }
            })
        }

        fn usage_between(&self, first: Day, last: Day) -> JobFuture<'_, Vec<(UsageKey, UsageCounts)>> {
            self.inner.usage_between(first, last)
        }
    }

    fn tag(tenant: &str) -> UsageTag {
        let s = |v: &str| Arc::<str>::from(v);
        UsageTag { tenant: s(tenant), team: s(""), key: s("k"), profile: s("p"), deployment: s("d") }
    }

    fn one(input: u64) -> UsageCounts {
        UsageCounts { requests: 1, input_tokens: input, ..UsageCounts::default() }
    }

    fn sorted(rows: &[(UsageKey, UsageCounts)]) -> Vec<(UsageKey, UsageCounts)> {
        let mut rows = rows.to_vec();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    #[test]
    fn counts_add_up_per_group_and_day_and_the_bound_drops_new_groups() {
        let clock = Arc::new(FakeClock::default());
        let d0 = day_of_millis(clock.unix_millis());
        let dropped = Counter::default();
        let book = UsageBook::new(clock.clone(), dropped.inc());
        book.record(&tag("a"), &one(5));
        book.record(&tag("a"), &one(7));
        clock.advance(std::time::Duration::from_secs(86_400));
        book.record(&tag("a"), &one(1));
        let mut rows = book.pending();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            rows.iter().map(|(k, c)| (k.day, c.requests, c.input_tokens)).collect::<Vec<_>>(),
            [(d0, 2, 12), (d0 + 1, 1, 1)]
        );
        for i in 0..MAX_PENDING {
            book.record(&tag(&i.to_string()), &one(1));
        }
        assert_eq!(book.pending().len(), MAX_PENDING);
        assert_eq!(dropped.get(), 2, "two new groups found the book full");
        book.record(&tag("a"), &one(1));
        assert_eq!(dropped.get(), 2, "a group already counted still adds up");
        assert_eq!(book.take().len(), MAX_PENDING);
        assert!(book.pending().is_empty());
    }

    #[tokio::test]
    async fn a_flush_writes_the_book_and_days_past_the_retention_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(FakeClock::default());
        let store = EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
        let book = UsageBook::new(clock.clone(), Counter::default().inc());
        let first = book.today();
        book.record(&tag("a"), &one(5));
        flush(&book, &store, 2).await.unwrap();
        assert!(book.pending().is_empty(), "a flush empties the book");
        assert_eq!(store.usage_between(first, first).await.unwrap()[0].1.input_tokens, 5);
        // Two days later the first day is still kept; three days later it is pruned.
        clock.advance(std::time::Duration::from_secs(2 * 86_400));
        book.record(&tag("a"), &one(1));
        flush(&book, &store, 2).await.unwrap();
        assert_eq!(store.usage_between(first, first + 3).await.unwrap().len(), 2);
        clock.advance(std::time::Duration::from_secs(86_400));
        book.record(&tag("a"), &one(1));
        flush(&book, &store, 2).await.unwrap();
        let days: Vec<_> =
            store.usage_between(first, first + 3).await.unwrap().into_iter().map(|(k, _)| k.day).collect();
        assert_eq!(days, [first + 2, first + 3]);
    }

    #[tokio::test]
    async fn a_failed_batch_is_held_aside_and_retried_first_with_the_same_id_and_rows() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(FakeClock::default());
        let store = Flaky::open(dir.path(), clock.clone());
        let book = UsageBook::new(clock.clone(), Counter::default().inc());
        let today = book.today();
        book.record(&tag("a"), &one(5));
        book.record(&tag("b"), &one(7));

        // The write lands but the flush sees a timeout: the batch is held, not merged back.
        store.set(LAND_THEN_FAIL);
        assert!(flush(&book, &store, 30).await.is_err());
        let held = book.held().expect("the failed batch is held aside");
        assert_eq!(store.sent(), [(held.id.clone(), sorted(&held.rows))]);
        assert!(book.pending().is_empty(), "nothing merged back into pending");
        // Counted meanwhile: pending, apart from the held batch.
        book.record(&tag("a"), &one(1));
        assert_eq!(book.pending().len(), 1);

        // While the store refuses, each flush tries the held batch, unchanged, and only it.
        store.set(REFUSE);
        assert!(flush(&book, &store, 30).await.is_err());
        assert!(flush(&book, &store, 30).await.is_err());
        let sent = store.sent();
        assert_eq!(sent.len(), 3, "{sent:?}");
        assert!(sent.iter().all(|s| *s == sent[0]), "every retry sends the same id and rows: {sent:?}");
        assert_eq!(book.held(), Some(held.clone()));

        // The store is back: the held batch first (already applied, so not added again),
        // then what was counted meanwhile as a batch of its own.
        store.set(APPLY);
        flush(&book, &store, 30).await.unwrap();
        let sent = store.sent();
        assert_eq!(sent.len(), 5, "{sent:?}");
        assert_eq!(sent[3], sent[0]);
        let (next, rows) = &sent[4];
        assert_ne!(*next, held.id);
        assert_eq!(next.split('-').next(), held.id.split('-').next(), "one nonce per book");
        assert_eq!(rows.iter().map(|(k, c)| (k.tenant.as_str(), c.input_tokens)).collect::<Vec<_>>(), [("a", 1)]);
        assert!(book.held().is_none() && book.pending().is_empty());
        let mut stored = store.usage_between(today, today).await.unwrap();
        stored.sort_by(|a, b| a.0.cmp(&b.0));
        let stored: Vec<_> = stored.iter().map(|(k, c)| (k.tenant.as_str(), c.requests, c.input_tokens)).collect();
        assert_eq!(stored, [("a", 2, 6), ("b", 1, 7)], "each request counted once");
        flush(&book, &store, 30).await.unwrap();
        assert_eq!(store.sent().len(), 5, "nothing left to write");
    }

    #[tokio::test]
    async fn a_held_batch_counts_against_the_bound_and_is_never_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(FakeClock::default());
        let store = Flaky::open(dir.path(), clock.clone());
        let dropped = Counter::default();
        let book = UsageBook::new(clock.clone(), dropped.inc());
        for i in 0..MAX_PENDING - 1 {
            book.record(&tag(&i.to_string()), &one(1));
        }
        store.set(REFUSE);
        assert!(flush(&book, &store, 30).await.is_err());
        assert_eq!(book.held().map(|b| b.rows.len()), Some(MAX_PENDING - 1));
        book.record(&tag("new"), &one(1));
        assert_eq!(dropped.get(), 0, "one group still fits beside the held batch");
        book.record(&tag("newer"), &one(1));
        assert_eq!(dropped.get(), 1, "the held batch and pending together are at the bound");
        book.record(&tag("new"), &one(1));
        assert_eq!(dropped.get(), 1, "a pending group still adds up");
        assert!(flush(&book, &store, 30).await.is_err());
        assert_eq!(book.held().map(|b| b.rows.len()), Some(MAX_PENDING - 1), "a held batch is never dropped");
    }
}
