//! The `sluice` command: wires real clocks, sockets and stores to the library crates.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "sluice", version, about = "A rate-limit-aware gateway for LLM APIs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the strict simulated LLM provider (OpenAI and Anthropic shapes).
    SimulateProvider(sluice_sim::cli::SimArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::SimulateProvider(args) => sluice_sim::cli::run(args).await,
        }
    })
}
