//! Local `redis-server` processes on 127.0.0.1, for tests, benchmarks and the demo's
//! distributed variant: a standalone server, a small cluster or a master watched by sentinels, each on free ports, each
//! stopped when dropped. Needs `redis-server` (and `redis-cli` for a cluster) on PATH.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod sentinel;
pub use sentinel::{LocalSentinel, MASTER_NAME};

/// Why a local server did not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// `redis-server` or `redis-cli` is missing or failed to start.
    #[error("could not run {program}: {reason} (install redis-server, e.g. `apt-get install redis-server`)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// The server never answered PING or the cluster never became ready.
    #[error("redis at {0} did not become ready")]
    NotReady(String),
}

/// One `redis-server` process.
#[derive(Debug)]
pub struct LocalRedis {
    port: u16,
    child: Child,
    dir: PathBuf,
    /// The arguments it was started with beyond port, bind, persistence and directory.
    extra: Vec<String>,
    /// Whether the port speaks TLS only.
    tls: bool,
}

/// PEM files for a TLS-only server: its certificate chain and key, and the CA that clients
/// are verified against (when they present a certificate).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The server's certificate (PEM).
    pub cert_file: PathBuf,
    /// The server's private key (PEM).
    pub key_file: PathBuf,
    /// The CA file (PEM).
    pub ca_file: PathBuf,
}

fn free_port() -> Result<u16, LocalError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| LocalError::Spawn { program: "redis-server", reason: format!("no free port: {e}") })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| LocalError::Spawn { program: "redis-server", reason: e.to_string() })
}

/// A connection to the local server on `port` that `command` (an inline command line) was
/// sent on, its reply to be read within half a second; `None` if either failed.
fn sent(port: u16, command: &[u8]) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    stream.write_all(command).ok()?;
    Some(stream)
}

/// Ready as far as a TLS-only port can tell without a handshake: it accepts connections.
fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// How long a local server (or cluster) is given to become ready.
const READY_WITHIN: Duration = Duration::from_secs(30);

fn ping(port: u16) -> bool {
    let Some(stream) = sent(port, b"PING\r\n") else { return false };
    let mut line = String::new();
    // A server that wants a password answers `-NOAUTH`: it is up all the same.
    BufReader::new(stream).read_line(&mut line).is_ok() && (line.starts_with("+PONG") || line.starts_with("-NOAUTH"))
}

/// Waits for `ready` at least [`READY_WITHIN`] (polling every 50 ms): a cluster's nodes
/// agree on their slots in a second on an idle machine, and in many more on a loaded one.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), LocalError> {
    let polls = READY_WITHIN.as_millis() / 50;
    for _ in 0..polls {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(LocalError::NotReady(what.to_owned()))
}

impl LocalRedis {
    /// Starts a standalone server without persistence on a free port.
    ///
    /// # Errors
    /// When `redis-server` is missing or does not answer within 30 s.
    pub fn start() -> Result<Self, LocalError> {
        Self::spawn(&[])
    }

    /// Starts a standalone server without persistence that requires `password`
    /// (`requirepass`: the `default` user's password) on a free port.
    ///
    /// # Errors
    /// When `redis-server` is missing or does not answer within 30 s.
    pub fn start_with_password(password: &str) -> Result<Self, LocalError> {
        Self::spawn(&["--requirepass", password])
    }

    /// Starts a standalone server that speaks only TLS (no plain port), with `tls`; clients
    /// need not present a certificate. Its URL is `rediss://127.0.0.1:PORT`: the certificate
    /// should name that IP address.
    ///
    /// # Errors
    /// When `redis-server` is missing, was built without TLS, or does not listen within 30 s.
    pub fn start_tls(tls: &ServerTls) -> Result<Self, LocalError> {
        let port = free_port()?.to_string();
        let files = [&tls.cert_file, &tls.key_file, &tls.ca_file].map(|p| p.display().to_string());
        let [cert, key, ca] = files.each_ref().map(String::as_str);
        let extra = ["--tls-port", &port, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca];
        Self::spawn_on(true, &[&extra[..], &["--tls-auth-clients", "no"]].concat())
    }

    fn spawn(extra: &[&str]) -> Result<Self, LocalError> {
        Self::spawn_on(false, extra)
    }

    fn spawn_on(tls: bool, extra: &[&str]) -> Result<Self, LocalError> {
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("sluice-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| LocalError::Spawn { program: "redis-server", reason: e.to_string() })?;
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        // A TLS server listens on the `--tls-port` among `extra`, its plain port closed.
        let port = if tls { tls_port(&extra).unwrap_or(port) } else { port };
        let child = run_server(port, tls, &dir, &extra)?;
        let server = Self { port, child, dir, extra, tls };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&self) -> Result<(), LocalError> {
        let port = self.port;
        if self.tls { wait_until(&self.url(), || listening(port)) } else { wait_until(&self.url(), || ping(port)) }
    }

    /// The server's port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://127.0.0.1:PORT` for a TLS server.
    #[must_use]
    pub fn url(&self) -> String {
        if self.tls { format!("rediss://127.0.0.1:{}", self.port) } else { format!("redis://127.0.0.1:{}", self.port) }
    }

    /// Stops the server abruptly (as a crash would); [`LocalRedis::restart`] brings it back
    /// on the same port, empty.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Freezes the server (`SIGSTOP`), as a stalled host or a long pause would: connections
    /// stay open and what clients send waits in the socket, to be run at [`thaw`](Self::thaw).
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn freeze(&self) -> std::io::Result<()> {
        self.signal("-STOP")
    }

    /// Resumes a frozen server (`SIGCONT`).
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn thaw(&self) -> std::io::Result<()> {
        self.signal("-CONT")
    }

    fn signal(&self, which: &str) -> std::io::Result<()> {
        let status = Command::new("kill").arg(which).arg(self.child.id().to_string()).status()?;
        if status.success() { Ok(()) } else { Err(std::io::Error::other(format!("kill {which} failed: {status}"))) }
    }

    /// Starts a killed server again on the same port.
    ///
    /// # Errors
    /// When it does not come back within 30 s.
    pub fn restart(&mut self) -> Result<(), LocalError> {
        self.kill();
        self.child = run_server(self.port, self.tls, &self.dir, &self.extra)?;
        self.wait_ready()
    }
}

fn tls_port(extra: &[String]) -> Option<u16> {
    let at = extra.iter().position(|a| a == "--tls-port")?;
    extra.get(at + 1)?.parse().ok()
}

/// `redis-server` on `port` (plain, or closed with `tls` and the TLS port in `extra`),
/// without persistence, its files in `dir`.
fn run_server(port: u16, tls: bool, dir: &std::path::Path, extra: &[String]) -> Result<Child, LocalError> {
    let plain = if tls { "0".to_owned() } else { port.to_string() };
    Command::new("redis-server")
        .args(["--port", &plain, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LocalError::Spawn { program: "redis-server", reason: e.to_string() })
}

impl Drop for LocalRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of `masters` primaries, no replicas.
#[derive(Debug)]
pub struct LocalCluster {
    nodes: Vec<LocalRedis>,
}

impl LocalCluster {
    /// Starts `masters` cluster-enabled servers and joins them into one cluster.
    ///
    /// # Errors
    /// When a server does not start or the cluster does not reach `cluster_state:ok`.
    pub fn start(masters: usize) -> Result<Self, LocalError> {
        Self::start_on(masters, None)
    }

    /// The same, every node requiring `password` (`requirepass`, and `masterauth` between
    /// nodes).
    ///
    /// # Errors
    /// As [`LocalCluster::start`].
    pub fn start_with_password(masters: usize, password: &str) -> Result<Self, LocalError> {
        Self::start_on(masters, Some(password))
    }

    /// Tries [`Self::form`] up to three times: on a loaded machine a node's port or bus
    /// port can be taken between being found free and being bound.
    fn start_on(masters: usize, password: Option<&str>) -> Result<Self, LocalError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match Self::form(masters, password) {
                Err(e) if tries < 3 => tracing::warn!(error = %e, "a local cluster did not form; trying again"),
                formed => return formed,
            }
        }
    }

    fn form(masters: usize, password: Option<&str>) -> Result<Self, LocalError> {
        let mut nodes = Vec::with_capacity(masters);
        for _ in 0..masters {
            // The cluster bus on a free port of its own: the default (port + 10,000) may be
            // taken, or past 65,535.
            let bus = free_port()?.to_string();
            let mut args = vec!["--cluster-enabled", "yes", "--cluster-node-timeout", "2000", "--cluster-port", &bus];
            if let Some(password) = password {
                args.extend(["--requirepass", password, "--masterauth", password]);
            }
            nodes.push(LocalRedis::spawn(&args)?);
        }
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let mut create = Command::new("redis-cli");
        if let Some(password) = password {
            create.args(["-a", password, "--no-auth-warning"]);
        }
        create.arg("--cluster").arg("create").args(&addresses).args(["--cluster-replicas", "0", "--cluster-yes"]);
        let output = create
            .stdin(Stdio::null())
            .output()
            .map_err(|e| LocalError::Spawn { program: "redis-cli", reason: e.to_string() })?;
        if !output.status.success() {
            let reason = String::from_utf8_lossy(&output.stdout).into_owned();
            return Err(LocalError::Spawn { program: "redis-cli", reason });
        }
        let cluster = Self { nodes };
        for node in &cluster.nodes {
            let port = node.port;
            wait_until(&node.url(), || cluster_ok(port, password))?;
        }
        Ok(cluster)
    }

    /// Seed URLs of every node.
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(LocalRedis::url).collect()
    }
}

fn cluster_ok(port: u16, password: Option<&str>) -> bool {
    // `AUTH` first when the node wants a password: its `+OK` line is read and skipped.
    let auth = password.map(|p| format!("AUTH {p}\r\n")).unwrap_or_default();
    let Some(stream) = sent(port, format!("{auth}CLUSTER INFO\r\n").as_bytes()) else { return false };
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if password.is_some() && (reader.read_line(&mut line).is_err() || !line.starts_with("+OK")) {
        return false;
    }
    let mut buffer = [0u8; 4096];
    let n = reader.read(&mut buffer).unwrap_or(0);
    String::from_utf8_lossy(&buffer[..n]).contains("cluster_state:ok")
}
