//! Operation records in this process: the embedded default, and the fallback of the Redis
//! log while Redis is unreachable and the store fails open.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{Clock, Nanos};

use super::{Fingerprint, OpFuture, OpId, OpState, OpStore, Record};

/// Records kept before expired ones are swept.
const SWEEP_AT: usize = 10_000;

/// Records in a map, each with its expiry on the injected clock.
#[derive(Debug)]
pub struct MemoryOps {
    records: Mutex<HashMap<OpId, (Record, Nanos)>>,
    clock: Arc<dyn Clock>,
}

impl MemoryOps {
    /// An empty log reading time from `clock`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { records: Mutex::new(HashMap::new()), clock }
    }

    /// [`OpStore::begin`], at once.
    pub(crate) fn begin_now(&self, id: &OpId, fingerprint: &Fingerprint, lease: Duration) -> Option<Record> {
        let now = self.clock.now();
        let mut records = self.records.lock();
        if records.len() >= SWEEP_AT {
            records.retain(|_, (_, expires)| *expires > now);
        }
        match records.get(id) {
            Some((record, expires)) if *expires > now => Some(record.clone()),
            _ => {
                let record = Record { fingerprint: *fingerprint, state: OpState::InFlight };
                records.insert(id.clone(), (record, now.after(lease)));
                None
            }
        }
    }

    /// [`OpStore::finish`], at once.
    pub(crate) fn finish_now(&self, id: &OpId, record: &Record, ttl: Duration) {
        let expires = self.clock.now().after(ttl);
        self.records.lock().insert(id.clone(), (record.clone(), expires));
    }

    /// [`OpStore::abandon`], at once.
    pub(crate) fn abandon_now(&self, id: &OpId, fingerprint: &Fingerprint) {
        let mut records = self.records.lock();
        if records.get(id).is_some_and(|(r, _)| r.state == OpState::InFlight && r.fingerprint == *fingerprint) {
            records.remove(id);
        }
    }
}

impl OpStore for MemoryOps {
    fn begin<'a>(
        &'a self,
        id: &'a OpId,
        fingerprint: &'a Fingerprint,
        lease: Duration,
    ) -> OpFuture<'a, Option<Record>> {
        Box::pin(async move { Ok(self.begin_now(id, fingerprint, lease)) })
    }

    fn finish<'a>(&'a self, id: &'a OpId, record: &'a Record, ttl: Duration) -> OpFuture<'a, ()> {
        Box::pin(async move {
            self.finish_now(id, record, ttl);
            Ok(())
        })
    }

    fn abandon<'a>(&'a self, id: &'a OpId, fingerprint: &'a Fingerprint) -> OpFuture<'a, ()> {
        Box::pin(async move {
            self.abandon_now(id, fingerprint);
            Ok(())
        })
    }
}
