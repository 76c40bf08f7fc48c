//! A shortened demo: the gateway side must cause no provider 429 and keep the binding limit
//! busy while the batch runs; the naive side must run into the provider's limits.

use clap::Parser;
use sluice_bench::demo::{self, DemoArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    demo: DemoArgs,
}

fn short_demo() -> DemoArgs {
    let args = ["demo", "--quiet", "--batch-requests", "90", "--deadline", "12s", "--seed", "7"];
    Cli::parse_from(args).demo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_side_keeps_the_provider_free_of_429s_and_busy() {
    let report = demo::scenario(&short_demo()).await.unwrap();
    let (g, n) = (&report.gateway, &report.naive);
    eprintln!("{}", report.table(12));

    assert_eq!(g.provider_429s, 0, "the gateway let a request through that the provider refused");
    assert_eq!(g.batch.served, 90, "the batch did not complete through the gateway");
    assert_eq!(g.interactive.failed, 0);
    assert!(g.interactive.served >= 20, "too few interactive requests to judge: {}", g.interactive.served);
    let utilization = g.utilization.as_ref().expect("the batch ran for whole seconds");
    assert_eq!(utilization.binding_limit, "tpm");
    assert!(utilization.value >= 0.95, "utilization while saturated {:.3} < 0.95", utilization.value);
    assert!(utilization.value <= 1.05, "more admitted than the limit allows: {:.3}", utilization.value);

    assert!(n.provider_429s > 0, "the naive workers never hit the provider's limit");
}
