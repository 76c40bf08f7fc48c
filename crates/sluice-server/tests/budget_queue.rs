//! A request already waiting in a deployment's queue that a spent budget refuses leaves the
//! queue at once: waiting for the next day or month is not waiting for capacity. One that
//! reservations in flight hold the budget from waits for them to settle.
#![allow(clippy::unwrap_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::num::{NonZeroU32, NonZeroU64};
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::queue::{Ask, DeploymentQueue, WaitError};
use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Cost, Demand, IN_FLIGHT_RETRY, LimiterName, Limits, MemoryStore, QuotaStore,
    RejectionKind, ReserveError, ScopeId, ScopeKey, ScopeKind, Share, SystemClock,
};

/// A memory store with one tenant whose day's budget is 10, and its path.
struct Budgeted {
    clock: Arc<dyn sluice_quota::Clock>,
    store: Arc<dyn QuotaStore>,
    path: [ScopeId; 1],
    calendar: Calendar,
    lease: Duration,
}

/// On `clock`: the queue's retries and waits are timed by it.
fn budgeted(clock: Arc<dyn sluice_quota::Clock>) -> Budgeted {
    let store: Arc<dyn QuotaStore> = Arc::new(MemoryStore::new(Arc::clone(&clock)));
    let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(10).unwrap() };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited().with_budget(budget));
    Budgeted { clock, store, path: [tenant], calendar: Calendar::at(1_796_160_600, 0), lease: Duration::from_secs(30) }
}

/// A request costing 5 through `path`, waiting in the queue.
fn ask(path: &[ScopeId], calendar: Calendar, lease: Duration) -> Ask {
    Ask {
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
        others: Vec::new(),
        retries: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_request_refused_by_a_spent_budget_leaves_the_queue_at_once() {
    let Budgeted { clock, store, path, calendar, lease } = budgeted(Arc::new(SystemClock::new()));
    let spent = Demand { calendar, ..Demand::new(&path, Cost::request(1, 1).with_money(10), lease) };
    // Spent and settled: nothing in flight holds it, so it waits for the next day.
    let grant = store.admit(spent).await.unwrap();
    store.settle(grant.id, sluice_quota::Settlement::exact(Cost::request(1, 1).with_money(10))).await.unwrap();
    let queue = DeploymentQueue::new(Arc::clone(&store), clock);
    let ask = ask(&path, calendar, lease);
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

/// A budget that a reservation in flight holds: the waiting request stays in the queue,
/// and the settlement that frees the budget (and wakes the queue) admits it. On tokio's
/// paused clock: the queue's retries while it is held run on the test's time.
#[tokio::test(start_paused = true)]
async fn a_waiting_request_held_by_a_reservation_in_flight_is_admitted_when_it_settles() {
    let Budgeted { clock, store, path, calendar, lease } = budgeted(common::TokioClock::new());
    let held = Demand { calendar, ..Demand::new(&path, Cost::request(1, 1).with_money(8), lease) };
    let grant = store.admit(held).await.unwrap();
    let queue = DeploymentQueue::new(Arc::clone(&store), clock);
    let ask = ask(&path, calendar, lease);
    let waiting = tokio::spawn({
        let queue = Arc::clone(&queue);
        async move { queue.wait(ask, Duration::from_secs(60), 10, None).await }
    });
    // Still waiting while the reservation is in flight.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "held by the reservation in flight, it waits");
    // The reservation settles at 2 of its 8: 5 more fit.
    store.settle(grant.id, sluice_quota::Settlement::exact(Cost::request(1, 1).with_money(2))).await.unwrap();
    queue.capacity_returned();
    let (result, report) = tokio::time::timeout(Duration::from_secs(20), waiting).await.expect("admitted").unwrap();
    let admitted = result.unwrap_or_else(|e| panic!("expected a grant, got {e:?}"));
    assert_eq!(admitted.reserved.money, 5);
    let bound = report.bound_by.expect("the budget held it");
    assert_eq!((bound.limiter, bound.kind), (LimiterName::Budget, RejectionKind::InFlight(IN_FLIGHT_RETRY)));
}
