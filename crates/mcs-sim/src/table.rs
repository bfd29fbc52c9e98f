//! One region's replica of the global table: one item per `(key, origin)`,
//! where `origin` is the region whose registrars wrote it (docs/design.md §3 with
//! the origin in the sort key). A region writes only items of its own
//! origin; every other item arrives by replication.
//!
//! Two kinds of read, as DynamoDB has them:
//!
//! - the base table ([`Table::read_all`], [`Table::get`], [`Table::merged`]):
//!   every item's latest image;
//! - the global secondary indexes, `changes` ([`Table::read_changed_since`])
//!   and `lease_ends` ([`Table::read_lease_ends`]): eventually consistent, so
//!   an image reaches them some time after the item took it (its index
//!   lag); until then they show the item's previous image (or nothing, for
//!   a new item). A replica applies an item's images in order, and so do
//!   its indexes.
//!
//! A renewal (docs/design.md §6, "Renewals and the change feed": same
//! version and content as this region's stored item, a later lease end)
//! keeps the stored `changed_at_ms` and moves only the lease end and its
//! terms ([`Table::image_of`]), so it never enters the `changes` index.
//!
//! TTL (docs/design.md §3): a replica's sweep deletes the items whose `ttl`
//! has passed in that replica ([`Table::expired`], [`Table::delete`]), and
//! the delete replicates like a write, settled against the other replicas'
//! images by last-writer-wins on the time of the delete
//! ([`Table::apply_delete`]; an image stored later survives it, an image
//! delivered later but stored earlier is refused by the replica's memory of
//! the delete). A deleted item leaves the indexes at once.

use mcs_core::{ChangeStamp, Key, LeaseEnd, Record};
use std::collections::BTreeMap;

/// A stored image of an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The record the item holds.
    pub record: Record,
    /// The origin's commit sequence number of this image: the order in
    /// which DynamoDB applied the writes of an item in its own region.
    pub commit: u64,
    /// True time at which the origin stored this image: what a replicated
    /// delete is settled against (last-writer-wins by time).
    pub stored_at: u64,
}

/// What a replica remembers of a delete of one of its items, to settle
/// images and deletes delivered later by last-writer-wins on time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
    /// True time of the delete (in the replica whose sweep made it).
    pub at: u64,
    /// The origin's commit of the image the sweep deleted.
    pub commit: u64,
}

/// What applying a replicated delete did to a replica's item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteOutcome {
    /// The item held an image stored after the delete: it stays.
    Kept,
    /// The item was already gone.
    Absent,
    /// The item was deleted; it held this image.
    Deleted(Box<Item>),
}

/// What the indexes still show of an item whose latest image has not
/// reached them: the image they show (none for a new item), until when
/// (true time).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lagging {
    shown: Option<Record>,
    until: u64,
    /// The earliest write time (by its writer's clock) of the images the
    /// indexes have not caught up with.
    oldest_pending_ms: u64,
}

/// When `record` was written, by its writer's clock: a renewal keeps
/// `changed_at`, so a leased image's write is its lease end less its
/// duration.
fn written_at(record: &Record) -> u64 {
    match (record.lease_until_ms, record.terms) {
        (Some(until), Some(terms)) => until.saturating_sub(terms.duration_ms),
        _ => record.changed_at_ms,
    }
}

/// One region's replica.
#[derive(Debug, Clone, Default)]
pub struct Table {
    items: BTreeMap<(Key, usize), Item>,
    lagging: BTreeMap<(Key, usize), Lagging>,
    deleted: BTreeMap<(Key, usize), Deletion>,
}

/// Replicas are equal when they hold the same items; their indexes may be
/// at different points of catching up.
impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl Eq for Table {}

impl Table {
    /// The image of `key` written in `origin`, if any.
    pub fn get(&self, key: &Key, origin: usize) -> Option<&Item> {
        self.items.get(&(key.clone(), origin))
    }

    /// What a conditional write of `record` that the write rule accepted
    /// stores in `origin`'s item: the record itself, or, for a renewal of
    /// the stored item (same version and content digest, owner included,
    /// and a later lease end), the stored item with only its lease end and
    /// terms moved, so that its `changed_at_ms` stays.
    pub fn image_of(&self, origin: usize, record: &Record) -> Record {
        match self.get(&record.key, origin).map(|i| &i.record) {
            Some(stored)
                if stored.version == record.version
                    && stored.content_digest() == record.content_digest()
                    && mcs_core::rules::renewal_extends(stored, record) =>
            {
                Record {
                    lease_until_ms: record.lease_until_ms,
                    terms: record.terms,
                    ..stored.clone()
                }
            }
            _ => record.clone(),
        }
    }

    /// Stores `item` as the image of `(key, origin)` at true time `t`; the
    /// indexes show it from `t + index_lag_ms` on. Returns what it replaced.
    pub fn put(&mut self, origin: usize, item: Item, t: u64, index_lag_ms: u64) -> Option<Item> {
        let id = (item.record.key.clone(), origin);
        let old = self.items.insert(id.clone(), item);
        let until = t.saturating_add(index_lag_ms);
        let written = self.items.get(&id).map_or(0, |i| written_at(&i.record));
        match self.lagging.get_mut(&id) {
            // The indexes have not caught up with the previous image yet:
            // they keep showing what they show, for longer.
            Some(lag) if lag.until > t => {
                lag.until = lag.until.max(until);
                lag.oldest_pending_ms = lag.oldest_pending_ms.min(written);
            }
            _ if index_lag_ms == 0 => {
                self.lagging.remove(&id);
            }
            _ => {
                let shown = old.as_ref().map(|i| i.record.clone());
                self.lagging.insert(id, Lagging { shown, until, oldest_pending_ms: written });
            }
        }
        old
    }

    /// The delete that a delivered `item` of `origin` loses to, if any: one
    /// this replica applied after the origin stored the image
    /// (last-writer-wins by time), the item still absent.
    pub fn refused_by_delete(&self, origin: usize, item: &Item) -> Option<Deletion> {
        let id = (item.record.key.clone(), origin);
        if self.items.contains_key(&id) {
            return None;
        }
        self.deleted.get(&id).filter(|d| d.at > item.stored_at).copied()
    }

    /// The items whose stored `ttl` (by `ttl`, in ms) has passed at true
    /// time `t`, in item order: what a sweep of this replica deletes.
    pub fn expired(&self, t: u64, ttl: impl Fn(&Record) -> Option<u64>) -> Vec<(Key, usize)> {
        self.items
            .iter()
            .filter(|(_, item)| ttl(&item.record).is_some_and(|at| at <= t))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Deletes the item `(key, origin)` at true time `t` (a TTL sweep of
    /// this replica): the item and its index images go, the replica
    /// remembers the delete. Returns the deleted image.
    pub fn delete(&mut self, key: &Key, origin: usize, t: u64) -> Option<Item> {
        let id = (key.clone(), origin);
        let old = self.items.remove(&id)?;
        self.lagging.remove(&id);
        self.deleted.insert(id, Deletion { at: t, commit: old.commit });
        Some(old)
    }

    /// Applies a delete of `(key, origin)` made at true time `deletion.at`
    /// in another replica: last-writer-wins by time, so an image stored
    /// after the delete stays, anything else goes (even an image newer than
    /// the one the delete was made on: that is how DynamoDB settles it).
    pub fn apply_delete(&mut self, key: &Key, origin: usize, deletion: Deletion) -> DeleteOutcome {
        let id = (key.clone(), origin);
        if self.items.get(&id).is_some_and(|held| held.stored_at > deletion.at) {
            return DeleteOutcome::Kept;
        }
        let later = self.deleted.get(&id).is_some_and(|d| d.at >= deletion.at);
        if !later {
            self.deleted.insert(id.clone(), deletion);
        }
        self.lagging.remove(&id);
        match self.items.remove(&id) {
            Some(old) => DeleteOutcome::Deleted(Box::new(old)),
            None => DeleteOutcome::Absent,
        }
    }

    /// Every record, in item order (a scan).
    pub fn read_all(&self) -> Vec<Record> {
        self.items.values().map(|i| i.record.clone()).collect()
    }

    /// The image of every item as the indexes show it at true time `t`.
    fn indexed(&self, t: u64) -> impl Iterator<Item = &Record> {
        self.items.iter().filter_map(move |(id, item)| match self.lagging.get(id) {
            Some(lag) if lag.until > t => lag.shown.as_ref(),
            _ => Some(&item.record),
        })
    }

    /// Whether the indexes at true time `t` miss an image of `key` written
    /// (by its writer's clock) before `settled_ms`: what the design assumes
    /// never happens (the lookback covers index lag), and replication later
    /// than the lookback (a partition) makes happen, since the image
    /// reaches the replica, and so its indexes, only then.
    pub fn index_misses_settled(&self, key: &Key, t: u64, settled_ms: u64) -> bool {
        self.lagging
            .range((key.clone(), 0)..)
            .take_while(|((k, _), _)| k == key)
            .any(|(_, lag)| lag.until > t && lag.oldest_pending_ms < settled_ms)
    }

    /// Every record changed after `since_ms` (the `changes` index, at true
    /// time `t`).
    pub fn read_changed_since(&self, since_ms: u64, t: u64) -> Vec<Record> {
        self.indexed(t).filter(|r| r.changed_at_ms > since_ms).cloned().collect()
    }

    /// The change stamp of every item written (by its writer's clock) in
    /// `from_ms..=to_ms` (the `change_stamps` index, at true time `t`).
    pub fn read_change_stamps(&self, from_ms: u64, to_ms: u64, t: u64) -> Vec<ChangeStamp> {
        self.indexed(t)
            .filter(|r| (from_ms..=to_ms).contains(&r.changed_at_ms))
            .map(ChangeStamp::of)
            .collect()
    }

    /// The lease end of every item whose lease ends in `from_ms..=to_ms`
    /// (the `lease_ends` index, at true time `t`): one per item, so several
    /// of one key when several origins hold it. A tombstone's is the end of
    /// the lease it withdrew (`mcs_core::rules::withdrawn_lease_end`);
    /// exports have none.
    pub fn read_lease_ends(&self, from_ms: u64, to_ms: u64, t: u64) -> Vec<LeaseEnd> {
        self.indexed(t)
            .filter_map(|r| {
                let until = r.lease_until_ms.filter(|u| (from_ms..=to_ms).contains(u))?;
                Some(LeaseEnd {
                    key: r.key.clone(),
                    version: r.version.clone(),
                    lease_until_ms: until,
                })
            })
            .collect()
    }

    /// The winner of `key` by [`Record::supersedes`] among its images as a
    /// reader sees them at true time `t` (the indexes' when `indexed`, the
    /// base table's otherwise), with the latest lease end of any item of
    /// the winner's version (none for a tombstone): what a reader that has
    /// just read them could know of the key.
    pub fn stored_lease(&self, key: &Key, t: u64, indexed: bool) -> Option<(Record, Option<u64>)> {
        let images: Vec<&Record> = if indexed {
            self.indexed(t).filter(|r| r.key == *key).collect()
        } else {
            self.items
                .range((key.clone(), 0)..)
                .take_while(|((k, _), _)| k == key)
                .map(|(_, i)| &i.record)
                .collect()
        };
        let winner =
            images.iter().copied().reduce(|held, r| if r.supersedes(held) { r } else { held })?;
        let until = images
            .iter()
            .filter(|r| r.version == winner.version && !r.is_tombstone())
            .filter_map(|r| r.lease_until_ms)
            .max();
        Some((winner.clone(), until))
    }

    /// The winner among the items of `key` by `merge` (what a strongly
    /// consistent read of every origin's item would give).
    pub fn merged(&self, key: &Key, merge: fn(&Record, &Record) -> bool) -> Option<Record> {
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
