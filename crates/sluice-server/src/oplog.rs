//! The operation log: one record per idempotency key, so a repeated operation is answered
//! from the log instead of reaching the provider again.
//!
//! A request with an `Idempotency-Key` header is recorded `in_flight` (per tenant and key)
//! before anything is sent, and `completed` with its response once a non-stream success
//! arrives. A repeat of a completed operation gets the stored response; a repeat while the
//! first is in flight waits for it (bounded), then gets a 409. Failures clear the record so
//! the client may try again. The log lives in this process: in distributed mode, repeats
//! that reach another instance are not caught (documented).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_quota::{Clock, Nanos};
use tokio::sync::Notify;

/// A stored response.
#[derive(Debug, Clone)]
pub struct Stored {
    /// HTTP status.
    pub status: u16,
    /// Content type.
    pub content_type: Option<http::HeaderValue>,
    /// Body.
    pub body: Bytes,
}

#[derive(Debug, Clone)]
enum State {
    InFlight,
    Completed(Stored),
}

#[derive(Debug)]
struct Entry {
    state: State,
    expires: Nanos,
}

/// What the log says about a new request.
#[derive(Debug)]
pub enum Begin {
    /// First of its key: go ahead, then [`OpLog::complete`] or [`OpLog::abandon`].
    Proceed,
    /// Already completed: answer with this.
    Replay(Stored),
    /// Still in flight after the wait.
    InFlight,
}

/// The process's operation log.
#[derive(Debug)]
pub struct OpLog {
    entries: Mutex<HashMap<(Arc<str>, String), Entry>>,
    done: Notify,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    wait: Duration,
}

/// Records kept before expired ones are swept.
const SWEEP_AT: usize = 10_000;

impl OpLog {
    /// An empty log keeping completed operations for `ttl`; repeats wait up to `wait`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>, ttl: Duration, wait: Duration) -> Self {
        Self { entries: Mutex::new(HashMap::new()), done: Notify::new(), clock, ttl, wait }
    }

    /// Looks `key` of `tenant` up; records it in flight when it is new.
    pub async fn begin(&self, tenant: &Arc<str>, key: &str) -> Begin {
        let id = (Arc::clone(tenant), key.to_owned());
        let deadline = self.clock.now().after(self.wait);
        loop {
            let notified = self.done.notified();
            {
                let now = self.clock.now();
                let mut entries = self.entries.lock();
                if entries.len() >= SWEEP_AT {
                    entries.retain(|_, e| e.expires > now);
                }
                match entries.get(&id) {
                    Some(Entry { state: State::Completed(stored), expires }) if *expires > now => {
                        return Begin::Replay(stored.clone());
                    }
                    Some(Entry { state: State::InFlight, expires }) if *expires > now => {}
                    _ => {
                        entries.insert(id, Entry { state: State::InFlight, expires: now.after(self.ttl) });
                        return Begin::Proceed;
                    }
                }
            }
            let now = self.clock.now();
            if now >= deadline {
                return Begin::InFlight;
            }
            let _ = tokio::time::timeout(deadline.since(now), notified).await;
        }
    }

    /// Records the operation's response.
    pub fn complete(&self, tenant: &Arc<str>, key: &str, stored: Stored) {
        let expires = self.clock.now().after(self.ttl);
        self.entries
            .lock()
            .insert((Arc::clone(tenant), key.to_owned()), Entry { state: State::Completed(stored), expires });
        self.done.notify_waiters();
    }

    /// Forgets an operation that failed (or whose response is not kept), so it may be
    /// tried again.
    pub fn abandon(&self, tenant: &Arc<str>, key: &str) {
        self.entries.lock().remove(&(Arc::clone(tenant), key.to_owned()));
        self.done.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use sluice_quota::FakeClock;

    use super::*;

    fn stored(body: &'static str) -> Stored {
        Stored { status: 200, content_type: None, body: Bytes::from_static(body.as_bytes()) }
    }

    #[tokio::test]
    async fn a_repeat_is_replayed_waits_for_the_first_or_proceeds_after_a_failure() {
        let clock = FakeClock::default();
        let log = Arc::new(OpLog::new(Arc::new(clock.clone()), Duration::from_secs(60), Duration::from_millis(200)));
        let tenant: Arc<str> = "acme".into();
        assert!(matches!(log.begin(&tenant, "k1").await, Begin::Proceed));
        // A repeat while in flight waits; the first completes meanwhile.
        let waiting = {
            let (log, tenant) = (Arc::clone(&log), Arc::clone(&tenant));
            tokio::spawn(async move { log.begin(&tenant, "k1").await })
        };
        tokio::task::yield_now().await;
        log.complete(&tenant, "k1", stored("first"));
        assert!(matches!(waiting.await.unwrap(), Begin::Replay(s) if s.body == "first"));
        // Another tenant's same key is another operation.
        assert!(matches!(log.begin(&"globex".into(), "k1").await, Begin::Proceed));
        // A failure clears the record.
        assert!(matches!(log.begin(&tenant, "k2").await, Begin::Proceed));
        log.abandon(&tenant, "k2");
        assert!(matches!(log.begin(&tenant, "k2").await, Begin::Proceed));
        // Completed operations are forgotten after the TTL.
        clock.advance(Duration::from_secs(61));
        assert!(matches!(log.begin(&tenant, "k1").await, Begin::Proceed));
    }
}
