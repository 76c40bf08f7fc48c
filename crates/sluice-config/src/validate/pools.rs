//! Pools: a model profile served by several deployments (`deployments = [...]`, each a name
//! or `{ deployment, weight, tier }`), the strategy that places a request among them, and
//! where each deployment stands (`region`, `labels`, `context_window`) for callers limited
//! to some of them.

use super::*;

/// Most a member's weight may be.
const MAX_WEIGHT: i64 = 1_000;
/// Highest tier.
const MAX_TIER: i64 = 9;

impl Validator<'_> {
    /// The profile's members, its primary (the first member of its lowest tier) and its
    /// placement strategy: one member for `deployment = "…"`, the pool for
    /// `deployments = [...]`; exactly one of the two.
    pub(super) fn pool(
        &self,
        i: usize,
        m: &RawModel,
        known: &HashMap<String, usize>,
        deployments: &[Deployment],
    ) -> Result<(usize, Vec<Member>, Placement)> {
        let field = |f: &str| format!("models[{i}].{f}");
        let pool = match (&m.deployment, &m.deployments) {
            (Some(_), Some(list)) => {
                let message = "either `deployment` (one) or `deployments` (a pool), not both";
                return Err(self.err(&field("deployments"), list.span(), message));
            }
            (None, None) => {
                let message = "needs `deployment` (one) or `deployments` (a pool)";
                return Err(self.err(&format!("models[{i}]"), m.name.span(), message));
            }
            (Some(name), None) => {
                let deployment = self.reference(&field("deployment"), name, known, "deployment")?;
                vec![Member { deployment, weight: 1, tier: 0 }]
            }
            (None, Some(list)) => self.members(&field("deployments"), list, known)?,
        };
        let strategy = self.strategy(i, m, &pool, deployments)?;
        let lowest = pool.iter().map(|member| member.tier).min().unwrap_or(0);
        let primary = pool.iter().find(|member| member.tier == lowest).map_or(0, |member| member.deployment);
        Ok((primary, pool, strategy))
    }

    /// The members of `deployments = [...]`, each once.
    fn members(
        &self,
        field: &str,
        list: &Spanned<Vec<toml::Value>>,
        known: &HashMap<String, usize>,
    ) -> Result<Vec<Member>> {
        let span = list.span();
        if list.get_ref().is_empty() {
            return Err(self.err(field, span, "a pool needs at least one deployment"));
        }
        let mut members: Vec<Member> = Vec::with_capacity(list.get_ref().len());
        for (j, item) in list.get_ref().iter().enumerate() {
            let at = format!("{field}[{j}]");
            let member = self.member(&at, span.clone(), item, known)?;
            if members.iter().any(|m| m.deployment == member.deployment) {
                return Err(self.err(&at, span, "this deployment is already a member of the pool"));
            }
            members.push(member);
        }
        Ok(members)
    }

    /// One member: a deployment's name, or a table `{ deployment, weight, tier }`.
    fn member(
        &self,
        field: &str,
        span: Range<usize>,
        item: &toml::Value,
        known: &HashMap<String, usize>,
    ) -> Result<Member> {
        let named = |name: &str, field: &str| {
            self.reference(field, &Spanned::new(span.clone(), name.to_owned()), known, "deployment")
        };
        let table = match item {
            toml::Value::String(name) => return Ok(Member { deployment: named(name, field)?, weight: 1, tier: 0 }),
            toml::Value::Table(table) => table,
            _ => {
                let message = "a deployment's name, or a table { deployment = \"…\", weight = 1, tier = 0 }";
                return Err(self.err(field, span, message));
            }
        };
        if let Some(unknown) = table.keys().find(|k| !matches!(k.as_str(), "deployment" | "weight" | "tier")) {
            let message = format!("unknown field `{unknown}` (known: deployment, weight, tier)");
            return Err(self.err(&format!("{field}.{unknown}"), span, message));
        }
        let deployment = match table.get("deployment") {
            Some(toml::Value::String(name)) => named(name, &format!("{field}.deployment"))?,
            Some(_) => return Err(self.err(&format!("{field}.deployment"), span, "a deployment's name")),
            None => return Err(self.err(field, span, "a member table needs `deployment`")),
        };
        let number = |key: &str, low: i64, high: i64, default: i64| match table.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(n)) if (low..=high).contains(n) => Ok(*n),
            Some(_) => Err(self.err(&format!("{field}.{key}"), span.clone(), format!("between {low} and {high}"))),
        };
        let weight = u32::try_from(number("weight", 1, MAX_WEIGHT, 1)?).unwrap_or(1);
        let tier = u8::try_from(number("tier", 0, MAX_TIER, 0)?).unwrap_or(0);
        Ok(Member { deployment, weight, tier })
    }

    /// `strategy`: only for a pool; `cost` only over members that all have a price.
    fn strategy(&self, i: usize, m: &RawModel, pool: &[Member], deployments: &[Deployment]) -> Result<Placement> {
        let Some(raw) = &m.strategy else { return Ok(Placement::default()) };
        let field = format!("models[{i}].strategy");
        let Some(strategy) = Placement::ALL.into_iter().find(|p| p.name() == raw.get_ref()) else {
            let known: Vec<&str> = Placement::ALL.iter().map(|p| p.name()).collect();
            let message = format!("unknown strategy `{}` (known: {})", raw.get_ref(), known.join(", "));
            return Err(self.err(&field, raw.span(), message));
        };
        if m.deployments.is_none() {
            let message = "a strategy places requests among a pool's members: set `deployments`";
            return Err(self.err(&field, raw.span(), message));
        }
        let unpriced = pool.iter().map(|m| &deployments[m.deployment]).find(|d| d.price.is_none());
        if let (Placement::Cost, Some(unpriced)) = (strategy, unpriced) {
            let message = format!(
                "`cost` places by price: deployment `{}` has none (give it a `price`, or use a model with a preset)",
                unpriced.name
            );
            return Err(self.err(&field, raw.span(), message));
        }
        Ok(strategy)
    }

    /// `affinity_header`: only for a pool; a header name (letters, digits, `-`, `_`),
    /// kept in lower case as HTTP/2 sends it.
    pub(super) fn affinity_header(&self, i: usize, m: &RawModel) -> Result<Option<Arc<str>>> {
        let Some(raw) = &m.affinity_header else { return Ok(None) };
        let field = format!("models[{i}].affinity_header");
        if m.deployments.is_none() {
            let message = "affinity keeps a session on one of a pool's members: set `deployments`";
            return Err(self.err(&field, raw.span(), message));
        }
        let name = raw.get_ref();
        let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            let message = format!("`{name}` is not a header name (letters, digits, `-` and `_`)");
            return Err(self.err(&field, raw.span(), message));
        }
        Ok(Some(Arc::from(name.to_ascii_lowercase())))
    }

    /// Where deployment `i` stands: its region, labels and context window.
    pub(super) fn placement(&self, i: usize, d: &RawDeployment) -> Result<Stands> {
        let field = |f: &str| format!("deployments[{i}].{f}");
        let region = match &d.region {
            None => None,
            Some(r) if is_name(r.get_ref()) => Some(Arc::from(r.get_ref().as_str())),
            Some(r) => return Err(self.err(&field("region"), r.span(), NAME_RULE)),
        };
        let mut labels: Vec<Arc<str>> = Vec::new();
        for (j, label) in d.labels.iter().flatten().enumerate() {
            let at = format!("{}[{j}]", field("labels"));
            if !is_name(label.get_ref()) {
                return Err(self.err(&at, label.span(), NAME_RULE));
            }
            if labels.iter().any(|l| **l == **label.get_ref()) {
                return Err(self.err(&at, label.span(), format!("`{}` is listed twice", label.get_ref())));
            }
            labels.push(Arc::from(label.get_ref().as_str()));
        }
        let context_window =
            d.context_window.as_ref().map(|w| self.positive(&field("context_window"), w)).transpose()?;
        Ok((region, labels, context_window))
    }
}

/// Where a deployment stands: its region, labels and context window.
type Stands = (Option<Arc<str>>, Vec<Arc<str>>, Option<NonZeroU64>);

/// What a region or label may be.
pub(super) const NAME_RULE: &str = "1 to 64 characters: lowercase letters, digits, `-`, `_`, `.`";

pub(super) fn is_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'))
}
