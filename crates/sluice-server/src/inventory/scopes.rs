//! Every configured scope with its store handle: what the admin API reads and changes.

use std::sync::Arc;

use sluice_config::Config;
use sluice_quota::{Limits, QuotaStore, ScopeId, ScopeKey, ScopeKind};

/// One configured scope.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its level.
    pub kind: ScopeKind,
    /// Its configured name (teams as `tenant/team`).
    pub name: Arc<str>,
    /// Its handle in the store.
    pub id: ScopeId,
}

/// The configured scopes, outermost level first.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Every scope.
    pub entries: Vec<Entry>,
}

impl Inventory {
    /// Lists (and registers, with the limits of `config`) every scope of `config`.
    /// Registering a known scope again with the same limits changes nothing.
    #[must_use]
    pub fn build(config: &Config, store: &dyn QuotaStore) -> Self {
        let mut entries = Vec::new();
        let mut add = |kind: ScopeKind, name: Arc<str>, limits: &Limits| {
            let id = store.register(ScopeKey::new(kind, Arc::clone(&name)), limits.clone());
            entries.push(Entry { kind, name, id });
        };
        add(ScopeKind::Org, config.org.0.clone(), &config.org.1);
        for tenant in &config.tenants {
            add(ScopeKind::Tenant, tenant.name.clone(), &tenant.limits);
            for team in &tenant.teams {
                add(ScopeKind::Team, Arc::from(format!("{}/{}", tenant.name, team.name)), &team.limits);
            }
        }
        for key in &config.keys {
            add(ScopeKind::ApiKey, key.id.clone(), &key.limits);
        }
        for model in &config.models {
            add(ScopeKind::ModelProfile, model.name.clone(), &model.limits);
        }
        for deployment in &config.deployments {
            add(ScopeKind::Deployment, deployment.name.clone(), &deployment.limits);
        }
        Self { entries }
    }

    /// The scope of `kind` named `name`.
    #[must_use]
    pub fn find(&self, kind: ScopeKind, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.kind == kind && &*e.name == name)
    }

    /// Names of the scopes of `kind`, for error messages.
    #[must_use]
    pub fn names(&self, kind: ScopeKind) -> Vec<&str> {
        self.entries.iter().filter(|e| e.kind == kind).map(|e| &*e.name).collect()
    }
}

/// The scope level an admin path names: `deployment`, `model`, `tenant`, `team`, `key`.
#[must_use]
pub fn kind_of(path: &str) -> Option<ScopeKind> {
    Some(match path {
        "deployment" => ScopeKind::Deployment,
        "model" => ScopeKind::ModelProfile,
        "tenant" => ScopeKind::Tenant,
        "team" => ScopeKind::Team,
        "key" => ScopeKind::ApiKey,
        _ => return None,
    })
}
