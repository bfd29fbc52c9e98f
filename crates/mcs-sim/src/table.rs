//! One region's replica of the global table: one item per `(key, origin)`,
//! where `origin` is the region whose registrars wrote it (docs/design.md §3 with
//! the origin in the sort key). A region writes only items of its own
//! origin; every other item arrives by replication.

use crate::rules::MergeRule;
use mcs_core::{Key, Record};
use std::collections::BTreeMap;

/// A stored image of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The record the item holds.
    pub record: Record,
    /// The origin's commit sequence number of this image: the order in
    /// which DynamoDB applied the writes of an item in its own region.
    pub commit: u64,
}

/// One region's replica.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    items: BTreeMap<(Key, usize), Item>,
}

impl Table {
    /// The image of `key` written in `origin`, if any.
    pub fn get(&self, key: &Key, origin: usize) -> Option<&Item> {
        self.items.get(&(key.clone(), origin))
    }

    /// Stores `item` as the image of `(key, origin)`; returns what it replaced.
    pub fn put(&mut self, origin: usize, item: Item) -> Option<Item> {
        self.items.insert((item.record.key.clone(), origin), item)
    }

    /// Every record, in item order (a scan).
    pub fn read_all(&self) -> Vec<Record> {
        self.items.values().map(|i| i.record.clone()).collect()
    }

    /// Every record changed after `since_ms` (the `changes` index).
    pub fn read_changed_since(&self, since_ms: u64) -> Vec<Record> {
        self.items
            .values()
            .filter(|i| i.record.changed_at_ms > since_ms)
            .map(|i| i.record.clone())
            .collect()
    }

    /// The winner among the items of `key` by `merge` (what a strongly
    /// consistent read of every origin's item would give).
    pub fn merged(&self, key: &Key, merge: MergeRule) -> Option<Record> {
        let mut winner: Option<&Record> = None;
        for ((k, _), item) in self.items.range((key.clone(), 0)..) {
            if k != key {
                break;
            }
            winner = match winner {
                Some(held) if !merge(&item.record, held) => Some(held),
                _ => Some(&item.record),
            };
        }
        winner.cloned()
    }

    /// Every item, in order.
    pub fn items(&self) -> impl Iterator<Item = (&(Key, usize), &Item)> {
        self.items.iter()
    }
}
