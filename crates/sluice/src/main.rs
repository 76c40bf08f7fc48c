//! The `sluice` command: wires the real clock, sockets and stores to the library crates.

mod fields;
mod healthcheck;
mod import;
mod keys;
mod logs;
mod serve;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: a request allocates and frees many small
/// objects across threads, which glibc's malloc serves markedly slower (see
/// docs/benchmarks.md, "Against a bare reverse proxy").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `sluice --version`: the package version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SLUICE_BUILD_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(name = "sluice", version = VERSION, about = "A rate-limit-aware gateway for LLM APIs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway.
    Serve(serve::ServeArgs),
    /// Validate a configuration file without serving, and check that every environment
    /// variable and file it names is there; exits non-zero naming each problem's field and line.
    CheckConfig {
        /// The configuration file.
        file: std::path::PathBuf,
        /// Validate the file alone: do not look for the variables and files it names (CI,
        /// where the secrets are not).
        #[arg(long)]
        file_only: bool,
    },
    /// Print the SHA-256 of a gateway API key, as the config's `keys[].sha256` wants it.
    HashKey {
        /// The key; read from standard input when left out (keeps it out of shell history).
        key: Option<String>,
    },
    /// Exit 0 when a gateway answers 200 on its readiness URL, 1 otherwise (a container's
    /// HEALTHCHECK).
    Healthcheck(healthcheck::HealthArgs),
    /// Write a sluice configuration from another gateway's (`import litellm CONFIG.yaml`).
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Create, list and revoke runtime keys through a running gateway's admin API (the
    /// admin key from `SLUICE_ADMIN_KEY`).
    Keys(keys::KeysArgs),
    /// Run the strict simulated LLM provider (OpenAI and Anthropic shapes).
    SimulateProvider(sluice_sim::cli::SimArgs),
    /// Run the seed-000 demo: the gateway vs. uncoordinated workers, in one process.
    Demo(sluice_bench::demo::DemoArgs),
    /// Measure the latency the gateway adds, open loop, against the provider called directly;
    /// `bench soak` and `bench chaos` run the soak and the fault scenarios.
    Bench(sluice_bench::commands::BenchCommand),
}

fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = Cli::parse();
    let ran = run(cli.command);
    // Lines still waiting in the log's batch go out before the command's own error.
    logs::flush();
    ran
}

fn run(command: Command) -> anyhow::Result<std::process::ExitCode> {
    let ok = |()| std::process::ExitCode::SUCCESS;
    match command {
        Command::CheckConfig { file, file_only } => serve::check_config(&file, file_only).map(ok),
        Command::HashKey { key } => {
            let key = match key {
                Some(key) => key,
                None => key_from_stdin()?,
            };
            write_line(&hex::encode(sluice_config::hash_key(&key)));
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Import(command) => import::run(command).map(ok),
        Command::Healthcheck(args) => Ok(current_thread()?.block_on(healthcheck::run(args))),
        Command::Keys(args) => current_thread()?.block_on(keys::run(args)).map(ok),
        Command::Serve(args) => runtime()?.block_on(serve::run(args)).map(ok),
        Command::SimulateProvider(args) => runtime()?.block_on(sluice_sim::cli::run(args)).map(ok),
        Command::Demo(args) => runtime()?.block_on(sluice_bench::demo::run(args)).map(ok),
        Command::Bench(args) => runtime()?.block_on(sluice_bench::commands::run(args)).map(ok),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

/// A one-thread runtime for short commands (a health check every few seconds should not
/// start a thread per core).
fn current_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// The key on standard input: its first line, without the line end.
fn key_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let key = line.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!key.is_empty(), "no key given: pass it as an argument or on standard input");
    Ok(key.to_owned())
}

/// Prints one line of the command's result on standard output.
#[expect(clippy::print_stdout, reason = "the command's own output")]
pub(crate) fn write_line(line: &str) {
    println!("{line}");
}
