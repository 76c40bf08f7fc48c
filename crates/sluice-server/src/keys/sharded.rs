//! A map read lock-free on the request path and changed a few entries at a time: its
//! entries are spread over [`SHARDS`] shards, each behind its own `Arc`. A copy of the map
//! shares every shard; a change to the copy clones only the shards it touches (at 100,000
//! keys, about 100 entries each) before the copy is installed whole, in one atomic swap. A
//! key change therefore costs the same at ten keys as at a hundred thousand, and a reader
//! sees a change entirely or not at all.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};
use std::sync::Arc;

/// Shards per map: enough that one stays small (about a hundred entries at 100,000 keys),
/// few enough that copying the shard table (one reference count each) costs microseconds.
pub const SHARDS: usize = 1024;

/// The sharded map. Cloning it clones [`SHARDS`] `Arc`s, never an entry.
#[derive(Debug)]
pub struct Sharded<K, V> {
    shards: Vec<Arc<HashMap<K, V>>>,
}

impl<K, V> Clone for Sharded<K, V> {
    fn clone(&self) -> Self {
        Self { shards: self.shards.clone() }
    }
}

impl<K, V> Default for Sharded<K, V> {
    fn default() -> Self {
        Self { shards: (0..SHARDS).map(|_| Arc::new(HashMap::new())).collect() }
    }
}

impl<K: Hash + Eq + Clone, V: Clone> Sharded<K, V> {
    /// The value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards.get(shard_of(key))?.get(key)
    }

    /// Sets `key` to `value`, cloning its shard first if another copy shares it.
    pub fn insert(&mut self, key: K, value: V) {
        if let Some(shard) = self.shards.get_mut(shard_of(&key)) {
            Arc::make_mut(shard).insert(key, value);
        }
    }

    /// Removes `key`, cloning its shard first if another copy shares it and holds the key.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shards.get_mut(shard_of(key))?;
        if !shard.contains_key(key) {
            return None;
        }
        Arc::make_mut(shard).remove(key)
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.shards.iter().flat_map(|shard| shard.values())
    }

    /// Entries held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.len()).sum()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FromIterator<(K, V)> for Sharded<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut map = Self::default();
        for (key, value) in entries {
            map.insert(key, value);
        }
        map
    }
}

/// The shard of `key`: a fixed hash, so every copy agrees (each shard's own map keeps its
/// randomly keyed hasher).
fn shard_of<Q: Hash + ?Sized>(key: &Q) -> usize {
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
    usize::try_from(hash % SHARDS as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_changed_leaves_the_original_and_shares_the_shards_it_did_not_touch() {
        let original: Sharded<String, u32> = (0..1_000).map(|i| (format!("k{i}"), i)).collect();
        let mut copy = original.clone();
        copy.insert("k1".into(), 7);
        assert_eq!(copy.remove("k2"), Some(2));
        assert_eq!(copy.remove("absent"), None);
        assert_eq!((original.get("k1"), original.get("k2")), (Some(&1), Some(&2)));
        assert_eq!((copy.get("k1"), copy.get("k2")), (Some(&7), None));
        assert_eq!((original.len(), copy.len()), (1_000, 999));
        let shared = original.shards.iter().zip(&copy.shards).filter(|(a, b)| Arc::ptr_eq(a, b)).count();
        assert!(shared >= SHARDS - 2, "only the two shards changed are copied, {shared} shared");
        assert_eq!(copy.values().map(|v| u64::from(*v)).sum::<u64>(), (0..1_000).sum::<u64>() - 2 - 1 + 7);
    }
}
