//! Which HTTP a client connection speaks: HTTP/2 when it says so (the `h2` protocol agreed
//! by ALPN over TLS, or HTTP/2's connection preface first on a plain socket: h2c with prior
//! knowledge), HTTP/1.1 otherwise.

use std::time::Duration;

use tokio::net::TcpStream;

/// The 24 bytes an HTTP/2 client sends first (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long to wait before looking again at a socket that holds only the start of the
/// preface (clients send it in one write; this is the rare split one).
const PARTIAL_WAIT: Duration = Duration::from_millis(5);

/// The HTTP version of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.1 (and 1.0).
    Http1,
    /// HTTP/2.
    Http2,
}

impl Version {
    /// The version ALPN agreed on a TLS connection: HTTP/2 for `h2`, else HTTP/1.1.
    #[must_use]
    pub fn of_alpn(protocol: Option<&[u8]>) -> Self {
        if protocol == Some(b"h2") { Self::Http2 } else { Self::Http1 }
    }

    /// The version a plain connection's first bytes announce, read without consuming them;
    /// `None` when the client closed or sent nothing telling before `within` passed.
    pub async fn of_plain(tcp: &TcpStream, within: Duration) -> Option<Self> {
        tokio::time::timeout(within, sniff(tcp)).await.ok().flatten()
    }
}

/// Peeks until the bytes either differ from the preface (HTTP/1.1) or hold all of it.
async fn sniff(tcp: &TcpStream) -> Option<Version> {
    let mut head = [0_u8; PREFACE.len()];
    loop {
        let n = tcp.peek(&mut head).await.ok()?;
        if n == 0 {
            return None;
        }
        if head[..n] != PREFACE[..n] {
            return Some(Version::Http1);
        }
        if n == PREFACE.len() {
            return Some(Version::Http2);
        }
        tokio::time::sleep(PARTIAL_WAIT).await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt as _;
    use tokio::net::TcpListener;

    use super::*;

    async fn sniffed(chunks: &[&[u8]]) -> Option<Version> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        for chunk in chunks {
            client.write_all(chunk).await.unwrap();
            client.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let version = Version::of_plain(&server, Duration::from_millis(500)).await;
        drop(client);
        version
    }

    #[tokio::test]
    async fn the_preface_means_http2_anything_else_http1_and_silence_nothing() {
        assert_eq!(sniffed(&[PREFACE]).await, Some(Version::Http2));
        assert_eq!(sniffed(&[&PREFACE[..3], &PREFACE[3..10], &PREFACE[10..]]).await, Some(Version::Http2));
        assert_eq!(sniffed(&[b"POST /v1/chat/completions HTTP/1.1\r\n"]).await, Some(Version::Http1));
        assert_eq!(sniffed(&[b"PRI * HTTP/1.1\r\n"]).await, Some(Version::Http1));
        assert_eq!(sniffed(&[b"PR"]).await, None, "the start of the preface, then nothing");
        assert_eq!(sniffed(&[]).await, None);
    }

    #[test]
    fn alpn_h2_means_http2() {
        assert_eq!(Version::of_alpn(Some(b"h2")), Version::Http2);
        assert_eq!(Version::of_alpn(Some(b"http/1.1")), Version::Http1);
        assert_eq!(Version::of_alpn(None), Version::Http1);
    }
}
