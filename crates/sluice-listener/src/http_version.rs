//! Which HTTP a client connection speaks: HTTP/2 when it says so (the `h2` protocol agreed
//! by ALPN over TLS, or HTTP/2's connection preface first on a plain socket: h2c with prior
//! knowledge), HTTP/1.1 otherwise.

use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The 24 bytes an HTTP/2 client sends first (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

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

/// Peeks until the bytes either differ from the preface (HTTP/1.1) or hold all of it. A
/// socket holding only the start of the preface (a rare split write, or a client that stops
/// there) is looked at again only when more bytes arrive: its readiness is cleared until
/// then, so it costs nothing while it waits.
async fn sniff(tcp: &TcpStream) -> Option<Version> {
    let mut head = [0_u8; PREFACE.len()];
    let mut seen = 0;
    loop {
        let ready = tcp.ready(Interest::READABLE).await.ok()?;
        match tcp.try_io(Interest::READABLE, || peek_more(tcp, &mut head, seen)) {
            Ok(n) => seen = n,
            // Nothing new: readiness is cleared, the next wait is for more bytes. A client
            // that closed will send none.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && !ready.is_read_closed() => continue,
            Err(_) => return None,
        }
        if head[..seen] != PREFACE[..seen] {
            return Some(Version::Http1);
        }
        if seen == PREFACE.len() {
            return Some(Version::Http2);
        }
    }
}

/// Peeks at the socket's first bytes without waiting: how many it holds when that is more
/// than `seen`, else `WouldBlock`.
fn peek_more(tcp: &TcpStream, head: &mut [u8], seen: usize) -> std::io::Result<usize> {
    let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
    let (n, _) = rustix::net::recv(tcp, &mut *head, flags)?;
    if n > seen { Ok(n) } else { Err(std::io::ErrorKind::WouldBlock.into()) }
}

#[cfg(test)]
mod tests {
    use std::future::Future as _;

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

    /// A client that sends the start of the preface and stops is not looked at again until
    /// it sends more: a second of (paused) time passes with the sniff polled a few times,
    /// not every few milliseconds.
    #[tokio::test(start_paused = true)]
    async fn a_partial_preface_waits_for_more_bytes_without_being_woken() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(&PREFACE[..16]).await.unwrap();
        let polls = std::cell::Cell::new(0_u32);
        let mut sniffing = std::pin::pin!(sniff(&server));
        let mut counted = std::future::poll_fn(|cx| {
            polls.set(polls.get() + 1);
            sniffing.as_mut().poll(cx)
        });
        let silent = tokio::time::timeout(Duration::from_secs(1), &mut counted).await;
        assert!(silent.is_err(), "a partial preface is not a version yet");
        // Once when the bytes came, once more when the timeout fired: a sleep loop would
        // have been polled about 200 times.
        assert!(polls.get() < 10, "polled {} times while the client sent nothing", polls.get());
        client.write_all(&PREFACE[16..]).await.unwrap();
        assert_eq!(counted.await, Some(Version::Http2), "the rest of the preface completes it");
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_closes_mid_preface_is_let_go_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        client.write_all(&PREFACE[..5]).await.unwrap();
        drop(client);
        let version = tokio::time::timeout(Duration::from_secs(5), sniff(&server)).await;
        assert_eq!(version, Ok(None), "closed: no version, without waiting for the sniff's timeout");
    }

    #[test]
    fn alpn_h2_means_http2() {
        assert_eq!(Version::of_alpn(Some(b"h2")), Version::Http2);
        assert_eq!(Version::of_alpn(Some(b"http/1.1")), Version::Http1);
        assert_eq!(Version::of_alpn(None), Version::Http1);
    }
}
