//! HTTP/2 inbound: h2c with prior knowledge on the plain listener and `h2` by ALPN over
//! TLS, with the same admission as HTTP/1.1 (admitted, refused with the structured 429,
//! streamed).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{Env, KEY, start_with};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::Connect;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use sluice_sim::config::{ModelConfig, SimConfig};
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
