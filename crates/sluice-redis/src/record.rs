//! What the scripts are told of a reservation, worked out here so they do as little as
//! possible: Lua arithmetic and string building cost far more per step than the Redis
//! commands a decision runs. The gateway sends each bucket's field name with its cost
//! already turned into time (µs of the bucket's refill) and its burst after the caller's
//! share; a settlement is a list of fields with the time to add or give back; the record a
//! reservation leaves for lease expiry is the settlement expiry applies, stored flat.

use sluice_quota::{Cost, Dimension, Limits, ScopeKey, ScopeKind, Share};

/// Separator of a stored record's tokens (never part of a field name, see [`scope_id`]).
pub const SEPARATOR: char = '\u{1f}';

/// One limit, in the scripts' units (periods in microseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSpec {
    /// The dimension it counts.
    pub dimension: Dimension,
    /// Amount per period.
    pub amount: u64,
    /// Period, µs.
    pub period_us: u64,
    /// Burst.
    pub burst: u64,
    /// Its field in the group's state hash.
    pub field: String,
}

impl LimitSpec {
    /// Time worth of `units`, rounded up so pacing never runs fast.
    #[must_use]
    pub fn units_us(&self, units: u64) -> u64 {
        let us = (u128::from(units) * u128::from(self.period_us)).div_ceil(u128::from(self.amount.max(1)));
        u64::try_from(us).unwrap_or(u64::MAX)
    }

    /// The time to add to (positive) or give back from (negative) the bucket when
    /// `reserved` units turn out to be `used`.
    fn delta_us(&self, reserved: u64, used: u64) -> i64 {
        if used >= reserved {
            i64::try_from(self.units_us(used - reserved)).unwrap_or(i64::MAX)
        } else {
            -i64::try_from(self.units_us(reserved - used)).unwrap_or(i64::MAX)
        }
    }
}

/// One scope of a reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeSpec {
    /// The scope's id inside its group's state hash: `<kind>:<name>`.
    pub sid: String,
    /// A deployment scope (settled by the provider's rule).
    pub deployment: bool,
    /// A scope shared by many tenants (a lower class may use only its share).
    pub shared: bool,
    /// Concurrency cap, 0 for none.
    pub cc: u64,
    /// Rate limits.
    pub limits: Vec<LimitSpec>,
}

/// A reservation that cannot pass whatever the wait: scope and limit index (from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeverFits {
    /// Index of the scope in the reservation.
    pub scope: usize,
    /// Index of the limit in the scope.
    pub limit: usize,
}

impl ScopeSpec {
    /// The script's view of the scope `key` with `limits`.
    #[must_use]
    pub fn new(key: &ScopeKey, limits: &Limits) -> Self {
        let sid = scope_id(key);
        let limits_spec = limits
            .rates
            .iter()
            .map(|r| {
                let period_us = u64::try_from(r.period.as_micros()).unwrap_or(u64::MAX).max(1);
                LimitSpec {
                    dimension: r.dimension,
                    amount: r.amount.get(),
                    period_us,
                    burst: r.burst.get(),
                    field: format!("{sid}|{}:{period_us}", dimension_code(r.dimension)),
                }
            })
            .collect();
        Self {
            sid,
            deployment: key.kind == ScopeKind::Deployment,
            shared: key.kind.is_shared(),
            cc: limits.concurrency.map_or(0, std::num::NonZeroU64::get),
            limits: limits_spec,
        }
    }

    /// The scope's in-flight count field.
    #[must_use]
    pub fn in_flight_field(&self) -> String {
        format!("{}|n", self.sid)
    }

    /// The scope's paused-until field.
    #[must_use]
    pub fn paused_field(&self) -> String {
        format!("{}|p", self.sid)
    }

    /// The scope's operator-hold field.
    #[must_use]
    pub fn held_field(&self) -> String {
        format!("{}|h", self.sid)
    }
}

/// A scope's id in its group's state hash. Control characters (the stored record's
/// separator among them) become `?`; `|` separates the id from the field's own part.
#[must_use]
pub fn scope_id(key: &ScopeKey) -> String {
    let name: String = key.name.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    format!("{}:{name}", key.kind.as_str())
}

fn dimension_code(d: Dimension) -> u8 {
    match d {
        Dimension::Requests => 1,
        Dimension::InputTokens => 2,
        Dimension::OutputTokens => 3,
        Dimension::TotalTokens => 4,
    }
}

fn units(cost: Cost, d: Dimension) -> u64 {
    match d {
        Dimension::Requests => cost.requests,
        Dimension::InputTokens => cost.input_tokens,
        Dimension::OutputTokens => cost.output_tokens,
        Dimension::TotalTokens => cost.input_tokens.saturating_add(cost.output_tokens),
    }
}

/// The reserve script's view of `cost` on `scopes` for a caller with `share` of shared
/// bursts: the scope count, the field count, the fields (per scope its in-flight, paused
/// and held fields and then its limits' fields), then the numbers (per scope its
/// concurrency cap and limit count, then per limit the cost and the usable burst, both as
/// time). Fields first and together, so the script hands them to one HMGET as they came.
///
/// # Errors
/// [`NeverFits`] when a limit's amount per period is below the cost: no wait helps.
pub fn reserve_args<'a>(
    cost: Cost,
    share: Share,
    scopes: impl ExactSizeIterator<Item = &'a ScopeSpec> + Clone,
) -> Result<Vec<String>, NeverFits> {
    let fields: usize = scopes.clone().map(|s| 3 + s.limits.len()).sum();
    let mut out = Vec::with_capacity(2 + fields * 3);
    out.extend([scopes.len().to_string(), fields.to_string()]);
    for scope in scopes.clone() {
        out.extend([scope.in_flight_field(), scope.paused_field(), scope.held_field()]);
        out.extend(scope.limits.iter().map(|l| l.field.clone()));
    }
    for (i, scope) in scopes.enumerate() {
        out.extend([scope.cc.to_string(), scope.limits.len().to_string()]);
        for (j, lim) in scope.limits.iter().enumerate() {
            let units = units(cost, lim.dimension);
            if units > lim.amount {
                return Err(NeverFits { scope: i, limit: j });
            }
            let burst = lim.units_us(lim.burst);
            let burst = if scope.shared { share.of(burst) } else { burst };
            out.extend([lim.units_us(units).to_string(), burst.to_string()]);
        }
    }
    Ok(out)
}

/// The settlement of `reserved` on `scopes` by what was `used` (the caller's scopes) and
/// counted `upstream` (deployment scopes): the number of in-flight fields to decrement,
/// the number of buckets to move, those fields, then per bucket the time to add (or,
/// negative, give back). Buckets whose time does not change are left out.
#[must_use]
pub fn settle_args(reserved: Cost, used: Cost, upstream: Cost, scopes: &[ScopeSpec]) -> Vec<String> {
    let slots: Vec<String> = scopes.iter().filter(|s| s.cc > 0).map(ScopeSpec::in_flight_field).collect();
    let mut buckets = Vec::new();
    let mut deltas = Vec::new();
    for scope in scopes {
        let used = if scope.deployment { upstream } else { used };
        for lim in &scope.limits {
            let delta = lim.delta_us(units(reserved, lim.dimension), units(used, lim.dimension));
            if delta != 0 {
                buckets.push(lim.field.clone());
                deltas.push(delta.to_string());
            }
        }
    }
    let mut out = Vec::with_capacity(2 + slots.len() + buckets.len() * 2);
    out.extend([slots.len().to_string(), buckets.len().to_string()]);
    out.extend(slots);
    out.extend(buckets);
    out.extend(deltas);
    out
}

/// The lease-set member of reservation `id` of `cost` on `scopes`: the id, then the
/// settlement lease expiry applies (the caller's scopes keep request and input but get
/// output back; deployment scopes keep everything, the provider counted it), joined by
/// [`SEPARATOR`]. The member is the record: expiry needs nothing else.
#[must_use]
pub fn lease_member(id: u64, cost: Cost, scopes: &[ScopeSpec]) -> String {
    let kept = Cost { output_tokens: 0, ..cost };
    let mut member = id.to_string();
    for arg in settle_args(cost, kept, cost, scopes) {
        member.push(SEPARATOR);
        member.push_str(&arg);
    }
    member
}

#[cfg(test)]
mod tests {
    use sluice_quota::RateLimit;

    use super::*;

    fn scopes() -> Vec<ScopeSpec> {
        let limits = Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::OutputTokens, 60_000).unwrap_or_else(|| unreachable!()))
            .with_concurrency(std::num::NonZeroU64::new(4).unwrap_or(std::num::NonZeroU64::MIN));
        let tenant = ScopeSpec::new(&ScopeKey::new(ScopeKind::Tenant, "acme"), &limits);
        let deployment = ScopeSpec::new(&ScopeKey::new(ScopeKind::Deployment, "east"), &limits);
        vec![tenant, deployment]
    }

    #[test]
    fn a_reservation_is_its_fields_then_its_costs_as_time() {
        let args = reserve_args(Cost::request(10, 20), Share::permille(500), scopes().iter()).unwrap();
        // 20 output tokens of 60,000 a minute = 20 ms; the burst (3,000 tokens) is 3 s,
        // half of it on the shared deployment scope.
        assert_eq!(
            args,
            [
                "2",
                "8",
                "tenant:acme|n",
                "tenant:acme|p",
                "tenant:acme|h",
                "tenant:acme|3:60000000",
                "deployment:east|n",
                "deployment:east|p",
                "deployment:east|h",
                "deployment:east|3:60000000",
                "4",
                "1",
                "20000",
                "3000000",
                "4",
                "1",
                "20000",
                "1500000"
            ]
        );
        let never = reserve_args(Cost::request(10, 60_001), Share::FULL, scopes().iter());
        assert_eq!(never, Err(NeverFits { scope: 0, limit: 0 }));
    }

    #[test]
    fn settlement_gives_back_or_adds_time_per_bucket_by_each_scopes_rule() {
        let scopes = scopes();
        // 20 reserved, 5 used by the caller's count, 30 counted upstream.
        let args = settle_args(Cost::request(10, 20), Cost::request(10, 5), Cost::request(10, 30), &scopes);
        assert_eq!(
            args,
            [
                "2",
                "2",
                "tenant:acme|n",
                "deployment:east|n",
                "tenant:acme|3:60000000",
                "deployment:east|3:60000000",
                "-15000",
                "10000"
            ]
        );
        // Expiry: output comes back to the caller's scopes; the deployment keeps it all.
        let member = lease_member(7, Cost::request(10, 20), &scopes);
        assert_eq!(
            member,
            "7\u{1f}2\u{1f}1\u{1f}tenant:acme|n\u{1f}deployment:east|n\u{1f}tenant:acme|3:60000000\u{1f}-20000"
        );
    }

    #[test]
    fn control_characters_cannot_reach_the_record() {
        assert_eq!(scope_id(&ScopeKey::new(ScopeKind::ApiKey, "a\u{1f}b\nc")), "api_key:a?b?c");
    }
}
