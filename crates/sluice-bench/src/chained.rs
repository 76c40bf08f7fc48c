//! `sluice bench responses`: conversations through the Responses API, each turn chained to
//! the last by `previous_response_id`, against a simulated provider bound by its TPM. The
//! provider charges every turn the context the earlier ones left (which the request body
//! does not show); the gateway reserves the context it remembered of the response each
//! turn continues. The run reports the provider's 429s (the goal: none) and the utilization
//! of its TPM limit over the saturated seconds (the goal: at least 0.95).

use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_sim::config::{Completion, Limits};
use sluice_sim::{ModelConfig, SimConfig, SimProvider};
use tokio::task::JoinSet;

use crate::client::HttpClient;
use crate::utilization::{self, Utilization};

const MODEL: &str = "bench-model";
const KEY: &str = "sk-bench";

/// Arguments of `sluice bench responses`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChainedArgs {
    /// How long the conversations run.
    #[arg(long, default_value = "30s")]
    pub duration: humantime::Duration,
    /// Conversations at once.
    #[arg(long, default_value_t = 32)]
    pub conversations: usize,
    /// Turns per conversation before a new one starts.
    #[arg(long, default_value_t = 6)]
    pub turns: usize,
    /// The provider's (and the deployment's) tokens per minute.
    #[arg(long, default_value_t = 600_000)]
    pub tpm: u64,
    /// The provider enforces its per-minute limit this many seconds' worth at a time
    /// (OpenAI's quantized limits), so any over-admission shows as its 429s at once.
    #[arg(long, default_value_t = 2.0)]
    pub provider_window: f64,
    /// Tokens each answer has (the simulated provider's fixed completion).
    #[arg(long, default_value_t = 150)]
    pub output: u64,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ChainedReport {
    /// Turns answered.
    pub served: u64,
    /// Of which continued an earlier response.
    pub continued: u64,
    /// 429s the provider answered (the gateway admitted, the provider refused).
    pub provider_429: u64,
    /// Other failures.
    pub failed: u64,
    /// Utilization of the binding limit over the saturated seconds.
    pub utilization: Option<Utilization>,
}

/// Runs the benchmark and prints its result.
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn run(args: ChainedArgs) -> anyhow::Result<()> {
    let report = measure(&args).await?;
    let text = if args.json { serde_json::to_string_pretty(&report)? } else { summary(&args, &report) };
    print(&text);
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the benchmark's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

fn summary(args: &ChainedArgs, r: &ChainedReport) -> String {
    let u = r.utilization.as_ref();
    format!(
        "chained Responses, {} conversations of {} turns, TPM {} enforced {}s' worth at a time: {} turns served ({} continued), provider 429s: {}, other failures: {}, utilization of {}: {} (seconds {}..{})",
        args.conversations,
        args.turns,
        args.tpm,
        args.provider_window,
        r.served,
        r.continued,
        r.provider_429,
        r.failed,
        u.map_or("–", |u| u.binding_limit),
        u.map_or_else(|| "–".into(), |u| format!("{:.3}", u.value)),
        u.map_or(0, |u| u.from_second),
        u.map_or(0, |u| u.to_second),
    )
}

/// Runs the conversations and reads the provider's counts.
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn measure(args: &ChainedArgs) -> anyhow::Result<ChainedReport> {
    let limits = Limits { rpm: Some(1_000_000), tpm: Some(args.tpm), ..Limits::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: args.output },
        ..ModelConfig::openai(MODEL).with_limits(limits.quantized(args.provider_window * 1000.0))
    };
    let sim = SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await?;
    let gateway = crate::harness::start_gateway(&gateway_config(&sim.url(), args)).await?;
    let uri: http::Uri = format!("{}/v1/responses", gateway.url()).parse()?;
    let client = HttpClient::new();
    let end = tokio::time::Instant::now() + Duration::from_secs_f64(args.duration.as_secs_f64());
    let mut tasks = JoinSet::new();
    for n in 0..args.conversations {
        let (client, uri, turns) = (client.clone(), uri.clone(), args.turns);
        tasks.spawn(async move { converse(&client, &uri, n, turns, end).await });
    }
    let mut report = ChainedReport { served: 0, continued: 0, provider_429: 0, failed: 0, utilization: None };
    while let Some(done) = tasks.join_next().await {
        let tally = done.unwrap_or_default();
        report.served += tally.served;
        report.continued += tally.continued;
        report.failed += tally.failed;
    }
    let stats = sim.stats();
    report.provider_429 = stats.rate_limited.total();
    let seconds = args.duration.as_secs_f64();
    let (from, to) = utilization::saturated_interval(seconds);
    #[expect(clippy::cast_precision_loss, reason = "limits are far below 2^52")]
    let (rps, tps) = (1_000_000.0 / 60.0, args.tpm as f64 / 60.0);
    report.utilization = utilization::over(&stats.timeline, from, to, rps, tps);
    gateway.shutdown().await;
    sim.shutdown().await;
    Ok(report)
}

/// One conversation loop's counts.
#[derive(Debug, Default)]
struct Tally {
    served: u64,
    continued: u64,
    failed: u64,
}

/// Conversations of `turns` turns, one after the other, until `end`; each turn waits out
/// the gateway's refusals as it says (`retry-after-ms`).
async fn converse(client: &HttpClient, uri: &http::Uri, n: usize, turns: usize, end: tokio::time::Instant) -> Tally {
    let mut tally = Tally::default();
    let mut previous: Option<String> = None;
    let mut turn = 0;
    while tokio::time::Instant::now() < end {
        let body = turn_body(n, turn, previous.as_deref());
        let Ok(reply) = client.post_json(uri, Some(KEY), body).await else {
            tally.failed += 1;
            continue;
        };
        if reply.status == 429 && !provider_refused(&reply.body) {
            tokio::time::sleep(reply.retry_after.unwrap_or(Duration::from_millis(100))).await;
            continue;
        }
        if !reply.is_success() {
            tally.failed += u64::from(reply.status != 429);
            previous = None;
            turn = 0;
            continue;
        }
        tally.served += 1;
        tally.continued += u64::from(previous.is_some());
        previous = serde_json::from_slice::<Value>(&reply.body).ok().and_then(|v| v["id"].as_str().map(str::to_owned));
        turn += 1;
        if turn >= turns {
            (previous, turn) = (None, 0);
        }
    }
    tally
}

/// Whether a 429 came from the provider (the gateway had admitted the request).
fn provider_refused(body: &[u8]) -> bool {
    let value: Value = serde_json::from_slice(body).unwrap_or_default();
    value["error"]["gateway_decision"] == "admitted_then_provider_rejected"
}

/// One turn: a short user message, continuing `previous` when there is one.
fn turn_body(n: usize, turn: usize, previous: Option<&str>) -> Bytes {
    let input = format!("Conversation {n}, turn {turn}: {}", "tell me more about rate limits ".repeat(20));
    let mut body = json!({"model": MODEL, "input": input, "max_output_tokens": 200});
    if let Some(id) = previous {
        body["previous_response_id"] = json!(id);
    }
    Bytes::from(body.to_string())
}

fn gateway_config(sim_url: &str, args: &ChainedArgs) -> String {
    format!(
        r#"
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
limits = {{ rpm = 1000000, tpm = {tpm} }}

[[models]]
name = "{MODEL}"
deployment = "sim-{MODEL}"

[[tenants]]
name = "acme"

[[keys]]
id = "bench"
tenant = "acme"
sha256 = "{hash}"
"#,
        tpm = args.tpm,
        hash = crate::harness::key_hash(KEY),
    )
}
