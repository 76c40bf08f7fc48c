//! `sluice demo`: the seed-000 story in one process over real HTTP on 127.0.0.1.
//!
//! One simulated provider (500 RPM / 30,000 TPM, time-compressed); 40 interactive users
//! and one long batch job; first the provider's own latency (a few interactive requests
//! sent directly), then the workload through the gateway — one instance, or several in this
//! process sharing one Redis — then as uncoordinated workers with their own backoff
//! straight at the provider. See `docs/demo.md`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_sim::{SimHandle, SimProvider, StatsSnapshot};

use crate::deploy::{Gateways, StoreKind};
use crate::drive::{self, Run, Tally, Transport};
use crate::naive::{Backoff, Workers};
use crate::report::{DemoReport, SideContext, SideReport};
use crate::scenario::{BATCH_KEY, DEPLOYMENT_BURST_SIM_SECONDS, INTERACTIVE_KEY, MODEL, Provider};
use crate::sluiced;
use crate::utilization;
use crate::workload::Workload;

/// Interactive requests in flight at once while measuring the provider's own latency.
const BASELINE_CONCURRENCY: usize = 4;

/// Arguments of `sluice demo`; the defaults are the documented scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Print the figures as one JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Do not draw the progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Simulated minutes per real minute.
    #[arg(long, default_value_t = 40.0)]
    pub time_scale: f64,
    /// The provider's requests per (simulated) minute.
    #[arg(long, default_value_t = 500)]
    pub rpm: u64,
    /// The provider's tokens per (simulated) minute.
    #[arg(long, default_value_t = 30_000)]
    pub tpm: u64,
    /// Provider time to first token, real milliseconds.
    #[arg(long, default_value_t = 40.0)]
    pub ttft_ms: f64,
    /// Provider delay per output token, real milliseconds.
    #[arg(long, default_value_t = 1.0)]
    pub per_token_ms: f64,
    /// Interactive users.
    #[arg(long, default_value_t = 40)]
    pub users: usize,
    /// Shortest think time of a user between answer and next question.
    #[arg(long, default_value = "4s")]
    pub think_min: humantime::Duration,
    /// Longest think time.
    #[arg(long, default_value = "9s")]
    pub think_max: humantime::Duration,
    /// Prompt tokens of an interactive request.
    #[arg(long, default_value_t = 200)]
    pub interactive_prompt_tokens: usize,
    /// `max_tokens` of an interactive request.
    #[arg(long, default_value_t = 100)]
    pub interactive_max_tokens: u64,
    /// Requests in the batch job.
    #[arg(long, default_value_t = 300)]
    pub batch_requests: usize,
    /// Prompt tokens of a batch request.
    #[arg(long, default_value_t = 1_200)]
    pub batch_prompt_tokens: usize,
    /// `max_tokens` of a batch request.
    #[arg(long, default_value_t = 400)]
    pub batch_max_tokens: u64,
    /// Batch requests outstanding at once (both sides).
    #[arg(long, default_value_t = 10)]
    pub batch_concurrency: usize,
    /// The batch class's share of the deployment's burst at the gateway: batch requests
    /// leave the rest to interactive ones, which therefore never wait behind the batch.
    #[arg(long, default_value_t = 0.75)]
    pub batch_share: f64,
    /// Workers of the naive side.
    #[arg(long, default_value_t = 12)]
    pub workers: usize,
    /// Naive backoff: first ceiling, in simulated time (divided by the time scale).
    #[arg(long, default_value = "1s")]
    pub backoff_base: humantime::Duration,
    /// Naive backoff: largest ceiling, in simulated time.
    #[arg(long, default_value = "8s")]
    pub backoff_cap: humantime::Duration,
    /// Naive backoff: attempts per request, the first included.
    #[arg(long, default_value_t = 8)]
    pub max_attempts: u32,
    /// Each side ends at the latest after this long (real time).
    #[arg(long, default_value = "40s")]
    pub deadline: humantime::Duration,
    /// Seed of prompts, think times, jitter and the provider's draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Gateway instances, in this process, each with its own store object; clients spread
    /// over them round-robin. More than one implies `--store redis`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub instances: u16,
    /// The gateways' quota store [default: memory for one instance, else redis].
    #[arg(long, value_enum)]
    pub store: Option<StoreKind>,
    /// An existing Redis to use (e.g. `redis://127.0.0.1:6379`); implies `--store redis`.
    /// Without it the demo starts `redis-server` from PATH on a free port.
    #[arg(long)]
    pub redis: Option<String>,
    /// Interactive requests sent directly to the provider first, to measure its own latency.
    #[arg(long, default_value_t = 80)]
    pub baseline_requests: usize,
    /// Run the gateway side only (no naive side).
    #[arg(long)]
    pub gateway_only: bool,
    /// The provider enforces its per-minute limits OpenAI's quantized way, this many
    /// simulated seconds' worth at a time [default: a sliding window admitting a tenth of
    /// the minute in any second].
    #[arg(long)]
    pub provider_window: Option<f64>,
    /// The deployment's `burst_seconds` at the gateway, in simulated seconds (divided by
    /// the time scale in the gateway's config).
    #[arg(long, default_value_t = DEPLOYMENT_BURST_SIM_SECONDS)]
    pub burst_seconds: f64,
}

impl DemoArgs {
    /// The store the gateways use.
    #[must_use]
    pub fn store_kind(&self) -> StoreKind {
        let shared = self.instances > 1 || self.redis.is_some();
        self.store.unwrap_or(if shared { StoreKind::Redis } else { StoreKind::Memory })
    }

    /// The heading of the gateway's column.
    #[must_use]
    pub fn gateway_title(&self) -> String {
        match (self.instances, self.store_kind()) {
            (1, StoreKind::Memory) => "through sluice".to_owned(),
            (1, StoreKind::Redis) => "through sluice (Redis store)".to_owned(),
            (n, StoreKind::Redis) => format!("through sluice ({n} instances, one Redis)"),
            (n, StoreKind::Memory) => format!("through sluice ({n} instances, a memory store each)"),
        }
    }

    fn provider(&self) -> Provider {
        Provider {
            rpm: self.rpm,
            tpm: self.tpm,
            time_scale: self.time_scale,
            ttft_ms: self.ttft_ms,
            per_token_ms: self.per_token_ms,
            completion_mean: self.batch_max_tokens as f64 * 0.85,
            window: self.provider_window,
            burst_sim_seconds: self.burst_seconds,
        }
    }

    fn workload(&self) -> Workload {
        Workload {
            model: MODEL.to_owned(),
            users: self.users,
            think_min: self.think_min.into(),
            think_max: self.think_max.into(),
            interactive_prompt_tokens: self.interactive_prompt_tokens,
            interactive_max_tokens: self.interactive_max_tokens,
            batch_requests: self.batch_requests,
            batch_prompt_tokens: self.batch_prompt_tokens,
            batch_max_tokens: self.batch_max_tokens,
            batch_concurrency: self.batch_concurrency,
        }
    }

    fn backoff(&self) -> Backoff {
        let real = |d: humantime::Duration| Duration::from(d).div_f64(self.time_scale.max(1e-9));
        Backoff { base: real(self.backoff_base), cap: real(self.backoff_cap), max_attempts: self.max_attempts.max(1) }
    }

    fn scenario_json(&self) -> serde_json::Value {
        let p = self.provider();
        serde_json::json!({
            "provider": {"rpm": p.rpm, "tpm": p.tpm, "time_scale": p.time_scale, "ttft_ms": p.ttft_ms,
                "per_token_ms": p.per_token_ms, "rps_real": p.rps(), "tps_real": p.tps(),
                "quantized_window_secs": p.window},
            "gateway_burst_seconds": p.burst_sim_seconds,
            "workload": self.workload(),
            "batch_share": self.batch_share,
            "workers": self.workers,
            "backoff_real_ms": {"base": self.backoff().base.as_secs_f64() * 1000.0,
                "cap": self.backoff().cap.as_secs_f64() * 1000.0, "max_attempts": self.max_attempts},
            "deadline_secs": Duration::from(self.deadline).as_secs_f64(),
            "seed": self.seed,
            "instances": self.instances,
            "store": self.store_kind(),
            "baseline_requests": self.baseline_requests,
        })
    }
}

/// Runs the demo and prints the table (or JSON) on stdout.
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let report = scenario(&args).await?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)?
    } else {
        report.table(&args.gateway_title(), args.workers)
    };
    print(&text);
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the demo's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

/// Runs both sides and returns their figures.
///
/// # Errors
/// When the simulator, Redis or a gateway cannot start.
pub async fn scenario(args: &DemoArgs) -> anyhow::Result<DemoReport> {
    let provider = args.provider();
    let sim = SimProvider::start(provider.sim_config(args.seed)).await?;
    let config = |store: &str| provider.gateway_config(&sim.url(), args.batch_share, store);
    let gateways =
        Gateways::start(usize::from(args.instances), args.store_kind(), args.redis.as_deref(), config).await?;
    let progress = progress_bar(args);
    let run = Run { workload: args.workload(), deadline: args.deadline.into(), seed: args.seed };
    let context = |client_retries, interactive_429s| SideContext {
        rps: provider.rps(),
        tps: provider.tps(),
        batch_requests: args.batch_requests,
        deadline_secs: Duration::from(args.deadline).as_secs_f64(),
        client_retries,
        interactive_429s,
    };

    progress.set_message("provider latency, direct");
    sim.reset();
    let workload = args.workload();
    let provider_latency =
        crate::baseline::measure(&sim.url(), &workload, args.baseline_requests, BASELINE_CONCURRENCY, args.seed)
            .await?;

    progress.set_message("through sluice");
    let transport = Arc::new(sluiced::Gateway::new(&gateways.urls(), INTERACTIVE_KEY, BATCH_KEY)?);
    let (tally, users) = side(&sim, args, Arc::clone(&transport), run.clone(), &progress).await;
    let interactive_429s = transport.interactive_not_now.load(Ordering::Relaxed);
    let gateway_side = SideReport::new(tally, &sim.stats(), context(transport.not_now(), interactive_429s), &users);
    gateways.shutdown().await;

    let naive_side = if args.gateway_only {
        None
    } else {
        settle_in_flight().await;
        progress.set_message(format!("{} workers, own backoff", args.workers));
        progress.set_position(0);
        let workers = Arc::new(Workers::start(args.workers, &sim.url(), args.backoff(), args.seed)?);
        let (tally, users) = side(&sim, args, Arc::clone(&workers), run, &progress).await;
        workers.shutdown().await;
        let counters = &workers.counters;
        let ctx = context(
            counters.retries.load(Ordering::Relaxed),
            counters.interactive_rate_limited.load(Ordering::Relaxed),
        );
        Some(SideReport::new(tally, &sim.stats(), ctx, &users))
    };
    progress.finish_and_clear();
    sim.shutdown().await;
    Ok(DemoReport { scenario: args.scenario_json(), provider_latency, gateway: gateway_side, naive: naive_side })
}

/// One side from a fresh provider: the workload over `transport`, with the interactive
/// users' charged tokens sampled once a second.
async fn side<T: Transport>(
    sim: &SimHandle,
    args: &DemoArgs,
    transport: Arc<T>,
    run: Run,
    progress: &ProgressBar,
) -> (Tally, Vec<u64>) {
    sim.reset();
    let max_tokens = args.interactive_max_tokens;
    let probe = move |stats: &StatsSnapshot| utilization::interactive_charged(stats, max_tokens);
    utilization::sampled(sim, probe, drive::drive(transport, run, progress.clone())).await
}

/// Lets calls that were in flight when a side ended finish before the next side resets
/// the provider.
async fn settle_in_flight() {
    tokio::time::sleep(Duration::from_millis(800)).await;
}

fn progress_bar(args: &DemoArgs) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(args.batch_requests as u64), ProgressDrawTarget::stderr());
    if args.quiet {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template("{spinner} {msg:<28} batch [{bar:30}] {pos}/{len} {elapsed}")
        .map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
