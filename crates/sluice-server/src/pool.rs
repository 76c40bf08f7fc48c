//! A model profile's pool at run time: several deployments serving one model, the queue
//! its requests wait in when no member admits them now, what was last read of each
//! member's headroom, and which member each session used last.
//!
//! The decisions are pure and live elsewhere: the order members are tried in is
//! [`sluice_quota::placement::order`]; the admission that takes the first member able to
//! admit is the store's one step ([`sluice_quota::QuotaStore::admit_first`]). This module
//! keeps the state those decisions read: the headroom view is refreshed from the shared
//! store at most every [`VIEW_TTL`] (one read for all members, by whichever request finds
//! it stale; the others place on the last view), and counts down locally as this instance
//! admits, so one instance does not pile its requests on the member it read as emptiest.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash as _, Hasher as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sluice_config::Member;
use sluice_quota::placement::{Room, Strategy};
use sluice_quota::queue::DeploymentQueue;
use sluice_quota::{Cost, Nanos, ScopeSnapshot};

/// How long a read of the members' buckets is placed on before it is read again.
pub const VIEW_TTL: Duration = Duration::from_millis(100);

/// How long a session keeps its member after its last request: about a provider prompt
/// cache's lifetime (5 to 10 minutes without use at OpenAI and Anthropic).
pub const SESSION_TTL: Duration = Duration::from_secs(600);

/// How long one failure (a 5xx, a timeout, a reset, refused credentials) holds a pool's
/// member back for every instance, its breaker's longer cool-down aside: the fleet leaves a
/// failing member at its first failure rather than when each instance's breaker has
/// counted its own run, and tries it again after this; each further failure in a row
/// doubles it until the breaker opens.
pub const FAILURE_PAUSE: Duration = Duration::from_secs(1);

/// Most sessions remembered per pool; the oldest go first.
pub const MAX_SESSIONS: usize = 50_000;

/// One model profile's pool.
#[derive(Debug)]
pub struct Pool {
    /// Its members, in the order configured.
    pub members: Vec<Member>,
    /// How a request is placed among the members that admit it now.
    pub strategy: Strategy,
    /// Where its requests wait when no member admits them now; every member's returned
    /// capacity wakes it.
    pub queue: Arc<DeploymentQueue>,
    /// The request header naming a session (`affinity_header`), if configured.
    pub affinity_header: Option<Arc<str>>,
    /// Per member, its capacity ([`capacity`]): its share of the sessions' homes.
    pub capacities: Vec<f64>,
    view: Mutex<View>,
    sessions: Mutex<Sessions>,
}

/// The members' buckets as last read, and what this instance admitted since.
#[derive(Debug, Default)]
struct View {
    read_at: Option<Nanos>,
    reading: bool,
    /// Per member: the snapshots of its upstream scopes (profile, account, deployment).
    scopes: Vec<Vec<ScopeSnapshot>>,
    /// Per member: what this instance admitted on it since the read.
    taken: Vec<Cost>,
}

impl Pool {
    /// A pool of `members` placed by `strategy`, waiting in `queue`.
    #[must_use]
    pub fn new(members: Vec<Member>, strategy: Strategy, queue: Arc<DeploymentQueue>) -> Self {
        let view = View { taken: vec![Cost::default(); members.len()], ..View::default() };
        let sessions = Mutex::new(Sessions::default());
        let capacities = vec![1.0; members.len()];
        Self { members, strategy, queue, affinity_header: None, capacities, view: Mutex::new(view), sessions }
    }

    /// Each member's capacity, in the members' order (without it, every member's is 1).
    #[must_use]
    pub fn with_capacities(self, capacities: Vec<f64>) -> Self {
        debug_assert_eq!(capacities.len(), self.members.len());
        Self { capacities, ..self }
    }

    /// Sessions are also named by the request header `name`.
    #[must_use]
    pub fn with_affinity_header(self, name: Option<Arc<str>>) -> Self {
        Self { affinity_header: name, ..self }
    }

    /// Whether the view is due for a read at `now`; if so, the caller reads and calls
    /// [`Pool::seen`] (only one caller at a time is told to).
    #[must_use]
    pub fn due(&self, now: Nanos) -> bool {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        let stale = view.read_at.is_none_or(|at| now.since(at) >= VIEW_TTL);
        if stale && !view.reading {
            view.reading = true;
            return true;
        }
        false
    }

    /// The members' scopes as read at `now` (per member, the snapshots of its upstream
    /// path; `None` when the read failed: the old view stays and is read again next time).
    pub fn seen(&self, now: Nanos, scopes: Option<Vec<Vec<ScopeSnapshot>>>) {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        view.reading = false;
        if let Some(scopes) = scopes {
            view.read_at = Some(now);
            view.scopes = scopes;
            view.taken = vec![Cost::default(); self.members.len()];
        }
    }

    /// What member `i` can take now for a request of cost `costs[i]`, by the last view
    /// less what this instance admitted since (infinite headroom before the first read).
    #[must_use]
    pub fn room(&self, costs: &[Cost]) -> Vec<Room> {
        let view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        costs
            .iter()
            .enumerate()
            .map(|(i, cost)| {
                let Some(scopes) = view.scopes.get(i) else { return Room::UNLIMITED };
                let taken = view.taken.get(i).copied().unwrap_or_default();
                sluice_quota::placement::room_after(scopes, taken, *cost)
            })
            .collect()
    }

    /// This instance admitted `cost` on member `i`.
    pub fn took(&self, i: usize, cost: Cost) {
        let mut view = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(taken) = view.taken.get_mut(i) {
            *taken = taken.plus(cost);
        }
    }

    /// The member (deployment index) session `key` used last, if within [`SESSION_TTL`].
    #[must_use]
    pub fn session(&self, key: &str, now: Nanos) -> Option<usize> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.of.get(key).filter(|(_, at)| now.since(*at) < SESSION_TTL).map(|(d, _)| *d)
    }

    /// Session `key` was served by `deployment` at `now`.
    pub fn served(&self, key: &str, deployment: usize, now: Nanos) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.record(key, deployment, now);
    }

    /// The member a session without a record calls home, among `candidates` (deployment
    /// index, capacity): the same on every instance (weighted rendezvous hashing of the key
    /// with each candidate's deployment), so a session spread over instances still meets
    /// one prompt cache; each member is home to a share of the sessions in proportion to
    /// its capacity, so a small member is not home to as many sessions as a large one
    /// (they would spill off it, and leave their cache behind). A member leaving moves only
    /// its own sessions.
    #[must_use]
    pub fn home(key: &str, candidates: &[(usize, f64)]) -> Option<usize> {
        let score = |&(d, capacity): &(usize, f64)| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut hasher);
            d.hash(&mut hasher);
            // A uniform draw in (0, 1) from the hash; -capacity / ln(draw) is the largest
            // with a probability proportional to capacity.
            let draw = ((hasher.finish() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            -capacity.max(f64::MIN_POSITIVE) / draw.ln()
        };
        candidates.iter().max_by(|a, b| score(a).total_cmp(&score(b))).map(|(d, _)| *d)
    }
}

/// A member's capacity for [`Pool::home`]: its deployment's request rate, else its token
/// rate, per second (the first limit of that dimension `limits` states), else 1. Members of
/// one pool that state different dimensions compare what they state.
#[must_use]
pub fn capacity(limits: &sluice_quota::Limits) -> f64 {
    use sluice_quota::Dimension;
    let rate = |dimension: Dimension| {
        limits
            .rates
            .iter()
            .find(|r| r.dimension == dimension && !r.period.is_zero())
            .map(|r| r.amount.get() as f64 / r.period.as_secs_f64())
    };
    rate(Dimension::Requests)
        .or_else(|| rate(Dimension::TotalTokens))
        .or_else(|| rate(Dimension::InputTokens))
        .unwrap_or(1.0)
}

/// A deployment's time to its answer's headers, learned (an exponentially weighted mean,
/// the latest answer weighing a fifth): what the `latency` strategy places by.
#[derive(Debug, Default)]
pub struct Latency {
    /// The mean in milliseconds as `f64` bits; 0 before the first answer.
    bits: std::sync::atomic::AtomicU64,
}

impl Latency {
    /// An answer's headers came after `took`.
    pub fn observe(&self, took: Duration) {
        use std::sync::atomic::Ordering;
        let ms = took.as_secs_f64() * 1_000.0;
        let _ = self.bits.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            let mean = f64::from_bits(bits);
            let next = if bits == 0 { ms } else { mean + (ms - mean) / 5.0 };
            Some(next.max(f64::MIN_POSITIVE).to_bits())
        });
    }

    /// The mean so far, in milliseconds (`None` before the first answer).
    #[must_use]
    pub fn mean_ms(&self) -> Option<f64> {
        let bits = self.bits.load(std::sync::atomic::Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }
}

/// Which member each session used last, bounded: the oldest record goes first.
#[derive(Debug, Default)]
struct Sessions {
    of: HashMap<Arc<str>, (usize, Nanos)>,
    order: VecDeque<Arc<str>>,
}

impl Sessions {
    fn record(&mut self, key: &str, deployment: usize, now: Nanos) {
        if let Some(entry) = self.of.get_mut(key) {
            *entry = (deployment, now);
            return;
        }
        while self.of.len() >= MAX_SESSIONS {
            let Some(oldest) = self.order.pop_front() else { break };
            self.of.remove(&oldest);
        }
        let key: Arc<str> = Arc::from(key);
        self.order.push_back(Arc::clone(&key));
        self.of.insert(key, (deployment, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_remembered_until_its_ttl_and_the_oldest_go_first() {
        let mut sessions = Sessions::default();
        sessions.record("a", 1, Nanos(0));
        sessions.record("a", 2, Nanos(5));
        assert_eq!(sessions.of.get("a").map(|e| e.0), Some(2), "the latest member");
        assert_eq!(sessions.order.len(), 1, "one record per session");
        for i in 0..MAX_SESSIONS {
            sessions.record(&format!("s{i}"), 0, Nanos(10));
        }
        assert_eq!(sessions.of.len(), MAX_SESSIONS, "bounded");
        assert!(!sessions.of.contains_key("a"), "the oldest went first");
    }

    #[test]
    fn latency_learns_the_recent_answers() {
        let latency = Latency::default();
        assert_eq!(latency.mean_ms(), None);
        latency.observe(Duration::from_millis(100));
        assert_eq!(latency.mean_ms(), Some(100.0));
        latency.observe(Duration::from_millis(600));
        assert_eq!(latency.mean_ms(), Some(200.0), "a fifth of the way to the latest");
    }

    #[test]
    fn a_sessions_home_is_the_same_wherever_it_is_asked_and_spreads_sessions() {
        let members = [(3, 1.0), (7, 1.0), (9, 1.0)];
        let home = Pool::home("session-1", &members);
        assert_eq!(home, Pool::home("session-1", &[(9, 1.0), (3, 1.0), (7, 1.0)]), "independent of the order");
        let homes: std::collections::HashSet<usize> =
            (0..64).filter_map(|i| Pool::home(&format!("s{i}"), &members)).collect();
        assert_eq!(homes.len(), 3, "sessions spread over every member");
    }

    #[test]
    fn sessions_are_homed_in_proportion_to_capacity_and_a_leaving_member_moves_only_its_own() {
        let members = [(0, 5.0), (1, 10.0 / 3.0), (2, 5.0 / 3.0)];
        let homes: Vec<usize> = (0..6_000).filter_map(|i| Pool::home(&format!("s{i}"), &members)).collect();
        let share = |d: usize| homes.iter().filter(|h| **h == d).count() as f64 / homes.len() as f64;
        for (d, expected) in [(0, 0.5), (1, 1.0 / 3.0), (2, 1.0 / 6.0)] {
            assert!((share(d) - expected).abs() < 0.03, "member {d}: {} of the sessions, not {expected}", share(d));
        }
        let without = [(0, 5.0), (1, 10.0 / 3.0)];
        for (i, home) in homes.iter().enumerate() {
            let again = Pool::home(&format!("s{i}"), &without).unwrap();
            if *home != 2 {
                assert_eq!(again, *home, "session s{i} stays where it was");
            }
        }
    }

    #[test]
    fn capacity_is_the_request_rate_else_the_token_rate() {
        use sluice_quota::{Dimension, Limits, RateLimit};
        let per_minute = |dimension, amount| RateLimit::per_minute(dimension, amount).unwrap();
        let both = Limits::default()
            .with_rate(per_minute(Dimension::TotalTokens, 60_000))
            .with_rate(per_minute(Dimension::Requests, 300));
        assert!((capacity(&both) - 5.0).abs() < 1e-9);
        let tokens = Limits::default().with_rate(per_minute(Dimension::TotalTokens, 60_000));
        assert!((capacity(&tokens) - 1_000.0).abs() < 1e-9);
        assert!((capacity(&Limits::default()) - 1.0).abs() < 1e-9);
    }
}
