//! Soft budgets: a warning when a budget's spending crosses one of `[budgets] warn_at`'s
//! shares — `sluice_budget_warnings_total` and, with `webhook_url`, one JSON POST — without
//! refusing anything. Checked every `check_interval` from the store's snapshots (those the
//! gauge reads), so spending on any instance is seen by all: each instance warns once per
//! scope, period and threshold, and a warning's `id` is the same on every instance, so a
//! receiver drops the repeats of a fleet (or of a restarted instance) by it.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde_json::{Value, json};
use sluice_quota::BudgetPeriod;
use tokio::sync::mpsc;

use crate::AppState;
use crate::budgets::{Standing, WarningLabels};
use crate::state::Gateway;

/// Warnings waiting for the webhook; one more than that is counted as failed rather than
/// holding up the check.
const QUEUE: usize = 256;
/// Tries per warning (waiting 2 s, then 4 s, in between), each bounded by [`TIMEOUT`].
const TRIES: u32 = 3;
/// How long one POST may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// One threshold crossed: scope kind, scope name, period, the period's start, threshold.
type Crossing = (&'static str, String, BudgetPeriod, u64, usize);

/// Starts the check (and the webhook's sender); both end when the gateway drains.
/// Thresholds, interval and URL follow reloads.
pub fn spawn(state: &AppState) -> tokio::task::JoinHandle<()> {
    let (hook, queue) = mpsc::channel(QUEUE);
    tokio::spawn(deliver(state.clone(), queue));
    let state = state.clone();
    tokio::spawn(async move {
        let mut warned = HashSet::new();
        loop {
            let gateway = state.current();
            check(&state, &gateway, &mut warned, &hook).await;
            if state.draining.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(gateway.budgets.check_interval).await;
        }
    })
}

/// Compares every configured budget with the thresholds; warns for each newly crossed.
async fn check(state: &AppState, gateway: &Gateway, warned: &mut HashSet<Crossing>, hook: &mpsc::Sender<Value>) {
    let warn_at = &gateway.budgets.warn_at;
    if warn_at.is_empty() {
        return;
    }
    let calendar = gateway.calendar();
    // A crossing of a past day or month cannot come again.
    warned.retain(|(_, _, period, start, _)| calendar.period(*period).id == *start);
    let policy = state.admin.policy();
    for entry in &policy.inventory.entries {
        let Ok(Some(snapshot)) = gateway.services.store.snapshot(entry.id).await else { continue };
        for standing in crate::budgets::standing(&snapshot.budgets, calendar) {
            for (i, share) in warn_at.iter().enumerate().take_while(|(_, share)| standing.ratio() >= **share) {
                let crossing = (entry.kind.as_str(), entry.name.to_string(), standing.period, standing.start, i);
                if warned.insert(crossing) {
                    warn(gateway, entry.kind.as_str(), &entry.name, &standing, *share, hook);
                }
            }
        }
    }
}

/// Counts one warning and queues it for the webhook (when one is configured).
fn warn(
    gateway: &Gateway,
    kind: &'static str,
    scope: &str,
    standing: &Standing,
    share: f64,
    hook: &mpsc::Sender<Value>,
) {
    let threshold = format!("{share}");
    let period = standing.period.as_str();
    tracing::warn!(scope_kind = kind, scope, period, threshold = %threshold, used = standing.used,
        limit = standing.limit, "budget threshold crossed");
    let labels = WarningLabels { scope_kind: kind, scope: scope.to_owned(), period, threshold: threshold.clone() };
    gateway.services.metrics.budgets.warnings.get_or_create(&labels).inc();
    if gateway.budgets.webhook_url.is_none() {
        return;
    }
    let warning = payload(kind, scope, standing, share, &gateway.currency);
    if hook.try_send(warning).is_err() {
        gateway.services.metrics.budgets.webhook_failures.inc();
    }
}

/// The webhook's JSON body.
fn payload(kind: &str, scope: &str, standing: &Standing, share: f64, currency: &str) -> Value {
    let period = standing.period.as_str();
    json!({
        "id": format!("{kind}:{scope}:{period}:{}:{share}", standing.start),
        "type": "budget.threshold",
        "scope_kind": kind,
        "scope": scope,
        "period": period,
        "period_start": standing.start,
        "threshold": share,
        "used": standing.used,
        "limit": standing.limit,
        "currency": currency,
        "reset_ms": u64::try_from(standing.reset.as_millis()).unwrap_or(u64::MAX),
    })
}

/// POSTs each queued warning to the webhook, trying [`TRIES`] times; a warning that never
/// got a 2xx counts in `sluice_budget_webhook_failures_total`. The URL is never logged.
async fn deliver(state: AppState, mut queue: mpsc::Receiver<Value>) {
    while let Some(warning) = queue.recv().await {
        let gateway = state.current();
        let Some(url) = gateway.budgets.webhook_url.clone() else { continue };
        let body = Bytes::from(warning.to_string());
        let mut delivered = false;
        for attempt in 0..TRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
            }
            let request = http::Request::post(url.as_str())
                .header(http::header::CONTENT_TYPE, "application/json")
                .header(http::header::USER_AGENT, "sluice")
                .body(Full::new(body.clone()));
            let Ok(request) = request else { break };
            match gateway.upstream.send(request, TIMEOUT).await {
                Ok(response) if response.status().is_success() => {
                    delivered = true;
                    break;
                }
                Ok(response) => {
                    tracing::warn!(status = response.status().as_u16(), "the budget webhook refused a warning")
                }
                Err(e) => tracing::warn!(error = %e, "the budget webhook could not be reached"),
            }
        }
        if !delivered {
            gateway.services.metrics.budgets.webhook_failures.inc();
        }
    }
}
