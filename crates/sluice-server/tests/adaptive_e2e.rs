//! Adaptive limits end to end, over real HTTP against the strict simulated provider
//! (issue 7's "Done when"):
//! - the provider halves its TPM mid-run, then raises it beyond the configured limit: sluice
//!   follows both from the `x-ratelimit-*-tokens` headers (`adopt_provider_limits = true`),
//!   without provider 429s and using the new limit;
//! - `max_tokens` 4× above the real output on an Anthropic-shaped model that counts output
//!   after generation (OTPM binding): `p95` uses the output limit to the last percent;
//!   `strict` billed `max_tokens` (`output_counting = "reserved"`) gets a quarter; `strict`
//!   billed what was generated gets in between — its refunds come back only after each
//!   answer, so the excess of the calls in flight is lent out of the limit until the flow of
//!   refunds catches up.
//!
//! Run: `cargo test -p sluice-server --test adaptive_e2e -- --nocapture` (the figures are
//! printed to stderr; `docs/benchmarks.md`, "Adaptive limits").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Env, KEY, chat, mean_rate, sha, start};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, LatencyConfig, Limits, ModelConfig, OutputAccounting, SimConfig};
use tokio::time::Instant;

/// Posts `body` to `path` until the gateway lets it through to the provider, waiting as its
/// `retry-after-ms` says, until `end`. The outcome, or `None` when time ran out.
async fn patiently(env: &Env, path: &str, body: &Value, end: Instant) -> Option<(u16, Value)> {
    loop {
        if Instant::now() >= end {
            return None;
        }
        // A call still waiting in sluice's queue at the end is dropped.
        let (status, headers, value) = tokio::time::timeout_at(end, env.post(path, KEY, body)).await.ok()?;
        if status != 429 || value["error"]["gateway_decision"] != "rejected_before_send" {
            return Some((status, value));
        }
        let wait: u64 = headers.get("retry-after-ms").unwrap().to_str().unwrap().parse().unwrap();
        let wake = Instant::now() + Duration::from_millis(wait.max(1));
        if wake >= end {
            return None;
        }
        tokio::time::sleep_until(wake).await;
    }
}

/// `clients` loops posting `body` to `path` patiently until `end`; every outcome.
async fn saturate(env: &Arc<Env>, path: &'static str, body: Value, clients: usize, end: Instant) -> Vec<(u16, Value)> {
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let env = Arc::clone(env);
            let body = body.clone();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                // Bounded by `end`, and by count in case every call came back at once.
                for _ in 0..100_000 {
                    match patiently(&env, path, &body, end).await {
                        Some(outcome) => seen.push(outcome),
                        None => break,
                    }
                }
                seen
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all
}

fn provider_rejected(outcomes: &[(u16, Value)]) -> usize {
    outcomes.iter().filter(|(_, v)| v["error"]["gateway_decision"] == "admitted_then_provider_rejected").count()
}

// ---------------------------------------------------------------------------------------
// The provider halves its TPM, then raises it.

const MODEL: &str = "gpt-4o-mini";
/// The configured and initial provider limit: 10,000 tokens a second.
const TPM: u64 = 600_000;
/// Halved mid-run.
const HALF: u64 = TPM / 2;
/// Raised beyond the configured limit (adoption follows the provider, up too).
const RAISED: u64 = TPM * 3 / 2;
/// Real seconds since the start when the provider halves its limit, then raises it.
const HALVE_AT: u64 = 5;
const RAISE_AT: u64 = 11;
const END_AT: u64 = 17;

fn tpm_limits(tpm: u64) -> Limits {
    Limits { tpm: Some(tpm), ..Limits::default() }
}

fn tier_policy() -> String {
    format!(
        r#"
[[deployments]]
name = "sim-mini"
provider = "sim"
model = "{MODEL}"
limits = {{ tpm = {TPM} }}
adopt_provider_limits = true

[[models]]
name = "fast"
deployment = "sim-mini"

[[tenants]]
name = "acme"

[[keys]]
id = "k"
tenant = "acme"
sha256 = "{key}"
"#,
        key = sha(KEY)
    )
}

async fn sleep_until_second(start: Instant, second: u64) {
    tokio::time::sleep_until(start + Duration::from_secs(second)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_halves_then_raises_its_tpm_and_sluice_follows_without_429s() {
    // time_scale 1: the provider's reported per-minute limit is per real minute, like
    // sluice's; ~400-token calls (prompt + max_tokens, OpenAI's admission charge) answered
    // at once: 25 calls a second at 600,000 TPM.
    let model = ModelConfig { completion: Completion::Fixed { tokens: 20 }, ..ModelConfig::openai(MODEL) };
    let sim = SimConfig { models: vec![model.with_limits(tpm_limits(TPM))], ..SimConfig::default() };
    let env = Arc::new(start(sim, &tier_policy()).await);
    // The sim's timeline counts real seconds from here.
    env.sim.reset();
    let started = Instant::now();
    let end = started + Duration::from_secs(END_AT);
    let clients = saturate(&env, "/v1/chat/completions", chat("fast", 350, 40), 16, end);
    let provider = {
        let env = Arc::clone(&env);
        async move {
            sleep_until_second(started, HALVE_AT).await;
            env.sim.set_limits(MODEL, &tpm_limits(HALF)).unwrap();
            sleep_until_second(started, RAISE_AT).await;
            env.sim.set_limits(MODEL, &tpm_limits(RAISED)).unwrap();
        }
    };
    let (outcomes, ()) = tokio::join!(clients, provider);

    let stats = env.sim.stats();
    let per_second = |tpm: u64| tpm as f64 / 60.0;
    let before = mean_rate(&env.sim, 2, HALVE_AT, true) / per_second(TPM);
    // Within 5 s of the change (the second it happened in excluded): at the new limit, not above.
    let halved = mean_rate(&env.sim, HALVE_AT + 1, HALVE_AT + 6, true) / per_second(HALF);
    let raised = mean_rate(&env.sim, RAISE_AT + 2, END_AT - 1, true) / per_second(RAISED);
    let requests = stats.requests.max(1);
    let rejected = stats.rate_limited.total();
    let share = rejected as f64 / requests as f64;
    let timeline: Vec<_> = stats.timeline.iter().map(|s| s.tokens).collect();
    let figures = format!(
        "utilization before {before:.3}, after halving {halved:.3}, after raising {raised:.3}; \
         provider 429s {rejected} of {requests} ({share:.4}); seen by clients {}; tokens per second {timeline:?}",
        provider_rejected(&outcomes)
    );
    eprintln!("halve and raise: {figures}");
    assert!(outcomes.iter().all(|(status, _)| *status == 200), "{figures}");
    assert!(share <= 0.01, "{figures}");
    assert!((0.9..=1.05).contains(&before), "{figures}");
    assert!((0.9..=1.05).contains(&halved), "{figures}");
    assert!((0.9..=1.05).contains(&raised), "{figures}");
    // Sluice counted both tier changes.
    let metrics = env.metrics().await;
    let changes = metrics.lines().find(|l| l.starts_with("sluice_provider_limit_changes_total{")).unwrap_or("");
    assert!(changes.ends_with(" 2"), "{changes}");
    Arc::into_inner(env).unwrap().shutdown().await;
}

// ---------------------------------------------------------------------------------------
// max_tokens 4× above the real output: strict against p95.

const CLAUDE: &str = "claude-sim";
/// Output tokens per minute: 2,000 a second.
const OTPM: u64 = 120_000;
/// Every answer is this long...
const OUTPUT: u64 = 100;
/// ...and every request allows four times as much.
const MAX_TOKENS: u64 = 4 * OUTPUT;
/// Generation time: 35 ms a token, 3.5 s an answer.
const PER_TOKEN_MS: f64 = 35.0;
/// Clients: at the limit, 20 answers a second each 3.5 s long are 70 in flight.
const CLIENTS: usize = 96;
/// Run length and the steady state (after p95's warm-up and the waves of the first answers
/// priced at `max_tokens` have passed).
const RUN: u64 = 27;
const STEADY: (u64, u64) = (20, 26);

/// How a run reserves output and how the deployment's bucket is billed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `strict`, billed what was generated (`output_counting = "actual"`, Anthropic's rule).
    StrictActual,
    /// `strict`, billed `max_tokens` (`output_counting = "reserved"`, as for a provider that
    /// charges `max_tokens` on arrival).
    StrictReserved,
    /// `p95`, billed what was generated.
    P95,
}

fn output_policy(mode: Mode) -> String {
    let estimate = match mode {
        Mode::P95 => "output_counting = \"actual\"\noutput_estimate = \"p95\"\noutput_warmup = 10",
        Mode::StrictActual => "output_counting = \"actual\"\noutput_estimate = \"strict\"",
        Mode::StrictReserved => "output_counting = \"reserved\"\noutput_estimate = \"strict\"",
    };
    format!(
        r#"
[[deployments]]
name = "sim-claude"
provider = "sim-anthropic"
model = "{CLAUDE}"
limits = {{ output_tpm = {OTPM} }}
{estimate}

[[models]]
name = "claude"
deployment = "sim-claude"

# Callers wait in sluice's queue for their turn rather than being sent away.
[[classes]]
name = "interactive"
max_wait = "30s"

[[tenants]]
name = "acme"

[[keys]]
id = "k"
tenant = "acme"
sha256 = "{key}"
"#,
        key = sha(KEY)
    )
}

/// What one run measured.
struct OutputRun {
    mode: Mode,
    /// Output admitted per second over OTPM per second, in the steady state (every answer
    /// is `OUTPUT` tokens, so admissions × `OUTPUT` is what the provider will count).
    steady: f64,
    /// Output generated over the whole run, per second, over OTPM per second.
    overall: f64,
    provider_429s: u64,
    client_provider_429s: usize,
    served: usize,
    timeline: Vec<u64>,
}

impl OutputRun {
    fn describe(&self) -> String {
        format!(
            "{:?}: steady {:.3}, whole run {:.3}, served {}, provider 429s {} (clients saw {}), admitted per second {:?}",
            self.mode,
            self.steady,
            self.overall,
            self.served,
            self.provider_429s,
            self.client_provider_429s,
            self.timeline
        )
    }
}

async fn output_run(mode: Mode) -> OutputRun {
    let latency = LatencyConfig { ttft_ms: 0.0, per_token_ms: PER_TOKEN_MS, jitter: 0.0, ..LatencyConfig::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: OUTPUT },
        output_accounting: OutputAccounting::Actual,
        latency: Some(latency),
        ..ModelConfig::anthropic(CLAUDE)
    };
    let limits = Limits { otpm: Some(OTPM), ..Limits::default() };
    let sim = SimConfig { models: vec![model.with_limits(limits)], ..SimConfig::default() };
    let env = Arc::new(start(sim, &output_policy(mode)).await);
    env.sim.reset();
    let started = Instant::now();
    let body = json!({"model": "claude", "max_tokens": MAX_TOKENS,
                      "messages": [{"role": "user", "content": "write a short story about a river"}]});
    let clients = saturate(&env, "/v1/messages", body, CLIENTS, started + Duration::from_secs(RUN));
    let outcomes = clients.await;
    let elapsed = started.elapsed().as_secs_f64();
    let per_second = OTPM as f64 / 60.0;
    let stats = env.sim.stats();
    let run = OutputRun {
        mode,
        steady: mean_rate(&env.sim, STEADY.0, STEADY.1, false) * OUTPUT as f64 / per_second,
        overall: stats.tokens.output_used as f64 / elapsed / per_second,
        provider_429s: stats.rate_limited.total(),
        client_provider_429s: provider_rejected(&outcomes),
        served: outcomes.iter().filter(|(s, _)| *s == 200).count(),
        timeline: stats.timeline.iter().map(|s| s.requests).collect(),
    };
    assert!(outcomes.iter().all(|(status, _)| *status == 200), "{mode:?}: {:?}", outcomes.iter().find(|o| o.0 != 200));
    Arc::into_inner(env).unwrap().shutdown().await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_tokens_4x_the_output_p95_uses_the_output_limit() {
    let (p95, strict, reserved) =
        tokio::join!(output_run(Mode::P95), output_run(Mode::StrictActual), output_run(Mode::StrictReserved));
    let figures = [&p95, &strict, &reserved].map(OutputRun::describe).join("\n");
    eprintln!("max_tokens 4x:\n{figures}");
    for run in [&p95, &strict, &reserved] {
        assert_eq!(run.provider_429s, 0, "{figures}");
        assert_eq!(run.client_provider_429s, 0, "{figures}");
    }
    assert!((0.98..=1.02).contains(&p95.steady), "{figures}");
    // Billed max_tokens, strict gets a quarter; billed what was generated, strict gets the
    // limit back only after the refunds of its in-flight excess flow (in between).
    assert!((0.22..=0.27).contains(&reserved.steady), "{figures}");
    assert!(strict.steady > reserved.steady && strict.steady <= p95.steady, "{figures}");
    assert!(p95.served > strict.served && strict.served > reserved.served, "{figures}");
}
