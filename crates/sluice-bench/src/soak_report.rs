//! The soak's figures: one [`Interval`] per sample, as CSV, as a plot (RSS, latency and
//! provider 429s over time), and a verdict on flatness that compares the first fifth of the
//! run with the last.

use std::fmt::Write as _;

use crate::plot::{Panel, Scale, Series, figure};

/// RSS growth from the first fifth to the last that still counts as flat.
pub const RSS_GROWTH_LIMIT: f64 = 0.10;
/// p99 drift from the first fifth to the last that still counts as flat (relative) …
pub const P99_DRIFT_LIMIT: f64 = 0.25;
/// … unless the absolute drift is below this (ms): a few ms on a shared machine is noise.
pub const P99_DRIFT_FLOOR_MS: f64 = 5.0;

/// One sampling interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    /// End of the interval, seconds since the load started.
    pub at_secs: f64,
    /// The gateway's resident set size at the end, KiB.
    pub rss_kib: Option<u64>,
    /// Successful answers (synchronous requests) completed in the interval.
    pub ok: u64,
    /// Failed requests (non-2xx other than the gateway's 429, transport errors, timeouts).
    pub errors: u64,
    /// The gateway's own 429s.
    pub gateway_429s: u64,
    /// 429s the provider answered in the interval.
    pub provider_429s: u64,
    /// Async jobs accepted (202).
    pub jobs: u64,
    /// Median latency of the successful answers, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
}

const CSV_HEADER: &str = "at_s,rss_kib,ok,errors,gateway_429s,provider_429s,jobs_accepted,p50_ms,p99_ms";

impl Interval {
    /// The interval as a CSV row.
    #[must_use]
    pub fn csv(&self) -> String {
        let opt = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.3}"));
        format!(
            "{:.1},{},{},{},{},{},{},{},{}",
            self.at_secs,
            self.rss_kib.map_or_else(String::new, |v| v.to_string()),
            self.ok,
            self.errors,
            self.gateway_429s,
            self.provider_429s,
            self.jobs,
            opt(self.p50_ms),
            opt(self.p99_ms)
        )
    }

    /// A progress line.
    #[must_use]
    pub fn line(&self) -> String {
        let ms = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
        format!(
            "{:>7.0} s  rss {:>7.1} MiB  ok {:>5}  err {}  gw429 {}  prov429 {}  jobs {:>4}  p50 {} ms  p99 {} ms",
            self.at_secs,
            self.rss_kib.unwrap_or(0) as f64 / 1024.0,
            self.ok,
            self.errors,
            self.gateway_429s,
            self.provider_429s,
            self.jobs,
            ms(self.p50_ms),
            ms(self.p99_ms)
        )
    }
}

/// A whole soak run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The intervals, in order.
    pub rows: Vec<Interval>,
    /// Requests per second sent.
    pub rate: f64,
}

/// The comparison of the first and the last fifth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flatness {
    /// Mean RSS of the first and the last fifth, MiB.
    pub rss_mib: (f64, f64),
    /// Median p99 of the first and the last fifth, ms.
    pub p99_ms: (f64, f64),
    /// Provider 429s over the run.
    pub provider_429s: u64,
    /// Failed requests over the run.
    pub errors: u64,
}

impl Flatness {
    /// Relative RSS growth.
    #[must_use]
    pub fn rss_growth(&self) -> f64 {
        self.rss_mib.1 / self.rss_mib.0.max(f64::MIN_POSITIVE) - 1.0
    }

    /// Relative p99 drift.
    #[must_use]
    pub fn p99_drift(&self) -> f64 {
        self.p99_ms.1 / self.p99_ms.0.max(f64::MIN_POSITIVE) - 1.0
    }

    /// Why the run is not flat; empty when it is.
    #[must_use]
    pub fn breaks(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.rss_growth() > RSS_GROWTH_LIMIT {
            out.push(format!("RSS grew {:+.1} % (limit {:.0} %)", self.rss_growth() * 100.0, RSS_GROWTH_LIMIT * 100.0));
        }
        let drift_ms = self.p99_ms.1 - self.p99_ms.0;
        if self.p99_drift() > P99_DRIFT_LIMIT && drift_ms > P99_DRIFT_FLOOR_MS {
            out.push(format!("p99 drifted {:+.1} % ({drift_ms:+.1} ms)", self.p99_drift() * 100.0));
        }
        if self.provider_429s > 0 {
            out.push(format!("{} provider 429s", self.provider_429s));
        }
        if self.errors > 0 {
            out.push(format!("{} failed requests", self.errors));
        }
        out
    }
}

impl Report {
    /// A report of `rows` sent at `rate`.
    #[must_use]
    pub fn new(rows: Vec<Interval>, rate: f64) -> Self {
        Self { rows, rate }
    }

    /// The first and the last fifth compared; the first interval (warm-up: connections,
    /// allocator arenas, tokenizer tables) is left out when there are more than five.
    /// `None` without two intervals.
    #[must_use]
    pub fn flatness(&self) -> Option<Flatness> {
        let rows = if self.rows.len() > 5 { &self.rows[1..] } else { &self.rows[..] };
        if rows.len() < 2 {
            return None;
        }
        let k = (rows.len() / 5).max(1);
        let (first, last) = (&rows[..k], &rows[rows.len() - k..]);
        let rss = |part: &[Interval]| mean(part.iter().filter_map(|r| r.rss_kib).map(|v| v as f64 / 1024.0));
        let p99 = |part: &[Interval]| median(part.iter().filter_map(|r| r.p99_ms).collect());
        Some(Flatness {
            rss_mib: (rss(first), rss(last)),
            p99_ms: (p99(first), p99(last)),
            provider_429s: self.rows.iter().map(|r| r.provider_429s).sum(),
            errors: self.rows.iter().map(|r| r.errors).sum(),
        })
    }

    /// The verdict line(s).
    #[must_use]
    pub fn verdict(&self) -> String {
        let Some(f) = self.flatness() else { return "verdict: too short to tell (fewer than 2 intervals)".into() };
        let breaks = f.breaks();
        let head = if breaks.is_empty() { "FLAT".to_owned() } else { format!("NOT FLAT: {}", breaks.join("; ")) };
        let mut out = format!("verdict: {head}\n");
        let _ = write!(
            out,
            "  RSS first fifth {:.1} MiB, last fifth {:.1} MiB ({:+.1} %); p99 {:.1} → {:.1} ms ({:+.1} %); \
             provider 429s {}; failed {}; gateway 429s {}; answered {}; jobs accepted {}; {:.1} requests/s sent",
            f.rss_mib.0,
            f.rss_mib.1,
            f.rss_growth() * 100.0,
            f.p99_ms.0,
            f.p99_ms.1,
            f.p99_drift() * 100.0,
            f.provider_429s,
            f.errors,
            self.rows.iter().map(|r| r.gateway_429s).sum::<u64>(),
            self.rows.iter().map(|r| r.ok).sum::<u64>(),
            self.rows.iter().map(|r| r.jobs).sum::<u64>(),
            self.rate
        );
        out
    }

    /// Whether the run was flat.
    #[must_use]
    pub fn is_flat(&self) -> bool {
        self.flatness().is_some_and(|f| f.breaks().is_empty())
    }

    /// The intervals as CSV with a header.
    #[must_use]
    pub fn csv(&self) -> String {
        let mut out = format!("{CSV_HEADER}\n");
        for row in &self.rows {
            out.push_str(&row.csv());
            out.push('\n');
        }
        out
    }

    /// RSS, latency and provider 429s over time, as one SVG.
    #[must_use]
    pub fn plot(&self) -> String {
        let minutes = |r: &Interval| r.at_secs / 60.0;
        let series = |name: &str, pick: fn(&Interval) -> Option<f64>| {
            Series::new(name, self.rows.iter().filter_map(|r| Some((minutes(r), pick(r)?))).collect())
        };
        let panel = |title: &str, y: &str, series: Vec<Series>| Panel {
            title: title.into(),
            x_label: "minutes".into(),
            y_label: y.into(),
            y_scale: Scale::Linear,
            series,
        };
        let panels = [
            panel("gateway RSS", "MiB", vec![series("VmRSS", |r| Some(r.rss_kib? as f64 / 1024.0))]),
            panel("latency per interval", "ms", vec![series("p50", |r| r.p50_ms), series("p99", |r| r.p99_ms)]),
            panel(
                "errors per interval",
                "count",
                vec![
                    series("provider 429s", |r| Some(r.provider_429s as f64)),
                    series("failed requests", |r| Some(r.errors as f64)),
                    series("gateway 429s", |r| Some(r.gateway_429s as f64)),
                ],
            ),
        ];
        figure(&format!("sluice bench soak: {:.1} requests/s, mixed workload", self.rate), &panels)
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0u32), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { sum / f64::from(n) }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize, rss_kib: u64, p99: f64) -> Interval {
        Interval { at_secs: 10.0 * i as f64, rss_kib: Some(rss_kib), ok: 10, p99_ms: Some(p99), ..Interval::default() }
    }

    #[test]
    fn a_steady_run_is_flat_and_warm_up_is_left_out() {
        // The first interval's low RSS (start-up) does not count as growth.
        let mut rows = vec![row(0, 5_000, 300.0)];
        rows.extend((1..12).map(|i| row(i, 20_000 + (i as u64 % 2) * 100, 100.0)));
        let report = Report::new(rows, 20.0);
        assert!(report.is_flat(), "{}", report.verdict());
        assert!(report.verdict().starts_with("verdict: FLAT"));
    }

    #[test]
    fn growing_rss_and_drifting_p99_are_named() {
        let rows: Vec<Interval> = (0..12).map(|i| row(i, 20_000 + i as u64 * 2_000, 100.0 + 20.0 * i as f64)).collect();
        let report = Report::new(rows, 20.0);
        let f = report.flatness().unwrap();
        assert!(f.rss_growth() > 0.5, "{f:?}");
        assert!(!report.is_flat());
        let verdict = report.verdict();
        assert!(verdict.contains("RSS grew") && verdict.contains("p99 drifted"), "{verdict}");
    }

    #[test]
    fn provider_429s_break_flatness_and_csv_has_a_row_per_interval() {
        let mut rows: Vec<Interval> = (0..6).map(|i| row(i, 20_000, 100.0)).collect();
        rows[3].provider_429s = 2;
        let report = Report::new(rows, 20.0);
        assert!(!report.is_flat());
        assert_eq!(report.csv().lines().count(), 7);
        assert!(report.plot().contains("provider 429s"));
    }
}
