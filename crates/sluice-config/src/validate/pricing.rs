//! Spend and usage: `[pricing]` (the currency), each deployment's price table (a preset
//! for its model, overridden field by field by `[[deployments]] price`) and `[usage]`.

use super::*;
use crate::prices::preset_price;

/// The highest price per 1 M tokens accepted (a typo guard, far above any list price).
const MAX_PRICE: f64 = 10_000.0;
/// The longest a daily rollup may be kept: ten years.
const MAX_RETENTION_DAYS: u64 = 3_660;

impl Validator<'_> {
    /// `[pricing]`: a currency code of three capital letters (ISO 4217).
    pub(super) fn pricing(&self, raw: &RawPricing) -> Result<Pricing> {
        let Some(currency) = &raw.currency else { return Ok(Pricing { currency: Arc::from(defaults::CURRENCY) }) };
        let code = currency.get_ref();
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(self.err("pricing.currency", currency.span(), "an ISO 4217 code of three capitals, e.g. USD"));
        }
        Ok(Pricing { currency: Arc::from(code.as_str()) })
    }

    /// Each deployment's prices: its model's preset (in USD only) with the configured
    /// fields over it; each finite, from 0 to [`MAX_PRICE`] per 1 M tokens.
    pub(super) fn prices(
        &self,
        raw: &[RawDeployment],
        pricing: &Pricing,
        deployments: &mut [Deployment],
    ) -> Result<()> {
        let presets = &*pricing.currency == defaults::CURRENCY;
        for (i, (d, deployment)) in raw.iter().zip(deployments.iter_mut()).enumerate() {
            let preset = presets.then(|| preset_price(d.model.get_ref())).flatten();
            deployment.price = match &d.price {
                None => preset,
                Some(price) => Some(self.price(i, d, price, preset)?),
            };
        }
        Ok(())
    }

    fn price(&self, i: usize, d: &RawDeployment, raw: &Spanned<RawPrice>, preset: Option<Price>) -> Result<Price> {
        let (span, raw) = (raw.span(), raw.get_ref());
        let field = |name: &str| format!("deployments[{i}].price.{name}");
        let check = |name: &str, value: &Spanned<f64>| {
            let v = *value.get_ref();
            if v.is_finite() && (0.0..=MAX_PRICE).contains(&v) {
                Ok(v)
            } else {
                Err(self.err(&field(name), value.span(), format!("a price per 1M tokens from 0 to {MAX_PRICE}")))
            }
        };
        let required = |name: &str, value: &Option<Spanned<f64>>, preset: Option<f64>| match (value, preset) {
            (Some(v), _) => check(name, v),
            (None, Some(p)) => Ok(p),
            (None, None) => {
                let why = format!("needed: no preset price for model `{}` (in USD)", d.model.get_ref());
                Err(self.err(&field(name), span.clone(), why))
            }
        };
        let input = required("input", &raw.input, preset.map(|p| p.input))?;
        let output = required("output", &raw.output, preset.map(|p| p.output))?;
        // Unset, the cached and reasoning prices follow the configured input and output
        // when those were set, the preset's otherwise.
        let cached_default = if raw.input.is_some() { None } else { preset.map(|p| p.cached_input) };
        let cached_input = required("cached_input", &raw.cached_input, cached_default.or(Some(input)))?;
        let reasoning_default = if raw.output.is_some() { None } else { preset.map(|p| p.reasoning) };
        let reasoning = required("reasoning", &raw.reasoning, reasoning_default.or(Some(output)))?;
        Ok(Price { input, cached_input, output, reasoning })
    }

    /// `[usage]`: retention from 1 day to ten years; a flush interval from 100ms to 1m.
    pub(super) fn usage(&self, raw: &RawUsageSettings) -> Result<UsageSettings> {
        let days = raw.retention_days.as_ref().map_or(defaults::USAGE_RETENTION_DAYS, |d| *d.get_ref());
        if !(1..=MAX_RETENTION_DAYS).contains(&days) {
            let span = raw.retention_days.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("usage.retention_days", span, format!("from 1 to {MAX_RETENTION_DAYS} days")));
        }
        let flush_interval =
            self.duration("usage.flush_interval", &raw.flush_interval, defaults::USAGE_FLUSH_INTERVAL)?;
        if !(Duration::from_millis(100)..=Duration::from_secs(60)).contains(&flush_interval) {
            let span = raw.flush_interval.as_ref().map_or(0..0, Spanned::span);
            return Err(self.err("usage.flush_interval", span, "from 100ms to 1m"));
        }
        Ok(UsageSettings { retention_days: u32::try_from(days).unwrap_or(u32::MAX), flush_interval })
    }
}
