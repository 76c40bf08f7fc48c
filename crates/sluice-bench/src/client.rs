//! A small HTTP/1 client over hyper: pooled keep-alive connections with `TCP_NODELAY`,
//! JSON posts, and the gateway's `retry-after-ms` / `retry-after` hints.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Uri, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A pooled client; cheap to clone.
#[derive(Debug, Clone)]
pub struct HttpClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

/// A response, read to the end (so the connection goes back to the pool).
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The server's hint when to retry (`retry-after-ms`, else `retry-after` seconds).
    pub retry_after: Option<Duration>,
    /// The body.
    pub body: Bytes,
    /// The response's headers.
    pub headers: HeaderMap,
}

impl Reply {
    /// Whether the status is 2xx.
    #[must_use]
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient {
    /// A client with keep-alive and `TCP_NODELAY`.
    #[must_use]
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(30)).build(connector);
        Self { inner }
    }

    /// A client that opens a new connection for every request (none is kept idle), as a
    /// client without keep-alive would.
    #[must_use]
    pub fn one_connection_per_request() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(0).build(connector);
        Self { inner }
    }

    /// Posts `body` as JSON to `uri` with an optional bearer token.
    ///
    /// # Errors
    /// When the connection fails or the response cannot be read.
    pub async fn post_json(&self, uri: &Uri, bearer: Option<&str>, body: Bytes) -> anyhow::Result<Reply> {
        let mut request = Request::post(uri.clone()).header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        self.send(request.body(Full::new(body))?).await
    }

    /// Posts `body` as JSON to `uri` with an optional bearer token and extra headers.
    ///
    /// # Errors
    /// When a header is invalid, the connection fails or the response cannot be read.
    pub async fn post_json_with(
        &self,
        uri: &Uri,
        bearer: Option<&str>,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> anyhow::Result<Reply> {
        let mut request = Request::post(uri.clone()).header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        self.send(request.body(Full::new(body))?).await
    }

    /// Gets `uri` with an optional bearer token.
    ///
    /// # Errors
    /// When the connection fails or the response cannot be read.
    pub async fn get(&self, uri: &Uri, bearer: Option<&str>) -> anyhow::Result<Reply> {
        let mut request = Request::get(uri.clone());
        if let Some(token) = bearer {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        self.send(request.body(Full::new(Bytes::new()))?).await
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> anyhow::Result<Reply> {
        let response = self.inner.request(request).await?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let headers = response.headers().clone();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Reply { status, retry_after, body, headers })
    }
}

/// The retry hint of a response: `retry-after-ms` (milliseconds), else `retry-after` (seconds).
#[must_use]
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let ms = number("retry-after-ms").or_else(|| number("retry-after").map(|s| s * 1000.0))?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        h.insert("retry-after-ms", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
    }
}
