//! Storage for mcs-registry: the [`Store`] trait every backend implements,
//! the embedded [`MemoryStore`], the [`DynamoStore`] on a DynamoDB table
//! (module [`dynamo`], with the table's migrations), and (feature
//! `testsuite`) the conformance suite that every backend must pass, and
//! (feature `clap`) the command-line flags of the table, module `args`.
//!
//! A store holds one item per [`Key`] and offers exactly what
//! the registrar and the reader need (docs/design.md §4, §6): one conditional write
//! that applies the rule of [`mcs_core::decide`], a full read, and a read of
//! what changed since a watermark.

#[cfg(feature = "clap")]
pub mod args;
mod backoff;
pub mod dynamo;
mod error;
mod memory;
pub mod metrics;
#[cfg(feature = "testsuite")]
pub mod testsuite;

pub use backoff::Backoff;
pub use dynamo::{DynamoConfig, DynamoStore, MAX_ITEM_BYTES, record_item_size};
pub use error::StoreError;
pub use memory::MemoryStore;

use async_trait::async_trait;
use mcs_core::{Key, Record, Version};

/// What a conditional write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    /// Stored (or an idempotent retry or heartbeat of what is stored).
    Applied,
    /// Refused: the stored version is not below the write's.
    Stale {
        /// What is stored.
        stored: Version,
    },
    /// Refused: another incarnation holds the record's live lease.
    Owned {
        /// That incarnation.
        owner: String,
        /// When its lease ends, epoch milliseconds.
        until_ms: u64,
    },
}

pub use mcs_core::{ChangeStamp, LeaseEnd};

/// A backend that can delete what DynamoDB's TTL would have deleted by a
/// given time, for the suite's TTL case (docs/design.md §3, "Invariant
/// (issue 22)"). Test support, on the concrete stores only: the registry
/// never calls it. (Defined here, below the stores that implement it and
/// the suite that uses it; the suite re-exports it.)
#[cfg(feature = "testsuite")]
#[async_trait]
pub trait EmulatesTtl: Store {
    /// Deletes every item whose `ttl` (epoch seconds) `now_ms` has reached,
    /// as DynamoDB's TTL does some time after; how many it deleted.
    /// DynamoDB: the `ttl` attribute as stored; the memory store: the `ttl`
    /// the DynamoDB store would have written (`ttl_expires_at_ms` plus its
    /// default retention, a day).
    async fn emulate_ttl(&self, now_ms: u64) -> Result<usize, StoreError>;
}

/// A backend of the registry.
///
/// Implementations must apply [`mcs_core::decide`] atomically per key: of
/// concurrent writes at one version, at most one is `Applied`.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// One conditional write of `record`, judged at `now_ms` (for lease
    /// ownership). Answers only once the write is durable in this store.
    /// A record whose DynamoDB item would be over [`MAX_ITEM_BYTES`] is
    /// refused with [`StoreError::TooLarge`] by every store, before the
    /// write rule is applied.
    async fn put(&self, record: &Record, now_ms: u64) -> Result<PutOutcome, StoreError>;

    /// The stored record of `key`, if any (tombstones included).
    async fn get(&self, key: &Key) -> Result<Option<Record>, StoreError>;

    /// Every stored record.
    async fn read_all(&self) -> Result<Vec<Record>, StoreError>;

    /// Every record whose `changed_at_ms` is above `since_ms`.
    async fn read_changed_since(&self, since_ms: u64) -> Result<Vec<Record>, StoreError>;

    /// The lease ends stored in `from_ms..=to_ms`, one per stored item (a
    /// store with one item per key and origin may return several of one
    /// key). Records without a lease end (exports, tombstones of them)
    /// are never returned; a tombstone that carries the end of the lease
    /// it withdrew is (`mcs_core::rules::withdrawn_lease_end`).
    ///
    /// The default reads everything, which is correct for a store held in
    /// memory; a store whose reads cost per item answers from an index
    /// (DynamoDB: `lease_ends`, docs/design.md §3).
    async fn read_lease_ends(&self, from_ms: u64, to_ms: u64) -> Result<Vec<LeaseEnd>, StoreError> {
        Ok(self
            .read_all()
            .await?
            .into_iter()
            .filter_map(|r| {
                let until = r.lease_until_ms.filter(|u| (from_ms..=to_ms).contains(u))?;
                Some(LeaseEnd { key: r.key, version: r.version, lease_until_ms: until })
            })
            .collect())
    }

    /// The change stamps of the items whose `changed_at_ms` lies in
    /// `from_ms..=to_ms`: one per stored item (several of one key when
    /// several origins hold it), without their content. A reader checks
    /// the lookback behind its window with them and reads whole only the
    /// writes it lacks (docs/design.md §6 "Reaching back for late
    /// changes"), when [`Store::reads_change_stamps`].
    ///
    /// The default reads the records of the range, which is correct for a
    /// store held in memory; a store whose reads cost per byte answers from
    /// an index (DynamoDB: `change_stamps`, docs/design.md §3).
    async fn read_change_stamps(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<ChangeStamp>, StoreError> {
        Ok(self
            .read_changed_since(from_ms.saturating_sub(1))
            .await?
            .iter()
            .filter(|r| (from_ms..=to_ms).contains(&r.changed_at_ms))
            .map(ChangeStamp::of)
            .collect())
    }

    /// Whether a reader should check its lookback with
    /// [`Store::read_change_stamps`] rather than read it again whole
    /// (DynamoDB: the table is at schema 5). True for a store held in
    /// memory, whose reads cost nothing per byte, so that the reader runs
    /// the same way on every backend.
    fn reads_change_stamps(&self) -> bool {
        true
    }

    /// Writes `record` as a renewal of this store's item of its key if that
    /// item holds the same version and content (digest and owner) with an
    /// earlier lease end: only the lease end, its terms and the TTL change,
    /// and `changed_at_ms` stays what is stored (returned), so the renewal
    /// stays out of [`Store::read_changed_since`] (docs/design.md §6,
    /// "Renewals and the change feed"). `None` when the stored item is
    /// anything else, or when renewals must still move `changed_at_ms`
    /// ([`Store::renewals_keep_changed_at`] false): nothing was written and
    /// the caller writes with [`Store::put`].
    async fn renew(&self, _record: &Record, _now_ms: u64) -> Result<Option<u64>, StoreError> {
        Ok(None)
    }

    /// Whether renewals keep `changed_at_ms` in this store (DynamoDB: the
    /// table is at schema 3), so that readers must learn them from
    /// [`Store::read_lease_ends`] rather than from the change feed.
    fn renewals_keep_changed_at(&self) -> bool {
        false
    }

    /// Re-reads what the store knows about its schema (DynamoDB: the META
    /// item), so that a migration applied while the registry runs takes
    /// effect; the reader calls it with each full read.
    async fn refresh_schema(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
