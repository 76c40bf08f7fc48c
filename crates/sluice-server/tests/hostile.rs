//! Hostile clients over real sockets: bodies that trickle, bodies never read, floods of
//! connections from one address, guessed dashboard logins and token counts used as free
//! CPU. Each is bounded, and a good request is still served meanwhile.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Env, KEY, chat, sha, start_with};
use serde_json::{Value, json};
use sluice_sim::config::{Completion, ModelConfig, SimConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;

const ADMIN: &str = "sk-admin-hostile-0123";
const COUNTED: &str = "sk-test-counted-rpm";
/// The counted key's requests per minute (and burst: `burst_seconds = 60`).
const COUNTED_RPM: usize = 3;

fn sim() -> SimConfig {
    let model = ModelConfig { completion: Completion::Fixed { tokens: 4 }, ..ModelConfig::openai("gpt-4o-mini") };
    let claude =
        ModelConfig { completion: Completion::Fixed { tokens: 4 }, ..ModelConfig::anthropic("claude-sonnet-4-5") };
    SimConfig { models: vec![model, claude], ..SimConfig::default() }
}

/// A gateway whose `[server]` section is `server`, with an admin key, a plain key and a
/// key limited to [`COUNTED_RPM`] requests a minute.
async fn env(server: &str) -> Env {
    let process = format!("[server]\n{server}\n[admin]\nkey_sha256 = \"{}\"\n", sha(ADMIN));
    let policy = format!(
        "[[deployments]]\nname = \"d\"\nprovider = \"sim\"\nmodel = \"gpt-4o-mini\"\n\n\
         [[deployments]]\nname = \"c\"\nprovider = \"sim-anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\n\
         [[models]]\nname = \"fast\"\ndeployment = \"d\"\n\n[[models]]\nname = \"smart\"\ndeployment = \"c\"\n\n\
         [[tenants]]\nname = \"t\"\n\n\
         [[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{}\"\n\n\
         [[keys]]\nid = \"counted\"\ntenant = \"t\"\nsha256 = \"{}\"\nlimits = {{ rpm = {COUNTED_RPM}, burst_seconds = 60 }}\n",
        sha(KEY),
        sha(COUNTED)
    );
    start_with(sim(), &process, &policy).await
}

/// What came back on a raw connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// The head, lowercased.
    head: String,
    body: Value,
}

impl Answer {
    fn says_close(&self) -> bool {
        self.head.contains("\r\nconnection: close\r\n")
    }
}

/// Reads one response (head and a `content-length` body) from `stream`.
async fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before a full answer: {:?}", String::from_utf8_lossy(&bytes));
        bytes.extend_from_slice(&buf[..n]);
        let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&bytes[..end + 4]).to_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
        if bytes.len() < end + 4 + length {
            continue;
        }
        let status = head[9..12].parse().unwrap();
        let body = serde_json::from_slice(&bytes[end + 4..end + 4 + length]).unwrap_or(Value::Null);
        return Answer { status, head, body };
    }
}

/// Whether the server closes `stream` within `within` (reading and discarding until then).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let read_to_end = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.is_ok()
}

fn post_head(path: &str, auth: Option<&str>, length: usize) -> String {
    let auth = auth.map(|k| format!("authorization: Bearer {k}\r\n")).unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\n{auth}content-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_body_gets_408_and_a_closed_connection_at_its_deadline() {
    let env = env("body_read_timeout = \"1s\"\n").await;
    let mut stream = TcpStream::connect(env.gateway.addr()).await.unwrap();
    let started = Instant::now();
    stream.write_all(post_head("/v1/chat/completions", Some(KEY), 1_000).as_bytes()).await.unwrap();
    stream.write_all(b"{\"model\":").await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_answer(&mut stream)).await.expect("no deadline");
    let took = started.elapsed();
    assert_eq!((answer.status, &answer.body["error"]["code"]), (408, &json!("body_timeout")), "{answer:?}");
    assert!(answer.says_close(), "{}", answer.head);
    assert!(took >= Duration::from_millis(900), "the deadline is 1 s: {took:?}");
    assert!(closed_within(&mut stream, Duration::from_secs(5)).await, "the connection stays open");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_given_before_the_body_is_read_says_connection_close_and_closes() {
    let env = env("body_read_timeout = \"2s\"\n").await;
    let mut stream = TcpStream::connect(env.gateway.addr()).await.unwrap();
    stream.write_all(post_head("/v1/chat/completions", None, 100_000).as_bytes()).await.unwrap();
    stream.write_all(b"{\"model\":").await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), read_answer(&mut stream)).await.expect("no 401");
    assert_eq!(answer.status, 401, "{answer:?}");
    assert!(answer.says_close(), "the server closes, so it says so: {}", answer.head);
    assert!(closed_within(&mut stream, Duration::from_secs(6)).await, "closed once the body's deadline passed");
    // A request whose body was read whole keeps its connection.
    let mut stream = TcpStream::connect(env.gateway.addr()).await.unwrap();
    let body = chat("fast", 4, 8).to_string();
    stream.write_all(post_head("/v1/chat/completions", Some(KEY), body.len()).as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(!answer.says_close(), "{}", answer.head);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_writes_its_whole_oversized_body_first_still_reads_the_413() {
    let env = env("").await;
    let mut stream = TcpStream::connect(env.gateway.addr()).await.unwrap();
    let body = vec![b' '; 10 * 1024 * 1024];
    stream.write_all(post_head("/v1/chat/completions", Some(KEY), body.len()).as_bytes()).await.unwrap();
    // As Python's http.client and httpx do: the whole body, then the answer.
    stream.write_all(&body).await.expect("the body is drained, not cut off with a reset");
    let answer = read_answer(&mut stream).await;
    assert_eq!((answer.status, &answer.body["error"]["code"]), (413, &json!("body_too_large")), "{answer:?}");
    assert!(answer.says_close(), "{}", answer.head);
    env.shutdown().await;
}

fn count_body(words: usize) -> Value {
    json!({"model": "smart", "messages": [{"role": "user", "content": "hello ".repeat(words)}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_costs_a_request_of_the_callers_limits_and_is_capped() {
    let env = env("").await;
    for i in 0..COUNTED_RPM {
        let (status, _, body) = env.post("/v1/messages/count_tokens", COUNTED, &count_body(5)).await;
        assert_eq!(status, 200, "count {i}: {body}");
        assert!(body["input_tokens"].as_u64().unwrap() > 0);
    }
    let (status, headers, body) = env.post("/v1/messages/count_tokens", COUNTED, &count_body(5)).await;
    assert_eq!((status, &body["error"]["code"]), (429, &json!("rate_limit_exceeded")), "{body}");
    assert_eq!((&body["error"]["limiter"], &body["error"]["api_key_id"]), (&json!("rpm"), &json!("counted")));
    assert!(headers.contains_key("retry-after"));
    // The key's requests are spent for generation too; another key of the tenant is not.
    let (status, _, _) = env.post("/v1/chat/completions", COUNTED, &chat("fast", 4, 8)).await;
    assert_eq!(status, 429);
    let (status, _, _) = env.post("/v1/messages/count_tokens", KEY, &count_body(5)).await;
    assert_eq!(status, 200);
    // Past 1 MiB a count is refused unread, though max_body_bytes (4 MiB) allows more.
    let (status, _, body) = env.post("/v1/messages/count_tokens", KEY, &count_body(200_000)).await;
    assert_eq!((status, &body["error"]["code"]), (413, &json!("body_too_large")), "{body}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_tokens_without_a_key_is_refused_before_its_body_arrives() {
    let env = env("").await;
    let mut stream = TcpStream::connect(env.gateway.addr()).await.unwrap();
    // The head announces a body that never comes: only a refusal from the head can answer.
    stream.write_all(post_head("/v1/messages/count_tokens", None, 500_000).as_bytes()).await.unwrap();
    let answer =
        tokio::time::timeout(Duration::from_secs(5), read_answer(&mut stream)).await.expect("waited on the body");
    assert_eq!((answer.status, &answer.body["error"]["code"]), (401, &json!("invalid_api_key")), "{answer:?}");
    env.shutdown().await;
}

async fn login(env: &Env, key: &str) -> reqwest::Response {
    let url = format!("{}/dashboard/login", env.gateway.url());
    let request = env.http.post(url).header("content-type", "application/x-www-form-urlencoded");
    request.body(format!("key={key}")).send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_dashboard_logins_lock_the_address_out() {
    let env = env("").await;
    for attempt in 0..5 {
        assert_eq!(login(&env, "guess").await.status(), 401, "attempt {attempt}");
    }
    let locked = login(&env, "guess").await;
    assert_eq!(locked.status(), 429);
    let wait: u64 = locked.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(wait >= 1, "{wait}");
    let body: Value = locked.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_failed_logins", "{body}");
    assert_eq!(login(&env, ADMIN).await.status(), 429, "locked out, the right key is not even checked");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_per_peer_cap_are_closed_at_once() {
    let env = env("max_connections = 10\nmax_connections_per_peer = 2\n").await;
    let addr = env.gateway.addr();
    let mut first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    // Both are counted once the gateway accepted them (looked for a bounded while); the
    // third is closed unread.
    let accepted = common::Deadline::after(Duration::from_secs(5));
    while env.gateway.state().caps.open() < 2 && accepted.sleep(Duration::from_millis(5)).await {}
    let mut third = TcpStream::connect(addr).await.unwrap();
    assert!(closed_within(&mut third, Duration::from_secs(3)).await, "a third connection from one address stays open");
    first.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    assert_eq!(read_answer(&mut first).await.status, 200, "the counted connections are served");
    drop(first);
    let deadline = common::Deadline::after(Duration::from_secs(10));
    loop {
        let mut again = TcpStream::connect(addr).await.unwrap();
        if again.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.is_ok()
            && tokio::time::timeout(Duration::from_secs(2), healthz_status(&mut again)).await == Ok(Some(200))
        {
            break;
        }
        assert!(deadline.sleep(Duration::from_millis(100)).await, "a closed connection's place is never freed");
    }
    env.shutdown().await;
}

/// One client fills every connection slot with idle HTTP/2 sockets (the preface and an empty
/// SETTINGS frame, then nothing): others are refused only until the idle timeout closes them.
#[tokio::test(start_paused = true)]
async fn idle_h2_sockets_holding_every_slot_are_closed_and_others_served_again() {
    let env = env("max_connections = 8\nmax_connections_per_peer = 8\n").await;
    let addr = env.gateway.addr();
    let mut idle = Vec::new();
    for _ in 0..8 {
        let mut socket = TcpStream::connect(addr).await.unwrap();
        socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
        idle.push(socket);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut refused = TcpStream::connect(addr).await.unwrap();
    assert!(closed_within(&mut refused, Duration::from_secs(1)).await, "a ninth connection is refused while they hold");
    let held = Instant::now();
    for socket in &mut idle {
        assert!(closed_within(socket, Duration::from_secs(600)).await, "an idle h2 socket is never closed");
    }
    let bound = sluice_listener::idle::IDLE_TIMEOUT + sluice_listener::idle::GOAWAY_GRACE;
    assert!(held.elapsed() <= bound, "held for {:?}", held.elapsed());
    let mut next = TcpStream::connect(addr).await.unwrap();
    next.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    assert_eq!(read_answer(&mut next).await.status, 200, "served once the idle sockets are gone");
    env.shutdown().await;
}

/// The per-core listeners share their address within this process only: another bind of
/// an address something already listens on (a second sluice, or anything else) fails with
/// an error naming it, and succeeds once it is free.
#[tokio::test]
async fn a_second_server_on_a_served_address_is_refused_naming_it() {
    let first = sluice_listener::per_core::listeners("127.0.0.1:0".parse().unwrap(), 2).unwrap();
    let addr = first[0].local_addr().unwrap();
    let second = sluice_listener::per_core::listeners(addr, 2).unwrap_err();
    assert_eq!(second.kind(), std::io::ErrorKind::AddrInUse, "{second}");
    assert!(second.to_string().contains(&addr.to_string()), "the error names the address: {second}");
    // The first still takes connections.
    std::net::TcpStream::connect(addr).unwrap();

    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = other.local_addr().unwrap();
    let refused = sluice_listener::per_core::listeners(taken, 1).unwrap_err();
    assert!(refused.to_string().contains(&taken.to_string()), "{refused}");

    drop(first);
    assert_eq!(sluice_listener::per_core::listeners(addr, 2).unwrap().len(), 2, "a freed address is served again");
}

async fn healthz_status(stream: &mut TcpStream) -> Option<u16> {
    let mut buf = [0u8; 512];
    let n = stream.read(&mut buf).await.ok()?;
    std::str::from_utf8(buf.get(9..12)?).ok()?.parse().ok().filter(|_| n >= 12)
}

/// How many slow clients the storm opens: 500, or fewer when this process may not open
/// twice that many sockets (each connection is two descriptors here: client and server).
fn storm_size() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let wanted = hard.min(8192);
    if limit.current.is_some_and(|soft| soft < wanted) {
        let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(wanted), maximum: limit.maximum });
    }
    let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let fits = usize::try_from(soft.saturating_sub(300) / 2).unwrap_or(usize::MAX);
    if fits < 500 {
        eprintln!("the descriptor limit ({soft}) allows {fits} slow clients, not 500");
    }
    fits.min(500)
}

/// One slow client: a login form announced at 10,000 bytes, sent a byte a second until the
/// gateway closes the connection. Returns how long after its first byte that was.
async fn trickle(addr: SocketAddr, give_up: Duration) -> Option<Duration> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let head = "POST /dashboard/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-www-form-urlencoded\r\n\
                content-length: 10000\r\n\r\n";
    stream.write_all(head.as_bytes()).await.ok()?;
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while started.elapsed() < give_up {
        if stream.write_all(b"k").await.is_err() {
            return Some(started.elapsed());
        }
        let read = tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await;
        if let Ok(Ok(0) | Err(_)) = read {
            return Some(started.elapsed());
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_trickling_clients_are_cut_off_at_the_body_deadline_and_others_are_served() {
    let n = storm_size();
    let env = env("body_read_timeout = \"2s\"\n").await;
    let addr = env.gateway.addr();
    let give_up = Duration::from_secs(30);
    let storm: Vec<_> = (0..n).map(|_| tokio::spawn(trickle(addr, give_up))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Meanwhile a good request and a metered count are served.
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        let started = Instant::now();
        let (status, _, body) = env.post("/v1/chat/completions", KEY, &chat("fast", 4, 8)).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(status, 200, "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, _, _) = env.post("/v1/messages/count_tokens", COUNTED, &count_body(5)).await;
    assert_eq!(status, 200);
    eprintln!("slowest good request during {n} trickling clients: {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "a good request took {slowest:?}");
    let mut latest = Duration::ZERO;
    for (i, client) in storm.into_iter().enumerate() {
        let closed =
            client.await.unwrap().unwrap_or_else(|| panic!("slow client {i} still connected after {give_up:?}"));
        latest = latest.max(closed);
    }
    eprintln!("the last of {n} trickling clients was closed {latest:?} after its first byte");
    // The deadline is 2 s from the head; a generous margin for a busy machine.
    assert!(latest < Duration::from_secs(8), "{latest:?}");
    env.shutdown().await;
}
