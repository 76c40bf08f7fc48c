//! `sluice bench`: the latency the gateway adds. The same open-loop generator drives the
//! simulated provider (no latency, no binding limits) directly, then through the gateway
//! (a six-level quota path whose limits never bind) on its memory store and/or on Redis
//! (a `redis-server` started here, or `--redis URL`), at each rate, in the same run.

use std::time::Duration;

use serde::Serialize;
use sluice_sim::{ModelConfig, SimConfig, SimProvider};

use crate::client::HttpClient;
use crate::deploy::{Redis, run_prefix};
use crate::loadgen::{self, Step, StepResult, Target};
use crate::workload::chat_body;

const MODEL: &str = "bench-model";
const KEY: &str = "sk-bench";
/// A limit far above anything the generator can send (per minute).
const HIGH: u64 = 1_000_000_000_000;

/// Arguments of `sluice bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Intended request rates, requests per second.
    #[arg(long, value_delimiter = ',', default_value = "500,2000,5000")]
    pub rates: Vec<u32>,
    /// How long each step sends.
    #[arg(long, default_value = "10s")]
    pub duration: humantime::Duration,
    /// Unrecorded warm-up before each step (connections, allocator), at the step's rate.
    #[arg(long, default_value = "1s")]
    pub warmup: humantime::Duration,
    /// Requests in flight at most; sends beyond are dropped and counted.
    #[arg(long, default_value_t = 2_000)]
    pub max_in_flight: usize,
    /// Print one JSON object instead of the markdown table.
    #[arg(long)]
    pub json: bool,
    /// Which gateway stores to measure against the direct path.
    #[arg(long, value_enum, default_value_t = BenchStores::Both)]
    pub store: BenchStores,
    /// An existing Redis for the Redis-store gateway; without it `redis-server` from PATH
    /// is started on a free port.
    #[arg(long)]
    pub redis: Option<String>,
    /// Also write the run's plot, `added-latency.svg`, into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<std::path::PathBuf>,
}

/// The gateways `sluice bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchStores {
    /// The memory store only.
    Memory,
    /// The Redis store only.
    Redis,
    /// Both, each step right after the direct one.
    Both,
}

impl BenchStores {
    fn memory(self) -> bool {
        self != Self::Redis
    }

    fn redis(self) -> bool {
        self != Self::Memory
    }
}

/// One rate: direct and through the gateways.
#[derive(Debug, Clone, Serialize)]
pub struct RateReport {
    /// Intended requests per second.
    pub rate: u32,
    /// Straight to the simulated provider.
    pub direct: StepResult,
    /// Through the gateway on its memory store, and what it added.
    pub memory: Option<Via>,
    /// Through the gateway on Redis, and what it added.
    pub redis: Option<Via>,
    /// Resident set size of the whole process (generator, simulator and gateways) after the
    /// rate's last step, KiB.
    pub rss_kib: Option<u64>,
}

/// One gateway step and its difference to the direct step of the same rate.
#[derive(Debug, Clone, Serialize)]
pub struct Via {
    /// The step.
    pub step: StepResult,
    /// Gateway minus direct at p50, p99, p99.9 (ms).
    pub added_ms: Added,
}

/// Added latency per percentile.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Added {
    /// At p50.
    pub p50: Option<f64>,
    /// At p99.
    pub p99: Option<f64>,
    /// At p99.9.
    pub p999: Option<f64>,
}

/// Runs the benchmark and prints the table (or JSON).
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let reports = measure(&args).await?;
    let text = if args.json { serde_json::to_string_pretty(&reports)? } else { table(&reports) };
    print(&text);
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("added-latency.svg"), plot(&reports))?;
    }
    Ok(())
}

/// The run's latency by rate and path (p50 and p99 on log axes) and the latency the
/// gateways added, as one SVG.
#[must_use]
pub fn plot(reports: &[RateReport]) -> String {
    use crate::plot::{Panel, Scale, Series, figure};
    let rate = |r: &RateReport| f64::from(r.rate);
    let path = |name: &str, pick: &dyn Fn(&RateReport) -> Option<f64>| {
        Series::new(name, reports.iter().filter_map(|r| Some((rate(r), pick(r)?))).collect())
    };
    let latency = |title: &str, q: fn(&StepResult) -> Option<f64>| Panel {
        title: title.into(),
        x_label: "intended rate, requests/s".into(),
        y_label: "ms (log)".into(),
        y_scale: Scale::Log,
        series: vec![
            path("direct", &|r| q(&r.direct)),
            path("memory store", &|r| q(&r.memory.as_ref()?.step)),
            path("redis store", &|r| q(&r.redis.as_ref()?.step)),
        ],
    };
    let added = Panel {
        title: "added by the gateway (gateway − direct, same run)".into(),
        x_label: "intended rate, requests/s".into(),
        y_label: "ms".into(),
        y_scale: Scale::Linear,
        series: vec![
            path("memory p50", &|r| r.memory.as_ref()?.added_ms.p50),
            path("memory p99", &|r| r.memory.as_ref()?.added_ms.p99),
            path("redis p50", &|r| r.redis.as_ref()?.added_ms.p50),
            path("redis p99", &|r| r.redis.as_ref()?.added_ms.p99),
        ],
    };
    let panels = [latency("p50 latency", |s| s.latency.p50_ms), latency("p99 latency", |s| s.latency.p99_ms), added];
    figure("sluice bench: latency by rate, direct and through the gateway", &panels)
}

#[expect(clippy::print_stdout, reason = "the benchmark's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

/// Runs every step.
///
/// # Errors
/// When the simulator, Redis or a gateway cannot start.
pub async fn measure(args: &BenchArgs) -> anyhow::Result<Vec<RateReport>> {
    let sim =
        SimProvider::start(SimConfig { models: vec![ModelConfig::openai(MODEL)], ..SimConfig::default() }).await?;
    let memory = match args.store.memory() {
        true => Some(crate::harness::start_gateway(&gateway_config(&sim.url(), "")).await?),
        false => None,
    };
    let redis = match args.store.redis() {
        true => Some(Redis::obtain(args.redis.as_deref()).await?),
        false => None,
    };
    let on_redis = match &redis {
        Some(r) => {
            let store = crate::scenario::redis_store(&r.url(), &run_prefix("bench"), 1);
            Some(crate::harness::start_gateway(&gateway_config(&sim.url(), &store)).await?)
        }
        None => None,
    };
    let body = chat_body(MODEL, "bench", "ping", 16, "bench");
    let direct = Target { uri: format!("{}/v1/chat/completions", sim.url()).parse()?, bearer: KEY.into(), body };
    let via = |g: &sluice_server::Running| -> anyhow::Result<Target> {
        Ok(Target { uri: format!("{}/v1/chat/completions", g.url()).parse()?, ..direct.clone() })
    };
    let targets = [memory.as_ref().map(&via).transpose()?, on_redis.as_ref().map(&via).transpose()?];
    let client = HttpClient::new();
    let mut reports = Vec::new();
    for &rate in &args.rates {
        let direct = measured(&client, &direct, args, rate).await;
        let mut vias = Vec::with_capacity(2);
        for target in &targets {
            let step = match target {
                Some(target) => Some(measured(&client, target, args, rate).await),
                None => None,
            };
            vias.push(step.map(|step| Via { added_ms: added(&direct, &step), step }));
        }
        let redis_via = vias.pop().flatten();
        let memory_via = vias.pop().flatten();
        reports.push(RateReport { rate, direct, memory: memory_via, redis: redis_via, rss_kib: rss_kib() });
    }
    for gateway in [memory, on_redis].into_iter().flatten() {
        gateway.shutdown().await;
    }
    drop(redis);
    sim.shutdown().await;
    Ok(reports)
}

async fn measured(client: &HttpClient, target: &Target, args: &BenchArgs, rate: u32) -> StepResult {
    let max_in_flight = args.max_in_flight;
    let warmup = Step { rate, duration: args.warmup.into(), max_in_flight };
    if !warmup.duration.is_zero() {
        let _ = loadgen::run_step(client, target, warmup).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    loadgen::run_step(client, target, Step { rate, duration: args.duration.into(), max_in_flight }).await
}

fn added(direct: &StepResult, gateway: &StepResult) -> Added {
    let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    let (d, g) = (&direct.latency, &gateway.latency);
    Added { p50: diff(d.p50_ms, g.p50_ms), p99: diff(d.p99_ms, g.p99_ms), p999: diff(d.p999_ms, g.p999_ms) }
}

/// The process's resident set size from `/proc/self/status`, KiB (Linux only).
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A gateway with a realistic six-level path (org, tenant, team, key, profile,
/// deployment), every level limited far above what the generator sends; `store` is its
/// `[store]` table (empty: the memory store).
fn gateway_config(sim_url: &str, store: &str) -> String {
    let limits = format!("{{ rpm = {HIGH}, tpm = {HIGH} }}");
    format!(
        r#"
[org]
name = "bench"
limits = {limits}

{store}

[[providers]]
name = "sim"
kind = "openai"
base_url = "{sim_url}"
api_key_file = "{{key_file}}"

[[deployments]]
name = "sim-{MODEL}"
provider = "sim"
model = "{MODEL}"
tokenizer = "o200k"
limits = {limits}

[[models]]
name = "{MODEL}"
deployment = "sim-{MODEL}"
limits = {limits}

[[tenants]]
name = "acme"
limits = {limits}

  [[tenants.teams]]
  name = "search"
  limits = {limits}

[[keys]]
id = "bench-1"
tenant = "acme"
team = "search"
sha256 = "{hash}"
limits = {limits}
"#,
        hash = crate::harness::key_hash(KEY),
    )
}

/// The markdown table of a run.
#[must_use]
pub fn table(reports: &[RateReport]) -> String {
    let mut out = String::from(
        "| rate (req/s) | path | achieved req/s | p50 ms | p99 ms | p99.9 ms | errors | dropped | send lag p50 / p99 ms |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in reports {
        out.push_str(&row(r.rate, "direct", &r.direct));
        for (name, via) in [("memory", &r.memory), ("redis", &r.redis)] {
            let Some(via) = via else { continue };
            out.push_str(&row(r.rate, &format!("gateway, {name} store"), &via.step));
            let a = &via.added_ms;
            out.push_str(&format!(
                "| {} | **added, {name}** | | **{}** | **{}** | **{}** | | | |\n",
                r.rate,
                signed(a.p50),
                signed(a.p99),
                signed(a.p999)
            ));
        }
    }
    if let Some(rss) = reports.last().and_then(|r| r.rss_kib) {
        out.push_str(&format!(
            "\nProcess RSS (generator + simulator + gateways) after the last step: {:.1} MiB\n",
            rss as f64 / 1024.0
        ));
    }
    out
}

fn row(rate: u32, path: &str, s: &StepResult) -> String {
    let l = &s.latency;
    format!(
        "| {rate} | {path} | {:.0} | {} | {} | {} | {} | {} | {} / {} |\n",
        s.achieved_rps,
        fmt(l.p50_ms),
        fmt(l.p99_ms),
        fmt(l.p999_ms),
        s.errors,
        s.dropped,
        fmt(s.send_lag.p50_ms),
        fmt(s.send_lag.p99_ms)
    )
}

fn fmt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.3}"))
}

fn signed(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:+.3}"))
}
