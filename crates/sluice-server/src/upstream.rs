//! The HTTP client toward providers: pooled keep-alive connections, `TCP_NODELAY`,
//! rustls for HTTPS, plain HTTP for local model servers.

use std::task::Context;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use tokio_rustls::rustls;

pub use crate::upstream_proxy::Proxy;
use crate::upstream_proxy::Tunnel;

/// Why an upstream call failed before a response arrived.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The connection could not be made: the provider never saw the request.
    #[error("connect failed")]
    Connect,
    /// The connection broke or the provider closed it before answering: the request may
    /// or may not have been processed.
    #[error("no response")]
    NoResponse,
    /// No response headers within the timeout.
    #[error("timed out")]
    Timeout,
}

/// Why a provider's answer body could not be read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// It is longer than the reader's limit.
    #[error("too large")]
    TooLarge,
    /// The connection broke mid-body.
    #[error("broken off")]
    Broken,
    /// It did not end by the deadline: the provider stalled after its headers.
    #[error("stalled")]
    Stalled,
}

/// Reads `body` whole: at most `limit` bytes, by `deadline`.
///
/// # Errors
/// [`BodyError`]: too large, broken off, or not done by the deadline.
pub async fn read_body(body: Body, limit: usize, deadline: tokio::time::Instant) -> Result<Bytes, BodyError> {
    match tokio::time::timeout_at(deadline, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyError::Stalled),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Ok(Err(_)) => Err(BodyError::Broken),
    }
}

/// A request body that says when the connection first asks for it: the moment the
/// request goes to the wire (after a fresh connection's handshake, or its turn on a pooled
/// one), which is when the provider's rate window sees it.
pub struct Wired {
    body: Full<Bytes>,
    on_wire: Option<Box<dyn FnOnce() + Send>>,
}

impl Wired {
    /// `body`, calling `on_wire` (once) when the connection first asks for it.
    pub fn new(body: Full<Bytes>, on_wire: impl FnOnce() + Send + 'static) -> Self {
        Self { body, on_wire: Some(Box::new(on_wire)) }
    }
}

impl From<Full<Bytes>> for Wired {
    fn from(body: Full<Bytes>) -> Self {
        Self { body, on_wire: None }
    }
}

impl hyper::body::Body for Wired {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if let Some(on_wire) = self.on_wire.take() {
            on_wire();
        }
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The client for all providers: keep-alive HTTP/1.1 connections pooled per thread and
/// per host. Each connection runs in a task of its own on the thread that made it (one
/// thread per core serves, see [`crate::per_core`]), so an answer wakes no other thread;
/// a request takes a connection from its thread's pool and gives it back once its answer
/// was read to the end ([`Body`]): nothing is spawned per request. A connection dropped
/// earlier (a client gone mid-stream, a timeout) is closed. A provider host with a CA file
/// of its own has its own connector, and so its own pools.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The connector for every host without a CA file of its own, and its pools' id.
    connector: (u64, HttpsConnector<Tunnel>),
    /// By authority (`host:port` as in the provider's base URL): a connector that also
    /// trusts that provider's `ca_file`, and its pools' id.
    by_host: std::sync::Arc<std::collections::HashMap<String, (u64, HttpsConnector<Tunnel>)>>,
}

/// One kept-alive connection: the handle requests are sent on (the connection itself runs
/// in its own task).
struct Conn {
    sender: http1::SendRequest<Wired>,
}

/// A pool: the connector's id, the scheme and the authority connected to.
type PoolKey = (u64, http::uri::Scheme, http::uri::Authority);

/// How long a connection may wait unused in a pool.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The most unused connections a thread keeps per pool; more are closed.
const MAX_IDLE_PER_POOL: usize = 512;
/// Past this many pools on a thread, emptied ones are forgotten (hosts that left the
/// configuration on a reload).
const POOLS_KEPT: usize = 64;

/// This thread's unused connections, most recently used last.
#[derive(Default)]
struct Pools(std::collections::HashMap<PoolKey, std::collections::VecDeque<(Conn, tokio::time::Instant)>>);

impl Pools {
    /// The most recently used connection of `key` that can take a request now.
    fn checkout(&mut self, key: &PoolKey) -> Option<Conn> {
        let idle = self.0.get_mut(key)?;
        let now = tokio::time::Instant::now();
        while idle.front().is_some_and(|(_, since)| now.duration_since(*since) > IDLE_TIMEOUT) {
            idle.pop_front();
        }
        while let Some((conn, _)) = idle.pop_back() {
            // Closed by the provider while unused: gone with its task.
            if !conn.sender.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn checkin(&mut self, key: PoolKey, conn: Conn) {
        if self.0.len() >= POOLS_KEPT && !self.0.contains_key(&key) {
            self.0.retain(|_, idle| !idle.is_empty());
        }
        let idle = self.0.entry(key).or_default();
        if idle.len() >= MAX_IDLE_PER_POOL {
            idle.pop_front();
        }
        idle.push_back((conn, tokio::time::Instant::now()));
    }
}

thread_local! {
    static POOLS: std::cell::RefCell<Pools> = std::cell::RefCell::new(Pools::default());
}

/// How the upstream client reaches providers.
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// Extra trusted CA certificates (DER), beside the webpki roots: a corporate CA that
    /// re-signs traffic, or a private gateway's.
    pub roots: Vec<rustls_pki_types::CertificateDer<'static>>,
    /// Per provider authority (`host:port` of its base URL), CA certificates trusted for
    /// that host only, beside `roots`.
    pub host_roots: Vec<(String, Vec<rustls_pki_types::CertificateDer<'static>>)>,
    /// The HTTP proxy for HTTPS upstreams, if any.
    pub proxy: Option<Proxy>,
}

impl Upstream {
    /// A client with the given connect timeout, trusting the webpki roots, connecting directly.
    #[must_use]
    pub fn new(connect_timeout: Duration) -> Self {
        Self::reaching(connect_timeout, Reach::default())
    }

    /// A client with the given connect timeout that reaches providers as `reach` says.
    #[must_use]
    pub fn reaching(connect_timeout: Duration, reach: Reach) -> Self {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = || IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut by_host = std::collections::HashMap::new();
        for (host, extra) in &reach.host_roots {
            let roots = [reach.roots.as_slice(), extra].concat();
            by_host.insert(host.to_ascii_lowercase(), (id(), connector(connect_timeout, roots, reach.proxy.clone())));
        }
        let connector = (id(), connector(connect_timeout, reach.roots, reach.proxy));
        Self { connector, by_host: std::sync::Arc::new(by_host) }
    }

    /// The connector for `authority`, and its pools' id.
    fn connector_for(&self, authority: &http::uri::Authority) -> &(u64, HttpsConnector<Tunnel>) {
        if self.by_host.is_empty() {
            return &self.connector;
        }
        self.by_host.get(&authority.as_str().to_ascii_lowercase()).unwrap_or(&self.connector)
    }

    /// Sends `request` (an absolute URI), waiting at most `timeout` for the response
    /// headers (a new connection's set-up included).
    ///
    /// # Errors
    /// [`UpstreamError`] telling whether the provider can have seen the request.
    pub async fn send(
        &self,
        request: http::Request<impl Into<Wired>>,
        timeout: Duration,
    ) -> Result<http::Response<Body>, UpstreamError> {
        match tokio::time::timeout(timeout, self.send_now(request.map(Into::into))).await {
            Err(_) => Err(UpstreamError::Timeout),
            Ok(sent) => sent,
        }
    }

    async fn send_now(&self, request: http::Request<Wired>) -> Result<http::Response<Body>, UpstreamError> {
        let uri = request.uri();
        let (Some(scheme), Some(authority)) = (uri.scheme().cloned(), uri.authority().cloned()) else {
            return Err(UpstreamError::Connect);
        };
        let (id, connector) = self.connector_for(&authority);
        let key = (*id, scheme, authority);
        let mut request = origin_form(request, &key.2);
        let mut reused = POOLS.with_borrow_mut(|pools| pools.checkout(&key));
        loop {
            let was_reused = reused.is_some();
            let conn = match reused.take() {
                Some(conn) => conn,
                None => connect(connector, &key).await?,
            };
            let mut conn = conn;
            match exchange(&mut conn, request).await {
                Ok(response) => return Ok(response.map(|incoming| Body { incoming, conn: Some((conn, key)) })),
                // A kept-alive connection the provider had closed before the request went
                // out: the request never left, it goes again on a new connection.
                Err(Some(unsent)) if was_reused => request = unsent,
                // Not written on a new connection either: the provider never saw it.
                Err(Some(_)) => return Err(UpstreamError::Connect),
                Err(None) => return Err(UpstreamError::NoResponse),
            }
        }
    }
}

/// `request` as HTTP/1.1 sends it to the host itself: its path and query alone on the
/// request line, the authority in `Host` (unless the caller set one).
fn origin_form(mut request: http::Request<Wired>, authority: &http::uri::Authority) -> http::Request<Wired> {
    if !request.headers().contains_key(http::header::HOST) {
        let default_port = match request.uri().scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        };
        let host = if authority.port_u16() == default_port { authority.host() } else { authority.as_str() };
        if let Ok(value) = http::HeaderValue::from_str(host) {
            request.headers_mut().insert(http::header::HOST, value);
        }
    }
    let path = request.uri().path_and_query().cloned().unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    *request.uri_mut() = http::Uri::from(path);
    request
}

/// A new connection to `key`'s host.
async fn connect(connector: &HttpsConnector<Tunnel>, key: &PoolKey) -> Result<Conn, UpstreamError> {
    let (_, scheme, authority) = key;
    let target = http::Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query("/")
        .build()
        .map_err(|_| UpstreamError::Connect)?;
    let io = tower::ServiceExt::oneshot(connector.clone(), target).await.map_err(|_| UpstreamError::Connect)?;
    let (sender, conn) = http1::Builder::new().handshake(io).await.map_err(|_| UpstreamError::Connect)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "provider connection ended with an error");
        }
    });
    Ok(Conn { sender })
}

/// Sends `request` on `conn` once it can take one; the response head, or the request
/// back when it was never written (`None` when it may have been).
async fn exchange(
    conn: &mut Conn,
    request: http::Request<Wired>,
) -> Result<http::Response<Incoming>, Option<http::Request<Wired>>> {
    if conn.sender.ready().await.is_err() {
        return Err(Some(request));
    }
    conn.sender.try_send_request(request).await.map_err(|mut e| e.take_message())
}

/// A provider's answer body. Read to its end, its connection goes back to the thread's
/// pool; dropped before, the connection is closed.
pub struct Body {
    incoming: Incoming,
    conn: Option<(Conn, PoolKey)>,
}

impl Body {
    /// Back to the pool, when the connection can serve another request.
    fn release(&mut self) {
        if let Some((conn, key)) = self.conn.take()
            && !conn.sender.is_closed()
        {
            POOLS.with_borrow_mut(|pools| pools.checkin(key, conn));
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let frame = std::pin::Pin::new(&mut this.incoming).poll_frame(cx);
        if let std::task::Poll::Ready(None) = frame {
            this.release();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.incoming.size_hint()
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        // Read to its end without the last poll (a length-delimited body whose reader
        // stopped at its length): the connection is still good.
        if self.incoming.is_end_stream() {
            self.release();
        }
    }
}

/// A connector trusting the webpki roots and `extra`, through `proxy` when set.
fn connector(
    connect_timeout: Duration,
    extra: Vec<rustls_pki_types::CertificateDer<'static>>,
    proxy: Option<Proxy>,
) -> HttpsConnector<Tunnel> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.enforce_http(false);
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // A certificate rustls cannot parse as an anchor is left out; the config loader
    // has already refused files without any certificate.
    let _ = roots.add_parsable_certificates(extra);
    let tls =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth());
    let builder = match tls {
        Ok(config) => hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config),
        // Unreachable with ring's default provider; keep the webpki roots alone then.
        Err(_) => hyper_rustls::HttpsConnectorBuilder::new().with_webpki_roots(),
    };
    builder.https_or_http().enable_http1().wrap_connector(Tunnel { http, proxy })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt as _;
    use hyper::body::Body as _;

    use super::*;

    #[tokio::test]
    async fn a_wired_body_says_once_when_the_connection_first_asks_for_it() {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&asked);
        let body = Wired::new(Full::new(Bytes::from_static(b"{\"a\":1}")), move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        // Its length is known before it is read (hyper sends it as content-length).
        assert_eq!(body.size_hint().exact(), Some(7));
        assert_eq!(asked.load(Ordering::SeqCst), 0, "not before the connection asks");
        let bytes = body.collect().await.map(http_body_util::Collected::to_bytes);
        assert_eq!(bytes.ok().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    /// A provider on a free loopback port that answers each request on a connection with
    /// `answer`, then does what `after` says with the connection. Counts the connections
    /// it accepted.
    async fn provider(answer: &'static [u8], after: After) -> (String, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        let Ok(n) = socket.read(&mut buf).await else { return };
                        if n == 0 {
                            return;
                        }
                        head.extend_from_slice(&buf[..n]);
                        // Each test request carries a two-byte body after its head.
                        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n")
                            && head.len() >= end + 4 + 2
                        {
                            head.drain(..end + 6);
                            if socket.write_all(answer).await.is_err() {
                                return;
                            }
                            match after {
                                After::KeepOpen => {}
                                After::Close => return,
                                After::Stall => std::future::pending::<()>().await,
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    #[derive(Clone, Copy)]
    enum After {
        KeepOpen,
        Close,
        Stall,
    }

    fn post(url: &str) -> http::Request<Full<Bytes>> {
        http::Request::post(url).body(Full::new(Bytes::from_static(b"{}"))).unwrap()
    }

    const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

    async fn call(upstream: &Upstream, url: &str) -> Result<(u16, Bytes), String> {
        let response = upstream.send(post(url), Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let body = read_body(response.into_body(), 1024, deadline).await.map_err(|e| e.to_string())?;
        Ok((status, body))
    }

    #[tokio::test]
    async fn a_connection_whose_answer_was_read_serves_the_next_request() {
        let (url, accepted) = provider(OK, After::KeepOpen).await;
        let upstream = Upstream::new(Duration::from_secs(1));
        for _ in 0..3 {
            assert_eq!(call(&upstream, &url).await, Ok((200, Bytes::from_static(b"ok"))));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept-alive connection for all three");
    }

    #[tokio::test]
    async fn a_connection_the_provider_closed_while_unused_is_not_sent_on() {
        let (url, accepted) = provider(OK, After::Close).await;
        let upstream = Upstream::new(Duration::from_secs(1));
        assert_eq!(call(&upstream, &url).await, Ok((200, Bytes::from_static(b"ok"))));
        // The provider's close reaches the pooled connection while nobody uses it.
        for _ in 0..1000 {
            let closed = POOLS.with_borrow(|pools| pools.0.values().flatten().all(|(conn, _)| conn.sender.is_closed()));
            if closed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(call(&upstream, &url).await, Ok((200, Bytes::from_static(b"ok"))));
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "a new connection for the second request");
    }

    #[tokio::test]
    async fn an_answer_dropped_before_its_end_does_not_put_its_connection_back() {
        // The answer promises 10 bytes and sends 2, then the provider stalls.
        let (url, accepted) = provider(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nok", After::Stall).await;
        let upstream = Upstream::new(Duration::from_secs(1));
        let response = upstream.send(post(&url), Duration::from_secs(5)).await.unwrap();
        assert_eq!(response.status(), 200);
        drop(response);
        let second = upstream.send(post(&url), Duration::from_secs(5)).await.unwrap();
        assert_eq!(second.status(), 200);
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "the half-read connection was not reused");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_failure() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
        drop(listener);
        let upstream = Upstream::new(Duration::from_secs(1));
        let sent = upstream.send(post(&url), Duration::from_secs(5)).await;
        assert!(matches!(sent, Err(UpstreamError::Connect)), "{:?}", sent.map(|r| r.status()));
    }
}
