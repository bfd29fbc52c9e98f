//! Sections of the served view and their order-independent fingerprints.
//!
//! Each served item is hashed (SHA-256 of its canonical JSON, the exact bytes
//! a client receives for it); a section's accumulator is the lane-wise
//! wrapping sum of its items' digests. Adding or removing one item is O(1)
//! on the accumulator and O(log n) in the map, and the sum does not depend on
//! the order in which items arrived: two processes holding the same items
//! compute the same fingerprint. Lease times and anything region-local are
//! not part of served items, so heartbeats leave fingerprints unchanged.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A section's fingerprint: 32 lowercase hex digits, also its `ETag`.
pub type Fingerprint = String;

/// Digest of one served item: the SHA-256 of its canonical JSON, as four
/// little-endian lanes. Equal digests, equal served JSON.
pub type ItemDigest = [u64; 4];

fn digest_of<V: Serialize>(value: &V) -> ItemDigest {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    let mut lanes = [0u64; 4];
    for (lane, chunk) in lanes.iter_mut().zip(hash.chunks_exact(8)) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        *lane = u64::from_le_bytes(word);
    }
    lanes
}

fn fingerprint_of(name: &str, len: usize, sum: ItemDigest) -> Fingerprint {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update((len as u64).to_le_bytes());
    for lane in sum {
        hasher.update(lane.to_le_bytes());
    }
    hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The served items of one kind, sorted by key, with their fingerprint kept
/// up to date on every change.
#[derive(Debug, Clone)]
pub struct Section<K, V> {
    name: &'static str,
    items: BTreeMap<K, (V, ItemDigest)>,
    sum: ItemDigest,
    version: u64,
}

impl<K: Ord, V: Serialize + PartialEq> Section<K, V> {
    /// An empty section; `name` makes equal content in different sections
    /// fingerprint differently.
    pub fn new(name: &'static str) -> Self {
        Self { name, items: BTreeMap::new(), sum: [0; 4], version: 0 }
    }

    /// Inserts or replaces the item at `key`. Returns whether the served
    /// content changed.
    pub fn upsert(&mut self, key: K, value: V) -> bool {
        let digest = digest_of(&value);
        if let Some((_, old)) = self.items.get(&key)
            && *old == digest
        {
            return false;
        }
        if let Some((_, old)) = self.items.insert(key, (value, digest)) {
            self.sub(old);
        }
        self.add(digest);
        self.version += 1;
        true
    }

    /// Removes the item at `key`. Returns whether it was served.
    pub fn remove(&mut self, key: &K) -> bool {
        match self.items.remove(key) {
            Some((_, old)) => {
                self.sub(old);
                self.version += 1;
                true
            }
            None => false,
        }
    }

    /// The item at `key`, if served.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.items.get(key).map(|(v, _)| v)
    }

    /// Whether `key` is served.
    pub fn contains(&self, key: &K) -> bool {
        self.items.contains_key(key)
    }

    /// The served items in key order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.items.values().map(|(v, _)| v)
    }

    /// The served keys in order, each with its item's digest.
    pub fn digests(&self) -> impl Iterator<Item = (&K, ItemDigest)> {
        self.items.iter().map(|(k, (_, d))| (k, *d))
    }

    /// How many items are served.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing is served.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Bumped on every change of served content; cheap cache key.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The fingerprint of the served content: equal content, equal
    /// fingerprint, in any process and whatever the order of changes.
    pub fn fingerprint(&self) -> Fingerprint {
        fingerprint_of(self.name, self.items.len(), self.sum)
    }

    /// The fingerprint recomputed from every item, to check the incremental
    /// one against.
    pub fn fingerprint_from_scratch(&self) -> Fingerprint {
        let mut sum = [0u64; 4];
        for (value, _) in self.items.values() {
            for (s, x) in sum.iter_mut().zip(digest_of(value)) {
                *s = s.wrapping_add(x);
            }
        }
        fingerprint_of(self.name, self.items.len(), sum)
    }

    fn add(&mut self, d: ItemDigest) {
        for (s, x) in self.sum.iter_mut().zip(d) {
            *s = s.wrapping_add(x);
        }
    }

    fn sub(&mut self, d: ItemDigest) {
        for (s, x) in self.sum.iter_mut().zip(d) {
            *s = s.wrapping_sub(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_of_changes_does_not_matter() {
        let mut a = Section::new("t");
        let mut b = Section::new("t");
        for i in 0..50u32 {
            a.upsert(i, format!("v{i}"));
        }
        for i in (0..60u32).rev() {
            b.upsert(i, format!("old{i}"));
        }
        for i in 0..50u32 {
            b.upsert(i, format!("v{i}"));
        }
        for i in 50..60u32 {
            b.remove(&i);
        }
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.fingerprint(), b.fingerprint_from_scratch());
        assert_eq!(a.len(), 50);
    }

    #[test]
    fn content_changes_the_fingerprint_and_reupsert_does_not() {
        let mut s = Section::new("t");
        let empty = s.fingerprint();
        assert!(s.upsert(1, "a".to_string()));
        let one = s.fingerprint();
        assert_ne!(empty, one);
        let version = s.version();
        assert!(!s.upsert(1, "a".to_string()), "same content is no change");
        assert_eq!(s.version(), version);
        assert!(s.upsert(1, "b".to_string()));
        assert_ne!(s.fingerprint(), one);
        assert!(s.remove(&1));
        assert!(!s.remove(&1));
        assert_eq!(s.fingerprint(), empty);
    }

    #[test]
    fn sections_with_equal_items_but_other_names_differ() {
        let mut a = Section::new("pools");
        let mut b = Section::new("routers");
        a.upsert(1, 1);
        b.upsert(1, 1);
        assert_ne!(a.fingerprint(), b.fingerprint());
    }
}

#[cfg(test)]
mod rule_tests;
