//! The `sluice` command: wires the real clock, sockets and stores to the library crates.

mod serve;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "A rate-limit-aware gateway for LLM APIs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway.
    Serve(serve::ServeArgs),
    /// Validate a configuration file without serving; exits non-zero naming field and line.
    CheckConfig {
        /// The configuration file.
        file: std::path::PathBuf,
    },
    /// Print the SHA-256 of a gateway API key, as the config's `keys[].sha256` wants it.
    HashKey {
        /// The key.
        key: String,
    },
    /// Run the strict simulated LLM provider (OpenAI and Anthropic shapes).
    SimulateProvider(sluice_sim::cli::SimArgs),
    /// Run the seed-000 demo: the gateway vs. uncoordinated workers, in one process.
    Demo(sluice_bench::demo::DemoArgs),
    /// Measure the latency the gateway adds, open loop, against the provider called directly;
    /// `bench soak` and `bench chaos` run the soak and the fault scenarios.
    Bench(sluice_bench::commands::BenchCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::CheckConfig { file } => serve::check_config(&file),
        Command::HashKey { key } => {
            write_line(&hex::encode(sluice_config::hash_key(&key)));
            Ok(())
        }
        Command::Serve(args) => runtime()?.block_on(serve::run(args)),
        Command::SimulateProvider(args) => runtime()?.block_on(sluice_sim::cli::run(args)),
        Command::Demo(args) => runtime()?.block_on(sluice_bench::demo::run(args)),
        Command::Bench(args) => runtime()?.block_on(sluice_bench::commands::run(args)),
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

/// Prints one line of the command's result on standard output.
#[expect(clippy::print_stdout, reason = "the command's own output")]
pub(crate) fn write_line(line: &str) {
    println!("{line}");
}
