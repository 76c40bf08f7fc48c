//! The demo's figures: one [`SideReport`] per side, printed as a table or as JSON.

use serde::Serialize;
use sluice_sim::StatsSnapshot;

use crate::baseline::ProviderLatency;
use crate::drive::Tally;
use crate::stats::Summary;
use crate::utilization::{self, Utilization};

/// What the interactive users experienced, end to end (waits and retries included).
#[derive(Debug, Clone, Serialize)]
pub struct Interactive {
    /// Median latency, ms.
    pub p50_ms: Option<f64>,
    /// 95th percentile, ms.
    pub p95_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Requests answered.
    pub served: usize,
    /// Requests given up after the retry budget.
    pub failed: usize,
    /// Requests still waiting when the side ended.
    pub unfinished: usize,
    /// 429s the interactive clients saw (from the gateway; on the naive side, from the
    /// provider, seen by the workers that retry for them).
    pub client_429s: u64,
}

/// How the batch job fared.
#[derive(Debug, Clone, Serialize)]
pub struct Batch {
    /// Requests in the job.
    pub requests: usize,
    /// Requests answered.
    pub served: usize,
    /// Requests given up.
    pub failed: usize,
    /// Seconds until every request had ended; `None` when it did not within the deadline.
    pub completed_secs: Option<f64>,
    /// The side's deadline, seconds.
    pub deadline_secs: f64,
}

/// The figures of one side.
#[derive(Debug, Clone, Serialize)]
pub struct SideReport {
    /// 429s the provider answered (from its own stats).
    pub provider_429s: u64,
    /// Interactive latency.
    pub interactive: Interactive,
    /// The batch job.
    pub batch: Batch,
    /// Utilization of the binding limit while the batch ran (`None`: too short to tell).
    pub utilization: Option<Utilization>,
    /// Over the same seconds, the batch's tokens ÷ the tokens the interactive users left
    /// (`None`: too short to tell).
    pub batch_of_leftover: Option<f64>,
    /// Requests the provider served.
    pub requests_served: u64,
    /// Client-side waits: 429s from the gateway (gateway side) or backoff retries (naive side).
    pub client_retries: u64,
    /// Requests the provider served more than once (`req-id` markers).
    pub duplicates: u64,
    /// How long the side ran, seconds.
    pub elapsed_secs: f64,
}

/// What a side's figures are measured against.
#[derive(Debug, Clone, Copy)]
pub struct SideContext {
    /// The provider's requests per real second.
    pub rps: f64,
    /// The provider's tokens per real second.
    pub tps: f64,
    /// Requests in the batch job.
    pub batch_requests: usize,
    /// The side's deadline, seconds.
    pub deadline_secs: f64,
    /// Client-side waits or retries (see [`SideReport::client_retries`]).
    pub client_retries: u64,
    /// 429s seen on interactive requests (see [`Interactive::client_429s`]).
    pub interactive_429s: u64,
}

impl SideReport {
    /// Combines the clients' tally with the provider's stats; `interactive` holds the
    /// tokens charged to interactive users, sampled once a second from the side's start.
    #[must_use]
    pub fn new(tally: Tally, stats: &StatsSnapshot, ctx: SideContext, interactive: &[u64]) -> Self {
        let running = tally.batch_done_after.unwrap_or(tally.elapsed).as_secs_f64();
        let (from, to) = utilization::saturated_interval(running);
        let latency: Summary = tally.interactive.summary();
        Self {
            provider_429s: stats.rate_limited.total(),
            interactive: Interactive {
                p50_ms: latency.p50_ms,
                p95_ms: latency.p95_ms,
                p99_ms: latency.p99_ms,
                served: latency.count,
                failed: tally.interactive_failed,
                unfinished: tally.interactive_unfinished,
                client_429s: ctx.interactive_429s,
            },
            batch: Batch {
                requests: ctx.batch_requests,
                served: tally.batch_served,
                failed: tally.batch_failed,
                completed_secs: tally.batch_done_after.map(|d| d.as_secs_f64()),
                deadline_secs: ctx.deadline_secs,
            },
            utilization: utilization::over(&stats.timeline, from, to, ctx.rps, ctx.tps),
            batch_of_leftover: utilization::batch_of_leftover(&stats.timeline, from, to, ctx.tps, interactive),
            requests_served: stats.served,
            client_retries: ctx.client_retries,
            duplicates: stats.duplicates,
            elapsed_secs: tally.elapsed.as_secs_f64(),
        }
    }
}

/// Both sides and the scenario that produced them.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    /// The parameters.
    pub scenario: serde_json::Value,
    /// The provider's own latency for an interactive request (direct, no contention).
    pub provider_latency: ProviderLatency,
    /// Through the gateway.
    pub gateway: SideReport,
    /// Uncoordinated workers straight at the provider (`None` when not run).
    pub naive: Option<SideReport>,
}

impl DemoReport {
    /// The side-by-side table; `gateway_title` heads the gateway's column.
    #[must_use]
    pub fn table(&self, gateway_title: &str, workers: usize) -> String {
        let g = &self.gateway;
        let n = self.naive.as_ref();
        let other = |f: &dyn Fn(&SideReport) -> String| n.map_or_else(|| "–".to_owned(), f);
        let rows = [
            ("provider 429s", g.provider_429s.to_string(), other(&|n| n.provider_429s.to_string())),
            ("interactive p50 / p95 / p99", latencies(&g.interactive), other(&|n| latencies(&n.interactive))),
            ("interactive 429s seen by clients", client_429s(g), other(&client_429s)),
            ("interactive served / failed / unfinished", counts(&g.interactive), other(&|n| counts(&n.interactive))),
            ("batch completion", batch(&g.batch), other(&|n| batch(&n.batch))),
            (
                "utilization of binding limit (saturated)",
                util(g.utilization.as_ref()),
                other(&|n| util(n.utilization.as_ref())),
            ),
            (
                "batch: use of the capacity interactive leaves",
                percent(g.batch_of_leftover),
                other(&|n| percent(n.batch_of_leftover)),
            ),
            (
                "requests served by the provider",
                g.requests_served.to_string(),
                other(&|n| n.requests_served.to_string()),
            ),
            ("client waits / retries", g.client_retries.to_string(), other(&|n| n.client_retries.to_string())),
        ];
        let naive_title = format!("{workers} workers, own backoff");
        let mut out = format!("| | {gateway_title} | {naive_title} |\n|---|---:|---:|\n");
        for (name, a, b) in rows {
            out.push_str(&format!("| {name} | {a} | {b} |\n"));
        }
        let p = &self.provider_latency;
        let refused = match (p.refused, p.failed) {
            (0, 0) => String::new(),
            (r, 0) => format!("; {r} attempts refused first, sent again after the provider's hint"),
            (r, f) => format!("; {r} attempts refused first, {f} requests failed"),
        };
        out.push_str(&format!(
            "\nProvider's own latency, interactive request sent directly without contention \
             ({} requests{refused}): p50 {} / p99 {} ms; through sluice, p99 − provider p99 = {} ms.\n",
            p.served,
            ms(p.p50_ms),
            ms(p.p99_ms),
            g.interactive
                .p99_ms
                .zip(p.p99_ms)
                .map_or_else(|| "–".to_owned(), |(a, b)| format!("{:+.0}", (a - b).round() + 0.0)),
        ));
        out
    }
}

fn client_429s(side: &SideReport) -> String {
    side.interactive.client_429s.to_string()
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1} %", v * 100.0))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"))
}

fn latencies(i: &Interactive) -> String {
    format!("{} / {} / {} ms", ms(i.p50_ms), ms(i.p95_ms), ms(i.p99_ms))
}

fn counts(i: &Interactive) -> String {
    format!("{} / {} / {}", i.served, i.failed, i.unfinished)
}

fn batch(b: &Batch) -> String {
    match b.completed_secs {
        Some(s) if b.failed == 0 => format!("{} requests in {s:.1} s", b.served),
        Some(s) => format!("{} served, {} failed, in {s:.1} s", b.served, b.failed),
        None => format!("did not finish within {:.0} s ({} of {} served)", b.deadline_secs, b.served, b.requests),
    }
}

fn util(u: Option<&Utilization>) -> String {
    u.map_or_else(
        || "–".to_owned(),
        |u| format!("{:.1} % of {} (s {}–{})", u.value * 100.0, u.binding_limit, u.from_second, u.to_second),
    )
}
