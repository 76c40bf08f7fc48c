//! Constraints: the `regions` and `labels` a tenant, team or key is limited to. Each is a
//! region or label some deployment has (a typo would silently block its callers), a team
//! or key only narrows the regions above it, and what a level allows, narrowed with the
//! levels above, admits at least one deployment.

use super::pools::{NAME_RULE, is_name};
use super::*;

/// A `regions` or `labels` list as written.
type RawNames = Option<Spanned<Vec<Spanned<String>>>>;

impl Validator<'_> {
    /// The own constraint of `field` (`tenants[0]`, `tenants[0].teams[1]`, `keys[2]`),
    /// where `wider` is what the levels above allow (narrowed into one).
    pub(super) fn allowed(
        &self,
        field: &str,
        (regions, labels): (&RawNames, &RawNames),
        wider: &Allowed,
        deployments: &[Deployment],
    ) -> Result<Allowed> {
        let in_regions = |d: &Deployment| d.region.iter().cloned().collect::<Vec<_>>();
        let region_field = format!("{field}.regions");
        let own_regions = self.names(&region_field, regions, "region", deployments, in_regions)?;
        if let (Some(own), Some(above), Some(raw)) = (&own_regions, &wider.regions, regions)
            && let Some((j, region)) = own.iter().enumerate().find(|(_, r)| !above.contains(r))
        {
            let message = format!(
                "`{region}` is outside the regions it is already limited to ({}): a team or key only narrows them",
                list(above)
            );
            let span = raw.get_ref().get(j).map_or_else(|| raw.span(), Spanned::span);
            return Err(self.err(&format!("{region_field}[{j}]"), span, message));
        }
        let label_field = format!("{field}.labels");
        let own_labels = self.names(&label_field, labels, "label", deployments, |d| d.labels.clone())?;
        let own = Allowed { regions: own_regions, labels: own_labels };
        if own.is_unconstrained() {
            return Ok(own);
        }
        let effective = wider.narrowed(&own);
        if !deployments.iter().any(|d| effective.admits(d.region.as_deref(), &d.labels)) {
            let (at, span) = match (labels, regions) {
                (Some(l), _) => (label_field, l.span()),
                (None, r) => (region_field, r.as_ref().map_or(0..0, Spanned::span)),
            };
            let message = format!("no deployment is admitted by {effective}: its callers could never be served");
            return Err(self.err(&at, span, message));
        }
        Ok(own)
    }

    /// One list of regions or labels (`what`): not empty, each a name once, each one some
    /// deployment has (`of` gives a deployment's).
    fn names(
        &self,
        field: &str,
        raw: &RawNames,
        what: &str,
        deployments: &[Deployment],
        of: impl Fn(&Deployment) -> Vec<Arc<str>>,
    ) -> Result<Option<Arc<[Arc<str>]>>> {
        let Some(raw) = raw else { return Ok(None) };
        if raw.get_ref().is_empty() {
            let message = format!("an empty list admits no deployment (leave it out to allow any {what})");
            return Err(self.err(field, raw.span(), message));
        }
        let mut known: Vec<Arc<str>> = deployments.iter().flat_map(&of).collect();
        known.sort_unstable();
        known.dedup();
        let mut names: Vec<Arc<str>> = Vec::with_capacity(raw.get_ref().len());
        for (j, name) in raw.get_ref().iter().enumerate() {
            let at = format!("{field}[{j}]");
            let text = name.get_ref().as_str();
            if !is_name(text) {
                return Err(self.err(&at, name.span(), NAME_RULE));
            }
            if names.iter().any(|n| **n == *text) {
                return Err(self.err(&at, name.span(), format!("`{text}` is listed twice")));
            }
            if !known.iter().any(|k| **k == *text) {
                let stated = if known.is_empty() {
                    format!("no deployment states a {what}")
                } else {
                    format!("known: {}", list(&known))
                };
                let message = format!("no deployment has the {what} `{text}` ({stated})");
                return Err(self.err(&at, name.span(), message));
            }
            names.push(Arc::from(text));
        }
        Ok(Some(names.into()))
    }
}

/// `a, b, c`.
fn list(names: &[Arc<str>]) -> String {
    names.iter().map(|n| &**n).collect::<Vec<_>>().join(", ")
}
