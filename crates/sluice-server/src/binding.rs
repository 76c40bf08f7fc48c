//! The binding scope: which scope and dimension held a refused or queued request back, as
//! the 429 body, the metrics' bounded labels, the access log and the headers name it.
//!
//! A [`Rejection`] names the refusing scope and limiter; the figures of a refusal's message
//! ("team acme/search: 20,000 TPM, 19,400 used, resets in 12 s") come from one snapshot of
//! that scope, read when the refusal is built. Labels are closed sets: a scope's kind and a
//! dimension, never its name.

use std::fmt::Write as _;
use std::time::Duration;

use sluice_quota::{Calendar, LimiterName, QuotaStore, Rejection, RejectionKind, ScopeId, ScopeSnapshot};

/// The `scope_kind` and `dimension` label values when no limit refusal is on record (a
/// full queue, a wait that ran out before any limit was tried).
pub const NONE: &str = "none";

/// The `dimension` label of a limiter: `requests`, `tokens`, `input_tokens`,
/// `output_tokens`, `concurrency`, `money`, or `none` (a provider's cooldown, fair
/// sharing, an operator's pause).
#[must_use]
pub fn dimension(limiter: LimiterName) -> &'static str {
    match limiter {
        LimiterName::Rate { dimension, .. } => dimension.as_str(),
        LimiterName::Concurrency => "concurrency",
        LimiterName::Budget => "money",
        LimiterName::ProviderCooldown | LimiterName::FairShare | LimiterName::Paused => NONE,
    }
}

/// The refusal in words, naming its scope with the figures of the refusing limit when
/// `snapshot` (of the refusing scope) has them: `team acme/search: 20,000 TPM, 19,400 used,
/// resets in 12 s`. Identifiers and numbers only, never a provider's text.
#[must_use]
pub fn describe(rejection: &Rejection, snapshot: Option<&ScopeSnapshot>, calendar: Calendar) -> String {
    let scope = &rejection.scope;
    let figures = snapshot.and_then(|s| figures(rejection, s, calendar)).unwrap_or_else(|| plain(rejection));
    format!("{} {}: {figures}", scope.kind.as_str(), scope.name)
}

/// [`describe`] with the figures of the refusing scope, read in one snapshot of `path`
/// (which holds it); without figures when the store cannot be read. A refusal's cost only.
pub async fn read_and_describe(
    store: &dyn QuotaStore,
    calendar: Calendar,
    path: &[ScopeId],
    rejection: &Rejection,
) -> String {
    if matches!(rejection.limiter, LimiterName::ProviderCooldown | LimiterName::FairShare | LimiterName::Paused) {
        // No figures to read: a provider's cooldown, fair sharing and a pause have none.
        return describe(rejection, None, calendar);
    }
    let snapshots = store.snapshots(path).await.unwrap_or_default();
    let snapshot = snapshots.iter().flatten().find(|s| s.key == rejection.scope);
    describe(rejection, snapshot, calendar)
}

/// The limit's amount, what is used of it and when it resets, from `snapshot`.
fn figures(rejection: &Rejection, snapshot: &ScopeSnapshot, calendar: Calendar) -> Option<String> {
    match rejection.limiter {
        LimiterName::Rate { period, .. } => {
            let rate = snapshot.rates.iter().find(|r| r.limiter == rejection.limiter)?;
            let used = used(rate.limit, period, rate.reset);
            let (limit, unit) = (grouped(rate.limit), unit(rejection.limiter));
            Some(format!("{limit} {unit}, {} used, resets in {}", grouped(used), spoken(rate.reset)))
        }
        LimiterName::Concurrency => {
            let (in_flight, cap) = snapshot.in_flight;
            Some(format!("{} at once, {} in flight", grouped(cap?), grouped(in_flight)))
        }
        LimiterName::Budget => {
            let spent = |b: &sluice_quota::BudgetSnapshot| b.spent.in_period(calendar.period(b.period).id);
            let budget =
                snapshot.budgets.iter().max_by(|a, b| ratio(spent(a), a.limit).total_cmp(&ratio(spent(b), b.limit)))?;
            let (amount, used) = (crate::budgets::units(budget.limit), crate::budgets::units(spent(budget)));
            let period = budget.period.as_str();
            if let RejectionKind::InFlight(wait) = rejection.kind {
                // Not spent: held by requests in flight until they settle.
                let held = crate::budgets::units(budget.spent.held_in(calendar.period(budget.period).id));
                let wait = spoken(wait);
                return Some(format!(
                    "{amount:.2} per {period}, {used:.2} spent, {held:.2} of it held by requests in flight, \
                     passes in {wait} or when they settle"
                ));
            }
            let reset = spoken(calendar.period(budget.period).reset);
            Some(format!("{amount:.2} per {period}, {used:.2} spent, resets in {reset}"))
        }
        LimiterName::ProviderCooldown | LimiterName::FairShare | LimiterName::Paused => None,
    }
}

/// A refusal's words without figures.
fn plain(rejection: &Rejection) -> String {
    let mut text = match rejection.limiter {
        LimiterName::ProviderCooldown => "the provider asked to wait".to_owned(),
        LimiterName::FairShare => "ahead of its fair share while others wait".to_owned(),
        // Until an operator resumes it: no wait to promise.
        LimiterName::Paused => return "paused by an operator".to_owned(),
        limiter => format!("`{limiter}` reached"),
    };
    if let Some(wait) = rejection.retry_after() {
        let _ = write!(text, ", passes in {}", spoken(wait));
    }
    text
}

/// What a bucket of `limit` per `period` has given and not yet refilled, when it is full
/// again after `reset`: `reset` worth of its rate, at most the limit.
fn used(limit: u64, period: Duration, reset: Duration) -> u64 {
    let period_ms = period.as_millis().max(1);
    let used = u128::from(limit).saturating_mul(reset.as_millis()).div_ceil(period_ms);
    u64::try_from(used).unwrap_or(u64::MAX).min(limit)
}

fn ratio(spent: u64, limit: u64) -> f64 {
    spent as f64 / limit.max(1) as f64
}

/// A rate limiter's unit as people write it: `TPM`, `RPM`, `input TPM`, `output TPD`;
/// other periods as `tokens per 10s`.
fn unit(limiter: LimiterName) -> String {
    let name = limiter.to_string();
    match name.split_once('_') {
        None => name.to_uppercase(),
        Some((direction @ ("input" | "output"), short)) => format!("{direction} {}", short.to_uppercase()),
        Some(_) => name.replace('_', " "),
    }
}

/// `20000` as `20,000`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A wait as people say it: `250 ms`, `12 s`, `4 min`, `3 h` (rounded up).
fn spoken(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => format!("{} s", ms.div_ceil(1_000)),
        120_000..7_200_000 => format!("{} min", ms.div_ceil(60_000)),
        _ => format!("{} h", ms.div_ceil(3_600_000)),
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::{Dimension, RateSnapshot, RejectionKind, ScopeKey, ScopeKind};

    use super::*;

    fn tpm_refusal() -> (Rejection, ScopeSnapshot) {
        let limiter = LimiterName::Rate { dimension: Dimension::TotalTokens, period: Duration::from_secs(60) };
        let key = ScopeKey::new(ScopeKind::Team, "acme/search");
        let rejection =
            Rejection { scope: key.clone(), limiter, kind: RejectionKind::RetryAfter(Duration::from_secs(2)) };
        let rate =
            RateSnapshot { limiter, limit: 20_000, burst: 20_000, remaining: 600, reset: Duration::from_secs(58) };
        let snapshot = ScopeSnapshot { key, rates: vec![rate], in_flight: (0, None), held: false, budgets: Vec::new() };
        (rejection, snapshot)
    }

    #[test]
    fn a_refusal_names_its_scope_with_the_limit_what_is_used_and_the_reset() {
        let (rejection, snapshot) = tpm_refusal();
        let said = describe(&rejection, Some(&snapshot), Calendar::default());
        assert_eq!(said, "team acme/search: 20,000 TPM, 19,334 used, resets in 58 s");
        assert_eq!(describe(&rejection, None, Calendar::default()), "team acme/search: `tpm` reached, passes in 2 s");
        assert_eq!(dimension(rejection.limiter), "tokens");
    }

    #[test]
    fn a_budget_refusal_says_whether_it_is_spent_or_held_by_requests_in_flight() {
        let calendar = Calendar::at(1_796_160_600, 0);
        let spent = sluice_quota::Spent { period: calendar.day.id, used: 900_000, held: 850_000 };
        let budget = sluice_quota::BudgetSnapshot { period: sluice_quota::BudgetPeriod::Day, limit: 1_000_000, spent };
        let key = ScopeKey::new(ScopeKind::Tenant, "acme");
        let snapshot = ScopeSnapshot {
            key: key.clone(),
            rates: Vec::new(),
            in_flight: (3, None),
            held: false,
            budgets: vec![budget],
        };
        let refusal = |kind| Rejection { scope: key.clone(), limiter: LimiterName::Budget, kind };
        let held = refusal(RejectionKind::InFlight(sluice_quota::IN_FLIGHT_RETRY));
        assert_eq!(
            describe(&held, Some(&snapshot), calendar),
            "tenant acme: 1.00 per day, 0.90 spent, 0.85 of it held by requests in flight, passes in 1 s or when \
             they settle"
        );
        let spent = refusal(RejectionKind::RetryAfter(calendar.day.reset));
        assert_eq!(describe(&spent, Some(&snapshot), calendar), "tenant acme: 1.00 per day, 0.90 spent, resets in 3 h");
    }

    #[test]
    fn units_numbers_and_waits_read_like_people_write_them() {
        let rate = |dimension, secs| LimiterName::Rate { dimension, period: Duration::from_secs(secs) };
        assert_eq!(unit(rate(Dimension::OutputTokens, 60)), "output TPM");
        assert_eq!(unit(rate(Dimension::Requests, 86_400)), "RPD");
        assert_eq!(unit(rate(Dimension::Requests, 10)), "requests per 10s");
        assert_eq!(
            (grouped(0), grouped(999), grouped(1_000), grouped(1_234_567)),
            ("0".into(), "999".into(), "1,000".into(), "1,234,567".into())
        );
        let ms = Duration::from_millis;
        assert_eq!(
            [spoken(ms(250)), spoken(ms(11_200)), spoken(ms(300_000)), spoken(ms(10_800_000))],
            ["250 ms", "12 s", "5 min", "3 h"]
        );
        assert_eq!(dimension(LimiterName::Budget), "money");
        assert_eq!(dimension(LimiterName::Concurrency), "concurrency");
    }
}
