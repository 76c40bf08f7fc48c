//! Where a request's quota comes from: scopes on a hierarchical path.

use std::fmt;
use std::sync::Arc;

/// The level of a scope, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKind {
    /// The whole organisation running sluice.
    Org,
    /// A customer or business unit.
    Tenant,
    /// A team inside a tenant.
    Team,
    /// One gateway API key.
    ApiKey,
    /// A model profile clients ask for (e.g. `fast-chat`).
    ModelProfile,
    /// A provider deployment: the upstream quota domain (account × region × model).
    Deployment,
    /// A provider account: a quota several deployments share (one Azure resource, one
    /// Bedrock account-region, one Vertex project's regional quota), above them.
    Account,
}

impl ScopeKind {
    /// Whether callers of many tenants share this scope (org, model profile,
    /// deployment), as opposed to a caller's own (tenant, team, key).
    #[must_use]
    pub fn is_shared(self) -> bool {
        matches!(self, Self::Org | Self::ModelProfile | Self::Deployment | Self::Account)
    }

    /// Whether the scope mirrors a provider's quota (a deployment, an account): it is
    /// settled on what the provider charged ([`crate::Settlement::upstream`]).
    #[must_use]
    pub fn is_upstream(self) -> bool {
        matches!(self, Self::Deployment | Self::Account)
    }

    /// The name used in errors, metrics and storage keys.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Org => "org",
            Self::Tenant => "tenant",
            Self::Team => "team",
            Self::ApiKey => "api_key",
            Self::ModelProfile => "model_profile",
            Self::Deployment => "deployment",
            Self::Account => "account",
        }
    }
}

/// A scope's identity: its level and its configured name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopeKey {
    /// The level.
    pub kind: ScopeKind,
    /// The configured name, unique within the level.
    pub name: Arc<str>,
}

impl ScopeKey {
    /// A key for `name` at `kind`.
    #[must_use]
    pub fn new(kind: ScopeKind, name: impl Into<Arc<str>>) -> Self {
        Self { kind, name: name.into() }
    }
}

impl fmt::Display for ScopeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.name)
    }
}

/// A store-local handle for a registered scope; cheap to copy and compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeId(pub u32);

/// A store-unique handle for one reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReservationId(pub u64);
