//! Fair sharing of a deployment between tenants inside the admission decision itself, so it
//! holds across gateway instances: each tenant's token consumption is tracked as a virtual
//! time (tokens / weight); a tenant more than its slack ahead of the slowest tenant that is
//! *waiting* (was refused by a shared limit within the last [`WAITING_FOR`] and not admitted
//! since, or admitted with more of its requests queued behind) is refused
//! briefly, so the waiting tenant gets the next capacity. A tenant alone, or one whose
//! competitors have nothing waiting, is never held back: idle capacity is always borrowed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Nanos;
use crate::decision::FairShare;

/// How long a tenant counts as waiting after its last refusal.
pub const WAITING_FOR: Duration = Duration::from_secs(1);
/// The wait suggested to a tenant held back for fairness.
pub const HOLD_BACK: Duration = Duration::from_millis(50);

/// A passed fairness check: the tenant's virtual time after this request, and the new floor
/// of virtual times (the slack behind this tenant; a tenant joining starts there).
pub type FairVerdict = (f64, f64);

/// Virtual times of the tenants of one deployment.
#[derive(Debug, Clone, Default)]
pub struct FairState {
    times: HashMap<Arc<str>, f64>,
    clock: f64,
    waiting: HashMap<Arc<str>, Nanos>,
}

impl FairState {
    /// Decides whether `fair.tenant` may go now. On `Ok`, the value is the tenant's new
    /// virtual time, to be stored by [`FairState::commit`] if the rest of the admission
    /// passes; on refusal (here or by a bucket) the caller marks it [`FairState::waiting`].
    ///
    /// # Errors
    /// The suggested wait when the tenant is too far ahead of a waiting tenant.
    pub fn check(&mut self, now: Nanos, fair: &FairShare) -> Result<FairVerdict, Duration> {
        self.waiting.retain(|_, until| *until > now);
        let clock = self.clock;
        let time_of = |t: &Arc<str>| self.times.get(t).copied().unwrap_or(clock).max(clock);
        let mine = time_of(&fair.tenant);
        let slowest = self.waiting.keys().map(time_of).fold(mine, f64::min);
        let weight = f64::from(fair.weight.get());
        if mine > slowest + fair.slack as f64 / weight {
            return Err(HOLD_BACK);
        }
        // The clock rises to at most the slack behind this tenant: a tenant that is busy but
        // was admitted since its last refusal (so not "waiting" this instant) keeps its lag
        // up to the slack instead of being pulled level with whoever commits next.
        Ok((mine + fair.cost as f64 / weight, slowest.min(mine - fair.slack as f64 / weight)))
    }

    /// Records an admission checked by [`FairState::check`] at `now`: the tenant no longer
    /// waits, unless more of its requests are queued behind this one.
    pub fn commit(&mut self, now: Nanos, fair: &FairShare, (time, slowest): FairVerdict) {
        self.times.insert(Arc::clone(&fair.tenant), time);
        if fair.queued_behind {
            self.waiting.insert(Arc::clone(&fair.tenant), now.after(WAITING_FOR));
        } else {
            self.waiting.remove(&fair.tenant);
        }
        self.clock = self.clock.max(slowest);
    }

    /// Records that `fair.tenant` was refused and waits for capacity.
    pub fn waiting(&mut self, now: Nanos, fair: &FairShare) {
        self.waiting.insert(Arc::clone(&fair.tenant), now.after(WAITING_FOR));
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;

    fn ask(tenant: &str, cost: u64) -> FairShare {
        FairShare { tenant: tenant.into(), weight: NonZeroU32::MIN, cost, slack: 1_000, queued_behind: false }
    }

    #[test]
    fn a_tenant_alone_is_never_held_back_and_a_newcomer_reclaims_at_once() {
        let mut state = FairState::default();
        let now = Nanos(0);
        for _ in 0..100 {
            let ok = state.check(now, &ask("a", 500)).unwrap();
            state.commit(now, &ask("a", 500), ok);
        }
        // b asks and gets through: it joins at the current virtual clock (no credit for
        // its idle time, no debt for a's borrowing). With nothing of b waiting, a goes on.
        let b = state.check(now, &ask("b", 500)).unwrap();
        state.commit(now, &ask("b", 500), b);
        for _ in 0..5 {
            let ok = state.check(now, &ask("a", 500)).unwrap();
            state.commit(now, &ask("a", 500), ok);
        }
        // b is refused (the bucket is full of a's traffic) and waits. It lags a by the
        // slack (the floor a's admissions raised it to, no further): a is held back so
        // that b's next attempt takes the capacity.
        state.waiting(now, &ask("b", 500));
        assert_eq!(state.check(now, &ask("a", 500)), Err(HOLD_BACK));
        let b = state.check(now, &ask("b", 500)).unwrap();
        state.commit(now, &ask("b", 500), b);
        // b was admitted and waits no more: a may borrow again.
        assert!(state.check(now, &ask("a", 500)).is_ok());
        // A refusal is remembered only for a while.
        state.waiting(now, &ask("b", 500));
        let later = now.after(WAITING_FOR + Duration::from_millis(1));
        assert!(state.check(later, &ask("a", 500)).is_ok());
    }

    /// a runs ahead; b waits, is admitted once (with more of it queued behind, or not),
    /// then a goes once more (level within the slack). Whether a's next request is held.
    fn a_after_b_admitted(queued_behind: bool) -> Result<FairVerdict, Duration> {
        let mut state = FairState::default();
        let now = Nanos(0);
        for _ in 0..10 {
            let ok = state.check(now, &ask("a", 500)).unwrap();
            state.commit(now, &ask("a", 500), ok);
        }
        state.waiting(now, &ask("b", 500));
        assert_eq!(state.check(now, &ask("a", 500)), Err(HOLD_BACK));
        let b = FairShare { queued_behind, ..ask("b", 500) };
        let ok = state.check(now, &b).unwrap();
        state.commit(now, &b, ok);
        let ok = state.check(now, &ask("a", 500)).unwrap();
        state.commit(now, &ask("a", 500), ok);
        state.check(now, &ask("a", 500))
    }

    #[test]
    fn a_tenant_admitted_with_more_queued_behind_still_holds_a_runaway_back() {
        // b's line is not empty: it still waits, and a, more than the slack ahead again,
        // is held back so that b's next request takes the capacity.
        assert_eq!(a_after_b_admitted(true), Err(HOLD_BACK));
        // b's last request went: nothing of b waits, and a may borrow.
        assert!(a_after_b_admitted(false).is_ok());
    }

    #[test]
    fn a_queued_behind_mark_lasts_as_long_as_a_refusal() {
        let mut state = FairState::default();
        let now = Nanos(0);
        let busy = FairShare { queued_behind: true, ..ask("b", 500) };
        let ok = state.check(now, &busy).unwrap();
        state.commit(now, &busy, ok);
        for _ in 0..4 {
            let ok = state.check(now, &ask("a", 500)).unwrap();
            state.commit(now, &ask("a", 500), ok);
        }
        assert_eq!(state.check(now, &ask("a", 500)), Err(HOLD_BACK));
        // b never came back: after the waiting time, a borrows freely.
        let later = now.after(WAITING_FOR + Duration::from_millis(1));
        assert!(state.check(later, &ask("a", 500)).is_ok());
    }
}
