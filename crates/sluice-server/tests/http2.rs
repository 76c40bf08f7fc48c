//! HTTP/2 inbound: h2c with prior knowledge on the plain listener and `h2` by ALPN over
//! TLS, with the same admission as HTTP/1.1 (admitted, refused with the structured 429,
//! streamed); a connection with no request in flight is closed after the idle timeout, one
//! whose answer is slow is not.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{Env, KEY, start_with};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::Connect;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use sluice_listener::idle::{GOAWAY_GRACE, IDLE_TIMEOUT};
use sluice_sim::config::{Completion, LatencyConfig, ModelConfig, SimConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::rustls;

fn sim() -> SimConfig {
    SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() }
}

/// Posts a chat request over `client`; the status, the HTTP version and the body text.
async fn chat<C>(client: &Client<C, Full<Bytes>>, base: &str, stream: bool) -> (u16, http::Version, String)
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let body =
        json!({"model": "fast", "max_tokens": 8, "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let request = http::Request::post(format!("{base}/v1/chat/completions"))
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let (status, version) = (response.status().as_u16(), response.version());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, version, String::from_utf8(bytes.to_vec()).unwrap())
}

/// One admitted answer, one admitted stream, then the key's limit: all over HTTP/2.
async fn admitted_streamed_and_limited<C>(client: &Client<C, Full<Bytes>>, base: &str)
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let (status, version, text) = chat(client, base, false).await;
    assert_eq!((status, version), (200, http::Version::HTTP_2), "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reply["object"], "chat.completion", "{text}");

    let (status, version, text) = chat(client, base, true).await;
    assert_eq!((status, version), (200, http::Version::HTTP_2), "{text}");
    assert!(text.contains("\"chat.completion.chunk\""), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");

    let (status, version, text) = chat(client, base, false).await;
    assert_eq!((status, version), (429, http::Version::HTTP_2), "{text}");
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(refusal["error"]["gateway_decision"], "rejected_before_send", "{text}");
    assert_eq!(refusal["error"]["code"], "rate_limit_exceeded", "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_with_prior_knowledge_is_admitted_streamed_and_limited() {
    let env: Env = start_with(sim(), "", &common::one_deployment("{ rpd = 2, burst_seconds = 86400 }")).await;
    let client = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
    admitted_streamed_and_limited(&client, &env.gateway.url()).await;
    // HTTP/1.1 on the same port still works.
    let body = json!({"model": "fast", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, body) = env.post("/v1/chat/completions", KEY, &body).await;
    assert_eq!((status, &body["error"]["code"]), (429, &json!("rate_limit_exceeded")), "{body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_by_alpn_over_tls_is_admitted_streamed_and_limited() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let server = format!("[server]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n", cert.display(), key.display());
    let env = start_with(sim(), &server, &common::one_deployment("{ rpd = 2, burst_seconds = 86400 }")).await;

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    // Offers h2 and http/1.1 by ALPN; the server's choice decides.
    let connector =
        hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_all_versions().build();
    let client = Client::builder(TokioExecutor::new()).build(connector);
    let base = format!("https://localhost:{}", env.gateway.addr().port());
    admitted_streamed_and_limited(&client, &base).await;
    env.shutdown().await;
}

/// A body several times HTTP/2's flow-control window (`H2_WINDOW`) arrives whole: the window
/// is opened again as the handler reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_larger_than_the_h2_window_is_read_whole() {
    let env = start_with(sim(), "", &common::one_deployment("")).await;
    let client = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
    let text = "hello ".repeat(40_000);
    assert!(text.len() > 3 * usize::try_from(sluice_listener::H2_WINDOW).unwrap());
    let body = json!({"model": "fast", "max_tokens": 8, "messages": [{"role": "user", "content": text}]});
    let request = http::Request::post(format!("{}/v1/chat/completions", env.gateway.url()))
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let (status, version) = (response.status(), response.version());
    let answer = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!((status.as_u16(), version), (200, http::Version::HTTP_2), "{answer:?}");
    env.shutdown().await;
}

/// HTTP/2's connection preface and an empty SETTINGS frame: all an idle client sends.
const PREFACE_AND_SETTINGS: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// The types of the frames in `bytes` (HTTP/2 frames, back to back).
fn frame_types(bytes: &[u8]) -> Vec<u8> {
    frames(bytes).iter().map(|(kind, _, _, _)| *kind).collect()
}

#[tokio::test(start_paused = true)]
async fn an_idle_h2_connection_is_sent_goaway_and_closed() {
    let env = start_with(sim(), "", &common::one_deployment("")).await;
    let mut idle = TcpStream::connect(env.gateway.addr()).await.unwrap();
    idle.write_all(PREFACE_AND_SETTINGS).await.unwrap();
    let opened = Instant::now();
    let mut received = Vec::new();
    // Read until the gateway closes; ten minutes of (paused) time is "never".
    let read = tokio::time::timeout(Duration::from_secs(600), idle.read_to_end(&mut received)).await;
    let closed_after = opened.elapsed();
    assert!(read.is_ok(), "an idle HTTP/2 connection stays open: {:?}", frame_types(&received));
    assert!(frame_types(&received).contains(&7), "closed without a GOAWAY: {:?}", frame_types(&received));
    assert!(closed_after >= IDLE_TIMEOUT, "closed before the idle timeout: {closed_after:?}");
    // The client never answered GOAWAY's PING: cut once the grace is over.
    assert!(closed_after <= IDLE_TIMEOUT + GOAWAY_GRACE + Duration::from_millis(100), "{closed_after:?}");
    env.shutdown().await;
}

/// The frames in `bytes`: type, flags, stream and payload.
fn frames(bytes: &[u8]) -> Vec<(u8, u8, u32, &[u8])> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + 9) {
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let Some(payload) = bytes.get(at + 9..at + 9 + len) else { break };
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        frames.push((head[3], head[4], stream, payload));
        at += 9 + len;
    }
    frames
}

/// What a client may send before it is read is bounded by what the gateway announces: its
/// SETTINGS say 64 KiB per stream (`SETTINGS_INITIAL_WINDOW_SIZE`) and per header block
/// (`SETTINGS_MAX_HEADER_LIST_SIZE`), and the connection's window is not raised past 64 KiB.
#[tokio::test(start_paused = true)]
async fn an_h2_connection_takes_in_at_most_64_kib_unread() {
    let env = start_with(sim(), "", &common::one_deployment("")).await;
    let mut client = TcpStream::connect(env.gateway.addr()).await.unwrap();
    client.write_all(PREFACE_AND_SETTINGS).await.unwrap();
    let mut received = Vec::new();
    // Until the connection closes as idle: everything the gateway sent on it.
    tokio::time::timeout(Duration::from_secs(600), client.read_to_end(&mut received)).await.unwrap().unwrap();
    let frames = frames(&received);
    let settings = frames.iter().find(|(kind, flags, _, _)| *kind == 4 && flags & 1 == 0).expect("SETTINGS");
    let values: Vec<(u16, u32)> = settings
        .3
        .chunks(6)
        .map(|p| (u16::from_be_bytes([p[0], p[1]]), u32::from_be_bytes([p[2], p[3], p[4], p[5]])))
        .collect();
    let window = sluice_listener::H2_WINDOW;
    assert!(values.contains(&(4, window)), "SETTINGS_INITIAL_WINDOW_SIZE: {values:?}");
    assert!(values.contains(&(6, 64 * 1024)), "SETTINGS_MAX_HEADER_LIST_SIZE: {values:?}");
    let raised: u32 = frames
        .iter()
        .filter(|(kind, _, stream, _)| *kind == 8 && *stream == 0)
        .map(|(_, _, _, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]))
        .sum();
    assert!(65_535 + raised <= window, "the connection window is raised by {raised}");
    env.shutdown().await;
}

/// The sim answers after 30 s, longer than the idle timeout.
fn slow_sim() -> SimConfig {
    let latency = LatencyConfig { ttft_ms: 30_000.0, ..LatencyConfig::default() };
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 1 },
        latency: Some(latency),
        ..ModelConfig::openai("gpt-4o-mini")
    };
    SimConfig { models: vec![model], ..SimConfig::default() }
}

#[tokio::test(start_paused = true)]
async fn an_answer_slower_than_the_idle_timeout_keeps_its_h2_connection() {
    let env = start_with(slow_sim(), "", &common::one_deployment("")).await;
    let tcp = TcpStream::connect(env.gateway.addr()).await.unwrap();
    // Paused time runs ahead while the kernel holds back a small write (Nagle).
    tcp.set_nodelay(true).unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), hyper_util::rt::TokioIo::new(tcp)).await.unwrap();
    let conn = tokio::spawn(conn);
    let body = json!({"model": "fast", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]});
    for _ in 0..2 {
        let request = http::Request::post(format!("{}/v1/chat/completions", env.gateway.url()))
            .header("authorization", format!("Bearer {KEY}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let asked = Instant::now();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status();
        let text = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(status, 200, "{text:?}");
        assert!(asked.elapsed() > IDLE_TIMEOUT, "the answer took {:?}", asked.elapsed());
    }
    // Idle once the answers are read: the gateway sends GOAWAY, the client answers its PING
    // and the connection ends.
    let answered = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(600), conn).await;
    assert!(ended.is_ok(), "the idle connection stays open");
    assert!(answered.elapsed() >= IDLE_TIMEOUT, "closed {:?} after the last answer", answered.elapsed());
    assert!(answered.elapsed() <= IDLE_TIMEOUT + GOAWAY_GRACE, "closed {:?} after the last answer", answered.elapsed());
    env.shutdown().await;
}
