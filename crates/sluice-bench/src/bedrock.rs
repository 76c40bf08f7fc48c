//! `sluice bench bedrock`: a TPM-bound workload on a Bedrock deployment whose model burns
//! each output token 5× against the TPM quota (Claude 3.7 and later), run twice through
//! the gateway: with `output_weight = 5` (sluice mirrors the burn-down) and with
//! `output_weight = 1` (a gateway unaware of it). Reports the provider's 429s and the
//! utilization of the weighted quota: tokens burned as Bedrock counts them (input +
//! 5 × output, from each answer's usage) ÷ the TPM, over the run after its warm-up.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Value, json};
use sluice_sim::bedrock::sigv4::{SIM_ACCESS_KEY_ID, SIM_SECRET_ACCESS_KEY};
use sluice_sim::{SimConfig, SimProvider};
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::harness::{key_hash, start_gateway};

const MODEL: &str = "anthropic.claude-3-7-sonnet-20250219-v1:0";
const KEY: &str = "sk-bench-bedrock";
/// Bedrock's burn-down for the model.
const BURN: u64 = 5;

/// Arguments of `sluice bench bedrock`.
#[derive(Debug, Clone, clap::Args)]
pub struct BedrockArgs {
    /// The deployment's (and the provider's) tokens per minute.
    #[arg(long, default_value_t = 60_000)]
    pub tpm: u64,
    /// Seconds each side runs.
    #[arg(long, default_value_t = 45)]
    pub seconds: u64,
    /// Seconds at the start left out of the utilization.
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// `max_tokens` of each request (the provider generates this many).
    #[arg(long, default_value_t = 100)]
    pub max_tokens: u64,
    /// Print the figures as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One side's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The gateway's `output_weight`.
    pub output_weight: u64,
    /// Answers the clients got.
    pub served: u64,
    /// 429s the provider answered (each retried by the gateway or passed on).
    pub provider_429s: u64,
    /// Tokens burned (input + 5 × output) per second after the warm-up ÷ the TPM per second.
    pub utilization: f64,
}

/// Runs both sides and prints their figures.
///
/// # Errors
/// When the simulator or a gateway cannot start.
pub async fn run(args: BedrockArgs) -> anyhow::Result<()> {
    let mut sides = Vec::new();
    for weight in [BURN, 1] {
        sides.push(side(&args, weight).await?);
    }
    if args.json {
        let text = serde_json::to_string_pretty(&sides)?;
        std::io::Write::write_all(&mut std::io::stdout(), format!("{text}\n").as_bytes())?;
        return Ok(());
    }
    let mut table = String::from("output_weight  served  provider_429s  utilization (weighted TPM)\n");
    for s in &sides {
        table.push_str(&format!(
            "{:>13}  {:>6}  {:>13}  {:>10.3}\n",
            s.output_weight, s.served, s.provider_429s, s.utilization
        ));
    }
    std::io::Write::write_all(&mut std::io::stdout(), table.as_bytes())?;
    Ok(())
}

fn sim_config(args: &BedrockArgs) -> anyhow::Result<SimConfig> {
    let model = json!({"name": MODEL, "shape": "anthropic", "flavor": "bedrock", "output_weight": BURN,
        "completion": {"dist": "fixed", "tokens": args.max_tokens},
        "latency": {"ttft_ms": 50.0, "per_token_ms": 2.0},
        "limits": {"tpm": args.tpm}});
    Ok(serde_json::from_value(json!({"seed": 7, "models": [model]}))?)
}

fn gateway_config(sim_url: &str, credentials: &str, tpm: u64, weight: u64) -> String {
    format!(
        "[[providers]]\nname = \"bedrock\"\nkind = \"bedrock\"\nbase_url = \"{sim_url}\"\nregion = \"us-east-1\"\n\
         aws_credentials_file = \"{credentials}\"\n\n[[deployments]]\nname = \"claude\"\nprovider = \"bedrock\"\n\
         model = \"{MODEL}\"\noutput_weight = {weight}\nlimits = {{ tpm = {tpm} }}\n\n[[models]]\nname = \"claude\"\n\
         deployment = \"claude\"\n\n[[tenants]]\nname = \"bench\"\n\n[[keys]]\nid = \"bench\"\ntenant = \"bench\"\n\
         sha256 = \"{}\"\n",
        key_hash(KEY)
    )
}

async fn side(args: &BedrockArgs, weight: u64) -> anyhow::Result<Side> {
    let sim = SimProvider::start(sim_config(args)?).await?;
    let credentials = std::env::temp_dir().join(format!("sluice-bench-aws-{}-{weight}", std::process::id()));
    let text = format!(
        "[default]\naws_access_key_id = {SIM_ACCESS_KEY_ID}\naws_secret_access_key = {SIM_SECRET_ACCESS_KEY}\n"
    );
    std::fs::write(&credentials, text)?;
    let gateway =
        start_gateway(&gateway_config(&sim.url(), &credentials.display().to_string(), args.tpm, weight)).await;
    let _ = std::fs::remove_file(&credentials);
    let gateway = gateway?;
    let uri: http::Uri = format!("{}/v1/messages", gateway.url()).parse()?;
    let burned = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for _ in 0..args.clients {
        let (uri, burned, max_tokens) = (uri.clone(), Arc::clone(&burned), args.max_tokens);
        tasks.push(tokio::spawn(async move { client(uri, max_tokens, start, deadline, burned).await }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let stats = sim.stats();
    let limited = &stats.rate_limited;
    let provider_429s = limited.requests + limited.tokens + limited.input_tokens + limited.output_tokens;
    let burned = burned.lock().clone();
    gateway.shutdown().await;
    sim.shutdown().await;
    // Answers that came in the measured interval: after the warm-up, before the deadline
    // (those in flight then finish later, outside it).
    let measured = (args.warmup as f64)..(args.seconds as f64);
    let counted: u64 = burned.iter().filter(|(at, _)| measured.contains(at)).map(|(_, tokens)| tokens).sum();
    let per_second = args.tpm as f64 / 60.0;
    let utilization = counted as f64 / (per_second * args.seconds.saturating_sub(args.warmup).max(1) as f64);
    Ok(Side { output_weight: weight, served: burned.len() as u64, provider_429s, utilization })
}

/// One client: requests until `deadline`, each answer's burned tokens recorded with the
/// second it came at; the gateway's own 429s are waited out as it says.
async fn client(
    uri: http::Uri,
    max_tokens: u64,
    start: Instant,
    deadline: Instant,
    burned: Arc<Mutex<Vec<(f64, u64)>>>,
) {
    let http = HttpClient::new();
    let body = json!({"model": "claude", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]});
    let body = Bytes::from(body.to_string());
    while Instant::now() < deadline {
        let Ok(reply) = http.post_json(&uri, Some(KEY), body.clone()).await else { continue };
        if reply.is_success() {
            let value: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
            let n = |k: &str| value["usage"][k].as_u64().unwrap_or(0);
            let tokens = n("input_tokens") + n("cache_creation_input_tokens") + BURN * n("output_tokens");
            burned.lock().push((start.elapsed().as_secs_f64(), tokens));
        } else {
            let wait = reply.retry_after.unwrap_or(Duration::from_millis(100)).min(Duration::from_secs(1));
            tokio::time::sleep(wait.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
    }
}
