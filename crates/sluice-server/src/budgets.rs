//! Money budgets on the request's path: what a request is estimated to cost at admission
//! (its deployment's price × the input estimate and the output reservation), what it
//! really cost at settlement, in the micro-units the quota core counts, and the calendar
//! (day and month in `[budgets] time_zone`) a budget charges it to.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use sluice_config::{Price, ProviderKind};
use sluice_provider::Usage;
use sluice_quota::{BudgetPeriod, BudgetSnapshot, Calendar, Clock};

/// Micro-units per unit of the currency.
const MICROS: f64 = 1_000_000.0;

/// The current day and month on `clock` in the zone `utc_offset_seconds` east of UTC.
#[must_use]
pub fn calendar(clock: &dyn Clock, utc_offset_seconds: i32) -> Calendar {
    Calendar::at(clock.unix_seconds(), utc_offset_seconds)
}

/// What `input` and `output` tokens cost at `price` on a `kind` provider, in micro-units,
/// rounded up so that an estimate never falls short of what the same usage settles at.
/// 0 without a price: such a request is never refused by a budget.
#[must_use]
pub fn micros(price: Option<&Price>, kind: ProviderKind, input: u64, output: u64) -> u64 {
    let usage = Usage { input_tokens: input, output_tokens: output, ..Usage::default() };
    price.map_or(0, |price| usage_micros(price, kind, &usage))
}

/// Micro-units in units of the currency.
#[must_use]
pub fn units(micros: u64) -> f64 {
    micros as f64 / MICROS
}

/// What `usage` cost at `price`, in micro-units (see [`crate::spend::cost`]).
#[must_use]
pub fn usage_micros(price: &Price, kind: ProviderKind, usage: &Usage) -> u64 {
    let cost = crate::spend::cost(price, kind, usage) * MICROS;
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to u64's range first")]
    let micros = cost.ceil().clamp(0.0, 9e15) as u64;
    micros
}

/// One budget as it stands in the current period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// Day or month.
    pub period: BudgetPeriod,
    /// Its amount per period, in the currency.
    pub limit: f64,
    /// What was spent in the current period, in the currency.
    pub used: f64,
    /// Time until the next period.
    pub reset: Duration,
    /// The period's start, Unix seconds (tells this day or month from the last).
    pub start: u64,
}

impl Standing {
    /// The share of the budget spent (may pass 1 when settlements cost more than estimated).
    #[must_use]
    pub fn ratio(&self) -> f64 {
        if self.limit > 0.0 { self.used / self.limit } else { 0.0 }
    }

    /// As `/admin/state` shows it.
    #[must_use]
    pub fn json(&self) -> Value {
        json!({"period": self.period.as_str(), "limit": self.limit, "used": self.used,
               "reset_ms": self.reset.as_millis()})
    }
}

/// A scope's budgets in the periods of `calendar`: an amount of an older period counts as
/// nothing spent yet.
#[must_use]
pub fn standing(budgets: &[BudgetSnapshot], calendar: Calendar) -> Vec<Standing> {
    let of = |b: &BudgetSnapshot| {
        let period = calendar.period(b.period);
        Standing {
            period: b.period,
            limit: units(b.limit),
            used: units(b.spent.in_period(period.id)),
            reset: period.reset,
            start: period.id,
        }
    };
    budgets.iter().map(of).collect()
}

/// `scope_kind`, `scope`, `period`: one configured budget.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    /// `org`, `tenant`, `team`, `api_key`.
    pub scope_kind: &'static str,
    /// The scope's configured name.
    pub scope: String,
    /// `day` or `month`.
    pub period: &'static str,
}

/// `scope_kind`, `scope`, `period`, `threshold`: one soft-budget threshold of one budget
/// (configured scopes × 2 periods × at most 8 thresholds: bounded).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WarningLabels {
    /// `org`, `tenant`, `team`, `api_key`.
    pub scope_kind: &'static str,
    /// The scope's configured name.
    pub scope: String,
    /// `day` or `month`.
    pub period: &'static str,
    /// The share of the budget, as configured (`0.8`).
    pub threshold: String,
}

/// Budget gauges, set from store snapshots at scrape time (configured scopes only), and
/// the soft budgets' warnings.
#[derive(Debug, Default)]
pub struct BudgetMetrics {
    /// `sluice_budget_used_ratio{scope_kind,scope,period}`: the share spent this period.
    pub used_ratio: Family<BudgetLabels, Gauge<f64, AtomicU64>>,
    /// `sluice_budget_warnings_total{scope_kind,scope,period,threshold}`: thresholds crossed.
    pub warnings: Family<WarningLabels, Counter>,
    /// `sluice_budget_webhook_failures_total`: warnings the webhook never took.
    pub webhook_failures: Counter,
}

impl BudgetMetrics {
    /// Registers the gauge and the counters into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let help = "Share of a money budget spent in its current day or month (1 = spent)";
        registry.register("sluice_budget_used_ratio", help, self.used_ratio.clone());
        let help = "Soft-budget thresholds ([budgets] warn_at) crossed, once per period on each instance";
        registry.register("sluice_budget_warnings", help, self.warnings.clone());
        let help = "Budget warnings the webhook did not accept after every try";
        registry.register("sluice_budget_webhook_failures", help, self.webhook_failures.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_is_priced_as_the_same_usage_settles() {
        let price = Price { input: 2.5, cached_input: 1.25, output: 10.0, reasoning: 10.0 };
        // 1,000 in at 2.50 per M and 500 out at 10 per M: 0.0025 + 0.005.
        assert_eq!(micros(Some(&price), ProviderKind::OpenAi, 1_000, 500), 7_500);
        let usage = Usage { input_tokens: 1_000, output_tokens: 500, ..Usage::default() };
        assert_eq!(usage_micros(&price, ProviderKind::OpenAi, &usage), 7_500);
        assert_eq!(micros(None, ProviderKind::OpenAi, 1_000, 500), 0, "no price, no cost");
    }

    #[test]
    fn a_budget_spent_in_an_older_period_stands_at_zero() {
        let calendar = Calendar::at(1_796_160_600, 0);
        let day = BudgetSnapshot {
            period: BudgetPeriod::Day,
            limit: 2_000_000,
            spent: sluice_quota::Spent { period: calendar.day.id, used: 1_500_000, held: 0 },
        };
        let stale = BudgetSnapshot { spent: sluice_quota::Spent { period: 1, used: 1_500_000, held: 0 }, ..day };
        let now = standing(&[day, stale], calendar);
        assert!((now[0].ratio() - 0.75).abs() < 1e-9);
        assert!(now[1].ratio().abs() < 1e-9, "yesterday's spending is not today's");
        assert_eq!(now[0].reset, calendar.day.reset);
    }
}
