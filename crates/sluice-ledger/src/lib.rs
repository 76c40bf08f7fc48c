//! The fleet's store of record for money: what every budget scope spent in each day and
//! month, kept in Postgres (`[ledger] url`). Redis stays the hot path; this record is what
//! a Redis that lost its memory is restored from before it admits against a budget again,
//! and what spend admitted locally during a Redis outage is reconciled by.
//!
//! Settlements are added up in memory and written in batches (every
//! [`LedgerConfig::flush_every`]); each batch carries an id and is applied once, in one
//! transaction with that id, however often a write that did not answer is tried again.

pub mod local;
mod pg;
mod records;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rand::Rng as _;
use sluice_quota::{BudgetPeriod, SpendRecord, SpentInPeriods, StoreError, StoreFuture};

use crate::pg::Pg;
pub use crate::pg::{MIN_SERVER_VERSION, PgError};
pub use crate::records::LedgerJobStore;

/// How long batch ids are kept: a batch tried again later than this could count twice.
const BATCH_IDS_KEPT: &str = "2 days";

/// Flushes between two sweeps of old batch ids.
const SWEEP_EVERY: u32 = 3_000;

/// Beyond one write interval, how long a restore waits for other instances' writes to
/// land before it reads (a write is one small transaction).
const WRITE_MARGIN: Duration = Duration::from_millis(250);

/// The tables, created when missing (under an advisory lock: instances starting together).
const SCHEMA: &str = "
    SELECT pg_advisory_xact_lock(7405632017);
    CREATE TABLE IF NOT EXISTS sluice_spend (
        scope  text     NOT NULL,
        kind   smallint NOT NULL,
        period bigint   NOT NULL,
        spent  bigint   NOT NULL,
        PRIMARY KEY (scope, kind, period)
    );
    CREATE TABLE IF NOT EXISTS sluice_spend_batches (
        id text PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT now()
    );
";

/// Settings of a [`PostgresLedger`].
#[derive(Clone)]
pub struct LedgerConfig {
    /// `postgres://user@host:port/database` (a password here is taken, but belongs in
    /// [`password`](Self::password)).
    pub url: String,
    /// The password, read from the environment by the caller.
    pub password: Option<String>,
    /// Bound on each call to Postgres, connecting included.
    pub timeout: Duration,
    /// How often what was recorded is written out.
    pub flush_every: Duration,
}

impl LedgerConfig {
    /// The connection these settings describe.
    fn open(&self) -> Result<Pg, LedgerError> {
        Pg::new(&self.url, self.password.as_deref(), self.timeout).map_err(LedgerError::Url)
    }
}

impl std::fmt::Debug for LedgerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerConfig")
            .field("timeout", &self.timeout)
            .field("flush_every", &self.flush_every)
            .finish_non_exhaustive()
    }
}

/// Why the ledger could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// `[ledger] url` is not a Postgres connection URL.
    #[error("[ledger] url is not a postgres:// connection URL ({0})")]
    Url(String),
    /// Postgres did not answer, refused, or is too old.
    #[error("ledger: {0}")]
    Postgres(String),
}

/// One (scope, period kind, period start) amount.
type Key = (String, i16, i64);

/// Amounts written in one transaction under one id.
#[derive(Debug)]
struct Batch {
    id: String,
    rows: Vec<(Key, u64)>,
}

/// The Postgres store of record.
pub struct PostgresLedger {
    pg: Pg,
    /// How often every instance writes what it recorded.
    flush_every: Duration,
    /// Recorded and not yet in a batch.
    pending: parking_lot::Mutex<HashMap<Key, u64>>,
    /// The batch being written (held while a write is tried, kept when it failed: it is
    /// written again, unchanged, before anything newer).
    aside: tokio::sync::Mutex<Option<Batch>>,
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger").field("pg", &self.pg).finish_non_exhaustive()
    }
}

fn kind_code(kind: BudgetPeriod) -> i16 {
    match kind {
        BudgetPeriod::Day => 0,
        BudgetPeriod::Month => 1,
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn store_error(e: PgError) -> StoreError {
    StoreError(e.to_string())
}

impl PostgresLedger {
    /// Connects, checks the server, creates the tables when missing and starts writing
    /// out what is recorded every `flush_every` (until the ledger is dropped).
    ///
    /// # Errors
    /// When the URL is not one, Postgres does not answer within the timeout, is older than
    /// [`MIN_SERVER_VERSION`], or the tables cannot be created.
    pub async fn connect(settings: LedgerConfig) -> Result<Arc<Self>, LedgerError> {
        let pg = settings.open()?;
        let ledger = Arc::new(Self {
            pg,
            flush_every: settings.flush_every,
            pending: parking_lot::Mutex::new(HashMap::new()),
            aside: tokio::sync::Mutex::new(None),
        });
        ledger.pg.prepare(SCHEMA).await.map_err(|e| LedgerError::Postgres(e.to_string()))?;
        tokio::spawn(flush_loop(Arc::downgrade(&ledger), settings.flush_every));
        Ok(ledger)
    }

    /// Writes out what was recorded: the batch kept aside first, else a new one of
    /// everything pending.
    ///
    /// # Errors
    /// When Postgres did not take the batch (it is kept and written again next time).
    pub async fn flush(&self) -> Result<(), StoreError> {
        let mut aside = self.aside.lock().await;
        if aside.is_none() {
            let rows: Vec<(Key, u64)> = std::mem::take(&mut *self.pending.lock()).into_iter().collect();
            if rows.is_empty() {
                return Ok(());
            }
            let id = format!("{:032x}", rand::rng().random::<u128>());
            *aside = Some(Batch { id, rows });
        }
        let Some(batch) = aside.as_ref() else { return Ok(()) };
        self.write(batch).await?;
        *aside = None;
        Ok(())
    }

    /// Applies `batch` once: its id and its amounts in one transaction; an id already
    /// there means it was applied before (a write whose answer was lost).
    async fn write(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut scopes = Vec::with_capacity(batch.rows.len());
        let mut kinds = Vec::with_capacity(batch.rows.len());
        let mut periods = Vec::with_capacity(batch.rows.len());
        let mut amounts = Vec::with_capacity(batch.rows.len());
        for ((scope, kind, period), amount) in &batch.rows {
            scopes.push(scope.as_str());
            kinds.push(*kind);
            periods.push(*period);
            amounts.push(as_i64(*amount));
        }
        let id = batch.id.as_str();
        let (scopes, kinds, periods, amounts) = (&scopes, &kinds, &periods, &amounts);
        self.pg
            .run("write", async |client| {
                let tx = client.transaction().await?;
                let fresh = tx
                    .execute("INSERT INTO sluice_spend_batches (id) VALUES ($1) ON CONFLICT DO NOTHING", &[&id])
                    .await?;
                if fresh == 1 {
                    tx.execute(
                        "INSERT INTO sluice_spend (scope, kind, period, spent)
                         SELECT * FROM UNNEST($1::text[], $2::int2[], $3::int8[], $4::int8[])
                         ON CONFLICT (scope, kind, period) DO UPDATE SET spent = sluice_spend.spent + EXCLUDED.spent",
                        &[scopes, kinds, periods, amounts],
                    )
                    .await?;
                }
                tx.commit().await
            })
            .await
            .map_err(store_error)
    }

    /// Forgets batch ids older than [`BATCH_IDS_KEPT`].
    async fn sweep(&self) -> Result<(), StoreError> {
        let sql = format!("DELETE FROM sluice_spend_batches WHERE at < now() - interval '{BATCH_IDS_KEPT}'");
        let sql = sql.as_str();
        self.pg.run("sweep", async |client| client.execute(sql, &[]).await).await.map(drop).map_err(store_error)
    }

    /// What Postgres holds for `scopes` in the periods `day` and `month`.
    async fn read(&self, scopes: &[String], day: u64, month: u64) -> Result<Vec<SpentInPeriods>, StoreError> {
        let (day, month) = (as_i64(day), as_i64(month));
        let rows = self
            .pg
            .run("read", async |client| {
                client
                    .query(
                        "SELECT scope, kind, spent FROM sluice_spend
                         WHERE scope = ANY($1) AND ((kind = 0 AND period = $2) OR (kind = 1 AND period = $3))",
                        &[&scopes, &day, &month],
                    )
                    .await
            })
            .await
            .map_err(store_error)?;
        let mut spent = vec![SpentInPeriods::default(); scopes.len()];
        for row in rows {
            let (scope, kind, amount): (String, i16, i64) = (row.get(0), row.get(1), row.get(2));
            let Some(at) = scopes.iter().position(|s| *s == scope) else { continue };
            let amount = u64::try_from(amount).unwrap_or(0);
            match kind {
                0 => spent[at].day = spent[at].day.saturating_add(amount),
                _ => spent[at].month = spent[at].month.saturating_add(amount),
            }
        }
        Ok(spent)
    }

    /// What this instance recorded for `scopes` in `day` and `month` and has not written.
    async fn unwritten(&self, scopes: &[String], day: u64, month: u64, into: &mut [SpentInPeriods]) {
        let aside = self.aside.lock().await;
        let pending = self.pending.lock();
        let rows =
            aside.iter().flat_map(|b| b.rows.iter().map(|(k, a)| (k, *a))).chain(pending.iter().map(|(k, a)| (k, *a)));
        for ((scope, kind, period), amount) in rows {
            let Some(at) = scopes.iter().position(|s| s == scope) else { continue };
            match *kind {
                0 if *period == as_i64(day) => into[at].day = into[at].day.saturating_add(amount),
                1 if *period == as_i64(month) => into[at].month = into[at].month.saturating_add(amount),
                _ => {}
            }
        }
    }
}

async fn flush_loop(ledger: Weak<PostgresLedger>, every: Duration) {
    let mut flushes: u32 = 0;
    let mut failing = false;
    loop {
        tokio::time::sleep(every).await;
        let Some(ledger) = ledger.upgrade() else { return };
        match ledger.flush().await {
            Ok(()) if failing => {
                failing = false;
                tracing::warn!("ledger writes resumed");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::error!(error = %e, "ledger write failed: spend is kept here and written when Postgres answers");
            }
            Err(_) => {}
        }
        flushes = flushes.wrapping_add(1);
        if flushes.is_multiple_of(SWEEP_EVERY)
            && let Err(e) = ledger.sweep().await
        {
            tracing::warn!(error = %e, "sweeping old ledger batch ids failed");
        }
    }
}

impl SpendRecord for PostgresLedger {
    fn record(&self, scope: &str, kind: BudgetPeriod, period: u64, micros: u64) {
        if micros == 0 {
            return;
        }
        let mut pending = self.pending.lock();
        let amount = pending.entry((scope.to_owned(), kind_code(kind), as_i64(period))).or_insert(0);
        *amount = amount.saturating_add(micros);
    }

    fn spent<'a>(
        &'a self,
        scopes: &'a [String],
        day: u64,
        month: u64,
    ) -> StoreFuture<'a, Result<Vec<SpentInPeriods>, StoreError>> {
        Box::pin(async move {
            // What this instance holds back goes first; if it cannot, it is counted in below.
            let written = self.flush().await.is_ok();
            // Every other instance writes what it recorded at least this often: waiting one
            // interval takes in everything recorded anywhere before the restore began (a
            // restore is rare: after Redis lost a budget).
            tokio::time::sleep(self.flush_every + WRITE_MARGIN).await;
            let mut spent = self.read(scopes, day, month).await?;
            if !written {
                self.unwritten(scopes, day, month, &mut spent).await;
            }
            Ok(spent)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

    use super::*;
    use crate::local::LocalPostgres;

    fn settings(server: &LocalPostgres) -> LedgerConfig {
        LedgerConfig {
            url: server.url(),
            password: None,
            timeout: Duration::from_secs(5),
            flush_every: Duration::from_secs(3_600),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_written_again_is_applied_once() {
        let server = LocalPostgres::start().expect("postgres (scripts/test installs it)");
        let ledger = PostgresLedger::connect(settings(&server)).await.unwrap();
        let batch = Batch { id: "b-1".into(), rows: vec![(("tenant:acme".into(), 0, 86_400), 700)] };
        // The first answer lost, the write tried again: one batch.
        ledger.write(&batch).await.unwrap();
        ledger.write(&batch).await.unwrap();
        let scopes = ["tenant:acme".to_owned()];
        assert_eq!(ledger.read(&scopes, 86_400, 0).await.unwrap(), [SpentInPeriods { day: 700, month: 0 }]);
    }
}
