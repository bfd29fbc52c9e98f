//! The importer: keeps, per service the registry imports, a ServiceImport,
//! a derived Service and EndpointSlices in this cluster (docs/design.md §13).
//!
//! ```text
//!  registry watch (ImportList:      ─┐ complete list: sync the services whose import changed,
//!    a list, then its changes)       │   delete ours of services no longer listed
//!  registry probe (every ≤ 15 s)    ─┤
//!  resync timer (jittered)          ─┤ resync, outage begins or ends: all of them
//!  our objects changed (debounced)  ─┘ our object changed: its service (not our
//!                                       writes' echoes, echo.rs)
//!  incomplete list / unreachable: Ready=False (RegistryIncomplete, RegistryUnavailable),
//!  objects kept as the last complete list had them, nothing deleted
//!  complete list removing half or more at once: removals held for a window (hold.rs)
//! ```
//!
//! The registry client's watch retries a down registry silently (it yields
//! only lists and changes, and an error only when retrying cannot help), so
//! a probe of the import list (a `HEAD`, whose cost does not grow with the
//! imports) tells an outage from a quiet registry; the next complete list,
//! or the first successful probe after an outage, reconciles again.
//!
//! This cluster's own exports are imported too (MCS semantics). A namespace
//! missing here gets nothing: the import is logged once and counted, and is
//! synced as soon as the namespace appears.

pub mod apply;
pub mod diff;
pub mod echo;
pub mod hold;
pub mod index;
pub mod plan;

use crate::Context;
use crate::metrics::{
    IMPORT_DRIFT_REPAIRS, IMPORT_ENDPOINTS, IMPORT_NAMESPACE_MISSING, IMPORT_REGISTRY_AVAILABLE,
    IMPORT_REMOVAL_HOLD, IMPORT_REMOVALS_HELD, IMPORT_SLICES, IMPORT_SYNC_SECONDS, IMPORTS,
    RECONCILES,
};
use crate::pace::jittered;
use apply::{Key, Outcome, Stores, Touched, brief};
use echo::Echoes;
use hold::{HoldPolicy, Judged, RemovalHold};
use mcs_api::{ImportList, ServiceImport};
use mcs_client::{Changes, Update};
use plan::RegistryState;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Delay between a change of our objects and the reconcile of its service,
/// so that a burst of events (our own writes among them) makes one pass.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// Reconciles in a row before the importer lets the runtime's other tasks run.
const YIELD_EVERY: usize = 64;

/// Delay before a service whose sync failed is tried again, doubled at each
/// further failure up to `RETRY_MAX`.
const RETRY: Duration = Duration::from_secs(5);
/// The longest delay between retries of a failing service.
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Delay before a watch that ended on an error is started again.
const WATCH_RESTART: Duration = Duration::from_secs(5);
/// How often, at most, the registry is probed for reachability.
const PROBE_INTERVAL: Duration = Duration::from_secs(15);
/// How long a probe may take before the registry counts as unreachable
/// (the client would otherwise retry for its whole retry deadline).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// The share of imported services one complete list must remove, at least,
/// for the removals to be held (hold.rs).
const REMOVAL_HOLD_SHARE: f64 = 0.5;
/// The removal hold's window before the cluster's lease is known.
const REMOVAL_HOLD_DEFAULT: Duration = Duration::from_secs(30);
/// How often a removal waiting for this cluster's next renewal is looked
/// at again.
const REMOVAL_RECHECK: Duration = Duration::from_secs(1);
/// [`Importer::removal_confirmed`]: a list that `arrived`, a renewal that
/// found the lease held at `continued`, a hold's `window`.
fn removal_confirmed(
    arrived: Option<Instant>,
    continued: Option<Instant>,
    window: Duration,
    now: Instant,
) -> Result<(), Instant> {
    let Some(arrived) = arrived else { return Ok(()) };
    if continued.is_some_and(|at| at > arrived) || now >= arrived + window {
        return Ok(());
    }
    Err(now + REMOVAL_RECHECK)
}

/// The longest removal hold a granted lease gives.
const REMOVAL_HOLD_MAX: Duration = Duration::from_secs(300);

/// Runs the importer until `cancel`.
pub async fn run(ctx: Arc<Context>, cancel: CancellationToken) -> anyhow::Result<()> {
    let (touched_tx, mut touched) = mpsc::unbounded_channel();
    let stores = Stores::start(&ctx.kube, touched_tx, &cancel);
    tokio::select! {
        _ = cancel.cancelled() => return Ok(()),
        ready = stores.ready() => ready?,
    }
    tracing::info!("importer started");

    let (probe_tx, mut probes) = mpsc::channel(1);
    tokio::spawn(probe(
        ctx.registry.clone(),
        PROBE_INTERVAL.min(ctx.settings.resync_interval),
        probe_tx,
        cancel.clone(),
    ));
    let mut importer = Importer::new(ctx.clone(), stores);
    let mut watch =
        Some(ctx.registry.watch_changes::<ImportList>(cancel.child_token()).into_receiver());
    let mut watch_restart = Instant::now();
    let mut resync = Instant::now() + jittered(ctx.settings.resync_interval);
    let mut registrations = ctx.registrations.clone();
    let mut registered = *registrations.borrow_and_update();
    loop {
        let due = importer.pending.values().min().copied();
        tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            item = async { watch.as_mut()?.recv().await }, if watch.is_some() => match item {
                Some(Ok(Update::List(list))) => importer.on_list(list).await,
                Some(Ok(Update::Changed(changes))) => {
                    if !importer.on_changes(changes).await {
                        watch = None;
                        watch_restart = Instant::now();
                    }
                }
                Some(Err(error)) => {
                    tracing::warn!(%error, "registry watch failed");
                    importer.watch_error = Some(error.to_string());
                    watch = None;
                    watch_restart = Instant::now() + WATCH_RESTART;
                    importer.full_reconcile().await;
                }
                None => {
                    watch = None;
                    watch_restart = Instant::now() + WATCH_RESTART;
                }
            },
            _ = tokio::time::sleep_until(watch_restart), if watch.is_none() => {
                watch = Some(
                    ctx.registry.watch_changes::<ImportList>(cancel.child_token()).into_receiver(),
                );
            }
            Some(probed) = probes.recv() => importer.on_probe(probed).await,
            Ok(()) = registrations.changed() => {
                let now = *registrations.borrow_and_update();
                // The first registration is no news; a later one is a lease
                // lost or forgotten (hold.rs).
                if std::mem::replace(&mut registered, now) > 0 {
                    importer.hold_for_registration();
                }
            }
            _ = tokio::time::sleep_until(resync) => {
                resync = Instant::now() + jittered(ctx.settings.resync_interval);
                tracing::debug!("periodic resync");
                importer.full_reconcile().await;
            }
            Some(t) = touched.recv() => importer.on_touched(t),
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                importer.reconcile_due().await;
            }
        }
    }
}

/// Asks for the imports every `every` (jittered, a `HEAD`) and reports
/// whether the registry answered.
async fn probe(
    registry: mcs_client::Client,
    every: Duration,
    tx: mpsc::Sender<Result<(), String>>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(jittered(every)) => {}
        }
        let answered = tokio::select! {
            _ = cancel.cancelled() => return,
            // A HEAD: the list itself, which grows with the imports, is
            // the watch's to read, not the probe's.
            answered = tokio::time::timeout(PROBE_TIMEOUT, registry.reachable::<ImportList>()) => match answered {
                Ok(answered) => answered.map_err(|e| mcs_api::chain(&e)),
                Err(_) => Err(mcs_api::chain(&registry.gave_up(PROBE_TIMEOUT))),
            },
        };
        if tx.send(answered).await.is_err() {
            return;
        }
    }
}

/// The importer's state between events.
struct Importer {
    ctx: Arc<Context>,
    stores: Stores,
    /// The last complete list, by service.
    latest: Option<Listed>,
    /// Whether the last list the watch gave was complete.
    watch_complete: bool,
    /// The error that ended the watch, until it gives a list again.
    watch_error: Option<String>,
    /// The probe's last error, until it succeeds again.
    probe_error: Option<String>,
    /// Services to reconcile and when.
    pending: BTreeMap<Key, Instant>,
    /// Services pending because an object of ours changed (not the
    /// registry's list): what their reconcile writes repairs drift.
    drifted: BTreeSet<Key>,
    /// Imports whose missing namespace was logged.
    missing_logged: BTreeSet<Key>,
    /// Imports with per-import gauges set (zeroed when they go).
    gauged: BTreeSet<Key>,
    /// Consecutive failed syncs per service (for the retry delay).
    failures: BTreeMap<Key, u32>,
    /// The status of each synced service's `Ready` (for the gauge).
    ready: BTreeMap<Key, String>,
    /// The IP families this cluster gives Services; empty until known.
    cluster_families: Vec<mcs_api::IpFamily>,
    /// Holds a wave of removals back.
    hold: RemovalHold,
    /// When the latest complete list arrived.
    latest_arrived: Option<Instant>,
    /// The versions our syncs wrote, whose watch events are no change.
    echoes: Echoes,
}

impl Importer {
    fn new(ctx: Arc<Context>, stores: Stores) -> Self {
        // Exported from the start: an alert compares its increase.
        metrics::counter!(IMPORT_DRIFT_REPAIRS).increment(0);
        Self {
            ctx,
            stores,
            latest: None,
            watch_complete: false,
            watch_error: None,
            probe_error: None,
            pending: BTreeMap::new(),
            drifted: BTreeSet::new(),
            missing_logged: BTreeSet::new(),
            gauged: BTreeSet::new(),
            failures: BTreeMap::new(),
            ready: BTreeMap::new(),
            cluster_families: Vec::new(),
            hold: RemovalHold::new(HoldPolicy {
                share: REMOVAL_HOLD_SHARE,
                window: REMOVAL_HOLD_DEFAULT,
            }),
            latest_arrived: None,
            echoes: Echoes::default(),
        }
    }

    /// Whether a removal the latest list asks for may go: once a renewal of
    /// this cluster's lease after the list found the lease held (so the
    /// list came from a registry that had not lost its state; one that had
    /// answers that renewal `renewed: false`, and the hold begins instead),
    /// or, without such a renewal, once a hold's window has passed since
    /// the list. `Err` gives when to look again.
    fn removal_confirmed(&self, now: Instant) -> Result<(), Instant> {
        let continued = *self.ctx.continued_renewal.borrow();
        removal_confirmed(self.latest_arrived, continued, self.hold_window(), now)
    }

    /// Until when removals are held, if they are: while a hold runs, then
    /// until this cluster's next renewal vouches for the list (design.md
    /// §13, "A registry that forgot"). Then what is ours and no longer
    /// listed is looked at again.
    fn removals_held(&self, now: Instant) -> Option<Instant> {
        self.hold.held_until(now).or_else(|| self.removal_confirmed(now).err())
    }

    /// The window of a removal hold: the flag's, else the cluster's lease
    /// as granted (within it every living exporter renews, learns that the
    /// registry forgot it, and sends its exports again), at most 5 min.
    fn hold_window(&self) -> Duration {
        if let Some(window) = self.ctx.settings.removal_hold {
            return window;
        }
        match self.ctx.cluster_lease_secs.load(std::sync::atomic::Ordering::Relaxed) {
            0 => REMOVAL_HOLD_DEFAULT,
            secs => Duration::from_secs(secs).min(REMOVAL_HOLD_MAX),
        }
    }

    /// This cluster registered again (its lease was lost, or the registry
    /// had forgotten it): the registry's lists are suspect until every
    /// exporter has had a lease to send its exports again, so removals are
    /// held for a window from now, whatever share a list drops.
    fn hold_for_registration(&mut self) {
        let window = self.hold_window();
        self.hold.set_window(window);
        if let Some(until) = self.hold.begin(Instant::now()) {
            metrics::counter!(IMPORT_REMOVALS_HELD).increment(1);
            tracing::warn!(
                hold_secs = until.saturating_duration_since(Instant::now()).as_secs_f64(),
                "this cluster registered anew (its lease lost, or forgotten by the registry): \
                 removals held (docs/design.md §13)"
            );
        }
    }

    /// Judges a complete list, `listed`, against what this cluster imports
    /// (its objects, and the services listed `before`): a list that would
    /// remove half or more of it at once starts a hold.
    fn judge_removals(&mut self, before: impl Iterator<Item = Key>, listed: &Listed) {
        let mut imported = self.stores.keys();
        imported.extend(before);
        imported.remove(&unlabelled_key());
        let removed = imported.iter().filter(|k| !listed.imports.contains_key(*k)).count();
        let window = self.hold_window();
        self.hold.set_window(window);
        if let Judged::Began(_) = self.hold.judge(imported.len(), removed, Instant::now()) {
            metrics::counter!(IMPORT_REMOVALS_HELD).increment(1);
            tracing::warn!(
                imported = imported.len(),
                removed,
                hold_secs = window.as_secs_f64(),
                fingerprint = %listed.fingerprint,
                "the registry's list drops half or more of the imports at once: \
                 removals held (a registry that lost its records, docs/design.md §13)"
            );
        }
    }

    fn state(&self) -> RegistryState {
        registry_state(
            self.watch_error.as_deref(),
            self.probe_error.as_deref(),
            self.watch_complete,
            self.latest.is_some(),
        )
    }

    /// The watch gave a list (or changes) that is `complete` or not: when
    /// it arrived, and whether the registry was available before.
    fn took(&mut self, complete: bool) -> (Instant, bool) {
        let was_available = self.state() == RegistryState::Available;
        self.watch_error = None;
        self.watch_complete = complete;
        (Instant::now(), was_available)
    }

    /// A whole list from the watch: see [`Self::arrived`].
    async fn on_list(&mut self, list: ImportList) {
        tracing::debug!(
            imports = list.imports.len(),
            complete = list.complete,
            fingerprint = %list.fingerprint,
            "imports listed"
        );
        let (arrived, was_available) = self.took(list.complete);
        if !list.complete {
            return self.arrived(arrived, None).await;
        }
        let imports: BTreeMap<Key, ServiceImport> =
            list.imports.into_iter().map(|i| (key_of(&i), i)).collect();
        let listed = Listed { imports, fingerprint: list.fingerprint };
        let old = self.latest.take();
        let changed = match &old {
            Some(old) if was_available => Some(changed_keys(&old.imports, &listed.imports)),
            _ => None,
        };
        self.latest_arrived = Some(arrived);
        self.judge_removals(old.into_iter().flat_map(|o| o.imports.into_keys()), &listed);
        self.latest = Some(listed);
        self.arrived(arrived, changed).await
    }

    /// What changed since the last update, which was complete (the watch
    /// gives a whole list after an incomplete one): applied to the latest
    /// list by service, so that a change costs what it touches, not every
    /// import listed (issue 27 item 9). See [`Self::arrived`]. `false` if
    /// there was no list to apply them to (the watch gives changes only
    /// after one): the watch must start again.
    async fn on_changes(&mut self, changes: Changes<ServiceImport>) -> bool {
        tracing::debug!(
            upserted = changes.upserted.len(),
            deleted = changes.deleted.len(),
            complete = changes.complete,
            fingerprint = %changes.fingerprint,
            "imports changed"
        );
        // Whether the registry was available is read before the latest list
        // is taken out (without one it is not).
        let (arrived, was_available) = self.took(changes.complete);
        let Some(mut latest) = self.latest.take() else {
            tracing::warn!("registry changes without a list before them: watching again");
            return false;
        };
        if !changes.complete {
            // The latest list stays the last complete one.
            self.latest = Some(latest);
            self.arrived(arrived, None).await;
            return true;
        }
        // Only a list that drops services can start a hold: the services
        // listed before are needed to judge it.
        let before: Option<Vec<Key>> =
            (!changes.deleted.is_empty()).then(|| latest.imports.keys().cloned().collect());
        let changed = latest.apply(changes);
        self.latest_arrived = Some(arrived);
        if let Some(before) = before {
            self.judge_removals(before.into_iter(), &latest);
        }
        self.latest = Some(latest);
        self.arrived(arrived, was_available.then_some(changed)).await;
        true
    }

    /// A new list from the watch, whole or by its changes: with the
    /// registry available before and after, only the services whose import
    /// `changed` are synced (the rest cannot have changed but by drift,
    /// which the resync and our watches repair); otherwise (`None`)
    /// everything.
    async fn arrived(&mut self, arrived: Instant, changed: Option<BTreeSet<Key>>) {
        let outcome = match changed {
            Some(keys) => {
                let state = self.state();
                let mut total = Outcome::default();
                for key in keys {
                    self.pending.remove(&key);
                    self.drifted.remove(&key);
                    total += self.reconcile(&key, &state).await;
                }
                self.publish_ready();
                total
            }
            None => self.full_reconcile().await,
        };
        if outcome.writes + outcome.deletes > 0 {
            metrics::histogram!(IMPORT_SYNC_SECONDS).record(arrived.elapsed().as_secs_f64());
        }
    }

    async fn on_probe(&mut self, probed: Result<(), String>) {
        match probed {
            Ok(()) if self.probe_error.take().is_some() => {
                tracing::info!("registry reachable again");
                self.full_reconcile().await;
            }
            Ok(()) => {}
            Err(error) => {
                let first = self.probe_error.is_none();
                self.probe_error = Some(error.clone());
                if first {
                    tracing::warn!(%error, "registry unreachable: keeping every import");
                    self.full_reconcile().await;
                }
            }
        }
    }

    fn on_touched(&mut self, touched: Touched) {
        let due = Instant::now() + DEBOUNCE;
        let keys: Vec<Key> = match touched {
            Touched::Changed(key, version) if self.echoes.take(&key, &version) => return,
            Touched::Key(key) | Touched::Changed(key, _) => {
                self.drifted.insert(key.clone());
                vec![key]
            }
            Touched::Unlabelled => {
                self.drifted.insert(unlabelled_key());
                vec![unlabelled_key()]
            }
            Touched::Namespace(ns) => self
                .latest
                .iter()
                .flat_map(|l| l.imports.keys())
                .filter(|key| key.0 == ns)
                .cloned()
                .collect(),
            Touched::All => self.all_keys().into_iter().collect(),
        };
        for key in keys {
            self.pending.entry(key).or_insert(due);
        }
    }

    /// Every service listed or holding objects of ours.
    fn all_keys(&self) -> BTreeSet<Key> {
        let mut keys = self.stores.keys();
        keys.extend(self.latest.iter().flat_map(|l| l.imports.keys().cloned()));
        keys
    }

    async fn reconcile_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Key> =
            self.pending.iter().filter(|(_, at)| **at <= now).map(|(k, _)| k.clone()).collect();
        let state = self.state();
        for (i, key) in due.into_iter().enumerate() {
            // A resync of thousands of services that write nothing never
            // waits: let the runtime's other tasks (probes, metrics, the
            // lease) run between them, on one worker too.
            if i % YIELD_EVERY == YIELD_EVERY - 1 {
                tokio::task::yield_now().await;
            }
            self.pending.remove(&key);
            self.reconcile_pending(&key, &state).await;
        }
        self.publish_ready();
    }

    /// Reconciles `key`, counting what it writes as drift repairs when an
    /// object of ours changed since its last reconcile and the registry's
    /// list did not (our own writes come back through the watches too, and
    /// find nothing to change: what is written then, someone else changed).
    async fn reconcile_pending(&mut self, key: &Key, state: &RegistryState) -> Outcome {
        let drifted = self.drifted.remove(key);
        let outcome = self.reconcile(key, state).await;
        if drifted {
            metrics::counter!(IMPORT_DRIFT_REPAIRS).increment(outcome.writes + outcome.deletes);
        }
        outcome
    }

    /// Sets the gauge of imports by the status of their `Ready`.
    fn publish_ready(&self) {
        let mut by_ready: BTreeMap<&str, u64> =
            ["True", "False", "Unknown"].into_iter().map(|s| (s, 0)).collect();
        for ready in self.ready.values() {
            *by_ready.entry(ready.as_str()).or_default() += 1;
        }
        for (ready, n) in by_ready {
            metrics::gauge!(IMPORTS, "ready" => ready.to_owned()).set(n as f64);
        }
        let held = self.hold.held_until(Instant::now()).is_some();
        metrics::gauge!(IMPORT_REMOVAL_HOLD).set(if held { 1.0 } else { 0.0 });
    }

    /// Reconciles every service, then deletes ours of services not listed.
    async fn full_reconcile(&mut self) -> Outcome {
        if self.cluster_families.is_empty() {
            match apply::cluster_families(&self.ctx.kube).await {
                Ok(families) => {
                    tracing::info!(?families, "cluster ip families");
                    self.cluster_families = families;
                }
                Err(error) => {
                    tracing::warn!(
                        error = brief(&error),
                        "cluster ip families unknown: using each import's"
                    )
                }
            }
        }
        let state = self.state();
        metrics::gauge!(IMPORT_REGISTRY_AVAILABLE).set(if state == RegistryState::Available {
            1.0
        } else {
            0.0
        });
        let mut total = Outcome::default();
        for key in self.all_keys().into_iter().chain([unlabelled_key()]) {
            self.pending.remove(&key);
            total += self.reconcile_pending(&key, &state).await;
        }
        self.publish_ready();
        total
    }

    fn listed(&self, key: &Key) -> Option<&mcs_api::ServiceImport> {
        self.latest.as_ref()?.imports.get(key)
    }

    /// Reconciles one service: sync it when listed, delete ours when the list
    /// is complete and it is not, else (not listed, registry unavailable)
    /// only mark its ServiceImport. Records the status of its `Ready`.
    async fn reconcile(&mut self, key: &Key, state: &RegistryState) -> Outcome {
        let kube = self.ctx.kube.clone();
        if *key == unlabelled_key() {
            if *state == RegistryState::Available {
                match apply::remove_unlabelled(&kube, &self.stores).await {
                    Ok(outcome) => return outcome,
                    Err(error) => {
                        tracing::warn!(error = brief(&error), "deleting unlabelled objects failed")
                    }
                }
            }
            return Outcome::default();
        }
        let result = match self.listed(key).cloned() {
            Some(import) => {
                if !self.stores.namespace_usable(&key.0) {
                    metrics::counter!(IMPORT_NAMESPACE_MISSING).increment(1);
                    if self.missing_logged.insert(key.clone()) {
                        tracing::info!(namespace = %key.0, name = %key.1, "namespace missing here: import skipped until it exists");
                    }
                    self.ready.remove(key);
                    return Outcome::default();
                }
                self.missing_logged.remove(key);
                let max = self.ctx.settings.max_endpoints_per_slice;
                let families = &self.cluster_families;
                let held = self.removals_held(Instant::now());
                let synced =
                    apply::sync(&kube, &self.stores, &import, state, held.is_some(), max, families);
                match synced.await {
                    Ok(synced) => {
                        if synced.kept > 0
                            && let Some(until) = held
                        {
                            // Looked at again when the hold ends.
                            self.pending.insert(key.clone(), until);
                        }
                        self.echoes.record(key, synced.written);
                        let (ns, name) = key.clone();
                        metrics::gauge!(IMPORT_SLICES, "namespace" => ns.clone(), "name" => name.clone())
                            .set(synced.slices as f64);
                        metrics::gauge!(IMPORT_ENDPOINTS, "namespace" => ns, "name" => name)
                            .set(synced.endpoints as f64);
                        self.gauged.insert(key.clone());
                        Ok((synced.outcome, Some(synced.ready)))
                    }
                    Err(e) => Err(e),
                }
            }
            None if *state == RegistryState::Available
                && let Some(until) = self.removals_held(Instant::now()) =>
            {
                // Kept, then looked at again.
                self.pending.insert(key.clone(), until);
                Ok((Outcome::default(), self.ready.get(key).cloned()))
            }
            None if *state == RegistryState::Available => {
                self.echoes.forget(key);
                match apply::remove(&kube, &self.stores, key).await {
                    Ok(outcome) => {
                        if self.gauged.remove(key) {
                            let (ns, name) = key.clone();
                            metrics::gauge!(IMPORT_SLICES, "namespace" => ns.clone(), "name" => name.clone()).set(0.0);
                            metrics::gauge!(IMPORT_ENDPOINTS, "namespace" => ns, "name" => name)
                                .set(0.0);
                        }
                        Ok((outcome, None))
                    }
                    Err(e) => Err(e),
                }
            }
            None => apply::mark_unavailable(&kube, &self.stores, key, state).await.map(|written| {
                let outcome = Outcome { writes: u64::from(written), deletes: 0 };
                let ready = self.stores.import(&key.0, &key.1).map(|_| "False".to_owned());
                (outcome, ready)
            }),
        };
        match result {
            Ok((outcome, ready)) => {
                self.failures.remove(key);
                match ready {
                    Some(ready) => self.ready.insert(key.clone(), ready),
                    None => self.ready.remove(key),
                };
                metrics::counter!(RECONCILES, "controller" => "import", "outcome" => "ok")
                    .increment(1);
                if outcome.writes + outcome.deletes > 0 {
                    tracing::debug!(namespace = %key.0, name = %key.1, writes = outcome.writes, deletes = outcome.deletes, "import reconciled");
                }
                outcome
            }
            Err(error) if error.downcast_ref::<apply::NamespaceTerminating>().is_some() => {
                // The namespace takes our objects with it; its watch event
                // ends the syncs there (`namespace_usable`).
                metrics::counter!(IMPORT_NAMESPACE_MISSING).increment(1);
                tracing::debug!(namespace = %key.0, name = %key.1, "namespace being deleted: import skipped");
                self.ready.remove(key);
                Outcome::default()
            }
            Err(error) => {
                metrics::counter!(RECONCILES, "controller" => "import", "outcome" => "error")
                    .increment(1);
                tracing::warn!(namespace = %key.0, name = %key.1, error = brief(&error), "import reconcile failed");
                let failures = self.failures.entry(key.clone()).or_default();
                *failures += 1;
                self.pending.insert(key.clone(), Instant::now() + retry_delay(*failures));
                Outcome::default()
            }
        }
    }
}

/// The registry's state from what the watch and the probe last said:
/// unreachable while either failed, incomplete until a complete list has
/// arrived and while the last list was not complete.
fn registry_state(
    watch_error: Option<&str>,
    probe_error: Option<&str>,
    watch_complete: bool,
    has_complete_list: bool,
) -> RegistryState {
    if let Some(error) = watch_error.or(probe_error) {
        RegistryState::Unreachable(error.to_owned())
    } else if !watch_complete || !has_complete_list {
        RegistryState::Incomplete
    } else {
        RegistryState::Available
    }
}

/// A complete list of imports, by service.
#[derive(Debug)]
struct Listed {
    imports: BTreeMap<Key, ServiceImport>,
    fingerprint: String,
}

impl Listed {
    /// Applies `changes`; the services whose import they changed, as
    /// [`changed_keys`] gives them between the list before and after.
    fn apply(&mut self, changes: Changes<ServiceImport>) -> BTreeSet<Key> {
        let mut changed = BTreeSet::new();
        for import in changes.upserted {
            let key = key_of(&import);
            if self.imports.get(&key) != Some(&import) {
                changed.insert(key.clone());
                self.imports.insert(key, import);
            }
        }
        for import in &changes.deleted {
            let key = key_of(import);
            if self.imports.remove(&key).is_some() {
                changed.insert(key);
            }
        }
        self.fingerprint = changes.fingerprint;
        changed
    }
}

/// The services whose import differs between two lists, or is in one only.
fn changed_keys(
    old: &BTreeMap<Key, ServiceImport>,
    new: &BTreeMap<Key, ServiceImport>,
) -> BTreeSet<Key> {
    let mut changed: BTreeSet<Key> =
        old.iter().filter(|(k, i)| new.get(*k) != Some(*i)).map(|(k, _)| k.clone()).collect();
    changed.extend(new.keys().filter(|k| !old.contains_key(*k)).cloned());
    changed
}

/// The delay before the retry that follows `failures` consecutive failures.
fn retry_delay(failures: u32) -> Duration {
    RETRY.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(RETRY_MAX)
}

/// The queue's key for "our objects that name no service": no service has
/// an empty namespace.
fn unlabelled_key() -> Key {
    (String::new(), String::new())
}

fn key_of(import: &mcs_api::ServiceImport) -> Key {
    (import.namespace.as_str().to_owned(), import.name.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_available_only_with_a_complete_list_and_no_failure() {
        assert_eq!(registry_state(None, None, true, true), RegistryState::Available);
        assert_eq!(registry_state(None, None, false, true), RegistryState::Incomplete);
        assert_eq!(registry_state(None, None, true, false), RegistryState::Incomplete);
        assert_eq!(
            registry_state(None, Some("refused"), true, true),
            RegistryState::Unreachable("refused".into())
        );
        assert_eq!(
            registry_state(Some("403"), Some("refused"), true, true),
            RegistryState::Unreachable("403".into())
        );
    }

    fn import(namespace: &str, name: &str, port: u16) -> mcs_api::ServiceImport {
        let label = |s: &str| mcs_api::Label::new(s).unwrap();
        mcs_api::ServiceImport {
            namespace: label(namespace),
            name: label(name),
            service_type: mcs_api::ServiceType::ClusterSetIP,
            ports: vec![mcs_api::ServicePort {
                name: "http".into(),
                protocol: mcs_api::Protocol::TCP,
                port,
                app_protocol: None,
                target_port: None,
            }],
            session_affinity: mcs_api::SessionAffinity::None,
            session_affinity_timeout_secs: None,
            ip_families: vec![],
            internal_traffic_policy: None,
            traffic_distribution: None,
            labels: Default::default(),
            annotations: Default::default(),
            clusters: vec![],
            conditions: vec![],
        }
    }

    fn list(imports: Vec<mcs_api::ServiceImport>) -> BTreeMap<Key, ServiceImport> {
        imports.into_iter().map(|i| (key_of(&i), i)).collect()
    }

    #[test]
    fn a_new_list_syncs_only_the_services_that_changed_came_or_went() {
        let old =
            list(vec![import("a", "kept", 80), import("a", "edited", 80), import("b", "gone", 80)]);
        let new =
            list(vec![import("a", "kept", 80), import("a", "edited", 81), import("c", "new", 80)]);
        let key = |ns: &str, n: &str| (ns.to_owned(), n.to_owned());
        assert_eq!(
            changed_keys(&old, &new),
            BTreeSet::from([key("a", "edited"), key("b", "gone"), key("c", "new")])
        );
        assert!(changed_keys(&new, &new).is_empty());
    }

    #[test]
    fn changes_applied_to_a_list_give_the_list_after_and_what_changed() {
        let before =
            vec![import("a", "kept", 80), import("a", "edited", 80), import("b", "gone", 80)];
        let mut listed = Listed { imports: list(before.clone()), fingerprint: "f1".into() };
        let changes = Changes {
            upserted: vec![
                import("a", "kept", 80),
                import("a", "edited", 81),
                import("c", "new", 80),
            ],
            deleted: vec![import("b", "gone", 80), import("z", "never-listed", 80)],
            complete: true,
            fingerprint: "f2".into(),
        };
        let after =
            list(vec![import("a", "kept", 80), import("a", "edited", 81), import("c", "new", 80)]);
        let changed = listed.apply(changes);
        assert_eq!(changed, changed_keys(&list(before), &after));
        assert_eq!(changed.len(), 3, "kept is unchanged, never-listed was not there");
        assert_eq!(listed.imports, after);
        assert_eq!(listed.fingerprint, "f2");
    }

    #[test]
    fn a_removal_waits_for_a_renewal_after_its_list_or_a_window() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let window = s(30);
        // No list yet, or a renewal after the list: remove.
        assert_eq!(removal_confirmed(None, None, window, t0), Ok(()));
        assert_eq!(removal_confirmed(Some(t0), Some(t0 + s(1)), window, t0 + s(2)), Ok(()));
        // A renewal before the list, or at its instant, or none: wait a
        // second and look again.
        for continued in [None, Some(t0 - s(1)), Some(t0)] {
            let now = t0 + s(5);
            assert_eq!(removal_confirmed(Some(t0), continued, window, now), Err(now + s(1)));
        }
        // Without a renewal, a window after the list at most.
        assert_eq!(removal_confirmed(Some(t0), None, window, t0 + window), Ok(()));
        assert!(removal_confirmed(Some(t0), None, window, t0 + window - s(1)).is_err());
    }

    #[test]
    fn retries_back_off_to_five_minutes() {
        let delays: Vec<u64> = [1, 2, 3, 6, 7, 100].map(|n| retry_delay(n).as_secs()).to_vec();
        assert_eq!(delays, [5, 10, 20, 160, 300, 300]);
    }

    #[test]
    fn an_api_refusal_is_logged_by_its_message() {
        let status = kube::core::Status::failure("nope", "Forbidden").with_code(403);
        let error = anyhow::Error::from(kube::Error::Api(status.boxed()));
        assert_eq!(brief(&error), "nope (403)");
        assert_eq!(brief(&anyhow::anyhow!("other")), "other");
    }
}
