//! HTTPS with the certificate and key named in `[server]`, and clear errors for bad files.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{KEY, start_with};
use http_body_util::{BodyExt as _, Full};
use sluice_sim::config::{ModelConfig, SimConfig};
use tokio_rustls::rustls;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_https_with_the_configured_certificate() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let server = format!("[server]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n", cert.display(), key.display());
    let sim = SimConfig { models: vec![ModelConfig::openai("gpt-4o-mini")], ..SimConfig::default() };
    let env = start_with(sim, &server, &common::one_deployment("")).await;
    let url = env.gateway.url();
    assert!(url.starts_with("https://"), "{url}");

    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let port = env.gateway.addr().port();
    let body = serde_json::json!({"model": "fast", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    let request = http::Request::post(format!("https://localhost:{port}/v1/chat/completions"))
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let reply: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(reply["object"], "chat.completion");
    // Plain HTTP on the TLS port gets no answer.
    assert!(env.http.get(format!("http://127.0.0.1:{port}/healthz")).send().await.is_err());
    env.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unreadable_or_mismatched_files_are_named() {
    let missing = std::path::Path::new("/nonexistent/cert.pem");
    let err = sluice_listener::tls::acceptor(missing, missing).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
    let config = "[server]\ntls_cert = \"c.pem\"\n";
    let err = sluice_config::parse(config).unwrap_err();
    assert_eq!((err.field.as_str(), err.line), ("server.tls_key", Some(2)));
}
