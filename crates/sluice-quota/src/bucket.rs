//! The arithmetic of one continuously refilling bucket, as a GCRA on nanoseconds.
//!
//! State is a single *theoretical arrival time* (`tat`): the moment the bucket would be
//! full again. An empty `tat <= now` means full. Taking `c` units moves `tat` forward by
//! `c` emission intervals; the bucket refuses when that would put `tat` more than the
//! burst ahead of `now`. Debt is `tat` far in the future; refunds move it back, never
//! before `now` (a bucket cannot hold more than its burst). All functions are pure.

use std::time::Duration;

use crate::clock::{Nanos, duration_ns};
use crate::limit::RateLimit;

/// The bucket's state: the instant it will be full again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tat(pub Nanos);

/// Why a bucket refused, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not now; the cost would pass at this instant if nothing else changes.
    NotUntil(Nanos),
    /// The cost exceeds what the limit allows in a whole period: it will never pass.
    NeverFits,
}

/// The part of a bucket's burst a caller may use, in thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Share(u16);

impl Share {
    /// The whole burst.
    pub const FULL: Self = Self(1000);

    /// `permille` thousandths of the burst (clamped to 1..=1000).
    #[must_use]
    pub fn permille(permille: u16) -> Self {
        Self(permille.clamp(1, 1000))
    }

    /// The share as thousandths.
    #[must_use]
    pub fn get(self) -> u16 {
        self.0
    }

    /// `self` of `ns`.
    #[must_use]
    pub fn of(self, ns: u64) -> u64 {
        u64::try_from(u128::from(ns) * u128::from(self.0) / 1000).unwrap_or(u64::MAX)
    }
}

/// Time worth of `units` of `limit`, rounded up so pacing never runs fast.
#[must_use]
pub fn units_ns(limit: &RateLimit, units: u64) -> u64 {
    let period = u128::from(duration_ns(limit.period));
    let amount = u128::from(limit.amount.get());
    let ns = (u128::from(units) * period).div_ceil(amount);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Checks whether `cost` may be taken now; on success returns the new state.
///
/// A cost up to the burst passes when it fits in what the bucket holds. A cost above
/// the burst (but within one period's amount) passes only from a full bucket.
///
/// # Errors
/// [`Refusal::NotUntil`] with the earliest instant it would pass, or
/// [`Refusal::NeverFits`] when `cost` exceeds the limit's amount per period.
pub fn take(limit: &RateLimit, tat: Tat, now: Nanos, cost: u64) -> Result<Tat, Refusal> {
    take_share(limit, tat, now, cost, Share::FULL)
}

/// [`take`] for a caller that may use only `share` of the burst: it passes only if the
/// bucket keeps the rest of the burst for others (lower classes leave headroom for
/// higher ones). A cost above its share passes only from a full bucket. A guarded limit
/// ([`RateLimit::guard`]) also keeps its send guard (see [`need`]).
///
/// # Errors
/// As [`take`].
pub fn take_share(limit: &RateLimit, tat: Tat, now: Nanos, cost: u64, share: Share) -> Result<Tat, Refusal> {
    if cost > limit.amount.get() {
        return Err(Refusal::NeverFits);
    }
    let need = need(limit, cost, share);
    let earliest = need.earliest(tat);
    if earliest > now {
        return Err(Refusal::NotUntil(earliest));
    }
    Ok(need.after(tat, now))
}

/// A guarded bucket's send guard, in thousandths of its burst.
///
/// A bucket in front of a provider paces exactly at the provider's rate; the provider
/// counts the same sends when they arrive, a little after sluice granted them (network,
/// scheduling), so its window may be up to that much behind the bucket. A guarded bucket
/// keeps this part of the burst back for it: a cost passes only if the burst less the guard
/// holds it, and a cost as large as the whole window waits until the bucket has been full
/// for the guard.
pub const SEND_GUARD_PERMILLE: u64 = 20;

/// What a cost needs from a bucket, as time (ns here, µs in a remote store's scripts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// How far the bucket's state moves when the cost is taken.
    pub step: u64,
    /// How far ahead of now the state may be for the cost to pass: what the bucket must
    /// still hold after it. Negative for a cost as large as the provider's window: the
    /// bucket must have been full for that long.
    pub room: i64,
}

impl Need {
    /// `cost` against a bucket of `burst` of which a caller may use `usable` (its share),
    /// keeping a send guard of `guard` (all as time).
    ///
    /// Two rooms, the smaller binds. The share's: what the caller's share holds after the
    /// cost (a cost above its share passes only from a full bucket). The provider's: its
    /// window may be up to the guard behind the bucket (a send reaches it that much after
    /// the grant, and a window kept busy never catches up), so the burst less the guard
    /// must hold the cost; a cost the window cannot hold at all passes there only when it is
    /// idle, so it waits until the bucket has been full for the guard. Each cost moves the
    /// state by itself alone.
    #[must_use]
    pub fn of(cost: u64, burst: u64, usable: u64, guard: u64) -> Self {
        let share = usable.min(burst).checked_sub(cost).map_or(0, signed);
        let window = signed(burst.saturating_sub(guard)) - signed(cost.min(burst));
        Self { step: cost, room: share.min(window) }
    }

    /// The instant the cost passes a bucket whose state is `tat`. A fresh bucket (the
    /// default state) has been full for ever.
    #[must_use]
    pub fn earliest(&self, tat: Tat) -> Nanos {
        if tat == Tat::default() {
            return Nanos(0);
        }
        Nanos(tat.0.0.saturating_add_signed(self.room.saturating_neg()))
    }

    /// The state after the cost is taken from `tat` at `now`.
    #[must_use]
    pub fn after(&self, tat: Tat, now: Nanos) -> Tat {
        Tat(Nanos(tat.0.max(now).0.saturating_add(self.step)))
    }
}

fn signed(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// The least a guard keeps, whatever the burst: scheduling and network jitter are real
/// time, so a short burst keeps at least this much (but never more than a quarter of it).
pub const SEND_GUARD_MIN: Duration = Duration::from_millis(5);

/// The guard of a burst of `burst` on a limit that keeps one ([`RateLimit::guard`]):
/// [`SEND_GUARD_PERMILLE`] of it, at least [`SEND_GUARD_MIN`], at most a quarter of it;
/// nothing on others.
#[must_use]
pub fn guard_of(burst: Duration, guarded: bool) -> Duration {
    if !guarded {
        return Duration::ZERO;
    }
    let share = burst.mul_f64(SEND_GUARD_PERMILLE as f64 / 1000.0);
    share.max(SEND_GUARD_MIN).min(burst / 4)
}

/// What `cost` of `limit` needs from its bucket for a caller with `share` of the burst.
#[must_use]
pub fn need(limit: &RateLimit, cost: u64, share: Share) -> Need {
    let burst = units_ns(limit, limit.burst.get());
    let guard = duration_ns(guard_of(Duration::from_nanos(burst), limit.guard));
    Need::of(units_ns(limit, cost), burst, share.of(burst), guard)
}

/// A place held in a bucket by a cost that needs the window idle (one whose [`Need`] has
/// no `room`, or less): refused only because the bucket was not yet idle, it claims the
/// next idle window, and smaller costs wait behind it instead of keeping the window busy
/// forever.
/// A claim holds back only callers with at most the claimer's share of the burst (its
/// class or lower: a higher class is never held back by a lower one). It is dropped when a
/// cost at least as large passes, and lapses on its own [`CLAIM_GRACE`] after the instant
/// its claimer could pass (a claimer still waiting is retried at that instant, and renews
/// it if refused again), or when its claimer stops waiting, whichever comes first: a
/// claimer that will have gone before the window is idle claims nothing, so a client that
/// gave up never holds the window idle for the others. A claimer that leaves before then
/// (its client hung up) withdraws its claim by its [`Claimer`] id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    /// The claimer's step (its cost as time, ns here, µs in a remote store's scripts).
    pub step: u64,
    /// When the claim lapses unless renewed.
    pub until: Nanos,
    /// The claimer's share.
    pub share: Share,
    /// Who claimed it.
    pub by: Claimer,
}

/// Who records a claim: a request's id, unique across instances (random), so the request
/// can withdraw its claims when it goes; [`Claimer::NOBODY`] for a caller that never will.
/// At most 2^52 - 1, so a remote store's scripts and encoding hold it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Claimer(u64);

impl Claimer {
    /// A caller that never withdraws: its claims only lapse.
    pub const NOBODY: Self = Self(0);

    /// The claimer `id` (its low 52 bits; 0 is nobody).
    #[must_use]
    pub const fn new(id: u64) -> Self {
        Self(id & ((1 << 52) - 1))
    }

    /// The id.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// How long a claim outlives the instant its claimer could pass: enough for a claimer
/// waiting on another instance to be retried then (its timer, a store round trip); a
/// claimer gone without a word costs the others at most this much of an idle window.
pub const CLAIM_GRACE: Duration = Duration::from_millis(250);

impl Claim {
    /// The claim by `by` of a cost needing `need` (no room, or less) for a caller with
    /// `share`, refused until `earliest`, whose caller waits until `deadline` (`None`: no
    /// end known), if it needs an idle window at all and its caller is still waiting then.
    #[must_use]
    pub fn of(need: Need, share: Share, earliest: Nanos, deadline: Option<Nanos>, by: Claimer) -> Option<Self> {
        if need.room > 0 || deadline.is_some_and(|d| d < earliest) {
            return None;
        }
        let lapse = earliest.after(CLAIM_GRACE);
        let until = deadline.map_or(lapse, |d| d.min(lapse));
        Some(Self { step: need.step, until, share, by })
    }

    /// Whether a cost needing `need` for a caller with `share` waits behind this claim at
    /// `now` on a bucket whose state is `tat`, and until when: the instant it would pass
    /// once the claimer, passing as soon as the bucket is idle, has taken its step (or the
    /// claim's end, if sooner). A cost at least as large as the claimer's, or a caller with
    /// a larger share, is not held back.
    #[must_use]
    pub fn holds_back(&self, need: Need, share: Share, tat: Tat, now: Nanos) -> Option<Nanos> {
        if self.until <= now || need.step >= self.step || share > self.share {
            return None;
        }
        let claimed = Tat(Nanos(tat.0.max(now).0.saturating_add(self.step)));
        Some(need.earliest(claimed).min(self.until))
    }
}

/// Applies the difference between what was reserved and what was used.
///
/// Unused units come back (but the bucket never holds more than its burst); overruns
/// are debited, possibly into debt, which later requests wait out.
#[must_use]
pub fn adjust(limit: &RateLimit, tat: Tat, now: Nanos, reserved: u64, used: u64) -> Tat {
    if used >= reserved {
        let debt = units_ns(limit, used - reserved);
        return Tat(Nanos(tat.0.max(now).0.saturating_add(debt)));
    }
    let refund = units_ns(limit, reserved - used);
    Tat(Nanos(tat.0.0.saturating_sub(refund)).max(now))
}

/// Units that could be taken right now (0 while in debt).
#[must_use]
pub fn remaining(limit: &RateLimit, tat: Tat, now: Nanos) -> u64 {
    let burst_ns = units_ns(limit, limit.burst.get());
    let used_ns = tat.0.since(now);
    let free_ns = burst_ns.saturating_sub(duration_ns(used_ns));
    let period = u128::from(duration_ns(limit.period)).max(1);
    let units = u128::from(free_ns) * u128::from(limit.amount.get()) / period;
    u64::try_from(units).unwrap_or(u64::MAX)
}

/// Time until the bucket is full again.
#[must_use]
pub fn until_full(tat: Tat, now: Nanos) -> Duration {
    tat.0.since(now)
}

/// Holds a bucket to at most `remaining` units available now: what the provider says is
/// left. The bucket owes at least `burst - remaining` (never more than `reset`, when the
/// provider's window is full again by then). Never loosens: a bucket already tighter
/// keeps its state.
#[must_use]
pub fn tighten(limit: &RateLimit, tat: Tat, now: Nanos, remaining: u64, reset: Option<Duration>) -> Tat {
    let burst_ns = units_ns(limit, limit.burst.get());
    let free_ns = units_ns(limit, remaining.min(limit.burst.get()));
    let mut owed_ns = burst_ns.saturating_sub(free_ns);
    if let Some(reset) = reset {
        owed_ns = owed_ns.min(duration_ns(reset));
    }
    Tat(tat.0.max(Nanos(now.0.saturating_add(owed_ns))))
}

/// Re-anchors a guarded bucket ([`RateLimit::guard`]) at the instant a cost it admitted
/// really went to the provider, `sent`: the bucket is full no sooner than the cost's step
/// after that instant. The provider's window starts a request's cost when it arrives, the
/// bucket when it admitted it; a request that left late (its task resumed late, a fresh
/// connection) would otherwise let the next one, sent on time, meet a provider window that
/// is not yet idle. Never loosens; a cost that can never fit, or an unguarded limit, leaves
/// the state alone.
#[must_use]
pub fn sent(limit: &RateLimit, tat: Tat, sent: Nanos, cost: u64) -> Tat {
    if !limit.guard || cost == 0 || cost > limit.amount.get() {
        return tat;
    }
    let step = need(limit, cost, Share::FULL).step;
    Tat(tat.0.max(Nanos(sent.0.saturating_add(step))))
}

/// Re-expresses a bucket's state under a new limit, keeping its fill fraction. A change of
/// the burst alone (the same rate) keeps the state itself, as the Redis store does: what
/// was sent stays owed, so a burst shrunk after the provider's window refused waits until
/// the provider's window has refilled instead of sending on at once into it.
#[must_use]
pub fn rescale(old: &RateLimit, new: &RateLimit, tat: Tat, now: Nanos) -> Tat {
    if (old.amount, old.period) == (new.amount, new.period) {
        return tat;
    }
    let owed_ns = duration_ns(tat.0.since(now));
    let old_burst = u128::from(units_ns(old, old.burst.get())).max(1);
    let new_burst = u128::from(units_ns(new, new.burst.get()));
    let scaled = u128::from(owed_ns) * new_burst / old_burst;
    Tat(Nanos(now.0.saturating_add(u64::try_from(scaled).unwrap_or(u64::MAX))))
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;

    use super::*;
    use crate::limit::Dimension;

    fn rpm(amount: u64, burst: u64) -> RateLimit {
        RateLimit::per_minute(Dimension::Requests, amount).unwrap().with_burst(NonZeroU64::new(burst).unwrap())
    }

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn full_bucket_gives_its_burst_then_paces() {
        let limit = rpm(60, 3);
        let now = Nanos(100 * SEC);
        let mut tat = Tat::default();
        for _ in 0..3 {
            tat = take(&limit, tat, now, 1).unwrap();
        }
        assert_eq!(take(&limit, tat, now, 1), Err(Refusal::NotUntil(Nanos(101 * SEC))));
        assert!(take(&limit, tat, Nanos(101 * SEC), 1).is_ok());
    }

    #[test]
    fn more_than_a_period_never_fits() {
        assert_eq!(take(&rpm(60, 3), Tat::default(), Nanos(0), 61), Err(Refusal::NeverFits));
    }

    #[test]
    fn above_burst_passes_only_from_full_and_leaves_debt() {
        let limit = rpm(60, 3);
        let now = Nanos(100 * SEC);
        let tat = take(&limit, Tat::default(), now, 10).unwrap();
        assert_eq!(tat, Tat(Nanos(110 * SEC)));
        assert_eq!(remaining(&limit, tat, now), 0);
        // Full again only after the debt is paid and the burst refilled: 10 s.
        assert_eq!(take(&limit, tat, now, 10), Err(Refusal::NotUntil(Nanos(110 * SEC))));
        assert_eq!(take(&limit, tat, now, 1), Err(Refusal::NotUntil(Nanos(108 * SEC))));
    }

    #[test]
    fn refund_never_overfills_and_debt_pushes_out() {
        let limit = rpm(60, 3);
        let now = Nanos(100 * SEC);
        let tat = take(&limit, Tat::default(), now, 2).unwrap();
        assert_eq!(adjust(&limit, tat, now, 2, 0), Tat(now));
        assert_eq!(adjust(&limit, tat, now, 2, 5), Tat(Nanos(105 * SEC)));
        assert_eq!(remaining(&limit, Tat(now), now), 3);
    }

    #[test]
    fn a_partial_share_leaves_headroom_for_others() {
        let limit = rpm(60, 10);
        let now = Nanos(100 * SEC);
        let half = Share::permille(500);
        let mut tat = Tat::default();
        for _ in 0..5 {
            tat = take_share(&limit, tat, now, 1, half).unwrap();
        }
        // Half the burst is left, and it is not for this caller...
        assert_eq!(take_share(&limit, tat, now, 1, half), Err(Refusal::NotUntil(Nanos(101 * SEC))));
        // ...but a full-share caller may take it.
        assert!(take(&limit, tat, now, 5).is_ok());
        // Above its share: only from a full bucket.
        assert!(take_share(&limit, tat, now, 6, half).is_err());
        assert!(take_share(&limit, Tat::default(), now, 6, half).is_ok());
    }

    #[test]
    fn a_burst_change_alone_keeps_what_is_owed() {
        let now = Nanos(0);
        let tat = Tat(Nanos(3 * SEC)); // a 3 s burst spent
        // Shrunk to a 1 s burst: nothing passes before the 3 s owed have been paid.
        let shrunk = rescale(&rpm(60, 3), &rpm(60, 1), tat, now);
        assert_eq!(shrunk, tat);
        assert_eq!(take(&rpm(60, 1), shrunk, Nanos(2 * SEC), 1), Err(Refusal::NotUntil(Nanos(3 * SEC))));
    }

    #[test]
    fn rescale_keeps_the_fill_fraction() {
        let old = rpm(60, 6);
        let new = rpm(30, 6);
        let now = Nanos(0);
        let tat = Tat(Nanos(3 * SEC)); // half used
        let scaled = rescale(&old, &new, tat, now);
        assert_eq!(scaled, Tat(Nanos(6 * SEC)));
        assert_eq!(remaining(&new, scaled, now), 3);
    }

    #[test]
    fn tighten_holds_the_bucket_to_the_providers_count_and_never_loosens() {
        let limit = rpm(60, 10);
        let now = Nanos(100 * SEC);
        let tat = tighten(&limit, Tat::default(), now, 4, None);
        assert_eq!(remaining(&limit, tat, now), 4);
        // A looser report changes nothing.
        assert_eq!(tighten(&limit, tat, now, 8, None), tat);
        // Nothing left, but the provider's window is full again in 2 s: owe at most that.
        assert_eq!(tighten(&limit, Tat::default(), now, 0, Some(Duration::from_secs(2))), Tat(Nanos(102 * SEC)));
        // More left than the burst: the bucket is already within it.
        assert_eq!(tighten(&limit, Tat::default(), now, 1_000, None), Tat(now));
    }

    #[test]
    fn a_guarded_bucket_keeps_its_guard_and_a_whole_burst_waits_for_an_idle_window() {
        // 600 RPM with a one-second burst of 10; the guard is 2 % of it, 20 ms.
        let limit = rpm(600, 10).guarded();
        let now = Nanos(100 * SEC);
        let mut tat = Tat::default();
        for _ in 0..9 {
            tat = take(&limit, tat, now, 1).unwrap();
        }
        // The tenth would spend the guard: 20 ms later.
        assert_eq!(take(&limit, tat, now, 1), Err(Refusal::NotUntil(Nanos(100 * SEC + 20_000_000))));
        assert!(take(&rpm(600, 10), tat, now, 1).is_ok(), "unguarded, the whole burst goes");
        // A request as large as the burst passes from a full bucket, so the next one waits
        // until the window has been idle for the guard as well.
        let big = take(&limit, Tat::default(), now, 10).unwrap();
        assert_eq!(big, Tat(Nanos(101 * SEC)));
        assert_eq!(take(&limit, big, now, 10), Err(Refusal::NotUntil(Nanos(101 * SEC + 20_000_000))));
        assert!(take(&limit, big, Nanos(101 * SEC + 19_000_000), 10).is_err());
        assert!(take(&limit, big, Nanos(101 * SEC + 20_000_000), 10).is_ok());
        // So does one after a run of small ones (the provider's window, started by the first
        // of them when it arrived, may be up to the guard behind the bucket's).
        let run = (0..5).fold(Tat::default(), |tat, _| take(&limit, tat, now, 1).unwrap());
        assert_eq!(take(&limit, run, now, 10), Err(Refusal::NotUntil(Nanos(100 * SEC + 520_000_000))));
        // A short burst keeps at least 5 ms, never more than a quarter of itself.
        assert_eq!(guard_of(Duration::from_millis(25), true), Duration::from_millis(5));
        assert_eq!(guard_of(Duration::from_millis(8), true), Duration::from_millis(2));
        assert_eq!(guard_of(Duration::from_secs(10), false), Duration::ZERO);
        // Per-day limits mirror no provider window.
        let daily = RateLimit::new(Dimension::Requests, NonZeroU64::new(1_000).unwrap(), Duration::from_secs(86_400));
        assert!(!daily.guarded().guard);
    }

    #[test]
    fn a_claim_holds_smaller_costs_back_until_its_claimer_has_passed() {
        // A 10 s burst with a 200 ms guard: the whole burst needs an idle window.
        let whole = Need::of(10 * SEC, 10 * SEC, 10 * SEC, SEC / 5);
        let small = Need::of(SEC / 10, 10 * SEC, 10 * SEC, SEC / 5);
        let now = Nanos(100 * SEC);
        let batch = Share::permille(750);
        let claim = Claim::of(whole, batch, Nanos(101 * SEC), None, Claimer::NOBODY).unwrap();
        assert_eq!(
            claim,
            Claim { step: 10 * SEC, until: Nanos(101 * SEC).after(CLAIM_GRACE), share: batch, by: Claimer::NOBODY }
        );
        assert_eq!(Claim::of(small, batch, now, None, Claimer::NOBODY), None, "a cost with room claims nothing");
        // The bucket is idle at 101 s; the claimer then owes 10 s, of which a small cost may
        // come 9.7 s early (the burst less the guard and itself): 101.3 s, were the claim
        // not to lapse first, a grace after the claimer could have passed.
        let tat = Tat(Nanos(101 * SEC));
        assert_eq!(claim.holds_back(small, batch, tat, now), Some(claim.until));
        let patient = Claim { until: Nanos(200 * SEC), ..claim };
        assert_eq!(patient.holds_back(small, batch, tat, now), Some(Nanos(101_300_000_000)));
        assert_eq!(claim.holds_back(whole, batch, tat, now), None, "as large: not held back");
        assert_eq!(claim.holds_back(small, batch, tat, claim.until), None, "lapsed");
        assert_eq!(claim.holds_back(small, Share::FULL, tat, now), None, "a higher class goes first");
    }

    #[test]
    fn a_claim_ends_with_its_claimers_wait() {
        let whole = Need::of(10 * SEC, 10 * SEC, 10 * SEC, SEC / 5);
        let idle = Nanos(101 * SEC);
        // A claimer gone before the window is idle claims nothing: it would hold the
        // window for nobody.
        assert_eq!(Claim::of(whole, Share::FULL, idle, Some(Nanos(100 * SEC)), Claimer::NOBODY), None);
        // One still there then holds it until it stops waiting, at most the grace.
        let soon = Nanos(101 * SEC + 100_000_000);
        assert_eq!(Claim::of(whole, Share::FULL, idle, Some(soon), Claimer::NOBODY).map(|c| c.until), Some(soon));
        let late = Nanos(130 * SEC);
        assert_eq!(
            Claim::of(whole, Share::FULL, idle, Some(late), Claimer::NOBODY).map(|c| c.until),
            Some(idle.after(CLAIM_GRACE))
        );
    }

    #[test]
    fn need_splits_a_cost_against_the_usable_burst() {
        // The burst less the guard must hold the cost; one it cannot hold needs the bucket
        // full for what it lacks, at most the guard (a cost above the window passes there
        // only into an idle one, whatever its size).
        assert_eq!(Need::of(100, 1_000, 1_000, 20), Need { step: 100, room: 880 });
        assert_eq!(Need::of(980, 1_000, 1_000, 20), Need { step: 980, room: 0 });
        assert_eq!(Need::of(990, 1_000, 1_000, 20), Need { step: 990, room: -10 });
        assert_eq!(Need::of(1_500, 1_000, 1_000, 20), Need { step: 1_500, room: -20 });
        assert_eq!(Need::of(5_030, 5_000, 5_000, 0), Need { step: 5_030, room: 0 });
        // Above a caller's share but within the burst less the guard: only from a full
        // bucket, no more; within its share, the share binds where it is the smaller.
        assert_eq!(Need::of(100, 1_000, 750, 20), Need { step: 100, room: 650 });
        assert_eq!(Need::of(800, 1_000, 750, 20), Need { step: 800, room: 0 });
        assert_eq!(Need::of(990, 1_000, 750, 20), Need { step: 990, room: -10 });
        assert_eq!(Need::of(100, 1_000, 990, 20), Need { step: 100, room: 880 });
    }

    #[test]
    fn a_provider_window_started_by_a_late_arrival_never_refuses_what_the_bucket_passes() {
        // 30k TPM with a one-second burst of 500 tokens and a 20 ms guard. The provider's
        // window is the same bucket without a guard, fed the same costs as each arrives,
        // where a cost above its window passes only into an idle one.
        let ours = RateLimit::per_minute(Dimension::TotalTokens, 30_000).unwrap().guarded();
        let theirs = RateLimit::per_minute(Dimension::TotalTokens, 30_000).unwrap();
        // Small calls that keep the window busy, then calls three times its size. The first
        // reaches the provider 15 ms after its grant (a fresh connection), every other one
        // at once: the provider's window starts 15 ms later than the bucket's and, kept
        // busy, never catches up.
        let costs = [300, 300, 300, 300, 300, 1_600, 300, 300, 1_600, 1_600, 300];
        let (mut now, mut tat, mut provider) = (Nanos(100 * SEC), Tat::default(), Tat::default());
        for (i, &cost) in costs.iter().enumerate() {
            let at = match take(&ours, tat, now, cost) {
                Ok(_) => now,
                Err(Refusal::NotUntil(at)) => at,
                Err(Refusal::NeverFits) => unreachable!(),
            };
            tat = take(&ours, tat, at, cost).unwrap();
            let arrives = if i == 0 { Nanos(at.0 + 15_000_000) } else { at };
            provider = take(&theirs, provider, arrives, cost)
                .unwrap_or_else(|refused| panic!("call {i} ({cost} tokens) refused by the provider: {refused:?}"));
            now = at;
        }
    }

    #[test]
    fn a_cost_sent_late_reanchors_a_guarded_bucket_at_its_send() {
        // 300k TPM with a one-second burst of 5,000; the guard is 20 ms.
        let limit = RateLimit::per_minute(Dimension::TotalTokens, 300_000)
            .unwrap()
            .with_burst(NonZeroU64::new(5_000).unwrap())
            .guarded();
        let now = Nanos(100 * SEC);
        let tat = take(&limit, Tat::default(), now, 5_000).unwrap();
        assert_eq!(tat, Tat(Nanos(101 * SEC)));
        // Sent 30 ms after its admission: full no sooner than its step after that, and the
        // next whole window waits for the guard after that.
        let late = sent(&limit, tat, Nanos(100 * SEC + 30_000_000), 5_000);
        assert_eq!(late, Tat(Nanos(101 * SEC + 30_000_000)));
        assert_eq!(
            take(&limit, late, Nanos(101 * SEC + 20_000_000), 5_000),
            Err(Refusal::NotUntil(Nanos(101 * SEC + 50_000_000)))
        );
        // Sent on time, or a bucket already further out: nothing changes.
        assert_eq!(sent(&limit, tat, now, 5_000), tat);
        assert_eq!(sent(&limit, Tat(Nanos(200 * SEC)), now, 5_000), Tat(Nanos(200 * SEC)));
        // An unguarded limit, or a cost that never fits, is left alone.
        let plain = RateLimit::per_minute(Dimension::TotalTokens, 300_000).unwrap();
        assert_eq!(sent(&plain, Tat(now), Nanos(100 * SEC + 30_000_000), 5_000), Tat(now));
        assert_eq!(sent(&limit, Tat(now), now, 300_001), Tat(now));
    }
}
