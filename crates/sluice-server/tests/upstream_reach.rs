//! Reaching HTTPS providers through a corporate CA and an HTTP CONNECT proxy: a TLS
//! server whose certificate a CA made in the test signed, and a tiny CONNECT proxy, both on
//! 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls_pki_types::CertificateDer;
use sluice_upstream::{Proxy, Reach, Upstream, UpstreamError};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// A CA (its certificate, DER) and a `localhost` certificate and key it signed, in `dir`.
fn certificates(dir: &Path) -> CertificateDer<'static> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()]).unwrap().signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    ca.der().clone()
}

/// An HTTPS server answering every request 200 `through`; its port.
async fn https_server(dir: &Path) -> u16 {
    let tls = sluice_listener::tls::acceptor(&dir.join("cert.pem"), &dir.join("key.pem")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = tls.0.clone();
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(|_request| async {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"through"))))
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    port
}

/// A CONNECT proxy; its URL and the request lines it received.
async fn connect_proxy() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && client.read(&mut byte).await.unwrap() == 1 {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
                log.lock().unwrap().push(line.clone());
                let target = line.split(' ').nth(1).unwrap().to_owned();
                let mut upstream = TcpStream::connect(target).await.unwrap();
                client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (url, seen)
}

async fn get(upstream: &Upstream, port: u16) -> Result<u16, UpstreamError> {
    let request = http::Request::builder()
        .uri(format!("https://localhost:{port}/v1/models"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    upstream.send(request, Duration::from_secs(10)).await.map(|r| r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_ca_is_trusted_and_https_goes_through_the_proxy_unless_no_proxy_names_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let port = https_server(dir.path()).await;
    let timeout = Duration::from_secs(5);
    let unknown = get(&Upstream::new(timeout), port).await;
    assert!(matches!(unknown, Err(UpstreamError::Connect)), "a CA outside the roots is refused: {unknown:?}");
    let trusted = Reach { roots: vec![ca.clone()], ..Reach::default() };
    assert_eq!(get(&Upstream::reaching(timeout, trusted), port).await.unwrap(), 200);

    let (url, seen) = connect_proxy().await;
    let proxy = Proxy { uri: url.parse().unwrap(), no_proxy: Vec::new() };
    let proxied = Reach { roots: vec![ca.clone()], proxy: Some(proxy.clone()), ..Reach::default() };
    assert_eq!(get(&Upstream::reaching(timeout, proxied), port).await.unwrap(), 200);
    assert_eq!(*seen.lock().unwrap(), vec![format!("CONNECT localhost:{port} HTTP/1.1")]);

    let bypass = Proxy { no_proxy: vec!["localhost".to_owned()], ..proxy };
    let direct = Reach { roots: vec![ca], proxy: Some(bypass), ..Reach::default() };
    assert_eq!(get(&Upstream::reaching(timeout, direct), port).await.unwrap(), 200);
    assert_eq!(seen.lock().unwrap().len(), 1, "NO_PROXY's host is reached directly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_own_ca_is_trusted_for_its_host_only() {
    let dir = tempfile::tempdir().unwrap();
    let ca = certificates(dir.path());
    let port = https_server(dir.path()).await;
    let timeout = Duration::from_secs(5);
    let elsewhere =
        Reach { host_roots: vec![(format!("localhost:{}", port + 1), vec![ca.clone()])], ..Reach::default() };
    let refused = get(&Upstream::reaching(timeout, elsewhere), port).await;
    assert!(matches!(refused, Err(UpstreamError::Connect)), "another host's CA trusted here: {refused:?}");
    let own = Reach { host_roots: vec![(format!("LOCALHOST:{port}"), vec![ca])], ..Reach::default() };
    assert_eq!(get(&Upstream::reaching(timeout, own), port).await.unwrap(), 200);
}
