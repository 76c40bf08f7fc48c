//! One round of the chaos runner's `provider-faults` scenario against the binary under test:
//! the simulated provider answers 503s, resets connections and hangs, and every invariant
//! must hold (no request past the gateway's bound, every request answered, no provider 429,
//! the gateway alive). About 13 s; the runner itself (`sluice bench chaos`) repeats it and
//! the other scenarios.
#![allow(clippy::unwrap_used, clippy::panic, reason = "tests fail loudly")]

use std::path::Path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_faults_break_no_invariant() {
    let binary = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let checks = sluice_bench::chaos_faults::round(binary, 1, 11).await.unwrap();
    assert!(checks.len() >= 5, "{checks:?}");
    let broken: Vec<_> = checks.iter().filter(|c| !c.pass).collect();
    assert!(broken.is_empty(), "{}", sluice_bench::chaos::table(&checks));
}
