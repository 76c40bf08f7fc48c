//! The operator surface: the admin API (`/admin/...`) and what the dashboard and the
//! bucket gauges read.
//!
//! Layout: `auth` checks the admin key (a bearer token, or the dashboard's session
//! cookie for reads), `inventory` lists every configured scope with its store handle,
//! `view` renders live state as JSON, `counters` sums the request-path metrics for the
//! dashboard, `routes` are the handlers; `keys` (with `keys_input`, its validation),
//! `tenants` and `audit` manage runtime keys and tenants and their audit log, and `usage`
//! answers what was used and spent, for the root admin key or a tenant admin key (`actor`).
//!
//! Semantics: without `[admin] key_sha256` every admin route answers 404; a missing or
//! wrong key gets the structured 401. A tenant pause is a store hold, so it holds on every
//! instance sharing the store (Redis); a class pause is per instance (each instance's
//! queues). Limit changes apply to the store of the instance that receives them: in
//! Redis mode every instance sends its own limits with each reservation, so change them
//! on every instance (or in the file, and restart). Responses carry names and numbers
//! only: never a provider key or a gateway key hash.
//!
//! Reload: the scopes and classes follow the configuration in force ([`Admin::reconfigure`]
//! on every reload, which also holds the queues of new deployments for paused classes); the
//! admin key and the dashboard sessions are bound at start.

mod actor;
mod audit;
mod auth;
mod counters;
mod inventory;
mod keys;
mod keys_input;
mod page;
mod routes;
mod tenants;
mod throttle;
mod usage;
mod view;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use sluice_config::Config;

use crate::metrics::{BucketLabels, ScopeLabels};
use crate::state::Gateway;

pub use crate::limits_json::limits_of;
pub use actor::Actor;
pub use auth::AdminKey;
pub use counters::{Sample, parse_samples};
pub use inventory::{Entry, Inventory};
pub use routes::router;
pub use throttle::{LoginThrottle, peer};

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
        Self { inventory: Inventory::build(config, gateway.store.as_ref()), classes }
    }
}

/// Everything the admin API and dashboard need beyond the gateway.
#[derive(Debug)]
pub struct Admin {
    /// The admin key, if configured; without it the admin surface does not exist.
    pub key: Option<AdminKey>,
    /// Failed dashboard logins per peer address.
    pub logins: LoginThrottle,
    policy: ArcSwap<Policy>,
    paused_classes: Mutex<BTreeSet<Arc<str>>>,
}

impl Admin {
    /// The admin surface for `config`, over the scopes `gateway` registered.
    #[must_use]
    pub fn new(config: &Config, gateway: &Gateway) -> Self {
        Self {
            key: config.admin.key_sha256.map(AdminKey::new),
            logins: LoginThrottle::default(),
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
                route.queue.hold_class(class.priority, Some(routes::class_refusal(route)));
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

    fn set_class_paused(&self, name: &Arc<str>, paused: bool) {
        let mut set = self.paused_classes.lock().unwrap_or_else(PoisonError::into_inner);
        if paused {
            set.insert(Arc::clone(name));
        } else {
            set.remove(name);
        }
    }

    /// Refreshes the bucket gauges from store snapshots (called before each scrape).
    pub async fn observe(&self, gateway: &Gateway) {
        let buckets = &gateway.metrics.buckets;
        if let Some(open) = gateway.store.open_reservations() {
            buckets.reservations_open.set(i64::try_from(open).unwrap_or(i64::MAX));
        }
        let policy = self.policy();
        let calendar = gateway.calendar();
        for entry in &policy.inventory.entries {
            let Ok(Some(snapshot)) = gateway.store.snapshot(entry.id).await else { continue };
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
                gateway.metrics.budgets.used_ratio.get_or_create(&labels).set(standing.ratio());
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

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
