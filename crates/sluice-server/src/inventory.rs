//! The configured scopes and classes ([`Admin`]): what `/metrics` (the bucket gauges),
//! `/readyz` (a scope to probe the store with) and the operator surface (the `sluice-admin`
//! crate: admin API and dashboard) read, and which classes are paused on this instance.
//!
//! Layout: `scopes` lists every configured scope with its store handle; this file holds
//! the classes, the paused set and the gauges' refresh.
//!
//! Reload: the scopes and classes follow the configuration in force ([`Admin::reconfigure`]
//! on every reload, which also holds the queues of new deployments for paused classes).

mod scopes;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use sluice_config::Config;
use sluice_quota::{HOLD_RETRY, LimiterName, Rejection, RejectionKind, ScopeKey, ScopeKind};

use crate::metrics::{BucketLabels, ScopeLabels};
use crate::state::{Gateway, Route};

pub use scopes::{Entry, Inventory, kind_of};

/// A traffic class, as the admin API names it.
#[derive(Debug, Clone)]
pub struct ClassEntry {
    /// The class's name.
    pub name: Arc<str>,
    /// Its priority (the queues' unit of pausing).
    pub priority: u8,
}

/// The configured scopes and classes the admin API names: rebuilt on every reload.
#[derive(Debug)]
pub struct Policy {
    /// Every configured scope.
    pub inventory: Inventory,
    /// The traffic classes.
    pub classes: Vec<ClassEntry>,
}

impl Policy {
    fn new(config: &Config, gateway: &Gateway) -> Self {
        let classes =
            config.classes.iter().map(|c| ClassEntry { name: c.name.clone(), priority: c.priority }).collect();
        Self { inventory: Inventory::build(config, gateway.services.store.as_ref()), classes }
    }
}

/// The configured scopes and classes in force, and the classes paused on this instance:
/// what the gauges, readiness and the operator surface read beyond the gateway.
#[derive(Debug)]
pub struct Admin {
    policy: ArcSwap<Policy>,
    paused_classes: Mutex<BTreeSet<Arc<str>>>,
}

impl Admin {
    /// The scopes and classes of `config`, over the scopes `gateway` registered.
    #[must_use]
    pub fn new(config: &Config, gateway: &Gateway) -> Self {
        Self {
            policy: ArcSwap::from_pointee(Policy::new(config, gateway)),
            paused_classes: Mutex::new(BTreeSet::new()),
        }
    }

    /// The scopes and classes of the configuration in force.
    #[must_use]
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    /// Follows a reload to `config` (whose gateway is `gateway`): its scopes and classes
    /// replace the old ones, and classes paused here stay paused on every deployment's
    /// queue, new ones included. A paused class the new file no longer has is forgotten.
    pub fn reconfigure(&self, config: &Config, gateway: &Gateway) {
        let policy = Policy::new(config, gateway);
        let mut paused = self.paused_classes.lock().unwrap_or_else(PoisonError::into_inner);
        paused.retain(|name| policy.classes.iter().any(|c| c.name == *name));
        for class in policy.classes.iter().filter(|c| paused.contains(&c.name)) {
            for route in &gateway.deployments {
                route.queue.hold_class(class.priority, Some(class_refusal(route)));
            }
        }
        drop(paused);
        self.policy.store(Arc::new(policy));
    }

    /// Names of the classes paused on this instance.
    #[must_use]
    pub fn paused_classes(&self) -> BTreeSet<Arc<str>> {
        self.paused_classes.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records that the class `name` is paused (or no longer) on this instance.
    pub fn set_class_paused(&self, name: &Arc<str>, paused: bool) {
        let mut set = self.paused_classes.lock().unwrap_or_else(PoisonError::into_inner);
        if paused {
            set.insert(Arc::clone(name));
        } else {
            set.remove(name);
        }
    }

    /// Refreshes the bucket gauges from store snapshots (called before each scrape).
    pub async fn observe(&self, gateway: &Gateway) {
        let buckets = &gateway.services.metrics.buckets;
        if let Some(open) = gateway.services.store.open_reservations() {
            buckets.reservations_open.set(i64::try_from(open).unwrap_or(i64::MAX));
        }
        let policy = self.policy();
        let calendar = gateway.calendar();
        for entry in &policy.inventory.entries {
            let Ok(Some(snapshot)) = gateway.services.store.snapshot(entry.id).await else { continue };
            let scope = ScopeLabels { scope_kind: entry.kind.as_str(), scope: entry.name.to_string() };
            let bucket =
                |limiter: String| BucketLabels { scope_kind: scope.scope_kind, scope: scope.scope.clone(), limiter };
            for rate in &snapshot.rates {
                let labels = bucket(rate.limiter.to_string());
                buckets.remaining.get_or_create(&labels).set(gauge(rate.remaining));
                buckets.limit.get_or_create(&labels).set(gauge(rate.limit));
                buckets.burst.get_or_create(&labels).set(gauge(rate.burst));
            }
            let (in_flight, cap) = snapshot.in_flight;
            if let Some(cap) = cap {
                let labels = bucket("concurrency".into());
                buckets.remaining.get_or_create(&labels).set(gauge(cap.saturating_sub(in_flight)));
                buckets.limit.get_or_create(&labels).set(gauge(cap));
                buckets.burst.get_or_create(&labels).set(gauge(cap));
            }
            for standing in crate::budgets::standing(&snapshot.budgets, calendar) {
                let labels = crate::budgets::BudgetLabels {
                    scope_kind: scope.scope_kind,
                    scope: scope.scope.clone(),
                    period: standing.period.as_str(),
                };
                gateway.services.metrics.budgets.used_ratio.get_or_create(&labels).set(standing.ratio());
            }
            buckets.in_flight.get_or_create(&scope).set(gauge(in_flight));
            buckets.paused.get_or_create(&scope).set(i64::from(snapshot.held));
        }
        let paused = self.paused_classes();
        for class in &policy.classes {
            let labels = ScopeLabels { scope_kind: "class", scope: class.name.to_string() };
            buckets.paused.get_or_create(&labels).set(i64::from(paused.contains(&class.name)));
        }
    }
}

/// What a request of a paused class is told when its wait runs out.
#[must_use]
pub fn class_refusal(route: &Route) -> Rejection {
    Rejection {
        scope: ScopeKey::new(ScopeKind::Deployment, Arc::clone(&route.name)),
        limiter: LimiterName::Paused,
        kind: RejectionKind::RetryAfter(HOLD_RETRY),
    }
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
