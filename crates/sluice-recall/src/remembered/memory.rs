//! Remembered responses in this process: the embedded default, and the fallback of the
//! Redis store while Redis is unreachable and the store fails open. Bounded: past
//! [`MAX_REMEMBERED`] the oldest are forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_quota::{Clock, Nanos};

use super::{Remembered, ResponseKey, ResponseStore};
use crate::oplog::OpFuture;

/// Most responses remembered at once.
pub const MAX_REMEMBERED: usize = 100_000;

#[derive(Debug, Default)]
struct Records {
    by_key: HashMap<ResponseKey, (Remembered, Nanos)>,
    /// Keys in the order they were written, with the expiry each write set: every record
    /// has the same time to live, so the front expires first.
    order: VecDeque<(ResponseKey, Nanos)>,
}

impl Records {
    /// Drops the front entry; its record too, unless a later write replaced it.
    fn pop_front(&mut self) {
        let Some((key, expires)) = self.order.pop_front() else { return };
        if self.by_key.get(&key).is_some_and(|(_, e)| *e == expires) {
            self.by_key.remove(&key);
        }
    }
}

/// Remembered responses in a map, each with its expiry on the injected clock.
#[derive(Debug)]
pub struct MemoryResponses {
    records: Mutex<Records>,
    clock: Arc<dyn Clock>,
    capacity: usize,
}

impl MemoryResponses {
    /// An empty store reading time from `clock`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_capacity(clock, MAX_REMEMBERED)
    }

    /// [`MemoryResponses::new`] holding at most `capacity` responses.
    #[must_use]
    pub fn with_capacity(clock: Arc<dyn Clock>, capacity: usize) -> Self {
        Self { records: Mutex::new(Records::default()), clock, capacity: capacity.max(1) }
    }

    /// [`ResponseStore::remember`], at once.
    pub(crate) fn remember_now(&self, key: &ResponseKey, what: &Remembered, ttl: Duration) {
        let now = self.clock.now();
        let expires = now.after(ttl);
        let mut records = self.records.lock();
        while records.order.front().is_some_and(|(_, e)| *e <= now) || records.order.len() >= self.capacity {
            records.pop_front();
        }
        records.by_key.insert(key.clone(), (what.clone(), expires));
        records.order.push_back((key.clone(), expires));
    }

    /// [`ResponseStore::recall`], at once.
    pub(crate) fn recall_now(&self, key: &ResponseKey) -> Option<Remembered> {
        let now = self.clock.now();
        let records = self.records.lock();
        records.by_key.get(key).filter(|(_, expires)| *expires > now).map(|(what, _)| what.clone())
    }

    /// [`ResponseStore::forget`], at once.
    pub(crate) fn forget_now(&self, key: &ResponseKey) {
        self.records.lock().by_key.remove(key);
    }
}

impl ResponseStore for MemoryResponses {
    fn remember<'a>(&'a self, key: &'a ResponseKey, what: &'a Remembered, ttl: Duration) -> OpFuture<'a, ()> {
        Box::pin(async move {
            self.remember_now(key, what, ttl);
            Ok(())
        })
    }

    fn recall<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, Option<Remembered>> {
        Box::pin(async move { Ok(self.recall_now(key)) })
    }

    fn forget<'a>(&'a self, key: &'a ResponseKey) -> OpFuture<'a, ()> {
        Box::pin(async move {
            self.forget_now(key);
            Ok(())
        })
    }
}
