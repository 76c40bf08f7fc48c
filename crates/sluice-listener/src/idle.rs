//! Idle HTTP/2 connections are closed: once no request has been in flight on one for
//! [`IDLE_TIMEOUT`] it is sent GOAWAY, and cut if it has not closed [`GOAWAY_GRACE`] later
//! (a client that never answers GOAWAY's PING would otherwise hold it). HTTP/1.1 needs none
//! of this: between requests hyper waits for the next head under the head timeout.
//!
//! A request counts from the moment its head is handed to the service until its response
//! body is finished or dropped, so a long answer, streamed or not, keeps its connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::watch;

/// How long an HTTP/2 connection may stay open with no request in flight: from its
/// handshake, or from the end of its last response. The same as an HTTP/1.1 connection's
/// wait for its next head ([`crate::HEADER_READ_TIMEOUT`]).
pub const IDLE_TIMEOUT: Duration = crate::HEADER_READ_TIMEOUT;

/// How long a connection that was sent GOAWAY (idle, or at shutdown once its requests are
/// done) has to close before it is cut: enough for a round trip to answer GOAWAY's PING.
pub const GOAWAY_GRACE: Duration = Duration::from_secs(2);

/// The requests in flight on one connection.
#[derive(Debug, Clone)]
pub(crate) struct Activity(Arc<watch::Sender<usize>>);

impl Activity {
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    /// Counts a request in flight until the returned guard is dropped.
    pub(crate) fn begin(&self) -> InFlight {
        self.0.send_modify(|n| *n += 1);
        InFlight(Arc::clone(&self.0))
    }

    /// Resolves once no request has been in flight for `quiet`.
    pub(crate) async fn quiet_for(&self, quiet: Duration) {
        let mut seen = self.0.subscribe();
        loop {
            // Fails only once the sender is gone, and `self` holds it.
            let _ = seen.wait_for(|n| *n == 0).await;
            if tokio::time::timeout(quiet, seen.changed()).await.is_err() {
                return;
            }
        }
    }
}

/// One request in flight; dropping it ends it.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A response body that keeps its request in flight until it is finished or dropped.
#[derive(Debug)]
pub(crate) struct Tracked<B> {
    body: B,
    _request: Option<InFlight>,
}

impl<B> Tracked<B> {
    /// `body`, counted as `request` (none: not counted).
    pub(crate) fn new(body: B, request: Option<InFlight>) -> Self {
        Self { body, _request: request }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn quiet_only_once_no_request_was_in_flight_for_the_whole_time() {
        let activity = Activity::new();
        let start = tokio::time::Instant::now();
        let request = activity.begin();
        let waiting = tokio::spawn({
            let activity = activity.clone();
            async move { activity.quiet_for(Duration::from_secs(10)).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!waiting.is_finished(), "a request in flight keeps the connection busy");
        drop(request);
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(activity.begin());
        waiting.await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(45), "quiet 10 s after the last request ended");
    }
}
