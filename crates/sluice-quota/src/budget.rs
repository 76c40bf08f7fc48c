//! Money budgets: calendar counters, not buckets.
//!
//! A budget caps what a scope may spend per calendar day or month, in integer micro-units
//! of the price tables' currency. Unlike a rate it does not refill: it counts what was
//! spent in the current period and starts from zero in the next. The core never reads a
//! clock: the caller names the current periods ([`Calendar`], from [`Calendar::at`]) with
//! each demand, and a reservation is charged to the periods it was admitted in.

use std::num::NonZeroU64;
use std::time::Duration;

/// Seconds in a day.
const DAY: i64 = 86_400;

/// The calendar period a budget counts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BudgetPeriod {
    /// A calendar day.
    Day,
    /// A calendar month.
    Month,
}

impl BudgetPeriod {
    /// The name used in config, metrics and the admin API.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Month => "month",
        }
    }
}

/// A cap on money spent per period, in micro-units of the currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The period.
    pub period: BudgetPeriod,
    /// Micro-units per period.
    pub amount: NonZeroU64,
}

/// One current period: its identity (its start, Unix seconds) and the time until the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Period {
    /// The period's start, Unix seconds: what a stored amount belongs to.
    pub id: u64,
    /// Time until the next period starts (a refusal's retry hint).
    pub reset: Duration,
}

/// The current day and month, as the caller's clock and time zone place them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Calendar {
    /// Today.
    pub day: Period,
    /// This month.
    pub month: Period,
    /// The zone's offset east of UTC, seconds: what placed the periods (a store that keeps
    /// its own clock places them again, in the same zone, at its time).
    pub zone: i32,
}

impl Calendar {
    /// The day and month containing `unix_seconds` in a zone `offset_seconds` east of UTC.
    #[must_use]
    pub fn at(unix_seconds: u64, offset_seconds: i32) -> Self {
        let now = i64::try_from(unix_seconds).unwrap_or(i64::MAX / 2);
        let local = now + i64::from(offset_seconds);
        let days = local.div_euclid(DAY);
        let (y, m, _) = civil_from_days(days);
        let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
        let period = |start_day: i64, next_day: i64| {
            let offset = i64::from(offset_seconds);
            let start = start_day * DAY - offset;
            let next = next_day * DAY - offset;
            Period {
                id: u64::try_from(start).unwrap_or(0),
                reset: Duration::from_secs(u64::try_from(next - now).unwrap_or(0)),
            }
        };
        Self {
            day: period(days, days + 1),
            month: period(days_from_civil(y, m, 1), days_from_civil(ny, nm, 1)),
            zone: offset_seconds,
        }
    }

    /// The current period of `kind`.
    #[must_use]
    pub fn period(&self, kind: BudgetPeriod) -> Period {
        match kind {
            BudgetPeriod::Day => self.day,
            BudgetPeriod::Month => self.month,
        }
    }
}

/// What a scope spent in one period (its start, [`Period::id`]), and how much of it is held
/// by reservations still in flight (charged at what they reserved, not yet settled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spent {
    /// The period the amounts belong to.
    pub period: u64,
    /// Micro-units spent in it, reservations in flight counted at what they reserved.
    pub used: u64,
    /// The part of `used` that reservations in flight hold: it comes back, in part or in
    /// whole, when they settle below what they reserved. At most `used`.
    pub held: u64,
}

impl Spent {
    /// What was spent in `period`: nothing if the record is of an earlier one. A record of
    /// a later period is the current one: a caller whose clock is behind never sees the
    /// period it is still in, and never starts it again.
    #[must_use]
    pub fn in_period(self, period: u64) -> u64 {
        if self.period >= period { self.used } else { 0 }
    }

    /// What reservations in flight hold of the spend in `period` (as [`in_period`](Self::in_period)
    /// reads it).
    #[must_use]
    pub fn held_in(self, period: u64) -> u64 {
        if self.period >= period { self.held.min(self.used) } else { 0 }
    }

    /// This record after a reservation of `amount` in `period`: spent and held both grow by
    /// it. A later period starts from zero; an earlier one (a caller whose clock is behind)
    /// is charged to the record's own, which never goes back.
    #[must_use]
    pub fn charged(self, period: u64, amount: u64) -> Self {
        let period = period.max(self.period);
        Self {
            period,
            used: self.in_period(period).saturating_add(amount),
            held: self.held_in(period).saturating_add(amount),
        }
    }

    /// This record after a settlement of a reservation made in `period`: `reserved`
    /// replaced by `used` in the spend, and no longer held. A reservation of a past period
    /// changes nothing.
    #[must_use]
    pub fn settled(self, period: u64, reserved: u64, used: u64) -> Self {
        if self.period != period {
            return self;
        }
        let spent = self.used.saturating_sub(reserved).saturating_add(used);
        Self { period, used: spent, held: self.held.saturating_sub(reserved).min(spent) }
    }
}

/// Why a budget does not take an amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    /// More than the whole budget: no period will take it.
    Never,
    /// Not in this period; the next starts after the wait.
    Until(Duration),
    /// Not now, but what reservations in flight hold would take it: it may pass as soon as
    /// they settle below what they reserved.
    Held,
}

/// Whether `budget`, having `spent`, takes `amount` in `period`.
///
/// # Errors
/// [`Over`] when it does not: [`Over::Held`] when the amount would fit without what
/// reservations in flight hold, [`Over::Until`] the next period when it would not.
pub fn check(budget: &Budget, spent: Spent, period: Period, amount: u64) -> Result<(), Over> {
    let cap = budget.amount.get();
    if amount > cap {
        return Err(Over::Never);
    }
    let used = spent.in_period(period.id);
    if used.saturating_add(amount) > cap {
        let settled = used - spent.held_in(period.id);
        return Err(if settled.saturating_add(amount) > cap { Over::Until(period.reset) } else { Over::Held });
    }
    Ok(())
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date (year, month, day) of a day count since 1970-01-01 (inverse of
/// [`days_from_civil`]).
#[must_use]
pub fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T21:30:00Z.
    const T: u64 = 1_796_160_600;

    #[test]
    fn utc_days_and_months_start_at_midnight() {
        let c = Calendar::at(T, 0);
        assert_eq!(c.day.id, 1_796_083_200, "2026-12-01T00:00Z");
        assert_eq!(c.day.reset, Duration::from_secs(2 * 3_600 + 30 * 60));
        assert_eq!(c.month.id, 1_796_083_200, "the month began today");
        // 2027-01-01T00:00Z is 31 days after.
        assert_eq!(c.month.reset, Duration::from_secs(31 * 86_400 - 21 * 3_600 - 30 * 60));
    }

    #[test]
    fn a_zone_east_of_utc_is_already_in_the_next_day() {
        // At 21:30Z it is 00:30 on 2 December at +03:00: the day began 30 minutes ago.
        let c = Calendar::at(T, 3 * 3_600);
        assert_eq!(c.day.id, T - 30 * 60);
        assert_eq!(c.day.reset, Duration::from_secs(23 * 3_600 + 30 * 60));
        assert_eq!(c.month.id, 1_796_083_200 - 3 * 3_600, "still December there");
        // West of UTC, 29 February of a leap year belongs to February.
        let feb29 = 1_709_208_000; // 2024-02-29T12:00Z
        let c = Calendar::at(feb29, -5 * 3_600);
        assert_eq!(c.month.id, 1_706_763_600, "2024-02-01T00:00-05:00");
        assert_eq!(c.month.reset, Duration::from_secs(1_709_269_200 - feb29));
    }

    #[test]
    fn a_period_never_goes_back_for_a_caller_whose_clock_is_behind() {
        let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(100).unwrap() };
        let today = Spent::default().charged(20, 60);
        // A caller still in yesterday (10) sees today's spend and charges today.
        let yesterday = Period { id: 10, reset: Duration::from_secs(60) };
        assert_eq!(check(&budget, today, yesterday, 41), Err(Over::Held));
        assert_eq!(today.charged(10, 30), Spent { period: 20, used: 90, held: 90 });
        // A caller already in tomorrow (30) starts it, once.
        let tomorrow = today.charged(30, 5);
        assert_eq!(tomorrow, Spent { period: 30, used: 5, held: 5 });
        assert_eq!(tomorrow.charged(20, 5), Spent { period: 30, used: 10, held: 10 });
    }

    #[test]
    fn dates_round_trip() {
        for days in [-1_000_000, -1, 0, 59, 10_000, 20_788, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(20_788), (2026, 12, 1));
    }

    #[test]
    fn a_budget_counts_per_period_and_never_fits_above_its_amount() {
        let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(100).unwrap() };
        let today = Period { id: 10, reset: Duration::from_secs(5) };
        // 70 reserved and settled at 70: spent, nothing held.
        let spent = Spent::default().charged(10, 70).settled(10, 70, 70);
        assert_eq!(check(&budget, spent, today, 30), Ok(()));
        assert_eq!(check(&budget, spent, today, 31), Err(Over::Until(Duration::from_secs(5))));
        assert_eq!(check(&budget, spent, today, 101), Err(Over::Never));
        let tomorrow = Period { id: 20, reset: Duration::from_secs(86_400) };
        assert_eq!(check(&budget, spent, tomorrow, 100), Ok(()), "a new period starts from zero");
        assert_eq!(spent.charged(20, 5), Spent { period: 20, used: 5, held: 5 });
        assert_eq!(spent.settled(10, 70, 90), Spent { period: 10, used: 90, held: 0 });
        assert_eq!(spent.settled(10, 70, 10), Spent { period: 10, used: 10, held: 0 });
        assert_eq!(spent.settled(9, 70, 0), spent, "a past period's settlement changes nothing");
    }

    #[test]
    fn a_budget_held_by_reservations_in_flight_refuses_for_a_moment_not_a_period() {
        let budget = Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(100).unwrap() };
        let today = Period { id: 10, reset: Duration::from_secs(40_000) };
        // 20 settled, then two reservations of 35 in flight: 90 spent, 70 of it held.
        let settled = Spent::default().charged(10, 20).settled(10, 20, 20);
        assert_eq!(settled, Spent { period: 10, used: 20, held: 0 });
        let spent = settled.charged(10, 35).charged(10, 35);
        assert_eq!(spent, Spent { period: 10, used: 90, held: 70 });
        assert_eq!(check(&budget, spent, today, 10), Ok(()));
        // 35 more fits once the holds settle (20 + 35 <= 100), not now.
        assert_eq!(check(&budget, spent, today, 35), Err(Over::Held));
        // 81 would not fit even then: the period's end.
        assert_eq!(check(&budget, spent, today, 81), Err(Over::Until(today.reset)));
        assert_eq!(check(&budget, spent, today, 80), Err(Over::Held));
        // One settles at 5 of its 35: 60 spent, 35 held.
        let one = spent.settled(10, 35, 5);
        assert_eq!(one, Spent { period: 10, used: 60, held: 35 });
        assert_eq!(check(&budget, one, today, 35), Ok(()));
        // The other one's lease runs out: its money stays spent but is no longer held.
        let both = one.settled(10, 35, 35);
        assert_eq!(both, Spent { period: 10, used: 60, held: 0 });
        assert_eq!(check(&budget, both, today, 41), Err(Over::Until(today.reset)));
        // Another period's holds are not this one's.
        let tomorrow = Period { id: 20, reset: Duration::from_secs(86_400) };
        assert_eq!(spent.held_in(20), 0);
        assert_eq!(spent.charged(20, 30), Spent { period: 20, used: 30, held: 30 });
        assert_eq!(check(&budget, spent, tomorrow, 100), Ok(()));
        // A record read from a store without holds holds nothing.
        let old = Spent { period: 10, used: 90, held: 0 };
        assert_eq!(check(&budget, old, today, 35), Err(Over::Until(today.reset)));
    }
}
