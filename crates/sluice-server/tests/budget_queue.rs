//! A request already waiting in a deployment's queue that a spent budget refuses leaves the
//! queue at once: waiting for the next day or month is not waiting for capacity.
#![allow(clippy::unwrap_used, clippy::panic, reason = "tests fail loudly")]

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Cost, Demand, LimiterName, Limits, MemoryStore, QuotaStore, ReserveError, ScopeKey,
    ScopeKind, Share, SystemClock,
};
use sluice_server::queue::{Ask, DeploymentQueue, WaitError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_request_refused_by_a_spent_budget_leaves_the_queue_at_once() {
    let clock = Arc::new(SystemClock::new());
    let store: Arc<dyn QuotaStore> = Arc::new(MemoryStore::new(clock.clone()));
    let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(10).unwrap() };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited().with_budget(budget));
    let calendar = Calendar::at(1_796_160_600, 0);
    let lease = Duration::from_secs(30);
    let path = [tenant];
    let spent = Demand { calendar, ..Demand::new(&path, Cost::request(1, 1).with_money(10), lease) };
    let _grant = store.admit(spent).await.unwrap();
    let queue = DeploymentQueue::new(Arc::clone(&store), clock);
    let ask = Ask {
        path: path.to_vec(),
        cost: Cost::request(1, 1).with_money(5),
        share: Share::FULL,
        lease,
        tenant: 0,
        lane: 0,
        weight: NonZeroU32::new(1).unwrap(),
        priority: 0,
        fair: None,
        calendar,
        deadline: None,
        claimer: sluice_quota::Claimer::NOBODY,
    };
    // A class that would wait a minute: the answer comes long before.
    let waiting = queue.wait(ask, Duration::from_secs(60), 10, None);
    let (result, _) = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("answered at once");
    match result {
        Err(WaitError::Store(ReserveError::Rejected(rejection))) => {
            assert_eq!(rejection.limiter, LimiterName::Budget);
            assert_eq!(rejection.retry_after(), Some(calendar.day.reset));
        }
        other => panic!("expected the budget's refusal, got {other:?}"),
    }
}
