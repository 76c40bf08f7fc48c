//! A shortened demo, embedded (one gateway, memory store): the gateway side meets issue #5's
//! seed-000 criteria; the naive side runs into the provider's limits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use sluice_bench::demo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_side_keeps_the_provider_free_of_429s_and_busy() {
    let args = common::short_demo(&[]);
    let report = demo::scenario(&args).await.unwrap();
    eprintln!("{}", report.table(&args.gateway_title(), 12));

    common::assert_seed_000_criteria(&report, 90, common::SEED_000);
    let naive = report.naive.as_ref().expect("the naive side ran");
    assert!(naive.provider_429s > 0, "the naive workers never hit the provider's limit");
}
