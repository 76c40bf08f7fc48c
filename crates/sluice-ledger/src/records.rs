//! [`LedgerJobStore`]: the job store of a fleet with a ledger. Jobs and documents (files,
//! batch records) stay in the hot store (Redis); the *records* (runtime keys, tenants, the
//! audit log, and with them every budget set at run time) and the usage rollups live in
//! Postgres, so that a Redis that loses its memory takes none of them with it.
//!
//! ```text
//! sluice_records          (kind, owner, id) -> body (NULL: deleted), version of its last write, version of its first
//! sluice_record_versions  kind -> version (grows by one with every write of the kind)
//! sluice_usage            (day, group) -> the counters of UsageCounts::NAMES
//! sluice_usage_batches    id -> when it was applied (kept USAGE_BATCH_TTL)
//! sluice_meta             'epoch' -> the id of this database's data; 'imported' -> when the hot store's were copied in
//! ```
//!
//! Every write of a record bumps its kind's version row first, in the same transaction:
//! the row lock orders writers of a kind, so a compare-and-swap reads the body no other
//! writer is changing, and a reader that sees a version sees every write up to it.
//!
//! When a fleet first runs with a ledger, the records and usage its hot store already
//! holds are copied in once (marked `imported`), so turning the ledger on loses no key.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::Rng as _;
use sluice_jobs::{COUNTERS, Day};
use sluice_jobs::{
    Changes, Counts, Doc, DocKey, Failure, Job, JobFuture, JobId, JobResult, JobState, JobStore, JobStoreError,
    LeaseOutcome, NewJob, Retention, Submitted, USAGE_BATCH_TTL, UsageCounts, UsageKey,
};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use crate::pg::Pg;
use crate::{LedgerConfig, LedgerError};

/// The tables, created when missing, and this database's epoch, set once.
const SCHEMA: &str = "
    SELECT pg_advisory_xact_lock(7405632018);
    CREATE TABLE IF NOT EXISTS sluice_records (
        kind    text   NOT NULL,
        owner   text   NOT NULL,
        id      text   NOT NULL,
        body    bytea,
        version bigint NOT NULL,
        placed  bigint NOT NULL,
        PRIMARY KEY (kind, owner, id)
    );
    CREATE INDEX IF NOT EXISTS sluice_records_changes ON sluice_records (kind, owner, version);
    CREATE TABLE IF NOT EXISTS sluice_record_versions (
        kind    text PRIMARY KEY,
        version bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS sluice_usage (
        day                 integer NOT NULL,
        grp                 text    NOT NULL,
        requests            bigint  NOT NULL,
        input_tokens        bigint  NOT NULL,
        cached_input_tokens bigint  NOT NULL,
        output_tokens       bigint  NOT NULL,
        reasoning_tokens    bigint  NOT NULL,
        cost_nanos          bigint  NOT NULL,
        counted_requests    bigint  NOT NULL,
        estimated_requests  bigint  NOT NULL,
        PRIMARY KEY (day, grp)
    );
    CREATE TABLE IF NOT EXISTS sluice_usage_batches (
        id text PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS sluice_meta (
        name  text PRIMARY KEY,
        value text NOT NULL
    );
    INSERT INTO sluice_meta (name, value) VALUES ('epoch', gen_random_uuid()::text) ON CONFLICT DO NOTHING;
";

/// The usage columns, in [`UsageCounts::NAMES`] order.
const USAGE_COLUMNS: [&str; COUNTERS] = [
    "requests",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_nanos",
    "counted_requests",
    "estimated_requests",
];

/// One usage write in this many also forgets batch ids older than [`USAGE_BATCH_TTL`].
const SWEEP_ONE_IN: u32 = 64;

/// Jobs and documents in the hot store; records and usage in Postgres.
pub struct LedgerJobStore {
    hot: Arc<dyn JobStore>,
    pg: Pg,
    /// The kinds kept as records here.
    kinds: Vec<String>,
    /// `INSERT … ON CONFLICT DO UPDATE` adding a batch's usage rows.
    add_rows: String,
}

impl std::fmt::Debug for LedgerJobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerJobStore").field("hot", &self.hot).field("pg", &self.pg).finish_non_exhaustive()
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn as_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Bumps `kind`'s version and returns it; the row stays locked until the transaction ends.
async fn bump(tx: &tokio_postgres::Transaction<'_>, kind: &str) -> Result<i64, tokio_postgres::Error> {
    let row = tx
        .query_one(
            "INSERT INTO sluice_record_versions (kind, version) VALUES ($1, 1)
             ON CONFLICT (kind) DO UPDATE SET version = sluice_record_versions.version + 1
             RETURNING version",
            &[&kind],
        )
        .await?;
    Ok(row.get(0))
}

/// Writes `doc` at `version` (a deleted record written again takes a new place in the listing).
async fn upsert(tx: &tokio_postgres::Transaction<'_>, doc: &Doc, version: i64) -> Result<(), tokio_postgres::Error> {
    tx.execute(
        "INSERT INTO sluice_records (kind, owner, id, body, version, placed) VALUES ($1, $2, $3, $4, $5, $5)
         ON CONFLICT (kind, owner, id) DO UPDATE SET body = EXCLUDED.body, version = EXCLUDED.version,
             placed = CASE WHEN sluice_records.body IS NULL THEN EXCLUDED.placed ELSE sluice_records.placed END",
        &[&doc.kind, &doc.owner, &doc.id, &doc.body, &version],
    )
    .await
    .map(drop)
}

impl LedgerJobStore {
    /// Connects to the ledger named by `settings`, creates its tables when missing, and
    /// keeps the record kinds `records` names (each with the owner its records are
    /// under) and the usage rollups there; everything else goes to `hot`. The first time
    /// a fleet does so, what `hot` holds of those records, and of usage within `usage`,
    /// is copied in.
    ///
    /// # Errors
    /// When the URL is not one, or Postgres does not answer, is too old or refuses the
    /// tables. A hot store that cannot be read for the copy is logged and the copy tried
    /// again at the next start.
    pub async fn connect(
        settings: &LedgerConfig,
        hot: Arc<dyn JobStore>,
        records: &[(&str, &str)],
        usage: Retention,
    ) -> Result<Self, LedgerError> {
        let pg = settings.open()?;
        pg.prepare(SCHEMA).await.map_err(|e| LedgerError::Postgres(e.to_string()))?;
        let assignments: Vec<String> =
            USAGE_COLUMNS.iter().map(|c| format!("{c} = sluice_usage.{c} + EXCLUDED.{c}")).collect();
        let add_rows = format!(
            "INSERT INTO sluice_usage (day, grp, {columns})
             SELECT * FROM UNNEST($1::int4[], $2::text[], {arrays})
             ON CONFLICT (day, grp) DO UPDATE SET {assignments}",
            columns = USAGE_COLUMNS.join(", "),
            arrays = (3..3 + COUNTERS).map(|i| format!("${i}::int8[]")).collect::<Vec<_>>().join(", "),
            assignments = assignments.join(", "),
        );
        let kinds = records.iter().map(|(kind, _)| (*kind).to_owned()).collect();
        let store = Self { hot, pg, kinds, add_rows };
        if let Err(e) = store.import(records, usage).await {
            tracing::error!(error = %e, "copying runtime keys and usage from the job store into the ledger failed; tried again at the next start");
        }
        Ok(store)
    }

    fn is_record(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k == kind)
    }

    /// `Ok` when `kind`'s records are kept here.
    fn kept(&self, kind: &str) -> Result<(), JobStoreError> {
        if self.is_record(kind) {
            return Ok(());
        }
        Err(JobStoreError(format!("records of kind `{kind}` are not kept in the ledger")))
    }

    async fn imported(&self) -> Result<bool, JobStoreError> {
        let row = self
            .run("read", async |c| c.query_opt("SELECT 1 FROM sluice_meta WHERE name = 'imported'", &[]).await)
            .await?;
        Ok(row.is_some())
    }

    /// Copies the hot store's records and usage in, once for the fleet.
    async fn import(&self, records: &[(&str, &str)], usage: Retention) -> Result<(), JobStoreError> {
        if self.imported().await? {
            return Ok(());
        }
        let mut docs = Vec::new();
        for (kind, owner) in records {
            // Listed newest first: written oldest first, so the listing keeps its order.
            docs.extend(self.hot.list_docs(kind, owner).await?.into_iter().rev());
        }
        let rows = self.hot.usage_between(usage.first_kept(), usage.today).await?;
        let (count, days) = (docs.len(), rows.len());
        let batch = UsageArrays::of(&rows);
        let add_rows = self.add_rows.as_str();
        let (docs, batch) = (&docs, &batch);
        let copied = self
            .run("import", async |c| {
                let tx = c.transaction().await?;
                tx.execute("SELECT pg_advisory_xact_lock(7405632018)", &[]).await?;
                let marked = tx
                    .execute(
                        "INSERT INTO sluice_meta (name, value) VALUES ('imported', now()::text) ON CONFLICT DO NOTHING",
                        &[],
                    )
                    .await?;
                if marked == 0 {
                    return Ok(false);
                }
                for doc in docs {
                    let version = bump(&tx, &doc.kind).await?;
                    upsert(&tx, doc, version).await?;
                }
                tx.execute(add_rows, &batch.refs()).await?;
                tx.commit().await?;
                Ok(true)
            })
            .await?;
        if copied {
            tracing::info!(records = count, usage_rows = days, "copied runtime keys and usage into the ledger");
        }
        Ok(())
    }

    async fn run<T>(
        &self,
        what: &'static str,
        call: impl AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, JobStoreError> {
        self.pg.run(what, call).await.map_err(JobStoreError::from_display)
    }

    async fn write_record(&self, doc: Doc, expected: Option<Option<Vec<u8>>>) -> Result<Option<u64>, JobStoreError> {
        self.kept(&doc.kind)?;
        let doc = &doc;
        let expected = expected.as_ref();
        let version = self
            .run("write record", async |c| {
                let tx = c.transaction().await?;
                let version = bump(&tx, &doc.kind).await?;
                if let Some(expected) = expected {
                    let held = tx
                        .query_opt(
                            "SELECT body FROM sluice_records WHERE kind = $1 AND owner = $2 AND id = $3",
                            &[&doc.kind, &doc.owner, &doc.id],
                        )
                        .await?
                        .and_then(|row| row.get::<_, Option<Vec<u8>>>(0));
                    if held.as_ref() != expected.as_ref() {
                        // Dropped unfinished: rolled back, the version bump with it.
                        return Ok(None);
                    }
                }
                upsert(&tx, doc, version).await?;
                tx.commit().await?;
                Ok(Some(version))
            })
            .await?;
        Ok(version.map(as_u64))
    }

    async fn version(&self, kind: &str) -> Result<u64, JobStoreError> {
        self.kept(kind)?;
        let row = self
            .run("read", async |c| {
                c.query_opt("SELECT version FROM sluice_record_versions WHERE kind = $1", &[&kind]).await
            })
            .await?;
        Ok(row.map_or(0, |row| as_u64(row.get(0))))
    }

    async fn changes(&self, kind: &str, owner: &str, since: u64) -> Result<Changes, JobStoreError> {
        self.kept(kind)?;
        let since = as_i64(since);
        let (version, docs) = self
            .run("read", async |c| {
                // One snapshot: the version and the records it covers, read at one instant.
                let tx = c.build_transaction().isolation_level(tokio_postgres::IsolationLevel::RepeatableRead);
                let tx = tx.read_only(true).start().await?;
                let version = tx
                    .query_opt("SELECT version FROM sluice_record_versions WHERE kind = $1", &[&kind])
                    .await?
                    .map_or(0, |row| row.get::<_, i64>(0));
                if since > version {
                    return Ok((version, None));
                }
                let rows = tx
                    .query(
                        "SELECT id, body FROM sluice_records WHERE kind = $1 AND owner = $2 AND version > $3
                         ORDER BY id",
                        &[&kind as &(dyn ToSql + Sync), &owner, &since],
                    )
                    .await?;
                tx.commit().await?;
                Ok((version, Some(rows.iter().map(|row| (row.get(0), row.get(1))).collect())))
            })
            .await?;
        Ok(Changes { version: as_u64(version), docs })
    }

    async fn record(&self, key: DocKey<'_>) -> Result<Option<Vec<u8>>, JobStoreError> {
        let row = self
            .run("read", async |c| {
                c.query_opt(
                    "SELECT body FROM sluice_records WHERE kind = $1 AND owner = $2 AND id = $3",
                    &[&key.kind, &key.owner, &key.id],
                )
                .await
            })
            .await?;
        Ok(row.and_then(|row| row.get(0)))
    }

    async fn records(&self, kind: &str, owner: &str) -> Result<Vec<Doc>, JobStoreError> {
        let rows = self
            .run("read", async |c| {
                c.query(
                    "SELECT id, body FROM sluice_records WHERE kind = $1 AND owner = $2 AND body IS NOT NULL
                     ORDER BY placed DESC",
                    &[&kind, &owner],
                )
                .await
            })
            .await?;
        Ok(rows
            .iter()
            .map(|row| Doc { kind: kind.to_owned(), owner: owner.to_owned(), id: row.get(0), body: row.get(1) })
            .collect())
    }

    async fn delete_record(&self, key: DocKey<'_>) -> Result<bool, JobStoreError> {
        self.run("delete record", async |c| {
            let tx = c.transaction().await?;
            let version = bump(&tx, key.kind).await?;
            let gone = tx
                .execute(
                    "UPDATE sluice_records SET body = NULL, version = $4
                     WHERE kind = $1 AND owner = $2 AND id = $3 AND body IS NOT NULL",
                    &[&key.kind, &key.owner, &key.id, &version],
                )
                .await?;
            if gone == 0 {
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn epoch_id(&self) -> Result<Option<String>, JobStoreError> {
        let row = self
            .run("read", async |c| c.query_opt("SELECT value FROM sluice_meta WHERE name = 'epoch'", &[]).await)
            .await?;
        Ok(row.map(|row| row.get(0)))
    }

    async fn add_rollups(
        &self,
        batch: &str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> Result<bool, JobStoreError> {
        let first = keep.first_kept();
        let kept: Vec<_> = rows.into_iter().filter(|(k, _)| k.day >= first).collect();
        let arrays = UsageArrays::of(&kept);
        let (arrays, add_rows) = (&arrays, self.add_rows.as_str());
        let first = i32::try_from(first).unwrap_or(i32::MAX);
        let sweep = rand::rng().random_ratio(1, SWEEP_ONE_IN);
        let ttl = format!("{} seconds", USAGE_BATCH_TTL.as_secs());
        let ttl = ttl.as_str();
        self.run("add usage", async |c| {
            let tx = c.transaction().await?;
            let fresh = tx
                .execute("INSERT INTO sluice_usage_batches (id) VALUES ($1) ON CONFLICT DO NOTHING", &[&batch])
                .await?;
            if fresh == 0 {
                return Ok(false);
            }
            tx.execute(add_rows, &arrays.refs()).await?;
            tx.execute("DELETE FROM sluice_usage WHERE day < $1", &[&first]).await?;
            if sweep {
                tx.execute("DELETE FROM sluice_usage_batches WHERE at < now() - $1::text::interval", &[&ttl]).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn rollups(&self, first: Day, last: Day) -> Result<Vec<(UsageKey, UsageCounts)>, JobStoreError> {
        let (first, last) = (i32::try_from(first).unwrap_or(i32::MAX), i32::try_from(last).unwrap_or(i32::MAX));
        let sql =
            format!("SELECT day, grp, {} FROM sluice_usage WHERE day BETWEEN $1 AND $2", USAGE_COLUMNS.join(", "));
        let sql = sql.as_str();
        let rows = self.run("read usage", async |c| c.query(sql, &[&first, &last]).await).await?;
        let mut out = BTreeMap::new();
        for row in &rows {
            let day = Day::try_from(row.get::<_, i32>(0)).unwrap_or(0);
            let Some(key) = UsageKey::parse(day, row.get(1)) else { continue };
            let values = std::array::from_fn(|i| as_u64(row.get(i + 2)));
            out.insert(key, UsageCounts::from_values(values));
        }
        Ok(out.into_iter().collect())
    }
}

/// A batch of usage rows as the columns of one `UNNEST`.
#[derive(Default)]
struct UsageArrays {
    days: Vec<i32>,
    groups: Vec<String>,
    counters: [Vec<i64>; COUNTERS],
}

impl UsageArrays {
    /// `rows` as the arrays of the usage upsert, one row per key (a key twice in `rows`
    /// is added up first: one statement may not change a row twice).
    fn of(rows: &[(UsageKey, UsageCounts)]) -> Self {
        let mut merged: BTreeMap<(Day, String), UsageCounts> = BTreeMap::new();
        for (key, counts) in rows {
            merged.entry((key.day, key.group())).or_default().add(counts);
        }
        let mut arrays = Self::default();
        for ((day, group), counts) in merged {
            arrays.days.push(i32::try_from(day).unwrap_or(i32::MAX));
            arrays.groups.push(group);
            for (column, value) in arrays.counters.iter_mut().zip(counts.values()) {
                column.push(as_i64(value));
            }
        }
        arrays
    }

    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        let mut refs: Vec<&(dyn ToSql + Sync)> = vec![&self.days, &self.groups];
        refs.extend(self.counters.iter().map(|c| c as &(dyn ToSql + Sync)));
        refs
    }
}

impl JobStore for LedgerJobStore {
    fn submit(&self, job: NewJob) -> JobFuture<'_, Submitted> {
        self.hot.submit(job)
    }

    fn submit_many(&self, jobs: Vec<NewJob>) -> JobFuture<'_, Vec<Submitted>> {
        self.hot.submit_many(jobs)
    }

    fn lease_next<'a>(&'a self, worker: &'a str, visibility: std::time::Duration) -> JobFuture<'a, LeaseOutcome> {
        self.hot.lease_next(worker, visibility)
    }

    fn renew<'a>(&'a self, id: &'a JobId, token: u64, visibility: std::time::Duration) -> JobFuture<'a, bool> {
        self.hot.renew(id, token, visibility)
    }

    fn complete<'a>(&'a self, id: &'a JobId, token: u64, result: JobResult) -> JobFuture<'a, bool> {
        self.hot.complete(id, token, result)
    }

    fn fail<'a>(&'a self, id: &'a JobId, token: u64, failure: Failure) -> JobFuture<'a, Option<JobState>> {
        self.hot.fail(id, token, failure)
    }

    fn get<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<Job>> {
        self.hot.get(id)
    }

    fn counts(&self) -> JobFuture<'_, Counts> {
        self.hot.counts()
    }

    fn cancel<'a>(&'a self, id: &'a JobId) -> JobFuture<'a, Option<JobState>> {
        self.hot.cancel(id)
    }

    fn put_doc(&self, doc: Doc) -> JobFuture<'_, ()> {
        if self.is_record(&doc.kind) {
            let refused = JobStoreError(format!("`{}` documents are records: written with put_record", doc.kind));
            return Box::pin(std::future::ready(Err(refused)));
        }
        self.hot.put_doc(doc)
    }

    fn get_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, Option<Vec<u8>>> {
        if self.is_record(key.kind) { Box::pin(self.record(key)) } else { self.hot.get_doc(key) }
    }

    fn delete_doc<'a>(&'a self, key: DocKey<'a>) -> JobFuture<'a, bool> {
        if self.is_record(key.kind) { Box::pin(self.delete_record(key)) } else { self.hot.delete_doc(key) }
    }

    fn list_docs<'a>(&'a self, kind: &'a str, owner: &'a str) -> JobFuture<'a, Vec<Doc>> {
        if self.is_record(kind) { Box::pin(self.records(kind, owner)) } else { self.hot.list_docs(kind, owner) }
    }

    fn put_record(&self, doc: Doc) -> JobFuture<'_, u64> {
        Box::pin(async move { Ok(self.write_record(doc, None).await?.unwrap_or_default()) })
    }

    fn swap_record(&self, doc: Doc, expected: Option<Vec<u8>>) -> JobFuture<'_, Option<u64>> {
        Box::pin(self.write_record(doc, Some(expected)))
    }

    fn doc_version<'a>(&'a self, kind: &'a str) -> JobFuture<'a, u64> {
        Box::pin(self.version(kind))
    }

    fn epoch(&self) -> JobFuture<'_, Option<String>> {
        Box::pin(self.epoch_id())
    }

    fn records_since<'a>(&'a self, kind: &'a str, owner: &'a str, since: u64) -> JobFuture<'a, Changes> {
        Box::pin(self.changes(kind, owner, since))
    }

    fn add_usage<'a>(
        &'a self,
        batch: &'a str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> JobFuture<'a, bool> {
        Box::pin(self.add_rollups(batch, rows, keep))
    }

    fn usage_between(&self, first: Day, last: Day) -> JobFuture<'_, Vec<(UsageKey, UsageCounts)>> {
        Box::pin(self.rollups(first, last))
    }
}
