//! Spend: what each settled request cost, from the provider's reported usage and its
//! deployment's price table (`[[deployments]] price`, per 1 M tokens), counted per tenant
//! in `sluice_spend_total{tenant,currency}` (tenants come from the configuration or the
//! admin API: bounded; the currency is `[pricing] currency`). A deployment without a price
//! counts nothing.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sluice_config::{Price, ProviderKind};
use sluice_provider::Usage;

/// Tokens per priced unit.
const PER: f64 = 1_000_000.0;

/// `sluice_spend_total`'s labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SpendLabels {
    /// The tenant.
    pub tenant: String,
    /// The price tables' currency (`[pricing] currency`, ISO 4217).
    pub currency: String,
}

/// The spend counter.
#[derive(Debug, Default)]
pub struct SpendMetrics {
    /// `sluice_spend_total{tenant,currency}`, in the price tables' currency.
    pub total: Family<SpendLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// `sluice_usage_dropped_total`: groups the usage book had no room for.
    pub usage_dropped: Counter,
}

impl SpendMetrics {
    /// Registers the counter into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let help = "What settled requests cost by the deployments' price tables, per tenant, in the tables' currency";
        registry.register("sluice_spend", help, self.total.clone());
        let help = "Usage groups not counted because the in-process usage book was full (the store is failing)";
        registry.register("sluice_usage_dropped", help, self.usage_dropped.clone());
    }

    /// The tenant's counter in `currency`.
    #[must_use]
    pub fn of(&self, tenant: &str, currency: &str) -> Counter<f64, std::sync::atomic::AtomicU64> {
        self.total.get_or_create(&SpendLabels { tenant: tenant.to_owned(), currency: currency.to_owned() }).clone()
    }
}

/// What `usage` costs at `price` on a `kind` provider: uncached input, cached input,
/// output and reasoning each at their own price. OpenAI's input count includes the cached
/// part and its output count the reasoning part; Anthropic's input count includes
/// neither cache reads nor writes, and its cache writes are billed as input.
#[must_use]
pub fn cost(price: &Price, kind: ProviderKind, usage: &Usage) -> f64 {
    let cached = usage.cache_read_input_tokens;
    let uncached = match kind {
        ProviderKind::Anthropic => usage.input_tokens.saturating_add(usage.cache_creation_input_tokens),
        ProviderKind::OpenAi | ProviderKind::Ollama => usage.input_tokens.saturating_sub(cached),
    };
    let reasoning = usage.reasoning_tokens.min(usage.output_tokens);
    let answer = usage.output_tokens - reasoning;
    let tokens = |n: u64| n as f64 / PER;
    tokens(uncached) * price.input
        + tokens(cached) * price.cached_input
        + tokens(answer) * price.output
        + tokens(reasoning) * price.reasoning
}

/// Nano-units of currency per unit: how usage rollups keep costs as exact integers.
pub const NANOS: f64 = 1_000_000_000.0;

/// `cost` in whole nano-units (rounded; negative or not finite reads as 0).
#[must_use]
pub fn nanos(cost: f64) -> u64 {
    let n = (cost * NANOS).round();
    // `as` saturates at u64::MAX and maps NaN to 0, which is what a counter wants.
    if n > 0.0 { n as u64 } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_of_the_usage_has_its_price() {
        let price = Price { input: 2.0, cached_input: 0.5, output: 8.0, reasoning: 8.0 };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cache_read_input_tokens: 400_000,
            cache_creation_input_tokens: 100_000,
            reasoning_tokens: 0,
        };
        // OpenAI: 600k uncached + 400k cached + 500k output.
        assert!((cost(&price, ProviderKind::OpenAi, &usage) - (1.2 + 0.2 + 4.0)).abs() < 1e-9);
        // Anthropic: 1.1M uncached (cache writes too) + 400k cached + 500k output.
        assert!((cost(&price, ProviderKind::Anthropic, &usage) - (2.2 + 0.2 + 4.0)).abs() < 1e-9);
        assert!(cost(&price, ProviderKind::OpenAi, &Usage::default()).abs() < f64::EPSILON);
    }

    #[test]
    fn reasoning_reported_apart_is_priced_at_the_reasoning_price() {
        let price = Price { input: 0.0, cached_input: 0.0, output: 4.0, reasoning: 10.0 };
        let usage = Usage { output_tokens: 1_000_000, reasoning_tokens: 250_000, ..Usage::default() };
        // 750k answer tokens at 4 + 250k reasoning tokens at 10.
        assert!((cost(&price, ProviderKind::OpenAi, &usage) - (3.0 + 2.5)).abs() < 1e-9);
        // A report claiming more reasoning than output counts no more than the output.
        let odd = Usage { output_tokens: 10, reasoning_tokens: 20, ..Usage::default() };
        assert!((cost(&price, ProviderKind::OpenAi, &odd) - 10.0 * 10.0 / PER).abs() < 1e-12);
    }

    #[test]
    fn costs_round_to_whole_nano_units() {
        assert_eq!(nanos(0.000_000_001_4), 1);
        assert_eq!(nanos(2.5), 2_500_000_000);
        assert_eq!(nanos(-1.0), 0);
        assert_eq!(nanos(f64::NAN), 0);
    }
}
