//! `sluice bench chaos`: bounded fault scenarios against real `sluice serve` processes, each
//! repeated a few rounds, every round judged by invariants:
//!
//! - `provider-faults` ([`crate::chaos_faults`]): the simulated provider answers 503s,
//!   resets connections and hangs, under load above its limit;
//! - `redis-restart` ([`crate::chaos_redis`]): Redis is killed and restarted under load with
//!   3 instances on it, `fail_closed` and `fail_open_local`;
//! - `kill-instance` ([`crate::chaos_kill`]): one of 3 instances is `kill -9`ed while async
//!   jobs are queued and running, then restarted.
//!
//! The result is a table of scenario × round × invariant → pass/fail with the figures; the
//! command fails when any invariant broke. Everything binds 127.0.0.1 and stops by itself.

use std::path::PathBuf;

pub use crate::chaos_check::{Check, ms};

/// Arguments of `sluice bench chaos`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    /// Rounds of each scenario.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Scenarios to run.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "provider-faults,redis-restart,kill-instance")]
    pub scenarios: Vec<Scenario>,
    /// Base seed; round `r` of a scenario uses `seed + r`.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The `sluice` binary to run as the gateways (default: this one).
    #[arg(long)]
    pub sluice_bin: Option<PathBuf>,
}

/// A chaos scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Provider 503s, resets and hangs under load.
    ProviderFaults,
    /// Redis killed and restarted under load, 3 instances, both failure modes.
    RedisRestart,
    /// `kill -9` of one of 3 instances with async jobs queued, then a restart.
    KillInstance,
}

/// Runs the scenarios and prints the table.
///
/// # Errors
/// When a piece cannot start, or any invariant broke.
pub async fn run(args: ChaosArgs) -> anyhow::Result<()> {
    let binary = crate::process::sluice_binary(args.sluice_bin.as_deref())?;
    let mut checks = Vec::new();
    for scenario in &args.scenarios {
        for round in 1..=args.rounds {
            let seed = args.seed + u64::from(round);
            let found = match scenario {
                Scenario::ProviderFaults => crate::chaos_faults::round(&binary, round, seed).await?,
                Scenario::RedisRestart => crate::chaos_redis::round(&binary, round).await?,
                Scenario::KillInstance => crate::chaos_kill::round(&binary, round, seed).await?,
            };
            for check in &found {
                say(&format!("{} round {}: {} {}", check.scenario, check.round, verdict(check.pass), check.invariant));
            }
            checks.extend(found);
        }
    }
    say(&table(&checks));
    let broken = checks.iter().filter(|c| !c.pass).count();
    anyhow::ensure!(broken == 0, "{broken} invariant checks failed");
    Ok(())
}

#[expect(clippy::print_stdout, reason = "the runner's table is its output")]
fn say(text: &str) {
    println!("{text}");
}

fn verdict(pass: bool) -> &'static str {
    if pass { "pass" } else { "FAIL" }
}

/// The markdown table of all checks.
#[must_use]
pub fn table(checks: &[Check]) -> String {
    let mut out = String::from("| scenario | round | invariant | result | figures |\n|---|---:|---|---|---|\n");
    for c in checks {
        let result = if c.pass { "pass" } else { "**FAIL**" };
        out.push_str(&format!("| {} | {} | {} | {result} | {} |\n", c.scenario, c.round, c.invariant, c.figures));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_marks_failures() {
        let checks = [
            Check::new("a", 1, "no hang", true, "slowest 10 ms".into()),
            Check::new("a", 2, "no hang", false, "slowest 9 s".into()),
        ];
        let t = table(&checks);
        assert!(t.contains("| a | 1 | no hang | pass | slowest 10 ms |"));
        assert!(t.contains("| a | 2 | no hang | **FAIL** | slowest 9 s |"));
    }
}
