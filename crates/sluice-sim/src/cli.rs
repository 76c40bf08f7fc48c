//! `sluice simulate-provider` arguments.

/// Options of `sluice simulate-provider`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

/// Runs the simulated provider until interrupted.
///
/// # Errors
/// When the configuration is invalid or the socket cannot be bound.
pub async fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
