//! Spend: what each settled request cost, from the provider's reported usage and its
//! deployment's price table (`[[deployments]] price`, per 1 M tokens), counted per tenant
//! in `sluice_spend_total{tenant}` (tenants come from the configuration or the admin API:
//! bounded). A deployment without a price counts nothing.

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
}

/// The spend counter.
#[derive(Debug, Default)]
pub struct SpendMetrics {
    /// `sluice_spend_total{tenant}`, in the price table's currency.
    pub total: Family<SpendLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

impl SpendMetrics {
    /// Registers the counter into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        let help = "What settled requests cost by the deployments' price tables, per tenant";
        registry.register("sluice_spend", help, self.total.clone());
    }

    /// The tenant's counter.
    #[must_use]
    pub fn of(&self, tenant: &str) -> Counter<f64, std::sync::atomic::AtomicU64> {
        self.total.get_or_create(&SpendLabels { tenant: tenant.to_owned() }).clone()
    }
}

/// What `usage` costs at `price` on a `kind` provider: uncached input, cached input and
/// output each at their own price. OpenAI's input count includes the cached part;
/// Anthropic's does not, and its cache writes are billed as input.
#[must_use]
pub fn cost(price: &Price, kind: ProviderKind, usage: &Usage) -> f64 {
    let cached = usage.cache_read_input_tokens;
    let uncached = match kind {
        ProviderKind::Anthropic => usage.input_tokens.saturating_add(usage.cache_creation_input_tokens),
        ProviderKind::OpenAi | ProviderKind::Ollama => usage.input_tokens.saturating_sub(cached),
    };
    let tokens = |n: u64| n as f64 / PER;
    tokens(uncached) * price.input + tokens(cached) * price.cached_input + tokens(usage.output_tokens) * price.output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_of_the_usage_has_its_price() {
        let price = Price { input: 2.0, cached_input: 0.5, output: 8.0 };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 500_000,
            cache_read_input_tokens: 400_000,
            cache_creation_input_tokens: 100_000,
        };
        // OpenAI: 600k uncached + 400k cached + 500k output.
        assert!((cost(&price, ProviderKind::OpenAi, &usage) - (1.2 + 0.2 + 4.0)).abs() < 1e-9);
        // Anthropic: 1.1M uncached (cache writes too) + 400k cached + 500k output.
        assert!((cost(&price, ProviderKind::Anthropic, &usage) - (2.2 + 0.2 + 4.0)).abs() < 1e-9);
        assert!(cost(&price, ProviderKind::OpenAi, &Usage::default()).abs() < f64::EPSILON);
    }
}
