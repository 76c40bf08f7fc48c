//! Usage rollups in Redis: one hash per day, under the store's hash tag.
//!
//! ```text
//! {P:jobs}:usage:<day>   HASH   "<counter>|<group>" -> count   expires when the retention ends
//! ```
//!
//! Instances add with `HINCRBY` (atomic, so several may add to one row), the lot of one
//! flush in one `MULTI`; each day's hash expires `retention` days after the day ends.

use std::collections::BTreeMap;

use super::RedisJobStore;
use crate::store::JobStoreError;
use crate::usage::{DAY_SECS, Day, Retention, UsageCounts, UsageKey};

impl RedisJobStore {
    fn usage_key(&self, day: Day) -> String {
        self.key(&format!("usage:{day}"))
    }

    pub(super) async fn add_rollups(
        &self,
        rows: Vec<(UsageKey, UsageCounts)>,
        keep: Retention,
    ) -> Result<(), JobStoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        let mut days = Vec::new();
        for (key, counts) in rows.iter().filter(|(k, _)| k.day >= keep.first_kept()) {
            let (hash, group) = (self.usage_key(key.day), key.group());
            for (name, value) in UsageCounts::NAMES.iter().zip(counts.values()) {
                if value > 0 {
                    pipe.cmd("HINCRBY").arg(&hash).arg(format!("{name}|{group}")).arg(value).ignore();
                }
            }
            days.push(key.day);
        }
        days.sort_unstable();
        days.dedup();
        for day in days {
            let until = u64::from(day).saturating_add(u64::from(keep.days)).saturating_add(1).saturating_mul(DAY_SECS);
            pipe.cmd("EXPIREAT").arg(self.usage_key(day)).arg(until).ignore();
        }
        self.query::<()>(pipe).await
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
                let mut values = [0; crate::usage::COUNTERS];
                values[index] = value;
                rows.entry(key).or_default().add(&UsageCounts::from_values(values));
            }
        }
        Ok(rows.into_iter().collect())
    }
}
