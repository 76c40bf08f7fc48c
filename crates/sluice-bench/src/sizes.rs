//! `sluice bench sizes`: mixed request sizes through a gateway on its defaults, against a
//! provider that enforces its per-minute limits one second's worth at a time.
//!
//! The workload real traffic looks like: short chat turns beside pasted documents. Closed-loop
//! clients each send one request at a time, its total size (prompt plus `max_tokens`) drawn
//! uniformly from `--min-tokens ..= --max-tokens`, so some are larger than a whole provider
//! window. A client never retries: a refused request is gone, and the client moves on to a
//! new one after the gateway's hint (at most a quarter second). With `--give-up` a client
//! also abandons a request it has waited that long for (its connection is dropped), as a
//! user closing a tab does.
//!
//! What it measures, per client count:
//! - the provider's admitted tokens over its TPM after the warm-up (utilization), and its 429s;
//! - the mean size of the requests served against the mean size offered (large requests
//!   must not lose out to small ones);
//! - *stalled seconds*: seconds in which requests waited at the gateway at every sample and
//!   the provider admitted nothing, and the longest run of samples with the deployment's
//!   token bucket full, work queued and nothing in flight (`/admin/state` every 100 ms).
//!
//! Time scale 1: the seconds are real seconds. Everything binds 127.0.0.1, every client
//! stops at the deadline, and the gateway and provider are shut down before it returns.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::Value;
use sluice_sim::{Completion, LatencyConfig, Limits, ModelConfig, SimConfig, SimProvider};
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::harness::{key_hash, start_gateway};
use crate::workload::{chat_body, prose};

const MODEL: &str = "gpt-4o";
const KEY: &str = "sk-bench-sizes";
const ADMIN_KEY: &str = "sk-bench-sizes-admin";
/// How often the gateway's state is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The longest a client pauses after a refusal before its next request.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// Arguments of `sluice bench sizes`.
#[derive(Debug, Clone, clap::Args)]
pub struct SizesArgs {
    /// Closed-loop client counts, one run each.
    #[arg(long, value_delimiter = ',', default_value = "20,4")]
    pub clients: Vec<usize>,
    /// Seconds each run lasts.
    #[arg(long, default_value_t = 90)]
    pub seconds: u64,
    /// Seconds at the start left out of the figures.
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// The smallest request, tokens (prompt plus `max_tokens`).
    #[arg(long, default_value_t = 200)]
    pub min_tokens: u64,
    /// The largest request, tokens.
    #[arg(long, default_value_t = 3_000)]
    pub max_tokens: u64,
    /// The deployment's (and the provider's) requests per minute.
    #[arg(long, default_value_t = 600)]
    pub rpm: u64,
    /// The deployment's (and the provider's) tokens per minute.
    #[arg(long, default_value_t = 60_000)]
    pub tpm: u64,
    /// The provider enforces its limits this many seconds' worth at a time.
    #[arg(long, default_value_t = 1.0)]
    pub provider_window: f64,
    /// A client abandons a request after waiting this long for it (drops the connection)
    /// [default: it waits for the gateway's answer].
    #[arg(long)]
    pub give_up: Option<humantime::Duration>,
    /// Seed of sizes and prompts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the figures as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct SizesRun {
    /// Closed-loop clients.
    pub clients: usize,
    /// Requests sent after the warm-up.
    pub sent: u64,
    /// Answered 200.
    pub served: u64,
    /// Refused by the gateway (429).
    pub refused: u64,
    /// Abandoned by their client (`--give-up`).
    pub abandoned: u64,
    /// Any other answer or a failed connection.
    pub errors: u64,
    /// 429s the provider answered (its own count, the whole run).
    pub provider_429s: u64,
    /// Requests the provider admitted (the whole run).
    pub provider_requests: u64,
    /// Provider-admitted tokens per second after the warm-up ÷ its TPM per second.
    pub tpm_utilization: f64,
    /// Mean size of the requests sent, tokens.
    pub mean_offered: f64,
    /// Mean size of the requests served, tokens.
    pub mean_served: f64,
    /// Seconds after the warm-up in which requests waited at every sample and the provider
    /// admitted nothing.
    pub stalled_seconds: u64,
    /// The longest run of samples with the deployment's token bucket full, requests
    /// queued and none in flight, ms.
    pub longest_idle_ms: u64,
}

/// Runs every client count and prints the table (or JSON).
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn run(args: SizesArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for &clients in &args.clients {
        let run = one(&args, clients.max(1)).await?;
        eprintln!("{}", row(&run));
        runs.push(run);
    }
    let text = if args.json { serde_json::to_string_pretty(&runs)? } else { table(&runs) };
    std::io::Write::write_all(&mut std::io::stdout(), format!("{text}\n").as_bytes())?;
    Ok(())
}

/// The table of every run.
#[must_use]
pub fn table(runs: &[SizesRun]) -> String {
    let mut out = String::from(
        "| clients | sent | served | refused | abandoned | provider 429s | TPM utilization | mean size served / offered | stalled seconds | longest idle with work queued |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for run in runs {
        out.push_str(&row(run));
        out.push('\n');
    }
    out
}

fn row(r: &SizesRun) -> String {
    let ratio = if r.mean_offered > 0.0 { r.mean_served / r.mean_offered } else { 0.0 };
    format!(
        "| {} | {} | {} | {} | {} | {} of {} | {:.3} | {:.0} / {:.0} ({ratio:.2}) | {} | {} ms |",
        r.clients,
        r.sent,
        r.served,
        r.refused,
        r.abandoned,
        r.provider_429s,
        r.provider_requests + r.provider_429s,
        r.tpm_utilization,
        r.mean_served,
        r.mean_offered,
        r.stalled_seconds,
        r.longest_idle_ms
    )
}

fn sim_config(args: &SizesArgs, seed: u64) -> SimConfig {
    let limits = Limits { rpm: Some(args.rpm), tpm: Some(args.tpm), ..Limits::default() }
        .quantized(args.provider_window * 1000.0);
    let mut model = ModelConfig::openai(MODEL).with_limits(limits);
    // Answers of a few tokens: the provider charges `max_tokens` on arrival either way, and
    // short answers keep the run bound by admission, not by generation.
    model.completion = Completion::Normal { mean: 20.0, stddev: 5.0 };
    let latency = LatencyConfig { ttft_ms: 40.0, per_token_ms: 1.0, jitter: 0.2, ..LatencyConfig::default() };
    SimConfig { time_scale: 1.0, seed: Some(seed), latency, models: vec![model], ..SimConfig::default() }
}

/// The gateway on its defaults: the deployment's per-minute limits and nothing else (the
/// default burst, the default class and its `max_wait`), and an admin key for sampling.
fn gateway_config(sim_url: &str, args: &SizesArgs) -> String {
    format!(
        "[admin]\nkey_sha256 = \"{admin}\"\n\n[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{sim_url}\"\n\
         api_key_file = \"{{key_file}}\"\n\n[[deployments]]\nname = \"sim-{MODEL}\"\nprovider = \"sim\"\nmodel = \"{MODEL}\"\n\
         limits = {{ rpm = {rpm}, tpm = {tpm} }}\n\n[[models]]\nname = \"{MODEL}\"\ndeployment = \"sim-{MODEL}\"\n\n\
         [[tenants]]\nname = \"bench\"\n\n[[keys]]\nid = \"bench\"\ntenant = \"bench\"\nsha256 = \"{key}\"\n",
        admin = key_hash(ADMIN_KEY),
        rpm = args.rpm,
        tpm = args.tpm,
        key = key_hash(KEY),
    )
}

/// One request's fate, as its client saw it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// When it was sent, seconds since the run started.
    at: f64,
    size: u64,
    outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Served,
    Refused,
    Abandoned,
    Error,
}

/// One sample of the gateway's state.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: f64,
    queued: u64,
    /// The deployment's token bucket is full and nothing is in flight on it.
    idle: bool,
}

async fn one(args: &SizesArgs, clients: usize) -> anyhow::Result<SizesRun> {
    let sim = SimProvider::start(sim_config(args, args.seed)).await?;
    let gateway = start_gateway(&gateway_config(&sim.url(), args)).await?;
    let chat: http::Uri = format!("{}/v1/chat/completions", gateway.url()).parse()?;
    let state: http::Uri = format!("{}/admin/state", gateway.admin_url()).parse()?;
    sim.reset();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let give_up = args.give_up.map(Duration::from);
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let (chat, sent) = (chat.clone(), Arc::clone(&sent));
        let sizes = (args.min_tokens.max(50), args.max_tokens.max(args.min_tokens.max(50)));
        let seed = args.seed.wrapping_mul(1_000).wrapping_add(c as u64);
        tasks.push(tokio::spawn(client(chat, c, sizes, seed, give_up, start, deadline, sent)));
    }
    let samples = sample(state, start, deadline).await;
    for task in tasks {
        let _ = task.await;
    }
    let stats = sim.stats();
    gateway.shutdown().await;
    sim.shutdown().await;

    let warmup = args.warmup.min(args.seconds.saturating_sub(1));
    let sent: Vec<Sent> = sent.lock().iter().copied().filter(|s| s.at >= warmup as f64).collect();
    let count = |o: Outcome| sent.iter().filter(|s| s.outcome == o).count() as u64;
    let mean = |it: &mut dyn Iterator<Item = u64>| {
        let (n, sum) = it.fold((0u64, 0u64), |(n, sum), v| (n + 1, sum + v));
        if n == 0 { 0.0 } else { sum as f64 / n as f64 }
    };
    let limited = &stats.rate_limited;
    let measured = warmup..args.seconds;
    let tokens: u64 = stats.timeline.iter().filter(|s| measured.contains(&s.second)).map(|s| s.tokens).sum();
    let per_second = args.tpm as f64 / 60.0;
    let seconds = measured.end.saturating_sub(measured.start).max(1) as f64;
    let admitted_in = |second: u64| stats.timeline.iter().any(|s| s.second == second && s.tokens > 0);
    Ok(SizesRun {
        clients,
        sent: sent.len() as u64,
        served: count(Outcome::Served),
        refused: count(Outcome::Refused),
        abandoned: count(Outcome::Abandoned),
        errors: count(Outcome::Error),
        provider_429s: limited.requests + limited.tokens + limited.input_tokens + limited.output_tokens,
        provider_requests: stats.timeline.iter().map(|s| s.requests).sum(),
        tpm_utilization: tokens as f64 / (per_second * seconds),
        mean_offered: mean(&mut sent.iter().map(|s| s.size)),
        mean_served: mean(&mut sent.iter().filter(|s| s.outcome == Outcome::Served).map(|s| s.size)),
        stalled_seconds: stalled(&samples, measured, admitted_in),
        longest_idle_ms: longest_idle(&samples, warmup as f64),
    })
}

/// Seconds of `range` in which every sample saw the deployment's token bucket full,
/// requests queued and none in flight, and the provider admitted nothing. (A second in
/// which the provider admits nothing because a large request left its window in debt is
/// not stalled: that capacity was used.)
fn stalled(samples: &[Sample], range: std::ops::Range<u64>, admitted_in: impl Fn(u64) -> bool) -> u64 {
    let idle_throughout = |second: u64| {
        let mut within = samples.iter().filter(|s| s.at >= second as f64 && s.at < (second + 1) as f64).peekable();
        within.peek().is_some() && within.all(|s| s.idle && s.queued > 0)
    };
    range.filter(|&second| idle_throughout(second) && !admitted_in(second)).count() as u64
}

/// The longest run of consecutive samples after `from` (seconds) that were idle with work
/// queued, in ms (a run of one sample counts one sampling interval).
fn longest_idle(samples: &[Sample], from: f64) -> u64 {
    let (mut longest, mut current) = (0u64, 0u64);
    for s in samples.iter().filter(|s| s.at >= from) {
        if s.idle && s.queued > 0 {
            current += SAMPLE_EVERY.as_millis() as u64;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    longest
}

/// Reads `/admin/state` every [`SAMPLE_EVERY`] until `deadline`.
async fn sample(state: http::Uri, start: Instant, deadline: Instant) -> Vec<Sample> {
    let http = HttpClient::new();
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    while Instant::now() < deadline {
        tick.tick().await;
        let at = start.elapsed().as_secs_f64();
        let Ok(reply) = http.get(&state, Some(ADMIN_KEY)).await else { continue };
        let Ok(value) = serde_json::from_slice::<Value>(&reply.body) else { continue };
        if let Some(sample) = read_state(&value, at) {
            samples.push(sample);
        }
    }
    samples
}

/// The queue depth and whether the deployment's token bucket is full with nothing in
/// flight, from an `/admin/state` body.
fn read_state(value: &Value, at: f64) -> Option<Sample> {
    let queued = value["queues"].as_array()?.iter().filter_map(|q| q["depth"].as_u64()).sum();
    let scopes = value["scopes"].as_array()?;
    let deployment = scopes.iter().find(|s| s["kind"] == "deployment")?;
    let tpm = deployment["limits"].as_array()?.iter().find(|l| l["limiter"] == "tpm")?;
    let full = tpm["remaining"].as_u64()? >= tpm["burst"].as_u64()?;
    let idle = full && deployment["in_flight"].as_u64() == Some(0);
    Some(Sample { at, queued, idle })
}

/// One closed-loop client: a request at a time until `deadline`, each of a size drawn from
/// `sizes`, never retried.
#[expect(clippy::too_many_arguments, reason = "one client's whole setup, called once")]
async fn client(
    chat: http::Uri,
    index: usize,
    sizes: (u64, u64),
    seed: u64,
    give_up: Option<Duration>,
    start: Instant,
    deadline: Instant,
    sent: Arc<Mutex<Vec<Sent>>>,
) {
    let http = HttpClient::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let user = format!("client-{index}");
    let mut n = 0usize;
    while Instant::now() < deadline {
        n += 1;
        let size = rng.random_range(sizes.0..=sizes.1);
        let max_tokens = (size / 5).max(16);
        let prompt = usize::try_from(size - max_tokens).unwrap_or(usize::MAX);
        let body: Bytes = chat_body(MODEL, &user, &prose(prompt, &mut rng), max_tokens, &format!("{user}-{n}"));
        let at = start.elapsed().as_secs_f64();
        let left = deadline.saturating_duration_since(Instant::now());
        let patience = give_up.unwrap_or(left + Duration::from_secs(60));
        let (outcome, hint) = match tokio::time::timeout(patience, http.post_json(&chat, Some(KEY), body)).await {
            Err(_) => (Outcome::Abandoned, None),
            Ok(Err(_)) => (Outcome::Error, None),
            Ok(Ok(reply)) if reply.is_success() => (Outcome::Served, None),
            Ok(Ok(reply)) if reply.status == 429 => (Outcome::Refused, reply.retry_after),
            Ok(Ok(_)) => (Outcome::Error, None),
        };
        sent.lock().push(Sent { at, size, outcome });
        if let Some(hint) = hint {
            let pause = hint.min(MAX_PAUSE).min(deadline.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample(at: f64, queued: u64, idle: bool) -> Sample {
        Sample { at, queued, idle }
    }

    #[test]
    fn a_stalled_second_sat_idle_with_work_queued_and_admitted_nothing() {
        let samples = [
            sample(1.0, 3, true),
            sample(1.5, 2, true),
            sample(2.0, 2, true),
            sample(2.5, 0, true),
            sample(3.2, 1, false),
            sample(4.1, 1, true),
        ];
        // Second 1: idle with work queued throughout, nothing admitted. Second 2: a sample
        // with nothing queued. Second 3: the bucket was in debt (capacity in use). Second 4:
        // the provider admitted something.
        assert_eq!(stalled(&samples, 0..5, |s| s == 4), 1);
        assert_eq!(stalled(&samples, 0..5, |_| true), 0);
    }

    #[test]
    fn the_longest_idle_run_counts_consecutive_samples_with_work_queued() {
        let samples = [sample(0.1, 1, true), sample(0.2, 1, true), sample(0.3, 0, true), sample(0.4, 1, true)];
        assert_eq!(longest_idle(&samples, 0.0), 200);
        assert_eq!(longest_idle(&samples, 0.15), 100);
    }

    #[test]
    fn the_state_names_the_deployments_token_bucket() {
        let state = json!({
            "queues": [{"depth": 4}],
            "scopes": [
                {"kind": "tenant", "limits": []},
                {"kind": "deployment", "in_flight": 0,
                 "limits": [{"limiter": "rpm", "remaining": 1, "burst": 10},
                            {"limiter": "tpm", "remaining": 1000, "burst": 1000}]},
            ],
        });
        let s = read_state(&state, 1.0).unwrap();
        assert_eq!((s.queued, s.idle), (4, true));
        let mut busy = state;
        busy["scopes"][1]["in_flight"] = json!(1);
        assert!(!read_state(&busy, 1.0).unwrap().idle);
    }
}
