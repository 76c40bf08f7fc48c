//! The admin key: a bearer token for the API, or the dashboard's session cookie.
//!
//! The key itself is never stored (only its SHA-256, from the config) and never put in a
//! URL. The dashboard's session cookie is derived from the key's hash and a random value
//! drawn at start, so it is worthless after a restart and reveals nothing about the key.
//! One-time tickets let a script open the dashboard without typing the key.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::HeaderMap;
use rand::Rng as _;
use sluice_config::hash_key;
use sluice_quota::Nanos;
use subtle::ConstantTimeEq as _;

/// The dashboard session cookie's name.
pub const COOKIE: &str = "sluice_admin";
/// How long a one-time dashboard ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(60);
/// The most tickets outstanding at once (older ones are dropped).
const MAX_TICKETS: usize = 16;

/// The configured admin key and the sessions derived from it.
#[derive(Debug)]
pub struct AdminKey {
    sha256: [u8; 32],
    session: String,
    tickets: Mutex<Vec<(String, Nanos)>>,
}

impl AdminKey {
    /// The admin key whose SHA-256 is `sha256`.
    #[must_use]
    pub fn new(sha256: [u8; 32]) -> Self {
        let salt: [u8; 32] = rand::rng().random();
        let session = hex(&hash_key(&format!("sluice-dashboard:{}:{}", hex(&salt), hex(&sha256))));
        Self { sha256, session, tickets: Mutex::new(Vec::new()) }
    }

    /// Whether `key` is the admin key. Compared in constant time, like the session
    /// cookie: how long a refusal takes says nothing about how close a guess was.
    #[must_use]
    pub fn matches(&self, key: &str) -> bool {
        hash_key(key.trim()).as_slice().ct_eq(self.sha256.as_slice()).into()
    }

    /// Whether the request carries `Authorization: Bearer <admin key>`.
    #[must_use]
    pub fn bearer_ok(&self, headers: &HeaderMap) -> bool {
        bearer(headers).is_some_and(|t| self.matches(t))
    }

    /// Whether the request carries the dashboard's session cookie.
    #[must_use]
    pub fn cookie_ok(&self, headers: &HeaderMap) -> bool {
        let cookies = headers.get_all(http::header::COOKIE).into_iter().filter_map(|v| v.to_str().ok());
        cookies
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && bool::from(value.as_bytes().ct_eq(self.session.as_bytes())))
    }

    /// The `Set-Cookie` value that opens a dashboard session.
    #[must_use]
    pub fn set_cookie(&self) -> String {
        format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200", self.session)
    }

    /// A new one-time ticket, valid until `now + TICKET_TTL`.
    pub fn issue_ticket(&self, now: Nanos) -> String {
        let ticket = hex(&rand::rng().random::<[u8; 16]>());
        let mut tickets = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        tickets.retain(|(_, until)| *until > now);
        if tickets.len() >= MAX_TICKETS {
            tickets.remove(0);
        }
        tickets.push((ticket.clone(), now.after(TICKET_TTL)));
        ticket
    }

    /// Takes `ticket` if it was issued and has not expired; it never works twice.
    pub fn redeem_ticket(&self, ticket: &str, now: Nanos) -> bool {
        let mut tickets = self.tickets.lock().unwrap_or_else(PoisonError::into_inner);
        let found = tickets.iter().position(|(t, until)| t == ticket && *until > now);
        found.map(|i| tickets.remove(i)).is_some()
    }
}

/// The request's `Authorization: Bearer` token.
#[must_use]
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    value.and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_cookie_and_tickets() {
        let key = AdminKey::new(hash_key("adm"));
        let mut headers = HeaderMap::new();
        assert!(!key.bearer_ok(&headers) && !key.cookie_ok(&headers));
        headers.insert(http::header::AUTHORIZATION, "Bearer adm".parse().unwrap());
        assert!(key.bearer_ok(&headers));
        headers.insert(http::header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert!(!key.bearer_ok(&headers));
        let cookie = key.set_cookie();
        assert!(!cookie.contains("adm;") && cookie.contains("HttpOnly"));
        let pair = cookie.split(';').next().unwrap().to_owned();
        headers.insert(http::header::COOKIE, format!("other=1; {pair}").parse().unwrap());
        assert!(key.cookie_ok(&headers));
        headers.insert(http::header::COOKIE, format!("{COOKIE}=x").parse().unwrap());
        assert!(!key.cookie_ok(&headers));
        assert!(!AdminKey::new(hash_key("adm")).set_cookie().contains(&pair), "sessions differ per start");

        let ticket = key.issue_ticket(Nanos(0));
        assert!(!key.redeem_ticket("bogus", Nanos(1)));
        assert!(key.redeem_ticket(&ticket, Nanos(1)));
        assert!(!key.redeem_ticket(&ticket, Nanos(2)), "one time only");
        let late = key.issue_ticket(Nanos(0));
        assert!(!key.redeem_ticket(&late, Nanos(0).after(TICKET_TTL)));
    }
}
