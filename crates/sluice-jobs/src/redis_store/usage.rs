//! Usage rollups in Redis: one hash per day, under the store's hash tag.
//!
//! ```text
//! {P:jobs}:usage:<day>         HASH    "<counter>|<group>" -> count   expires when the retention ends
//! {P:jobs}:usage-batch:<id>    STRING  "1": batch <id> was added      expires after USAGE_BATCH_TTL
//! ```
//!
//! Instances add with `HINCRBY` (so several may add to one row), the lot of one flush in one
//! script (`add_usage.lua`) that first sets the batch's marker with `SET NX EX` and adds
//! nothing when it was already set: a batch written again (its first write landed though
//! the caller timed out) counts once. Each day's hash expires `retention` days after the
//! day ends.

use std::collections::BTreeMap;

use super::RedisJobStore;
use crate::store::JobStoreError;
use crate::usage::{DAY_SECS, Day, Retention, USAGE_BATCH_TTL, UsageCounts, UsageKey};

impl RedisJobStore {
    fn usage_key(&self, day: Day) -> String {
        self.key(&format!("usage:{day}"))
    }

    pub(super) async fn add_rollups(
        &self,
        batch: &str,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> Result<bool, JobStoreError> {
        let rows: Vec<_> = rows.into_iter().filter(|(k, _)| k.day >= keep.first_kept()).collect();
        let mut days: Vec<Day> = rows.iter().map(|(k, _)| k.day).collect();
        days.sort_unstable();
        days.dedup();
        let mut invocation = self.scripts.add_usage.prepare_invoke();
        invocation.key(self.key(&format!("usage-batch:{batch}")));
        for day in &days {
            invocation.key(self.usage_key(*day));
        }
        invocation.arg(USAGE_BATCH_TTL.as_secs()).arg(UsageCounts::NAMES.len());
        for name in UsageCounts::NAMES {
            invocation.arg(name);
        }
        for day in &days {
            let until = u64::from(*day).saturating_add(u64::from(keep.days)).saturating_add(1).saturating_mul(DAY_SECS);
            invocation.arg(until);
        }
        for (key, counts) in &rows {
            // 1-based, as the script's day hashes follow the marker in KEYS.
            let index = days.binary_search(&key.day).unwrap_or_default() + 1;
            invocation.arg(index).arg(key.group());
            for value in counts.values() {
                invocation.arg(value);
            }
        }
        let added: i64 = self.call(invocation).await?;
        Ok(added == 1)
    }

    pub(super) async fn rollups(&self, first: Day, last: Day) -> Result<Vec<(UsageKey, UsageCounts)>, JobStoreError> {
        let mut pipe = redis::pipe();
        for day in first..=last {
            pipe.cmd("HGETALL").arg(self.usage_key(day));
        }
        let hashes: Vec<Vec<(String, u64)>> = self.query(pipe).await?;
        let mut rows: BTreeMap<UsageKey, UsageCounts> = BTreeMap::new();
        for (day, fields) in (first..=last).zip(hashes) {
            for (field, value) in fields {
                let Some((name, group)) = field.split_once('|') else { continue };
                let (Some(index), Some(key)) =
                    (UsageCounts::NAMES.iter().position(|n| *n == name), UsageKey::parse(day, group))
                else {
                    continue;
                };
                let mut values = UsageCounts::default().values();
                values[index] = value;
                rows.entry(key).or_default().add(&UsageCounts::from_values(values));
            }
        }
        Ok(rows.into_iter().collect())
    }
}
