//! Admissions per second through [`RedisStore`] against local `redis-server` processes:
//! a standalone server and a 3-master cluster. One admission is a reserve on a 6-level path
//! (org, tenant, team, key, profile, deployment), 4 dimensions each (requests, input,
//! output and total tokens), asking for the caller's own scopes back with the grant (the
//! rate-limit headers), then its settlement with the real usage, as the gateway does.
//! `IN_FLIGHT` tasks on a multi-thread runtime run admissions back to back for a bounded
//! time; each admission's latency is recorded. Redis' `INFO commandstats` separates the
//! server's time from the client's.
//!
//! Then the same with many tenants (the third argument, default 100): each its own
//! tenant, team and key, the org and the profile without limits (left off the path on a
//! cluster) and the tenants spread over 10 deployments; on the cluster also with a
//! deployment per tenant, and with an org limit (the org's one slot in every path). For every multi-server case it prints each
//! master's share of the scripts' calls and server time (`INFO commandstats`, reset after
//! the warm-up).
//!
//! `cargo bench -p sluice-redis --bench admissions [-- SECONDS [IN_FLIGHT [TENANTS]]]`
//! (default 5 s per case, 64 in flight, 100 tenants).
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark prints its figures and fails loudly"
)]

use std::sync::Arc;
use std::time::Duration;

use sluice_quota::{Cost, Demand, Dimension, Limits, QuotaStore, RateLimit, ScopeId, ScopeKey, ScopeKind, Settlement};
use sluice_redis::local::{LocalCluster, LocalRedis};
use sluice_redis::{RedisConfig, RedisStore, Tls, Topology};
use tokio::time::Instant;

/// Concurrent admission loops, unless the second argument says otherwise.
const IN_FLIGHT: usize = 64;
/// Most admissions one loop makes, whatever the time left.
const MAX_PER_TASK: usize = 1_000_000;
const LEASE: Duration = Duration::from_secs(60);
const PATH: [ScopeKind; 6] = [
    ScopeKind::Org,
    ScopeKind::Tenant,
    ScopeKind::Team,
    ScopeKind::ApiKey,
    ScopeKind::ModelProfile,
    ScopeKind::Deployment,
];

/// Limits high enough never to refuse: every admission runs the whole script.
fn limits() -> Limits {
    Dimension::ALL
        .into_iter()
        .fold(Limits::unlimited(), |l, d| l.with_rate(RateLimit::per_minute(d, 1_000_000_000_000).unwrap()))
}

/// Deployments the tenants of the many-tenant cases are spread over (unless each has its own).
const DEPLOYMENTS: usize = 10;

/// Who the admissions come from.
#[derive(Debug, Clone, Copy)]
enum Callers {
    /// One tenant, limits on all six levels (its team and key kept beside it).
    One,
    /// `tenants` tenants (each with a team and a key kept beside it) over `deployments`
    /// deployments; the org limited or not, the profile not.
    Many { tenants: usize, deployments: usize, org_limited: bool },
}

/// Every caller's path.
fn register(store: &RedisStore, callers: Callers) -> Vec<Vec<ScopeId>> {
    let name = |kind: ScopeKind, i: usize| ScopeKey::new(kind, format!("bench-{}-{i}", kind.as_str()));
    let Callers::Many { tenants, deployments, org_limited } = callers else {
        let path: Vec<ScopeId> = PATH.iter().map(|kind| store.register(name(*kind, 0), limits())).collect();
        store.keep_with(path[2], path[1]);
        store.keep_with(path[3], path[1]);
        return vec![path];
    };
    let org = store.register(name(ScopeKind::Org, 0), if org_limited { limits() } else { Limits::unlimited() });
    let profile = store.register(name(ScopeKind::ModelProfile, 0), Limits::unlimited());
    (0..tenants)
        .map(|i| {
            let tenant = store.register(name(ScopeKind::Tenant, i), limits());
            let team = store.register(name(ScopeKind::Team, i), limits());
            let key = store.register(name(ScopeKind::ApiKey, i), limits());
            store.keep_with(team, tenant);
            store.keep_with(key, tenant);
            let deployment = store.register(name(ScopeKind::Deployment, i % deployments), limits());
            vec![org, tenant, team, key, profile, deployment]
        })
        .collect()
}

async fn admit(store: &RedisStore, path: &[ScopeId]) {
    let demand = Demand { report_own: true, ..Demand::new(path, Cost::request(120, 256), LEASE) };
    let grant = store.admit(demand).await.unwrap();
    store.settle(grant.id, Settlement::exact(Cost::request(120, 180))).await.unwrap();
}

/// Runs the loops for `run`; returns every admission's latency and the wall time.
/// Loop `t` takes the paths in turn from the `t`-th on.
async fn drive(
    store: Arc<RedisStore>,
    paths: Arc<Vec<Vec<ScopeId>>>,
    run: Duration,
    in_flight: usize,
) -> (Vec<Duration>, Duration) {
    let start = Instant::now();
    let end = start + run;
    let tasks: Vec<_> = (0..in_flight)
        .map(|t| {
            let (store, paths) = (Arc::clone(&store), Arc::clone(&paths));
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while latencies.len() < MAX_PER_TASK {
                    let began = Instant::now();
                    if began >= end {
                        break;
                    }
                    admit(&store, &paths[(t + latencies.len()) % paths.len()]).await;
                    latencies.push(began.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    (all, start.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// Script calls and server microseconds from `INFO commandstats`, summed over `urls`.
fn server_time(urls: &[String]) -> (u64, u64) {
    per_server(urls).into_iter().fold((0, 0), |(c, u), (calls, usec)| (c + calls, u + usec))
}

/// Script calls and server microseconds from `INFO commandstats`, per server of `urls`.
fn per_server(urls: &[String]) -> Vec<(u64, u64)> {
    let mut all = Vec::new();
    for url in urls {
        let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).unwrap();
        let mut total = (0, 0);
        for line in info.lines().filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:")) {
            let field = |name: &str| -> u64 {
                line.split([':', ',']).find_map(|kv| kv.strip_prefix(name)?.parse().ok()).unwrap_or(0)
            };
            total.0 += field("calls=");
            total.1 += field("usec=");
        }
        all.push(total);
    }
    all
}

/// Each server's calls and server time, and its share of all of them.
fn spread(urls: &[String]) -> String {
    let servers = per_server(urls);
    let (calls, usec) = servers.iter().fold((0, 0), |(c, u), (calls, usec)| (c + calls, u + usec));
    let share = |part: u64, all: u64| 100.0 * part as f64 / all.max(1) as f64;
    servers
        .iter()
        .enumerate()
        .map(|(i, (c, u))| {
            format!("master {}: {c} calls ({:.1} %), {u} µs ({:.1} %)", i + 1, share(*c, calls), share(*u, usec))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn reset_stats(urls: &[String]) {
    for url in urls {
        let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        let () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut conn).unwrap();
    }
}

/// Inner commands the scripts ran, per admission (`INFO commandstats`, Redis 7 counts them).
fn inner_commands(urls: &[String], admissions: usize) -> String {
    let mut counts: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
    for url in urls {
        let mut conn = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn).unwrap();
        for line in info.lines() {
            let Some((name, rest)) = line.strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) else { continue };
            let field =
                |f: &str| -> u64 { rest.split(',').find_map(|kv| kv.strip_prefix(f)?.parse().ok()).unwrap_or(0) };
            let entry = counts.entry(name.to_owned()).or_default();
            entry.0 += field("calls=");
            entry.1 += field("usec=");
        }
    }
    let n = admissions.max(1) as f64;
    counts
        .iter()
        .filter(|(name, _)| {
            !name.starts_with("eval") && !["info", "config", "cluster", "ping"].contains(&name.as_str())
        })
        .map(|(name, (calls, usec))| format!("{name} {:.1} ({:.1} µs)", *calls as f64 / n, *usec as f64 / n))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn case(name: &str, callers: Callers, topology: Topology, urls: &[String], run: Duration, in_flight: usize) {
    let prefix = format!("bench-{}", name.replace([' ', ','], ""));
    let config = RedisConfig { topology, prefix, timeout: Duration::from_secs(5), tls: Tls::default() };
    let store = Arc::new(RedisStore::new(config));
    let paths = Arc::new(register(&store, callers));
    drive(Arc::clone(&store), Arc::clone(&paths), Duration::from_millis(500), in_flight).await; // warm-up
    reset_stats(urls);
    let (mut latencies, wall) = drive(store, paths, run, in_flight).await;
    let (calls, usec) = server_time(urls);
    latencies.sort_unstable();
    let n = latencies.len();
    let rate = n as f64 / wall.as_secs_f64();
    println!(
        "{name:<22} {n:>8} admissions in {:.2} s = {rate:>8.0}/s | latency p50 {:>5.2} ms, p99 {:>5.2} ms, max {:>6.2} ms | \
         {:.1} scripts/admission, {:.1} µs server time per script, server busy {:.0} % of the wall time (summed over servers)",
        wall.as_secs_f64(),
        percentile(&latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies[n - 1].as_secs_f64() * 1e3,
        calls as f64 / n as f64,
        usec as f64 / calls.max(1) as f64,
        usec as f64 / 1e4 / wall.as_secs_f64(),
    );
    println!("{:<22} per admission, commands run by the scripts: {}", "", inner_commands(urls, n));
    if urls.len() > 1 {
        println!("{:<22} {}", "", spread(urls));
    }
}

/// The floor under any script: `return 1` with the keys and argument sizes of a
/// reservation, two calls per "admission", on the same connection type and load. What a
/// script costs beyond this is its own work.
async fn floor(url: &str, run: Duration, in_flight: usize) {
    let client = redis::Client::open(url).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let script = Arc::new(redis::Script::new("return 1"));
    let blob = vec![0x90_u8; 160];
    let end = tokio::time::Instant::now() + run;
    reset_stats(&[url.to_owned()]);
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let (mut conn, script, blob) = (conn.clone(), Arc::clone(&script), blob.clone());
            tokio::spawn(async move {
                let mut n = 0_u64;
                while tokio::time::Instant::now() < end && n < MAX_PER_TASK as u64 {
                    for _ in 0..2 {
                        let mut call = script.prepare_invoke();
                        call.key("{bench:c}:leases").key("{bench:c}:state");
                        call.arg(&blob).arg(60_000_000).arg(16).arg("").arg(1).arg(0).arg(0).arg(&blob);
                        for kind in PATH {
                            call.arg(format!("{}:bench-{}", kind.as_str(), kind.as_str()));
                        }
                        let _: i64 = call.invoke_async(&mut conn).await.unwrap();
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut admissions = 0;
    for task in tasks {
        admissions += task.await.unwrap();
    }
    let (calls, usec) = server_time(&[url.to_owned()]);
    println!(
        "{:<22} {admissions:>8} pairs of empty scripts (same keys and argument sizes): {:.1} µs server time per script",
        "floor, standalone",
        usec as f64 / calls.max(1) as f64
    );
}

fn main() {
    let numbers: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let seconds = numbers.first().copied().unwrap_or(5);
    let in_flight = numbers.get(1).map_or(IN_FLIGHT, |&n| n as usize);
    let tenants = numbers.get(2).map_or(100, |&n| n as usize);
    let run = Duration::from_secs(seconds);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    println!(
        "{in_flight} in flight, 6-level path x 4 dimensions, reserve + settle per admission, {seconds} s per case"
    );
    let many = Callers::Many { tenants, deployments: DEPLOYMENTS, org_limited: false };
    let standalone = LocalRedis::start().expect("redis-server on PATH");
    let (urls, topology) = (vec![standalone.url()], Topology::Standalone(standalone.url()));
    runtime.block_on(case("standalone", Callers::One, topology.clone(), &urls, run, in_flight));
    runtime.block_on(case(&format!("standalone, {tenants} ten."), many, topology, &urls, run, in_flight));
    runtime.block_on(floor(&standalone.url(), run, in_flight));
    drop(standalone);
    let cluster = LocalCluster::start(3).expect("redis-server and redis-cli on PATH");
    let (urls, topology) = (cluster.urls(), Topology::Cluster(cluster.urls()));
    runtime.block_on(case("cluster, 3 masters", Callers::One, topology.clone(), &urls, run, in_flight));
    runtime.block_on(case(&format!("cluster, {tenants} ten."), many, topology.clone(), &urls, run, in_flight));
    let own = Callers::Many { tenants, deployments: tenants, org_limited: false };
    runtime.block_on(case(&format!("cluster, {tenants} ten., own d."), own, topology.clone(), &urls, run, in_flight));
    let org = Callers::Many { tenants, deployments: DEPLOYMENTS, org_limited: true };
    runtime.block_on(case(&format!("cluster, {tenants} ten., org"), org, topology, &urls, run, in_flight));
}
