//! The end of every stream still running when the shutdown grace is over: one signal,
//! shared by every gateway a reload builds, that each stream's relay watches.

use std::sync::Arc;

use tokio::sync::watch;

/// Ends every stream still running (at the end of the shutdown grace). Cloned handles
/// share one signal; a reloaded gateway keeps its predecessor's.
#[derive(Debug, Clone)]
pub struct StreamCut(Arc<watch::Sender<bool>>);

impl Default for StreamCut {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(false)))
    }
}

impl StreamCut {
    /// Ends every running stream (and any started later) with the error event.
    pub fn cut(&self) {
        self.0.send_replace(true);
    }

    /// A receiver that sees the cut (`true`) once it is made.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}
