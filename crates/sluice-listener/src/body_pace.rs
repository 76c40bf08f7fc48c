//! Every request body is read against a deadline, and a body the handler left unread is
//! dealt with the same way on every route.
//!
//! The deadline is `[server] body_read_timeout` from the request head, extended by one
//! second for every `body_min_rate` bytes received (a body that keeps that average never
//! runs out; one trickling a byte a second is cut off). When it passes, the read fails with
//! [`BodyTimedOut`] (the handler answers `408`) and the connection is closed: a slow client
//! holds a socket for a bounded time, authenticated or not.
//!
//! When the handler answered without reading the whole body (a 401 before the body, a 413
//! past the cap), the response says `Connection: close` and the rest of the body is read
//! and discarded in the background, at most [`DRAIN_BYTES`] within [`DRAIN_TIME`] (and
//! still under the deadline), before the socket closes: a client that writes its whole
//! body before reading (Python's `http.client`, httpx) then reads the answer instead of a
//! broken pipe.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use parking_lot::Mutex;
use sluice_config::BodyPace;
use tokio::time::{Instant, Sleep};

/// The most of an unread body discarded after the answer, before the connection closes.
pub const DRAIN_BYTES: u64 = 16 * 1024 * 1024;
/// The longest an unread body is discarded after the answer.
pub const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The error a body read gets when the body's deadline has passed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive in time")]
pub struct BodyTimedOut;

impl BodyTimedOut {
    /// Whether `error` (or an error it wraps) is a [`BodyTimedOut`].
    pub fn caused(error: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(error);
        while let Some(e) = next {
            if e.is::<Self>() {
                return true;
            }
            next = e.source();
        }
        false
    }
}

/// The client's body and how far it got, shared by the handler's reader and the drain.
#[derive(Debug)]
struct Progress {
    /// `None` once finished, timed out, or taken for draining.
    body: Option<Body>,
    started: Instant,
    received: u64,
    finished: bool,
    polled: bool,
}

/// A body read under its deadline.
struct Paced {
    progress: Arc<Mutex<Progress>>,
    pace: BodyPace,
    deadline: Instant,
    /// The timer, made the first time the body makes the reader wait: a body that is
    /// already in (most, arriving with their head) never registers one.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Paced {
    fn new(progress: Arc<Mutex<Progress>>, pace: BodyPace) -> Self {
        let (started, received) = {
            let p = progress.lock();
            (p.started, p.received)
        };
        Self { progress, pace, deadline: started + pace.allowed(received), timer: None }
    }

    /// Ready once `deadline` has passed; registers `cx` to be woken then otherwise.
    fn poll_deadline(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        timer.as_mut().poll(cx)
    }
}

impl HttpBody for Paced {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let mut progress = this.progress.lock();
        progress.polled = true;
        let Some(body) = progress.body.as_mut() else {
            let done = progress.finished;
            return Poll::Ready((!done).then(|| Err(axum::Error::new(BodyTimedOut))));
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                progress.received = progress.received.saturating_add(u64::try_from(len).unwrap_or(u64::MAX));
                this.deadline = progress.started + this.pace.allowed(progress.received);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                progress.finished = true;
                progress.body = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Pending => {
                ready!(Self::poll_deadline(&mut this.timer, this.deadline, cx));
                // Dropping the client's body lets the connection close once the answer is out.
                progress.body = None;
                Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let progress = self.progress.lock();
        progress.body.as_ref().map_or(progress.finished, HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.progress.lock().body.as_ref().map_or_else(SizeHint::default, HttpBody::size_hint)
    }
}

/// Around every request of a connection (see [`crate::serve`]; a plain call, not a router
/// layer, which would cost every request a boxed service and future): hands the handler
/// (`next`) its body under the deadline `pace`; if the handler answered without reading it
/// all, marks the answer `Connection: close` and drains the rest.
pub async fn around<F>(pace: BodyPace, request: Request, next: impl FnOnce(Request) -> F) -> Response
where
    F: Future<Output = Response>,
{
    let (parts, body) = request.into_parts();
    if body.is_end_stream() {
        return next(Request::from_parts(parts, body)).await;
    }
    // A client waiting for `100 Continue` sends nothing until asked, so there is nothing
    // to drain if the handler never asked.
    let waits_to_send =
        parts.headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let progress = Progress { body: Some(body), started: Instant::now(), received: 0, finished: false, polled: false };
    let progress = Arc::new(Mutex::new(progress));
    let paced = Paced::new(Arc::clone(&progress), pace);
    let mut response = next(Request::from_parts(parts, Body::new(paced))).await;
    let (finished, left, polled) = {
        let mut p = progress.lock();
        (p.finished, p.body.take(), p.polled)
    };
    if finished {
        return response;
    }
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    if let Some(rest) = left.filter(|_| polled || !waits_to_send) {
        progress.lock().body = Some(rest);
        tokio::spawn(drain(Paced::new(progress, pace)));
    }
    response
}

/// Reads and discards what is left of a body, within [`DRAIN_BYTES`] and [`DRAIN_TIME`].
async fn drain(body: Paced) {
    let mut body = Body::new(body);
    let mut left = DRAIN_BYTES;
    let discard = async {
        while let Some(Ok(frame)) = body.frame().await {
            let len = frame.data_ref().map_or(0, Bytes::len);
            left = left.saturating_sub(u64::try_from(len).unwrap_or(u64::MAX));
            if left == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
}
