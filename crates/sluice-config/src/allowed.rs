//! Which deployments a caller may be placed on: a tenant's, team's or key's `regions` and
//! `labels`, and the caller's effective constraint, the three narrowed into one.

use std::fmt;
use std::sync::Arc;

/// The deployments a tenant, team or key may be served by (`regions`, `labels`), or a
/// caller's effective constraint (its tenant's, team's and key's, [`Allowed::narrowed`]).
///
/// - `regions`: the deployment's `region` must be one of them. A deployment that states no
///   region is outside every region list: a caller limited to regions is never sent where
///   the operator did not say the data goes.
/// - `labels`: the deployment must carry **every** listed label (`labels = ["gdpr",
///   "zero-retention"]` needs both). Each label is a requirement, so adding one can only
///   narrow, never widen, what a caller reaches.
///
/// `None` is no constraint on that axis; the default admits every deployment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed {
    /// Regions one of which the deployment must be in (`None`: any, or none stated).
    pub regions: Option<Arc<[Arc<str>]>>,
    /// Labels the deployment must all carry (`None`: no requirement).
    pub labels: Option<Arc<[Arc<str>]>>,
}

impl Allowed {
    /// Whether a deployment in `region` (`None`: it states none) carrying `labels` may
    /// serve the caller.
    #[must_use]
    pub fn admits(&self, region: Option<&str>, labels: &[Arc<str>]) -> bool {
        let in_region = self
            .regions
            .as_ref()
            .is_none_or(|regions| region.is_some_and(|region| regions.iter().any(|r| **r == *region)));
        in_region
            && self.labels.as_ref().is_none_or(|needed| needed.iter().all(|label| labels.iter().any(|l| l == label)))
    }

    /// Whether it admits every deployment (nothing to check when placing).
    #[must_use]
    pub fn is_unconstrained(&self) -> bool {
        self.regions.is_none() && self.labels.is_none()
    }

    /// Both constraints at once: a deployment is admitted only when `self` and `other`
    /// both admit it. Regions are the lists' intersection (in `self`'s order; empty when
    /// they share none, which admits nothing), labels their union. A narrower level can
    /// never widen what the wider one allows.
    #[must_use]
    pub fn narrowed(&self, other: &Self) -> Self {
        let regions = match (&self.regions, &other.regions) {
            (None, only) | (only, None) => only.clone(),
            (Some(a), Some(b)) => Some(a.iter().filter(|r| b.contains(r)).cloned().collect()),
        };
        let labels = match (&self.labels, &other.labels) {
            (None, only) | (only, None) => only.clone(),
            (Some(a), Some(b)) => Some(a.iter().chain(b.iter().filter(|l| !a.contains(l))).cloned().collect()),
        };
        Self { regions, labels }
    }
}

/// `regions eu-west, eu-north; labels gdpr` (`any deployment` when unconstrained).
impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |items: &[Arc<str>]| items.iter().map(|i| &**i).collect::<Vec<_>>().join(", ");
        match (&self.regions, &self.labels) {
            (None, None) => f.write_str("any deployment"),
            (Some(regions), None) => write!(f, "regions {}", list(regions)),
            (None, Some(labels)) => write!(f, "labels {}", list(labels)),
            (Some(regions), Some(labels)) => write!(f, "regions {}; labels {}", list(regions), list(labels)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(items: &[&str]) -> Arc<[Arc<str>]> {
        items.iter().map(|i| Arc::from(*i)).collect()
    }

    fn allowed(regions: Option<&[&str]>, labels: Option<&[&str]>) -> Allowed {
        Allowed { regions: regions.map(names), labels: labels.map(names) }
    }

    #[test]
    fn unconstrained_admits_everything() {
        let any = Allowed::default();
        assert!(any.is_unconstrained());
        assert!(any.admits(None, &[]));
        assert!(any.admits(Some("us-east"), &names(&["gdpr"])));
        assert_eq!(any.to_string(), "any deployment");
    }

    #[test]
    fn regions_admit_only_their_regions_and_never_a_deployment_without_one() {
        let eu = allowed(Some(&["eu-west", "eu-north"]), None);
        assert!(!eu.is_unconstrained());
        assert!(eu.admits(Some("eu-west"), &[]));
        assert!(eu.admits(Some("eu-north"), &names(&["gdpr"])));
        assert!(!eu.admits(Some("us-east"), &[]));
        assert!(!eu.admits(Some("eu-west-2"), &[]), "a region is matched whole, not by prefix");
        assert!(!eu.admits(None, &[]), "a deployment stating no region is outside every region list");
    }

    #[test]
    fn labels_must_all_be_carried() {
        let strict = allowed(None, Some(&["gdpr", "zero-retention"]));
        assert!(strict.admits(None, &names(&["zero-retention", "gdpr", "ptu"])));
        assert!(!strict.admits(Some("eu-west"), &names(&["gdpr"])), "one label of two is not enough");
        assert!(!strict.admits(Some("eu-west"), &[]));
        let both = allowed(Some(&["eu-west"]), Some(&["gdpr"]));
        assert!(both.admits(Some("eu-west"), &names(&["gdpr"])));
        assert!(!both.admits(Some("eu-west"), &names(&["ptu"])));
        assert!(!both.admits(Some("us-east"), &names(&["gdpr"])));
        assert_eq!(both.to_string(), "regions eu-west; labels gdpr");
    }

    #[test]
    fn narrowing_intersects_regions_and_joins_labels() {
        let tenant = allowed(Some(&["eu-west", "eu-north"]), Some(&["gdpr"]));
        let key = allowed(Some(&["eu-north", "us-east"]), Some(&["gdpr", "ptu"]));
        let caller = tenant.narrowed(&key);
        assert_eq!(caller, allowed(Some(&["eu-north"]), Some(&["gdpr", "ptu"])));
        assert!(caller.admits(Some("eu-north"), &names(&["ptu", "gdpr"])));
        assert!(!caller.admits(Some("eu-west"), &names(&["ptu", "gdpr"])), "the key narrowed the tenant's regions");
        assert!(!caller.admits(Some("us-east"), &names(&["ptu", "gdpr"])), "the key cannot widen the tenant's");
        assert!(!caller.admits(Some("eu-north"), &names(&["gdpr"])), "the key's label is required too");
    }

    #[test]
    fn narrowing_with_nothing_keeps_the_other_and_disjoint_regions_admit_nothing() {
        let eu = allowed(Some(&["eu-west"]), None);
        let labelled = allowed(None, Some(&["gdpr"]));
        assert_eq!(eu.narrowed(&Allowed::default()), eu);
        assert_eq!(Allowed::default().narrowed(&labelled), labelled);
        assert_eq!(eu.narrowed(&labelled), allowed(Some(&["eu-west"]), Some(&["gdpr"])));
        let nowhere = eu.narrowed(&allowed(Some(&["us-east"]), None));
        assert_eq!(nowhere.regions.as_deref().map(<[_]>::len), Some(0));
        assert!(!nowhere.admits(Some("eu-west"), &[]));
        assert!(!nowhere.admits(Some("us-east"), &[]));
        assert!(!nowhere.admits(None, &[]));
    }
}
