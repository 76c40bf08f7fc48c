//! Usage rollups in the embedded store's `redb` file.
//!
//! ```text
//! usage   (day, group)   -> 8 × u64 big-endian   (requests, input, cached, output, reasoning, cost,
//!                                                   counted requests, estimated requests)
//! ```
//!
//! A row written before the last two counters existed reads them as 0.

use redb::{ReadableTable as _, TableDefinition};

use crate::usage::{Day, Retention, UsageCounts, UsageKey};

const USAGE: TableDefinition<(u32, &str), &[u8]> = TableDefinition::new("usage");

fn encode(counts: &UsageCounts) -> Vec<u8> {
    counts.values().iter().flat_map(|v| v.to_be_bytes()).collect()
}

fn decode(bytes: &[u8]) -> UsageCounts {
    UsageCounts::from_values(std::array::from_fn(|i| {
        bytes.get(i * 8..i * 8 + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_be_bytes)
    }))
}

/// Adds `rows` to their rollups and forgets the days before the retention.
pub(crate) fn add(
    txn: &redb::WriteTransaction,
    rows: &[(UsageKey, UsageCounts)],
    keep: Retention,
) -> Result<(), redb::Error> {
    let mut table = txn.open_table(USAGE)?;
    for (key, counts) in rows.iter().filter(|(k, _)| k.day >= keep.first_kept()) {
        let group = key.group();
        let mut total = table.get((key.day, group.as_str()))?.map(|v| decode(v.value())).unwrap_or_default();
        total.add(counts);
        table.insert((key.day, group.as_str()), encode(&total).as_slice())?;
    }
    let first = keep.first_kept();
    table.retain_in(..(first, ""), |_, _| false)?;
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
