//! Configuration as a platform runs it, against the real binary: `check-config` names each
//! variable and file that `serve` would miss; a ConfigMap-style symlink swap of the watched
//! file reloads (and a broken one is refused and counted, the old one kept); the Redis
//! password comes from a variable (a real `redis-server` with `requirepass`) and is never
//! logged; `--version` names the commit.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const BINARY: &str = env!("CARGO_BIN_EXE_sluice");
const CLIENT_KEY: &str = "sk-config-ops-client";
const PROVIDER_ENV: &str = "SLUICE_OPS_PROVIDER_KEY";

/// A policy with one profile per name in `models`, all on one deployment.
fn policy(models: &[&str]) -> String {
    let sha = hex::encode(sluice_config::hash_key(CLIENT_KEY));
    let mut text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n\
         [[providers]]\nname = \"p\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\napi_key_env = \"{PROVIDER_ENV}\"\n\n\
         [[deployments]]\nname = \"d\"\nprovider = \"p\"\nmodel = \"gpt-4o-mini\"\nlimits = {{ rpm = 600 }}\n\n\
         [[tenants]]\nname = \"t\"\n\n[[keys]]\nid = \"k\"\ntenant = \"t\"\nsha256 = \"{sha}\"\n"
    );
    for model in models {
        text.push_str(&format!("\n[[models]]\nname = \"{model}\"\ndeployment = \"d\"\n"));
    }
    text
}

/// `sluice serve` on `config`, with only `env` in its environment; killed when dropped.
struct Served {
    url: String,
    /// The admin listener's (`/metrics`).
    admin: String,
    child: Child,
    log: PathBuf,
}

impl Served {
    fn start(dir: &Path, config: &Path, env: &[(&str, &str)]) -> Result<Self, String> {
        let log = dir.join("stderr.log");
        let mut child = Command::new(BINARY)
            .arg("serve")
            .arg("--config")
            .arg(config)
            .args(["--admin-listen", "127.0.0.1:0"])
            .env_clear()
            .envs(env.iter().copied())
            .env("SLUICE_LOG", "info")
            .env("SLUICE_SERVE_THREADS", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (mut line, mut admin) = (String::new(), String::new());
        stdout.read_line(&mut line).unwrap();
        stdout.read_line(&mut admin).unwrap();
        let mut served = Self { url: String::new(), admin: String::new(), child, log };
        let public = line.trim().strip_prefix("sluice listening on ");
        match (public, admin.trim().strip_prefix("sluice admin listening on ")) {
            (Some(url), Some(admin)) => {
                served.url = url.to_owned();
                served.admin = admin.to_owned();
                Ok(served)
            }
            _ => Err(served.stderr()),
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn get(&self, path: &str) -> (u16, String) {
        Self::fetch(&self.url, path).await
    }

    async fn fetch(base: &str, path: &str) -> (u16, String) {
        let response =
            reqwest::Client::new().get(format!("{base}{path}")).bearer_auth(CLIENT_KEY).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// The value of the sample `series` (name and labels, as exported) on `/metrics`.
    async fn sample(&self, series: &str) -> Option<f64> {
        let (_, text) = Self::fetch(&self.admin, "/metrics").await;
        text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// Polls (every 50 ms, at most 20 s) until `check` holds; false if it never did.
    async fn eventually<F: std::future::Future<Output = bool>>(&self, mut check: impl FnMut() -> F) -> bool {
        for _ in 0..400 {
            if check().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory laid out as the kubelet mounts a ConfigMap: `sluice.toml` → `..data/sluice.toml`,
/// `..data` → a timestamped directory holding the files. An update writes a new directory
/// and swaps `..data` in one rename.
struct ConfigMap {
    dir: PathBuf,
    version: u32,
}

impl ConfigMap {
    fn new(dir: &Path, text: &str) -> Self {
        let mut map = Self { dir: dir.to_owned(), version: 0 };
        map.write(text);
        std::os::unix::fs::symlink("..data/sluice.toml", dir.join("sluice.toml")).unwrap();
        map
    }

    fn file(&self) -> PathBuf {
        self.dir.join("sluice.toml")
    }

    /// Publishes `text` as the kubelet does: new directory, new symlink, renamed over `..data`.
    fn write(&mut self, text: &str) {
        self.version += 1;
        let name = format!("..2026_12_04_00_00_0{}.{}", self.version, std::process::id());
        std::fs::create_dir(self.dir.join(&name)).unwrap();
        std::fs::write(self.dir.join(&name).join("sluice.toml"), text).unwrap();
        let staged = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("..data")).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_swap_reloads_and_a_broken_one_is_refused_counted_and_the_old_kept() {
    let dir = tempfile::tempdir().unwrap();
    let jobs = format!("[jobs]\npath = \"{}\"\n", dir.path().join("jobs.redb").display());
    let mut map = ConfigMap::new(dir.path(), &format!("{jobs}{}", policy(&["chat"])));
    let env = [(PROVIDER_ENV, "sk-provider"), ("SLUICE_CONFIG_WATCH", "100ms")];
    let gateway = Served::start(dir.path(), &map.file(), &env).unwrap();
    let models = || async { gateway.get("/v1/models").await.1 };
    assert!(models().await.contains("\"chat\"") && !models().await.contains("\"chat-2\""));
    // Present from the start, both results at zero; the start is the last good load.
    let ok = "sluice_config_reload_total{result=\"ok\"}";
    let error = "sluice_config_reload_total{result=\"error\"}";
    assert_eq!((gateway.sample(ok).await, gateway.sample(error).await), (Some(0.0), Some(0.0)));
    let stamp = "sluice_config_last_reload_success_timestamp_seconds";
    let started = gateway.sample(stamp).await.unwrap();
    assert!(started > 1.7e9, "{started}");

    // A new ConfigMap version: a second profile.
    map.write(&format!("{jobs}{}", policy(&["chat", "chat-2"])));
    let applied = gateway.eventually(|| async { models().await.contains("\"chat-2\"") }).await;
    assert!(applied, "the swapped config was not applied:\n{}", gateway.stderr());
    assert_eq!(gateway.sample(ok).await, Some(1.0));
    assert!(gateway.sample(stamp).await.unwrap() >= started);

    // A broken version: refused, counted once, the previous one kept.
    map.write(&format!("{jobs}{}", policy(&["chat"]).replace("rpm = 600", "rpm = \"many\"")));
    let refused = gateway.eventually(|| async { gateway.sample(error).await == Some(1.0) }).await;
    assert!(refused, "the broken config was not counted:\n{}", gateway.stderr());
    assert!(models().await.contains("\"chat-2\""), "the previous configuration is no longer in force");
    let log = gateway.stderr();
    assert!(log.contains("reload refused") && log.contains("`rpm`"), "{log}");
    assert!(log.contains("file changed"), "the trigger is not named:\n{log}");
    assert_eq!(gateway.sample(ok).await, Some(1.0));
}

#[test]
fn check_config_names_every_missing_variable_and_file_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("redis-password");
    let text = format!(
        "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379\"\npassword_file = \"{}\"\n\n{}",
        password_file.display(),
        policy(&["chat"])
    );
    let file = dir.path().join("sluice.toml");
    std::fs::write(&file, &text).unwrap();
    let check = |env: &[(&str, &str)], extra: &[&str]| {
        let output = Command::new(BINARY)
            .arg("check-config")
            .arg(&file)
            .args(extra)
            .env_clear()
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.success(), said)
    };

    let (passed, said) = check(&[], &[]);
    assert!(!passed, "check-config passed without the key and the password file:\n{said}");
    assert!(!said.contains(": ok"), "{said}");
    assert!(said.contains("2 referenced variable(s) or file(s)"), "{said}");
    // Each named with its field and line.
    assert!(said.contains(&format!("line 4: `store.password_file`: file `{}`", password_file.display())), "{said}");
    let key_line = text.lines().position(|l| l.starts_with("api_key_env")).unwrap() + 1;
    let key = format!("line {key_line}: `providers[0].api_key_env`: environment variable `{PROVIDER_ENV}` is not set");
    assert!(said.contains(&key), "{said}");

    // `serve` refuses the same file for the same reasons, before listening.
    let refused = Served::start(dir.path(), &file, &[]).err().expect("serve started without its secrets");
    assert!(refused.contains("`providers[0].api_key_env`") && refused.contains("`store.password_file`"), "{refused}");

    std::fs::write(&password_file, "secret\n").unwrap();
    let (passed, said) = check(&[], &[]);
    assert!(!passed && said.contains("1 referenced") && !said.contains("store.password_file"), "{said}");
    let (passed, said) = check(&[(PROVIDER_ENV, "sk-x")], &[]);
    assert!(passed && said.contains(": ok"), "{said}");
    // `--file-only`: validated, the variables and files not looked for (CI without secrets).
    std::fs::remove_file(&password_file).unwrap();
    let (passed, said) = check(&[], &["--file-only"]);
    assert!(passed && said.contains(": ok"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_password_comes_from_a_variable_and_is_never_logged() {
    const PASSWORD: &str = "redis-env-password-1f4c";
    let server = sluice_redis::local::LocalRedis::start_with_password(PASSWORD).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.toml");
    let store = format!("[store]\nkind = \"redis\"\nurl = \"{}\"\npassword_env = \"REDIS_PASSWORD\"\n", server.url());
    std::fs::write(&file, format!("{store}\n{}", policy(&["chat"]))).unwrap();

    let good = [(PROVIDER_ENV, "sk-provider"), ("REDIS_PASSWORD", PASSWORD)];
    let gateway = Served::start(dir.path(), &file, &good).unwrap();
    // Ready only while the store answers (fail_closed): it does, with the password.
    assert!(gateway.eventually(|| async { gateway.get("/readyz").await.0 == 200 }).await, "{}", gateway.stderr());
    assert_eq!(gateway.get("/v1/models").await.0, 200);
    drop(gateway);

    let wrong = [(PROVIDER_ENV, "sk-provider"), ("REDIS_PASSWORD", "wrong-password-9d2e")];
    let gateway = Served::start(dir.path(), &file, &wrong).unwrap();
    let (status, body) = gateway.get("/readyz").await;
    assert_eq!(status, 503, "ready with a wrong Redis password: {body}");
    let log = gateway.stderr();
    for secret in [PASSWORD, "wrong-password-9d2e"] {
        assert!(!log.contains(secret) && !body.contains(secret), "the password is shown:\n{log}\n{body}");
    }
}

#[test]
fn version_names_the_commit() {
    let output = Command::new(BINARY).arg("--version").output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    let commit = env!("SLUICE_BUILD_COMMIT");
    assert_eq!(said.trim(), format!("sluice {} (commit {commit})", env!("CARGO_PKG_VERSION")));
    assert!(commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
}
