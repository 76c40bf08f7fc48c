//! `sluice serve` and `sluice check-config`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use sluice_quota::{Clock as _, SystemClock};
use sluice_server::AppState;

/// Options of `sluice serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The configuration file (TOML).
    #[arg(long, short, env = "SLUICE_CONFIG")]
    pub config: PathBuf,
    /// Listen address, overriding `server.listen` (port 0 picks a free port); a container
    /// image sets `SLUICE_LISTEN=0.0.0.0:8080` so the policy file need not know it runs there.
    #[arg(long, env = "SLUICE_LISTEN")]
    pub listen: Option<std::net::SocketAddr>,
    /// The admin plane's address (`/admin/*`, `/dashboard`, `/metrics`), overriding
    /// `admin.listen`: an address (port 0 picks a free port), or `shared` to serve it on
    /// the public listener; a container image sets `SLUICE_ADMIN_LISTEN=0.0.0.0:9090`.
    #[arg(long, env = "SLUICE_ADMIN_LISTEN", value_parser = admin_listen)]
    pub admin_listen: Option<sluice_config::AdminListen>,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "SLUICE_LOG_JSON")]
    pub log_json: bool,
    /// Threads serving client connections, each a single-threaded runtime with its own
    /// listener on the address (`SO_REUSEPORT`); default one per core. `0` serves them on
    /// the shared multi-threaded runtime instead.
    #[arg(long, env = "SLUICE_SERVE_THREADS")]
    pub serve_threads: Option<usize>,
    /// How often the configuration file is read to see whether it changed (its content,
    /// so a Kubernetes ConfigMap's symlink swap is seen too); a change that holds for two
    /// reads in a row is reloaded as SIGHUP would. `off`: SIGHUP only.
    #[arg(long, env = "SLUICE_CONFIG_WATCH", default_value = "2s", value_parser = parse_watch)]
    pub config_watch: Watch,
}

/// `--config-watch`: a period, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watch(Option<std::time::Duration>);

fn parse_watch(text: &str) -> Result<Watch, String> {
    if text == "off" {
        return Ok(Watch(None));
    }
    match humantime::parse_duration(text) {
        Ok(d) if d >= std::time::Duration::from_millis(10) => Ok(Watch(Some(d))),
        Ok(_) => Err("at least 10ms (or `off`)".into()),
        Err(e) => Err(format!("a duration like 2s, or `off`: {e}")),
    }
}

/// `shared`, or an address.
fn admin_listen(text: &str) -> Result<sluice_config::AdminListen, String> {
    if text == "shared" {
        return Ok(sluice_config::AdminListen::Shared);
    }
    text.parse()
        .map(sluice_config::AdminListen::Apart)
        .map_err(|_| format!("`{text}` is not an address like 127.0.0.1:9090, nor `shared`"))
}

fn read(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))
}

/// The configuration `text` (of `file`), validated; with `references`, every variable and
/// file it names must be there too (what `check-config` checks is what `serve` and a
/// reload refuse).
fn load_text(file: &Path, text: &str, references: bool) -> anyhow::Result<sluice_config::Config> {
    let config = sluice_config::parse(text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    if !references {
        return Ok(config);
    }
    let missing = sluice_config::unavailable(text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    if !missing.is_empty() {
        let lines: Vec<String> = missing.iter().map(|e| format!("  {e}")).collect();
        anyhow::bail!(
            "{}: {} referenced variable(s) or file(s) cannot be read:\n{}",
            file.display(),
            missing.len(),
            lines.join("\n")
        );
    }
    Ok(config)
}

/// Validates a configuration file and (unless `file_only`) checks that every environment
/// variable and file it names is there.
///
/// # Errors
/// The first problem in the file, with its field and line; or each missing variable or
/// file, with the field and line that names it.
pub fn check_config(file: &Path, file_only: bool) -> anyhow::Result<()> {
    let config = load_text(file, &read(file)?, !file_only)?;
    crate::write_line(&format!(
        "{}: ok ({} providers, {} deployments, {} models, {} tenants, {} keys)",
        file.display(),
        config.providers.len(),
        config.deployments.len(),
        config.models.len(),
        config.tenants.len(),
        config.keys.len()
    ));
    Ok(())
}

fn init_logs(json: bool) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| "info".into());
    // Colour codes only for a person at a terminal: a file or a log collector gets plain text.
    let ansi = std::io::stderr().is_terminal();
    // Batched writes (see `logs`): one `write` per batch, not per access-log line.
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(crate::logs::Stderr::new()).with_ansi(ansi);
    if json {
        // Each event's fields at the top level of its object (`status`, `tenant`, ...),
        // beside `timestamp`, `level`, `target` and `message`: what a log query filters on.
        builder.json().flatten_event(true).init();
    } else {
        // The default fields' format, written with fewer formatting calls (see `fields`).
        builder.fmt_fields(crate::fields::Fields).init();
    }
}

/// The ledger's connection settings, its password read from the environment.
fn ledger_settings(ledger: &sluice_config::Ledger) -> anyhow::Result<sluice_ledger::LedgerConfig> {
    let password = match &ledger.password_env {
        Some(name) => Some(
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| format!("ledger.password_env names {name}, which is not set"))?,
        ),
        None => None,
    };
    Ok(sluice_ledger::LedgerConfig {
        url: ledger.url.clone(),
        password,
        timeout: ledger.timeout,
        flush_every: ledger.flush_every,
    })
}

/// The store of record for money (`[ledger]`), connected and checked: without it the
/// gateway does not start, since budgets Redis forgot could not be restored.
async fn open_ledger(
    ledger: Option<&sluice_config::Ledger>,
) -> anyhow::Result<Option<Arc<dyn sluice_quota::SpendRecord>>> {
    let Some(ledger) = ledger else { return Ok(None) };
    let settings = ledger_settings(ledger)?;
    let record = sluice_ledger::PostgresLedger::connect(settings).await.context("opening the ledger ([ledger] url)")?;
    tracing::info!("ledger open: budgets are recorded in Postgres and restored from it");
    Ok(Some(record))
}

/// Runs the gateway until SIGINT or SIGTERM.
///
/// # Errors
/// A bad config, a missing provider key, or a socket that cannot be bound.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logs(args.log_json);
    let text = read(&args.config)?;
    let mut config = load_text(&args.config, &text, true)?;
    if let Some(admin) = args.admin_listen {
        config.admin.listen = admin;
    }
    let record = open_ledger(config.ledger.as_ref()).await?;
    let store = sluice_redis::choose::from_config(&config.store, Arc::new(SystemClock::new()), record);
    // The operator surface (admin API, dashboard) is mounted beside the gateway's routes.
    let state = AppState::build(&config, store)?
        .with_tls(&config)?
        .with_jobs(job_store(&config).await?, &config)
        .with_surface(sluice_admin::surface(&config));
    let workers = sluice_server::jobs::worker::spawn(&state);
    // Runtime keys: loaded now, then kept within a second of every change in the store.
    if let Some(jobs) = &state.jobs
        && let Err(e) = sluice_server::keys::poll::refresh(jobs.store.as_ref(), &state.current(), true).await
    {
        tracing::warn!(error = %e, "runtime keys could not be loaded at start; retrying in the background");
    }
    let key_refresh = sluice_server::keys::poll::spawn(&state);
    // Usage: counted in-process, written to the store every `[usage] flush_interval`.
    let usage_flush = sluice_server::usage::spawn_flush(&state);
    // Soft budgets: thresholds of `[budgets] warn_at` crossed warn (a counter, a webhook).
    let budget_warnings = sluice_server::budget_warnings::spawn(&state);
    let traces = export_traces(&state, &config.telemetry)?;
    // The configuration in force was loaded now: the reload gauge starts here.
    state.gateway.services.metrics.reloads.last_success.set(unix_seconds());
    let watched = Watched { file: args.config.clone(), hash: digest(&text), last: config.clone() };
    let reloader = tokio::spawn(watch_config(watched, state.clone(), args.config_watch));
    let listen = args.listen.unwrap_or(config.server.listen);
    let threads = args.serve_threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let listeners =
        sluice_listener::per_core::listeners(listen, threads.max(1)).with_context(|| format!("binding {listen}"))?;
    let addr = listeners.first().map(std::net::TcpListener::local_addr).transpose()?.unwrap_or(listen);
    let scheme = if state.tls.is_some() { "https" } else { "http" };
    // Bound before the first line is printed: whoever reads it may reach both.
    let admin = match config.admin.listen {
        sluice_config::AdminListen::Shared => None,
        sluice_config::AdminListen::Apart(at) => {
            Some(tokio::net::TcpListener::bind(at).await.with_context(|| format!("binding the admin listener {at}"))?)
        }
    };
    let admin_addr = admin.as_ref().map(tokio::net::TcpListener::local_addr).transpose()?.unwrap_or(addr);
    // One write: a reader that stops after the first line finds the second already sent.
    crate::write_line(&format!(
        "sluice listening on {scheme}://{addr}\nsluice admin listening on {scheme}://{admin_addr}"
    ));
    tracing::info!(%addr, %admin_addr, threads, "serving");
    // One signal for both listeners: the admin plane stops accepting when the API does
    // (also when serving fails and the signal is never awaited).
    let (stopping, stop_seen) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown_signal().await;
        stopping.send_replace(true);
    };
    let admin = admin.map(|listener| {
        let mut seen = stop_seen;
        let stopped = async move {
            let _ = seen.wait_for(|stopping| *stopping).await;
        };
        tokio::spawn(sluice_server::serve_admin(listener, state.clone(), stopped))
    });
    let grace = config.server.shutdown_grace;
    // Streams still running at the end of the grace end with their protocol's error event.
    let kept = state.clone();
    let served = if threads == 0 {
        let listener = listeners.into_iter().next().map(tokio::net::TcpListener::from_std).transpose()?;
        let listener = listener.context("no listener")?;
        sluice_server::serve_with_grace(listener, state, shutdown, grace).await
    } else {
        let serve_one =
            move |listener, shutdown| sluice_server::serve_with_grace(listener, state.clone(), shutdown, grace);
        sluice_listener::per_core::serve(listeners, serve_one, shutdown).await
    };
    served.context("serving")?;
    if let Some(admin) = admin {
        let _ = admin.await;
    }
    reloader.abort();
    if let Some(task) = key_refresh {
        task.abort();
    }
    budget_warnings.abort();
    // Workers stop leasing once draining; a job still running gets the grace period, and
    // one cut off is leased again after its visibility timeout (or at once, embedded).
    let _ = tokio::time::timeout(grace, async {
        for worker in workers {
            let _ = worker.await;
        }
    })
    .await;
    // The flush task sees the drain, writes once more and ends; what requests and jobs
    // settled after that (within the grace) is written here.
    if let Some(task) = usage_flush {
        let _ = task.await;
    }
    flush_usage(&kept).await;
    if let Some(exporting) = traces {
        exporting.finish(TRACE_FLUSH).await;
    }
    Ok(())
}

/// Writes the usage counted since the last flush to the job store.
async fn flush_usage(state: &AppState) {
    let Some(jobs) = &state.jobs else { return };
    let gateway = state.current();
    let retention = gateway.usage_settings.retention_days;
    if let Err(e) = sluice_server::usage::flush(&gateway.services.usage, jobs.store.as_ref(), retention).await {
        tracing::warn!(error = %e, "usage since the last flush could not be written at shutdown");
    }
}

/// The longest shutdown waits for the last spans to reach the collector.
const TRACE_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// Trace export, when `[telemetry] otlp_endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `..._TRACES_ENDPOINT`) is set.
fn export_traces(
    state: &AppState,
    settings: &sluice_config::Telemetry,
) -> anyhow::Result<Option<sluice_server::telemetry::Exporting>> {
    let set = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
    let configured = settings.otlp_endpoint.as_deref();
    if configured.is_none() && !set("OTEL_EXPORTER_OTLP_ENDPOINT") && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Ok(None);
    }
    let exporter = sluice_server::telemetry::otlp(configured).context("the OTLP trace exporter")?;
    tracing::info!("exporting traces over OTLP");
    Ok(Some(state.export_traces(exporter)))
}

/// The configuration file as last handled: its content's hash and the configuration in force.
struct Watched {
    file: PathBuf,
    /// The hash of the content last loaded or refused (a refused file is not tried again
    /// until it changes).
    hash: u64,
    last: sluice_config::Config,
}

/// Reloads the policy on every SIGHUP and, unless `watch` is off, when the file's content
/// changes: the whole file is read and validated aside; a bad one is reported (field and
/// line) and counted, and the last good one stays in force.
///
/// The file is read every period and its content compared, rather than watched through
/// file-system events: a mounted ConfigMap changes by swapping the `..data` symlink of its
/// directory (an inotify watch on the file itself keeps following the old, deleted one),
/// network and overlay file systems may send no events, and inotify instances are a scarce
/// per-node resource in a cluster. Reading a few kilobytes every two seconds costs nothing.
/// A change is applied once two reads a period apart agree (a file caught half-written is
/// not loaded).
async fn watch_config(mut watched: Watched, state: AppState, watch: Watch) {
    #[cfg(unix)]
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(_) => {
            tracing::warn!("SIGHUP cannot be watched: reload follows the file's changes only");
            None
        }
    };
    let mut ticks = watch.0.map(|every| {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks
    });
    // The content seen changed at the last read, to be loaded if this read agrees.
    let mut pending: Option<u64> = None;
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hangups.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        let tick = async {
            match ticks.as_mut() {
                Some(ticks) => ticks.tick().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            signal = hangup => {
                if signal.is_none() {
                    #[cfg(unix)]
                    {
                        hangups = None;
                    }
                    continue;
                }
                pending = None;
                reload(&mut watched, &state, "SIGHUP");
            }
            _ = tick => {
                // Unreadable for a moment (a swap in progress): looked at again next period.
                let Ok(text) = std::fs::read_to_string(&watched.file) else { continue };
                let hash = digest(&text);
                if hash == watched.hash {
                    pending = None;
                } else if pending == Some(hash) {
                    pending = None;
                    reload(&mut watched, &state, "file changed");
                } else {
                    pending = Some(hash);
                }
            }
        }
    }
}

/// A hash of a configuration's text, to see that it changed.
fn digest(text: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

fn unix_seconds() -> i64 {
    i64::try_from(SystemClock::new().unix_millis() / 1000).unwrap_or(i64::MAX)
}

/// One reload (`why`: SIGHUP or the file's change), counted in
/// `sluice_config_reload_total{result}`.
fn reload(watched: &mut Watched, state: &AppState, why: &str) {
    let metrics = &state.gateway.services.metrics.reloads;
    let text = match read(&watched.file) {
        Ok(text) => text,
        Err(e) => {
            tracing::error!(error = %e, trigger = why, "configuration reload refused; the previous configuration stays in force");
            metrics.reloaded(false, unix_seconds());
            return;
        }
    };
    watched.hash = digest(&text);
    match apply(&watched.file, &text, &watched.last, state, why) {
        Some(config) => {
            watched.last = config;
            metrics.reloaded(true, unix_seconds());
        }
        None => metrics.reloaded(false, unix_seconds()),
    }
}

/// Applies `text`: the new config when it is now in force.
fn apply(
    file: &Path,
    text: &str,
    last: &sluice_config::Config,
    state: &AppState,
    why: &str,
) -> Option<sluice_config::Config> {
    let config = match load_text(file, text, true) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!(error = %e, trigger = why, "configuration reload refused; the previous configuration stays in force");
            return None;
        }
    };
    // Process settings are bound at start (sockets, the store connection).
    for (section, changed) in [
        ("[server]", format!("{:?}", config.server) != format!("{:?}", last.server)),
        ("[store]", format!("{:?}", config.store) != format!("{:?}", last.store)),
        ("[jobs]", format!("{:?}", config.jobs) != format!("{:?}", last.jobs)),
        ("[telemetry]", config.telemetry != last.telemetry),
        ("[metrics]", config.metrics != last.metrics),
    ] {
        if changed {
            tracing::warn!(section, "changed on reload: takes effect only after a restart");
        }
    }
    match state.reload(&config) {
        Ok(()) => {
            tracing::info!(file = %file.display(), trigger = why, deployments = config.deployments.len(), keys = config.keys.len(), "configuration reloaded");
            Some(config)
        }
        Err(e) => {
            tracing::error!(error = %e, trigger = why, "configuration reload failed; the previous configuration stays in force");
            None
        }
    }
}

/// The job store: the embedded redb file, or Redis when the quota store is Redis; with a
/// `[ledger]`, the records (runtime keys, tenants, audit) and usage rollups in Postgres.
async fn job_store(config: &sluice_config::Config) -> anyhow::Result<Arc<dyn sluice_jobs::JobStore>> {
    let Some((topology, tls)) = sluice_redis::choose::redis_target(&config.store) else {
        let path = &config.jobs.path;
        let store = sluice_jobs::EmbeddedJobStore::open(path, Arc::new(SystemClock::new()))
            .with_context(|| format!("opening the job store {}", path.display()))?;
        return Ok(Arc::new(store));
    };
    // Job scripts may move a batch of jobs: allow them more than an admission's budget.
    let timeout = config.store.timeout.max(JOB_STORE_TIMEOUT);
    let settings = sluice_jobs::RedisJobConfig { topology, prefix: config.store.prefix.clone(), timeout, tls };
    let redis: Arc<dyn sluice_jobs::JobStore> = Arc::new(sluice_jobs::RedisJobStore::new(settings));
    let Some(ledger) = &config.ledger else { return Ok(redis) };
    // What a fleet kept in Redis before it had a ledger is copied in once, usage as far back as it is kept.
    let today = sluice_jobs::day_of_millis(SystemClock::new().unix_millis());
    let usage = sluice_jobs::Retention { today, days: config.usage.retention_days };
    let records = sluice_server::keys::RECORDS;
    let store = sluice_ledger::LedgerJobStore::connect(&ledger_settings(ledger)?, redis, &records, usage)
        .await
        .context("opening the ledger's records ([ledger] url)")?;
    Ok(Arc::new(store))
}

/// The least time a Redis job-store call is allowed.
const JOB_STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! { () = ctrl_c => {}, () = terminate => {} }
}
