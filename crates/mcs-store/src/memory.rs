//! The embedded store: one process, everything in memory.

use crate::{PutOutcome, Store, StoreError};
use async_trait::async_trait;
use mcs_core::rules::{renewal_extends, renews_in_place};
use mcs_core::{Key, Record, WriteDecision, decide};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Keeps every record in a map behind a lock. The write rule is
/// [`mcs_core::decide`], the same the DynamoDB store expresses as a
/// condition. It can be switched unavailable to exercise outage handling.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<HashMap<Key, Record>>,
    unavailable: AtomicBool,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every call fail with [`StoreError::Unavailable`] (`true`) or
    /// work again (`false`), as a storage outage would.
    pub fn set_unavailable(&self, unavailable: bool) {
        self.unavailable.store(unavailable, Ordering::SeqCst);
    }

    fn items(&self) -> Result<std::sync::MutexGuard<'_, HashMap<Key, Record>>, StoreError> {
        if self.unavailable.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable("memory store switched off".into()));
        }
        self.items.lock().map_err(|_| StoreError::Other("memory store lock poisoned".into()))
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn put(&self, record: &Record, now_ms: u64) -> Result<PutOutcome, StoreError> {
        // Before anything else, as DynamoStore checks before any request.
        crate::dynamo::check_record_size(record)?;
        let mut items = self.items()?;
        let stored = items.get(&record.key);
        match decide(stored, record, now_ms) {
            WriteDecision::Apply => {
                items.insert(record.key.clone(), record.clone());
                Ok(PutOutcome::Applied)
            }
            WriteDecision::Renew => {
                if stored.is_some_and(|s| renewal_extends(s, record)) {
                    items.insert(record.key.clone(), record.clone());
                }
                Ok(PutOutcome::Applied)
            }
            WriteDecision::Stale { stored } => Ok(PutOutcome::Stale { stored }),
            WriteDecision::Owned { owner, until_ms } => Ok(PutOutcome::Owned { owner, until_ms }),
        }
    }

    /// The renewal in place, atomically under the lock: the stored record
    /// of the key at `record`'s version and content (digest: owner and
    /// payload) with an earlier lease end takes `record`'s lease end and
    /// terms and keeps its `changed_at_ms`.
    async fn renew(&self, record: &Record, _now_ms: u64) -> Result<Option<u64>, StoreError> {
        crate::dynamo::check_record_size(record)?;
        let mut items = self.items()?;
        let Some(stored) = items.get_mut(&record.key) else {
            return Ok(None);
        };
        if !renews_in_place(stored, record) {
            return Ok(None);
        }
        stored.lease_until_ms = record.lease_until_ms;
        stored.terms = record.terms;
        Ok(Some(stored.changed_at_ms))
    }

    /// Always: one process, no readers of another version.
    fn renewals_keep_changed_at(&self) -> bool {
        true
    }

    async fn get(&self, key: &Key) -> Result<Option<Record>, StoreError> {
        Ok(self.items()?.get(key).cloned())
    }

    async fn read_all(&self) -> Result<Vec<Record>, StoreError> {
        Ok(self.items()?.values().cloned().collect())
    }

    async fn read_changed_since(&self, since_ms: u64) -> Result<Vec<Record>, StoreError> {
        Ok(self.items()?.values().filter(|r| r.changed_at_ms > since_ms).cloned().collect())
    }
}

/// What DynamoDB's TTL would delete had these records been its items,
/// written with the DynamoDB store's default retention (as the suite's
/// DynamoDB stores are): the `ttl` that store computes
/// (`mcs_core::rules::ttl_expires_at_ms` plus the retention) is reached.
/// For the conformance suite's TTL case; the memory store itself expires
/// nothing (docs/design.md §11).
#[cfg(feature = "testsuite")]
#[async_trait]
impl crate::EmulatesTtl for MemoryStore {
    async fn emulate_ttl(&self, now_ms: u64) -> Result<usize, StoreError> {
        use crate::dynamo::item::{expired_by_ttl, ttl_of};
        let retention_ms =
            u64::try_from(crate::dynamo::DEFAULT_RETENTION.as_millis()).unwrap_or(u64::MAX);
        let mut items = self.items()?;
        let before = items.len();
        items.retain(|_, r| !ttl_of(r, retention_ms).is_some_and(|t| expired_by_ttl(t, now_ms)));
        Ok(before - items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::store_conformance_suite!(MemoryStore::new());

    #[tokio::test]
    async fn an_outage_fails_every_call_and_recovers() {
        let store = MemoryStore::new();
        store.set_unavailable(true);
        assert!(store.read_all().await.unwrap_err().is_unavailable());
        store.set_unavailable(false);
        assert!(store.read_all().await.unwrap().is_empty());
    }
}
