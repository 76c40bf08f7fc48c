//! The responses the simulated provider keeps, as OpenAI stores them: each one's `response`
//! object, its input items and the context it leaves for a continuation. The store lives in
//! [`crate::sim::Sim`]; the routes in [`super::responses_store`] read it.

use std::collections::HashMap;

use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::errors::ApiError;

/// Most responses kept; beyond, all are forgotten at once.
const MAX_KEPT: usize = 100_000;

/// One kept response.
#[derive(Debug, Clone)]
struct Kept {
    /// The `response` object as a read returns it.
    response: Value,
    /// Its input items, each with an id.
    input: Vec<Value>,
    /// Its input plus output tokens; `None` while a background response is queued.
    context: Option<u64>,
    /// A queued background response's finished object and context.
    pending: Option<(Value, u64)>,
}

/// The kept responses, by id.
#[derive(Debug, Default)]
pub struct StoredResponses {
    kept: Mutex<HashMap<String, Kept>>,
}

impl StoredResponses {
    /// Keeps a finished response: its object, input items and context.
    pub fn finished(&self, id: &str, response: Value, input: Vec<Value>, context: u64) {
        self.keep(id, Kept { response, input, context: Some(context), pending: None });
    }

    /// Keeps a background response answered `queued` (`queued`), finished as `done`.
    pub fn queued(&self, id: &str, queued: Value, input: Vec<Value>, done: Value, context: u64) {
        self.keep(id, Kept { response: queued, input, context: None, pending: Some((done, context)) });
    }

    fn keep(&self, id: &str, kept: Kept) {
        let mut all = self.kept.lock();
        if all.len() >= MAX_KEPT {
            all.clear();
        }
        all.insert(id.to_owned(), kept);
    }

    /// The context response `id` left behind, once it finished.
    #[must_use]
    pub fn context_of(&self, id: &str) -> Option<u64> {
        self.kept.lock().get(id).and_then(|k| k.context)
    }

    /// Response `id` as a read finds it: a queued one has finished by now.
    pub(super) fn read(&self, id: &str) -> Option<Value> {
        let mut all = self.kept.lock();
        let kept = all.get_mut(id)?;
        if let Some((done, context)) = kept.pending.take() {
            kept.response = done;
            kept.context = Some(context);
        }
        Some(kept.response.clone())
    }

    pub(super) fn cancel(&self, id: &str) -> Option<Result<Value, ApiError>> {
        let mut all = self.kept.lock();
        let kept = all.get_mut(id)?;
        if kept.pending.take().is_none() {
            let message = "Cannot cancel a response that is not running (only background responses can be cancelled).";
            return Some(Err(ApiError::Invalid { message: message.into(), param: None }));
        }
        if let Value::Object(map) = &mut kept.response {
            map.insert("status".into(), json!("cancelled"));
        }
        Some(Ok(kept.response.clone()))
    }

    pub(super) fn input(&self, id: &str) -> Option<Vec<Value>> {
        self.kept.lock().get(id).map(|k| k.input.clone())
    }

    pub(super) fn delete(&self, id: &str) -> bool {
        self.kept.lock().remove(id).is_some()
    }
}
