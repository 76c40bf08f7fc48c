//! Money budgets and the store of record (the gateway's `[ledger]`): what each settlement
//! spent is recorded there, and a budget Redis does not hold as restored (it lost its
//! memory, or never had it) is brought up to the record before anything is admitted
//! against it (`restore.lua`; `batch.lua` refuses such a budget with kind 9 meanwhile).

use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Calendar, Settlement, SpendRecord, StoreError};

use crate::batch::Link;
use crate::record::{self, ScopeSpec};

/// How long after a restore it is made again: other instances write what they recorded
/// at least this often (`[ledger] flush_every` is bounded well below it), so the second
/// pass brings in what they had not yet written at the first.
pub const CATCH_UP: Duration = Duration::from_secs(2);

/// Records what a settled reservation spent on `scope`'s budgets, in the periods of
/// `calendar` it was charged to: the provider's count on a deployment scope, the caller's
/// elsewhere (as `record::budget_settle` settles it).
pub fn record_settled(record: &dyn SpendRecord, scope: &ScopeSpec, calendar: Calendar, settlement: Settlement) {
    let money = if scope.deployment { settlement.upstream.money } else { settlement.used.money };
    for budget in &scope.budgets {
        record.record(&scope.sid, budget.period, calendar.period(budget.period).id, money);
    }
}

/// Brings the budgets of `sids` (fields of the group whose state hash is `state`) up to
/// what `record` holds spent in `calendar`'s day and month, and marks them restored.
///
/// # Errors
/// When the record cannot be read or Redis does not answer.
pub async fn restore(
    link: &Link,
    record: &dyn SpendRecord,
    state: &str,
    sids: &[String],
    calendar: Calendar,
) -> Result<(), StoreError> {
    if sids.is_empty() {
        return Ok(());
    }
    let spent = record.spent(sids, calendar.day.id, calendar.month.id).await?;
    let mut invocation = link.scripts.restore.prepare_invoke();
    // The hash lives at least to the month's end, as a charge to a monthly budget keeps it.
    let live_us = u64::try_from(calendar.month.reset.as_micros()).unwrap_or(u64::MAX).min(1 << 52);
    invocation.key(state).arg(live_us);
    for (sid, spent) in sids.iter().zip(spent) {
        invocation.arg(record::budget_field(sid)).arg(calendar.day.id).arg(spent.day);
        invocation.arg(calendar.month.id).arg(spent.month);
    }
    let _: i64 = link.call(invocation).await?;
    Ok(())
}

/// [`restore`] again after [`CATCH_UP`], in the background.
pub fn catch_up(link: Arc<Link>, record: Arc<dyn SpendRecord>, state: String, sids: Vec<String>, calendar: Calendar) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        tokio::time::sleep(CATCH_UP).await;
        if let Err(e) = restore(&link, &*record, &state, &sids, calendar).await {
            tracing::warn!(error = %e, "bringing restored budgets up to the record again failed");
        }
    });
}
