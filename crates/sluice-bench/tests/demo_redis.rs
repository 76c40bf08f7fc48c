//! The shortened demo in distributed mode: three gateway instances sharing one Redis
//! (`redis-server` started by the demo on a free port), clients spread round-robin over them.
//! The gateway side must meet the same seed-000 criteria as embedded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "tests fail loudly")]

mod common;

use sluice_bench::demo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_on_one_redis_meet_the_seed_000_criteria() {
    let args = common::short_demo(&["--instances", "3", "--gateway-only"]);
    let report = demo::scenario(&args).await.unwrap();
    eprintln!("{}", report.table(&args.gateway_title(), 12));

    assert_eq!(report.scenario["store"], "redis");
    common::assert_seed_000_criteria(&report, 90, common::DISTRIBUTED);
}
