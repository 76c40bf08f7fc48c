//! Usage rollups in the embedded store's `redb` file.
//!
//! ```text
//! usage               (day, group)      -> 8 bytes big-endian per counter, in `UsageCounts::NAMES` order
//! usage_batches       id                -> applied_at (store ms)
//! usage_batch_ages    (applied_at, id)  -> ()         pruned USAGE_BATCH_TTL after they were applied
//! ```
//!
//! A batch is added in one write transaction that first looks for its id in
//! `usage_batches`: a batch already applied is not added again.
//!
//! A usage row written before the last two counters (counted and estimated requests)
//! existed reads them as 0.

use redb::{ReadableTable as _, TableDefinition};

use crate::store::millis;
use crate::usage::{Day, Retention, USAGE_BATCH_TTL, UsageCounts, UsageKey};

const USAGE: TableDefinition<(u32, &str), &[u8]> = TableDefinition::new("usage");
const BATCHES: TableDefinition<&str, u64> = TableDefinition::new("usage_batches");
const BATCH_AGES: TableDefinition<(u64, &str), ()> = TableDefinition::new("usage_batch_ages");

/// Batch ids forgotten per write, at most (more than one flush adds, so pruning keeps pace).
const PRUNE_BATCH: usize = 16;

fn encode(counts: &UsageCounts) -> Vec<u8> {
    counts.values().iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn decode(bytes: &[u8]) -> UsageCounts {
    UsageCounts::from_values(std::array::from_fn(|i| {
        bytes.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_be_bytes)
    }))
}

/// Adds `rows` to their rollups as batch `batch` at store time `now`, unless that batch was
/// applied before (false), and forgets the days before the retention and batch ids older
/// than [`USAGE_BATCH_TTL`].
pub(crate) fn add(
    txn: &redb::WriteTransaction,
    now: u64,
    batch: &str,
    rows: &[(UsageKey, UsageCounts)],
    keep: Retention,
) -> Result<bool, redb::Error> {
    forget_batches(txn, now)?;
    let mut batches = txn.open_table(BATCHES)?;
    if batches.get(batch)?.is_some() {
        return Ok(false);
    }
    batches.insert(batch, now)?;
    txn.open_table(BATCH_AGES)?.insert((now, batch), ())?;
    let mut table = txn.open_table(USAGE)?;
    for (key, counts) in rows.iter().filter(|(k, _)| k.day >= keep.first_kept()) {
        let group = key.group();
        let mut total = table.get((key.day, group.as_str()))?.map(|v| decode(v.value())).unwrap_or_default();
        total.add(counts);
        table.insert((key.day, group.as_str()), encode(&total).as_slice())?;
    }
    let first = keep.first_kept();
    table.retain_in(..(first, ""), |_, _| false)?;
    Ok(true)
}

/// Forgets up to [`PRUNE_BATCH`] batch ids applied more than [`USAGE_BATCH_TTL`] before `now`.
fn forget_batches(txn: &redb::WriteTransaction, now: u64) -> Result<(), redb::Error> {
    let Some(before) = now.checked_sub(millis(USAGE_BATCH_TTL)) else { return Ok(()) };
    let mut ages = txn.open_table(BATCH_AGES)?;
    let old: Vec<(u64, String)> = ages
        .range(..(before, ""))?
        .take(PRUNE_BATCH)
        .map(|entry| entry.map(|(k, _)| (k.value().0, k.value().1.to_owned())))
        .collect::<Result<_, _>>()?;
    let mut batches = txn.open_table(BATCHES)?;
    for (at, id) in old {
        ages.remove((at, id.as_str()))?;
        batches.remove(id.as_str())?;
    }
    Ok(())
}

/// The rollups of the days from `first` to `last`.
pub(crate) fn between(
    txn: &redb::ReadTransaction,
    first: Day,
    last: Day,
) -> Result<Vec<(UsageKey, UsageCounts)>, redb::Error> {
    let table = match txn.open_table(USAGE) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for entry in table.range((first, "")..(last.saturating_add(1), ""))? {
        let (key, value) = entry?;
        let (day, group) = key.value();
        if let Some(key) = UsageKey::parse(day, group) {
            out.push((key, decode(value.value())));
        }
    }
    Ok(out)
}
