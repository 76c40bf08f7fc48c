//! What the scripts are told of a reservation, worked out here so they do as little as
//! possible: each Lua step and each string crossing between Lua and Redis costs more than
//! the commands a decision runs. The gateway turns each bucket's cost and burst into time
//! (µs of its refill), finds never-fits itself and packs the numbers as MessagePack, which
//! the scripts unpack in one C call (`cmsgpack`). A scope's state is one MessagePack array
//! of numbers in its group's state hash (see [`crate::keys`]): no strings to build, hash
//! or intern on the hot path.

use std::borrow::Borrow;

use std::time::Duration;

use sluice_quota::{Budget, BudgetPeriod, Calendar, Cost, Dimension, Limits, ScopeKey, Share, bucket};

/// Largest time the scripts are sent: Lua numbers are doubles, exact to 2^53.
const MAX_US: u64 = 1 << 52;

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
    /// It keeps a send guard (see [`sluice_quota::bucket::need`]).
    pub guard: bool,
    /// Its name, `<dimension code>:<period µs>`, part of its scope's layout.
    pub code: String,
}

impl LimitSpec {
    /// Time worth of `units`, rounded up so pacing never runs fast.
    #[must_use]
    pub fn units_us(&self, units: u64) -> u64 {
        let us = (u128::from(units) * u128::from(self.period_us)).div_ceil(u128::from(self.amount.max(1)));
        u64::try_from(us).unwrap_or(u64::MAX).min(MAX_US)
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
    /// The scope's field in its group's state hash: `<kind>:<name>`.
    pub sid: String,
    /// A deployment scope (settled by the provider's rule).
    pub deployment: bool,
    /// A scope shared by many tenants (a lower class may use only its share).
    pub shared: bool,
    /// Concurrency cap, 0 for none.
    pub cc: u64,
    /// Rate limits.
    pub limits: Vec<LimitSpec>,
    /// The limits' layout (see [`layout_of`]). A scope's stored state belongs to one
    /// layout; when a reload changes which limits a scope has, each bucket that limits
    /// the same dimension over the same period carries over and a new one starts full
    /// (in-flight counts, pauses and holds carry over).
    pub layout: u64,
    /// Money budgets, counted in the scope's budget field ([`budget_field`]).
    pub budgets: Vec<Budget>,
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
        let limits_spec: Vec<LimitSpec> = limits
            .rates
            .iter()
            .map(|r| {
                let period_us = u64::try_from(r.period.as_micros()).unwrap_or(u64::MAX).max(1);
                LimitSpec {
                    dimension: r.dimension,
                    amount: r.amount.get(),
                    period_us,
                    burst: r.burst.get(),
                    guard: r.guard,
                    code: format!("{}:{period_us}", dimension_code(r.dimension)),
                }
            })
            .collect();
        let layout = layout_of(&limits_spec);
        Self {
            sid,
            deployment: key.kind.is_upstream(),
            shared: key.kind.is_shared(),
            cc: limits.concurrency.map_or(0, std::num::NonZeroU64::get),
            limits: limits_spec,
            layout,
            budgets: limits.budgets.clone(),
        }
    }
}

/// A scope's field in its group's state hash: `<kind>:<name>`, control characters
/// replaced by `?` (they have no place in keys an operator reads).
#[must_use]
pub fn scope_id(key: &ScopeKey) -> String {
    let name: String = key.name.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    format!("{}:{name}", key.kind.as_str())
}

/// The field of a scope's money budgets in its group's state hash: `<sid>$b`, a
/// MessagePack array {day's period, spent that day, month's period, spent that month,
/// held that day, held that month} (periods as their start, Unix seconds; amounts in
/// micro-units; held: the part of the spend that reservations in flight hold). A field
/// written before holds were kept has the first four: it holds nothing.
#[must_use]
pub fn budget_field(sid: &str) -> String {
    format!("{sid}$b")
}

/// A budget's place in its field: 1 for the day, 2 for the month.
fn budget_slot(period: BudgetPeriod) -> u64 {
    match period {
        BudgetPeriod::Day => 1,
        BudgetPeriod::Month => 2,
    }
}

/// A budget that can never take a cost: the scope's index and the budget's amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    /// Index of the scope in the reservation.
    pub scope: usize,
    /// The budget's amount per period, micro-units.
    pub capacity: u64,
}

/// The budgets a reservation of `money` checks and charges, for `batch.lua`: one flat
/// MessagePack array with per budget its field, slot, current period, amount, the cost, the
/// time to the next period (µs) and its scope's index (from 1). Empty when the cost is 0:
/// a request without a price is never refused by a budget.
///
/// # Errors
/// [`OverBudget`] when the cost exceeds a whole budget.
pub fn budget_reserve<S: Borrow<ScopeSpec>>(
    money: u64,
    calendar: Calendar,
    scopes: &[S],
) -> Result<Vec<u8>, OverBudget> {
    let mut entries = Vec::new();
    if money > 0 {
        for (i, scope) in scopes.iter().map(Borrow::borrow).enumerate() {
            for budget in &scope.budgets {
                if money > budget.amount.get() {
                    return Err(OverBudget { scope: i, capacity: budget.amount.get() });
                }
                entries.push((scope, budget, i + 1));
            }
        }
    }
    let mut out = Vec::with_capacity(8 + entries.len() * 48);
    push_array(&mut out, 7 * entries.len());
    for (scope, budget, index) in entries {
        let period = calendar.period(budget.period);
        push_str(&mut out, &budget_field(&scope.sid));
        push_uint(&mut out, budget_slot(budget.period));
        push_uint(&mut out, period.id);
        push_uint(&mut out, budget.amount.get());
        push_uint(&mut out, money);
        push_uint(&mut out, u64::try_from(period.reset.as_micros()).unwrap_or(MAX_US).min(MAX_US));
        push_uint(&mut out, u64::try_from(index).unwrap_or(0));
    }
    Ok(out)
}

/// The budgets' part of a settlement of `reserved` money by what was `used` (the caller's
/// scopes) and counted `upstream` (deployment scopes), charged in `calendar`'s periods: one
/// flat array with per budget that moves its field, slot, the period it was charged to,
/// the amount to add to the spend (negative: give back) and the amount no longer held
/// (the reservation). A past period is left alone by the script.
#[must_use]
pub fn budget_settle<S: Borrow<ScopeSpec>>(
    reserved: u64,
    used: Cost,
    upstream: Cost,
    calendar: Calendar,
    scopes: &[S],
) -> Vec<u8> {
    let mut entries = Vec::new();
    for scope in scopes.iter().map(Borrow::borrow) {
        let used = if scope.deployment { upstream.money } else { used.money };
        let delta = i64::try_from(used).unwrap_or(i64::MAX).saturating_sub(i64::try_from(reserved).unwrap_or(i64::MAX));
        if delta != 0 || reserved > 0 {
            entries.extend(scope.budgets.iter().map(|b| (budget_field(&scope.sid), b.period, delta)));
        }
    }
    let mut out = Vec::with_capacity(8 + entries.len() * 40);
    push_array(&mut out, 5 * entries.len());
    for (field, period, delta) in entries {
        push_str(&mut out, &field);
        push_uint(&mut out, budget_slot(period));
        push_uint(&mut out, calendar.period(period).id);
        push_sint(&mut out, delta);
        push_uint(&mut out, reserved);
    }
    out
}

/// Layouts at or above this spell out their limits.
const SPELLED: u64 = 1 << 50;
/// Most limits a spelled-out layout holds (one base-32 digit each, below [`SPELLED`]).
const MAX_SPELLED: usize = 9;

/// The limits' layout, the same on every instance and every build. Limits whose periods
/// are a second, a minute, an hour or a day (every limit the configuration can express),
/// up to [`MAX_SPELLED`] of them, are spelled out: [`SPELLED`] plus one base-32 digit per
/// limit, first limit lowest, naming its dimension and period, so the scripts can carry
/// each bucket over to another layout by what it limits (`common.lua`, `relayout`).
/// Others get an opaque FNV-1a hash of their codes, below 2^32: when it changes, their
/// buckets start full.
pub fn layout_of(limits: &[LimitSpec]) -> u64 {
    let digit = |lim: &LimitSpec| {
        let period = match lim.period_us {
            60_000_000 => 0,
            86_400_000_000 => 1,
            1_000_000 => 2,
            3_600_000_000 => 3,
            _ => return None,
        };
        Some(u64::from(dimension_code(lim.dimension)) + 4 * period)
    };
    let digits: Option<Vec<u64>> = limits.iter().map(digit).collect();
    if let Some(digits) = digits.filter(|d| d.len() <= MAX_SPELLED) {
        return SPELLED + digits.iter().rev().fold(0, |layout, d| layout * 32 + d);
    }
    let mut hash: u32 = 0x811c_9dc5;
    for lim in limits {
        for byte in lim.code.bytes().chain(std::iter::once(b'|')) {
            hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
        }
    }
    u64::from(hash)
}

fn dimension_code(d: Dimension) -> u8 {
    match d {
        Dimension::Requests => 1,
        Dimension::InputTokens => 2,
        Dimension::OutputTokens => 3,
        Dimension::TotalTokens => 4,
    }
}

pub(crate) fn push_uint(out: &mut Vec<u8>, n: u64) {
    // Writing to a Vec cannot fail.
    let _ = rmp::encode::write_uint(out, n.min(MAX_US));
}

fn push_sint(out: &mut Vec<u8>, n: i64) {
    let bound = i64::try_from(MAX_US).unwrap_or(i64::MAX);
    let _ = rmp::encode::write_sint(out, n.clamp(-bound, bound));
}

pub(crate) fn push_str(out: &mut Vec<u8>, s: &str) {
    // Writing to a Vec cannot fail.
    let _ = rmp::encode::write_str(out, s);
}

pub(crate) fn push_array(out: &mut Vec<u8>, len: usize) {
    let _ = rmp::encode::write_array_len(out, u32::try_from(len).unwrap_or(u32::MAX));
}

/// One scope of a reservation in the scripts' units: its concurrency cap (0 for none), the
/// layout of its limits and per limit the cost and the room as time (the core's
/// [`bucket::Need`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeCost {
    /// Concurrency cap, 0 for none.
    pub cc: u64,
    /// The limits' layout.
    pub layout: u64,
    /// Per limit: (cost, room), µs; a negative room: the bucket must have been full for
    /// that long.
    pub buckets: Vec<(u64, i64)>,
}

/// The reserve script's view of a reservation: each scope of its path, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveSpec {
    /// The scopes.
    pub scopes: Vec<ScopeCost>,
}

impl ReserveSpec {
    /// One flat MessagePack array: per scope its cap, layout and limit count, then per
    /// limit the cost and the room. Numbers only and precomputed, so `batch.lua` only
    /// compares and adds.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.scopes.len() * 48);
        push_array(&mut out, self.scopes.iter().map(|s| 3 + 2 * s.buckets.len()).sum());
        for scope in &self.scopes {
            push_uint(&mut out, scope.cc);
            push_uint(&mut out, scope.layout);
            push_uint(&mut out, u64::try_from(scope.buckets.len()).unwrap_or(0));
            for &(step, room) in &scope.buckets {
                push_uint(&mut out, step);
                push_sint(&mut out, room);
            }
        }
        out
    }

    /// Whether `other` has the same scopes' caps, layouts and limit counts: reservations
    /// that can be combined (on the same fields).
    #[must_use]
    pub fn same_shape(&self, other: &Self) -> bool {
        self.scopes.len() == other.scopes.len()
            && self
                .scopes
                .iter()
                .zip(&other.scopes)
                .all(|(a, b)| a.cc == b.cc && a.layout == b.layout && a.buckets.len() == b.buckets.len())
    }

    /// Reservations of one shape, in order, as one reserve spec (encoded): per bucket the
    /// sum of their costs, and as room the least over them of (room − what the earlier
    /// ones took). The first one's room may be negative (it needs the bucket full for that
    /// long); a later one whose room is less than what the earlier ones took can never
    /// pass right after them, and makes the room [`NEVER_AFTER`]. It passes exactly when
    /// the state lets every one of them pass in turn; the script then grants all of them at
    /// once, or otherwise decides each on its own. `specs` must not be empty and share one
    /// shape.
    #[must_use]
    pub fn combined(specs: &[&Self]) -> Vec<u8> {
        let Some(first) = specs.first() else { return Vec::new() };
        let mut out = Vec::with_capacity(16 + first.scopes.len() * 48);
        push_array(&mut out, first.scopes.iter().map(|s| 3 + 2 * s.buckets.len()).sum());
        for (i, scope) in first.scopes.iter().enumerate() {
            push_uint(&mut out, scope.cc);
            push_uint(&mut out, scope.layout);
            push_uint(&mut out, u64::try_from(scope.buckets.len()).unwrap_or(0));
            for j in 0..scope.buckets.len() {
                let (mut taken, mut room) = (0_i64, i64::MAX);
                for (n, spec) in specs.iter().enumerate() {
                    let (step, own_room) = spec.scopes.get(i).and_then(|s| s.buckets.get(j)).copied().unwrap_or((0, 0));
                    let left = own_room.max(NEVER_AFTER) - taken;
                    room = room.min(if n > 0 && left < 0 { NEVER_AFTER } else { left });
                    taken += signed(step);
                }
                push_uint(&mut out, u64::try_from(taken).unwrap_or(u64::MAX));
                push_sint(&mut out, room);
            }
        }
        out
    }
}

/// The room of a combination that can never pass (the least a script number holds,
/// −`MAX_US`): the script's wait is then positive whatever the state, and each
/// reservation is decided on its own.
pub const NEVER_AFTER: i64 = -(MAX_US as i64);

fn signed(us: u64) -> i64 {
    i64::try_from(us.min(MAX_US)).unwrap_or(i64::MAX)
}

/// The reserve script's view of `cost` on `scopes` for a caller with `share` of shared
/// bursts: per bucket the core's [`bucket::need`], in µs.
///
/// # Errors
/// [`NeverFits`] when a limit's amount per period is below the cost: no wait helps.
pub fn reserve_spec<S: Borrow<ScopeSpec>>(cost: Cost, share: Share, scopes: &[S]) -> Result<ReserveSpec, NeverFits> {
    let mut out = Vec::with_capacity(scopes.len());
    for (i, scope) in scopes.iter().map(Borrow::borrow).enumerate() {
        let mut buckets = Vec::with_capacity(scope.limits.len());
        for (j, lim) in scope.limits.iter().enumerate() {
            let units = cost.of(lim.dimension);
            if units > lim.amount {
                return Err(NeverFits { scope: i, limit: j });
            }
            let burst = lim.units_us(lim.burst);
            let guard = bucket::guard_of(Duration::from_micros(burst), lim.guard);
            let guard = u64::try_from(guard.as_micros()).unwrap_or(u64::MAX);
            let usable = if scope.shared { share.of(burst) } else { burst };
            let need = bucket::Need::of(lim.units_us(units), burst, usable, guard);
            buckets.push((need.step, need.room));
        }
        out.push(ScopeCost { cc: scope.cc, layout: scope.layout, buckets });
    }
    Ok(ReserveSpec { scopes: out })
}

/// A settlement for the scripts: the state fields of the scopes it touches, and one flat
/// array with per such scope 1 or 0 (give a concurrency slot back or not), its layout and
/// the number of buckets that move, then per bucket its position (from 1) and the time to
/// add (or, negative, give back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleSpec {
    /// The touched scopes' fields.
    pub sids: Vec<String>,
    /// The MessagePack array, scopes in the order of `sids`.
    pub spec: Vec<u8>,
}

/// The settlement of `reserved` on `scopes` by what was `used` (the caller's scopes) and
/// counted `upstream` (deployment scopes). Scopes with nothing to change are left out.
#[must_use]
pub fn settle_spec<S: Borrow<ScopeSpec>>(reserved: Cost, used: Cost, upstream: Cost, scopes: &[S]) -> SettleSpec {
    let mut sids = Vec::with_capacity(scopes.len());
    // Per touched scope: slot back (1/0), layout, (bucket position, delta) pairs.
    type Entry = (u8, u64, Vec<(u64, i64)>);
    let mut entries: Vec<Entry> = Vec::with_capacity(scopes.len());
    for scope in scopes.iter().map(Borrow::borrow) {
        let used = if scope.deployment { upstream } else { used };
        let moves: Vec<(u64, i64)> = scope
            .limits
            .iter()
            .zip(1..)
            .map(|(lim, at)| (at, lim.delta_us(reserved.of(lim.dimension), used.of(lim.dimension))))
            .filter(|(_, delta)| *delta != 0)
            .collect();
        if scope.cc > 0 || !moves.is_empty() {
            sids.push(scope.sid.clone());
            entries.push((u8::from(scope.cc > 0), scope.layout, moves));
        }
    }
    let mut spec = Vec::with_capacity(8 + entries.len() * 24);
    push_array(&mut spec, entries.iter().map(|(_, _, moves)| 3 + 2 * moves.len()).sum());
    for (slot, layout, moves) in entries {
        push_uint(&mut spec, u64::from(slot));
        push_uint(&mut spec, layout);
        push_uint(&mut spec, u64::try_from(moves.len()).unwrap_or(0));
        for (at, delta) in moves {
            push_uint(&mut spec, at);
            push_sint(&mut spec, delta);
        }
    }
    SettleSpec { sids, spec }
}

/// The lease-set member of reservation `id` of `cost` on `scopes`, charged to `calendar`'s
/// periods: an array of the id, the fields of the scopes expiry touches and the settlement
/// it applies (the caller's scopes keep request and input but get output back; deployment
/// scopes keep everything, the provider counted it), then, when it reserved money on a
/// budget, that budgets' settlement ([`budget_settle`]: its money stays spent but is no
/// longer held). The member is the record: expiry needs nothing else.
#[must_use]
pub fn lease_member<S: Borrow<ScopeSpec>>(id: u64, cost: Cost, calendar: Calendar, scopes: &[S]) -> Vec<u8> {
    let kept = Cost { output_tokens: 0, ..cost };
    let settle = settle_spec(cost, kept, cost, scopes);
    let holds = scopes.iter().any(|s| !s.borrow().budgets.is_empty()) && cost.money > 0;
    let budgets = if holds { budget_settle(cost.money, kept, cost, calendar, scopes) } else { Vec::new() };
    let mut member = Vec::with_capacity(
        16 + settle.spec.len() + budgets.len() + settle.sids.iter().map(|s| s.len() + 2).sum::<usize>(),
    );
    push_array(&mut member, if holds { 4 } else { 3 });
    let _ = rmp::encode::write_uint(&mut member, id);
    push_array(&mut member, settle.sids.len());
    for sid in &settle.sids {
        push_str(&mut member, sid);
    }
    member.extend_from_slice(&settle.spec);
    member.extend_from_slice(&budgets);
    member
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;
    use std::time::Duration;

    use sluice_quota::{RateLimit, ScopeKind};

    use super::*;

    fn scopes() -> Vec<ScopeSpec> {
        let limits = Limits::unlimited()
            .with_rate(
                RateLimit::per_minute(Dimension::OutputTokens, 60_000)
                    .unwrap_or_else(|| unreachable!())
                    .with_burst_window(std::time::Duration::from_secs(3)),
            )
            .with_concurrency(std::num::NonZeroU64::new(4).unwrap_or(std::num::NonZeroU64::MIN));
        let tenant = ScopeSpec::new(&ScopeKey::new(ScopeKind::Tenant, "acme"), &limits);
        let deployment = ScopeSpec::new(&ScopeKey::new(ScopeKind::Deployment, "east"), &limits);
        vec![tenant, deployment]
    }

    /// MessagePack of the numbers and strings the tests expect, written out by hand.
    fn fixstr(s: &str) -> Vec<u8> {
        let mut out = vec![0xa0 | u8::try_from(s.len()).unwrap_or(0)];
        out.extend_from_slice(s.as_bytes());
        out
    }

    /// MessagePack of a number, as rmp writes it.
    fn uint_mp(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = rmp::encode::write_uint(&mut out, n);
        out
    }

    #[test]
    fn a_reservation_is_each_scope_with_its_costs_as_time() {
        let scopes = scopes();
        let layout = scopes[0].layout;
        assert_eq!(layout, scopes[1].layout, "the same limits, the same layout");
        let spec = reserve_spec(Cost::request(10, 20), Share::permille(500), &scopes).unwrap().encode();
        // 20 output tokens of 60,000 a minute = 20 ms; the burst (3,000 tokens) is 3 s,
        // half of it on the shared deployment scope; what must be left is burst less cost.
        let mut expected = vec![0x9a, 0x04];
        expected.extend(uint_mp(layout));
        expected.extend([0x01, 0xcd, 0x4e, 0x20, 0xce, 0x00, 0x2d, 0x78, 0xa0]); // 20,000 and 2,980,000
        expected.push(0x04);
        expected.extend(uint_mp(layout));
        expected.extend([0x01, 0xcd, 0x4e, 0x20, 0xce, 0x00, 0x16, 0x95, 0x40]); // 20,000 and 1,480,000
        assert_eq!(spec, expected);
        let never = reserve_spec(Cost::request(10, 60_001), Share::FULL, &scopes);
        assert_eq!(never, Err(NeverFits { scope: 0, limit: 0 }));
    }

    #[test]
    fn a_guarded_limit_keeps_its_guard_as_the_core_does() {
        // 60,000 tokens a minute, a one-second burst of 1,000 with a 20 ms guard.
        let rate = RateLimit::per_minute(Dimension::TotalTokens, 60_000).unwrap_or_else(|| unreachable!()).guarded();
        let scope = ScopeSpec::new(&ScopeKey::new(ScopeKind::Deployment, "d"), &Limits::unlimited().with_rate(rate));
        let small = reserve_spec(Cost::request(100, 0), Share::FULL, &[&scope]).unwrap_or_else(|_| unreachable!());
        assert_eq!(small.scopes[0].buckets, [(100_000, 880_000)]);
        // The whole window needs the bucket full for the guard, and takes only itself.
        let whole = reserve_spec(Cost::request(1_000, 0), Share::FULL, &[&scope]).unwrap_or_else(|_| unreachable!());
        assert_eq!(whole.scopes[0].buckets, [(1_000_000, -20_000)]);
        // Right after a small one it can never pass, nor a small one right after it; two
        // small ones can.
        let layout = i64::try_from(scope.layout).unwrap_or(i64::MAX);
        assert_eq!(numbers(&ReserveSpec::combined(&[&small, &whole])), [0, layout, 1, 1_100_000, NEVER_AFTER]);
        assert_eq!(numbers(&ReserveSpec::combined(&[&whole, &small])), [0, layout, 1, 1_100_000, NEVER_AFTER]);
        assert_eq!(numbers(&ReserveSpec::combined(&[&small, &small])), [0, layout, 1, 200_000, 780_000]);
    }

    /// The integers of a flat MessagePack array.
    fn numbers(mut bytes: &[u8]) -> Vec<i64> {
        let len = rmp::decode::read_array_len(&mut bytes).unwrap_or(0);
        (0..len).map(|_| rmp::decode::read_int(&mut bytes).unwrap_or(i64::MIN)).collect()
    }

    #[test]
    fn combined_reservations_pass_only_where_each_would_in_turn() {
        let scopes = scopes();
        let small = reserve_spec(Cost::request(10, 20), Share::FULL, &scopes).unwrap();
        let large = reserve_spec(Cost::request(10, 2_000), Share::FULL, &scopes).unwrap();
        assert!(small.same_shape(&large));
        // 20 ms then 2 s of a 3 s burst: together 2.02 s; the second must find 1 s left
        // after itself once the first took 20 ms, so the room is min(2.98, 1 - 0.02) s.
        let layout = i64::try_from(scopes[0].layout).unwrap_or(i64::MAX);
        let combined = numbers(&ReserveSpec::combined(&[&small, &large]));
        assert_eq!(combined, [4, layout, 1, 2_020_000, 980_000, 4, layout, 1, 2_020_000, 980_000]);
        // Two large ones cannot both fit a full 3 s burst: the second can never pass right
        // after the first, so the script refuses the combination even on a full bucket.
        let two = numbers(&ReserveSpec::combined(&[&large, &large]));
        assert_eq!(&two[..5], [4, layout, 1, 4_000_000, NEVER_AFTER]);
        let lone = ReserveSpec::combined(&[&small]);
        assert_eq!(lone, small.encode());
    }

    #[test]
    fn a_layout_changes_with_the_limits() {
        let key = ScopeKey::new(ScopeKind::Tenant, "acme");
        let rpm = |n| {
            Limits::unlimited()
                .with_rate(RateLimit::per_minute(Dimension::Requests, n).unwrap_or_else(|| unreachable!()))
        };
        let tpm = Limits::unlimited()
            .with_rate(RateLimit::per_minute(Dimension::TotalTokens, 60).unwrap_or_else(|| unreachable!()));
        // The amount is not part of the layout (a bucket's instant stays meaningful).
        assert_eq!(ScopeSpec::new(&key, &rpm(60)).layout, ScopeSpec::new(&key, &rpm(120)).layout);
        assert_ne!(ScopeSpec::new(&key, &rpm(60)).layout, ScopeSpec::new(&key, &tpm).layout);
        // Spelled out: requests a minute is digit 1, total tokens a minute 4, tokens a
        // day 4 + 4; first limit lowest.
        assert_eq!(ScopeSpec::new(&key, &rpm(60)).layout, (1 << 50) + 1);
        let day = RateLimit::new(Dimension::TotalTokens, NonZeroU64::MIN, Duration::from_secs(86_400));
        let both = rpm(60).with_rate(day);
        assert_eq!(ScopeSpec::new(&key, &both).layout, (1 << 50) + 1 + 8 * 32);
        // A period the configuration cannot express gets an opaque hash.
        let odd = RateLimit::new(Dimension::Requests, NonZeroU64::MIN, Duration::from_secs(7));
        assert!(ScopeSpec::new(&key, &Limits::unlimited().with_rate(odd)).layout < 1 << 32);
    }

    #[test]
    fn settlement_gives_back_or_adds_time_per_bucket_by_each_scopes_rule() {
        let scopes = scopes();
        let layout = uint_mp(scopes[0].layout);
        // 20 reserved, 5 used by the caller's count, 30 counted upstream.
        let settle = settle_spec(Cost::request(10, 20), Cost::request(10, 5), Cost::request(10, 30), &scopes);
        assert_eq!(settle.sids, ["tenant:acme", "deployment:east"]);
        let mut expected = vec![0x9a, 0x01];
        expected.extend(&layout);
        expected.extend([0x01, 0x01, 0xd1, 0xc5, 0x68]); // bucket 1: -15,000
        expected.push(0x01);
        expected.extend(&layout);
        expected.extend([0x01, 0x01, 0xcd, 0x27, 0x10]); // bucket 1: 10,000
        assert_eq!(settle.spec, expected);
        // Expiry: output comes back to the caller's scopes; the deployment keeps it all
        // (only its slot comes back).
        let member = lease_member(7, Cost::request(10, 20), Calendar::default(), &scopes);
        let mut expected = vec![0x93, 0x07, 0x92];
        expected.extend(fixstr("tenant:acme"));
        expected.extend(fixstr("deployment:east"));
        expected.extend([0x98, 0x01]);
        expected.extend(&layout);
        expected.extend([0x01, 0x01, 0xd1, 0xb1, 0xe0]); // bucket 1: -20,000
        expected.push(0x01);
        expected.extend(&layout);
        expected.push(0x00);
        assert_eq!(member, expected);
    }

    #[test]
    fn a_budgets_settlement_and_expiry_release_what_the_reservation_holds() {
        let budget =
            Budget { period: BudgetPeriod::Day, amount: NonZeroU64::new(1_000_000).unwrap_or(NonZeroU64::MIN) };
        let limits = Limits::unlimited().with_budget(budget);
        let scopes = vec![ScopeSpec::new(&ScopeKey::new(ScopeKind::Tenant, "acme"), &limits)];
        let calendar = Calendar::at(1_796_160_600, 0);
        let cost = Cost::request(10, 20).with_money(300_000);
        // Settled at 0.05: 0.25 back, and the 0.30 reserved no longer held.
        let settle = budget_settle(300_000, cost.with_money(50_000), cost, calendar, &scopes);
        let mut expected = vec![0x95];
        expected.extend(fixstr("tenant:acme$b"));
        expected.push(0x01);
        expected.extend(uint_mp(calendar.day.id));
        expected.extend([0xd2, 0xff, 0xfc, 0x2f, 0x70]); // -250,000
        expected.extend(uint_mp(300_000));
        assert_eq!(settle, expected);
        // Settled at what it reserved: the spend stays, the hold goes.
        let exact = budget_settle(300_000, cost, cost, calendar, &scopes);
        assert_eq!(exact[exact.len() - 5 - 1..exact.len() - 5], [0x00], "nothing to add to the spend");
        // The lease member carries the expiry's: the money stays spent, no longer held.
        let member = lease_member(7, cost, calendar, &scopes);
        assert_eq!(member[0], 0x94, "id, fields, buckets' settlement, budgets' settlement");
        assert!(member.ends_with(&exact), "expiry releases the hold");
        // Without money or without budgets, the member is as it always was.
        assert_eq!(lease_member(7, cost.with_money(0), calendar, &scopes)[0], 0x93);
        assert_eq!(lease_member(7, cost, calendar, &super::tests::scopes())[0], 0x93);
    }

    #[test]
    fn control_characters_cannot_reach_the_record() {
        assert_eq!(scope_id(&ScopeKey::new(ScopeKind::ApiKey, "a\u{1f}b\nc")), "api_key:a?b?c");
    }
}
