//! `sluice bench listener`: what connections that never authenticate cost a `sluice serve`
//! process on its defaults, and whether normal clients are served beside them.
//!
//! First the memory: for each kind of idle connection (HTTP/1.1 sending nothing; HTTP/2
//! sending its preface and an empty SETTINGS frame; HTTP/1.1 stopping 16 KiB into a request
//! head), a fresh gateway process is started and `--connections` of them are opened from
//! many loopback addresses (each address below the per-peer cap, as many clients would
//! be), and the gateway's RSS is read while they are all open: the cost per connection is
//! the growth over the RSS before, divided by the connections it held.
//!
//! Then the service: closed-loop clients (half on kept-alive connections, half opening a
//! new connection for every request) run alone, then again while `--idle-h2` HTTP/2
//! connections sit idle and `--partial-prefaces` sockets hold the first 16 bytes of the
//! preface, each reopened as soon as the gateway closes it, so they are open throughout.
//! Both runs report the requests served and failed, their latency and the gateway's CPU.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use serde::Serialize;
use sluice_sim::config::{Completion, Limits};
use sluice_sim::{ModelConfig, SimConfig, SimProvider};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::client::HttpClient;
use crate::process::GatewayProcess;
use crate::stats::{Samples, Summary};

/// HTTP/2's connection preface (RFC 9113, section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
const EMPTY_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
/// Bytes of a request head a "partial head" connection sends before it stops.
const PARTIAL_HEAD: usize = 16 * 1024;
/// Connections opened from one loopback address: half the gateway's default per-peer cap.
const PER_ADDRESS: usize = 500;
/// Connects in flight at once while opening.
const OPENING: usize = 128;
/// The kernel's clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, fixed by Linux's ABI).
const USER_HZ: f64 = 100.0;

/// Arguments of `sluice bench listener`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListenerArgs {
    /// Idle connections opened for each memory measurement.
    #[arg(long, default_value_t = 10_000)]
    pub connections: usize,
    /// Idle HTTP/2 connections held open during the service run.
    #[arg(long, default_value_t = 500)]
    pub idle_h2: usize,
    /// Sockets holding a partial HTTP/2 preface during the service run.
    #[arg(long, default_value_t = 3_500)]
    pub partial_prefaces: usize,
    /// Closed-loop clients of the service runs.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// How long each service run lasts.
    #[arg(long, default_value = "20s")]
    pub duration: humantime::Duration,
    /// The `sluice` binary to start (default: this one).
    #[arg(long)]
    pub binary: Option<std::path::PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
}

/// What one kind of idle connection cost.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    /// The kind.
    pub kind: &'static str,
    /// Connections opened.
    pub opened: usize,
    /// Of which the gateway still held when its RSS was read.
    pub held: usize,
    /// RSS before they were opened, KiB.
    pub rss_before_kib: u64,
    /// Highest RSS while they were open, KiB.
    pub rss_with_kib: u64,
    /// Growth per held connection, KiB.
    pub per_connection_kib: f64,
}

/// One service run.
#[derive(Debug, Clone, Serialize)]
pub struct Service {
    /// What was open beside the clients.
    pub beside: String,
    /// Requests answered 200.
    pub served: u64,
    /// Requests that failed (any other answer, or no answer).
    pub failed: u64,
    /// Latency of the requests served.
    pub latency: Summary,
    /// The gateway's CPU over the run, in cores.
    pub gateway_cpu: f64,
    /// Hostile connections open when sampled, fewest seen (after the first two seconds).
    pub hostile_open_min: u64,
    /// Hostile connections the gateway closed during the run (each reopened at once).
    pub hostile_closed: u64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct ListenerReport {
    /// Memory per kind of idle connection.
    pub memory: Vec<Memory>,
    /// The service runs: alone, then beside the hostile connections.
    pub service: Vec<Service>,
}

/// Runs the benchmark and prints its result.
///
/// # Errors
/// When the simulator or the gateway cannot start, or connections cannot be opened.
pub async fn run(args: ListenerArgs) -> anyhow::Result<()> {
    let report = measure(&args).await?;
    let text = if args.json { serde_json::to_string_pretty(&report)? } else { summary(&report) };
    print(&text);
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the benchmark's result is its output")]
fn print(text: &str) {
    println!("{text}");
}

fn summary(r: &ListenerReport) -> String {
    let mut out = String::from("memory of idle unauthenticated connections:\n");
    for m in &r.memory {
        out += &format!(
            "  {:<18} {} opened, {} held: RSS {} KiB -> {} KiB, {:.1} KiB per connection\n",
            m.kind, m.opened, m.held, m.rss_before_kib, m.rss_with_kib, m.per_connection_kib
        );
    }
    out += "service:\n";
    for s in &r.service {
        let ms = |v: Option<f64>| v.map_or_else(|| "–".into(), |v| format!("{v:.2}"));
        out += &format!(
            "  {:<45} served {}, failed {}, p50 {} ms, p99 {} ms, max {} ms, gateway CPU {:.2} cores, hostile open >= {}, closed and reopened {}\n",
            s.beside,
            s.served,
            s.failed,
            ms(s.latency.p50_ms),
            ms(s.latency.p99_ms),
            ms(s.latency.max_ms),
            s.gateway_cpu,
            s.hostile_open_min,
            s.hostile_closed,
        );
    }
    out
}

/// Starts the simulator and one `sluice serve`, and measures.
///
/// # Errors
/// When a piece cannot start or connections cannot be opened.
pub async fn measure(args: &ListenerArgs) -> anyhow::Result<ListenerReport> {
    raise_fd_limit();
    let model = ModelConfig {
        completion: Completion::Fixed { tokens: 8 },
        ..ModelConfig::openai("gpt-4o-mini").with_limits(Limits::default())
    };
    let sim = SimProvider::start(SimConfig { models: vec![model], ..SimConfig::default() }).await?;
    let binary = crate::process::sluice_binary(args.binary.as_deref())?;
    let config = crate::fleet::config(&sim.url(), "", "rpm = 1000000, tpm = 1000000000", "30s");
    let mut gateway = tokio::task::spawn_blocking(move || GatewayProcess::start(&binary, &config)).await??;
    let mut memory = Vec::new();
    for kind in [Kind::H1Idle, Kind::H2Idle, Kind::H1PartialHead] {
        // Each kind on a fresh process, so that no kind reuses memory another left free.
        gateway = restart(gateway).await?;
        let target: SocketAddr = gateway.url().trim_start_matches("http://").parse()?;
        Clients::new(gateway.url(), args.clients)?.warm().await;
        memory.push(one_kind(&gateway, target, kind, args.connections).await?);
    }
    gateway = restart(gateway).await?;
    let target: SocketAddr = gateway.url().trim_start_matches("http://").parse()?;
    let clients = Clients::new(gateway.url(), args.clients)?;
    clients.warm().await;

    let duration = Duration::from_secs_f64(args.duration.as_secs_f64());
    let alone = clients.run(&gateway, duration, &Hostile::none()).await;
    let hostile = Hostile::open(target, args.idle_h2, args.partial_prefaces);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut beside = clients.run(&gateway, duration, &hostile).await;
    beside.beside = format!("{} idle h2 + {} partial prefaces", args.idle_h2, args.partial_prefaces);
    hostile.stop().await;
    drop(gateway);
    sim.shutdown().await;
    Ok(ListenerReport { memory, service: vec![alone, beside] })
}

/// The same gateway started again (on a new port).
async fn restart(mut gateway: GatewayProcess) -> anyhow::Result<GatewayProcess> {
    tokio::task::spawn_blocking(move || gateway.restart().map(|()| gateway)).await?
}

/// A kind of connection that never authenticates.
#[derive(Debug, Clone, Copy)]
enum Kind {
    H1Idle,
    H2Idle,
    H1PartialHead,
    PartialPreface,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::H1Idle => "h1 idle",
            Self::H2Idle => "h2 preface+SETTINGS",
            Self::H1PartialHead => "h1 16 KiB of a head",
            Self::PartialPreface => "partial preface",
        }
    }

    /// What the connection sends before it falls silent.
    fn bytes(self) -> Vec<u8> {
        match self {
            Self::H1Idle => Vec::new(),
            Self::H2Idle => [PREFACE, EMPTY_SETTINGS].concat(),
            Self::H1PartialHead => {
                let mut head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: sluice\r\n".to_vec();
                // Eight long header lines: few headers, many bytes.
                for n in 0..8 {
                    head.extend_from_slice(format!("x-padding-{n}: {}\r\n", "a".repeat(PARTIAL_HEAD / 8)).as_bytes());
                }
                head
            }
            Self::PartialPreface => PREFACE.get(..16).unwrap_or_default().to_vec(),
        }
    }
}

/// The `n`th loopback source address, [`PER_ADDRESS`] connections each (127.0.1.x on).
fn source(n: usize) -> IpAddr {
    let block = u32::try_from(n / PER_ADDRESS).unwrap_or(0);
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 1, 1)) + block))
}

/// Opens a connection from `from` to `target` and sends `bytes`.
async fn open(from: IpAddr, target: SocketAddr, bytes: &[u8]) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    let mut stream = socket.connect(target).await?;
    if !bytes.is_empty() {
        stream.write_all(bytes).await?;
    }
    Ok(stream)
}

/// Whether the peer has not closed `stream`: what it sent (an HTTP/2 server's SETTINGS) is
/// read and dropped until a read would wait (open) or finds the end (closed).
fn still_open(stream: &TcpStream) -> bool {
    let mut sink = [0_u8; 1024];
    loop {
        match stream.try_read(&mut sink) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

async fn one_kind(gateway: &GatewayProcess, target: SocketAddr, kind: Kind, n: usize) -> anyhow::Result<Memory> {
    let before = gateway.rss_kib().context("the gateway's RSS")?;
    let bytes = Arc::new(kind.bytes());
    let gate = Arc::new(tokio::sync::Semaphore::new(OPENING));
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let (bytes, gate) = (Arc::clone(&bytes), Arc::clone(&gate));
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await.ok()?;
            open(source(i), target, &bytes).await.ok()
        });
    }
    let mut streams = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        streams.extend(done.ok().flatten());
    }
    let opened = streams.len();
    let mut with = before;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        with = with.max(gateway.rss_kib().unwrap_or(0));
    }
    let held = streams.iter().filter(|s| still_open(s)).count();
    drop(streams);
    #[expect(clippy::cast_precision_loss, reason = "KiB and counts far below 2^52")]
    let per_connection_kib = with.saturating_sub(before) as f64 / held.max(1) as f64;
    Ok(Memory { kind: kind.name(), opened, held, rss_before_kib: before, rss_with_kib: with, per_connection_kib })
}

/// Hostile connections held open: each reopened as soon as the gateway closes it.
struct Hostile {
    open: Arc<AtomicU64>,
    closed: Arc<AtomicU64>,
    stop: Arc<tokio::sync::Notify>,
    tasks: JoinSet<()>,
}

impl Hostile {
    fn none() -> Self {
        Self {
            open: Arc::default(),
            closed: Arc::default(),
            stop: Arc::new(tokio::sync::Notify::new()),
            tasks: JoinSet::new(),
        }
    }

    fn open(target: SocketAddr, idle_h2: usize, partial: usize) -> Self {
        let mut hostile = Self::none();
        let kinds =
            std::iter::repeat_n(Kind::H2Idle, idle_h2).chain(std::iter::repeat_n(Kind::PartialPreface, partial));
        for (i, kind) in kinds.enumerate() {
            let (held_now, closed, stop) =
                (Arc::clone(&hostile.open), Arc::clone(&hostile.closed), Arc::clone(&hostile.stop));
            hostile.tasks.spawn(async move {
                let bytes = kind.bytes();
                let stopped = stop.notified();
                tokio::pin!(stopped);
                // The first opens are spread over a second; a closed one is reopened at once.
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..1_000))).await;
                loop {
                    let held = async {
                        let Ok(mut stream) = open(source(i), target, &bytes).await else {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            return;
                        };
                        held_now.fetch_add(1, Ordering::Relaxed);
                        // Read (and drop) whatever comes, until the gateway closes it.
                        let mut sink = [0_u8; 1024];
                        while matches!(tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await, Ok(n) if n > 0) {}
                        held_now.fetch_sub(1, Ordering::Relaxed);
                        closed.fetch_add(1, Ordering::Relaxed);
                    };
                    tokio::select! {
                        () = &mut stopped => return,
                        () = held => {}
                    }
                }
            });
        }
        hostile
    }

    fn open_now(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    async fn stop(mut self) {
        self.stop.notify_waiters();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// The normal clients.
struct Clients {
    kept: HttpClient,
    uri: http::Uri,
    count: usize,
}

impl Clients {
    fn new(url: &str, count: usize) -> anyhow::Result<Self> {
        Ok(Self { kept: HttpClient::new(), uri: format!("{url}/v1/chat/completions").parse()?, count: count.max(2) })
    }

    async fn warm(&self) {
        for _ in 0..20 {
            let _ = self.kept.post_json(&self.uri, Some(crate::fleet::KEY), body()).await;
        }
    }

    async fn run(&self, gateway: &GatewayProcess, duration: Duration, hostile: &Hostile) -> Service {
        let cpu_before = cpu_ticks(gateway.pid());
        let started = Instant::now();
        let end = started + duration;
        let mut tasks = JoinSet::new();
        for n in 0..self.count {
            // Half keep their connection, half open a new one for every request.
            let client = if n % 2 == 0 { self.kept.clone() } else { HttpClient::one_connection_per_request() };
            let uri = self.uri.clone();
            tasks.spawn(async move { closed_loop(&client, &uri, end).await });
        }
        let mut hostile_open_min = u64::MAX;
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if started.elapsed() > Duration::from_secs(2) {
                hostile_open_min = hostile_open_min.min(hostile.open_now());
            }
        }
        let (mut served, mut failed, mut samples) = (0, 0, Samples::default());
        while let Some(done) = tasks.join_next().await {
            let (s, f, l) = done.unwrap_or_default();
            served += s;
            failed += f;
            samples.merge(l);
        }
        let cpu = cpu_ticks(gateway.pid()).saturating_sub(cpu_before);
        #[expect(clippy::cast_precision_loss, reason = "ticks far below 2^52")]
        let gateway_cpu = cpu as f64 / USER_HZ / started.elapsed().as_secs_f64();
        Service {
            beside: "nothing".into(),
            served,
            failed,
            latency: samples.summary(),
            gateway_cpu,
            hostile_open_min: if hostile_open_min == u64::MAX { 0 } else { hostile_open_min },
            hostile_closed: hostile.closed.load(Ordering::Relaxed),
        }
    }
}

async fn closed_loop(client: &HttpClient, uri: &http::Uri, end: Instant) -> (u64, u64, Samples) {
    let (mut served, mut failed, mut samples) = (0, 0, Samples::default());
    while Instant::now() < end {
        let sent = Instant::now();
        let reply =
            tokio::time::timeout(Duration::from_secs(10), client.post_json(uri, Some(crate::fleet::KEY), body()));
        match reply.await {
            Ok(Ok(reply)) if reply.status == 200 => {
                served += 1;
                samples.record(sent.elapsed());
            }
            _ => failed += 1,
        }
    }
    (served, failed, samples)
}

fn body() -> Bytes {
    Bytes::from_static(br#"{"model":"chat","messages":[{"role":"user","content":"hello"}],"max_tokens":8}"#)
}

/// User plus system CPU ticks of process `pid` (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    cpu_ticks_of(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

fn cpu_ticks_of(stat: &str) -> u64 {
    // The command name (field 2) may hold spaces; the fields after it start past its ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    tick(11) + tick(12)
}

/// Raises this process's open-file limit to its hard limit: the benchmark holds thousands
/// of sockets.
fn raise_fd_limit() {
    let nofile = rustix::process::Resource::Nofile;
    let limit = rustix::process::getrlimit(nofile);
    if let Some(hard) = limit.maximum {
        let _ =
            rustix::process::setrlimit(nofile, rustix::process::Rlimit { current: Some(hard), maximum: Some(hard) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_stay_below_the_per_peer_cap_and_on_loopback() {
        assert_eq!(source(0), source(PER_ADDRESS - 1));
        assert_ne!(source(0), source(PER_ADDRESS));
        assert!(source(10_000).is_loopback());
        assert_eq!(Kind::PartialPreface.bytes(), b"PRI * HTTP/2.0\r\n");
        assert!(Kind::H1PartialHead.bytes().len() >= PARTIAL_HEAD);
        assert!(!Kind::H1PartialHead.bytes().windows(4).any(|w| w == b"\r\n\r\n"), "the head never ends");
    }

    #[test]
    fn cpu_ticks_read_past_a_command_name_with_spaces() {
        let stat = "4242 (sluice serve) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 37 0 0 20 0 9";
        assert_eq!(cpu_ticks_of(stat), 287);
        assert_eq!(cpu_ticks_of("garbage"), 0);
    }
}
