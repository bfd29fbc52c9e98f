//! The write path (DESIGN §4): turn a validated request into a record, make
//! one conditional write, and only after storage acknowledged it apply it to
//! the local view so the writer reads its own write.
//!
//! Generations: a client that orders its own intents sends one (its writer is
//! then its incarnation); otherwise the registrar's hybrid logical clock
//! assigns one. A heartbeat that changes nothing reuses the stored version,
//! so it extends the lease without a new generation or fingerprint.

use crate::clock::Clock;
use crate::live::LiveView;
use crate::metrics as m;
use mcs_api::{Incarnation, Lease};
use mcs_core::rules::fenced_by_withdrawal;
use mcs_core::{Body, Hlc, Key, LeasePolicy, Record, Version, WriteDecision, decide};
use mcs_store::{PutOutcome, Store, StoreError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a write was not applied.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The stored version is newer.
    #[error("a newer generation is stored: {stored}")]
    Stale {
        /// What is stored.
        stored: Version,
    },
    /// Another incarnation holds the live lease.
    #[error("owned by {owner} until {until_ms}")]
    Owned {
        /// The holder.
        owner: String,
        /// Its lease's end.
        until_ms: u64,
    },
    /// Nothing to withdraw.
    #[error("{0} not found")]
    NotFound(Key),
    /// Storage failed or did not answer in time; nothing was acknowledged.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a client asked for, before a version is chosen.
#[derive(Debug, Clone)]
pub struct Intent {
    /// The record's key.
    pub key: Key,
    /// The payload (a tombstone to withdraw).
    pub body: Body,
    /// The client's incarnation, if it sent one.
    pub incarnation: Option<Incarnation>,
    /// The client's own generation, if it sent one.
    pub generation: Option<u64>,
    /// Whether the record holds a lease.
    pub leased: bool,
    /// The lease the client asked for; the registrar's default when absent.
    pub lease: Option<Lease>,
}

/// The registrar of one registry process.
#[derive(Debug)]
pub struct Registrar {
    store: Arc<dyn Store>,
    view: Arc<LiveView>,
    clock: Arc<dyn Clock>,
    hlc: Mutex<Hlc>,
    writer_id: String,
    lease: LeasePolicy,
    timeout: Duration,
}

impl Registrar {
    /// A registrar writing to `store` as `writer_id`.
    pub fn new(
        store: Arc<dyn Store>,
        view: Arc<LiveView>,
        writer_id: String,
        lease: LeasePolicy,
        timeout: Duration,
    ) -> Self {
        let clock = view.clock().clone();
        Self { store, view, clock, hlc: Mutex::new(Hlc::new()), writer_id, lease, timeout }
    }

    /// The lease granted for a request that asked for `requested`.
    pub fn grant(&self, requested: Option<Lease>) -> LeasePolicy {
        requested.and_then(|l| LeasePolicy::from_lease(l).ok()).unwrap_or(self.lease)
    }

    /// Writes `intent`; returns the record stored.
    pub async fn write(&self, intent: Intent) -> Result<Record, WriteError> {
        let kind = intent.key.kind();
        let result = self.write_inner(intent).await;
        let outcome = match &result {
            Ok(_) => "applied",
            Err(WriteError::Stale { .. }) => "stale",
            Err(WriteError::Owned { .. }) => "owned",
            Err(WriteError::NotFound(_)) => "not_found",
            Err(WriteError::Store(_)) => "error",
        };
        metrics::counter!(m::REGISTRAR_WRITES, "kind" => kind.as_str(), "outcome" => outcome)
            .increment(1);
        result
    }

    /// Withdraws `key` with a tombstone. Unknown keys are `NotFound`; an
    /// already withdrawn key answers with its tombstone unless the client
    /// orders a newer withdrawal itself.
    pub async fn withdraw(
        &self,
        key: Key,
        incarnation: Option<Incarnation>,
        generation: Option<u64>,
    ) -> Result<Record, WriteError> {
        let held = self.view.read().record(&key).cloned();
        let held = match held {
            Some(record) => Some(record),
            None => self.with_timeout(self.store.get(&key)).await?,
        };
        match held {
            None => return Err(WriteError::NotFound(key)),
            Some(record) if record.is_tombstone() && generation.is_none() => return Ok(record),
            Some(_) => {}
        }
        self.write(Intent {
            key,
            body: Body::Tombstone,
            incarnation,
            generation,
            leased: false,
            lease: None,
        })
        .await
    }

    async fn write_inner(&self, intent: Intent) -> Result<Record, WriteError> {
        let now = self.clock.now_ms();
        let owner = intent.incarnation.as_ref().map(|i| i.as_str().to_owned());
        let mut record = Record {
            key: intent.key,
            version: Version::new(0, ""),
            owner,
            lease_until_ms: intent.leased.then(|| self.grant(intent.lease).until(now)),
            changed_at_ms: now,
            body: intent.body,
        };
        // Every write of a key is later than the one it follows, even when
        // the previous writer's clock ran ahead: replication and delta polls
        // order an item's writes by changed_at.
        if let Some(held) = self.view.read().record(&record.key) {
            record.changed_at_ms = record.changed_at_ms.max(held.changed_at_ms.saturating_add(1));
        }
        let client_ordered = match (intent.generation, &intent.incarnation) {
            (Some(generation), Some(incarnation)) => {
                record.version = Version::new(generation, incarnation.as_str());
                true
            }
            _ => {
                let fence =
                    fenced_by_withdrawal(self.view.read().record(&record.key), &record).cloned();
                if let Some(stored) = fence {
                    return Err(WriteError::Stale { stored });
                }
                record.version =
                    self.unchanged_version(&record).unwrap_or_else(|| self.next_version(now));
                false
            }
        };
        // A registrar-assigned generation refused as stale means another
        // writer's clock ran ahead; the HLC has now seen it, so one retry
        // with a fresh generation is enough.
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = match self.judge_by_view(&record, now) {
                Some(refusal) => refusal,
                None => self.with_timeout(self.store.put(&record, now)).await?,
            };
            match outcome {
                PutOutcome::Applied => {
                    self.view.apply(record.clone());
                    return Ok(record);
                }
                PutOutcome::Stale { stored } => {
                    self.observe(stored.generation);
                    if client_ordered || attempt == 2 {
                        return Err(WriteError::Stale { stored });
                    }
                    record.version = self.next_version(now);
                }
                PutOutcome::Owned { owner, until_ms } => {
                    return Err(WriteError::Owned { owner, until_ms });
                }
            }
        }
    }

    /// The write rule applied to the merged view before the conditional
    /// write: the view holds the items of every region, the conditional
    /// write sees only this region's. Across regions this fences owners and
    /// refuses stale generations up to replication lag; within the region
    /// the conditional write decides atomically.
    fn judge_by_view(&self, record: &Record, now: u64) -> Option<PutOutcome> {
        let view = self.view.read();
        match decide(view.record(&record.key), record, now) {
            WriteDecision::Apply | WriteDecision::Renew => None,
            WriteDecision::Stale { stored } => Some(PutOutcome::Stale { stored }),
            WriteDecision::Owned { owner, until_ms } => Some(PutOutcome::Owned { owner, until_ms }),
        }
    }

    /// The stored version, when `record` repeats what is held (a heartbeat).
    fn unchanged_version(&self, record: &Record) -> Option<Version> {
        let view = self.view.read();
        let held = view.record(&record.key)?;
        if held.is_tombstone() || record.is_tombstone() {
            return None;
        }
        (held.content_digest() == record.content_digest()).then(|| held.version.clone())
    }

    fn next_version(&self, now: u64) -> Version {
        let generation = self.hlc.lock().unwrap_or_else(|p| p.into_inner()).next(now);
        Version::new(generation, self.writer_id.as_str())
    }

    fn observe(&self, generation: u64) {
        self.hlc.lock().unwrap_or_else(|p| p.into_inner()).observe(generation);
    }

    /// Folds every generation of a read into the HLC (DESIGN §3: `seen`).
    pub fn observe_all<'a>(&self, records: impl IntoIterator<Item = &'a Record>) {
        let mut hlc = self.hlc.lock().unwrap_or_else(|p| p.into_inner());
        for record in records {
            hlc.observe(record.version.generation);
        }
    }

    async fn with_timeout<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!(
                "no answer from storage within {:?}",
                self.timeout
            ))),
        }
    }
}
