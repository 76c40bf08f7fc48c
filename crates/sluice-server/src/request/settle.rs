//! Settlement: the terms a reservation is settled on (what was reserved, how the
//! provider's usage counts), and a guard that settles on drop so that no reservation is
//! forgotten.

use std::sync::Arc;

use futures_util::FutureExt as _;
use prometheus_client::metrics::counter::Counter;
use sluice_config::{OutputCounting, ProviderKind};
use sluice_jobs::UsageCounts;
use sluice_provider::{Protocol, Usage};
use sluice_quota::{Cost, QuotaStore, ReservationId, Settlement};
use tokio_util::task::TaskTracker;

use crate::access::Line;
use crate::adaptive::Adaptive;
use crate::queue::DeploymentQueue;
use crate::remembered::Memo;
use crate::usage::{UsageBook, UsageTag};

/// A reservation admission made, and the terms it is settled on.
#[derive(Debug)]
pub struct Terms {
    /// The reservation.
    pub id: ReservationId,
    /// The client protocol.
    pub protocol: Protocol,
    /// Estimated input tokens.
    pub input: u64,
    /// Reserved output tokens.
    pub output: u64,
    /// Quota tokens each output token burns on the deployment (see [`Cost::with_output_weight`]).
    pub output_weight: u64,
    /// The deployment's adaptive state, taught the usage when it is known.
    pub adaptive: Arc<Adaptive>,
    /// The deployment's provider (how its usage reports input).
    pub kind: ProviderKind,
    /// How the deployment's provider counts output against its limits.
    pub output_counting: OutputCounting,
    /// Responses API: remembers what the answer leaves behind for continuations.
    pub memo: Option<Memo>,
    /// The deployment's prices and the tenant's spend counter, when priced.
    pub spend: Option<(sluice_config::Price, Counter<f64, std::sync::atomic::AtomicU64>)>,
    /// What admission reserved of money budgets, micro-units (the estimate's price).
    pub money: u64,
    /// The usage book the provider's usage is counted in, and under which group.
    pub usage: (Arc<UsageBook>, UsageTag),
}

impl Terms {
    /// Settlement when the provider was called but its answer never arrived or carried no
    /// usage: the estimate stands for input, the reservation for output.
    #[must_use]
    pub fn sent_unanswered(&self) -> Settlement {
        let used = Cost::request(self.input, self.output).with_money(self.money);
        Settlement { used, upstream: used.with_output_weight(self.output_weight) }
    }

    /// Settlement from the provider's reported usage (which also teaches the route's
    /// output and cache estimators).
    #[must_use]
    pub fn settlement(&self, usage: Usage) -> Settlement {
        self.adaptive.observe(&usage);
        self.count(&usage);
        let money = self.spend.as_ref().map_or(0, |(price, _)| crate::budgets::usage_micros(price, self.kind, &usage));
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
        Settlement { used, upstream: upstream.with_output_weight(self.output_weight) }
    }

    /// Counts the provider's `usage` and its cost in the spend counter and the usage book.
    fn count(&self, usage: &Usage) {
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
        };
        let (book, tag) = &self.usage;
        book.record(tag, &counts);
    }

    /// Settlement of a stream that ended without usage, after `generated` content events.
    #[must_use]
    pub fn partial(&self, generated: u64) -> Settlement {
        let generated = generated.min(self.output);
        let money =
            crate::budgets::micros(self.spend.as_ref().map(|(price, _)| price), self.kind, self.input, generated);
        let used = Cost::request(self.input, generated).with_money(money);
        let upstream = match self.output_counting {
            OutputCounting::Reserved => Cost::request(self.input, self.output).with_money(money),
            OutputCounting::Actual => used,
        };
        Settlement { used, upstream: upstream.with_output_weight(self.output_weight) }
    }
}

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
        Self { store, id: Some(id), fallback, used, queue, background, access: None }
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

    /// Settles now with `settlement`.
    pub fn settle(mut self, settlement: Settlement) {
        self.fallback = settlement;
        self.finish();
    }

    fn finish(&mut self) {
        let Some(id) = self.id.take() else { return };
        let store = Arc::clone(&self.store);
        let settlement = self.fallback;
        let used = settlement.used.input_tokens.saturating_add(settlement.used.output_tokens);
        self.used.inc_by(used);
        if let Some(line) = &self.access {
            line.used(settlement.used.input_tokens, settlement.used.output_tokens);
        }
        let queue = Arc::clone(&self.queue);
        let mut settling = Box::pin(async move {
            if let Err(e) = store.settle(id, settlement).await {
                tracing::warn!(error = %e, "settlement failed; the lease will expire instead");
            }
            queue.capacity_returned();
        });
        // The memory store settles synchronously; a remote store's call goes on in a task
        // (the same future: it may already have been sent), tracked so shutdown waits for it.
        if (&mut settling).now_or_never().is_none() {
            self.background.spawn(settling);
        }
    }
}

impl Drop for SettleGuard {
    fn drop(&mut self) {
        self.finish();
    }
}
