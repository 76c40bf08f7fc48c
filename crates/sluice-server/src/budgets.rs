//! Money budgets on the request's path: what a request is estimated to cost at admission
//! (its deployment's price × the input estimate and the output reservation), what it
//! really cost at settlement, in the micro-units the quota core counts, and the calendar
//! (day and month in `[budgets] time_zone`) a budget charges it to.

use sluice_config::{Price, ProviderKind};
use sluice_provider::Usage;
use sluice_quota::{Calendar, Clock};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_is_priced_as_the_same_usage_settles() {
        let price = Price { input: 2.5, cached_input: 1.25, output: 10.0 };
        // 1,000 in at 2.50 per M and 500 out at 10 per M: 0.0025 + 0.005.
        assert_eq!(micros(Some(&price), ProviderKind::OpenAi, 1_000, 500), 7_500);
        let usage = Usage { input_tokens: 1_000, output_tokens: 500, ..Usage::default() };
        assert_eq!(usage_micros(&price, ProviderKind::OpenAi, &usage), 7_500);
        assert_eq!(micros(None, ProviderKind::OpenAi, 1_000, 500), 0, "no price, no cost");
    }
}
