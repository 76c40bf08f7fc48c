//! One behaviour suite, run against every store: the in-process memory store, Redis
//! standalone, over TLS, behind Sentinel, and a 3-master Redis Cluster (real `redis-server` processes on 127.0.0.1).
//! Time is real here (Redis uses its own clock), so waits carry margins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{
    Budget, BudgetPeriod, Calendar, Cost, Demand, Dimension, FairShare, IN_FLIGHT_RETRY, LimiterName, Limits,
    MemoryStore, QuotaStore, RateLimit, RejectionKind, ReserveError, ScopeId, ScopeKey, ScopeKind, ScopeSnapshot,
    Settlement, Share, SystemClock,
};
use sluice_redis::local::{LocalCluster, LocalRedis, LocalSentinel};

mod certs;
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};

/// A store under test and whatever keeps its server alive.
struct Backend {
    store: Arc<dyn QuotaStore>,
    _server: Option<Box<dyn std::any::Any + Send>>,
}

/// The heartbeat lease the Redis stores keep reservations on in the heartbeat cases.
const HEARTBEAT: Duration = Duration::from_secs(2);

/// A Redis store on `config`, keeping reservations a heartbeat at a time when given one.
fn redis_store(config: RedisConfig, heartbeat: Option<Duration>) -> RedisStore {
    let store = RedisStore::new(config);
    match heartbeat {
        Some(heartbeat) => store.with_heartbeat(heartbeat),
        None => store,
    }
}

/// The in-process store: it has no heartbeat (its holds go with the process).
fn memory(_heartbeat: Option<Duration>) -> Backend {
    Backend { store: Arc::new(MemoryStore::new(Arc::new(SystemClock::new()))), _server: None }
}

fn redis_config(topology: Topology) -> RedisConfig {
    RedisConfig { topology, prefix: "conformance".into(), timeout: Duration::from_secs(2), tls: Tls::default() }
}

fn standalone(heartbeat: Option<Duration>) -> Backend {
    let server = LocalRedis::start().expect("redis-server (scripts/test installs it)");
    let store = redis_store(redis_config(Topology::Standalone(server.url())), heartbeat);
    Backend { store: Arc::new(store), _server: Some(Box::new(server)) }
}

/// Standalone behind TLS only: a CA and server certificate made for the test, the store
/// verifying the server against that CA.
fn standalone_tls(heartbeat: Option<Duration>) -> Backend {
    let certs = certs::Certs::generate();
    let server = LocalRedis::start_tls(&certs.server).expect("redis-server built with TLS");
    let tls = Tls { ca_file: Some(certs.server.ca_file.clone()), client: None, ..Tls::default() };
    let store = redis_store(RedisConfig { tls, ..redis_config(Topology::Standalone(server.url())) }, heartbeat);
    Backend { store: Arc::new(store), _server: Some(Box::new((server, certs))) }
}

/// A master, its replica and a sentinel: the store finds the master through the sentinel.
fn sentinel(heartbeat: Option<Duration>) -> Backend {
    let group = LocalSentinel::start(1).expect("a master, a replica and a sentinel");
    let store = redis_store(redis_config(Topology::Sentinel(group.target())), heartbeat);
    Backend { store: Arc::new(store), _server: Some(Box::new(group)) }
}

fn cluster(heartbeat: Option<Duration>) -> Backend {
    let cluster = LocalCluster::start(3).expect("a local 3-master cluster");
    let store = redis_store(redis_config(Topology::Cluster(cluster.urls())), heartbeat);
    Backend { store: Arc::new(store), _server: Some(Box::new(cluster)) }
}

fn nz32(n: u32) -> std::num::NonZeroU32 {
    std::num::NonZeroU32::new(n).unwrap()
}

fn nz(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn rpm(amount: u64, burst: u64) -> Limits {
    Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::Requests, amount).unwrap().with_burst(nz(burst)))
}

/// `n` requests an hour, all at once if need be.
fn per_hour(n: u64) -> Limits {
    let rate = RateLimit::new(Dimension::Requests, nz(n), Duration::from_secs(3600)).with_burst(nz(n));
    Limits::unlimited().with_rate(rate)
}

fn tpm(amount: u64, burst: u64) -> Limits {
    Limits::unlimited().with_rate(RateLimit::per_minute(Dimension::TotalTokens, amount).unwrap().with_burst(nz(burst)))
}

const LEASE: Duration = Duration::from_secs(30);
/// 2026-12-01T21:30:00Z: budgets count in the periods the demand names, not the clock's.
const BUDGET_NOW: u64 = 1_796_160_600;

fn rejected(result: Result<sluice_quota::Grant, ReserveError>) -> sluice_quota::Rejection {
    match result {
        Err(ReserveError::Rejected(r)) => r,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

async fn remaining(store: &dyn QuotaStore, id: ScopeId) -> u64 {
    store.snapshot(id).await.unwrap().unwrap().rates[0].remaining
}

mod cases {
    use super::*;

    pub async fn burst_then_paced_refusal_passes_at_retry_after(store: &dyn QuotaStore) {
        // 120 RPM = one request per 500 ms, burst 3: slow enough that a busy machine's
        // pauses between the calls do not refill the bucket before the refusal.
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "burst"), rpm(120, 3));
        for _ in 0..3 {
            let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        }
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        assert_eq!(refusal.limiter.to_string(), "rpm");
        let wait = refusal.retry_after().unwrap();
        assert!(wait > Duration::from_millis(250) && wait <= Duration::from_millis(500), "{wait:?}");
        tokio::time::sleep(wait + Duration::from_millis(5)).await;
        let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
    }

    pub async fn a_request_sent_late_reanchors_the_window_at_its_send(store: &dyn QuotaStore) {
        // 600 tokens a minute (10 a second), a burst of 100 (10 s) keeping a 200 ms guard.
        let rate = || RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
        let late =
            store.register(ScopeKey::new(ScopeKind::Deployment, "sent-late"), Limits::unlimited().with_rate(rate()));
        let on_time =
            store.register(ScopeKey::new(ScopeKind::Deployment, "sent-on-time"), Limits::unlimited().with_rate(rate()));
        let small = Cost::request(10, 0); // a second's worth
        let _late = store.reserve(&[late], small, LEASE).await.unwrap();
        let _on_time = store.reserve(&[on_time], small, LEASE).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // One reached the wire only now: its second starts now. The other went out when it
        // was admitted, 300 ms ago (as measured by its caller): nothing moves. A whole burst
        // then waits for that second and the 200 ms guard.
        store.sent(late, small, Duration::ZERO).await.unwrap();
        store.sent(on_time, small, Duration::from_millis(300)).await.unwrap();
        let idle =
            |d| async move { rejected(store.reserve(&[d], Cost::request(100, 0), LEASE).await).retry_after().unwrap() };
        let wait = idle(late).await;
        assert!(wait > Duration::from_millis(1_050) && wait <= Duration::from_millis(1_200), "{wait:?}");
        let wait = idle(on_time).await;
        assert!(wait > Duration::from_millis(750) && wait <= Duration::from_millis(900), "{wait:?}");
    }

    pub async fn a_guarded_bucket_sends_a_whole_burst_only_into_an_idle_window(store: &dyn QuotaStore) {
        // 600 tokens a minute (10 a second), a burst of 100 (10 s) keeping a 200 ms guard.
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "guarded"), Limits::unlimited().with_rate(rate));
        // A request as large as the burst passes from the full bucket...
        let _whole = store.reserve(&[d], Cost::request(100, 0), LEASE).await.unwrap();
        // A small one waits for its own 100 ms and the 200 ms guard the rest keeps
        // (unguarded: 100 ms).
        let wait = rejected(store.reserve(&[d], Cost::request(1, 0), LEASE).await).retry_after().unwrap();
        assert!(wait > Duration::from_millis(150) && wait <= Duration::from_millis(300), "{wait:?}");
        // ...and the next large one only once the window has refilled and been idle for the guard.
        let wait = rejected(store.reserve(&[d], Cost::request(100, 0), LEASE).await).retry_after().unwrap();
        assert!(wait > Duration::from_millis(9_900) && wait <= Duration::from_millis(10_200), "{wait:?}");
    }

    pub async fn a_request_waiting_for_an_idle_window_holds_smaller_ones_back(store: &dyn QuotaStore) {
        // 600 tokens a minute (10 a second), a burst of 100 (10 s) keeping a 200 ms guard.
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "claimed"), Limits::unlimited().with_rate(rate));
        let _small = store.reserve(&[d], Cost::request(10, 0), LEASE).await.unwrap();
        // The whole burst needs the window idle for the guard: 1.2 s away. Refused, it claims
        // that window...
        let wait = rejected(store.reserve(&[d], Cost::request(100, 0), LEASE).await).retry_after().unwrap();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_millis(1_200), "{wait:?}");
        // ...so a small one that would fit now waits until the claimer has passed (from the
        // bucket idle) and taken its 10 s, less the 9.7 s a small one may come early: about
        // 1.3 s (0.2 s early at most: the claimer waits for the guard too).
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 0), LEASE).await);
        assert_eq!(refusal.limiter.to_string(), "tpm");
        let behind = refusal.retry_after().unwrap();
        assert!(behind > Duration::from_millis(1_000) && behind <= Duration::from_millis(1_300), "{behind:?}");
        // The claimer passes once the window is idle, and the claim is gone with it: the
        // small one waits for what the claimer owes, as if there had been no claim.
        tokio::time::sleep(wait + Duration::from_millis(20)).await;
        let _whole = store.reserve(&[d], Cost::request(100, 0), LEASE).await.unwrap();
        let after = rejected(store.reserve(&[d], Cost::request(1, 0), LEASE).await).retry_after().unwrap();
        assert!(after > Duration::from_millis(150) && after <= Duration::from_millis(300), "{after:?}");
    }

    pub async fn a_claim_lives_no_longer_than_its_claimer_waits(store: &dyn QuotaStore) {
        // As above: 10 tokens a second, a burst of 100 with a 200 ms guard.
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "patient"), Limits::unlimited().with_rate(rate));
        let path = [d];
        let whole = |patience: Duration| Demand {
            patience: Some(patience),
            ..Demand::new(&path, Cost::request(100, 0), LEASE)
        };
        let _small = store.reserve(&[d], Cost::request(10, 0), LEASE).await.unwrap();
        // The window is idle in about 1.2 s: a claimer that waits only 0.5 s claims nothing,
        // so a small one passes at once.
        let wait = rejected(store.admit(whole(Duration::from_millis(500))).await).retry_after().unwrap();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_millis(1_200), "{wait:?}");
        let _passed = store.reserve(&[d], Cost::request(1, 0), LEASE).await.unwrap();
        // Now idle in about 1.3 s: one that waits 1.35 s claims it, and holds a small one
        // back until it stops waiting (not until it would have taken its step, about 1.4 s).
        let _ = rejected(store.admit(whole(Duration::from_millis(1_350))).await);
        let behind = rejected(store.reserve(&[d], Cost::request(1, 0), LEASE).await).retry_after().unwrap();
        assert!(behind > Duration::from_millis(1_200) && behind <= Duration::from_millis(1_350), "{behind:?}");
    }

    pub async fn a_claim_withdrawn_by_its_claimer_holds_nothing_back(store: &dyn QuotaStore) {
        // As above: 10 tokens a second, a burst of 100 with a 200 ms guard; a tenant's scope
        // on the path too (another group in a cluster), which holds no claim.
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 600).unwrap().with_burst(nz(100)).guarded();
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "withdrawn"), Limits::unlimited().with_rate(rate));
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "withdrawn"), tpm(600_000, 100_000));
        let path = [tenant, d];
        let claimer = sluice_quota::Claimer::new(0xF_FFFF_FFFF_FFF1);
        let whole = Demand {
            patience: Some(Duration::from_secs(30)),
            claimer,
            ..Demand::new(&path, Cost::request(100, 0), LEASE)
        };
        let _small = store.reserve(&path, Cost::request(10, 0), LEASE).await.unwrap();
        let _ = rejected(store.admit(whole).await);
        assert!(store.reserve(&path, Cost::request(1, 0), LEASE).await.is_err(), "claimed");
        // Another's withdrawal leaves the claim; its own frees the window's refill for the
        // small ones at once.
        store.withdraw(&path, sluice_quota::Claimer::new(0xF_FFFF_FFFF_FFF2)).await.unwrap();
        assert!(store.reserve(&path, Cost::request(1, 0), LEASE).await.is_err(), "still claimed");
        store.withdraw(&path, claimer).await.unwrap();
        let _passed = store.reserve(&path, Cost::request(1, 0), LEASE).await.unwrap();
    }

    pub async fn a_refusal_anywhere_debits_nothing_anywhere(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "aon"), tpm(600_000, 1_000));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "aon"), tpm(6_000_000, 100_000));
        let _grant = store.reserve(&[tenant, d], Cost::request(900, 0), LEASE).await.unwrap();
        let before = remaining(store, d).await;
        let refusal = rejected(store.reserve(&[tenant, d], Cost::request(900, 0), LEASE).await);
        assert_eq!(refusal.scope.kind, ScopeKind::Tenant);
        let after = remaining(store, d).await;
        assert!(after >= before, "the deployment was debited by a refused request: {before} -> {after}");
    }

    pub async fn settle_refunds_unused_capacity_once(store: &dyn QuotaStore) {
        // A refill of 1,000 tokens/s is slow enough to tell the 3,500-token refund from refill
        // even with a second of pauses between the calls.
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "refund"), tpm(60_000, 6_000));
        let grant = store.reserve(&[tenant], Cost::request(1_000, 4_000), LEASE).await.unwrap();
        assert!(remaining(store, tenant).await < 2_000);
        store.settle(grant.id, Settlement::exact(Cost::request(1_000, 500))).await.unwrap();
        let refunded = remaining(store, tenant).await;
        assert!((4_400..=5_500).contains(&refunded), "after refund: {refunded}");
        store.settle(grant.id, Settlement::exact(Cost::request(0, 0))).await.unwrap();
        let again = remaining(store, tenant).await;
        assert!(again <= refunded + 1_000, "a second settle refunded again: {refunded} -> {again}");
    }

    pub async fn deployment_scopes_settle_by_the_providers_rule(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "rule"), tpm(60_000, 6_000));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "rule"), tpm(60_000, 6_000));
        let grant = store.reserve(&[tenant, d], Cost::request(1_000, 4_000), LEASE).await.unwrap();
        let settlement = Settlement { used: Cost::request(1_000, 100), upstream: Cost::request(1_000, 4_000) };
        store.settle(grant.id, settlement).await.unwrap();
        let (t, u) = (remaining(store, tenant).await, remaining(store, d).await);
        assert!(t >= 4_900 && u <= 2_000, "tenant {t}, deployment {u}");
    }

    pub async fn overruns_become_debt(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "debt"), tpm(60_000, 1_000));
        let grant = store.reserve(&[tenant], Cost::request(100, 100), LEASE).await.unwrap();
        store.settle(grant.id, Settlement::exact(Cost::request(100, 3_100))).await.unwrap();
        let refusal = rejected(store.reserve(&[tenant], Cost::request(10, 0), LEASE).await);
        let wait = refusal.retry_after().unwrap();
        // 3,200 used of a 1,000 burst at 1,000 tokens/s: about 2.2 s of debt, less whatever
        // refilled while a busy machine paused between the calls.
        assert!(wait > Duration::from_millis(1_200) && wait < Duration::from_millis(2_300), "{wait:?}");
    }

    pub async fn never_fits_is_not_a_retry(store: &dyn QuotaStore) {
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "never"), tpm(4_000, 4_000));
        let refusal = rejected(store.reserve(&[d], Cost::request(10, 4_000), LEASE).await);
        assert!(matches!(refusal.kind, RejectionKind::NeverFits { capacity: 4_000, .. }), "{refusal:?}");
        assert_eq!(refusal.retry_after(), None);
    }

    pub async fn concurrency_slots_come_back_on_settle(store: &dyn QuotaStore) {
        let d =
            store.register(ScopeKey::new(ScopeKind::Deployment, "slots"), Limits::unlimited().with_concurrency(nz(2)));
        let a = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        let _b = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        assert_eq!(refusal.kind, RejectionKind::SlotsBusy);
        store.settle(a.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
    }

    /// 200 callers at once against 50 requests an hour: exactly 50 pass, however the store
    /// groups their decisions, and a refusal debits nothing.
    /// Whether a reservation of one request on `path` is granted: a store error (a call
    /// timed out on a busy machine) is asked again, since an unheard reservation is given
    /// back; only a refusal counts as one.
    async fn granted(store: &dyn QuotaStore, path: &[ScopeId]) -> bool {
        for _ in 0..5 {
            match store.reserve(path, Cost::request(1, 1), LEASE).await {
                Ok(_) => return true,
                Err(ReserveError::Rejected(_)) => return false,
                Err(ReserveError::Store(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        panic!("the store failed 5 times running");
    }

    pub async fn a_crowd_at_once_gets_exactly_the_limit(store: Arc<dyn QuotaStore>) {
        let hourly = RateLimit::new(Dimension::Requests, nz(50), Duration::from_secs(3600)).with_burst(nz(50));
        let t = store.register(ScopeKey::new(ScopeKind::Tenant, "crowd"), Limits::unlimited());
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "crowd"), Limits::unlimited().with_rate(hourly));
        let path = Arc::new([t, d]);
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let (store, path) = (Arc::clone(&store), Arc::clone(&path));
                tokio::spawn(async move { granted(&*store, &*path).await })
            })
            .collect();
        let mut admitted = 0;
        for task in tasks {
            admitted += u32::from(task.await.unwrap());
        }
        let left = remaining(&*store, d).await;
        assert_eq!((admitted, left), (50, 0), "admitted, and left on the deployment");
    }

    /// 40 callers loop on 5 slots, each holding its slot across a yield: nobody ever sees
    /// more than 5 holders, every refusal is for busy slots, and all slots come back.
    pub async fn a_crowd_never_holds_more_slots_than_the_cap(store: Arc<dyn QuotaStore>) {
        use std::sync::atomic::{AtomicU32, Ordering};
        let d = store
            .register(ScopeKey::new(ScopeKind::Deployment, "crowd-slots"), Limits::unlimited().with_concurrency(nz(5)));
        let holders = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..40)
            .map(|_| {
                let (store, holders, most) = (Arc::clone(&store), Arc::clone(&holders), Arc::clone(&most));
                tokio::spawn(async move {
                    let mut granted = 0;
                    for _ in 0..10 {
                        match store.reserve(&[d], Cost::request(1, 1), LEASE).await {
                            Ok(grant) => {
                                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                                most.fetch_max(now, Ordering::SeqCst);
                                tokio::task::yield_now().await;
                                holders.fetch_sub(1, Ordering::SeqCst);
                                store.settle(grant.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
                                granted += 1;
                            }
                            Err(e) => assert_eq!(rejected(Err(e)).kind, RejectionKind::SlotsBusy),
                        }
                    }
                    granted
                })
            })
            .collect();
        let mut granted = 0;
        for task in tasks {
            granted += task.await.unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 5, "{} holders at once", most.load(Ordering::SeqCst));
        assert!(granted >= 5, "only {granted} grants");
        assert_eq!(store.snapshot(d).await.unwrap().unwrap().in_flight, (0, Some(5)));
    }

    /// A caller's path: the org (limited to `org`), its tenant, team and key (the team and
    /// key kept beside the tenant, as the gateway keeps them), a model profile without
    /// limits and the deployment `d`.
    fn caller_path(store: &dyn QuotaStore, org: ScopeId, tenant: &str, key: Limits, d: ScopeId) -> [ScopeId; 6] {
        let t = store.register(ScopeKey::new(ScopeKind::Tenant, tenant), per_hour(1_000));
        let team = store.register(ScopeKey::new(ScopeKind::Team, format!("{tenant}/core")), per_hour(1_000));
        let k = store.register(ScopeKey::new(ScopeKind::ApiKey, format!("{tenant}-key")), key);
        store.keep_with(team, t);
        store.keep_with(k, t);
        let profile = store.register(ScopeKey::new(ScopeKind::ModelProfile, "spread"), Limits::unlimited());
        [org, t, team, k, profile, d]
    }

    /// Two tenants' callers at once against an org limit of 30 requests an hour: exactly 30
    /// pass, and each tenant's own buckets were debited for exactly its grants (each grant
    /// took every group of its path, each refusal none).
    pub async fn callers_of_two_tenants_at_once_get_exactly_the_org_limit(store: Arc<dyn QuotaStore>) {
        let org = store.register(ScopeKey::new(ScopeKind::Org, "spread"), per_hour(30));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "spread"), per_hour(1_000));
        let paths = Arc::new([
            caller_path(&*store, org, "acme", per_hour(1_000), d),
            caller_path(&*store, org, "globex", per_hour(1_000), d),
        ]);
        let tasks: Vec<_> = (0..120)
            .map(|i| {
                let (store, paths) = (Arc::clone(&store), Arc::clone(&paths));
                tokio::spawn(async move { (i % 2, granted(&*store, &paths[i % 2]).await) })
            })
            .collect();
        let mut admitted = [0_u64; 2];
        for task in tasks {
            let (tenant, ok) = task.await.unwrap();
            admitted[tenant] += u64::from(ok);
        }
        assert_eq!(admitted[0] + admitted[1], 30, "{admitted:?}");
        assert_eq!(remaining(&*store, org).await, 0);
        for (path, granted) in paths.iter().zip(admitted) {
            for &own in &path[1..4] {
                let left = remaining(&*store, own).await;
                // (A request refills in 3.6 s.)
                assert!((1_000 - granted..=1_001 - granted).contains(&left), "{left} left after {granted}");
            }
        }
    }

    /// A refusal by a tenant's key after the org (another group on a cluster) granted its
    /// part gives the org's part back: nothing stays debited anywhere.
    pub async fn a_refusal_by_a_key_gives_back_what_the_org_reserved(store: &dyn QuotaStore) {
        let org = store.register(ScopeKey::new(ScopeKind::Org, "give-back"), rpm(60, 50));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "give-back"), rpm(60, 50));
        let path = caller_path(store, org, "initech", rpm(60, 1), d);
        let _grant = store.reserve(&path, Cost::request(1, 0), LEASE).await.unwrap();
        let (org_before, d_before) = (remaining(store, org).await, remaining(store, d).await);
        for _ in 0..5 {
            let refusal = rejected(store.reserve(&path, Cost::request(1, 0), LEASE).await);
            assert_eq!(refusal.scope.kind, ScopeKind::ApiKey);
        }
        assert!(remaining(store, org).await >= org_before, "the org kept what refused requests reserved");
        assert!(remaining(store, d).await >= d_before, "the deployment was debited by refused requests");
        let other = caller_path(store, org, "hooli", rpm(60, 50), d);
        for _ in 0..org_before {
            let _grant = store.reserve(&other, Cost::request(1, 0), LEASE).await.unwrap();
        }
    }

    /// Renews `ids` every quarter of [`HEARTBEAT`] for `span`.
    async fn renewing(store: &dyn QuotaStore, ids: &[sluice_quota::ReservationId], span: Duration) {
        let end = tokio::time::Instant::now() + span;
        while tokio::time::Instant::now() < end {
            store.renew(ids).await.unwrap();
            tokio::time::sleep(HEARTBEAT / 4).await;
        }
    }

    fn one_slot(store: &dyn QuotaStore, name: &str, slots: u64) -> ScopeId {
        store.register(ScopeKey::new(ScopeKind::Deployment, name), Limits::unlimited().with_concurrency(nz(slots)))
    }

    /// A reservation whose holder renews it keeps its slot past the heartbeat, for as long
    /// as it is renewed (within its lease), and gives it back when settled.
    pub async fn a_renewed_reservation_outlives_its_heartbeat(store: &dyn QuotaStore) {
        let d = one_slot(store, "renewed", 1);
        let held = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        renewing(store, &[held.id], HEARTBEAT * 5 / 2).await;
        // This reservation's batch settles every expired lease first: the renewed one is not.
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        assert_eq!(refusal.kind, RejectionKind::SlotsBusy, "the renewed reservation lost its slot");
        assert_eq!(store.snapshot(d).await.unwrap().unwrap().in_flight.0, 1);
        store.settle(held.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
    }

    /// A reservation nobody renews (its holder died) is refunded once its heartbeat is
    /// over, long before its lease; a store without a heartbeat holds it its whole lease.
    pub async fn an_unrenewed_reservation_is_refunded_after_its_heartbeat(store: &dyn QuotaStore) {
        let d = one_slot(store, "unrenewed", 1);
        let _orphan = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        let heartbeat = store.heartbeat();
        tokio::time::sleep(heartbeat.unwrap_or(HEARTBEAT) + Duration::from_millis(500)).await;
        let next = store.reserve(&[d], Cost::request(1, 1), LEASE).await;
        if heartbeat.is_some() {
            let _grant = next.unwrap();
            assert_eq!(store.snapshot(d).await.unwrap().unwrap().in_flight.0, 1, "the orphan's slot is free");
        } else {
            assert_eq!(rejected(next).kind, RejectionKind::SlotsBusy, "without a heartbeat the lease runs whole");
        }
    }

    /// A renewal finds settled reservations gone and leaves them gone: neither one its
    /// holder settled nor one whose heartbeat ran out and a batch refunded; and the late
    /// settlement of the latter gives nothing back twice.
    pub async fn a_renewal_never_revives_a_settled_reservation(store: &dyn QuotaStore) {
        let d = one_slot(store, "revive", 2);
        let settled = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        store.settle(settled.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        let lapsed = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        store.renew(&[settled.id]).await.unwrap();
        let Some(heartbeat) = store.heartbeat() else {
            // No heartbeat: the second reservation holds its slot; one more fits.
            let a = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
            assert_eq!(rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await).kind, RejectionKind::SlotsBusy);
            for id in [lapsed.id, a.id] {
                store.settle(id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
            }
            return;
        };
        tokio::time::sleep(heartbeat + Duration::from_millis(500)).await;
        // Its batch refunds the lapsed reservation first.
        let a = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        store.renew(&[settled.id, lapsed.id]).await.unwrap();
        let b = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        assert_eq!(rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await).kind, RejectionKind::SlotsBusy);
        // Settled late, the lapsed reservation gives back nothing: both slots stay taken.
        store.settle(lapsed.id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        assert_eq!(refusal.kind, RejectionKind::SlotsBusy, "a renewal revived a refunded reservation");
        assert_eq!(store.snapshot(d).await.unwrap().unwrap().in_flight.0, 2);
        for id in [a.id, b.id] {
            store.settle(id, Settlement::exact(Cost::request(1, 1))).await.unwrap();
        }
    }

    pub async fn expired_leases_free_their_slots(store: &dyn QuotaStore) {
        let d =
            store.register(ScopeKey::new(ScopeKind::Deployment, "lease"), Limits::unlimited().with_concurrency(nz(1)));
        let _lost = store.reserve(&[d], Cost::request(1, 1), Duration::from_secs(1)).await.unwrap();
        rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
    }

    pub async fn a_lower_class_leaves_headroom_on_shared_scopes(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "share"), rpm(60, 10));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "share"), rpm(60, 10));
        let half = Share::permille(500);
        for _ in 0..5 {
            let _grant = store.reserve_share(&[tenant, d], Cost::request(1, 1), LEASE, half).await.unwrap();
        }
        let refusal = rejected(store.reserve_share(&[tenant, d], Cost::request(1, 1), LEASE, half).await);
        assert_eq!(refusal.scope.kind, ScopeKind::Deployment, "the tenant's own scope is not shared");
        for _ in 0..5 {
            let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
        }
        rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
    }

    pub async fn a_tenant_far_ahead_is_held_back_while_another_asks(store: &dyn QuotaStore) {
        // 600 RPM, burst 10: tenant a takes the burst, then b is refused and waits.
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "fair"), rpm(600, 10));
        let fair = |tenant: &str| {
            Some(FairShare { tenant: tenant.into(), weight: nz32(1), cost: 1_000, slack: 2_000, queued_behind: false })
        };
        let path = [d];
        let demand = |tenant: &str| Demand { fair: fair(tenant), ..Demand::new(&path, Cost::request(1, 0), LEASE) };
        for _ in 0..10 {
            let _grant = store.admit(demand("a")).await.unwrap();
        }
        assert_eq!(rejected(store.admit(demand("b")).await).limiter.to_string(), "rpm");
        // Four requests' worth refill; a may run at most its slack ahead of waiting b,
        // then it is held back while the bucket still has room...
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mut held = None;
        for _ in 0..4 {
            if let Err(e) = store.admit(demand("a")).await {
                held = Some(rejected(Err(e)));
                break;
            }
        }
        assert_eq!(held.expect("a was never held back").limiter.to_string(), "fair_share");
        // ...and that room is b's.
        let _grant = store.admit(demand("b")).await.unwrap();
    }

    /// Tenant a takes the burst, b is refused, then b is admitted once: with more of b
    /// queued behind (`queued_behind`), b still asks, and a, ahead again, is held back;
    /// without, a borrows on. Whether a's second request after b's admission passes.
    async fn a_runs_on_after_b_is_admitted(store: &dyn QuotaStore, name: &str, queued_behind: bool) -> bool {
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, name), rpm(600, 10));
        let share = |tenant: &str, queued_behind| {
            Some(FairShare { tenant: tenant.into(), weight: nz32(1), cost: 1_000, slack: 2_000, queued_behind })
        };
        let path = [d];
        let demand = |tenant: &str, behind| Demand {
            fair: share(tenant, behind),
            ..Demand::new(&path, Cost::request(1, 0), LEASE)
        };
        for _ in 0..10 {
            let _grant = store.admit(demand("a", false)).await.unwrap();
        }
        assert_eq!(rejected(store.admit(demand("b", false)).await).limiter.to_string(), "rpm");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let _grant = store.admit(demand("b", queued_behind)).await.unwrap();
        let _grant = store.admit(demand("a", false)).await.unwrap();
        match store.admit(demand("a", false)).await {
            Ok(_grant) => true,
            Err(e) => {
                assert_eq!(rejected(Err(e)).limiter.to_string(), "fair_share");
                false
            }
        }
    }

    pub async fn a_tenant_admitted_with_more_queued_behind_still_asks(store: &dyn QuotaStore) {
        assert!(!a_runs_on_after_b_is_admitted(store, "behind-yes", true).await, "b's queued line was ignored");
        assert!(a_runs_on_after_b_is_admitted(store, "behind-no", false).await, "a was held back for nobody");
    }

    /// Tenant b refused by its own limit cannot use the deployment's capacity, so it does
    /// not hold a runaway a back; refused by the deployment, it does.
    pub async fn only_a_refusal_by_a_shared_limit_makes_a_tenant_wait_for_its_share(store: &dyn QuotaStore) {
        let fair = |tenant: &str| {
            Some(FairShare { tenant: tenant.into(), weight: nz32(1), cost: 1_000, slack: 2_000, queued_behind: false })
        };
        for (name, own_limit) in [("own-refusal", true), ("shared-refusal", false)] {
            let d = store.register(ScopeKey::new(ScopeKind::Deployment, name), rpm(600, 10));
            let b_tenant = store.register(ScopeKey::new(ScopeKind::Tenant, name), rpm(1, 1));
            let (path_a, path_b) = ([d], [b_tenant, d]);
            let a = || Demand { fair: fair("a"), ..Demand::new(&path_a, Cost::request(1, 0), LEASE) };
            let b = || Demand { fair: fair("b"), ..Demand::new(&path_b, Cost::request(1, 0), LEASE) };
            if own_limit {
                // b spends its own single request; a then takes the rest of the burst.
                let _grant = store.admit(b()).await.unwrap();
                for _ in 0..9 {
                    let _grant = store.admit(a()).await.unwrap();
                }
                assert_eq!(rejected(store.admit(b()).await).scope.kind, ScopeKind::Tenant);
            } else {
                for _ in 0..10 {
                    let _grant = store.admit(a()).await.unwrap();
                }
                assert_eq!(rejected(store.admit(b()).await).scope.kind, ScopeKind::Deployment);
            }
            // The deployment refills; a, far ahead of b, asks twice.
            tokio::time::sleep(Duration::from_millis(400)).await;
            let mut refusals = Vec::new();
            for _ in 0..3 {
                if let Err(e) = store.admit(a()).await {
                    refusals.push(rejected(Err(e)).limiter.to_string());
                }
            }
            if own_limit {
                assert!(refusals.is_empty(), "a was held back for a tenant that could not go: {refusals:?}");
            } else {
                assert!(refusals.contains(&"fair_share".to_owned()), "a ran on past a waiting tenant: {refusals:?}");
            }
        }
    }

    pub async fn a_hold_refuses_until_released_and_holds_nobody_else_back(store: &dyn QuotaStore) {
        let held = store.register(ScopeKey::new(ScopeKind::Tenant, "hold-a"), rpm(6_000, 100));
        let other = store.register(ScopeKey::new(ScopeKind::Tenant, "hold-b"), rpm(6_000, 100));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "hold"), rpm(6_000, 100));
        let fair = |tenant: &str| {
            Some(FairShare { tenant: Arc::from(tenant), weight: nz32(1), cost: 1, slack: 1, queued_behind: false })
        };
        let (path_a, path_b) = ([held, d], [other, d]);
        let demand_a = || Demand { fair: fair("hold-a"), ..Demand::new(&path_a, Cost::request(1, 0), LEASE) };
        let demand_b = || Demand { fair: fair("hold-b"), ..Demand::new(&path_b, Cost::request(1, 0), LEASE) };
        store.hold(held, true).await.unwrap();
        assert!(store.snapshot(held).await.unwrap().unwrap().held);
        let refusal = rejected(store.admit(demand_a()).await);
        assert_eq!(refusal.limiter.to_string(), "paused");
        assert_eq!(refusal.scope, ScopeKey::new(ScopeKind::Tenant, "hold-a"));
        assert_eq!(refusal.retry_after(), Some(sluice_quota::HOLD_RETRY));
        // The held tenant asking over and over never makes the other one wait for it.
        for _ in 0..20 {
            let _refused = store.admit(demand_a()).await.unwrap_err();
            let _grant = store.admit(demand_b()).await.unwrap();
        }
        store.hold(held, false).await.unwrap();
        assert!(!store.snapshot(held).await.unwrap().unwrap().held);
        let _grant = store.admit(demand_a()).await.unwrap();
        // Releasing twice, or a scope never held, changes nothing.
        store.hold(held, false).await.unwrap();
        store.hold(other, false).await.unwrap();
        let _grant = store.admit(demand_b()).await.unwrap();
    }

    pub async fn a_pause_holds_everyone_until_it_ends(store: &dyn QuotaStore) {
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "pause"), rpm(6_000, 100));
        store.pause(d, Duration::from_millis(300)).await.unwrap();
        let refusal = rejected(store.reserve(&[d], Cost::request(1, 1), LEASE).await);
        assert_eq!(refusal.limiter.to_string(), "provider_cooldown");
        assert!(refusal.retry_after().unwrap() <= Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(350)).await;
        let _grant = store.reserve(&[d], Cost::request(1, 1), LEASE).await.unwrap();
    }

    pub async fn tighten_holds_a_bucket_to_the_providers_count(store: &dyn QuotaStore) {
        // 60,000 TPM with a 3,000 burst; the provider says only 500 are left.
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "tighten"), tpm(60_000, 3_000));
        let began = tokio::time::Instant::now();
        store.tighten(d, Dimension::TotalTokens, 500, None).await.unwrap();
        let left = remaining(store, d).await;
        // The bucket refills a token a millisecond between the two calls.
        let refilled = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
        assert!((400..=500 + refilled).contains(&left), "left {left} after {refilled} ms");
        let refusal = rejected(store.reserve(&[d], Cost::request(1_000, 0), LEASE).await);
        assert_eq!(refusal.limiter.to_string(), "tpm");
        // A looser report loosens nothing; another dimension touches nothing.
        store.tighten(d, Dimension::TotalTokens, 2_500, None).await.unwrap();
        store.tighten(d, Dimension::Requests, 0, None).await.unwrap();
        assert!(remaining(store, d).await <= left + 100);
        // The provider's reset bounds the hold: nothing left, but full again in 50 ms.
        let e = store.register(ScopeKey::new(ScopeKind::Deployment, "tighten-reset"), tpm(60_000, 3_000));
        store.tighten(e, Dimension::TotalTokens, 0, Some(Duration::from_millis(50))).await.unwrap();
        tokio::time::sleep(Duration::from_millis(80)).await;
        let _grant = store.reserve(&[e], Cost::request(2_900, 0), LEASE).await.unwrap();
    }

    /// Many scopes read at once, across groups and with an unknown one among them, are
    /// each what a read of that scope alone gives.
    pub async fn snapshots_of_many_scopes_match_each_read_alone(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "many"), rpm(30, 10));
        let key = store.register(ScopeKey::new(ScopeKind::ApiKey, "many"), tpm(60_000, 6_000));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "many"), rpm(600, 100).with_concurrency(nz(4)));
        let _grant = store.reserve(&[tenant, key, d], Cost::request(1_000, 2_000), LEASE).await.unwrap();
        let unknown = ScopeId(9_999);
        let many = store.snapshots(&[key, unknown, d, tenant]).await.unwrap();
        assert_eq!(many.len(), 4);
        assert!(many[1].is_none(), "an unknown scope reads as none");
        for (read, id) in [(&many[0], key), (&many[2], d), (&many[3], tenant)] {
            let read = read.as_ref().expect("a registered scope reads as some");
            let alone = store.snapshot(id).await.unwrap().unwrap();
            assert_eq!(read.key, alone.key);
            assert_eq!(read.in_flight, alone.in_flight);
            for (a, b) in read.rates.iter().zip(&alone.rates) {
                // Refill between the two reads: a few units at most.
                assert!(a.remaining <= b.remaining && b.remaining - a.remaining <= 200, "{a:?} vs {b:?}");
                assert_eq!((a.limit, a.burst), (b.limit, b.burst));
            }
        }
        let key_left = many[0].as_ref().unwrap().rates[0].remaining;
        assert!((3_000..3_500).contains(&key_left), "the key has 3,000 of 6,000 left, not {key_left}");
        assert_eq!(many[2].as_ref().unwrap().in_flight, (1, Some(4)));
        assert_eq!(many[3].as_ref().unwrap().rates[0].remaining, 9);
        assert!(store.snapshots(&[]).await.unwrap().is_empty());
    }

    /// Two instances that disagree on which limits a scope has (one reloaded, or changed
    /// by the admin API, the other not) take turns: each keeps what the other spent in the
    /// bucket they share, instead of finding it full.
    pub async fn a_change_of_which_limits_a_scope_has_keeps_each_bucket(store: &dyn QuotaStore) {
        let key = ScopeKey::new(ScopeKind::ApiKey, "relayout");
        let only_requests = rpm(60, 10);
        let tokens = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap().with_burst(nz(6_000));
        let with_tokens = rpm(60, 10).with_rate(tokens);
        let id = store.register(key.clone(), only_requests.clone());
        for turn in 0..6 {
            let limits = if turn % 2 == 0 { &only_requests } else { &with_tokens };
            assert_eq!(store.register(key.clone(), limits.clone()), id);
            let grant = store.reserve(&[id], Cost::request(100, 0), LEASE).await.unwrap();
            store.settle(grant.id, Settlement::exact(Cost::request(100, 0))).await.unwrap();
        }
        // Six of ten requests taken (one a second refills): no turn found the bucket full.
        let read = store.snapshot(id).await.unwrap().unwrap();
        assert_eq!(read.rates.len(), 2, "{read:?}");
        let requests = read.rates.iter().find(|r| r.limit == 60).unwrap().remaining;
        assert!(requests <= 5, "a change of limits gave the requests bucket back: {requests} left");
        let tokens_left = read.rates.iter().find(|r| r.limit == 60_000).unwrap().remaining;
        assert!(tokens_left < 6_000, "the last turn's tokens are counted: {tokens_left}");

        // A reservation made before the change is settled after it: its unused tokens go
        // back to the tokens bucket, wherever that bucket now sits among the limits.
        let key = ScopeKey::new(ScopeKind::ApiKey, "relayout-settle");
        let id = store.register(key.clone(), with_tokens.clone());
        let grant = store.reserve(&[id], Cost::request(0, 3_000), LEASE).await.unwrap();
        let day = RateLimit::new(Dimension::Requests, nz(100_000), Duration::from_secs(86_400));
        store.register(key, Limits::unlimited().with_rate(tokens).with_rate(day));
        // A reservation under the new limits writes the scope in their layout first.
        let newer = store.reserve(&[id], Cost::request(0, 0), LEASE).await.unwrap();
        store.settle(grant.id, Settlement::exact(Cost::request(0, 0))).await.unwrap();
        store.settle(newer.id, Settlement::exact(Cost::request(0, 0))).await.unwrap();
        let read = store.snapshot(id).await.unwrap().unwrap();
        let tokens_left = read.rates.iter().find(|r| r.limit == 60_000).unwrap().remaining;
        assert!(tokens_left >= 5_900, "the unused 3,000 tokens did not come back: {tokens_left}");
    }

    /// Asked to, a remote store returns the caller's own scopes of the path with each grant,
    /// as a read right after would show them (the rate-limit headers need no read of their
    /// own); unasked, or in process, a grant carries none.
    pub async fn a_grant_reports_the_callers_own_scopes_as_a_read_would_show_them(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "after"), rpm(30, 10));
        let team = store.register(ScopeKey::new(ScopeKind::Team, "after"), Limits::unlimited());
        let key = store.register(ScopeKey::new(ScopeKind::ApiKey, "after"), tpm(60_000, 6_000).with_concurrency(nz(4)));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "after"), rpm(600, 100));
        let path = [tenant, team, key, d];
        let cost = Cost::request(1_000, 2_000);
        let reported = |path| Demand { report_own: true, ..Demand::new(path, cost, LEASE) };
        let unasked = store.reserve(&path, cost, LEASE).await.unwrap();
        assert!(unasked.after.is_empty(), "{:?}", unasked.after);
        store.settle(unasked.id, Settlement::exact(cost)).await.unwrap();
        let first = store.admit(reported(&path)).await.unwrap();
        if store.reads_in_process() {
            assert!(first.after.is_empty(), "{:?}", first.after);
            store.settle(first.id, Settlement::exact(cost)).await.unwrap();
            return;
        }
        let of = |after: &[ScopeSnapshot], kind| after.iter().find(|s| s.key.kind == kind).cloned().unwrap();
        // The tenant, team and key; the deployment is everyone's.
        assert_eq!(first.after.len(), 3, "{:?}", first.after);
        for (&id, kind) in path.iter().zip([ScopeKind::Tenant, ScopeKind::Team, ScopeKind::ApiKey]) {
            let granted = of(&first.after, kind);
            let read = store.snapshot(id).await.unwrap().unwrap();
            assert_eq!((&granted.key, granted.in_flight, granted.held), (&read.key, read.in_flight, read.held));
            assert_eq!(granted.rates.len(), read.rates.len());
            for (a, b) in granted.rates.iter().zip(&read.rates) {
                // Refill between the grant and the read: a few units at most.
                assert!(a.remaining <= b.remaining && b.remaining - a.remaining <= 200, "{a:?} vs {b:?}");
                assert_eq!((a.limiter, a.limit, a.burst), (b.limiter, b.limit, b.burst));
            }
        }
        // At the grant's instant: the burst less the two requests (the unasked one too).
        let tenant_left = of(&first.after, ScopeKind::Tenant).rates[0].remaining;
        assert!(tenant_left == 8 || tenant_left == 9, "two of ten taken, a second at most refilled: {tenant_left}");
        let key_left = of(&first.after, ScopeKind::ApiKey).rates[0].remaining;
        assert!(key_left <= 3_000, "6,000 less this request's 3,000 is not {key_left}");
        assert_eq!(of(&first.after, ScopeKind::ApiKey).in_flight, (1, Some(4)));
        assert!(of(&first.after, ScopeKind::Team).rates.is_empty());
        store.settle(first.id, Settlement::exact(cost)).await.unwrap();
        // Reservations in flight together share scripts, and a run of them may be granted
        // at once: each still carries the state, counting itself and those before it, and
        // the last one granted sees them all.
        let wide =
            store.register(ScopeKey::new(ScopeKind::ApiKey, "after-wide"), rpm(6_000, 1_000).with_concurrency(nz(64)));
        let wide = [wide];
        let together = (0..12).map(|_| store.admit(Demand { cost: Cost::request(0, 0), ..reported(&wide) }));
        let grants: Vec<_> = futures_util::future::join_all(together).await.into_iter().map(Result::unwrap).collect();
        let seen: Vec<u64> = grants.iter().map(|g| of(&g.after, ScopeKind::ApiKey).in_flight.0).collect();
        assert!(seen.iter().all(|n| (1..=12).contains(n)) && seen.contains(&12), "in flight per grant: {seen:?}");
        let least = grants.iter().map(|g| of(&g.after, ScopeKind::ApiKey).rates[0].remaining).min();
        // (100 requests a second refill: a few while the twelve are decided; uncounted
        // grants would leave about 1,000.)
        assert!(least.is_some_and(|n| (988..=996).contains(&n)), "1,000 less 12: {least:?}");
        for grant in grants {
            store.settle(grant.id, Settlement::exact(grant.reserved)).await.unwrap();
        }
    }

    /// A tenant's daily money budget, with a deployment of its own group on a cluster: of
    /// a crowd at once exactly what the budget holds passes, the rest is refused while those
    /// are in flight; settlements refund and over-charge; above the whole budget never fits;
    /// a refusal by the deployment gives the budget back; the next day starts from zero.
    pub async fn a_daily_budget_admits_exactly_what_it_holds(store: &dyn QuotaStore) {
        let budget = Budget { period: BudgetPeriod::Day, amount: nz(1_000_000) };
        let tenant =
            store.register(ScopeKey::new(ScopeKind::Tenant, "budget"), Limits::unlimited().with_budget(budget));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "budget"), rpm(6_000, 1_000));
        let path = [tenant, d];
        let today = Calendar::at(BUDGET_NOW, 0);
        let priced = |micros| Cost::request(10, 10).with_money(micros);
        let demand = |micros, calendar| Demand { calendar, ..Demand::new(&path, priced(micros), LEASE) };
        let crowd = (0..12).map(|_| store.admit(demand(300_000, today)));
        let results = futures_util::future::join_all(crowd).await;
        let (granted, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        assert_eq!(granted.len(), 3, "0.30 each: three of 1.00");
        for refusal in refused {
            let r = rejected(refusal);
            assert_eq!((r.limiter, r.scope.kind), (LimiterName::Budget, ScopeKind::Tenant));
            assert_eq!(r.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY), "held by the three in flight");
        }
        let grants: Vec<_> = granted.into_iter().map(Result::unwrap).collect();
        // The first cost nothing in the end: 0.30 back; the second 0.40: 0.10 more. 0.70
        // spent, 0.30 left.
        store.settle(grants[0].id, Settlement::exact(priced(0))).await.unwrap();
        store.settle(grants[1].id, Settlement::exact(priced(400_000))).await.unwrap();
        let fourth = store.admit(demand(300_000, today)).await.unwrap();
        // Every store shows what was spent, in which period.
        let shown = store.snapshot(tenant).await.unwrap().unwrap().budgets;
        assert_eq!(shown.len(), 1);
        assert_eq!((shown[0].limit, shown[0].spent.in_period(today.day.id)), (1_000_000, 1_000_000));
        assert_eq!(rejected(store.admit(demand(1, today)).await).limiter, LimiterName::Budget);
        // Settling again changes nothing.
        store.settle(grants[0].id, Settlement::exact(priced(0))).await.unwrap();
        assert_eq!(rejected(store.admit(demand(1, today)).await).limiter, LimiterName::Budget);
        // A request without a price is never refused by a budget.
        let free = store.admit(demand(0, today)).await.unwrap();
        let never = rejected(store.admit(demand(1_000_001, today)).await);
        assert_eq!(never.limiter, LimiterName::Budget);
        assert_eq!(never.kind, RejectionKind::NeverFits { cost: 1_000_001, capacity: 1_000_000 });
        // Tomorrow starts from zero; a refusal by the deployment charges nothing.
        let tomorrow = Calendar::at(BUDGET_NOW + 86_400, 0);
        let full = store.register(ScopeKey::new(ScopeKind::Deployment, "budget-full"), rpm(60, 1));
        let blocked = [tenant, full];
        let filler = store.reserve(&[full], Cost::request(0, 0), LEASE).await.unwrap();
        let refused = store.admit(Demand { calendar: tomorrow, ..Demand::new(&blocked, priced(600_000), LEASE) }).await;
        assert_ne!(rejected(refused).limiter, LimiterName::Budget);
        let next_day = store.admit(demand(1_000_000, tomorrow)).await.unwrap();
        for grant in [fourth, free, filler, next_day] {
            store.settle(grant.id, Settlement::exact(grant.reserved)).await.unwrap();
        }
    }

    /// A caller whose clock is a day behind (its calendar names yesterday) is charged to the
    /// period the store already counts, and never starts its own again: what today spent
    /// stays spent.
    pub async fn a_caller_whose_clock_is_behind_never_starts_its_period_again(store: &dyn QuotaStore) {
        let budget = Budget { period: BudgetPeriod::Day, amount: nz(1_000_000) };
        let tenant =
            store.register(ScopeKey::new(ScopeKind::Tenant, "behind"), Limits::unlimited().with_budget(budget));
        let path = [tenant];
        let (today, yesterday) = (Calendar::at(BUDGET_NOW, 0), Calendar::at(BUDGET_NOW - 86_400, 0));
        let priced = |micros| Cost::request(10, 10).with_money(micros);
        let demand = |micros, calendar| Demand { calendar, ..Demand::new(&path, priced(micros), LEASE) };
        let first = store.admit(demand(600_000, today)).await.unwrap();
        store.settle(first.id, Settlement::exact(priced(600_000))).await.unwrap();
        // Yesterday's caller sees today's 0.60: 0.50 more does not fit, 0.40 does.
        assert_eq!(rejected(store.admit(demand(500_000, yesterday)).await).limiter, LimiterName::Budget);
        let behind = store.admit(demand(400_000, yesterday)).await.unwrap();
        let shown = store.snapshot(tenant).await.unwrap().unwrap().budgets;
        assert_eq!(shown[0].spent.period, today.day.id, "the period kept did not go back");
        assert_eq!(shown[0].spent.in_period(today.day.id), 1_000_000, "charged to today");
        assert_eq!(rejected(store.admit(demand(1, today)).await).limiter, LimiterName::Budget);
        store.settle(behind.id, Settlement::exact(behind.reserved)).await.unwrap();
        // Tomorrow's caller starts tomorrow, once; yesterday's then counts in it.
        let tomorrow = Calendar::at(BUDGET_NOW + 86_400, 0);
        let next = store.admit(demand(700_000, tomorrow)).await.unwrap();
        assert_eq!(rejected(store.admit(demand(400_000, yesterday)).await).limiter, LimiterName::Budget);
        store.settle(next.id, Settlement::exact(next.reserved)).await.unwrap();
    }

    /// period: every store shows what is held, a settlement below its reservation gives
    /// back the difference and the hold, and an expired lease leaves its money spent but
    /// no longer held. Only a budget spent for good waits for the next day.
    pub async fn a_budget_held_by_reservations_in_flight_refuses_for_a_moment(store: &dyn QuotaStore) {
        let budget = Budget { period: BudgetPeriod::Day, amount: nz(1_000_000) };
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "held"), Limits::unlimited().with_budget(budget));
        let d = store.register(ScopeKey::new(ScopeKind::Deployment, "held"), rpm(6_000, 1_000));
        let path = [tenant, d];
        let today = Calendar::at(BUDGET_NOW, 0);
        let priced = |micros| Cost::request(10, 10).with_money(micros);
        let demand = |micros, lease| Demand { calendar: today, ..Demand::new(&path, priced(micros), lease) };
        let shown = || async {
            let spent = store.snapshot(tenant).await.unwrap().unwrap().budgets[0].spent;
            (spent.in_period(today.day.id), spent.held_in(today.day.id))
        };
        // Two streams reserve 0.40 each; the second is lost (its lease is short).
        let stream = store.admit(demand(400_000, LEASE)).await.unwrap();
        let _lost = store.admit(demand(400_000, Duration::from_secs(1))).await.unwrap();
        assert_eq!(shown().await, (800_000, 800_000));
        let held = rejected(store.admit(demand(300_000, LEASE)).await);
        assert_eq!((held.limiter, held.scope.kind), (LimiterName::Budget, ScopeKind::Tenant));
        assert_eq!(held.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
        assert_eq!(held.retry_after(), Some(Duration::from_secs(1)), "a moment, not the day's end");
        // The stream used 0.05 of its 0.40: 0.45 spent, 0.40 held, and 0.30 more fits.
        store.settle(stream.id, Settlement::exact(priced(50_000))).await.unwrap();
        assert_eq!(shown().await, (450_000, 400_000));
        let third = store.admit(demand(300_000, LEASE)).await.unwrap();
        assert_eq!(shown().await, (750_000, 700_000));
        let held = rejected(store.admit(demand(300_000, LEASE)).await);
        assert_eq!(held.kind, RejectionKind::InFlight(IN_FLIGHT_RETRY));
        // The lost one's lease runs out: its 0.40 stays spent (it may have reached the
        // provider) but is no longer held. The third uses all it reserved: 0.75 spent,
        // nothing held, and 0.30 more waits for the next day.
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        store.settle(third.id, Settlement::exact(priced(300_000))).await.unwrap();
        let spent = rejected(store.admit(demand(300_000, LEASE)).await);
        assert_eq!((spent.limiter, spent.scope.kind), (LimiterName::Budget, ScopeKind::Tenant));
        assert_eq!(spent.kind, RejectionKind::RetryAfter(today.day.reset));
        assert_eq!(shown().await, (750_000, 0));
        let rest = store.admit(demand(250_000, LEASE)).await.unwrap();
        store.settle(rest.id, Settlement::exact(rest.reserved)).await.unwrap();
    }
    /// One request on each of `paths`, a pool's members in order.
    fn pool_demands(paths: &[[ScopeId; 2]], cost: Cost) -> Vec<Demand<'_>> {
        paths.iter().map(|path| Demand::new(path, cost, LEASE)).collect()
    }

    fn first_refusal(result: Result<(usize, sluice_quota::Grant), ReserveError>) -> sluice_quota::Rejection {
        match result {
            Err(ReserveError::Rejected(r)) => r,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    pub async fn a_pool_admits_on_the_first_member_that_passes(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "pool-t"), per_hour(10));
        let a = store.register(ScopeKey::new(ScopeKind::Deployment, "pool-a"), per_hour(1));
        let b = store.register(ScopeKey::new(ScopeKind::Deployment, "pool-b"), per_hour(2));
        let paths = [[tenant, a], [tenant, b]];
        let one = Cost::request(1, 1);
        let (first, grant) = store.admit_first(pool_demands(&paths, one)).await.unwrap();
        assert_eq!((first, grant.reserved), (0, one));
        // The first member is full: skipped, with nothing taken from it or given to it.
        assert_eq!(store.admit_first(pool_demands(&paths, one)).await.unwrap().0, 1);
        assert_eq!(store.admit_first(pool_demands(&paths, one)).await.unwrap().0, 1);
        let refusal = first_refusal(store.admit_first(pool_demands(&paths, one)).await);
        // Two an hour refill one in half an hour, one an hour only in an hour.
        assert_eq!(refusal.scope, ScopeKey::new(ScopeKind::Deployment, "pool-b"));
        let wait = refusal.retry_after().unwrap();
        assert!(wait > Duration::from_secs(1_700) && wait <= Duration::from_secs(1_800), "{wait:?}");
        // The caller's own scope was charged once per grant, never for a refused member.
        assert_eq!((remaining(store, a).await, remaining(store, b).await, remaining(store, tenant).await), (0, 0, 7));
        store.settle(grant.id, Settlement::exact(one)).await.unwrap();
    }

    pub async fn a_pool_refused_everywhere_answers_the_soonest_refusal(store: &dyn QuotaStore) {
        let tenant = store.register(ScopeKey::new(ScopeKind::Tenant, "soon-t"), Limits::unlimited());
        // 4,000 tokens never fit into 1,000 a minute.
        let never = store.register(ScopeKey::new(ScopeKind::Deployment, "soon-never"), tpm(1_000, 1_000));
        let late = store.register(ScopeKey::new(ScopeKind::Deployment, "soon-late"), per_hour(1));
        let soon = store.register(ScopeKey::new(ScopeKind::Deployment, "soon-soon"), rpm(60, 1));
        let busy = store
            .register(ScopeKey::new(ScopeKind::Deployment, "soon-busy"), Limits::unlimited().with_concurrency(nz(1)));
        let cost = Cost::request(10, 3_990);
        for d in [late, soon, busy] {
            let _held = store.reserve(&[tenant, d], cost, LEASE).await.unwrap();
        }
        let refusal = |members: &[ScopeId]| {
            let paths: Vec<[ScopeId; 2]> = members.iter().map(|&d| [tenant, d]).collect();
            async move { first_refusal(store.admit_first(pool_demands(&paths, cost)).await) }
        };
        let alone = refusal(&[never]).await;
        assert!(matches!(alone.kind, RejectionKind::NeverFits { capacity: 1_000, .. }), "{alone:?}");
        // A member the cost never fits does not hide another's wait, however long.
        let late_wait = refusal(&[never, late]).await;
        assert_eq!(late_wait.scope, ScopeKey::new(ScopeKind::Deployment, "soon-late"));
        assert!(late_wait.retry_after().unwrap() > Duration::from_secs(3_500), "{late_wait:?}");
        // The sooner wait wins, in any order.
        for members in [[never, late, soon], [soon, late, never]] {
            let refused = refusal(&members).await;
            assert_eq!(refused.scope, ScopeKey::new(ScopeKind::Deployment, "soon-soon"), "{members:?}");
            assert!(refused.retry_after().unwrap() <= Duration::from_secs(1), "{refused:?}");
        }
        // A busy slot may free at any moment: it counts as the soonest.
        let slot = refusal(&[late, busy, soon]).await;
        assert_eq!((&*slot.scope.name, slot.kind), ("soon-busy", RejectionKind::SlotsBusy));
    }
}

macro_rules! conformance {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use super::*;

            async fn run<F: std::future::Future<Output = ()>>(case: impl FnOnce(Arc<dyn QuotaStore>) -> F) {
                let backend = $make(None);
                case(Arc::clone(&backend.store)).await;
            }

            /// A case on the store kept a heartbeat at a time (where the store has one).
            async fn run_heartbeat<F: std::future::Future<Output = ()>>(
                case: impl FnOnce(Arc<dyn QuotaStore>) -> F,
            ) {
                let backend = $make(Some(HEARTBEAT));
                case(Arc::clone(&backend.store)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_renewed_reservation_outlives_its_heartbeat() {
                run_heartbeat(|s| async move { cases::a_renewed_reservation_outlives_its_heartbeat(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_unrenewed_reservation_is_refunded_after_its_heartbeat() {
                run_heartbeat(|s| async move {
                    cases::an_unrenewed_reservation_is_refunded_after_its_heartbeat(&*s).await;
                })
                .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_renewal_never_revives_a_settled_reservation() {
                run_heartbeat(|s| async move { cases::a_renewal_never_revives_a_settled_reservation(&*s).await })
                    .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn burst_then_paced_refusal_passes_at_retry_after() {
                run(|s| async move { cases::burst_then_paced_refusal_passes_at_retry_after(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_guarded_bucket_sends_a_whole_burst_only_into_an_idle_window() {
                run(|s| async move { cases::a_guarded_bucket_sends_a_whole_burst_only_into_an_idle_window(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_request_waiting_for_an_idle_window_holds_smaller_ones_back() {
                run(|s| async move { cases::a_request_waiting_for_an_idle_window_holds_smaller_ones_back(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_claim_lives_no_longer_than_its_claimer_waits() {
                run(|s| async move { cases::a_claim_lives_no_longer_than_its_claimer_waits(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_claim_withdrawn_by_its_claimer_holds_nothing_back() {
                run(|s| async move { cases::a_claim_withdrawn_by_its_claimer_holds_nothing_back(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_request_sent_late_reanchors_the_window_at_its_send() {
                run(|s| async move { cases::a_request_sent_late_reanchors_the_window_at_its_send(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_refusal_anywhere_debits_nothing_anywhere() {
                run(|s| async move { cases::a_refusal_anywhere_debits_nothing_anywhere(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn settle_refunds_unused_capacity_once() {
                run(|s| async move { cases::settle_refunds_unused_capacity_once(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deployment_scopes_settle_by_the_providers_rule() {
                run(|s| async move { cases::deployment_scopes_settle_by_the_providers_rule(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn overruns_become_debt() {
                run(|s| async move { cases::overruns_become_debt(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn never_fits_is_not_a_retry() {
                run(|s| async move { cases::never_fits_is_not_a_retry(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrency_slots_come_back_on_settle() {
                run(|s| async move { cases::concurrency_slots_come_back_on_settle(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_crowd_at_once_gets_exactly_the_limit() {
                run(cases::a_crowd_at_once_gets_exactly_the_limit).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_crowd_never_holds_more_slots_than_the_cap() {
                run(cases::a_crowd_never_holds_more_slots_than_the_cap).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn callers_of_two_tenants_at_once_get_exactly_the_org_limit() {
                run(cases::callers_of_two_tenants_at_once_get_exactly_the_org_limit).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_refusal_by_a_key_gives_back_what_the_org_reserved() {
                run(|s| async move { cases::a_refusal_by_a_key_gives_back_what_the_org_reserved(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn expired_leases_free_their_slots() {
                run(|s| async move { cases::expired_leases_free_their_slots(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_lower_class_leaves_headroom_on_shared_scopes() {
                run(|s| async move { cases::a_lower_class_leaves_headroom_on_shared_scopes(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_tenant_far_ahead_is_held_back_while_another_asks() {
                run(|s| async move { cases::a_tenant_far_ahead_is_held_back_while_another_asks(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_tenant_admitted_with_more_queued_behind_still_asks() {
                run(|s| async move { cases::a_tenant_admitted_with_more_queued_behind_still_asks(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn only_a_refusal_by_a_shared_limit_makes_a_tenant_wait_for_its_share() {
                run(|s| async move { cases::only_a_refusal_by_a_shared_limit_makes_a_tenant_wait_for_its_share(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_hold_refuses_until_released_and_holds_nobody_else_back() {
                run(|s| async move { cases::a_hold_refuses_until_released_and_holds_nobody_else_back(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_pause_holds_everyone_until_it_ends() {
                run(|s| async move { cases::a_pause_holds_everyone_until_it_ends(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn snapshots_of_many_scopes_match_each_read_alone() {
                run(|s| async move { cases::snapshots_of_many_scopes_match_each_read_alone(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_change_of_which_limits_a_scope_has_keeps_each_bucket() {
                run(|s| async move { cases::a_change_of_which_limits_a_scope_has_keeps_each_bucket(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_grant_reports_the_callers_own_scopes_as_a_read_would_show_them() {
                run(|s| async move {
                    cases::a_grant_reports_the_callers_own_scopes_as_a_read_would_show_them(&*s).await;
                })
                .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_daily_budget_admits_exactly_what_it_holds() {
                run(|s| async move { cases::a_daily_budget_admits_exactly_what_it_holds(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_caller_whose_clock_is_behind_never_starts_its_period_again() {
                run(|s| async move { cases::a_caller_whose_clock_is_behind_never_starts_its_period_again(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_budget_held_by_reservations_in_flight_refuses_for_a_moment() {
                run(|s| async move { cases::a_budget_held_by_reservations_in_flight_refuses_for_a_moment(&*s).await })
                    .await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_pool_admits_on_the_first_member_that_passes() {
                run(|s| async move { cases::a_pool_admits_on_the_first_member_that_passes(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_pool_refused_everywhere_answers_the_soonest_refusal() {
                run(|s| async move { cases::a_pool_refused_everywhere_answers_the_soonest_refusal(&*s).await }).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn tighten_holds_a_bucket_to_the_providers_count() {
                run(|s| async move { cases::tighten_holds_a_bucket_to_the_providers_count(&*s).await }).await;
            }
        }
    };
}

conformance!(memory_store, memory);
conformance!(redis_standalone, standalone);
conformance!(redis_cluster, cluster);
conformance!(redis_tls, standalone_tls);
conformance!(redis_sentinel, sentinel);
