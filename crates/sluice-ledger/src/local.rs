//! A local `postgres` on 127.0.0.1, for tests and benchmarks: a fresh cluster in a
//! temporary directory on a free port, stopped and removed when dropped. Needs the
//! PostgreSQL server programs (`initdb`, `pg_ctl`: Debian's `postgresql` package); run as
//! root, they run as the `postgres` user the package creates.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Why a local server did not start.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The server programs are missing or failed.
    #[error("could not run {program}: {reason} (install PostgreSQL, e.g. `apt-get install postgresql`)")]
    Spawn {
        /// The program.
        program: &'static str,
        /// What went wrong.
        reason: String,
    },
}

/// One `postgres` server with its own data directory.
#[derive(Debug)]
pub struct LocalPostgres {
    port: u16,
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
}

/// Where `initdb` and `pg_ctl` are: on PATH, else the newest `/usr/lib/postgresql/*/bin`.
fn bin_dir() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file());
    on_path.or_else(|| {
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
            .filter(|(_, bin)| bin.join("initdb").is_file())
            .collect();
        versions.sort();
        versions.pop().map(|(_, bin)| bin)
    })
}

fn free_port() -> Result<u16, LocalError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| LocalError::Spawn { program: "postgres", reason: format!("no free port: {e}") })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| LocalError::Spawn { program: "postgres", reason: e.to_string() })
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

impl LocalPostgres {
    /// Creates a cluster (trust authentication, user `sluice`, durability off: a test
    /// server) and starts it on a free port.
    ///
    /// # Errors
    /// When the programs are missing or the server does not start.
    pub fn start() -> Result<Self, LocalError> {
        let bin = bin_dir().ok_or_else(|| LocalError::Spawn {
            program: "initdb",
            reason: "not on PATH nor in /usr/lib/postgresql/*/bin".into(),
        })?;
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!("sluice-postgres-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| LocalError::Spawn { program: "initdb", reason: e.to_string() })?;
        let as_postgres = is_root();
        let server = Self { port, bin, dir, as_postgres };
        if as_postgres {
            // postgres refuses to run as root: the package's user owns the directory.
            server.run("chown", Path::new("chown"), &["-R", "postgres", &server.dir.to_string_lossy()], false)?;
        }
        let data = server.dir.join("data");
        let data = data.to_string_lossy();
        server.run(
            "initdb",
            &server.bin.join("initdb"),
            &["-D", &data, "-A", "trust", "-U", "sluice", "--no-sync"],
            true,
        )?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            server.dir.to_string_lossy()
        );
        let log = server.dir.join("log").to_string_lossy().into_owned();
        server.run(
            "pg_ctl",
            &server.bin.join("pg_ctl"),
            &["-D", &data, "-o", &options, "-l", &log, "-w", "start"],
            true,
        )?;
        Ok(server)
    }

    fn run(&self, program: &'static str, path: &Path, args: &[&str], as_owner: bool) -> Result<Output, LocalError> {
        let mut command = if as_owner && self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        };
        let out = command.args(args).output().map_err(|e| LocalError::Spawn { program, reason: e.to_string() })?;
        if out.status.success() {
            Ok(out)
        } else {
            let reason = format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
            Err(LocalError::Spawn { program, reason })
        }
    }

    /// The port it listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A connection URL for its `postgres` database.
    #[must_use]
    pub fn url(&self) -> String {
        format!("postgres://sluice@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for LocalPostgres {
    fn drop(&mut self) {
        let data = self.dir.join("data").to_string_lossy().into_owned();
        let _ = self.run("pg_ctl", &self.bin.join("pg_ctl"), &["-D", &data, "-m", "immediate", "-w", "stop"], true);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
