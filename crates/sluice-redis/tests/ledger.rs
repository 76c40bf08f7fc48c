//! Money budgets with a store of record: a real `redis-server` that restarts empty or
//! stalls, and a real `postgres` keeping what was spent. A budget Redis forgot is restored
//! before anything is admitted against it; what was admitted locally while Redis was away
//! is added to the shared budgets when it answers again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_ledger::local::LocalPostgres;
use sluice_ledger::{LedgerConfig, PostgresLedger};
use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Clock, Cost, Demand, Grant, LimiterName, Limits, QuotaStore, ReserveError, ScopeId,
    ScopeKey, ScopeKind, Settlement, SystemClock,
};
use sluice_redis::local::LocalRedis;
use sluice_redis::{OnUnavailable, RedisConfig, RedisStore, ResilientStore, Tls, Topology};

const LEASE: Duration = Duration::from_secs(60);
/// A tenant's day: 1.00 in micro-units.
const DAY_BUDGET: u64 = 1_000_000;
/// One request's price: 0.10.
const PRICE: u64 = 100_000;

async fn ledger(server: &LocalPostgres) -> Arc<PostgresLedger> {
    let config = LedgerConfig {
        url: server.url(),
        password: None,
        timeout: Duration::from_secs(5),
        flush_every: Duration::from_millis(200),
    };
    PostgresLedger::connect(config).await.expect("the ledger opens")
}

fn redis_config(server: &LocalRedis, timeout: Duration) -> RedisConfig {
    RedisConfig { topology: Topology::Standalone(server.url()), prefix: "ledger".into(), timeout, tls: Tls::default() }
}

fn today() -> Calendar {
    Calendar::at(SystemClock::new().unix_millis() / 1_000, 0)
}

/// The tenant with a daily budget of 1.00 on `store`, behind one deployment.
fn tenant_path(store: &dyn QuotaStore) -> [ScopeId; 2] {
    let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(DAY_BUDGET).unwrap() };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited().with_budget(budget));
    let deployment = store.register(ScopeKey::new(ScopeKind::Deployment, "gpt"), Limits::unlimited());
    [tenant, deployment]
}

async fn buy(store: &dyn QuotaStore, path: &[ScopeId]) -> Result<Grant, ReserveError> {
    let priced = Cost::request(10, 10).with_money(PRICE);
    store.admit(Demand { calendar: today(), ..Demand::new(path, priced, LEASE) }).await
}

/// Requests of 0.10 bought and settled at their price, until one is refused (at most 20).
/// A store error (the connection Redis dropped when it went) is asked again, at most 3 times.
async fn bought_until_refused(store: &dyn QuotaStore, path: &[ScopeId]) -> (u64, ReserveError) {
    let (mut bought, mut errors) = (0, 0);
    while bought < 20 {
        match buy(store, path).await {
            Ok(grant) => {
                let priced = Cost::request(10, 10).with_money(PRICE);
                store.settle(grant.id, Settlement::exact(priced)).await.unwrap();
                bought += 1;
            }
            Err(ReserveError::Store(_)) if errors < 3 => {
                errors += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return (bought, e),
        }
    }
    panic!("20 requests of 0.10 bought on a budget of 1.00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_forgotten_by_a_redis_restarted_empty_is_restored_before_it_admits() {
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let mut redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let record = ledger(&postgres).await;
    let store = RedisStore::new(redis_config(&redis, Duration::from_secs(2))).with_record(record);
    let path = tenant_path(&store);

    // 0.90 of 1.00 spent.
    for _ in 0..9 {
        let grant = buy(&store, &path).await.unwrap();
        store.settle(grant.id, Settlement::exact(Cost::request(10, 10).with_money(PRICE))).await.unwrap();
    }
    // Redis comes back with nothing: the next request finds its budget not restored, and
    // restores it from the ledger first (this instance's unwritten spend included).
    redis.kill();
    redis.restart().expect("redis-server restarts");
    let (bought, refusal) = bought_until_refused(&store, &path).await;
    assert_eq!(bought, 1, "0.10 was left of the day; {bought} requests of 0.10 bought after the restart ({refusal:?})");
    let ReserveError::Rejected(refusal) = refusal else { panic!("refused by the store: {refusal}") };
    assert_eq!((refusal.limiter, refusal.scope.kind), (LimiterName::Budget, ScopeKind::Tenant));

    // A second instance, which never saw the first's spend, is held to the same day.
    let other = RedisStore::new(redis_config(&redis, Duration::from_secs(2))).with_record(ledger(&postgres).await);
    let other_path = tenant_path(&other);
    let refused = buy(&other, &other_path).await.unwrap_err();
    assert!(matches!(refused, ReserveError::Rejected(ref r) if r.limiter == LimiterName::Budget), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_admitted_locally_while_redis_was_away_counts_in_the_shared_budget_after() {
    let postgres = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let redis = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let remote = RedisStore::new(redis_config(&redis, Duration::from_millis(300))).with_record(ledger(&postgres).await);
    let one = NonZeroU64::new(1).unwrap();
    let store =
        ResilientStore::new(remote, OnUnavailable::FailOpenLocal { instances: one }, Arc::new(SystemClock::new()));
    let path = tenant_path(&store);

    // 0.30 through Redis.
    for _ in 0..3 {
        let grant = buy(&store, &path).await.unwrap();
        store.settle(grant.id, Settlement::exact(Cost::request(10, 10).with_money(PRICE))).await.unwrap();
    }
    // Redis stalls: 0.30 more is admitted by the local limiter.
    redis.freeze().unwrap();
    let mut local = 0;
    for _ in 0..3 {
        if let Ok(grant) = buy(&store, &path).await {
            store.settle(grant.id, Settlement::exact(Cost::request(10, 10).with_money(PRICE))).await.unwrap();
            local += 1;
        }
    }
    assert!(store.is_degraded(), "the stall was noticed");
    redis.thaw().unwrap();
    // Redis kept its 0.30; once it answers again (after the next probe) it is brought up
    // to everything spent, 0.30 + what went locally.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let (bought, refusal) = bought_until_refused(&store, &path).await;
    assert!(!store.is_degraded(), "Redis answers again");
    assert_eq!(bought + local, 7, "{local} bought locally, {bought} after: 1.00 holds 10 of 0.10 ({refusal})");
}
