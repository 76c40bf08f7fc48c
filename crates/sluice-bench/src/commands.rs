//! `sluice bench` and its subcommands: without one it measures added latency
//! ([`crate::bench`]); `soak` runs the long flatness check ([`crate::soak`]).

use crate::bench::BenchArgs;
use crate::soak::SoakArgs;

/// `sluice bench [ARGS] | sluice bench soak …`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCommand {
    /// A benchmark other than added latency.
    #[command(subcommand)]
    pub command: Option<Sub>,
    /// The added-latency benchmark's arguments.
    #[command(flatten)]
    pub latency: BenchArgs,
}

/// The subcommands of `sluice bench`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Sub {
    /// A long run at half the provider's binding limit: the gateway's RSS and latency over
    /// time, a CSV, a plot and a verdict on flatness.
    Soak(SoakArgs),
}

/// Runs the chosen benchmark.
///
/// # Errors
/// When it cannot start its pieces, or (soak) when its checks fail.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command.command {
        None => crate::bench::run(command.latency).await,
        Some(Sub::Soak(args)) => crate::soak::run(args).await,
    }
}
