//! What a decision leaves in Redis: one state hash per group that expires when the group
//! is idle, no record or lease after settlement, and an operator's hold that keeps the
//! state until it is released. Real `redis-server` on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::time::Duration;

use sluice_quota::{Cost, Dimension, Limits, QuotaStore, RateLimit, ScopeKey, ScopeKind, Settlement};
use sluice_redis::local::LocalRedis;
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

const STATE: &str = "{keys:c}:state";
const LEASE: Duration = Duration::from_secs(30);

fn limits() -> Limits {
    Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap())
        .with_concurrency(NonZeroU64::new(4).unwrap())
}

fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).unwrap()
}

/// A `redis-server` of its own and a store on it with `prefix`, calls bounded by `timeout_secs`.
fn started(prefix: &str, timeout_secs: u64) -> (LocalRedis, RedisStore) {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let config = RedisConfig {
        topology: Topology::Standalone(server.url()),
        prefix: prefix.into(),
        timeout: Duration::from_secs(timeout_secs),
        tls: Tls::default(),
    };
    let store = RedisStore::new(config);
    (server, store)
}

fn keys(conn: &mut redis::Connection) -> Vec<String> {
    let mut all: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_expires_when_idle_and_a_hold_keeps_it_until_released() {
    let (server, store) = started("keys", 2);
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), limits());
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "east"), limits());
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();

    let grant = store.reserve(&[tenant, deployment], Cost::request(100, 100), Duration::from_secs(30)).await.unwrap();
    // One hash for the whole path, alive past the lease, never without an expiry.
    let alive = pttl(&mut conn, STATE);
    assert!((30_000..=11 * 60_000).contains(&alive), "state expiry {alive} ms");
    let mut fields: Vec<String> = redis::cmd("HKEYS").arg(STATE).query(&mut conn).unwrap();
    fields.sort();
    assert_eq!(fields, ["@x", "deployment:east", "tenant:acme"], "one field per scope");
    for id in [tenant, deployment] {
        assert_eq!(store.snapshot(id).await.unwrap().unwrap().in_flight, (1, Some(4)));
    }

    store.settle(grant.id, Settlement::exact(Cost::request(100, 40))).await.unwrap();
    assert_eq!(keys(&mut conn), [STATE], "records and leases are gone after settlement");
    for id in [tenant, deployment] {
        assert_eq!(store.snapshot(id).await.unwrap().unwrap().in_flight, (0, Some(4)));
    }
    // Settling again changes nothing (idempotent on the id).
    store.settle(grant.id, Settlement::exact(Cost::request(100, 40))).await.unwrap();

    // A hold keeps the state far beyond any bucket; its release brings the expiry back.
    store.hold(tenant, true).await.unwrap();
    assert!(pttl(&mut conn, STATE) > 365 * 86_400 * 1_000, "a held scope's state must not expire");
    assert!(store.snapshot(tenant).await.unwrap().unwrap().held);
    store.hold(tenant, false).await.unwrap();
    assert!(!store.snapshot(tenant).await.unwrap().unwrap().held);
    let released = pttl(&mut conn, STATE);
    assert!((0..=11 * 60_000).contains(&released), "expiry after release {released} ms");

    // An idle group's state goes away by itself: shown with a short expiry set by hand.
    let () = redis::cmd("PEXPIRE").arg(STATE).arg(50).query(&mut conn).unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(keys(&mut conn).is_empty(), "idle state expired");
    // A full bucket again: the next reservation starts from nothing owed.
    let grant = store.reserve(&[tenant, deployment], Cost::request(100, 100), Duration::from_secs(30)).await.unwrap();
    store.settle(grant.id, Settlement::exact(Cost::request(100, 0))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_limits_for_a_scope_keep_its_slots_and_pause() {
    let (_server, store) = started("reload", 2);
    let key = ScopeKey::new(ScopeKind::Tenant, "acme");
    let tenant = store.register(key.clone(), limits());
    let grant = store.reserve(&[tenant], Cost::request(100, 1_900), Duration::from_secs(30)).await.unwrap();
    let before = store.snapshot(tenant).await.unwrap().unwrap();
    assert!(before.rates[0].remaining < 1_100, "{before:?}");

    // Same limits, new amount: the bucket's instant carries over (same layout).
    let wider = Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 120_000).unwrap())
        .with_concurrency(NonZeroU64::new(4).unwrap());
    assert_eq!(store.register(key.clone(), wider), tenant);
    let same = store.snapshot(tenant).await.unwrap().unwrap();
    assert!(same.rates[0].remaining < same.rates[0].burst, "{same:?}");

    // Another dimension: a new layout, buckets full, the in-flight count kept.
    let requests = Limits::unlimited()
        .with_rate(RateLimit::per_minute(Dimension::Requests, 60).unwrap())
        .with_concurrency(NonZeroU64::new(1).unwrap());
    assert_eq!(store.register(key, requests), tenant);
    let after = store.snapshot(tenant).await.unwrap().unwrap();
    assert_eq!(after.rates[0].remaining, after.rates[0].burst, "{after:?}");
    assert_eq!(after.in_flight, (1, Some(1)));
    let busy = store.reserve(&[tenant], Cost::request(1, 1), Duration::from_secs(30)).await;
    assert!(busy.is_err(), "the slot taken before the change is still taken");
    store.settle(grant.id, Settlement::exact(Cost::request(100, 10))).await.unwrap();
    assert_eq!(store.snapshot(tenant).await.unwrap().unwrap().in_flight, (0, Some(1)));
}

/// Script calls so far (`INFO commandstats`).
fn script_calls(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| l.split([':', ',']).find_map(|kv| kv.strip_prefix("calls=")?.parse::<u64>().ok()))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_shares_scripts_and_every_caller_gets_its_own_answer() {
    let (server, store) = started("keys", 2);
    let store = std::sync::Arc::new(store);
    let hourly = RateLimit::new(Dimension::Requests, NonZeroU64::new(150).unwrap(), Duration::from_secs(3600))
        .with_burst(NonZeroU64::new(150).unwrap());
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited().with_rate(hourly));
    let minute = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap();
    let tokens = Limits::unlimited().with_rate(minute.with_burst(NonZeroU64::new(60_000).unwrap()));
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "east"), tokens);
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut conn).unwrap();

    // 200 callers at once, each reserving and settling: 150 pass the tenant's hourly limit.
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let store = std::sync::Arc::clone(&store);
            tokio::spawn(async move {
                let grant = store.reserve(&[tenant, deployment], Cost::request(10, 10), Duration::from_secs(30)).await;
                match grant {
                    Ok(grant) => {
                        store.settle(grant.id, Settlement::exact(Cost::request(10, 5))).await.unwrap();
                        true
                    }
                    Err(_) => false,
                }
            })
        })
        .collect();
    let mut granted = 0;
    for task in tasks {
        granted += u32::from(task.await.unwrap());
    }
    assert_eq!(granted, 150);
    // 350 operations, far fewer scripts: the waiting ones left together.
    let calls = script_calls(&mut conn);
    assert!(calls < 200, "{calls} scripts for 350 operations");
    // Every settlement found its reservation: the unused output came back and the leases
    // are gone.
    let remaining = store.snapshot(deployment).await.unwrap().unwrap().rates[0].remaining;
    assert!(remaining >= 60_000 - 150 * 15, "{remaining} tokens left");
    let leases: u64 = redis::cmd("ZCARD").arg("{keys:c}:leases").query(&mut conn).unwrap();
    assert_eq!(leases, 0);
}

/// Pauses every Redis client for `pause_ms` and starts four reservations on `scope` (the
/// most scripts a group's lane has out at once), stuck behind the pause; returns once they
/// are out.
async fn fill_the_lane(
    server: &LocalRedis,
    store: &std::sync::Arc<RedisStore>,
    scope: sluice_quota::ScopeId,
    pause_ms: u64,
) -> Vec<tokio::task::JoinHandle<Result<sluice_quota::Grant, sluice_quota::ReserveError>>> {
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let () = redis::cmd("CLIENT").arg("PAUSE").arg(pause_ms).arg("ALL").query(&mut conn).unwrap();
    let out = (0..4)
        .map(|_| {
            let store = std::sync::Arc::clone(store);
            tokio::spawn(async move { store.reserve(&[scope], Cost::request(1, 1), Duration::from_secs(30)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reservation_given_up_while_it_waited_for_its_batch_is_never_made() {
    let (server, store) = started("keys", 5);
    let store = std::sync::Arc::new(store);
    let slots = Limits::unlimited().with_concurrency(NonZeroU64::new(10).unwrap());
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "east"), slots);
    // Connect before Redis is paused.
    assert_eq!(store.snapshot(deployment).await.unwrap().unwrap().in_flight, (0, Some(10)));
    // Four scripts out, stuck behind a pause...
    let out = fill_the_lane(&server, &store, deployment, 600).await;
    // ...so the fifth waits in the lane, and its caller gives up.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(100),
        store.reserve(&[deployment], Cost::request(1, 1), Duration::from_secs(30)),
    )
    .await;
    assert!(gave_up.is_err(), "the fifth reservation should still be waiting");
    for task in out {
        let _held = task.await.unwrap().unwrap();
    }
    // The four hold their slots; the one given up was never made.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.snapshot(deployment).await.unwrap().unwrap().in_flight, (4, Some(10)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_timeout_bounds_a_call_with_its_wait_in_the_lane() {
    let (server, store) = started("keys", 1);
    let store = std::sync::Arc::new(store);
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "east"), limits());
    assert!(store.snapshot(deployment).await.unwrap().is_some(), "connected before the pause");
    // Four scripts out, stuck; a fifth reservation waits in the lane behind them.
    let out = fill_the_lane(&server, &store, deployment, 3000).await;
    let started_at = tokio::time::Instant::now();
    let fifth = store.reserve(&[deployment], Cost::request(1, 1), Duration::from_secs(30)).await;
    let took = started_at.elapsed();
    assert!(matches!(fifth, Err(sluice_quota::ReserveError::Store(_))), "{fifth:?}");
    // One timeout (1 s), not the lane's wait for a timed-out batch plus its own (2 s).
    assert!(took < Duration::from_millis(1_600), "failed after {took:?}");
    for task in out {
        assert!(task.await.unwrap().is_err(), "the stuck scripts time out too");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spent_budgets_keep_the_state_until_their_period_is_over_even_after_a_hold() {
    let (server, store) = started("keys", 2);
    let budget =
        sluice_quota::Budget { period: sluice_quota::BudgetPeriod::Month, amount: NonZeroU64::new(10).unwrap() };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), limits().with_budget(budget));
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    // 2026-12-01T21:30Z: the month ends in about 30 days.
    let calendar = sluice_quota::Calendar::at(1_796_160_600, 0);
    let cost = Cost::request(1, 1).with_money(4);
    let path = [tenant];
    let demand = sluice_quota::Demand { calendar, ..sluice_quota::Demand::new(&path, cost, Duration::from_secs(30)) };
    let grant = store.admit(demand).await.unwrap();
    store.settle(grant.id, Settlement::exact(cost)).await.unwrap();
    let month = i64::try_from(calendar.month.reset.as_millis()).unwrap();
    assert!(pttl(&mut conn, STATE) >= month, "what was spent outlives the month");
    // A hold and its release recompute the expiry: the budget still counts.
    store.hold(tenant, true).await.unwrap();
    store.hold(tenant, false).await.unwrap();
    assert!(pttl(&mut conn, STATE) >= month, "after a release: {} ms", pttl(&mut conn, STATE));
}

/// A budget field written before holds were kept (four numbers: each period and what was
/// spent in it) reads as holding nothing: what it says is spent is spent for good. The
/// first reservation after it keeps its hold beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_field_without_holds_holds_nothing() {
    use sluice_quota::{Budget, BudgetPeriod, Calendar, Demand, IN_FLIGHT_RETRY, LimiterName, RejectionKind};

    let (server, store) = started("keys", 2);
    let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(1_000_000).unwrap() };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited().with_budget(budget));
    let mut conn = redis::Client::open(server.url()).unwrap().get_connection().unwrap();
    let today = Calendar::at(1_796_160_600, 0);
    let mut old = Vec::new();
    rmp::encode::write_array_len(&mut old, 4).unwrap();
    for n in [today.day.id, 900_000, 0, 0] {
        rmp::encode::write_uint(&mut old, n).unwrap();
    }
    let () = redis::cmd("HSET").arg(STATE).arg("tenant:acme$b").arg(old).query(&mut conn).unwrap();
    let shown = store.snapshot(tenant).await.unwrap().unwrap().budgets[0].spent;
    assert_eq!((shown.in_period(today.day.id), shown.held_in(today.day.id)), (900_000, 0));

    let path = [tenant];
    let demand = |money| Demand { calendar: today, ..Demand::new(&path, Cost::request(1, 1).with_money(money), LEASE) };
    let spent = match store.admit(demand(300_000)).await {
        Err(sluice_quota::ReserveError::Rejected(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!((spent.limiter, spent.kind), (LimiterName::Budget, RejectionKind::RetryAfter(today.day.reset)));
    let grant = store.admit(demand(100_000)).await.unwrap();
    let shown = store.snapshot(tenant).await.unwrap().unwrap().budgets[0].spent;
    assert_eq!((shown.in_period(today.day.id), shown.held_in(today.day.id)), (1_000_000, 100_000));
    let held = match store.admit(demand(50_000)).await {
        Err(sluice_quota::ReserveError::Rejected(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(held.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
    store.settle(grant.id, Settlement::exact(Cost::request(1, 1).with_money(20_000))).await.unwrap();
    let shown = store.snapshot(tenant).await.unwrap().unwrap().budgets[0].spent;
    assert_eq!((shown.in_period(today.day.id), shown.held_in(today.day.id)), (920_000, 0));
}
