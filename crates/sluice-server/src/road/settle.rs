//! Settlement: how a reservation's [`Terms`] settle (what was reserved, how the provider's
//! usage counts), and a guard that settles on drop so that no reservation is forgotten.
//! The guard is the [`Settle`] the driver hands the answer step.
//!
//! Settling also accounts: the usage book and the spend counter ([`Terms`]' `charge`), the
//! adaptive estimators (`Terms::settlement`), the token counters and the access line
//! ([`SettleGuard`]'s `finish`). They stay here rather than in the driver because the
//! guard settles on paths the driver has left: a stream that ends, breaks or is drained
//! after its response went back, and a guard dropped unsettled; each must account as the
//! others do, so accounting is done where settling is, once.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use prometheus_client::metrics::counter::Counter;
use sluice_config::{OutputCounting, ProviderKind};
use sluice_jobs::UsageCounts;
use sluice_provider::Usage;
use sluice_quota::{Clock, Cost, QuotaStore, ReservationId, Settlement};
use tokio_util::task::TaskTracker;

use super::context::{Settle, Streamed, Terms};
use crate::access::Line;
use crate::usage::{UsageBook, UsageTag};
use sluice_quota::queue::DeploymentQueue;

/// Where a settled request's figures came from (the access log's `usage_source`, and the
/// usage rollups' `counted_requests` / `estimated_requests`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// The provider's own usage.
    Reported,
    /// The output sluice counted passing (a stream that ended without its final usage);
    /// input as far as the provider reported it, else the estimate.
    Counted,
    /// sluice's estimate: the provider was sent the request and nothing came back to count.
    Estimated,
}

impl UsageSource {
    /// The name logged.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Reported => "reported",
            Self::Counted => "counted",
            Self::Estimated => "estimated",
        }
    }
}

impl Terms {
    /// Settlement when the provider was called but its answer never came or carried no
    /// usage: the estimate stands for input, the reservation for output (the usage book
    /// counts it through [`unanswered_usage`](Self::unanswered_usage)).
    #[must_use]
    pub fn sent_unanswered(&self) -> Settlement {
        let used = Cost::request(self.input, self.output).with_money(self.money);
        Settlement { used, upstream: used.with_output_weight(self.output_weight) }
    }

    /// What the usage book counts for a request settled with [`sent_unanswered`](Self::sent_unanswered):
    /// the same figures, marked estimated.
    #[must_use]
    pub fn unanswered_usage(&self) -> Unanswered {
        let counts = UsageCounts {
            requests: 1,
            input_tokens: self.input,
            output_tokens: self.output,
            cost_nanos: self.money.saturating_mul(1_000),
            estimated_requests: 1,
            ..UsageCounts::default()
        };
        let (book, tag) = &self.usage;
        Unanswered { book: Arc::clone(book), tag: tag.clone(), counts }
    }

    /// Settlement from the provider's reported usage (which also teaches the route's
    /// output and cache estimators), and what the usage book counted of it.
    #[must_use]
    pub fn settlement(&self, usage: Usage) -> (Settlement, UsageCounts) {
        self.adaptive.observe(&usage);
        self.charge(&usage, UsageSource::Reported)
    }

    /// Settlement of a stream, however it ended: the provider's final usage when it came;
    /// otherwise output at least what was counted passing (and at least what the provider
    /// reported so far), input as reported so far or else the estimate. A cut stream
    /// teaches the estimators nothing. With where the figures came from and what the usage
    /// book counted.
    #[must_use]
    pub fn streamed(&self, seen: Streamed) -> (Settlement, UsageSource, UsageCounts) {
        let (usage, source) = Self::streamed_usage(self.input, seen);
        let (settlement, counts) = match source {
            UsageSource::Reported => self.settlement(usage),
            UsageSource::Counted | UsageSource::Estimated => self.charge(&usage, source),
        };
        (settlement, source, counts)
    }

    /// The usage a stream settles on and where it came from (see [`Terms::streamed`]);
    /// `input` is the estimate.
    fn streamed_usage(input: u64, seen: Streamed) -> (Usage, UsageSource) {
        match seen.usage {
            Some(usage) if seen.usage_final => (usage, UsageSource::Reported),
            opening => {
                let mut usage = opening.unwrap_or(Usage { input_tokens: input, ..Usage::default() });
                usage.output_tokens = usage.output_tokens.max(seen.counted);
                let source =
                    if opening.is_none() && seen.counted == 0 { UsageSource::Estimated } else { UsageSource::Counted };
                (usage, source)
            }
        }
    }

    /// The settlement of `usage`, counted in the spend counter and the usage book.
    fn charge(&self, usage: &Usage, source: UsageSource) -> (Settlement, UsageCounts) {
        let counts = self.count(usage, source);
        let money = self.spend.as_ref().map_or(0, |(price, _)| crate::budgets::usage_micros(price, self.kind, usage));
        let input = match self.kind {
            // Anthropic's input_tokens excludes cache reads, which do not count toward ITPM.
            ProviderKind::Anthropic => usage.input_tokens + usage.cache_creation_input_tokens,
            ProviderKind::OpenAi | ProviderKind::Ollama => usage.input_tokens,
        };
        let used = Cost::request(input, usage.output_tokens).with_money(money);
        let upstream = match self.output_counting {
            OutputCounting::Reserved => Cost::request(input, self.output.max(usage.output_tokens)).with_money(money),
            OutputCounting::Actual => used,
        };
        (Settlement { used, upstream: upstream.with_output_weight(self.output_weight) }, counts)
    }

    /// Counts `usage` and its cost in the spend counter and the usage book; the counts
    /// (what the access log reports too).
    fn count(&self, usage: &Usage, source: UsageSource) -> UsageCounts {
        let cost = self.spend.as_ref().map_or(0.0, |(price, spent)| {
            let cost = crate::spend::cost(price, self.kind, usage);
            spent.inc_by(cost);
            cost
        });
        let input = match self.kind {
            // Anthropic's input_tokens is the uncached part only.
            ProviderKind::Anthropic => usage
                .input_tokens
                .saturating_add(usage.cache_read_input_tokens)
                .saturating_add(usage.cache_creation_input_tokens),
            ProviderKind::OpenAi | ProviderKind::Ollama => usage.input_tokens,
        };
        let counts = UsageCounts {
            requests: 1,
            input_tokens: input,
            cached_input_tokens: usage.cache_read_input_tokens,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            cost_nanos: crate::spend::nanos(cost),
            counted_requests: u64::from(source == UsageSource::Counted),
            estimated_requests: u64::from(source == UsageSource::Estimated),
        };
        let (book, tag) = &self.usage;
        book.record(tag, &counts);
        counts
    }
}

/// The usage a request settled on its guard's fallback counts (see
/// [`Terms::unanswered_usage`]).
#[derive(Debug)]
pub struct Unanswered {
    book: Arc<UsageBook>,
    tag: UsageTag,
    counts: UsageCounts,
}

impl Unanswered {
    /// Counts it in the usage book.
    pub fn record(self) {
        self.book.record(&self.tag, &self.counts);
    }
}

/// Tries of a settlement the store did not confirm. Settling is idempotent (a second
/// settle of the same reservation changes nothing), so a try that timed out but was applied
/// is harmless to repeat; the lease is the last resort.
const SETTLE_TRIES: u32 = 5;

/// The wait before the second try; doubled before each next one (4 waits: 3.75 s in all).
const SETTLE_BACKOFF: Duration = Duration::from_millis(250);

/// Owns a reservation until it is settled. Dropped unsettled (the client went away, the
/// handler failed), it settles with the fallback figure it holds.
#[derive(Debug)]
pub struct SettleGuard {
    store: Arc<dyn QuotaStore>,
    id: Option<ReservationId>,
    fallback: Settlement,
    used: Counter,
    queue: Arc<DeploymentQueue>,
    background: TaskTracker,
    /// The request's access-log line: told the tokens used, and written (when it is the
    /// last holder) once the guard goes, which for a stream is when the stream ends.
    access: Option<Arc<Line>>,
    /// Counted in the usage book when the guard settles on its fallback (the request was
    /// sent and its answer never came).
    unanswered: Option<Unanswered>,
    /// Where the settled figures came from, once known.
    source: Option<UsageSource>,
    /// `sluice_tokens_reserved_total` and what admission reserved: counted when the
    /// settlement used anything (the request reached the provider), so that reserved and
    /// used compare like for like.
    reserved: Option<(Counter, u64)>,
}

impl SettleGuard {
    /// Guards `id`, settling with `fallback` if nothing better is known.
    /// Each settlement adds its used tokens to `used` and tells the deployment's `queue`
    /// that capacity may have come back. A settlement that cannot finish at once runs on
    /// in `background`, which shutdown waits for.
    #[must_use]
    pub fn new(
        store: Arc<dyn QuotaStore>,
        id: ReservationId,
        fallback: Settlement,
        used: Counter,
        queue: Arc<DeploymentQueue>,
        background: TaskTracker,
    ) -> Self {
        Self {
            store,
            id: Some(id),
            fallback,
            used,
            queue,
            background,
            access: None,
            unanswered: None,
            source: None,
            reserved: None,
        }
    }

    /// Counts `tokens` reserved in `counter` when the settlement uses anything.
    #[must_use]
    pub fn reserving(mut self, counter: Counter, tokens: u64) -> Self {
        self.reserved = Some((counter, tokens));
        self
    }

    /// Counts `usage` in the usage book if the guard settles on its fallback.
    #[must_use]
    pub fn counting_unanswered(mut self, usage: Unanswered) -> Self {
        self.unanswered = Some(usage);
        self
    }

    /// Reports the settled usage to the request's access-log `line`.
    #[must_use]
    pub fn reporting_to(mut self, line: Arc<Line>) -> Self {
        self.access = Some(line);
        self
    }

    /// The access-log line this guard reports to, if any.
    #[must_use]
    pub fn access(&self) -> Option<&Line> {
        self.access.as_deref()
    }

    /// Settles now with `settlement` (its usage is counted by whoever computed it).
    pub fn settle(mut self, settlement: Settlement) {
        self.fallback = settlement;
        self.unanswered = None;
        self.finish();
    }

    /// Settles now with `settlement`, whose figures came from `source`.
    pub fn settle_as(mut self, settlement: Settlement, source: UsageSource) {
        self.source = Some(source);
        self.settle(settlement);
    }

    fn finish(&mut self) {
        let Some(id) = self.id.take() else { return };
        if let Some(unanswered) = self.unanswered.take() {
            if let Some(line) = &self.access {
                line.usage(&unanswered.counts);
            }
            unanswered.record();
            self.source = Some(UsageSource::Estimated);
        }
        if let (Some(line), Some(source)) = (&self.access, self.source) {
            line.usage_source(source.as_str());
        }
        let store = Arc::clone(&self.store);
        let settlement = self.fallback;
        let used = settlement.used.input_tokens.saturating_add(settlement.used.output_tokens);
        self.used.inc_by(used);
        if let Some((reserved, tokens)) = self.reserved.take()
            && used > 0
        {
            reserved.inc_by(tokens);
        }
        if let Some(line) = &self.access {
            line.used(settlement.used.input_tokens, settlement.used.output_tokens);
        }
        let queue = Arc::clone(&self.queue);
        let mut settling = Box::pin(async move {
            settle_patiently(store.as_ref(), queue.clock().as_ref(), id, settlement).await;
            queue.capacity_returned();
        });
        // The memory store settles synchronously; a remote store's call goes on in a task
        // (the same future: it may already have been sent), tracked so shutdown waits for it.
        if (&mut settling).now_or_never().is_none() {
            self.background.spawn(settling);
        }
    }
}

/// Settles `id`, trying again with backoff while the store fails: a settlement lost to a
/// store's stall would otherwise leave the reservation charged until its lease expires.
async fn settle_patiently(store: &dyn QuotaStore, clock: &dyn Clock, id: ReservationId, settlement: Settlement) {
    let mut wait = SETTLE_BACKOFF;
    for attempt in 1..=SETTLE_TRIES {
        match store.settle(id, settlement).await {
            Ok(()) => return,
            Err(e) if attempt == SETTLE_TRIES => {
                tracing::warn!(error = %e, tries = SETTLE_TRIES, "settlement failed; the lease will expire instead");
            }
            Err(e) => {
                tracing::debug!(error = %e, attempt, "settlement failed; trying again");
                clock.sleep(wait).await;
                wait = wait.saturating_mul(2);
            }
        }
    }
}

impl Settle for SettleGuard {
    fn settle(self, settlement: Settlement) {
        SettleGuard::settle(self, settlement);
    }

    fn answered(self, terms: &Terms, usage: Option<Usage>) {
        let (settlement, source) = match usage {
            Some(usage) => {
                let (settlement, counts) = terms.settlement(usage);
                if let Some(line) = &self.access {
                    line.usage(&counts);
                }
                (settlement, UsageSource::Reported)
            }
            None => {
                let unanswered = terms.unanswered_usage();
                if let Some(line) = &self.access {
                    line.usage(&unanswered.counts);
                }
                unanswered.record();
                (terms.sent_unanswered(), UsageSource::Estimated)
            }
        };
        self.settle_as(settlement, source);
    }

    fn streamed(self, terms: &Terms, seen: Streamed) {
        let (settlement, source, counts) = terms.streamed(seen);
        if let Some(line) = &self.access {
            line.usage(&counts);
        }
        self.settle_as(settlement, source);
    }

    fn access(&self) -> Option<&Line> {
        SettleGuard::access(self)
    }
}

impl Drop for SettleGuard {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use sluice_quota::{Limits, MemoryStore, ScopeKey, ScopeKind, StoreError, SystemClock};

    use super::*;
    use sluice_redis::watched::{Hooks, Watched};

    /// Settlements applied, the first `failing` of them answered with an error (a reply
    /// lost to a stall).
    #[derive(Debug)]
    struct Stalling {
        failing: AtomicU32,
        settles: AtomicU32,
    }

    impl Hooks for Stalling {
        fn settled(&self) -> Result<(), StoreError> {
            self.settles.fetch_add(1, Ordering::Relaxed);
            let failing = self.failing.load(Ordering::Relaxed);
            if failing > 0 {
                self.failing.store(failing - 1, Ordering::Relaxed);
                return Err(StoreError("timed out".into()));
            }
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_settlement_the_store_did_not_confirm_is_tried_again_and_counts_once() {
        let clock = Arc::new(SystemClock::new());
        let hooks = Stalling { failing: AtomicU32::new(3), settles: AtomicU32::new(0) };
        let store = Arc::new(Watched { inner: MemoryStore::new(clock.clone()), hooks });
        let limits = Limits { concurrency: std::num::NonZeroU64::new(1), ..Limits::default() };
        let scope = store.register(ScopeKey::new(ScopeKind::Deployment, "d"), limits);
        let grant = store.reserve(&[scope], Cost::request(10, 10), Duration::from_secs(600)).await.unwrap();
        let background = TaskTracker::new();
        let queue = DeploymentQueue::new(store.clone(), clock);
        let guard = SettleGuard::new(
            store.clone(),
            grant.id,
            Settlement::default(),
            Counter::default(),
            queue,
            background.clone(),
        );
        guard.settle(Settlement::default());
        background.close();
        background.wait().await;
        assert_eq!(store.hooks.settles.load(Ordering::Relaxed), 4, "three failed tries, then one confirmed");
        let snapshot = store.snapshot(scope).await.unwrap().unwrap();
        assert_eq!(snapshot.in_flight.0, 0, "the slot came back once");
        store.hooks.failing.store(SETTLE_TRIES, Ordering::Relaxed);
        let grant = store.reserve(&[scope], Cost::request(10, 10), Duration::from_secs(600)).await.unwrap();
        let queue = DeploymentQueue::new(store.clone(), Arc::new(SystemClock::new()));
        let background = TaskTracker::new();
        SettleGuard::new(store.clone(), grant.id, Settlement::default(), Counter::default(), queue, background.clone())
            .settle(Settlement::default());
        background.close();
        background.wait().await;
        assert_eq!(
            store.hooks.settles.load(Ordering::Relaxed),
            4 + SETTLE_TRIES,
            "a store that never confirms gets five tries"
        );
    }
}
