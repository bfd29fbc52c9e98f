//! The write path (docs/design.md §4): turn a validated request into a record, make
//! one conditional write, and only after storage acknowledged it apply it to
//! the local view so the writer reads its own write.
//!
//! Generations: a client that orders its own intents sends one (its writer is
//! then its incarnation); otherwise the registrar's hybrid logical clock
//! assigns one. A heartbeat that changes nothing reuses the stored version,
//! so it extends the lease without a new generation or fingerprint, and is
//! written first as a renewal in place ([`Store::renew`]): the stored
//! `changed_at_ms` is kept, so it stays out of the change feed
//! (docs/design.md §6); where the store will not (another item, a table at
//! schema 2) it is written as any other write.

use crate::clock::Clock;
use crate::live::LiveView;
use crate::metrics as m;
use mcs_api::{FieldError, Incarnation, Lease};
use mcs_core::hlc::ClockError;
use mcs_core::write::{self, PlannedWrite, Refusal, WithdrawalPlan, plan_withdrawal};
use mcs_core::{Body, Hlc, Key, LeasePolicy, Record, Version, View, decide};
use mcs_store::{PutOutcome, Store, StoreError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Why a write was not applied.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The stored version is newer (or the write is fenced by a withdrawal).
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
    /// A value of the request the registrar judged (not the parser).
    #[error("{}: {}", .0.field, .0.message)]
    Invalid(FieldError),
    /// The first full read of storage has not succeeded yet: the view
    /// cannot judge ownership, withdrawals or generations.
    #[error("the registry has not finished its first full read of storage")]
    NotReady,
    /// The registrar's clock cannot issue a generation.
    #[error(transparent)]
    Clock(#[from] ClockError),
    /// Storage failed or did not answer in time; nothing was acknowledged.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<Refusal> for WriteError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::NotReady => WriteError::NotReady,
            Refusal::GenerationAhead { generation, bound } => WriteError::Invalid(FieldError::new(
                "generation",
                format!(
                    "{generation} is too far ahead of the registry's clock (at most {bound} now); \
                     generations are Unix milliseconds x 65536 plus a counter (docs/api.md)"
                ),
            )),
            Refusal::Stale { stored } => WriteError::Stale { stored },
            Refusal::Owned { owner, until_ms } => WriteError::Owned { owner, until_ms },
            Refusal::Clock(e) => WriteError::Clock(e),
        }
    }
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
    /// A registrar writing to `store` as `writer_id`, accepting client
    /// generations up to `max_generation_ahead_ms` ahead of its clock.
    pub fn new(
        store: Arc<dyn Store>,
        view: Arc<LiveView>,
        writer_id: String,
        lease: LeasePolicy,
        timeout: Duration,
        max_generation_ahead_ms: u64,
    ) -> Self {
        let clock = view.clock().clone();
        let hlc = Mutex::new(Hlc::new(max_generation_ahead_ms));
        Self { store, view, clock, hlc, writer_id, lease, timeout }
    }

    /// The lease granted for a request that asked for `requested`.
    pub fn grant(&self, requested: Option<Lease>) -> LeasePolicy {
        requested.and_then(|l| LeasePolicy::from_lease(l).ok()).unwrap_or(self.lease)
    }

    /// Writes `intent`; returns the record stored.
    pub async fn write(&self, intent: Intent) -> Result<Record, WriteError> {
        let kind = intent.key.kind();
        let result = self.write_inner(intent).await;
        count(kind, &result);
        result
    }

    /// The record of `key` as the view holds it, or else as storage does;
    /// `NotReady` before the view is.
    pub async fn lookup(&self, key: &Key) -> Result<Option<Record>, WriteError> {
        let held = self.view.read().record(key).cloned();
        match held {
            Some(record) => Ok(Some(record)),
            None if !self.view.is_ready() => Err(WriteError::NotReady),
            None => self.stored(key).await,
        }
    }

    async fn stored(&self, key: &Key) -> Result<Option<Record>, WriteError> {
        if !self.view.is_ready() {
            return Ok(None);
        }
        Ok(self.with_timeout(self.store.get(key)).await?)
    }

    /// Withdraws `key` with a tombstone. Unknown keys are `NotFound`; an
    /// already withdrawn key answers with its tombstone unless the client
    /// orders a newer withdrawal itself. An export is withdrawn only by the
    /// holder of its cluster's lease while that lease is live
    /// ([`mcs_core::rules::export_write_owned`], judged on the view).
    pub async fn withdraw(
        &self,
        key: Key,
        incarnation: Option<Incarnation>,
        generation: Option<u64>,
    ) -> Result<Record, WriteError> {
        let (held, cluster) = {
            let view = self.view.read();
            (view.record(&key).cloned(), lease_holder(&view, &key).cloned())
        };
        let held = match held {
            Some(record) => Some(record),
            None => self.stored(&key).await?,
        };
        let plan = plan_withdrawal(
            held.as_ref(),
            cluster.as_ref(),
            incarnation.as_ref().map(Incarnation::as_str),
            generation,
            self.view.is_ready(),
            self.clock.now_ms(),
        );
        match plan {
            Ok(WithdrawalPlan::Write) => {}
            Ok(WithdrawalPlan::NotFound) => {
                let result = Err(WriteError::NotFound(key.clone()));
                count(key.kind(), &result);
                return result;
            }
            Ok(WithdrawalPlan::Withdrawn(tombstone)) => return Ok(*tombstone),
            Err(refusal) => {
                let result = Err(refusal.into());
                count(key.kind(), &result);
                return result;
            }
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

    /// The steps of [`mcs_core::write`] around one conditional write.
    async fn write_inner(&self, intent: Intent) -> Result<Record, WriteError> {
        if let Some((found, known)) = self.view.schema_too_new() {
            return Err(WriteError::Store(StoreError::SchemaTooNew { found, known }));
        }
        let now = self.clock.now_ms();
        let grant = intent.leased.then(|| self.grant(intent.lease));
        let planned = write::Intent {
            lease_until_ms: grant.map(|g| g.until(now)),
            terms: grant.map(|g| g.terms()),
            key: intent.key,
            body: intent.body,
            incarnation: intent.incarnation.map(|i| i.as_str().to_owned()),
            generation: intent.generation,
        };
        let mut write = {
            let view = self.view.read();
            let held = view.record(&planned.key);
            let cluster = lease_holder(&view, &planned.key);
            PlannedWrite::plan(
                planned,
                held,
                cluster,
                self.view.is_ready(),
                now,
                &self.writer_id,
                &mut self.hlc(),
            )?
        };
        loop {
            let judged = write.judge(self.view.read().record(&write.record().key), now, decide);
            let decision = match judged {
                // The view holds a newer version than the generation the
                // clock gave (a client's own generation, ahead of this
                // clock, not yet observed): the clock observes it and a
                // registrar-assigned generation is tried once more, as when
                // storage refuses it below. Without this, the owner's own
                // withdrawal after such a write was refused (issue 22).
                Err(Refusal::Stale { stored }) => {
                    write.stale(stored, now, &mut self.hlc())?;
                    continue;
                }
                judged => judged?,
            };
            let renewal = write.is_renewal(&decision);
            match self.with_timeout(self.store_write(write.record(), renewal, now)).await? {
                Written::Renewed { changed_at_ms } => {
                    let mut record = write.into_record();
                    record.changed_at_ms = changed_at_ms;
                    self.view.apply(record.clone());
                    return Ok(record);
                }
                Written::Put(PutOutcome::Applied) => {
                    let record = write.into_record();
                    self.view.apply(record.clone());
                    return Ok(record);
                }
                Written::Put(PutOutcome::Stale { stored }) => {
                    write.stale(stored, now, &mut self.hlc())?
                }
                Written::Put(PutOutcome::Owned { owner, until_ms }) => {
                    return Err(WriteError::Owned { owner, until_ms });
                }
            }
        }
    }

    /// One write of `record`: a `renewal` is first tried in place
    /// ([`Store::renew`], keeping the stored `changed_at_ms`); anything
    /// else, or a renewal the store does not take, is one conditional put.
    async fn store_write(
        &self,
        record: &Record,
        renewal: bool,
        now: u64,
    ) -> Result<Written, StoreError> {
        if renewal && let Some(changed_at_ms) = self.store.renew(record, now).await? {
            return Ok(Written::Renewed { changed_at_ms });
        }
        Ok(Written::Put(self.store.put(record, now).await?))
    }

    fn hlc(&self) -> MutexGuard<'_, Hlc> {
        self.hlc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds every generation of a read into the HLC (docs/design.md,
    /// "Records and versions": `seen`), each capped at the clock's bound so
    /// that no item can drag it far ahead.
    pub fn observe_all<'a>(&self, records: impl IntoIterator<Item = &'a Record>) {
        let now = self.clock.now_ms();
        let mut hlc = self.hlc();
        for record in records {
            hlc.observe(record.version.generation, now);
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

/// The merged record of the cluster whose lease `key` lives on, for an
/// export (only its holder writes the export while the lease is live);
/// `None` for other kinds.
fn lease_holder<'v>(view: &'v View, key: &Key) -> Option<&'v Record> {
    match key {
        Key::Export(export) => view.record(&Key::Cluster { cluster_id: export.cluster_id.clone() }),
        _ => None,
    }
}

/// What [`Registrar::store_write`] did.
enum Written {
    /// Renewed in place; the stored `changed_at_ms`, kept.
    Renewed { changed_at_ms: u64 },
    /// Put (or refused).
    Put(PutOutcome),
}

fn count(kind: mcs_core::Kind, result: &Result<Record, WriteError>) {
    let outcome = match result {
        Ok(_) => "applied",
        Err(WriteError::Stale { .. }) => "stale",
        Err(WriteError::Owned { .. }) => "owned",
        Err(WriteError::NotFound(_)) => "not_found",
        Err(WriteError::Invalid(_)) => "invalid",
        Err(WriteError::NotReady) => "not_ready",
        Err(WriteError::Store(StoreError::TooLarge { .. })) => "too_large",
        Err(WriteError::Clock(_) | WriteError::Store(_)) => "error",
    };
    metrics::counter!(m::REGISTRAR_WRITES, "kind" => kind.as_str(), "outcome" => outcome)
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::live::tests::NO_HOLDS;
    use mcs_core::fixtures::{pool, pool_key};
    use mcs_store::MemoryStore;

    const NOW: u64 = 1_767_225_600_000;

    struct Fixture {
        store: Arc<MemoryStore>,
        view: Arc<LiveView>,
        clock: Arc<ManualClock>,
        registrar: Registrar,
    }

    fn fixture() -> Fixture {
        let store = Arc::new(MemoryStore::new());
        let clock = Arc::new(ManualClock::new(NOW));
        let view = Arc::new(LiveView::new(0, 60_000, NO_HOLDS, clock.clone()));
        view.replace_all(vec![], NOW);
        view.mark_poll(crate::live::PollOutcome::FullRead);
        let lease = LeasePolicy::new(30, 10).unwrap();
        let registrar = Registrar::new(
            store.clone(),
            view.clone(),
            "reg-0".into(),
            lease,
            Duration::from_secs(5),
            60_000,
        );
        Fixture { store, view, clock, registrar }
    }

    fn heartbeat(model: &str) -> Intent {
        Intent {
            key: Key::Pool { pool_id: pool_key("p").id() },
            body: Body::Pool(pool("p", model)),
            incarnation: Some(Incarnation::new("inc-1").unwrap()),
            generation: None,
            leased: true,
            lease: None,
        }
    }

    /// Issue 22, item 4: after a write with a client generation ahead of
    /// the registry's clock, the owner's withdrawal (no generation of its
    /// own) got `409 stale_generation`; it now succeeds above it.
    #[tokio::test]
    async fn the_owners_withdrawal_goes_above_a_client_generation_ahead_of_the_clock() {
        let f = fixture();
        let ahead = mcs_core::hlc::generation_at(NOW + 30_000);
        let written =
            f.registrar.write(Intent { generation: Some(ahead), ..heartbeat("m") }).await.unwrap();
        assert_eq!(written.version.generation, ahead);
        let tombstone = f
            .registrar
            .withdraw(written.key.clone(), Some(Incarnation::new("inc-1").unwrap()), None)
            .await
            .unwrap();
        assert!(tombstone.is_tombstone());
        assert!(tombstone.version.generation > ahead, "above the client's generation");
        let stored = f.store.get(&written.key).await.unwrap().unwrap();
        assert_eq!(stored, tombstone, "stored");
    }

    /// Issue 22, item 2: a tombstone had no lease end, so a withdrawal
    /// reaching a replica later than the lookback left no trace in a read
    /// of lease ends and the view kept raising the withdrawn lease. The
    /// tombstone now carries the withdrawn lease's end into `lease_ends`
    /// (and is still not served).
    #[tokio::test]
    async fn a_withdrawal_shows_in_the_lease_ends_at_the_withdrawn_lease_end() {
        let f = fixture();
        let written = f.registrar.write(heartbeat("m")).await.unwrap();
        let until = written.lease_until_ms.unwrap();
        f.clock.advance(1_000);
        let incarnation = Some(Incarnation::new("inc-1").unwrap());
        let tombstone = f.registrar.withdraw(written.key.clone(), incarnation, None).await.unwrap();
        assert_eq!(tombstone.lease_until_ms, Some(until));
        let ends = f.store.read_lease_ends(until, until).await.unwrap();
        assert_eq!(ends.len(), 1, "{ends:?}");
        assert_eq!(ends[0].version, tombstone.version, "the tombstone's version");
        assert!(f.view.read().pools().is_empty(), "and nothing is served");
    }

    /// Issue 22, item 3: re-registering with a shorter lease answered the
    /// short lease while storage and the view kept the longer one (a pool
    /// served 8 s after its 4 s lease lapsed). Now the short lease is what
    /// is stored and served.
    #[tokio::test]
    async fn a_shorter_lease_is_stored_not_only_answered() {
        let f = fixture();
        let with_lease = |secs: u64, every: u64| Intent {
            lease: Some(Lease::new(secs, every).unwrap()),
            ..heartbeat("m")
        };
        let long = f.registrar.write(with_lease(30, 10)).await.unwrap();
        assert_eq!(long.lease_until_ms, Some(NOW + 30_000));
        f.clock.advance(1_000);
        let short = f.registrar.write(with_lease(4, 1)).await.unwrap();
        assert_eq!(short.lease_until_ms, Some(NOW + 5_000), "answered");
        let stored = f.store.get(&long.key).await.unwrap().unwrap();
        assert_eq!(stored.lease_until_ms, Some(NOW + 5_000), "stored");
        let held = f.view.read().record(&long.key).cloned().unwrap();
        assert_eq!(held.lease_until_ms, Some(NOW + 5_000), "served");
        // Heartbeats at the short terms renew as before.
        f.clock.advance(1_000);
        let beat = f.registrar.write(with_lease(4, 1)).await.unwrap();
        assert_eq!((beat.version, beat.lease_until_ms), (short.version, Some(NOW + 6_000)));
    }

    /// A heartbeat (same content) renews the lease in place: the stored
    /// and the returned record keep the first write's changed_at_ms, the
    /// view holds the later lease; a content change moves changed_at_ms.
    #[tokio::test]
    async fn a_heartbeat_keeps_changed_at_and_a_content_change_moves_it() {
        let f = fixture();
        let first = f.registrar.write(heartbeat("m")).await.unwrap();
        assert_eq!(first.changed_at_ms, NOW);

        f.clock.advance(10_000);
        let beat = f.registrar.write(heartbeat("m")).await.unwrap();
        assert_eq!(beat.version, first.version, "a heartbeat keeps the version");
        assert_eq!(beat.changed_at_ms, NOW, "and the write time of the content");
        assert_eq!(beat.lease_until_ms, Some(NOW + 40_000), "the lease moves");
        let stored = f.store.get(&first.key).await.unwrap().unwrap();
        assert_eq!(stored, beat, "stored as answered");
        assert!(f.store.read_changed_since(NOW).await.unwrap().is_empty(), "not a change");
        let held = f.view.read().record(&first.key).cloned().unwrap();
        assert_eq!(held, beat, "read-your-writes: the view holds the renewal");

        f.clock.advance(10_000);
        let changed = f.registrar.write(heartbeat("m2")).await.unwrap();
        assert!(changed.version > first.version, "a new generation");
        assert_eq!(changed.changed_at_ms, NOW + 20_000, "a content change moves changed_at");
        assert_eq!(f.store.read_changed_since(NOW).await.unwrap(), vec![changed.clone()]);
        assert_eq!(f.view.read().record(&first.key), Some(&changed));
    }
}
