//! The HTTP listener of sluice: accepts client connections and serves an [`axum::Router`]
//! on them until told to stop.
//!
//! HTTP/1.1 and HTTP/2 ([`http_version`]: h2c with prior knowledge on a plain listener,
//! `h2` by ALPN over [`tls`]), caps on open connections ([`connections`]), a deadline on
//! every request head ([`HEADER_READ_TIMEOUT`]) and body ([`body_pace`]), idle HTTP/2
//! connections closed ([`idle`]), a graceful stop that waits for every connection, and one
//! single-threaded runtime per core ([`per_core`]).
//!
//! It is not the gateway: it knows no route, state or policy. What it serves is the
//! router it is given; the body-pace settings in force come from a closure, read per request.

pub mod body_pace;
pub mod connections;
pub mod http_version;
pub mod idle;
pub mod per_core;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;

use axum::Router;
use http_version::Version;
use sluice_config::BodyPace;
use tokio::sync::watch::Receiver;

/// How long a client may take to send a request's head (request line and headers), from
/// its first byte; then the connection is closed. Bounds slow-header (slowloris) clients.
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The most a request's head (request line and headers) may take: larger heads get
/// `431 Request Header Fields Too Large` and the connection is closed. Also the most an
/// HTTP/1.1 connection buffers (hyper's default lets a read buffer grow to ~400 KiB): what a
/// client that has not authenticated can make a connection hold is its head.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The most requests one HTTP/2 connection may have in flight at once.
pub const H2_MAX_STREAMS: u32 = 256;

/// HTTP/2's flow-control windows, per stream and per connection: the most request body an
/// HTTP/2 connection takes in before its handlers read it (hyper's default is 1 MiB), so
/// what a client that has not authenticated can make a connection hold stays near the
/// head limit, as over HTTP/1.1. An upload then moves 64 KiB per round trip per connection.
pub const H2_WINDOW: u32 = 64 * 1024;

/// How [`serve`] serves its connections besides the router.
#[derive(Debug, Clone)]
pub struct Options<P> {
    /// Serves HTTPS when set.
    pub tls: Option<tls::Tls>,
    /// The caps on open client connections.
    pub caps: connections::Caps,
    /// The body deadline in force ([`body_pace`]), read when each request comes (a reload
    /// may change it).
    pub pace: P,
}

/// What serves a connection's requests: the router, and the body deadline in force
/// ([`body_pace`], around every route, so every body is read under it).
#[derive(Clone)]
struct Routes<P> {
    router: Router,
    pace: P,
}

/// Serves one connection (plain or TLS) in `version` until it ends; when `serve` stops,
/// lets it finish the requests it is serving, then closes it. An HTTP/2 connection with no
/// request in flight for [`idle::IDLE_TIMEOUT`] is closed the same way. Requests carry the
/// peer's address as [`axum::extract::ConnectInfo`].
async fn connection<I, P>(io: I, routes: Routes<P>, peer: SocketAddr, mut stop: Receiver<bool>, version: Version)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    P: Fn() -> BodyPace + Clone + Send + Sync + 'static,
{
    // HTTP/1.1 between requests waits for the next head under `HEADER_READ_TIMEOUT`.
    let activity = (version == Version::Http2).then(idle::Activity::new);
    let counted = activity.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
        let in_flight = counted.as_ref().map(idle::Activity::begin);
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        let router = routes.router.clone();
        // The deadline in force when the request came (a reload may change it).
        let pace = (routes.pace)();
        async move {
            let request = request.map(axum::body::Body::new);
            let response = body_pace::around(pace, request, |request| async move {
                match tower::ServiceExt::oneshot(router, request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            })
            .await;
            Ok::<_, std::convert::Infallible>(response.map(|body| idle::Tracked::new(body, in_flight)))
        }
    });
    let timer = hyper_util::rt::TokioTimer::new();
    match version {
        Version::Http1 => {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(timer)
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_header_size(MAX_HEAD_BYTES)
                .max_buf_size(MAX_HEAD_BYTES);
            let conn = builder.serve_connection(io, service);
            until_stopped(conn, |conn| conn.graceful_shutdown(), &mut stop, None).await;
        }
        Version::Http2 => {
            let mut builder = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder
                .timer(timer)
                .max_header_list_size(u32::try_from(MAX_HEAD_BYTES).unwrap_or(u32::MAX))
                .max_concurrent_streams(H2_MAX_STREAMS)
                .initial_stream_window_size(H2_WINDOW)
                .initial_connection_window_size(H2_WINDOW);
            let conn = builder.serve_connection(io, service);
            until_stopped(conn, |conn| conn.graceful_shutdown(), &mut stop, activity.as_ref()).await;
        }
    }
    // Dropping `stop` here tells `serve` this connection is done.
    drop(stop);
}

/// Drives `conn` to its end. Once `stop` turns true, or (with `activity`) no request has
/// been in flight for [`idle::IDLE_TIMEOUT`], asks it to close gracefully (finish what it
/// is serving, take nothing new) and waits for that; with `activity`, for at most
/// [`idle::GOAWAY_GRACE`] after its last request, then drops it.
async fn until_stopped<C>(
    conn: C,
    graceful: impl FnOnce(std::pin::Pin<&mut C>),
    stop: &mut Receiver<bool>,
    activity: Option<&idle::Activity>,
) where
    C: Future<Output = hyper::Result<()>>,
{
    let quiet_for = |quiet| async move {
        match activity {
            Some(activity) => activity.quiet_for(quiet).await,
            None => std::future::pending().await,
        }
    };
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => return ended(result, "connection ended with an error"),
        () = stopping(stop) => {}
        () = quiet_for(idle::IDLE_TIMEOUT) => tracing::debug!("closing an idle connection"),
    }
    graceful(conn.as_mut());
    tokio::select! {
        result = conn => ended(result, "connection ended with an error while closing"),
        () = quiet_for(idle::GOAWAY_GRACE) => tracing::debug!("cut a connection that did not close after GOAWAY"),
    }
}

fn ended(result: hyper::Result<()>, what: &'static str) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "{what}");
    }
}

/// Resolves once `serve` stops (or is gone).
async fn stopping(stop: &mut Receiver<bool>) {
    let _ = stop.wait_for(|stopping| *stopping).await;
}

/// A plain connection: its HTTP version read from its first bytes, then served; one that
/// says nothing telling within [`HEADER_READ_TIMEOUT`] (or before `serve` stops) is closed.
async fn plain<P>(tcp: tokio::net::TcpStream, routes: Routes<P>, peer: SocketAddr, mut stop: Receiver<bool>)
where
    P: Fn() -> BodyPace + Clone + Send + Sync + 'static,
{
    let version = tokio::select! {
        version = Version::of_plain(&tcp, HEADER_READ_TIMEOUT) => version,
        () = stopping(&mut stop) => None,
    };
    if let Some(version) = version {
        connection(hyper_util::rt::TokioIo::new(tcp), routes, peer, stop, version).await;
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets every connection
/// finish the request it is serving and returns once all connections are closed.
///
/// HTTP/1.1, and HTTP/2 (h2c with prior knowledge on a plain listener, `h2` by ALPN over
/// TLS; see [`http_version`]), with `TCP_NODELAY` on every accepted socket, a
/// [`HEADER_READ_TIMEOUT`] per request head (HTTP/1.1; for the first bytes of any
/// connection and the TLS handshake), heads of at most [`MAX_HEAD_BYTES`], every request
/// body under the deadline of `options.pace` ([`body_pace`]), and HTTP/2 connections
/// closed once idle ([`idle`]); a socket past the connection caps ([`connections::Caps`])
/// is closed at once. On shutdown it stops accepting (the listener is closed).
///
/// Accept failures (e.g. out of file descriptors) are logged and retried.
pub async fn serve<P>(
    listener: tokio::net::TcpListener,
    router: Router,
    options: Options<P>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    P: Fn() -> BodyPace + Clone + Send + Sync + 'static,
{
    let Options { tls, caps, pace } = options;
    let routes = Routes { router, pace };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Past a cap the socket is closed at once: nothing is read, no task is spawned.
        let slot = match caps.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                tracing::debug!(%peer, ?refused, "connection refused: too many open");
                continue;
            }
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let routes = routes.clone();
        let stop = stop_rx.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let Some(tls::Tls(acceptor)) = tls else {
                return plain(tcp, routes, peer, stop).await;
            };
            // The handshake gets the same bound as a request head.
            match tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let version = Version::of_alpn(stream.get_ref().1.alpn_protocol());
                    connection(hyper_util::rt::TokioIo::new(stream), routes, peer, stop, version).await;
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!("TLS handshake timed out"),
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining in-flight requests");
    stop_tx.send_replace(true);
    drop(stop_rx);
    stop_tx.closed().await;
}
