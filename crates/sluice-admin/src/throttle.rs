//! Failed admin authentication, per peer address: dashboard logins and admin API
//! requests refused 401 (a missing or wrong bearer key, root or tenant admin) count
//! alike. After [`FREE_FAILURES`] failures in a row the address is locked out for
//! [`LOCKOUT`], doubling with every further failure up to [`MAX_LOCKOUT`]; while locked
//! out every login and every admin API request is refused (`429` with `Retry-After`)
//! before its body is read or its key checked. A dashboard login forgets the address (it
//! proved the root key); an accepted bearer key does not, so a tenant admin key cannot
//! buy more guesses at the root key. [`FORGET_AFTER`] of quiet forgets it too. At most
//! [`MAX_PEERS`] addresses are remembered.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Extensions, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use parking_lot::Mutex;
use sluice_quota::Nanos;
use sluice_server::error::GatewayError;

use crate::AdminState;

/// Failures allowed before the first lockout.
pub const FREE_FAILURES: u32 = 5;
/// The first lockout.
pub const LOCKOUT: Duration = Duration::from_secs(30);
/// The longest lockout.
pub const MAX_LOCKOUT: Duration = Duration::from_secs(3600);
/// How long an address's failures are remembered after its last one (or its lockout).
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// The most addresses remembered; past it, addresses whose record is stale make room.
pub const MAX_PEERS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    /// Locked out until then (zero: not locked).
    until: Nanos,
    last: Nanos,
}

impl Record {
    fn stale(&self, now: Nanos) -> bool {
        now >= self.until && now >= self.last.after(FORGET_AFTER)
    }
}

/// The failed-login record of every peer address.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    peers: Mutex<HashMap<IpAddr, Record>>,
}

impl LoginThrottle {
    /// How long `peer` must still wait before it may try again, if it is locked out.
    #[must_use]
    pub fn locked(&self, peer: IpAddr, now: Nanos) -> Option<Duration> {
        let peers = self.peers.lock();
        let until = peers.get(&peer)?.until;
        (until > now).then(|| until.since(now))
    }

    /// Records a failed login of `peer`; returns the lockout it starts, if any.
    pub fn failed(&self, peer: IpAddr, now: Nanos) -> Option<Duration> {
        let mut peers = self.peers.lock();
        if peers.len() >= MAX_PEERS && !peers.contains_key(&peer) {
            peers.retain(|_, r| !r.stale(now));
        }
        let fresh = Record { failures: 0, until: Nanos(0), last: now };
        let record = peers.entry(peer).or_insert(fresh);
        if record.stale(now) {
            *record = fresh;
        }
        record.failures = record.failures.saturating_add(1);
        record.last = now;
        let wait = lockout(record.failures)?;
        record.until = now.after(wait);
        Some(wait)
    }

    /// Forgets `peer`'s failures after a successful login.
    pub fn succeeded(&self, peer: IpAddr) {
        self.peers.lock().remove(&peer);
    }
}

/// The peer address of a request; without one (an in-process caller) every request
/// shares one record.
#[must_use]
pub fn peer(extensions: &Extensions) -> IpAddr {
    extensions.get::<ConnectInfo<SocketAddr>>().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// The admin API's layer: a locked-out peer is refused before its key is checked; a
/// request refused 401 counts as a failure of its peer.
pub(super) async fn admin_api(State(state): State<AdminState>, request: Request, next: Next) -> Response {
    let peer = peer(request.extensions());
    let logins = &state.sessions.logins;
    let clock = state.current().services.clock.clone();
    if let Some(wait) = logins.locked(peer, clock.now()) {
        return super::routes::fail(request.headers(), GatewayError::LoginThrottled(wait));
    }
    let response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED {
        let lockout = logins.failed(peer, clock.now());
        tracing::info!(%peer, ?lockout, "admin: bearer key refused");
    }
    response
}

/// The lockout after `failures` failures in a row.
fn lockout(failures: u32) -> Option<Duration> {
    let beyond = failures.checked_sub(FREE_FAILURES)?;
    let factor = 1u32.checked_shl(beyond).unwrap_or(u32::MAX);
    Some(LOCKOUT.saturating_mul(factor).min(MAX_LOCKOUT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_out_and_each_further_one_doubles_the_wait() {
        let throttle = LoginThrottle::default();
        let (peer, other) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let t0 = Nanos(1);
        for _ in 1..FREE_FAILURES {
            assert_eq!(throttle.failed(peer, t0), None);
        }
        assert_eq!(throttle.locked(peer, t0), None);
        assert_eq!(throttle.failed(peer, t0), Some(LOCKOUT));
        assert_eq!(throttle.locked(peer, t0), Some(LOCKOUT));
        assert_eq!(throttle.locked(other, t0), None, "per address");
        let later = t0.after(LOCKOUT);
        assert_eq!(throttle.locked(peer, later), None, "the lockout ends");
        assert_eq!(throttle.failed(peer, later), Some(LOCKOUT * 2));
        assert_eq!(lockout(40), Some(MAX_LOCKOUT));
        throttle.succeeded(peer);
        assert_eq!(throttle.failed(peer, later), None, "a success forgets");
    }

    #[test]
    fn quiet_addresses_are_forgotten() {
        let throttle = LoginThrottle::default();
        let peer = IpAddr::from([10, 0, 0, 1]);
        for _ in 1..FREE_FAILURES {
            throttle.failed(peer, Nanos(1));
        }
        let much_later = Nanos(1).after(FORGET_AFTER);
        assert_eq!(throttle.failed(peer, much_later), None, "the count started again");
    }
}
