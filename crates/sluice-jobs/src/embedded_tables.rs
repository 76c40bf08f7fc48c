//! The job tables of the embedded store (listed in [`crate::embedded`]) and the changes
//! that keep them in step, each inside the caller's write transaction at store time `now`.

use redb::{ReadableTable as _, TableDefinition};

use crate::embedded_docs;
use crate::job::{Job, JobId, JobState, LeaseOutcome};
use crate::machine;
use crate::redis_store::RETENTION;
use crate::store::millis;

pub(crate) type Txn = redb::WriteTransaction;

pub(crate) const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("jobs");
pub(crate) const READY: TableDefinition<(u8, u64), &str> = TableDefinition::new("ready");
pub(crate) const DELAYED: TableDefinition<(u64, u64), &str> = TableDefinition::new("delayed");
pub(crate) const LEASES: TableDefinition<(u64, u64), &str> = TableDefinition::new("leases");
pub(crate) const DEAD: TableDefinition<u64, &str> = TableDefinition::new("dead_letter");
pub(crate) const FINISHED: TableDefinition<(u64, u64), &str> = TableDefinition::new("finished");
pub(crate) const IDEMPOTENCY: TableDefinition<(&str, &str), &str> = TableDefinition::new("idempotency");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Most delayed or expired jobs one lease call moves (the rest follow on the next call).
pub(crate) const MOVE_BATCH: usize = 256;

/// Finished jobs retired per job that finishes (so retirement keeps pace without a timer).
pub(crate) const RETIRE_BATCH: usize = 4;

/// Changes a job that is running under a lease, inside `txn` at store time `now`, keeping
/// the lease, delay, dead-letter and finished tables in step; a job that finishes retires
/// a few that finished more than [`RETENTION`] ago. `None` when the job is unknown or its
/// lease was lost.
pub(crate) fn apply_lease_change<T>(
    txn: &Txn,
    id: &JobId,
    now: u64,
    change: impl FnOnce(&mut Job) -> Result<T, machine::Stale>,
) -> Result<Option<T>, redb::Error> {
    let mut jobs = txn.open_table(JOBS)?;
    let Some(mut job) = load(&jobs, id.as_str())? else { return Ok(None) };
    let held = (job.lease_until, job.seq);
    let Ok(out) = change(&mut job) else { return Ok(None) };
    let mut leases = txn.open_table(LEASES)?;
    leases.remove(held)?;
    match job.state {
        JobState::Running => drop(leases.insert((job.lease_until, job.seq), id.as_str())?),
        JobState::Delayed => drop(txn.open_table(DELAYED)?.insert((job.not_before, job.seq), id.as_str())?),
        JobState::DeadLetter => drop(txn.open_table(DEAD)?.insert(job.seq, id.as_str())?),
        JobState::Completed | JobState::Failed => drop(txn.open_table(FINISHED)?.insert((now, job.seq), id.as_str())?),
        _ => {}
    }
    save(&mut jobs, &job)?;
    drop(jobs);
    retire(txn, now, RETIRE_BATCH)?;
    Ok(Some(out))
}

/// Removes up to `most` jobs that finished more than [`RETENTION`] before `now`, with
/// their idempotency keys (as the Redis store lets them expire).
pub(crate) fn retire(txn: &Txn, now: u64, most: usize) -> Result<(), redb::Error> {
    let Some(before) = now.checked_sub(millis(RETENTION)) else { return Ok(()) };
    let mut finished = txn.open_table(FINISHED)?;
    let old: Vec<((u64, u64), String)> = finished
        .range(..(before, u64::MAX))?
        .take(most)
        .filter_map(Result::ok)
        .map(|(k, v)| (k.value(), v.value().to_owned()))
        .collect();
    let mut jobs = txn.open_table(JOBS)?;
    let mut idempotency = txn.open_table(IDEMPOTENCY)?;
    for (key, id) in old {
        finished.remove(key)?;
        if let Some(job) = load(&jobs, &id)? {
            if let Some(idem) = &job.idempotency_key {
                idempotency.remove((job.tenant.as_str(), idem.as_str()))?;
            }
            jobs.remove(id.as_str())?;
        }
    }
    Ok(())
}

/// Creates every table, expires every lease of the previous process, and returns the
/// clock's starting point.
pub(crate) fn open_tables(txn: &Txn) -> Result<u64, redb::Error> {
    txn.open_table(JOBS)?;
    txn.open_table(READY)?;
    txn.open_table(DELAYED)?;
    txn.open_table(DEAD)?;
    txn.open_table(FINISHED)?;
    txn.open_table(IDEMPOTENCY)?;
    embedded_docs::open_tables(txn)?;
    let base = txn.open_table(META)?.get("clock")?.map_or(0, |v| v.value()).saturating_add(1);
    let mut leases = txn.open_table(LEASES)?;
    let held: Vec<((u64, u64), String)> = leases
        .iter()?
        .filter_map(Result::ok)
        .map(|(k, v)| (k.value(), v.value().to_owned()))
        .filter(|((until, _), _)| *until > 0)
        .collect();
    let mut jobs = txn.open_table(JOBS)?;
    for ((until, seq), id) in held {
        leases.remove((until, seq))?;
        leases.insert((0, seq), id.as_str())?;
        if let Some(mut job) = load(&jobs, &id)? {
            job.lease_until = 0;
            save(&mut jobs, &job)?;
        }
    }
    Ok(base)
}

pub(crate) fn corrupt(e: serde_json::Error) -> redb::Error {
    redb::Error::Corrupted(format!("job record: {e}"))
}

pub(crate) fn load(
    jobs: &impl redb::ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<Option<Job>, redb::Error> {
    match jobs.get(id)? {
        Some(bytes) => serde_json::from_slice(bytes.value()).map(Some).map_err(corrupt),
        None => Ok(None),
    }
}

pub(crate) fn save(jobs: &mut redb::Table<&str, &[u8]>, job: &Job) -> Result<(), redb::Error> {
    let bytes = serde_json::to_vec(job).map_err(corrupt)?;
    jobs.insert(job.id.as_str(), bytes.as_slice())?;
    Ok(())
}

/// A `(due time, sequence)` key and the job id stored under it.
type DueEntry = ((u64, u64), String);

/// The first [`MOVE_BATCH`] entries of a `(due time, sequence)`-keyed table that are due
/// at `now`, oldest first: what one pass moves, so that a long backlog is worked in steps.
fn due_entries(table: &redb::Table<(u64, u64), &str>, now: u64) -> Result<Vec<DueEntry>, redb::Error> {
    let due = table
        .range((0, 0)..=(now, u64::MAX))?
        .take(MOVE_BATCH)
        .map(|entry| entry.map(|(k, v)| (k.value(), v.value().to_owned())))
        .collect::<Result<_, _>>()?;
    Ok(due)
}

pub(crate) fn promote_due(
    jobs: &mut redb::Table<&str, &[u8]>,
    ready: &mut redb::Table<(u8, u64), &str>,
    delayed: &mut redb::Table<(u64, u64), &str>,
    now: u64,
) -> Result<(), redb::Error> {
    let due = due_entries(delayed, now)?;
    for (key, id) in due {
        delayed.remove(key)?;
        let Some(mut job) = load(jobs, &id)? else { continue };
        if machine::due(&job, now) {
            machine::ready(&mut job);
            ready.insert(machine::ready_key(&job), id.as_str())?;
            save(jobs, &job)?;
        }
    }
    Ok(())
}

pub(crate) fn recover_expired(
    jobs: &mut redb::Table<&str, &[u8]>,
    ready: &mut redb::Table<(u8, u64), &str>,
    leases: &mut redb::Table<(u64, u64), &str>,
    dead: &mut redb::Table<u64, &str>,
    now: u64,
) -> Result<LeaseOutcome, redb::Error> {
    let expired = due_entries(leases, now)?;
    let mut outcome = LeaseOutcome::default();
    for (key, id) in expired {
        leases.remove(key)?;
        let Some(mut job) = load(jobs, &id)? else { continue };
        if !machine::expired(&job, now) {
            continue;
        }
        outcome.recovered += 1;
        if machine::recover(&mut job) == JobState::DeadLetter {
            outcome.recovered_dead += 1;
            dead.insert(job.seq, id.as_str())?;
        } else {
            ready.insert(machine::ready_key(&job), id.as_str())?;
        }
        save(jobs, &job)?;
    }
    Ok(outcome)
}
