//! The fair-share metrics: the guaranteed and borrowed tokens of each admission and the
//! requests reclaimed (held back for others), as [`sluice_quota::guarantee`] measures them.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use sluice_quota::guarantee::HeldBack;

/// `deployment`, `tenant`, `kind` (`guaranteed`, `borrowed`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// The deployment's configured name (shared: counting an admission copies no name).
    pub deployment: Arc<str>,
    /// The tenant's configured name.
    pub tenant: Arc<str>,
    /// `guaranteed` or `borrowed`.
    pub kind: &'static str,
}

/// `deployment`, `tenant`, `class`, `by` (`tenant`, `class`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReclaimLabels {
    /// The deployment's configured name.
    pub deployment: String,
    /// The tenant held back.
    pub tenant: String,
    /// Its request's traffic class.
    pub class: String,
    /// Who went first: another `tenant` or a higher `class`.
    pub by: &'static str,
}

/// The fair-share metrics.
#[derive(Debug, Default)]
pub struct ShareMetrics {
    /// `sluice_fair_tokens_total{deployment,tenant,kind}`.
    pub tokens: Family<TokenLabels, Counter>,
    /// `sluice_fair_reclaims_total{deployment,tenant,class,by}`.
    pub reclaims: Family<ReclaimLabels, Counter>,
}

impl ShareMetrics {
    /// Registers both families into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "sluice_fair_tokens",
            "Tokens admitted within the tenant's guaranteed share of the deployment, or borrowed beyond it",
            self.tokens.clone(),
        );
        registry.register(
            "sluice_fair_reclaims",
            "Requests held back at least once so that another tenant or a higher class could go first",
            self.reclaims.clone(),
        );
    }

    /// Counts an admission's split.
    pub fn admitted(&self, deployment: &Arc<str>, tenant: &Arc<str>, (guaranteed, borrowed): (u64, u64)) {
        for (kind, tokens) in [("guaranteed", guaranteed), ("borrowed", borrowed)] {
            let labels = TokenLabels { deployment: Arc::clone(deployment), tenant: Arc::clone(tenant), kind };
            self.tokens.get_or_create(&labels).inc_by(tokens);
        }
    }

    /// Counts a request held back.
    pub fn reclaimed(&self, deployment: &str, tenant: &str, class: &str, by: HeldBack) {
        let labels = ReclaimLabels {
            deployment: deployment.to_owned(),
            tenant: tenant.to_owned(),
            class: class.to_owned(),
            by: by.as_str(),
        };
        self.reclaims.get_or_create(&labels).inc();
    }
}
