//! `sluice bench soak`: a long run at half of the provider's binding limit, watching the
//! gateway for growth. The simulated provider runs in this process; the gateway is a child
//! `sluice serve` (so its RSS is its own). An open-loop generator sends the [`crate::mix`]
//! workload (Poisson arrivals); every interval the gateway's RSS, the interval's p50/p99
//! latency, errors and the provider's 429s are sampled. The run ends by itself after
//! `--minutes`, writes `soak.csv` and `soak.svg` into `--plot DIR`, and prints a verdict on
//! flatness ([`crate::soak_report`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http::Uri;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use sluice_sim::{Completion, LatencyConfig, Limits, ModelConfig, SimConfig, SimHandle, SimProvider};
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::mix::{self, Kind};
use crate::process::{GatewayProcess, PROVIDER_KEY_ENV, sluice_binary, temp_path};
use crate::soak_report::{Interval, Report};
use crate::stats::Samples;

const MODEL: &str = "gpt-4o-mini";
const INTERACTIVE_KEY: &str = "sk-soak-interactive";
const BATCH_KEY: &str = "sk-soak-batch";
/// The provider's limits: with the mix's mean cost (~450 tokens) TPM binds (~44 requests/s).
const PROVIDER_RPM: u64 = 3_000;
const PROVIDER_TPM: u64 = 1_200_000;
/// Requests in flight at most; arrivals beyond are dropped and counted as errors.
const MAX_IN_FLIGHT: usize = 1_000;
/// Bound on one request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments of `sluice bench soak`.
#[derive(Debug, Clone, clap::Args)]
pub struct SoakArgs {
    /// How long the load runs, minutes.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// How often the gateway is sampled.
    #[arg(long, default_value = "10s")]
    pub interval: humantime::Duration,
    /// Write `soak.csv` and `soak.svg` into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Fraction of the provider's binding limit to send.
    #[arg(long, default_value_t = 0.5)]
    pub load: f64,
    /// Seed of arrivals, kinds and prompts.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// The `sluice` binary to run as the gateway (default: this one).
    #[arg(long)]
    pub sluice_bin: Option<PathBuf>,
    /// Send short chats instead of async jobs (same cost): separates what the job store
    /// keeps from what the request path does.
    #[arg(long)]
    pub no_jobs: bool,
}

/// What the requests of one interval showed, filled by the request tasks.
#[derive(Debug, Default)]
struct Window {
    latency: Samples,
    ok: u64,
    errors: u64,
    gateway_429s: u64,
    jobs: u64,
}

/// Runs the soak and prints the per-interval lines and the verdict.
///
/// # Errors
/// When the simulator or the gateway cannot start, or the files cannot be written.
pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let sim = SimProvider::start(sim_config(args.seed)).await?;
    let jobs_file = temp_path("soak-jobs.redb");
    let config = gateway_config(&sim.url(), &jobs_file);
    let binary = sluice_binary(args.sluice_bin.as_deref())?;
    let gateway = tokio::task::spawn_blocking(move || GatewayProcess::start(&binary, &config)).await??;
    let rate = args.load * binding_rate();
    say(&format!(
        "soak: gateway pid {} at {}, {rate:.1} requests/s ({:.0} % of the binding limit) for {} min",
        gateway.pid(),
        gateway.url(),
        args.load * 100.0,
        args.minutes
    ));
    let rows = drive(&sim, &gateway, &args, rate).await;
    drop(gateway);
    crate::process::remove_job_store(&jobs_file);
    sim.shutdown().await;
    let report = Report::new(rows, rate);
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("soak.csv"), report.csv())?;
        std::fs::write(dir.join("soak.svg"), report.plot())?;
    }
    say(&report.verdict());
    anyhow::ensure!(report.is_flat(), "the soak was not flat");
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the soak's progress and verdict are its output")]
fn say(text: &str) {
    println!("{text}");
}

/// Requests per second at the provider's binding limit, for the mix's mean cost.
fn binding_rate() -> f64 {
    let rps = PROVIDER_RPM as f64 / 60.0;
    let by_tokens = PROVIDER_TPM as f64 / 60.0 / mix::mean_cost();
    rps.min(by_tokens)
}

/// Sends until the end of the run, sampling every interval; returns the intervals.
async fn drive(sim: &SimHandle, gateway: &GatewayProcess, args: &SoakArgs, rate: f64) -> Vec<Interval> {
    let window = Arc::new(Mutex::new(Window::default()));
    let end = Instant::now() + Duration::from_secs_f64(args.minutes.max(0.0) * 60.0);
    let sender =
        tokio::spawn(arrivals(gateway.url().to_owned(), rate, end, args.seed, args.no_jobs, Arc::clone(&window)));
    let interval: Duration = args.interval.into();
    let origin = Instant::now();
    let mut rows = Vec::new();
    let mut provider_429s = 0;
    while Instant::now() < end {
        tokio::time::sleep_until((Instant::now() + interval).min(end)).await;
        let w = std::mem::take(&mut *window.lock());
        let refused = sim.stats().rate_limited.total();
        let summary = w.latency.summary();
        let row = Interval {
            at_secs: origin.elapsed().as_secs_f64(),
            rss_kib: gateway.rss_kib(),
            ok: w.ok,
            errors: w.errors,
            gateway_429s: w.gateway_429s,
            provider_429s: refused - provider_429s,
            jobs: w.jobs,
            p50_ms: summary.p50_ms,
            p99_ms: summary.p99_ms,
        };
        provider_429s = refused;
        say(&row.line());
        rows.push(row);
    }
    let _ = sender.await;
    rows
}

/// Poisson arrivals at `rate` until `end`, each request a task of its own.
async fn arrivals(url: String, rate: f64, end: Instant, seed: u64, no_jobs: bool, window: Arc<Mutex<Window>>) {
    let client = HttpClient::new();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut rng = StdRng::seed_from_u64(seed);
    let mut due = Instant::now();
    for n in 0u64.. {
        let gap: f64 = -(1.0 - rng.random::<f64>()).ln() / rate.max(0.01);
        due += Duration::from_secs_f64(gap);
        if due >= end {
            break;
        }
        tokio::time::sleep_until(due).await;
        let share = match mix::draw(&mut rng) {
            drawn if no_jobs && drawn.kind == Kind::Job => mix::MIX[0],
            drawn => drawn,
        };
        let (path, body) = mix::request(share, MODEL, "soak", n, &mut rng);
        let Ok(uri) = format!("{url}{path}").parse::<Uri>() else { break };
        if in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT {
            window.lock().errors += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (client, window, in_flight) = (client.clone(), Arc::clone(&window), Arc::clone(&in_flight));
        let key = if share.kind == Kind::Job { BATCH_KEY } else { INTERACTIVE_KEY };
        tokio::spawn(async move {
            let reply = tokio::time::timeout(REQUEST_TIMEOUT, client.post_json(&uri, Some(key), body)).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            let status = match reply {
                Ok(Ok(reply)) => reply.status,
                _ => 0,
            };
            record(&mut window.lock(), share.kind, status, due.elapsed());
        });
    }
}

fn record(w: &mut Window, kind: Kind, status: u16, latency: Duration) {
    match (kind, status) {
        (Kind::Job, 202) => w.jobs += 1,
        (_, 200..=299) => {
            w.ok += 1;
            w.latency.record(latency);
        }
        (_, 429) => w.gateway_429s += 1,
        _ => w.errors += 1,
    }
}

/// One OpenAI-shaped model with the provider limits, ~40 ms to the first token and 2 ms per
/// generated token, answers of about half their `max_tokens`.
fn sim_config(seed: u64) -> SimConfig {
    let limits = Limits { rpm: Some(PROVIDER_RPM), tpm: Some(PROVIDER_TPM), ..Limits::default() };
    let mut model = ModelConfig::openai(MODEL).with_limits(limits);
    model.completion = Completion::Normal { mean: 60.0, stddev: 30.0 };
    let latency = LatencyConfig { ttft_ms: 40.0, per_token_ms: 2.0, jitter: 0.2, ..LatencyConfig::default() };
    SimConfig { seed: Some(seed), latency, models: vec![model], ..SimConfig::default() }
}

/// The gateway: the provider's limits on the deployment, an interactive and a batch key of
/// one tenant, an embedded job store with 4 workers.
fn gateway_config(sim_url: &str, jobs_file: &std::path::Path) -> String {
    let hash = crate::harness::key_hash;
    format!(
        r#"[server]
listen = "127.0.0.1:0"

[jobs]
path = "{jobs}"
workers = 4

[[providers]]
name = "sim"
kind = "openai"
base_url = "{sim_url}"
api_key_env = "{PROVIDER_KEY_ENV}"

[[deployments]]
name = "sim-mini"
provider = "sim"
model = "{MODEL}"
limits = {{ rpm = {PROVIDER_RPM}, tpm = {PROVIDER_TPM} }}

[[models]]
name = "{MODEL}"
deployment = "sim-mini"

[[classes]]
name = "interactive"
max_wait = "5s"

[[classes]]
name = "batch"
priority = 5
max_wait = "10m"
share = 0.6

[[tenants]]
name = "acme"

[[keys]]
id = "acme-interactive"
tenant = "acme"
class = "interactive"
sha256 = "{interactive}"

[[keys]]
id = "acme-batch"
tenant = "acme"
class = "batch"
sha256 = "{batch}"
"#,
        jobs = jobs_file.display(),
        interactive = hash(INTERACTIVE_KEY),
        batch = hash(BATCH_KEY),
    )
}
