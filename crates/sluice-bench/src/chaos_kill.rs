//! Chaos scenario `kill-instance`: 3 gateway instances on one Redis (quota and job store)
//! run async jobs (4 workers each, visibility timeout 2 s) and live traffic. Right after
//! 300 jobs are submitted over all three, instance 0 is `kill -9`ed at a seeded moment and
//! restarted a second later; the live clients keep asking the two others.
//!
//! Invariants: no job is lost (every job reaches a terminal state); completions the
//! provider served twice (`req-id:` markers) stay within the uncertain reruns the gateways
//! counted (`sluice_jobs_uncertain_reruns_total`), which match the jobs' own `reruns`; no
//! live request takes longer than 5 s (2 s `max_wait` plus slack) or goes unanswered; the
//! provider never answers 429; every instance, the restarted one included, is up.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use sluice_redis::local::LocalRedis;
use sluice_sim::{LatencyConfig, Limits, ModelConfig, SimConfig, SimHandle, SimProvider};
use tokio::time::Instant;

use crate::attempts::{self, Attempt, Load};
use crate::chaos_check::{Check, ms};
use crate::client::HttpClient;
use crate::fleet::{self, KEY, Parts};
use crate::process::{GatewayProcess, temp_path};

const NAME: &str = "kill-instance";
const JOBS: usize = 300;
const SUBMITTERS: usize = 8;
/// The provider's (and the deployment's) requests per minute: 100 per second, so the jobs
/// take a few seconds and many are queued at the kill.
const RPM: u64 = 6_000;
const INSTANCES: usize = 3;
/// Live traffic runs this long from the start of the submissions.
const LIVE_FOR: Duration = Duration::from_secs(10);
const LIVE_BOUND: Duration = Duration::from_secs(5);
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// Bound on waiting for every job to end.
const FINISH_WITHIN: Duration = Duration::from_secs(90);
const UNCERTAIN_RERUNS: &str = "sluice_jobs_uncertain_reruns_total";

fn sim_config(seed: u64) -> SimConfig {
    let limits = Limits { rpm: Some(RPM), ..Limits::default() };
    let latency = LatencyConfig { ttft_ms: 30.0, jitter: 0.2, ..LatencyConfig::default() };
    SimConfig {
        seed: Some(seed),
        latency,
        models: vec![ModelConfig::openai("gpt-4o-mini").with_limits(limits)],
        ..SimConfig::default()
    }
}

fn gateway_config(sim_url: &str, redis_url: &str, jobs_file: &Path) -> String {
    let store = fleet::redis_store(redis_url, &crate::deploy::run_prefix("chaos-kill"), "fail_closed");
    let tail = format!(
        "[[classes]]\nname = \"batch\"\nmax_wait = \"10m\"\npriority = 5\nmax_attempts = 5\n\n\
         [jobs]\npath = \"{}\"\nworkers = 4\nvisibility_timeout = \"2s\"\n",
        jobs_file.display()
    );
    let limits = format!("rpm = {RPM}");
    fleet::config_with(&Parts { sim_url, store: &store, limits: &limits, lease: "30s", deployment: "", tail: &tail })
}

fn live_body(client: usize) -> Value {
    json!({
        "model": "chat",
        "messages": [{"role": "user", "content": "live request"}],
        "max_tokens": 8,
        "user": format!("live-{client}"),
    })
}

/// What one round measured.
#[derive(Debug, Default)]
struct Measured {
    served_before_kill: u64,
    killed_at: Duration,
    terminal: Terminal,
    duplicates: u64,
    duplicate_completions: u64,
    reruns_metric: u64,
    live: Vec<Attempt>,
    provider_429s: u64,
    alive: bool,
}

/// Jobs by final state (and those that never got there).
#[derive(Debug, Default)]
struct Terminal {
    completed: usize,
    failed: usize,
    dead_letter: usize,
    lost: usize,
    reruns: u64,
}

/// One round.
///
/// # Errors
/// When Redis, the simulator or a gateway cannot start, or the jobs cannot be submitted.
pub async fn round(binary: &Path, round: u32, seed: u64) -> anyhow::Result<Vec<Check>> {
    let redis = tokio::task::spawn_blocking(LocalRedis::start).await??;
    let sim = SimProvider::start(sim_config(seed)).await?;
    let jobs_file = temp_path("chaos-jobs.redb");
    let config = gateway_config(&sim.url(), &redis.url(), &jobs_file);
    let mut gateways = fleet::start(binary, INSTANCES, &config).await?;
    let measured = crash(&sim, &mut gateways, seed, round).await;
    drop(gateways);
    drop(redis);
    crate::process::remove_job_store(&jobs_file);
    sim.shutdown().await;
    Ok(judge(round, &measured?))
}

async fn crash(sim: &SimHandle, gateways: &mut [GatewayProcess], seed: u64, round: u32) -> anyhow::Result<Measured> {
    let origin = Instant::now();
    let survivors = fleet::urls(&gateways[1..]);
    let load = Load { clients: 6, run: LIVE_FOR, max_wait: Duration::from_secs(1) };
    let live = tokio::spawn(attempts::run_load(survivors.clone(), load, origin, KEY, live_body));
    let ids = submit_all(&fleet::urls(gateways), &format!("chaos-{seed}-{round}")).await?;
    let pause = Duration::from_millis(StdRng::seed_from_u64(seed).random_range(100..800));
    tokio::time::sleep(pause).await;
    let served_before_kill = sim.stats().markers;
    let killed_at = origin.elapsed();
    let first = gateways.first_mut().ok_or_else(|| anyhow::anyhow!("no gateway"))?;
    first.kill();
    tokio::time::sleep(RESTART_AFTER).await;
    tokio::task::block_in_place(|| first.restart())?;
    let terminal = wait_for_all(&survivors[0], &ids).await;
    let live = live.await?;
    let stats = sim.stats();
    let mut reruns_metric = 0;
    for url in fleet::admin_urls(gateways) {
        reruns_metric += counter(&url, UNCERTAIN_RERUNS).await;
    }
    Ok(Measured {
        served_before_kill,
        killed_at,
        terminal,
        duplicates: stats.duplicates,
        duplicate_completions: stats.duplicate_completions,
        reruns_metric,
        live,
        provider_429s: stats.rate_limited.total(),
        alive: gateways.iter_mut().all(GatewayProcess::alive),
    })
}

/// Submits [`JOBS`] jobs round-robin over `urls` from [`SUBMITTERS`] clients; returns the
/// job ids.
async fn submit_all(urls: &[String], tag: &str) -> anyhow::Result<Vec<String>> {
    let http = HttpClient::new();
    let mut tasks = Vec::new();
    for client in 0..SUBMITTERS {
        let (http, urls, tag) = (http.clone(), urls.to_vec(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in (client..JOBS).step_by(SUBMITTERS) {
                let uri: Uri = format!("{}/v1/jobs", urls[n % urls.len()]).parse()?;
                let body = job_body(&tag, n);
                let reply = http.post_json(&uri, Some(KEY), body).await?;
                anyhow::ensure!(reply.status == 202, "job {n} refused: {} {:?}", reply.status, reply.body);
                let accepted: Value = serde_json::from_slice(&reply.body)?;
                let id = accepted["job_id"].as_str().ok_or_else(|| anyhow::anyhow!("no job_id"))?;
                ids.push(id.to_owned());
            }
            Ok(ids)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    Ok(all)
}

fn job_body(tag: &str, n: usize) -> Bytes {
    let body = json!({
        "endpoint": "/v1/chat/completions",
        "class": "batch",
        "body": {
            "model": "chat",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": format!("job {n} req-id:{tag}-{n}")}],
        },
    });
    Bytes::from(body.to_string())
}

/// Polls every job through `url` until it is terminal or [`FINISH_WITHIN`] has passed.
async fn wait_for_all(url: &str, ids: &[String]) -> Terminal {
    let http = HttpClient::new();
    let deadline = Instant::now() + FINISH_WITHIN;
    let mut t = Terminal::default();
    for id in ids {
        let state = loop {
            let job = job(&http, url, id).await;
            let status = job.as_ref().and_then(|j| j["status"].as_str()).unwrap_or("unknown").to_owned();
            if ["completed", "failed", "dead_letter"].contains(&status.as_str()) || Instant::now() >= deadline {
                t.reruns += job.as_ref().and_then(|j| j["reruns"].as_u64()).unwrap_or(0);
                break status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        match state.as_str() {
            "completed" => t.completed += 1,
            "failed" => t.failed += 1,
            "dead_letter" => t.dead_letter += 1,
            _ => t.lost += 1,
        }
    }
    t
}

async fn job(http: &HttpClient, url: &str, id: &str) -> Option<Value> {
    let uri: Uri = format!("{url}/v1/jobs/{id}").parse().ok()?;
    let reply = http.get(&uri, Some(KEY)).await.ok()?;
    serde_json::from_slice(&reply.body).ok()
}

/// The sum of a counter's samples in `url/metrics` (0 when unreachable).
async fn counter(url: &str, name: &str) -> u64 {
    let Ok(uri) = format!("{url}/metrics").parse::<Uri>() else { return 0 };
    let Ok(reply) = HttpClient::new().get(&uri, None).await else { return 0 };
    sum_counter(&String::from_utf8_lossy(&reply.body), name)
}

/// The sum over the samples of counter `name` in a Prometheus text exposition.
#[must_use]
pub fn sum_counter(text: &str, name: &str) -> u64 {
    let samples = text.lines().filter(|l| !l.starts_with('#'));
    let of_name = samples.filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])));
    let values = of_name.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    values.map(|v| v.max(0.0).round() as u64).sum()
}

fn judge(round: u32, m: &Measured) -> Vec<Check> {
    let t = &m.terminal;
    let slowest = attempts::slowest(&m.live);
    let unanswered = m.live.iter().filter(|a| a.status == 0).count();
    let check = |invariant, pass, figures| Check::new(NAME, round, invariant, pass, figures);
    vec![
        check(
            "killed while jobs were pending",
            m.served_before_kill < JOBS as u64,
            format!("{} of {JOBS} served before the kill at {} ms", m.served_before_kill, ms(m.killed_at)),
        ),
        check(
            "no lost job (all terminal)",
            t.lost == 0,
            format!(
                "completed {}, failed {}, dead letter {}, not terminal {}",
                t.completed, t.failed, t.dead_letter, t.lost
            ),
        ),
        check(
            "duplicates ≤ uncertain reruns",
            m.duplicate_completions <= m.reruns_metric,
            format!(
                "provider served {} markers twice ({} extra completions); {UNCERTAIN_RERUNS} {}",
                m.duplicates, m.duplicate_completions, m.reruns_metric
            ),
        ),
        check(
            "rerun metric = jobs' reruns",
            m.reruns_metric == t.reruns,
            format!("metric {}, sum of jobs' reruns {}", m.reruns_metric, t.reruns),
        ),
        check("no live request past 5 s", slowest <= LIVE_BOUND, format!("slowest {} ms", ms(slowest))),
        check(
            "every live request answered",
            unanswered == 0,
            format!("{unanswered} unanswered of {}; {:?}", m.live.len(), attempts::summary(&m.live)),
        ),
        check("no provider 429", m.provider_429s == 0, format!("provider 429s {}", m.provider_429s)),
        check("instances alive (restarted one too)", m.alive, String::new()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_their_labels_only() {
        let text = "# TYPE x counter\nsluice_jobs_uncertain_reruns_total 3\n\
                    sluice_jobs_uncertain_reruns_total{a=\"b\"} 2\nsluice_jobs_uncertain_reruns_totalx 7\n";
        assert_eq!(sum_counter(text, UNCERTAIN_RERUNS), 5);
        assert_eq!(sum_counter("", UNCERTAIN_RERUNS), 0);
    }
}
