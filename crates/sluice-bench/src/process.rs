//! `sluice serve` as a child process: what the soak, the chaos runner and the multi-process
//! tests start, measure (RSS), signal (SIGHUP), kill (SIGKILL, as a crash) and restart.
//!
//! The process gets its config as a temporary file, the provider key through
//! [`PROVIDER_KEY_ENV`], and, unless the config has a `[jobs]` table, an embedded job store
//! of its own beside it. It is killed and reaped when dropped, and its files removed.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

/// The environment variable carrying the provider key; configs name it in `api_key_env`.
pub const PROVIDER_KEY_ENV: &str = "SLUICE_CHILD_PROVIDER_KEY";
/// The key the children present to the simulated provider (which accepts any).
const PROVIDER_KEY: &str = "sk-sim-provider";
/// What `sluice serve` prints on standard output once it accepts connections.
const LISTENING: &str = "sluice listening on ";
/// The line after it: where the admin plane (`/admin`, `/metrics`) is served.
const ADMIN_LISTENING: &str = "sluice admin listening on ";

/// A file name in the temporary directory, unique to this process and call.
#[must_use]
pub fn temp_path(what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("sluice-child-{}-{n}-{what}", std::process::id()))
}

/// One running `sluice serve`.
#[derive(Debug)]
pub struct GatewayProcess {
    url: String,
    admin_url: String,
    binary: PathBuf,
    child: Child,
    /// Kept open: a closed pipe would fail the child's later writes to standard output.
    stdout: Option<BufReader<ChildStdout>>,
    log: PathBuf,
    config: PathBuf,
    /// The `[jobs]` table added to the config (empty when the config has its own).
    jobs: String,
    jobs_file: Option<PathBuf>,
}

impl GatewayProcess {
    /// Starts `binary serve --config FILE` with `config` and waits until it listens.
    /// Blocks: call it from `spawn_blocking` or `block_in_place` in async code.
    ///
    /// `SLUICE_LOG` is passed on from `SLUICE_CHILD_LOG` (default `warn`); the child's
    /// standard error goes to a log file ([`stderr`](Self::stderr)).
    ///
    /// # Errors
    /// When the process cannot be spawned or exits before it listens.
    pub fn start(binary: &Path, config: &str) -> anyhow::Result<Self> {
        let (jobs, jobs_file) = if config.contains("[jobs]") {
            (String::new(), None)
        } else {
            let file = temp_path("jobs.redb");
            (format!("[jobs]\npath = \"{}\"\n", file.display()), Some(file))
        };
        let config_file = temp_path("sluice.toml");
        std::fs::write(&config_file, format!("{jobs}{config}"))?;
        let (child, log) = spawn(binary, &config_file)?;
        let mut process = Self {
            url: String::new(),
            admin_url: String::new(),
            binary: binary.to_owned(),
            child,
            stdout: None,
            log,
            config: config_file,
            jobs,
            jobs_file,
        };
        process.await_listening()?;
        Ok(process)
    }

    /// Kills this process (if alive) and starts it again on the same config and job store;
    /// it listens on a new port ([`url`](Self::url)). Blocks like [`start`](Self::start).
    ///
    /// # Errors
    /// When the new process cannot be spawned or exits before it listens.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let (child, log) = spawn(&self.binary, &self.config)?;
        let _ = std::fs::remove_file(&self.log);
        (self.child, self.log, self.stdout) = (child, log, None);
        self.await_listening()
    }

    fn await_listening(&mut self) -> anyhow::Result<()> {
        let stdout = self.child.stdout.take().context("the child's standard output")?;
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let Some(url) = line.trim().strip_prefix(LISTENING) else {
            let _ = self.child.wait();
            anyhow::bail!("sluice serve did not start: {line:?}\n{}", self.stderr());
        };
        self.url = url.to_owned();
        line.clear();
        reader.read_line(&mut line)?;
        let admin = line.trim().strip_prefix(ADMIN_LISTENING);
        self.admin_url = admin.with_context(|| format!("no admin listener line: {line:?}"))?.to_owned();
        self.stdout = Some(reader);
        Ok(())
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The admin plane's base URL (`/admin`, `/metrics`): a listener of its own on a free
    /// port of 127.0.0.1 (`SLUICE_ADMIN_LISTEN`).
    #[must_use]
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }

    /// The process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size from `/proc/<pid>/status` (`VmRSS`), KiB; `None` off Linux or once dead.
    #[must_use]
    pub fn rss_kib(&self) -> Option<u64> {
        rss_kib_of(&format!("/proc/{}/status", self.pid()))
    }

    /// Rewrites the config file and sends SIGHUP: the gateway reloads it.
    ///
    /// # Errors
    /// When the file cannot be written or the signal not sent.
    pub fn reload(&self, config: &str) -> anyhow::Result<()> {
        std::fs::write(&self.config, format!("{}{config}", self.jobs))?;
        let status = Command::new("kill").arg("-HUP").arg(self.pid().to_string()).status()?;
        anyhow::ensure!(status.success(), "could not signal the gateway");
        Ok(())
    }

    /// What the process logged so far.
    #[must_use]
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL, as a crash would, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.config);
        if let Some(file) = &self.jobs_file {
            remove_job_store(file);
        }
    }
}

fn spawn(binary: &Path, config: &Path) -> anyhow::Result<(Child, PathBuf)> {
    let log = temp_path("gateway.log");
    let child = Command::new(binary)
        .arg("serve")
        .arg("--config")
        .arg(config)
        .env("SLUICE_LOG", std::env::var("SLUICE_CHILD_LOG").unwrap_or_else(|_| "warn".into()))
        .env(PROVIDER_KEY_ENV, PROVIDER_KEY)
        .env("SLUICE_ADMIN_LISTEN", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("spawning {}", binary.display()))?;
    Ok((child, log))
}

/// Removes an embedded job store: the redb file and the answer journal beside it.
pub fn remove_job_store(path: &Path) {
    let _ = std::fs::remove_file(path);
    let mut journal = path.as_os_str().to_owned();
    journal.push(".answers");
    let _ = std::fs::remove_file(PathBuf::from(journal));
}

/// `VmRSS` of a `/proc/.../status` file, KiB.
#[must_use]
pub fn rss_kib_of(status_file: &str) -> Option<u64> {
    let status = std::fs::read_to_string(status_file).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The `sluice` binary to start: `explicit` if given, else the running executable (the
/// benchmarks run inside `sluice bench`).
///
/// # Errors
/// When the running executable cannot be found.
pub fn sluice_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    match explicit {
        Some(path) => Ok(path.to_owned()),
        None => Ok(std::env::current_exe()?),
    }
}
