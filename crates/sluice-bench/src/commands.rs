//! `sluice bench` and its subcommands: without one it measures added latency
//! ([`crate::bench`]); `soak` runs the long flatness check ([`crate::soak`]); `chaos` the
//! fault scenarios with their invariants ([`crate::chaos`]); `windows` the default burst
//! against providers that enforce short windows ([`crate::windows`]); `sizes` mixed request
//! sizes on the gateway's defaults ([`crate::sizes`]); `responses` chained
//! Responses API conversations against a TPM-bound provider ([`crate::chained`]);
//! `bedrock` a
//! TPM-bound Bedrock workload with and without the output weight ([`crate::bedrock`]);
//! `deadlines` clients stating their deadlines against a saturated deployment
//! ([`crate::deadlines`]); `listener` what unauthenticated connections cost and whether
//! clients are served beside them ([`crate::listener`]); `keys` runtime keys at scale on
//! three instances sharing Redis ([`crate::keys`]).

use crate::bedrock::BedrockArgs;
use crate::bench::BenchArgs;
use crate::chained::ChainedArgs;
use crate::chaos::ChaosArgs;
use crate::deadlines::DeadlinesArgs;
use crate::keys::KeysArgs;
use crate::listener::ListenerArgs;
use crate::sizes::SizesArgs;
use crate::soak::SoakArgs;
use crate::windows::WindowsArgs;

/// `sluice bench [ARGS] | sluice bench soak … | sluice bench chaos …`.
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
    /// Fault scenarios (provider faults, Redis restarts, kill -9 of an instance with jobs
    /// queued), each a few rounds, with invariant checks; non-zero exit on a break.
    Chaos(ChaosArgs),
    /// Three workloads (mixed, RPM-bound, TPM-bound) through a gateway with its default
    /// burst, against a provider enforcing one, two or three seconds' worth at a time.
    Windows(WindowsArgs),
    /// Mixed request sizes (200 to 3,000 tokens) from closed-loop clients through a
    /// gateway on its defaults, against a provider enforcing one second's worth at a time:
    /// utilization, the sizes served against those offered, and stalled seconds.
    Sizes(SizesArgs),
    /// Responses API conversations chained by `previous_response_id` against a TPM-bound
    /// provider: its 429s and the utilization of its limit.
    Responses(ChainedArgs),
    /// A TPM-bound workload on a Bedrock deployment whose output burns 5× of its TPM, with
    /// `output_weight = 5` and with 1: the provider's 429s and the weighted utilization.
    Bedrock(BedrockArgs),
    /// Clients stating deadlines from 0.2 s to 20 s (`x-sluice-max-wait-ms`) against a
    /// saturated deployment: served within the deadline or refused at once, and the
    /// predicted waits against the actual ones.
    Deadlines(DeadlinesArgs),
    /// Idle unauthenticated connections (HTTP/1.1, HTTP/2, a partial head) against one
    /// `sluice serve` on its defaults: RSS per connection, and clients served while idle
    /// HTTP/2 connections and partial prefaces are held open.
    Listener(ListenerArgs),
    /// 100,000 runtime keys created, rotated and revoked on three instances sharing Redis:
    /// admin latency, how fast a revoke is seen everywhere, RSS per key, request latency.
    Keys(KeysArgs),
}

/// Runs the chosen benchmark.
///
/// # Errors
/// When it cannot start its pieces, or (soak, chaos) when its checks fail.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command.command {
        None => crate::bench::run(command.latency).await,
        Some(Sub::Soak(args)) => crate::soak::run(args).await,
        Some(Sub::Chaos(args)) => crate::chaos::run(args).await,
        Some(Sub::Windows(args)) => crate::windows::run(args).await,
        Some(Sub::Sizes(args)) => crate::sizes::run(args).await,
        Some(Sub::Responses(args)) => crate::chained::run(args).await,
        Some(Sub::Bedrock(args)) => crate::bedrock::run(args).await,
        Some(Sub::Deadlines(args)) => crate::deadlines::run(args).await,
        Some(Sub::Listener(args)) => crate::listener::run(args).await,
        Some(Sub::Keys(args)) => crate::keys::run(args).await,
    }
}
