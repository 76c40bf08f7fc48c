//! The spend record against a real `postgres`: what instances record adds up per scope and
//! period, is read back before it was written out, and survives a reconnect.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::time::Duration;

use sluice_ledger::local::LocalPostgres;
use sluice_ledger::{LedgerConfig, LedgerError, PostgresLedger};
use sluice_quota::{BudgetPeriod, SpendRecord, SpentInPeriods};

const DAY: u64 = 1_764_806_400;
const MONTH: u64 = 1_764_547_200;

fn settings(server: &LocalPostgres) -> LedgerConfig {
    LedgerConfig {
        url: server.url(),
        password: None,
        timeout: Duration::from_secs(5),
        // A restore's read waits one interval: kept short.
        flush_every: Duration::from_millis(100),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_instances_record_adds_up_per_scope_and_period() {
    let server = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let (one, two) =
        tokio::join!(PostgresLedger::connect(settings(&server)), PostgresLedger::connect(settings(&server)));
    let (one, two) = (one.unwrap(), two.unwrap());
    for _ in 0..3 {
        one.record("tenant:acme", BudgetPeriod::Day, DAY, 1_000);
        one.record("tenant:acme", BudgetPeriod::Month, MONTH, 1_000);
    }
    one.flush().await.unwrap();
    two.record("tenant:acme", BudgetPeriod::Day, DAY, 250);
    two.record("tenant:acme", BudgetPeriod::Day, DAY - 86_400, 9_999);
    two.record("tenant:globex", BudgetPeriod::Day, DAY, 40);
    // `two` has not written its part: reading through it writes it first.
    let scopes = ["tenant:acme".to_owned(), "tenant:globex".to_owned(), "tenant:initech".to_owned()];
    let seen = two.spent(&scopes, DAY, MONTH).await.unwrap();
    assert_eq!(
        seen,
        [SpentInPeriods { day: 3_250, month: 3_000 }, SpentInPeriods { day: 40, month: 0 }, SpentInPeriods::default()]
    );
    // Written once: reading again through the other instance changes nothing.
    assert_eq!(one.spent(&scopes, DAY, MONTH).await.unwrap(), seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_that_cannot_be_reached_says_so_and_names_no_secret() {
    let server = LocalPostgres::start().expect("postgres (scripts/test installs it)");
    let port = server.port();
    drop(server);
    let config = LedgerConfig {
        url: format!("postgres://sluice:hunter2@127.0.0.1:{port}/postgres"),
        password: None,
        timeout: Duration::from_secs(2),
        flush_every: Duration::from_secs(1),
    };
    let error = PostgresLedger::connect(config).await.unwrap_err();
    assert!(matches!(error, LedgerError::Postgres(_)), "{error}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    let bad = LedgerConfig { url: "mysql://sluice:hunter2@host/db".into(), ..settings_for_port(port) };
    let error = PostgresLedger::connect(bad).await.unwrap_err();
    assert!(matches!(error, LedgerError::Url(_)), "{error}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

fn settings_for_port(port: u16) -> LedgerConfig {
    LedgerConfig {
        url: format!("postgres://sluice@127.0.0.1:{port}/postgres"),
        password: None,
        timeout: Duration::from_secs(2),
        flush_every: Duration::from_secs(1),
    }
}
