//! The tenancy model: who a caller is ([`Caller`]), the configured tenants, teams and
//! classes by name ([`Directory`]), and what a runtime key is resolved against
//! ([`Tenancy`]). Below the gateway's state: the keys service and the road read it.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_config::{Allowed, TrafficClass};
use sluice_quota::{QuotaStore, ScopeId};

/// A caller, as identified by its gateway key.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's public id.
    pub key_id: Arc<str>,
    /// The tenant's name.
    pub tenant: Arc<str>,
    /// The team's name, when the key belongs to one.
    pub team: Option<Arc<str>>,
    /// The tenant's index (fair-queuing identity).
    pub tenant_index: u32,
    /// The tenant's weight.
    pub weight: std::num::NonZeroU32,
    /// The key's index (its lane in the queues).
    pub key_index: u32,
    /// The traffic class.
    pub class: TrafficClass,
    /// Its index in the configuration's classes.
    pub class_index: usize,
    /// Scopes from the org down to the key.
    pub scopes: Arc<[ScopeId]>,
    /// The model profiles the key may name (`None`: every one). Runtime keys may be
    /// restricted; configured keys are not.
    pub models: Option<Arc<[Arc<str>]>>,
    /// The deployments it may be served by: its tenant's, team's and key's `regions` and
    /// `labels` narrowed into one (placing checks `allowed.admits(route.region.as_deref(),
    /// &route.labels)` for each member).
    pub allowed: Allowed,
}

impl Caller {
    /// Whether the key may name the model profile `profile`.
    #[must_use]
    pub fn may_name(&self, profile: &str) -> bool {
        self.models.as_ref().is_none_or(|models| models.iter().any(|m| **m == *profile))
    }
}

/// The configured tenants, teams and classes, by name: what a runtime key is resolved
/// against (its tenant, team and class must exist in the configuration in force).
#[derive(Debug, Default)]
pub struct Directory {
    /// The org's scope.
    pub org: Option<ScopeId>,
    /// Tenants by name.
    pub tenants: HashMap<Arc<str>, TenantEntry>,
    /// Traffic classes, in configuration order.
    pub classes: Vec<TrafficClass>,
    /// Ids of the configured keys (read-only through the admin API).
    pub config_keys: HashMap<Arc<str>, Caller>,
}

/// A configured tenant as runtime keys see it.
#[derive(Debug)]
pub struct TenantEntry {
    /// Its index in the configuration (fair-queuing identity).
    pub index: u32,
    /// Its weight.
    pub weight: std::num::NonZeroU32,
    /// Its scope.
    pub scope: ScopeId,
    /// The deployments it may be served by (its `regions` and `labels`).
    pub allowed: Allowed,
    /// Its teams by name.
    pub teams: HashMap<Arc<str>, TeamEntry>,
}

/// A configured team as runtime keys see it.
#[derive(Debug)]
pub struct TeamEntry {
    /// Its scope.
    pub scope: ScopeId,
    /// The deployments it may be served by: its tenant's constraint narrowed with its own.
    pub allowed: Allowed,
}

/// What runtime keys are resolved against: the configuration's tenancy, the quota store
/// their scopes are registered in, and how many keys the configuration has (runtime keys'
/// lanes come after theirs).
#[derive(Clone, Copy)]
pub struct Tenancy<'a> {
    /// The configured tenants, teams and classes.
    pub directory: &'a Directory,
    /// The quota store.
    pub store: &'a dyn QuotaStore,
    /// The number of configured keys.
    pub configured_keys: usize,
}
