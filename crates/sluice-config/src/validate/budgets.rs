//! Money budgets: amounts per day and month (`limits.budget`) and the time zone their
//! days and months begin in (`[budgets] time_zone`).

use std::num::NonZeroU64;

use sluice_quota::{Budget, BudgetPeriod};

use toml::Spanned;

use super::{Result, Validator};
use crate::model::Budgets;
use crate::raw::{RawBudget, RawBudgets};

/// Largest budget amount: its micro-units stay exact in the Redis scripts' doubles.
const MAX_AMOUNT: f64 = 1e9;

impl Validator<'_> {
    /// A scope's budgets, in micro-units of the currency.
    pub(super) fn budget(&self, field: &str, raw: &RawBudget) -> Result<Vec<Budget>> {
        let entries = [(BudgetPeriod::Day, &raw.day), (BudgetPeriod::Month, &raw.month)];
        let mut budgets = Vec::new();
        for (period, value) in entries {
            let Some(value) = value else { continue };
            let amount = *value.get_ref();
            let micros = (amount * 1e6).round();
            let micros = if amount.is_finite() && amount > 0.0 && amount <= MAX_AMOUNT { micros } else { 0.0 };
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "checked in range above")]
            let Some(amount) = NonZeroU64::new(micros as u64) else {
                let message = "must be a positive amount of money of at most 1e9 (leave it out for no budget)";
                return Err(self.err(&format!("{field}.{}", period.as_str()), value.span(), message));
            };
            budgets.push(Budget { period, amount });
        }
        Ok(budgets)
    }

    /// `[budgets]`: the time zone, `UTC` (the default) or a fixed offset like `+02:00`, and
    /// the soft budgets' thresholds, webhook and check interval.
    pub(super) fn budgets(&self, raw: &RawBudgets) -> Result<Budgets> {
        let defaults = Budgets::default();
        let utc_offset_seconds = match &raw.time_zone {
            None => 0,
            Some(zone) => utc_offset(zone.get_ref()).ok_or_else(|| {
                let message = format!("`{}` is not UTC or a fixed offset like +02:00 or -05:30", zone.get_ref());
                self.err("budgets.time_zone", zone.span(), message)
            })?,
        };
        let warn_at = raw.warn_at.as_ref().map(|w| self.warn_at(w)).transpose()?.unwrap_or_default();
        let webhook_url = raw.webhook_url.as_ref().map(|u| self.webhook_url(u)).transpose()?;
        let check_interval = self.duration("budgets.check_interval", &raw.check_interval, defaults.check_interval)?;
        Ok(Budgets { utc_offset_seconds, warn_at, webhook_url, check_interval })
    }

    /// Thresholds: shares of a budget above 0 and at most 1, strictly ascending, at most 8.
    fn warn_at(&self, raw: &Spanned<Vec<f64>>) -> Result<Vec<f64>> {
        let shares = raw.get_ref();
        let valid = shares.len() <= 8
            && shares.iter().all(|s| s.is_finite() && *s > 0.0 && *s <= 1.0)
            && shares.windows(2).all(|w| w[0] < w[1]);
        if !valid {
            let message = "must be up to 8 ascending shares of the budget, each above 0 and at most 1, like [0.8, 1.0]";
            return Err(self.err("budgets.warn_at", raw.span(), message));
        }
        Ok(shares.clone())
    }

    /// The webhook's URL: `http` or `https` with a host.
    fn webhook_url(&self, raw: &Spanned<String>) -> Result<String> {
        let url = raw.get_ref();
        let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
        let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
        let valid = host.is_some_and(|h| !h.is_empty()) && !url.chars().any(char::is_whitespace);
        if !valid {
            return Err(self.err("budgets.webhook_url", raw.span(), "must be an http:// or https:// URL with a host"));
        }
        Ok(url.clone())
    }
}

/// Seconds east of UTC of `UTC`, `Z` or `±HH:MM` (at most 14 hours).
fn utc_offset(zone: &str) -> Option<i32> {
    if zone.eq_ignore_ascii_case("utc") || zone == "Z" {
        return Some(0);
    }
    let (sign, rest) = match zone.as_bytes().first()? {
        b'+' => (1, &zone[1..]),
        b'-' => (-1, &zone[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let (h, m): (i32, i32) = (h.parse().ok()?, m.parse().ok()?);
    let valid = h.to_string().len() <= 2 && m.to_string().len() <= 2 && (0..=14).contains(&h) && (0..60).contains(&m);
    valid.then_some(sign * (h * 3_600 + m * 60))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    #[test]
    fn time_zones_are_utc_or_fixed_offsets() {
        assert_eq!(utc_offset("UTC"), Some(0));
        assert_eq!(utc_offset("+02:00"), Some(7_200));
        assert_eq!(utc_offset("-05:30"), Some(-19_800));
        assert_eq!(utc_offset("Europe/Paris"), None);
        assert_eq!(utc_offset("+15:00"), None);
        assert_eq!(utc_offset("+1:60"), None);
    }

    #[test]
    fn budgets_are_read_in_micro_units_and_bad_ones_name_their_field() {
        let limits =
            crate::parse_limits(sluice_quota::ScopeKind::Tenant, "limits", "budget = { day = 25.0, month = 500.5 }")
                .unwrap();
        let amounts: Vec<_> = limits.budgets.iter().map(|b| (b.period, b.amount.get())).collect();
        assert_eq!(amounts, [(BudgetPeriod::Day, 25_000_000), (BudgetPeriod::Month, 500_500_000)]);
        let error =
            crate::parse_limits(sluice_quota::ScopeKind::Tenant, "limits", "budget = { day = -1.0 }").unwrap_err();
        assert_eq!(error.field, "limits.budget.day");
        let error =
            crate::parse_limits(sluice_quota::ScopeKind::Tenant, "limits", "budget = { week = 1.0 }").unwrap_err();
        assert!(error.field.ends_with("week"), "{}", error.field);
    }
}
