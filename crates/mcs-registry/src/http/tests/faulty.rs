//! A memory store for reader tests: its full reads and its reads of change
//! stamps can be switched to fail while every other call works (a throttled
//! scan or index), and it records where each read of changes starts.

use super::T0;
use crate::clock::ManualClock;
use crate::config::{Args, Settings};
use crate::server::Registry;
use async_trait::async_trait;
use clap::Parser;
use mcs_core::{ChangeStamp, Key, Record};
use mcs_store::{MemoryStore, PutOutcome, Store, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
pub(super) struct Faulty {
    inner: MemoryStore,
    /// `read_all` fails while set.
    pub(super) scans_fail: AtomicBool,
    /// `read_change_stamps` fails while set.
    pub(super) stamps_fail: AtomicBool,
    /// Every read begun while set never answers (a storage hang).
    pub(super) reads_hang: AtomicBool,
    /// `(found, known)`: re-reads of the schema find it past this binary's.
    pub(super) schema_too_new: Mutex<Option<(u32, u32)>>,
    /// The `since_ms` of every `read_changed_since`, in order.
    since: Mutex<Vec<u64>>,
}

impl Faulty {
    /// Where the last read of changes started.
    pub(super) fn last_since(&self) -> Option<u64> {
        self.since.lock().unwrap().last().copied()
    }

    /// How many reads of changes there were.
    pub(super) fn reads(&self) -> usize {
        self.since.lock().unwrap().len()
    }
}

/// A registry (not yet polled) of writer `reg-a` with `flags` on a fresh
/// `Faulty` store, its clock at `T0`.
pub(super) fn registry_on_faulty(flags: &[&str]) -> (Registry, Arc<ManualClock>, Arc<Faulty>) {
    let argv = ["mcs-registry", "--writer-id", "reg-a"].iter().chain(flags);
    let settings = Settings::from_args(&Args::try_parse_from(argv).unwrap()).unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let store = Arc::new(Faulty::default());
    (Registry::new(store.clone(), clock.clone(), &settings), clock, store)
}

/// Never answers while `hanging` (checked when the call begins).
async fn hang_while(hanging: &AtomicBool) {
    if hanging.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
}

/// `Unavailable` (what a throttled DynamoDB call becomes) while `failing`.
fn unless(failing: &AtomicBool, what: &str) -> Result<(), StoreError> {
    if failing.load(Ordering::SeqCst) {
        return Err(StoreError::Unavailable(format!("{what} throttled")));
    }
    Ok(())
}

#[async_trait]
impl Store for Faulty {
    async fn put(&self, record: &Record, now_ms: u64) -> Result<PutOutcome, StoreError> {
        self.inner.put(record, now_ms).await
    }
    async fn get(&self, key: &Key) -> Result<Option<Record>, StoreError> {
        self.inner.get(key).await
    }
    async fn read_all(&self) -> Result<Vec<Record>, StoreError> {
        hang_while(&self.reads_hang).await;
        unless(&self.scans_fail, "scan")?;
        self.inner.read_all().await
    }
    async fn read_changed_since(&self, since_ms: u64) -> Result<Vec<Record>, StoreError> {
        hang_while(&self.reads_hang).await;
        self.since.lock().unwrap().push(since_ms);
        self.inner.read_changed_since(since_ms).await
    }
    async fn read_change_stamps(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Vec<ChangeStamp>, StoreError> {
        hang_while(&self.reads_hang).await;
        unless(&self.stamps_fail, "change_stamps")?;
        self.inner.read_change_stamps(from_ms, to_ms).await
    }
    async fn refresh_schema(&self) -> Result<(), StoreError> {
        match *self.schema_too_new.lock().unwrap() {
            Some((found, known)) => Err(StoreError::SchemaTooNew { found, known }),
            None => Ok(()),
        }
    }
}
