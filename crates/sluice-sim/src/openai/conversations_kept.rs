//! The conversations the simulated provider keeps: each one's `conversation` object, its
//! items and the context it adds to a response's input. The store lives in
//! [`crate::sim::Sim`]; the routes in [`super::conversations`] read and change it.

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::Value;

/// Most conversations kept; beyond, all are forgotten at once.
const MAX_KEPT: usize = 100_000;

/// One kept conversation.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    pub(super) object: Value,
    pub(super) items: Vec<Value>,
    /// Tokens its items add to a response's input.
    context: u64,
}

/// The kept conversations, by id.
#[derive(Debug, Default)]
pub struct StoredConversations {
    pub(super) kept: Mutex<HashMap<String, Kept>>,
}

impl StoredConversations {
    /// The context conversation `id` adds to a response's input, if it exists.
    #[must_use]
    pub fn context_of(&self, id: &str) -> Option<u64> {
        self.kept.lock().get(id).map(|k| k.context)
    }

    /// Adds a response's input `items` and the `tokens` it read and wrote to conversation `id`.
    pub fn extend(&self, id: &str, items: &[Value], tokens: u64) {
        if let Some(kept) = self.kept.lock().get_mut(id) {
            kept.items.extend_from_slice(items);
            kept.context = kept.context.saturating_add(tokens);
        }
    }

    pub(super) fn create(&self, id: &str, object: Value, items: Vec<Value>) {
        let mut all = self.kept.lock();
        if all.len() >= MAX_KEPT {
            all.clear();
        }
        all.insert(id.to_owned(), Kept { object, items, context: 0 });
    }
}
