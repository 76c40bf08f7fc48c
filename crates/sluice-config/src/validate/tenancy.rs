//! Who calls: tenants and their teams, traffic classes, and API keys.

use super::*;

impl Validator<'_> {
    pub(super) fn tenants(&self, raw: &[RawTenant], deployments: &[Deployment]) -> Result<Vec<Tenant>> {
        self.unique("tenants", raw.iter().map(|t| &t.name))?;
        raw.iter()
            .enumerate()
            .map(|(i, t)| {
                self.unique(&format!("tenants[{i}].teams"), t.teams.iter().map(|team| &team.name))?;
                let constraint = (&t.regions, &t.labels);
                let allowed = self.allowed(&format!("tenants[{i}]"), constraint, &Allowed::default(), deployments)?;
                let teams = t
                    .teams
                    .iter()
                    .enumerate()
                    .map(|(j, team)| {
                        let field = format!("tenants[{i}].teams[{j}]");
                        let limits = self.limits(ScopeKind::Team, &format!("{field}.limits"), &team.limits)?;
                        let constraint = (&team.regions, &team.labels);
                        let allowed = self.allowed(&field, constraint, &allowed, deployments)?;
                        Ok(Team { name: Arc::from(team.name.get_ref().as_str()), limits, allowed })
                    })
                    .collect::<Result<_>>()?;
                let limits = self.limits(ScopeKind::Tenant, &format!("tenants[{i}].limits"), &t.limits)?;
                let weight = match &t.weight {
                    None => std::num::NonZeroU32::MIN,
                    Some(w) => u32::try_from(*w.get_ref())
                        .ok()
                        .and_then(std::num::NonZeroU32::new)
                        .filter(|w| w.get() <= 1_000_000)
                        .ok_or_else(|| self.err(&format!("tenants[{i}].weight"), w.span(), "between 1 and 1000000"))?,
                };
                Ok(Tenant { name: Arc::from(t.name.get_ref().as_str()), weight, limits, allowed, teams })
            })
            .collect()
    }

    pub(super) fn classes(&self, raw: &[RawClass]) -> Result<Vec<TrafficClass>> {
        self.unique("classes", raw.iter().map(|c| &c.name))?;
        // The highest priority (the lowest number); the default class, added below when the
        // file leaves it out, has priority 0.
        let has_default = raw.iter().any(|c| c.name.get_ref() == defaults::CLASS);
        let priority_of = |c: &RawClass| c.priority.as_ref().map_or(0, |p| *p.get_ref());
        let top = raw.iter().map(priority_of).chain((!has_default).then_some(0)).min().unwrap_or(0);
        let mut classes: Vec<TrafficClass> = raw
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let max_wait =
                    self.duration(&format!("classes[{i}].max_wait"), &c.max_wait, defaults::INTERACTIVE_MAX_WAIT)?;
                let priority = priority_of(c);
                let share_permille = match &c.share {
                    None if priority > top => defaults::LOWER_CLASS_SHARE_PERMILLE,
                    None => 1000,
                    Some(s) if *s.get_ref() > 0.0 && *s.get_ref() <= 1.0 => (s.get_ref() * 1000.0).round() as u16,
                    Some(s) => {
                        return Err(self.err(&format!("classes[{i}].share"), s.span(), "between 0 (exclusive) and 1"));
                    }
                };
                let max_queue = match &c.max_queue {
                    None => defaults::MAX_QUEUE,
                    Some(q) => self.positive(&format!("classes[{i}].max_queue"), q)?.get(),
                };
                let max_queue = usize::try_from(max_queue).unwrap_or(usize::MAX);
                let max_attempts = self.max_attempts(&format!("classes[{i}].max_attempts"), c.max_attempts.as_ref())?;
                let retry_attempts = self.attempts(
                    &format!("classes[{i}].retry_attempts"),
                    c.retry_attempts.as_ref(),
                    defaults::RETRY_ATTEMPTS,
                )?;
                let retry_within =
                    self.duration(&format!("classes[{i}].retry_within"), &c.retry_within, defaults::RETRY_WITHIN)?;
                let name = Arc::from(c.name.get_ref().as_str());
                Ok(TrafficClass {
                    name,
                    max_wait,
                    priority,
                    share_permille,
                    max_queue,
                    max_attempts,
                    retry_attempts,
                    retry_within,
                })
            })
            .collect::<Result<_>>()?;
        if !classes.iter().any(|c| &*c.name == defaults::CLASS) {
            let name = Arc::from(defaults::CLASS);
            let max_queue = usize::try_from(defaults::MAX_QUEUE).unwrap_or(usize::MAX);
            let max_wait = defaults::INTERACTIVE_MAX_WAIT;
            let max_attempts = u32::try_from(defaults::MAX_ATTEMPTS).unwrap_or(u32::MAX);
            let class = TrafficClass {
                name,
                max_wait,
                priority: 0,
                share_permille: 1000,
                max_queue,
                max_attempts,
                retry_attempts: defaults::RETRY_ATTEMPTS,
                retry_within: defaults::RETRY_WITHIN,
            };
            classes.insert(0, class);
        }
        Ok(classes)
    }

    pub(super) fn keys(
        &self,
        raw: &[RawKey],
        tenants: &[Tenant],
        classes: &[TrafficClass],
        deployments: &[Deployment],
    ) -> Result<Vec<ApiKey>> {
        self.unique("keys", raw.iter().map(|k| &k.id))?;
        let tenant_names = by_name(tenants, |t| &*t.name);
        let class_names = by_name(classes, |c| &*c.name);
        let mut hashes = HashMap::new();
        raw.iter()
            .enumerate()
            .map(|(i, k)| {
                let field = |f: &str| format!("keys[{i}].{f}");
                let tenant = self.reference(&field("tenant"), &k.tenant, &tenant_names, "tenant")?;
                let team = match &k.team {
                    None => None,
                    Some(t) => {
                        let teams = by_name(&tenants[tenant].teams, |t| &*t.name);
                        Some(self.reference(&field("team"), t, &teams, "team in this tenant")?)
                    }
                };
                let class = match &k.class {
                    None => class_names.get(defaults::CLASS).copied().unwrap_or(0),
                    Some(c) => self.reference(&field("class"), c, &class_names, "class")?,
                };
                let sha256 = self.sha256(&field("sha256"), &k.sha256)?;
                if let Some(other) = hashes.insert(sha256, i) {
                    return Err(self.err(&field("sha256"), k.sha256.span(), format!("same key as keys[{other}]")));
                }
                let limits = self.limits(ScopeKind::ApiKey, &field("limits"), &k.limits)?;
                let owner = &tenants[tenant];
                let team_allowed = team.and_then(|j| owner.teams.get(j)).map(|t| &t.allowed);
                let wider = team_allowed.map_or_else(|| owner.allowed.clone(), |t| owner.allowed.narrowed(t));
                let allowed = self.allowed(&format!("keys[{i}]"), (&k.regions, &k.labels), &wider, deployments)?;
                Ok(ApiKey { id: Arc::from(k.id.get_ref().as_str()), sha256, tenant, team, class, limits, allowed })
            })
            .collect()
    }

    pub(super) fn sha256(&self, field: &str, raw: &Spanned<String>) -> Result<[u8; 32]> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(raw.get_ref(), &mut out).map_err(|_| {
            self.err(field, raw.span(), "must be 64 hex digits: the SHA-256 of the key (`sluice hash-key` prints it)")
        })?;
        Ok(out)
    }

    pub(super) fn attempts(&self, field: &str, raw: Option<&Spanned<u64>>, default: u32) -> Result<u32> {
        let Some(n) = raw else { return Ok(default) };
        u32::try_from(*n.get_ref())
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| self.err(field, n.span(), "between 1 and 100"))
    }

    pub(super) fn max_attempts(&self, field: &str, raw: Option<&Spanned<u64>>) -> Result<u32> {
        let Some(n) = raw else { return Ok(u32::try_from(defaults::MAX_ATTEMPTS).unwrap_or(u32::MAX)) };
        u32::try_from(*n.get_ref())
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| self.err(field, n.span(), "between 1 and 100"))
    }
}
