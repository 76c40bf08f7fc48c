//! The in-process usage book: counts per day and group, flushed to the job store.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use sluice_jobs::{Day, JobStore, JobStoreError, Retention, UsageCounts, UsageKey};
use sluice_quota::Clock;

use super::dates::day_of_millis;

/// The most groups counted between two flushes: a bound on memory (a flush empties it;
/// with a failing store it stays full and new groups are dropped and counted).
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

/// Usage counted on this instance and not yet written to the store. Kept across reloads.
#[derive(Debug)]
pub struct UsageBook {
    pending: Mutex<Pending>,
    clock: Arc<dyn Clock>,
    dropped: Counter,
}

impl UsageBook {
    /// A book reading the day from `clock`; groups dropped when full count in `dropped`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>, dropped: Counter) -> Self {
        Self { pending: Mutex::default(), clock, dropped }
    }

    /// Counts `counts` for `tag` today (UTC). Never waits for IO.
    pub fn record(&self, tag: &UsageTag, counts: &UsageCounts) {
        let day = day_of_millis(self.clock.unix_millis());
        // Cloning a tag clones five `Arc`s: counting allocates nothing for a known group.
        self.add(&mut self.pending.lock(), (day, tag.clone()), counts);
    }

    /// Adds `counts` to `key`'s, or drops them when `key` is new and the book is full.
    fn add(&self, pending: &mut Pending, key: (Day, UsageTag), counts: &UsageCounts) {
        let full = pending.len() >= MAX_PENDING;
        match pending.get_mut(&key) {
            Some(total) => total.add(counts),
            None if full => drop(self.dropped.inc()),
            None => drop(pending.insert(key, *counts)),
        }
    }

    /// Everything pending, which the book forgets.
    #[must_use]
    pub fn take(&self) -> Vec<(UsageKey, UsageCounts)> {
        rows(&std::mem::take(&mut *self.pending.lock()))
    }

    /// Puts back what a failed flush took (within the bound).
    fn restore(&self, taken: Pending) {
        let mut pending = self.pending.lock();
        for (key, counts) in taken {
            self.add(&mut pending, key, &counts);
        }
    }

    /// A copy of what is pending (what a usage query adds to the store's rollups).
    #[must_use]
    pub fn pending(&self) -> Vec<(UsageKey, UsageCounts)> {
        rows(&self.pending.lock())
    }

    /// Today (UTC) by the book's clock.
    #[must_use]
    pub fn today(&self) -> sluice_jobs::Day {
        day_of_millis(self.clock.unix_millis())
    }
}

/// The store's rows of `pending`.
fn rows(pending: &Pending) -> Vec<(UsageKey, UsageCounts)> {
    pending.iter().map(|((day, tag), counts)| (tag.on(*day), *counts)).collect()
}

/// Writes what `book` holds to `store`, keeping `retention_days`; on failure the counts go
/// back into the book for the next flush.
///
/// # Errors
/// The store's error (the counts are kept).
pub async fn flush(book: &UsageBook, store: &dyn JobStore, retention_days: u32) -> Result<(), JobStoreError> {
    let taken = std::mem::take(&mut *book.pending.lock());
    if taken.is_empty() {
        return Ok(());
    }
    let keep = Retention { today: book.today(), days: retention_days };
    // Each write its own batch (a failed one's counts go back into the next).
    let batch = format!("{:032x}", rand::Rng::random::<u128>(&mut rand::rng()));
    match store.add_usage(&batch, rows(&taken), keep).await {
        Ok(_) => Ok(()),
        Err(e) => {
            book.restore(taken);
            Err(e)
        }
    }
}

/// Flushes the gateway's usage book every `[usage] flush_interval` until shutdown begins,
/// then once more. `None` without a job store (usage is then only counted, not kept).
pub fn spawn_flush(state: &crate::AppState) -> Option<tokio::task::JoinHandle<()>> {
    let jobs = state.jobs.clone()?;
    let state = state.clone();
    Some(tokio::spawn(async move {
        let mut failing = false;
        loop {
            let gateway = state.current();
            let draining = state.draining.load(Ordering::Relaxed);
            let result = flush(&gateway.usage, jobs.store.as_ref(), gateway.usage_settings.retention_days).await;
            if result.is_err() != failing {
                failing = result.is_err();
                match result {
                    Err(e) => tracing::warn!(error = %e, "usage cannot be written to the store; kept to retry"),
                    Ok(()) => tracing::info!("usage written to the store again"),
                }
            }
            if draining {
                return;
            }
            tokio::time::sleep(gateway.usage_settings.flush_interval).await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_quota::FakeClock;

    fn tag(tenant: &str) -> UsageTag {
        let s = |v: &str| Arc::<str>::from(v);
        UsageTag { tenant: s(tenant), team: s(""), key: s("k"), profile: s("p"), deployment: s("d") }
    }

    fn one(input: u64) -> UsageCounts {
        UsageCounts { requests: 1, input_tokens: input, ..UsageCounts::default() }
    }

    #[test]
    fn counts_add_up_per_group_and_day_and_the_bound_drops_new_groups() {
        let clock = Arc::new(FakeClock::default());
        let d0 = day_of_millis(clock.unix_millis());
        let dropped = Counter::default();
        let book = UsageBook::new(clock.clone(), dropped.clone());
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
        let store = sluice_jobs::EmbeddedJobStore::open(&dir.path().join("jobs.redb"), clock.clone()).unwrap();
        let book = UsageBook::new(clock.clone(), Counter::default());
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
}
