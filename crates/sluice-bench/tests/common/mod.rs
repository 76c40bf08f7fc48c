//! What both short demo runs assert: issue #5's seed-000 criteria on the gateway side.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

use clap::Parser;
use sluice_bench::demo::DemoArgs;
use sluice_bench::report::DemoReport;

/// Headroom over the provider's own p99 that interactive requests may take through sluice.
pub const P99_MARGIN_MS: f64 = 100.0;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    demo: DemoArgs,
}

/// The demo with a 90-request batch and `extra` arguments.
pub fn short_demo(extra: &[&str]) -> DemoArgs {
    let mut args = vec!["demo", "--quiet", "--batch-requests", "90", "--deadline", "12s", "--seed", "7"];
    args.extend_from_slice(extra);
    Cli::parse_from(args).demo
}

/// No provider 429; interactive p99 within the provider's own p99 + [`P99_MARGIN_MS`] and
/// no 429 for interactive clients; the whole batch served, using ≥ 95 % of the capacity
/// interactive traffic leaves; the binding limit (TPM) ≥ 95 % used, never above 105 %.
pub fn assert_seed_000_criteria(report: &DemoReport, batch_requests: usize) {
    let g = &report.gateway;
    let provider = &report.provider_latency;
    assert_eq!(provider.failed, 0, "the provider refused a request sent without contention");
    let provider_p99 = provider.p99_ms.expect("the provider's own latency was measured");

    assert_eq!(g.provider_429s, 0, "the gateway let a request through that the provider refused");
    assert_eq!(g.interactive.client_429s, 0, "an interactive client saw a 429");
    assert_eq!(g.interactive.failed, 0);
    assert!(g.interactive.served >= 20, "too few interactive requests to judge: {}", g.interactive.served);
    let p99 = g.interactive.p99_ms.expect("interactive requests were served");
    assert!(
        p99 <= provider_p99 + P99_MARGIN_MS,
        "interactive p99 {p99:.0} ms > the provider's own p99 {provider_p99:.0} ms + {P99_MARGIN_MS} ms"
    );

    assert_eq!(g.batch.served, batch_requests, "the batch did not complete through the gateway");
    let utilization = g.utilization.as_ref().expect("the batch ran for whole seconds");
    assert_eq!(utilization.binding_limit, "tpm");
    assert!(utilization.value >= 0.95, "utilization while saturated {:.3} < 0.95", utilization.value);
    assert!(utilization.value <= 1.05, "more admitted than the limit allows: {:.3}", utilization.value);
    let leftover = g.batch_of_leftover.expect("interactive usage was sampled over the saturated seconds");
    assert!(leftover >= 0.95, "the batch used {leftover:.3} < 0.95 of the capacity interactive traffic left");
}
