//! A master, one replica and sentinels watching them, each a local `redis-server` (the
//! sentinels are the same binary with `--sentinel`), for tests of failover.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::sentinel::SentinelTarget;

use super::{LocalError, LocalRedis, free_port, sent, wait_until};

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "sluice-master";

/// One `redis-server --sentinel` process.
#[derive(Debug)]
struct SentinelProcess {
    port: u16,
    child: Child,
    dir: PathBuf,
}

/// A master, a replica of it and `n` sentinels, every process stopped when dropped.
#[derive(Debug)]
pub struct LocalSentinel {
    master: LocalRedis,
    replica: LocalRedis,
    sentinels: Vec<SentinelProcess>,
}

impl LocalSentinel {
    /// Starts a master, a replica that has synchronised with it, and `sentinels` sentinels
    /// that see both (a quorum of one: any sentinel may start a failover).
    ///
    /// # Errors
    /// When a process does not start or the replica or sentinels do not become ready.
    pub fn start(sentinels: usize) -> Result<Self, LocalError> {
        Self::start_on(sentinels, None)
    }

    /// The same, the master and the replica requiring `password` (`requirepass`, and
    /// `masterauth` for the replica and for a master demoted by a failover), the sentinels
    /// knowing it (`sentinel auth-pass`) but open themselves.
    ///
    /// # Errors
    /// As [`LocalSentinel::start`].
    pub fn start_with_password(sentinels: usize, password: &str) -> Result<Self, LocalError> {
        Self::start_on(sentinels, Some(password))
    }

    fn start_on(sentinels: usize, password: Option<&str>) -> Result<Self, LocalError> {
        let auth: Vec<&str> = password.map_or_else(Vec::new, |p| vec!["--requirepass", p, "--masterauth", p]);
        let master = LocalRedis::spawn(&auth)?;
        let of = master.port().to_string();
        let mut args = vec!["--replicaof", "127.0.0.1", &of];
        args.extend(&auth);
        let replica = LocalRedis::spawn(&args)?;
        let (port, login) = (replica.port(), password.map(|p| format!("AUTH {p}\r\n")).unwrap_or_default());
        wait_until("replica in sync", || info(port, "replication", &login).contains("master_link_status:up"))?;
        let sentinels =
            (0..sentinels).map(|_| SentinelProcess::start(master.port(), password)).collect::<Result<Vec<_>, _>>()?;
        let group = Self { master, replica, sentinels };
        for s in &group.sentinels {
            let port = s.port;
            wait_until("sentinel sees the replica", || info(port, "sentinel", "").contains("slaves=1"))?;
        }
        Ok(group)
    }

    /// Where a store finds the master: these sentinels and [`MASTER_NAME`].
    #[must_use]
    pub fn target(&self) -> SentinelTarget {
        let nodes = self.sentinels.iter().map(|s| format!("redis://127.0.0.1:{}", s.port)).collect();
        SentinelTarget { nodes, master: MASTER_NAME.into(), db: 0, username: None, password: None }
    }

    /// The master's port as started, and the replica's.
    #[must_use]
    pub fn ports(&self) -> (u16, u16) {
        (self.master.port(), self.replica.port())
    }

    /// The port the first sentinel names as master now.
    #[must_use]
    pub fn master_port(&self) -> Option<u16> {
        let port = self.sentinels.first()?.port;
        let command = format!("SENTINEL get-master-addr-by-name {MASTER_NAME}\r\n");
        let stream = sent(port, command.as_bytes())?;
        // `*2`, `$9`, `127.0.0.1`, `$5`, the port.
        BufReader::new(stream).lines().nth(4)?.ok()?.trim().parse().ok()
    }

    /// Stops the master abruptly, as a crash would.
    pub fn kill_master(&mut self) {
        self.master.kill();
    }
}

/// `INFO section` of the server on `port` (after `login`, an inline `AUTH` or nothing),
/// empty if it did not answer.
fn info(port: u16, section: &str, login: &str) -> String {
    let Some(stream) = sent(port, format!("{login}INFO {section}\r\n").as_bytes()) else { return String::new() };
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    if !login.is_empty() {
        // `+OK` to the `AUTH`.
        let _ = reader.read_line(&mut header);
        header.clear();
    }
    let _ = reader.read_line(&mut header);
    // A bulk string: `$LENGTH`, then that many bytes.
    let length = header.trim().trim_start_matches('$').parse::<usize>().unwrap_or(0);
    let mut body = vec![0; length];
    match reader.read_exact(&mut body) {
        Ok(()) => String::from_utf8_lossy(&body).into_owned(),
        Err(_) => String::new(),
    }
}

impl SentinelProcess {
    fn start(master: u16, password: Option<&str>) -> Result<Self, LocalError> {
        let spawn_error =
            |e: std::io::Error| LocalError::Spawn { program: "redis-server --sentinel", reason: e.to_string() };
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("sluice-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(spawn_error)?;
        // Fast detection (1 s down) so a test sees the failover within seconds.
        let config = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {MASTER_NAME} 127.0.0.1 {master} 1\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\nsentinel failover-timeout {MASTER_NAME} 5000\n{}",
            dir.display(),
            password.map(|p| format!("sentinel auth-pass {MASTER_NAME} {p}\n")).unwrap_or_default(),
        );
        let file = dir.join("sentinel.conf");
        std::fs::write(&file, config).map_err(spawn_error)?;
        let child = Command::new("redis-server")
            .arg(&file)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(spawn_error)?;
        let process = Self { port, child, dir };
        wait_until("sentinel", || super::ping(port))?;
        Ok(process)
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
