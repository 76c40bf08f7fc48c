//! A bounded load loop against the simulated provider, to measure its non-stream throughput.
//!
//! ```text
//! cargo run --release -p sluice-sim --example load -- [CONNECTIONS] [REQUESTS] [URL]
//! ```
//! Without URL it starts an in-process simulator (one model with limits too high to refuse,
//! zero latency, no faults) on
//! 127.0.0.1. Each connection sends requests back to back over HTTP/1 keep-alive until
//! REQUESTS have been sent in total or 60 s have passed; it then prints the throughput.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use sluice_sim::{Clock as _, Limits, ModelConfig, RealClock, SimConfig, SimProvider};
use tokio::net::TcpStream;

const DEADLINE: Duration = Duration::from_secs(60);
const BODY: &str = r#"{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the load test."}],"max_tokens":16}"#;

#[tokio::main]
#[expect(clippy::print_stdout, reason = "an example reports on stdout")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let connections: u64 = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let requests: u64 = args.get(2).map_or(Ok(200_000), |s| s.parse())?;
    let (addr, sim) = match args.get(3) {
        Some(url) => (url.trim_start_matches("http://").trim_end_matches('/').to_owned(), None),
        None => {
            // Limits high enough never to refuse, so every request runs the full admission path.
            let limits = Limits { rpm: Some(1_000_000_000), tpm: Some(1_000_000_000_000), ..Limits::default() };
            let model = ModelConfig::openai("gpt-4o-mini").with_limits(limits);
            let config = SimConfig { models: vec![model], seed: Some(1), ..SimConfig::default() };
            let sim = SimProvider::start(config).await?;
            (sim.addr().to_string(), Some(sim))
        }
    };
    let load = Arc::new(Load {
        addr,
        sent: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        total: requests,
        clock: RealClock::new(),
    });
    let workers: Vec<_> = (0..connections).map(|_| tokio::spawn(worker(Arc::clone(&load)))).collect();
    for worker in workers {
        worker.await??;
    }
    let (clock, sent, failed) = (&load.clock, &load.sent, &load.failed);
    let elapsed = clock.elapsed();
    let done = sent.load(Ordering::Relaxed).min(requests);
    let rate = done as f64 / elapsed.as_secs_f64();
    println!(
        "{done} requests over {connections} connections in {elapsed:.2?}: {rate:.0} requests/s ({} failed)",
        failed.load(Ordering::Relaxed)
    );
    if let Some(sim) = sim {
        println!("simulator served {}", sim.stats().served);
        sim.shutdown().await;
    }
    Ok(())
}

/// Shared state of the load loop.
struct Load {
    addr: String,
    sent: AtomicU64,
    failed: AtomicU64,
    total: u64,
    clock: RealClock,
}

async fn worker(load: Arc<Load>) -> anyhow::Result<()> {
    let addr = &load.addr;
    let (sent, failed, total, clock) = (&load.sent, &load.failed, load.total, &load.clock);
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let body = Bytes::from_static(BODY.as_bytes());
    while sent.fetch_add(1, Ordering::Relaxed) < total && clock.elapsed() < DEADLINE {
        let request = http::Request::post("/v1/chat/completions")
            .header("host", addr)
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))?;
        let response = sender.send_request(request).await?;
        if !response.status().is_success() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
        response.into_body().collect().await?;
    }
    Ok(())
}
