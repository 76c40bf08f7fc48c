//! `sluice bench windows`: the gateway with its default burst against a provider that
//! enforces its per-minute limits over a short window (OpenAI's "quantized" limits: one
//! window's worth at a time), for three workloads and several provider windows.
//!
//! Workloads (each a [`crate::demo`] run, gateway side only, fresh provider and gateway):
//! - `mixed`: the demo's interactive users plus a batch of 600 (500 RPM / 30k TPM);
//! - `rpm`: RPM-bound, 600 RPM, 200-token calls;
//! - `tpm`: TPM-bound, 300k TPM, calls of about 5,030 tokens (a whole second's allowance);
//! - `flood`: the demo's interactive users beside a batch flood at time scale 1 (3,000 RPM /
//!   300k TPM, so a 1,600-token batch call fits in a one-second window).
//!
//! The gateway's deployment keeps sluice's default burst (`DEFAULT_BURST_SECONDS` of
//! provider time; under time compression the config says it in real seconds).

use clap::Parser;
use serde::Serialize;
use sluice_quota::limit::DEFAULT_BURST_SECONDS;

use crate::demo::{self, DemoArgs};
use crate::report::{DemoReport, SideReport};

/// One of the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// Interactive users plus a batch of 600 (500 RPM / 30k TPM).
    Mixed,
    /// RPM-bound: 600 RPM, 200-token calls.
    Rpm,
    /// TPM-bound: 300k TPM, calls of about 5,030 tokens.
    Tpm,
    /// Interactive users beside a batch flood in real time (3,000 RPM / 300k TPM).
    Flood,
}

/// Arguments of `sluice bench windows`.
#[derive(Debug, Clone, clap::Args)]
pub struct WindowsArgs {
    /// Provider windows, simulated seconds.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub windows: Vec<f64>,
    /// Workloads to run.
    #[arg(long, value_delimiter = ',', default_value = "mixed,rpm,tpm,flood")]
    pub workloads: Vec<Workload>,
    /// The deployment's burst, simulated seconds [default: sluice's default].
    #[arg(long)]
    pub burst_seconds: Option<f64>,
    /// Simulated minutes per real minute of the mixed workload.
    #[arg(long, default_value_t = 40.0)]
    pub mixed_time_scale: f64,
    /// Simulated minutes per real minute of the RPM- and TPM-bound workloads.
    #[arg(long, default_value_t = 1.0)]
    pub bound_time_scale: f64,
    /// Simulated minutes the RPM- and TPM-bound batches are sized to fill.
    #[arg(long, default_value_t = 1.5)]
    pub bound_minutes: f64,
    /// Batch calls of the `flood` workload (1,600 tokens each; 240 fill about two minutes
    /// beside the interactive users).
    #[arg(long, default_value_t = 240)]
    pub flood_requests: usize,
    /// Seed of prompts, think times and the provider's draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the figures as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WindowRun {
    /// The workload.
    pub workload: Workload,
    /// The provider's window, simulated seconds.
    pub window_secs: f64,
    /// The gateway's burst, simulated seconds.
    pub burst_secs: f64,
    /// The gateway side's figures.
    pub report: DemoReport,
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    demo: DemoArgs,
}

fn demo_args(args: &WindowsArgs, workload: Workload, window: f64, burst: f64) -> DemoArgs {
    let mut argv: Vec<String> = ["demo", "--quiet", "--gateway-only"].map(str::to_owned).to_vec();
    let mut push = |pairs: &[(&str, String)]| {
        for (k, v) in pairs {
            argv.push(format!("--{k}"));
            argv.push(v.clone());
        }
    };
    push(&[
        ("provider-window", window.to_string()),
        ("burst-seconds", burst.to_string()),
        ("seed", args.seed.to_string()),
    ]);
    match workload {
        Workload::Mixed => push(&[
            ("batch-requests", "600".into()),
            ("time-scale", args.mixed_time_scale.to_string()),
            ("deadline", format!("{}s", (4_000.0 / args.mixed_time_scale).round())),
            ("baseline-requests", "60".into()),
        ]),
        // Real time: the provider's one-second window is a real second, the batch's
        // 1,600-token calls are a third of it, the interactive users' 300-token calls need
        // what the batch class's 75 % leaves.
        Workload::Flood => push(&[
            ("rpm", "3000".into()),
            ("tpm", "300000".into()),
            ("batch-requests", args.flood_requests.to_string()),
            ("batch-concurrency", "12".into()),
            ("time-scale", "1".into()),
            ("deadline", "600s".into()),
            ("baseline-requests", "60".into()),
        ]),
        // 200-token calls: 150 prompt, 50 max_tokens.
        Workload::Rpm => push(&bound(args, Bound { rpm: 600, tpm: 100_000_000, prompt: 150, max_tokens: 50 })),
        // About 5,030-token calls: 4,930 prompt, 100 max_tokens.
        Workload::Tpm => push(&bound(args, Bound { rpm: 100_000, tpm: 300_000, prompt: 4_930, max_tokens: 100 })),
    }
    Cli::parse_from(argv).demo
}

/// A batch-only workload bound by one limit, in calls of `prompt + max_tokens` tokens.
struct Bound {
    rpm: u64,
    tpm: u64,
    prompt: u64,
    max_tokens: u64,
}

/// The demo's arguments for `b`: a batch sized to fill `args.bound_minutes` of the binding
/// limit, with enough calls outstanding to keep it saturated and a deadline three times
/// as long as the batch should take.
fn bound(args: &WindowsArgs, b: Bound) -> Vec<(&'static str, String)> {
    #[expect(clippy::cast_precision_loss, reason = "limits far below 2^52")]
    let per_minute = (b.rpm as f64).min(b.tpm as f64 / (b.prompt + b.max_tokens) as f64);
    let requests = (per_minute * args.bound_minutes).round();
    let deadline = (args.bound_minutes * 60.0 / args.bound_time_scale * 3.0 + 30.0).round();
    vec![
        ("rpm", b.rpm.to_string()),
        ("tpm", b.tpm.to_string()),
        ("users", "0".into()),
        ("batch-requests", requests.to_string()),
        ("batch-prompt-tokens", b.prompt.to_string()),
        ("batch-max-tokens", b.max_tokens.to_string()),
        ("batch-concurrency", "32".into()),
        ("batch-share", "1".into()),
        ("time-scale", args.bound_time_scale.to_string()),
        ("deadline", format!("{deadline}s")),
        ("baseline-requests", "8".into()),
    ]
}

/// Runs every workload against every window and prints the table (or JSON).
///
/// # Errors
/// When the simulator or a gateway cannot start.
pub async fn run(args: WindowsArgs) -> anyhow::Result<()> {
    #[expect(clippy::cast_precision_loss, reason = "a handful of seconds")]
    let burst = args.burst_seconds.unwrap_or(DEFAULT_BURST_SECONDS as f64);
    let mut runs = Vec::new();
    for &workload in &args.workloads {
        for &window in &args.windows {
            let report = demo::scenario(&demo_args(&args, workload, window, burst)).await?;
            let run = WindowRun { workload, window_secs: window, burst_secs: burst, report };
            eprintln!("{}", row(&run));
            runs.push(run);
        }
    }
    let text = if args.json { serde_json::to_string_pretty(&runs)? } else { table(&runs) };
    print(&text);
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the benchmark's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

/// The table of every run.
#[must_use]
pub fn table(runs: &[WindowRun]) -> String {
    let mut out = String::from(
        "| workload | provider window | gateway burst | provider 429s | utilization | client errors | \
         interactive p95 / p99 (provider p99) |\n|---|---:|---:|---:|---:|---:|---|\n",
    );
    for run in runs {
        out.push_str(&row(run));
        out.push('\n');
    }
    out
}

fn row(run: &WindowRun) -> String {
    let g: &SideReport = &run.report.gateway;
    let requests = g.requests_served + g.provider_429s;
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let share = if requests > 0 { g.provider_429s as f64 / requests as f64 * 100.0 } else { 0.0 };
    let util =
        g.utilization.as_ref().map_or_else(|| "–".to_owned(), |u| format!("{:.3} ({})", u.value, u.binding_limit));
    let errors =
        g.interactive.failed + g.batch.failed + g.batch.requests.saturating_sub(g.batch.served + g.batch.failed);
    let ms = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"));
    let latency = if g.interactive.served > 0 {
        format!(
            "{} / {} ms ({} ms)",
            ms(g.interactive.p95_ms),
            ms(g.interactive.p99_ms),
            ms(run.report.provider_latency.p99_ms)
        )
    } else {
        "–".to_owned()
    };
    format!(
        "| {:?} | {} s | {} s | {} of {requests} ({share:.2} %) | {util} | {errors} | {latency} |",
        run.workload, run.window_secs, run.burst_secs, g.provider_429s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Parser)]
    struct Args {
        #[command(flatten)]
        windows: WindowsArgs,
    }

    #[test]
    fn each_workload_runs_the_gateway_side_against_a_quantized_provider() {
        let args = Args::parse_from(["windows"]).windows;
        assert_eq!(args.windows, [1.0, 2.0, 3.0]);
        let tpm = demo_args(&args, Workload::Tpm, 2.0, 1.0);
        assert_eq!((tpm.provider_window, tpm.burst_seconds, tpm.gateway_only), (Some(2.0), 1.0, true));
        // 300,000 TPM in calls of 5,030 tokens: about 60 a minute, 1.5 minutes of them.
        assert_eq!((tpm.tpm, tpm.batch_requests, tpm.users), (300_000, 89, 0));
        let rpm = demo_args(&args, Workload::Rpm, 1.0, 1.0);
        assert_eq!((rpm.rpm, rpm.batch_requests), (600, 900));
        let mixed = demo_args(&args, Workload::Mixed, 3.0, 1.0);
        assert_eq!((mixed.rpm, mixed.tpm, mixed.batch_requests, mixed.time_scale), (500, 30_000, 600, 40.0));
    }
}
