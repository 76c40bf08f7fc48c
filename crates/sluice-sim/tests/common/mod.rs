//! Helpers shared by the HTTP integration tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![expect(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test helpers fail the test loudly")]

use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use sluice_sim::{SimConfig, SimHandle, SimProvider, StatsSnapshot};

pub async fn start(toml: &str) -> SimHandle {
    let config = SimConfig::from_toml_str(toml).expect("valid test config");
    SimProvider::start(config).await.expect("simulator starts")
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap()
}

pub fn chat(model: &str, content: &str, max_tokens: u64) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens})
}

pub fn message(model: &str, content: &str, max_tokens: u64) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens})
}

pub async fn post(client: &reqwest::Client, sim: &SimHandle, path: &str, body: &Value) -> reqwest::Response {
    client.post(format!("{}{path}", sim.url())).json(body).send().await.expect("request sent")
}

pub async fn stats_over_http(client: &reqwest::Client, sim: &SimHandle) -> StatsSnapshot {
    client.get(format!("{}/_stats", sim.url())).send().await.unwrap().json().await.unwrap()
}

pub fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response.headers().get(name).unwrap_or_else(|| panic!("missing header {name}")).to_str().unwrap()
}

/// Reads an SSE body to its end; `Err` carries the events read before the body broke.
pub async fn read_sse(
    response: reqwest::Response,
) -> Result<Vec<(Option<String>, String)>, Vec<(Option<String>, String)>> {
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let mut broken = false;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => buffer.push_str(std::str::from_utf8(&bytes).unwrap()),
            Err(_) => {
                broken = true;
                break;
            }
        }
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    name = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            events.push((name, data));
        }
    }
    if broken { Err(events) } else { Ok(events) }
}

/// Parses a Go duration such as `1.5s`, `6m0s`, `12ms` (what the tests need).
pub fn parse_go_duration(s: &str) -> Duration {
    let mut total = 0.0;
    let mut number = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let value: f64 = number.parse().unwrap_or_else(|_| panic!("bad go duration {s}"));
        number.clear();
        let unit = match (c, chars.peek()) {
            ('m', Some('s')) => {
                chars.next();
                0.001
            }
            ('h', _) => 3600.0,
            ('m', _) => 60.0,
            ('s', _) => 1.0,
            _ => panic!("bad unit in {s}"),
        };
        total += value * unit;
    }
    assert!(number.is_empty(), "trailing number in {s}");
    Duration::from_secs_f64(total)
}

/// `n·p ± 4·sqrt(n·p·(1-p))`, the tolerance for a binomial count.
pub fn within_4_sigma(observed: u64, n: u64, p: f64) -> bool {
    let mean = n as f64 * p;
    let sigma = (mean * (1.0 - p)).sqrt();
    (observed as f64 - mean).abs() <= 4.0 * sigma.max(1.0)
}
