//! A pool's request on Redis (`QuotaStore::admit_first`): its members decided in one round
//! trip on a standalone server, the first that passes made and no other, never more on any
//! member than its limit when instances race, what a refusal records kept only when no
//! member passes, and the heartbeat and outage wrappers passing it on. Against real
//! `redis-server` processes on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Clock as _, Cost, Demand, Dimension, Grant, LimiterName, Limits, MemoryStore,
    QuotaStore, RateLimit, RejectionKind, ReserveError, ScopeId, ScopeKey, ScopeKind, Settlement, SpendRecord,
    SpentInPeriods, StoreError, StoreFuture, SystemClock,
};
use sluice_redis::heartbeat::Renewing;
use sluice_redis::local::LocalRedis;
use sluice_redis::{OnUnavailable, RedisConfig, RedisStore, ResilientStore, Tls, Topology};

const LEASE: Duration = Duration::from_secs(30);

fn nz(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

/// `n` requests an hour, all at once if need be.
fn per_hour(n: u64) -> Limits {
    Limits::unlimited()
        .with_rate(RateLimit::new(Dimension::Requests, nz(n), Duration::from_secs(3600)).with_burst(nz(n)))
}

fn config(server: &LocalRedis, timeout: Duration) -> RedisConfig {
    RedisConfig { topology: Topology::Standalone(server.url()), prefix: "first".into(), timeout, tls: Tls::default() }
}

fn redis(server: &LocalRedis) -> RedisStore {
    RedisStore::new(config(server, Duration::from_secs(2)))
}

/// A tenant without limits and, for pool `name`, one deployment per entry of `hourly` (that
/// many requests an hour): each member's path.
fn pool(store: &dyn QuotaStore, name: &str, hourly: &[u64]) -> Vec<[ScopeId; 2]> {
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "acme"), Limits::unlimited());
    let member = |i: usize| ScopeKey::new(ScopeKind::Deployment, format!("{name}-{i}"));
    hourly.iter().enumerate().map(|(i, &n)| [tenant, store.register(member(i), per_hour(n))]).collect()
}

fn demands(paths: &[[ScopeId; 2]]) -> Vec<Demand<'_>> {
    paths.iter().map(|path| Demand::new(path, Cost::request(1, 1), LEASE)).collect()
}

/// The scripts the server has run so far (`INFO commandstats`): each is one round trip.
fn scripts_run(server: &LocalRedis) -> u64 {
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).unwrap();
    let calls = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.strip_prefix(":calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse::<u64>().unwrap())
    };
    calls("cmdstat_evalsha") + calls("cmdstat_eval")
}

/// Scripts one `admit_first` of a pool of `hourly` members, all used up, runs on `store`:
/// after a warm-up, so the scripts are loaded.
async fn scripts_for_a_saturated_pool(server: &LocalRedis, store: &dyn QuotaStore, hourly: &[u64]) -> u64 {
    let paths = pool(store, "saturated", hourly);
    for _ in 0..hourly.iter().sum() {
        let _held = store.admit_first(demands(&paths)).await.unwrap();
    }
    let before = scripts_run(server);
    let refused = store.admit_first(demands(&paths)).await;
    assert!(matches!(refused, Err(ReserveError::Rejected(_))), "{refused:?}");
    scripts_run(server) - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_is_decided_in_one_round_trip_whatever_its_size() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let store = redis(&server);
    let paths = pool(&store, "small", &[1, 1, 2]);
    let _warm = store.admit_first(demands(&paths)).await.unwrap();
    // A grant on the third member: one script.
    let _second = store.admit_first(demands(&paths)).await.unwrap();
    let before = scripts_run(&server);
    let (third, _) = store.admit_first(demands(&paths)).await.unwrap();
    assert_eq!((third, scripts_run(&server) - before), (2, 1));
    // Saturated: refused everywhere, in one script too; one per member when asked one by one.
    let saturated = [1, 1, 1, 1, 1];
    assert_eq!(scripts_for_a_saturated_pool(&server, &store, &saturated).await, 1);
    let sequential = redis(&server);
    let paths = pool(&sequential, "saturated", &saturated);
    let before = scripts_run(&server);
    let refused = sluice_quota::store::admit_each(&sequential, demands(&paths)).await;
    assert!(matches!(refused, Err(ReserveError::Rejected(_))), "{refused:?}");
    assert_eq!(scripts_run(&server) - before, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_racing_never_admit_more_on_a_member_than_its_limit() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let hourly = [3, 5, 7];
    let stores: Vec<Arc<RedisStore>> = (0..2).map(|_| Arc::new(redis(&server))).collect();
    let mut tasks = Vec::new();
    for store in &stores {
        for _ in 0..20 {
            let store = Arc::clone(store);
            tasks.push(tokio::spawn(async move {
                let paths = pool(&*store, "race", &hourly);
                // A store error (a call timed out on a busy machine) is asked again: an
                // unheard reservation is given back.
                for _ in 0..5 {
                    match store.admit_first(demands(&paths)).await {
                        Ok((i, _)) => return Some(i),
                        Err(ReserveError::Rejected(_)) => return None,
                        Err(ReserveError::Store(_)) => {}
                    }
                }
                None
            }));
        }
    }
    let mut granted = [0_u64; 3];
    for task in tasks {
        if let Some(i) = task.await.unwrap() {
            granted[i] += 1;
        }
    }
    assert_eq!(granted, hourly, "grants per member");
    for store in &stores {
        for [_, member] in pool(&**store, "race", &hourly) {
            assert_eq!(store.snapshot(member).await.unwrap().unwrap().rates[0].remaining, 0);
        }
    }
}

/// Two members with 10 tokens a second and a burst of 100, keeping a 200 ms guard; the
/// first has 10 tokens taken. A whole burst then needs the first's window idle (over a
/// second away) and finds the second's full.
async fn two_guarded_members(store: &dyn QuotaStore, name: &str) -> [[ScopeId; 1]; 2] {
    let rate = || RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
    let member = |i: usize| {
        let key = ScopeKey::new(ScopeKind::Deployment, format!("{name}-{i}"));
        [store.register(key, Limits::unlimited().with_rate(rate()))]
    };
    let members = [member(0), member(1)];
    let _small = store.reserve(&members[0], Cost::request(10, 0), LEASE).await.unwrap();
    members
}

fn whole_burst(members: &[[ScopeId; 1]; 2]) -> Vec<Demand<'_>> {
    members.iter().map(|path| Demand::new(path, Cost::request(100, 0), LEASE)).collect()
}

/// How long a request of one token on `member` is told to wait (zero: admitted).
async fn small_wait(store: &dyn QuotaStore, member: &[ScopeId]) -> Duration {
    match store.reserve(member, Cost::request(1, 0), LEASE).await {
        Ok(_) => Duration::ZERO,
        Err(ReserveError::Rejected(r)) => r.retry_after().unwrap(),
        Err(e) => panic!("{e}"),
    }
}

async fn claims_are_kept_only_when_no_member_passes(store: &dyn QuotaStore) {
    let members = two_guarded_members(store, "claims").await;
    // Granted on the second: the first's refusal claims nothing, so a small request there
    // passes at once.
    assert_eq!(store.admit_first(whole_burst(&members)).await.unwrap().0, 1);
    assert_eq!(small_wait(store, &members[0]).await, Duration::ZERO, "held back by a request admitted elsewhere");
    // Refused on both: both claims are kept for the waiting request, and small requests on
    // either wait until it has passed.
    let refused = store.admit_first(whole_burst(&members)).await;
    let Err(ReserveError::Rejected(refusal)) = refused else { panic!("{refused:?}") };
    assert!(matches!(refusal.kind, RejectionKind::RetryAfter(_)), "{refusal:?}");
    for member in &members {
        let wait = small_wait(store, member).await;
        assert!(wait > Duration::from_millis(1_000), "{wait:?}: not held back by the claim");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_claims_are_kept_only_when_no_member_passes() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    claims_are_kept_only_when_no_member_passes(&redis(&server)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_claims_are_kept_only_when_no_member_passes() {
    claims_are_kept_only_when_no_member_passes(&MemoryStore::new(Arc::new(SystemClock::new()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_renews_the_member_granted_in_one_round_trip() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let inner: Arc<dyn QuotaStore> = Arc::new(redis(&server).with_heartbeat(Duration::from_secs(2)));
    let store = Renewing::new(inner, Arc::new(SystemClock::new()), Duration::from_millis(500));
    let paths = pool(&store, "renewed", &[1, 2]);
    let (first, a) = store.admit_first(demands(&paths)).await.unwrap();
    let before = scripts_run(&server);
    let (second, b) = store.admit_first(demands(&paths)).await.unwrap();
    assert_eq!((first, second, scripts_run(&server) - before), (0, 1, 1));
    assert_eq!(store.renewed(), 2, "each grant is renewed while held");
    store.settle(a.id, Settlement::exact(a.reserved)).await.unwrap();
    assert_eq!(store.renewed(), 1, "a settled grant is renewed no more");
    store.settle(b.id, Settlement::exact(b.reserved)).await.unwrap();
    assert_eq!(store.renewed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_local_chooses_the_member_locally_while_redis_is_away() {
    let mut server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let two = OnUnavailable::FailOpenLocal { instances: nz(2) };
    let store = ResilientStore::new(
        RedisStore::new(config(&server, Duration::from_millis(300))),
        two,
        Arc::new(SystemClock::new()),
    );
    // The fleet's 2 and 4 an hour; this instance's share 1 and 2.
    let paths = pool(&store, "outage", &[2, 4]);
    // The scripts loaded first.
    let _warm = store.reserve(&paths[0][..1], Cost::request(1, 1), LEASE).await.unwrap();
    let before = scripts_run(&server);
    let (first, grant): (usize, Grant) = store.admit_first(demands(&paths)).await.unwrap();
    assert_eq!((first, grant.reserved), (0, Cost::request(1, 1)));
    assert_eq!(scripts_run(&server) - before, 1, "through Redis, in one round trip");
    assert!(!store.is_degraded());
    // Away: the local limiter decides, knowing this instance used its share of the first.
    server.kill();
    assert_eq!(store.admit_first(demands(&paths)).await.unwrap().0, 1);
    assert!(store.is_degraded());
    assert_eq!(store.admit_first(demands(&paths)).await.unwrap().0, 1);
    let refused = store.admit_first(demands(&paths)).await;
    assert!(matches!(refused, Err(ReserveError::Rejected(_))), "{refused:?}");
}

/// A store of record that holds `day` spent today on every budget, and records nothing.
#[derive(Debug)]
struct Spent {
    day: u64,
}

impl SpendRecord for Spent {
    fn record(&self, _: &str, _: BudgetPeriod, _: u64, _: u64) {}

    fn spent<'a>(
        &'a self,
        scopes: &'a [String],
        _: u64,
        _: u64,
    ) -> StoreFuture<'a, Result<Vec<SpentInPeriods>, StoreError>> {
        let spent = SpentInPeriods { day: self.day, month: self.day };
        Box::pin(std::future::ready(Ok(vec![spent; scopes.len()])))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_on_a_budget_redis_does_not_hold_restores_it_before_admitting() {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    // The record holds 0.85 of the tenant's 1.00 a day spent: one request of 0.10 fits.
    let store = redis(&server).with_record(Arc::new(Spent { day: 850_000 }));
    let budget = Budget { period: BudgetPeriod::Day, amount: nz(1_000_000) };
    let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "spender"), Limits::unlimited().with_budget(budget));
    let members = [0, 1].map(|i| store.register(ScopeKey::new(ScopeKind::Deployment, format!("b{i}")), per_hour(5)));
    let paths = members.map(|m| [tenant, m]);
    let calendar = Calendar::at(SystemClock::new().unix_millis() / 1_000, 0);
    let priced = || {
        let cost = Cost::request(1, 1).with_money(100_000);
        paths.iter().map(|path| Demand { calendar, ..Demand::new(path, cost, LEASE) }).collect::<Vec<_>>()
    };
    assert_eq!(store.admit_first(priced()).await.unwrap().0, 0);
    let refused = store.admit_first(priced()).await;
    let Err(ReserveError::Rejected(refusal)) = refused else { panic!("{refused:?}") };
    assert_eq!((refusal.limiter, &*refusal.scope.name), (LimiterName::Budget, "spender"));
}
