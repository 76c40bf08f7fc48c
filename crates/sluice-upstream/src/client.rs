//! The HTTP client toward providers: pooled keep-alive connections, `TCP_NODELAY`,
//! rustls for HTTPS, plain HTTP for local model servers.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::TokioExecutor;
use tokio_rustls::rustls;

pub use crate::proxy::Proxy;
use crate::proxy::Tunnel;

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

/// Reads `body` whole: at most `limit` bytes, before `deadline` ends (a wait on the
/// caller's clock; a body whole by then wins).
///
/// # Errors
/// [`BodyError`]: too large, broken off, or not done by the deadline.
pub async fn read_body(body: Incoming, limit: usize, deadline: impl Future<Output = ()>) -> Result<Bytes, BodyError> {
    tokio::select! {
        biased;
        read = Limited::new(body, limit).collect() => match read {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
            Err(_) => Err(BodyError::Broken),
        },
        () = deadline => Err(BodyError::Stalled),
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

/// A pooled client for all providers: a pool per thread that sends, so that a pooled
/// connection's task runs where its requests do (the listener serves with one thread per
/// core) and an answer wakes no other thread. A provider host with a CA
/// file of its own has its own connector, and so its own pools.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The connector for every host without a CA file of its own, and its pools' id.
    connector: (u64, HttpsConnector<Tunnel>),
    /// By authority (`host:port` as in the provider's base URL): a connector that also
    /// trusts that provider's `ca_file`, and its pools' id.
    by_host: std::sync::Arc<std::collections::HashMap<String, (u64, HttpsConnector<Tunnel>)>>,
}

/// The pooled client of one connector.
type Pooled = Client<HttpsConnector<Tunnel>, Wired>;

/// The most connectors whose pools one thread keeps; the oldest goes first (after reloads).
const POOLS_PER_THREAD: usize = 32;

thread_local! {
    static POOLS: std::cell::RefCell<Vec<(u64, Pooled)>> = const { std::cell::RefCell::new(Vec::new()) };
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

    /// Starts `request` on this thread's pool for its host (made on the host's first send).
    fn start(&self, request: http::Request<Wired>) -> ResponseFuture {
        let uri = request.uri();
        let by_host = || uri.authority().and_then(|a| self.by_host.get(&a.as_str().to_ascii_lowercase()));
        let (id, connector) =
            if self.by_host.is_empty() { &self.connector } else { by_host().unwrap_or(&self.connector) };
        POOLS.with_borrow_mut(|pools| {
            if let Some((_, client)) = pools.iter().find(|(pool, _)| pool == id) {
                return client.request(request);
            }
            let client = Client::builder(TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .pool_max_idle_per_host(512)
                .build(connector.clone());
            if pools.len() >= POOLS_PER_THREAD {
                pools.remove(0);
            }
            let started = client.request(request);
            pools.push((*id, client));
            started
        })
    }

    /// Sends `request`, waiting at most `timeout` for the response headers.
    ///
    /// # Errors
    /// [`UpstreamError`] telling whether the provider can have seen the request.
    pub async fn send(
        &self,
        request: http::Request<impl Into<Wired>>,
        timeout: Duration,
    ) -> Result<http::Response<Incoming>, UpstreamError> {
        match tokio::time::timeout(timeout, self.start(request.map(Into::into))).await {
            Err(_) => Err(UpstreamError::Timeout),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) if e.is_connect() => Err(UpstreamError::Connect),
            Ok(Err(_)) => Err(UpstreamError::NoResponse),
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
}
