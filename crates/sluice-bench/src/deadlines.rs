//! `sluice bench deadlines`: clients that state how long they will wait, against a
//! saturated deployment.
//!
//! Closed-loop clients each send one request at a time, its total size (prompt plus
//! `max_tokens`) drawn uniformly from `--min-tokens ..= --max-tokens` and its deadline drawn
//! log-uniformly from `--min-deadline ..= --max-deadline`, sent as `x-sluice-max-wait-ms`.
//! The gateway's class waits up to `--max-wait` (at least the longest deadline), so the
//! client's deadline is the one that binds. A client gives up on a request after its deadline
//! plus `--margin` (its connection is dropped); it never retries: a refused request is gone,
//! and the client moves on to a new one after the gateway's hint (at most a quarter second).
//!
//! What it measures, after the warm-up:
//! - served requests, and those served late (answered after their deadline plus the margin,
//!   or given up on by their client);
//! - refusals: the time from sending to the 429 (p50, p99, max) and how many came later
//!   than `--refuse-within` after arriving;
//! - the prediction: on responses that queued at least [`MIN_WAIT_MS`], the wait the queue
//!   predicted when the request joined it (`x-sluice-predicted-ms`) against the wait it had
//!   (`x-sluice-queued-ms`): p50 and p90 of the absolute error, in ms and as a share of the
//!   wait;
//! - the provider's 429s and the utilization of its TPM.
//!
//! Time scale 1: the seconds are real seconds. Everything binds 127.0.0.1, every client
//! stops at the run's end (a request in flight then is bounded by its own deadline), and the
//! gateway and provider are shut down before it returns.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sluice_sim::{Completion, LatencyConfig, Limits, ModelConfig, SimConfig, SimProvider};
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::harness::{key_hash, start_gateway};
use crate::workload::{chat_body, prose};

const MODEL: &str = "gpt-4o";
const KEY: &str = "sk-bench-deadlines";
/// The longest a client pauses after a refusal before its next request.
const MAX_PAUSE: Duration = Duration::from_millis(250);
/// Waits shorter than this are left out of the prediction error (a few ms of scheduling
/// would dominate the share).
const MIN_WAIT_MS: f64 = 100.0;

/// Arguments of `sluice bench deadlines`.
#[derive(Debug, Clone, clap::Args)]
pub struct DeadlinesArgs {
    /// Closed-loop clients.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Seconds the run lasts.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Seconds at the start left out of the figures.
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// The smallest request, tokens (prompt plus `max_tokens`).
    #[arg(long, default_value_t = 200)]
    pub min_tokens: u64,
    /// The largest request, tokens.
    #[arg(long, default_value_t = 1_500)]
    pub max_tokens: u64,
    /// The shortest client deadline, seconds.
    #[arg(long, default_value_t = 0.2)]
    pub min_deadline: f64,
    /// The longest client deadline, seconds.
    #[arg(long, default_value_t = 20.0)]
    pub max_deadline: f64,
    /// The class's `max_wait`, seconds (raised to the longest deadline if shorter).
    #[arg(long, default_value_t = 30)]
    pub max_wait: u64,
    /// How long after its deadline a served request still counts as in time (the provider's
    /// own answer takes some), and a client waits before giving up, ms.
    #[arg(long, default_value_t = 250)]
    pub margin: u64,
    /// A refusal later than this after the request was sent counts as late, ms.
    #[arg(long, default_value_t = 50)]
    pub refuse_within: u64,
    /// The deployment's (and the provider's) requests per minute.
    #[arg(long, default_value_t = 600)]
    pub rpm: u64,
    /// The deployment's (and the provider's) tokens per minute.
    #[arg(long, default_value_t = 60_000)]
    pub tpm: u64,
    /// The provider enforces its limits this many seconds' worth at a time.
    #[arg(long, default_value_t = 1.0)]
    pub provider_window: f64,
    /// Seed of sizes, deadlines and prompts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print the figures as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DeadlinesRun {
    /// Closed-loop clients.
    pub clients: usize,
    /// Requests sent after the warm-up.
    pub sent: u64,
    /// Answered 200.
    pub served: u64,
    /// Served requests that waited in the queue.
    pub served_after_queueing: u64,
    /// Served after their deadline plus the margin.
    pub served_late: u64,
    /// Given up on by their client (no answer by the deadline plus the margin).
    pub abandoned: u64,
    /// Refused by the gateway (429).
    pub refused: u64,
    /// Refusals later than `--refuse-within` after the request was sent.
    pub refused_late: u64,
    /// Of those, the ones that came at their deadline (after at least 90 % of it): waits
    /// that ran out.
    pub refused_at_deadline: u64,
    /// Time from sending to the refusal, ms.
    pub refusal_ms: Percentiles,
    /// Any other answer or a failed connection.
    pub errors: u64,
    /// Predicted against actual waits of served requests that queued at least
    /// [`MIN_WAIT_MS`].
    pub prediction: Prediction,
    /// 429s the provider answered (its own count, the whole run).
    pub provider_429s: u64,
    /// Requests the provider admitted (the whole run).
    pub provider_requests: u64,
    /// Provider-admitted tokens per second after the warm-up ÷ its TPM per second.
    pub tpm_utilization: f64,
}

/// p50, p99 and max of some samples (`None` without samples).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest.
    pub max: Option<f64>,
}

/// The prediction's error over the requests that waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Prediction {
    /// Requests compared.
    pub count: u64,
    /// Median wait, ms.
    pub wait_p50_ms: Option<f64>,
    /// Median of |predicted − actual|, ms.
    pub abs_p50_ms: Option<f64>,
    /// 90th percentile of |predicted − actual|, ms.
    pub abs_p90_ms: Option<f64>,
    /// Median of |predicted − actual| ÷ actual.
    pub rel_p50: Option<f64>,
    /// 90th percentile of |predicted − actual| ÷ actual.
    pub rel_p90: Option<f64>,
    /// Median of predicted − actual, ms (positive: predicted too long).
    pub signed_p50_ms: Option<f64>,
}

/// Runs the benchmark and prints the table (or JSON).
///
/// # Errors
/// When the simulator or the gateway cannot start.
pub async fn run(args: DeadlinesArgs) -> anyhow::Result<()> {
    let run = one(&args).await?;
    let text = if args.json { serde_json::to_string_pretty(&run)? } else { table(&run, &args) };
    std::io::Write::write_all(&mut std::io::stdout(), format!("{text}\n").as_bytes())?;
    Ok(())
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.0} ms"))
}

fn share(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{:.0} %", v * 100.0))
}

/// The figures as a two-column table.
#[must_use]
pub fn table(r: &DeadlinesRun, args: &DeadlinesArgs) -> String {
    let p = &r.prediction;
    let rows: [(String, String); 18] = [
        ("clients".into(), r.clients.to_string()),
        ("requests sent (after warm-up)".into(), r.sent.to_string()),
        ("served".into(), r.served.to_string()),
        ("… of which queued first".into(), r.served_after_queueing.to_string()),
        (format!("served later than deadline + {} ms", args.margin), r.served_late.to_string()),
        ("given up by the client (no answer by deadline + margin)".into(), r.abandoned.to_string()),
        ("refused (429)".into(), r.refused.to_string()),
        (
            "time to the 429: p50 / p99 / max".into(),
            format!("{} / {} / {}", ms(r.refusal_ms.p50), ms(r.refusal_ms.p99), ms(r.refusal_ms.max)),
        ),
        (format!("refused later than {} ms after sending", args.refuse_within), r.refused_late.to_string()),
        ("… of which at their deadline (≥ 90 % of it)".into(), r.refused_at_deadline.to_string()),
        ("other errors".into(), r.errors.to_string()),
        (format!("waits compared (≥ {MIN_WAIT_MS:.0} ms)"), p.count.to_string()),
        ("wait p50".into(), ms(p.wait_p50_ms)),
        (
            "prediction error, abs(predicted − actual): p50 / p90".into(),
            format!("{} / {}", ms(p.abs_p50_ms), ms(p.abs_p90_ms)),
        ),
        ("prediction error ÷ actual wait: p50 / p90".into(), format!("{} / {}", share(p.rel_p50), share(p.rel_p90))),
        ("predicted − actual, signed: p50".into(), ms(p.signed_p50_ms)),
        ("provider 429s".into(), format!("{} of {}", r.provider_429s, r.provider_requests + r.provider_429s)),
        ("TPM utilization".into(), format!("{:.3}", r.tpm_utilization)),
    ];
    let mut out = String::from("| figure | value |\n|---|---:|\n");
    for (k, v) in rows {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    out.pop();
    out
}

fn sim_config(args: &DeadlinesArgs) -> SimConfig {
    let limits = Limits { rpm: Some(args.rpm), tpm: Some(args.tpm), ..Limits::default() }
        .quantized(args.provider_window * 1000.0);
    let mut model = ModelConfig::openai(MODEL).with_limits(limits);
    // Answers of a few tokens: the run is bound by admission, not by generation.
    model.completion = Completion::Normal { mean: 20.0, stddev: 5.0 };
    let latency = LatencyConfig { ttft_ms: 40.0, per_token_ms: 1.0, jitter: 0.2, ..LatencyConfig::default() };
    SimConfig { time_scale: 1.0, seed: Some(args.seed), latency, models: vec![model], ..SimConfig::default() }
}

/// The deployment's per-minute limits (default burst), one class whose `max_wait` covers
/// the longest client deadline, one tenant and key.
fn gateway_config(sim_url: &str, args: &DeadlinesArgs) -> String {
    let max_wait = args.max_wait.max(args.max_deadline.ceil() as u64);
    format!(
        "[[providers]]\nname = \"sim\"\nkind = \"openai\"\nbase_url = \"{sim_url}\"\n\
         api_key_file = \"{{key_file}}\"\n\n[[deployments]]\nname = \"sim-{MODEL}\"\nprovider = \"sim\"\nmodel = \"{MODEL}\"\n\
         limits = {{ rpm = {rpm}, tpm = {tpm} }}\n\n[[models]]\nname = \"{MODEL}\"\ndeployment = \"sim-{MODEL}\"\n\n\
         [[classes]]\nname = \"interactive\"\nmax_wait = \"{max_wait}s\"\n\n\
         [[tenants]]\nname = \"bench\"\n\n[[keys]]\nid = \"bench\"\ntenant = \"bench\"\nclass = \"interactive\"\nsha256 = \"{key}\"\n",
        rpm = args.rpm,
        tpm = args.tpm,
        key = key_hash(KEY),
    )
}

/// One request's fate, as its client saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Record {
    /// When it was sent, seconds since the run started.
    at: f64,
    /// Its deadline, ms.
    deadline_ms: f64,
    outcome: Outcome,
    /// From sending to the answer (or to giving up), ms.
    elapsed_ms: f64,
    /// `x-sluice-queued-ms` of a 200.
    queued_ms: Option<f64>,
    /// `x-sluice-predicted-ms` of a 200.
    predicted_ms: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Served,
    Refused,
    Abandoned,
    Error,
}

async fn one(args: &DeadlinesArgs) -> anyhow::Result<DeadlinesRun> {
    let sim = SimProvider::start(sim_config(args)).await?;
    let gateway = start_gateway(&gateway_config(&sim.url(), args)).await?;
    let chat: http::Uri = format!("{}/v1/chat/completions", gateway.url()).parse()?;
    sim.reset();
    let start = Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let records = Arc::new(Mutex::new(Vec::new()));
    let min_deadline = args.min_deadline.max(0.001);
    let setup = Setup {
        chat,
        sizes: (args.min_tokens.max(50), args.max_tokens.max(args.min_tokens.max(50))),
        deadlines: (min_deadline, args.max_deadline.max(min_deadline)),
        margin: Duration::from_millis(args.margin),
        start,
        end,
    };
    let mut tasks = Vec::with_capacity(args.clients);
    for c in 0..args.clients.max(1) {
        let (setup, records) = (setup.clone(), Arc::clone(&records));
        let seed = args.seed.wrapping_mul(1_000).wrapping_add(c as u64);
        tasks.push(tokio::spawn(client(setup, c, seed, records)));
    }
    for task in tasks {
        let _ = task.await;
    }
    let stats = sim.stats();
    gateway.shutdown().await;
    sim.shutdown().await;

    let warmup = args.warmup.min(args.seconds.saturating_sub(1));
    let records: Vec<Record> = records.lock().iter().copied().filter(|r| r.at >= warmup as f64).collect();
    let count = |o: Outcome| records.iter().filter(|r| r.outcome == o).count() as u64;
    let limited = &stats.rate_limited;
    let measured = warmup..args.seconds;
    let tokens: u64 = stats.timeline.iter().filter(|s| measured.contains(&s.second)).map(|s| s.tokens).sum();
    let per_second = args.tpm as f64 / 60.0;
    let seconds = measured.end.saturating_sub(measured.start).max(1) as f64;
    let (refusal_ms, refused_late) = refusals(&records, args.refuse_within as f64);
    let refused_at_deadline = at_deadline(&records, args.refuse_within as f64);
    Ok(DeadlinesRun {
        clients: args.clients.max(1),
        sent: records.len() as u64,
        served: count(Outcome::Served),
        served_after_queueing: records.iter().filter(|r| r.outcome == Outcome::Served && r.queued_ms.is_some()).count()
            as u64,
        served_late: served_late(&records, args.margin as f64),
        abandoned: count(Outcome::Abandoned),
        refused: count(Outcome::Refused),
        refused_late,
        refused_at_deadline,
        refusal_ms,
        errors: count(Outcome::Error),
        prediction: prediction(&records, MIN_WAIT_MS),
        provider_429s: limited.requests + limited.tokens + limited.input_tokens + limited.output_tokens,
        provider_requests: stats.timeline.iter().map(|s| s.requests).sum(),
        tpm_utilization: tokens as f64 / (per_second * seconds),
    })
}

/// The nearest-rank quantile `q` of `values` (sorted here).
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Served requests answered later than their deadline plus `margin_ms`.
fn served_late(records: &[Record], margin_ms: f64) -> u64 {
    records.iter().filter(|r| r.outcome == Outcome::Served && r.elapsed_ms > r.deadline_ms + margin_ms).count() as u64
}

/// The times to the refusals, and how many came later than `within_ms`.
fn refusals(records: &[Record], within_ms: f64) -> (Percentiles, u64) {
    let times: Vec<f64> = records.iter().filter(|r| r.outcome == Outcome::Refused).map(|r| r.elapsed_ms).collect();
    let late = times.iter().filter(|&&t| t > within_ms).count() as u64;
    (Percentiles { p50: quantile(&times, 0.5), p99: quantile(&times, 0.99), max: quantile(&times, 1.0) }, late)
}

/// Refusals later than `within_ms` that came after at least 90 % of their deadline.
fn at_deadline(records: &[Record], within_ms: f64) -> u64 {
    records
        .iter()
        .filter(|r| r.outcome == Outcome::Refused && r.elapsed_ms > within_ms && r.elapsed_ms >= 0.9 * r.deadline_ms)
        .count() as u64
}

/// Predicted against actual waits of the served requests that waited at least `min_wait_ms`.
fn prediction(records: &[Record], min_wait_ms: f64) -> Prediction {
    let pairs: Vec<(f64, f64)> = records
        .iter()
        .filter(|r| r.outcome == Outcome::Served)
        .filter_map(|r| Some((r.predicted_ms?, r.queued_ms?)))
        .filter(|&(_, actual)| actual >= min_wait_ms && actual > 0.0)
        .collect();
    let abs: Vec<f64> = pairs.iter().map(|(p, a)| (p - a).abs()).collect();
    let rel: Vec<f64> = pairs.iter().map(|(p, a)| (p - a).abs() / a).collect();
    let signed: Vec<f64> = pairs.iter().map(|(p, a)| p - a).collect();
    let waits: Vec<f64> = pairs.iter().map(|&(_, a)| a).collect();
    Prediction {
        count: pairs.len() as u64,
        wait_p50_ms: quantile(&waits, 0.5),
        abs_p50_ms: quantile(&abs, 0.5),
        abs_p90_ms: quantile(&abs, 0.9),
        rel_p50: quantile(&rel, 0.5),
        rel_p90: quantile(&rel, 0.9),
        signed_p50_ms: quantile(&signed, 0.5),
    }
}

/// What every client shares.
#[derive(Debug, Clone)]
struct Setup {
    chat: http::Uri,
    /// Sizes, tokens, drawn uniformly.
    sizes: (u64, u64),
    /// Deadlines, seconds, drawn log-uniformly.
    deadlines: (f64, f64),
    margin: Duration,
    start: Instant,
    end: Instant,
}

/// A header's value in milliseconds.
fn header_ms(headers: &http::HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// One closed-loop client: a request at a time until the run's end, never retried.
async fn client(setup: Setup, index: usize, seed: u64, records: Arc<Mutex<Vec<Record>>>) {
    let http = HttpClient::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let user = format!("client-{index}");
    let (low, high) = (setup.deadlines.0.ln(), setup.deadlines.1.ln());
    let mut n = 0usize;
    while Instant::now() < setup.end {
        n += 1;
        let size = rng.random_range(setup.sizes.0..=setup.sizes.1);
        let deadline = Duration::from_secs_f64(if high > low { rng.random_range(low..=high) } else { low }.exp());
        let deadline_ms = deadline.as_millis() as u64;
        let max_tokens = (size / 5).max(16);
        let prompt = usize::try_from(size - max_tokens).unwrap_or(usize::MAX);
        let body: Bytes = chat_body(MODEL, &user, &prose(prompt, &mut rng), max_tokens, &format!("{user}-{n}"));
        let headers = [("x-sluice-max-wait-ms", deadline_ms.to_string())];
        let at = setup.start.elapsed().as_secs_f64();
        let sent = Instant::now();
        let reply =
            tokio::time::timeout(deadline + setup.margin, http.post_json_with(&setup.chat, Some(KEY), &headers, body))
                .await;
        let elapsed_ms = sent.elapsed().as_secs_f64() * 1000.0;
        let (mut queued_ms, mut predicted_ms, mut hint) = (None, None, None);
        let outcome = match reply {
            Err(_) => Outcome::Abandoned,
            Ok(Err(_)) => Outcome::Error,
            Ok(Ok(reply)) if reply.is_success() => {
                queued_ms = header_ms(&reply.headers, "x-sluice-queued-ms");
                predicted_ms = header_ms(&reply.headers, "x-sluice-predicted-ms");
                Outcome::Served
            }
            Ok(Ok(reply)) if reply.status == 429 => {
                hint = reply.retry_after;
                Outcome::Refused
            }
            Ok(Ok(_)) => Outcome::Error,
        };
        records.lock().push(Record {
            at,
            deadline_ms: deadline_ms as f64,
            outcome,
            elapsed_ms,
            queued_ms,
            predicted_ms,
        });
        if let Some(hint) = hint {
            let pause = hint.min(MAX_PAUSE).min(setup.end.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(outcome: Outcome, deadline_ms: f64, elapsed_ms: f64) -> Record {
        Record { at: 10.0, deadline_ms, outcome, elapsed_ms, queued_ms: None, predicted_ms: None }
    }

    fn waited(predicted: f64, actual: f64) -> Record {
        Record { queued_ms: Some(actual), predicted_ms: Some(predicted), ..record(Outcome::Served, 20_000.0, actual) }
    }

    #[test]
    fn nearest_rank_quantiles_of_unsorted_values() {
        let values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), Some(50.0));
        assert_eq!(quantile(&values, 0.9), Some(90.0));
        assert_eq!(quantile(&values, 0.99), Some(99.0));
        assert_eq!(quantile(&values, 1.0), Some(100.0));
        assert_eq!(quantile(&[7.0], 0.0), Some(7.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn a_request_served_after_its_deadline_and_the_margin_is_late() {
        let records = [
            record(Outcome::Served, 1_000.0, 1_200.0),
            record(Outcome::Served, 1_000.0, 1_300.0),
            record(Outcome::Served, 200.0, 60.0),
            // Refusals and abandoned requests are counted on their own.
            record(Outcome::Refused, 200.0, 5_000.0),
            record(Outcome::Abandoned, 200.0, 450.0),
        ];
        assert_eq!(served_late(&records, 250.0), 1);
        assert_eq!(served_late(&records, 100.0), 2);
    }

    #[test]
    fn refusals_later_than_the_bound_are_counted() {
        let records = [
            record(Outcome::Refused, 500.0, 2.0),
            record(Outcome::Refused, 500.0, 4.0),
            record(Outcome::Refused, 50.0, 51.0),
            record(Outcome::Served, 500.0, 900.0),
        ];
        let (times, late) = refusals(&records, 50.0);
        assert_eq!(late, 1);
        assert_eq!(times, Percentiles { p50: Some(4.0), p99: Some(51.0), max: Some(51.0) });
        assert_eq!(refusals(&[], 50.0), (Percentiles::default(), 0));
        // The late one came at its deadline; one long before its deadline did not.
        assert_eq!(at_deadline(&records, 50.0), 1);
        assert_eq!(at_deadline(&[record(Outcome::Refused, 5_000.0, 400.0)], 50.0), 0);
    }

    #[test]
    fn the_prediction_error_is_over_served_requests_that_waited() {
        let records = [
            waited(1_100.0, 1_000.0), // 10 % long
            waited(1_500.0, 2_000.0), // 25 % short
            waited(4_000.0, 4_000.0), // exact
            waited(900.0, 50.0),      // too short a wait to count
            record(Outcome::Served, 300.0, 80.0),
        ];
        let p = prediction(&records, 100.0);
        assert_eq!(p.count, 3);
        assert_eq!(p.wait_p50_ms, Some(2_000.0));
        assert_eq!(p.abs_p50_ms, Some(100.0));
        assert_eq!(p.abs_p90_ms, Some(500.0));
        assert_eq!(p.rel_p50, Some(0.1));
        assert_eq!(p.rel_p90, Some(0.25));
        assert_eq!(p.signed_p50_ms, Some(0.0));
    }

    #[test]
    fn deadlines_are_read_from_headers_in_ms() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-sluice-queued-ms", http::HeaderValue::from(1_234u64));
        assert_eq!(header_ms(&headers, "x-sluice-queued-ms"), Some(1_234.0));
        assert_eq!(header_ms(&headers, "x-sluice-predicted-ms"), None);
    }

    #[test]
    fn the_class_waits_at_least_the_longest_deadline() {
        let args = DeadlinesArgs {
            clients: 1,
            seconds: 1,
            warmup: 0,
            min_tokens: 200,
            max_tokens: 1_500,
            min_deadline: 0.2,
            max_deadline: 45.5,
            max_wait: 30,
            margin: 250,
            refuse_within: 50,
            rpm: 600,
            tpm: 60_000,
            provider_window: 1.0,
            seed: 0,
            json: false,
        };
        let config = gateway_config("http://127.0.0.1:1", &args);
        assert!(config.contains("max_wait = \"46s\""), "{config}");
        assert!(config.contains("class = \"interactive\""), "{config}");
    }
}
