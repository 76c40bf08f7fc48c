//! Reaching HTTPS providers through an HTTP proxy: the TCP connection goes to the proxy,
//! which is asked to `CONNECT host:port`; TLS then runs end to end with the provider
//! through the tunnel (the proxy sees neither keys nor prompts). Plain-HTTP upstreams
//! (local model servers) and hosts that `NO_PROXY` names are connected directly.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An HTTP proxy for HTTPS upstreams and the hosts that bypass it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    /// `http://host:port` of the proxy.
    pub uri: Uri,
    /// Hosts reached directly: exact names, or domains (`example.com` and `.example.com`
    /// both cover `api.example.com`); `*` bypasses the proxy for every host.
    pub no_proxy: Vec<String>,
}

impl Proxy {
    /// Whether `host` is reached directly.
    #[must_use]
    pub fn bypasses(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.no_proxy.iter().any(|entry| {
            let domain = entry.trim().trim_start_matches('.').to_ascii_lowercase();
            entry == "*" || (!domain.is_empty() && (host == domain || host.ends_with(&format!(".{domain}"))))
        })
    }
}

/// A connector that tunnels HTTPS through [`Proxy`] when one is set.
#[derive(Debug, Clone)]
pub struct Tunnel {
    /// Direct TCP connections (to providers, or to the proxy).
    pub http: HttpConnector,
    /// The proxy, if any.
    pub proxy: Option<Proxy>,
}

impl tower::Service<Uri> for Tunnel {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let mut http = self.http.clone();
        let host = dst.host().unwrap_or_default().to_owned();
        let proxy = self.proxy.clone().filter(|p| dst.scheme_str() == Some("https") && !p.bypasses(&host));
        Box::pin(async move {
            let Some(proxy) = proxy else { return http.call(dst).await.map_err(Into::into) };
            let io = http.call(proxy.uri.clone()).await?;
            let authority = format!("{host}:{}", dst.port_u16().unwrap_or(443));
            Ok(TokioIo::new(connect(io.into_inner(), &authority).await?))
        })
    }
}

/// Longest proxy answer to a `CONNECT` read.
const MAX_ANSWER: usize = 8 * 1024;

/// Asks the proxy on `stream` for a tunnel to `authority`.
async fn connect(mut stream: TcpStream, authority: &str) -> Result<TcpStream, BoxError> {
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing past the answer's end may be read, it belongs to TLS.
    while !answer.ends_with(b"\r\n\r\n") {
        if answer.len() >= MAX_ANSWER || stream.read(&mut byte).await? == 0 {
            return Err("the proxy closed or sent an oversized answer to CONNECT".into());
        }
        answer.push(byte[0]);
    }
    let status = answer.split(|b| *b == b' ').nth(1).unwrap_or_default();
    if status != b"200" {
        return Err(format!("the proxy refused CONNECT ({})", String::from_utf8_lossy(status)).into());
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_names_hosts_and_domains() {
        let proxy = |entries: &[&str]| Proxy {
            uri: Uri::from_static("http://proxy:3128"),
            no_proxy: entries.iter().map(|e| (*e).to_owned()).collect(),
        };
        let p = proxy(&["internal.example", ".corp.example", "localhost"]);
        assert!(p.bypasses("internal.example") && p.bypasses("api.internal.example"));
        assert!(p.bypasses("llm.corp.example") && p.bypasses("corp.example") && p.bypasses("LOCALHOST"));
        assert!(!p.bypasses("api.openai.com") && !p.bypasses("notinternal.example"));
        assert!(proxy(&["*"]).bypasses("api.openai.com"));
        assert!(!proxy(&[]).bypasses("api.openai.com"));
    }
}
