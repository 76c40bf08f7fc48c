//! One accepted connection: hyper HTTP/1 over a socket that can be reset on purpose.
//!
//! Faults that must look like a broken connection (reset, hang, mid-stream drop) call
//! [`ConnCtl::abort`]. The service then fails instead of answering, hyper drops the
//! connection, and the socket closes with `SO_LINGER = 0`, so the client sees a real TCP RST.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower::ServiceExt as _;

/// Per-connection switch that turns the connection's end into a reset.
#[derive(Debug, Clone, Default)]
pub struct ConnCtl(Arc<AtomicBool>);

impl ConnCtl {
    /// Drops the connection without (further) response, with a TCP reset.
    pub fn abort(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`ConnCtl::abort`] was called.
    #[must_use]
    pub fn is_aborted(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Aborts the connection if there is one (in-process `oneshot` tests have none).
pub fn abort(ctl: Option<&ConnCtl>) {
    if let Some(ctl) = ctl {
        ctl.abort();
    }
}

/// The connection was aborted on purpose.
#[derive(Debug)]
struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection aborted by an injected fault")
    }
}

impl std::error::Error for Aborted {}

/// A TCP stream that resets (instead of closing) when dropped after an abort.
struct ResettableStream {
    inner: TcpStream,
    ctl: ConnCtl,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.ctl.is_aborted() {
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Serves HTTP/1 requests on `stream` with `router` until the client leaves or a fault aborts.
pub async fn serve(stream: TcpStream, router: Router) {
    let _ = stream.set_nodelay(true);
    let ctl = ConnCtl::default();
    let io = TokioIo::new(ResettableStream { inner: stream, ctl: ctl.clone() });
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(ctl.clone());
        let ctl = ctl.clone();
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await.map_err(|never| match never {})?;
            if ctl.is_aborted() { Err(Aborted) } else { Ok(response) }
        }
    });
    let result = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
}
