//! The export reconciler: a `kube::runtime::Controller` over ServiceExports
//! of every namespace, triggered also by their Services and EndpointSlices.
//!
//! ```text
//!  ServiceExport/Service/EndpointSlice event ─▶ reconcile(ns/name)
//!    build ─▶ valid, content hash changed? ─▶ PUT export
//!                             └▶ invalid ─▶ withdraw it if the registry may hold it
//!    conditions (Valid, Ready, Conflict) ─▶ server-side apply of status, if changed
//!                             └▶ refused by the registry (4xx) ─▶ withdraw the previous one
//!    deleted (a tombstone in the store, tombstones.rs) ─▶ withdraw (bounded) ─▶ forget the tombstone;
//!                                                       not withdrawn ─▶ left to the sweep
//!    our finalizer (put by a controller before 2026-12-06) ─▶ the same, then the finalizer goes
//!  Service / EndpointSlice watch caches (caches.rs) ─▶ the ServiceExport of a Service,
//!    of the Service a slice names and of the one it left; a reconcile reads them, no GET
//!  registry GET /v1/exports (watch) ─▶ the exports whose conditions changed ─▶ reconcile each
//!  re-registration, periodic resync (jittered) ─▶ reconcile all, re-send / repair drift,
//!                                                sweep: withdraw orphans and left-over exports
//! ```
//!
//! What was sent is remembered in memory (hash per export): a reconcile
//! with nothing changed makes no write. After a re-registration everything
//! is sent again; on each periodic resync an export whose copy in the
//! registry is missing or differs is sent again, and exports of this
//! cluster that no ServiceExport asks for any more are withdrawn.
//! Graceful stop withdraws nothing. See docs/design.md §13.
//!
//! No finalizer is put on a ServiceExport: its deletion is seen by the
//! watch and kept in the store as a tombstone until the export is
//! withdrawn (tombstones.rs). The withdrawal waits at most
//! [`REGISTRY_CALL_BOUND`]; past that, or refused, the export is
//! remembered for the sweep, which withdraws it on each resync until the
//! registry takes it. A controller restarted meanwhile (or a watch that
//! re-listed before the tombstone's reconcile) finds it as an orphan in the
//! registry's list. The finalizer that controllers before this one added is
//! still honoured: withdrawn, then removed, when its object is deleted.
//!
//! An export the registry refuses (`4xx`: too large, invalid) is not left
//! standing in its previous form: the previous export is withdrawn, so
//! that importing clusters do not serve endpoints that no longer hold as
//! if they were current; `Ready=False` (`Failed`) carries the registry's
//! message.

use super::build::{Built, NO_SERVICE, build, content_hash};
use super::caches::Caches;
use super::conditions::{self, Observed};
use super::state::{Id, State};
use super::tombstones::{Tombstones, is_tombstone};
use crate::crd::ServiceExport;
use crate::pace::{drain, jittered, ticks};
use crate::{Context, FIELD_MANAGER, metrics};
use futures::{FutureExt as _, StreamExt, TryStreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{self, Event, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource as _, ResourceExt};
use mcs_api::{ExportAccepted, ExportKey, ExportList, ExportRequest, Label, Withdrawal};
use mcs_client::Update;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The finalizer that controllers before 2026-12-06 put on every
/// ServiceExport (the export withdrawn before the object went). No longer
/// added; where found, removed once its object is deleted and withdrawn.
pub const FINALIZER: &str = "multicluster.x-k8s.io/mcs-registry-controller";

/// Longest delay between retries of a failing reconcile.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How long a reconcile (a send, a deleted ServiceExport's withdrawal) and
/// each withdrawal of the sweep wait for the registry, whose client retries
/// an outage for longer. An object's reconciles run one at a time, so a send
/// waiting on an absent registry would hold its deletion, and its namespace,
/// as long as it waited.
pub const REGISTRY_CALL_BOUND: Duration = Duration::from_secs(5);

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a call.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The registry refused the export or could not be reached.
    #[error("registry: {0}")]
    Registry(#[from] mcs_client::Error),
    /// Removing an earlier controller's finalizer, or the reconcile inside it.
    #[error(transparent)]
    Finalizer(Box<finalizer::Error<Error>>),
}

/// The export reconciler's shared state.
#[derive(Debug)]
pub struct Exporter {
    ctx: Arc<Context>,
    /// The Services and slices a reconcile reads.
    caches: Caches,
    state: Mutex<State>,
    /// Exports of deleted ServiceExports whose withdrawal did not go
    /// through: the sweep withdraws them.
    withdraw_later: Mutex<BTreeSet<Id>>,
    /// The controller's store of ServiceExports, deleted ones included.
    tombstones: Tombstones,
}

impl Exporter {
    /// A reconciler for `ctx`'s cluster.
    pub fn new(ctx: Arc<Context>, caches: Caches) -> Self {
        Self {
            ctx,
            caches,
            state: Mutex::new(State::default()),
            withdraw_later: Mutex::default(),
            tombstones: Tombstones::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn withdraw_later(&self) -> MutexGuard<'_, BTreeSet<Id>> {
        self.withdraw_later.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(&self, id: &Id) -> Option<ExportKey> {
        Some(ExportKey {
            cluster_id: self.ctx.cluster_id.clone(),
            namespace: Label::new(id.0.as_str()).ok()?,
            name: Label::new(id.1.as_str()).ok()?,
        })
    }

    fn next_generation(&self) -> u64 {
        let now_ms = jiff::Timestamp::now().as_millisecond().max(0) as u64;
        self.state().next_generation(now_ms)
    }

    async fn put(
        &self,
        key: &ExportKey,
        mut req: ExportRequest,
    ) -> Result<ExportAccepted, mcs_client::Error> {
        req.incarnation = Some(self.ctx.incarnation.clone());
        bounded(&self.ctx.registry, async {
            let mut retried = false;
            loop {
                req.generation = Some(self.next_generation());
                let result = self.ctx.registry.put_export(key, &req).await;
                registry_call("put_export", &result);
                match result {
                    Err(mcs_client::Error::Conflict(mcs_client::Conflict::StaleGeneration {
                        stored_generation: Some(stored),
                        ..
                    })) if !retried => {
                        retried = true;
                        self.state().observe_generation(stored);
                    }
                    other => return other,
                }
            }
        })
        .await
    }

    /// Withdraws the export; one the registry does not know is gone already.
    async fn withdraw(&self, key: &ExportKey) -> Result<(), mcs_client::Error> {
        bounded(&self.ctx.registry, async {
            let mut retried = false;
            loop {
                let w = Withdrawal {
                    incarnation: Some(self.ctx.incarnation.clone()),
                    generation: Some(self.next_generation()),
                };
                let result = self.ctx.registry.withdraw_export(key, &w).await;
                registry_call("withdraw_export", &result);
                match result {
                    Ok(_) | Err(mcs_client::Error::NotFound { .. }) => {
                        tracing::info!(export = %key, "export withdrawn");
                        return Ok(());
                    }
                    Err(mcs_client::Error::Conflict(mcs_client::Conflict::StaleGeneration {
                        stored_generation: Some(stored),
                        ..
                    })) if !retried => {
                        retried = true;
                        self.state().observe_generation(stored);
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .await
    }

    async fn apply(&self, se: &ServiceExport) -> Result<Action, Error> {
        let id = id_of(se);
        let key = self.key(&id);
        // From the watch caches: no API request (caches.rs).
        let service = self.caches.service(&id.0, &id.1);
        let exportable = service.as_ref().is_some_and(|s| {
            s.spec.as_ref().and_then(|s| s.type_.as_deref()) != Some("ExternalName")
        });
        let slices = if exportable { self.caches.slices_of(&id.0, &id.1) } else { Vec::new() };
        let (observed, outcome) = match (build(se, service.as_ref(), &slices), key) {
            (Built::Valid(req), Some(key)) => {
                let hash = content_hash(&req.spec());
                let registration = *self.ctx.registrations.borrow();
                if self.state().needs_send(&id, &hash, registration) {
                    match self.put(&key, *req).await {
                        Ok(accepted) => {
                            tracing::info!(export = %key, generation = accepted.generation, "export sent");
                            let mut st = self.state();
                            st.sent(id.clone(), hash, registration, accepted.conditions);
                            (Observed::Accepted(st.registry_conditions(&id)), Ok(()))
                        }
                        Err(e) => {
                            let mut message = failure_message(&e);
                            if matches!(e, mcs_client::Error::Invalid { .. })
                                && self.state().registry_may_hold(&id)
                            {
                                // What the registry holds is an older
                                // state of the service: not to be served
                                // as current.
                                match self.withdraw(&key).await {
                                    Ok(()) => {
                                        message.push_str("; the previous export was withdrawn")
                                    }
                                    Err(w) => message.push_str(&format!(
                                        "; the previous export could not be withdrawn: {w}"
                                    )),
                                }
                            }
                            self.state().forget(&id);
                            (Observed::Failed(message), Err(Error::Registry(e)))
                        }
                    }
                } else {
                    (Observed::Accepted(self.state().registry_conditions(&id)), Ok(()))
                }
            }
            (Built::Invalid { reason, message }, key) => {
                let mut outcome = Ok(());
                if let Some(key) = key
                    && self.state().registry_may_hold(&id)
                {
                    match self.withdraw(&key).await {
                        Ok(()) => {
                            self.state().forget(&id);
                        }
                        Err(e) => outcome = Err(Error::Registry(e)),
                    }
                }
                (Observed::Invalid { reason, message }, outcome)
            }
            // Services are named by DNS labels, so this cannot happen; were it
            // to, nothing could be exported under that name.
            (Built::Valid(_), None) => (
                Observed::Invalid {
                    reason: NO_SERVICE,
                    message: format!("{}/{} is not a DNS label", id.0, id.1),
                },
                Ok(()),
            ),
        };
        self.write_status(se, &observed).await?;
        outcome?;
        self.state().succeeded(&id);
        Ok(Action::await_change())
    }

    async fn cleanup(&self, se: &ServiceExport) -> Result<Action, Error> {
        let id = id_of(se);
        if let Some(key) = self.key(&id)
            && self.state().registry_may_hold(&id)
            && let Err(error) = self.withdraw(&key).await
        {
            // A deletion (or an earlier controller's finalizer, and with it
            // the namespace) is not held while the registry is away: the
            // sweep withdraws it later.
            tracing::warn!(export = %key, %error, "export not withdrawn; left to the resync's sweep");
            self.withdraw_later().insert(id.clone());
        }
        let mut st = self.state();
        st.remove(&id);
        set_export_gauges(&st);
        Ok(Action::await_change())
    }

    /// Applies the status when it differs beyond timestamps from what the
    /// ServiceExport shows (or, while the store has not caught up with
    /// this controller's last write, from what that write made it show).
    async fn write_status(&self, se: &ServiceExport, observed: &Observed) -> Result<(), Error> {
        let id = id_of(se);
        let version = se.metadata.resource_version.clone();
        let stored = se.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        let (new, differs) = {
            let mut st = self.state();
            let old = st.status_shown(&id, version.as_deref(), stored);
            let new = conditions::conditions(
                old,
                observed,
                se.metadata.generation,
                Time(jiff::Timestamp::now()),
            );
            let differs = conditions::differs(old, &new);
            st.shown(id.clone(), new.iter().map(|c| (c.type_.clone(), c.status.clone())).collect());
            set_export_gauges(&st);
            (new, differs)
        };
        if !differs {
            return Ok(());
        }
        let patch = serde_json::json!({
            "apiVersion": ServiceExport::api_version(&()),
            "kind": ServiceExport::kind(&()),
            "status": {"conditions": new},
        });
        Api::<ServiceExport>::namespaced(self.ctx.kube.clone(), &id.0)
            .patch_status(&id.1, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
            .await?;
        self.state().status_written(id, version, new);
        Ok(())
    }

    /// Withdraws this cluster's exports in the registry that no
    /// ServiceExport asks for: deleted while no controller ran, or deleted
    /// while the registry could not be reached (kept until withdrawn).
    async fn sweep_orphans(&self, store: &Store<ServiceExport>) {
        let exists = |id: &Id| {
            store.get(&ObjectRef::new(&id.1).within(&id.0)).is_some_and(|se| !is_tombstone(&se))
        };
        let orphans = self.state().orphans(exists);
        let targets = sweep_targets(orphans, &mut self.withdraw_later(), exists);
        for id in targets {
            let Some(key) = self.key(&id) else { continue };
            match self.withdraw(&key).await {
                Ok(()) => {
                    self.withdraw_later().remove(&id);
                    self.state().forget(&id);
                    tracing::info!(export = %key, "orphaned export withdrawn");
                }
                Err(error) => {
                    tracing::warn!(export = %key, %error, "orphaned export not withdrawn")
                }
            }
        }
    }
}

/// What a sweep withdraws: the `orphans` of the registry's view and the
/// exports cleanups left to it (`later`), less those whose ServiceExport
/// `exists` again: those are its own reconcile's, and leave `later`.
fn sweep_targets(
    orphans: Vec<Id>,
    later: &mut BTreeSet<Id>,
    exists: impl Fn(&Id) -> bool,
) -> BTreeSet<Id> {
    later.retain(|id| !exists(id));
    orphans.into_iter().chain(later.iter().cloned()).collect()
}

/// `call` to `registry`, given up after [`REGISTRY_CALL_BOUND`] as a
/// transport error (retried like one) naming the registry and the last
/// failure its retries saw.
async fn bounded<T>(
    registry: &mcs_client::Client,
    call: impl Future<Output = Result<T, mcs_client::Error>>,
) -> Result<T, mcs_client::Error> {
    tokio::time::timeout(REGISTRY_CALL_BOUND, call)
        .await
        .unwrap_or_else(|_| Err(registry.gave_up(REGISTRY_CALL_BOUND)))
}

fn id_of(se: &ServiceExport) -> Id {
    (se.namespace().unwrap_or_default(), se.name_any())
}

fn failure_message(e: &mcs_client::Error) -> String {
    if e.is_retryable() || matches!(e, mcs_client::Error::Server { .. }) {
        format!("registry unreachable, will retry: {e}")
    } else {
        format!("registry refused the export: {e}")
    }
}

/// The outcome label of a registry call.
pub(crate) fn call_outcome<T>(result: &Result<T, mcs_client::Error>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) if e.is_retryable() => "unavailable",
        Err(mcs_client::Error::NotFound { .. }) => "not_found",
        Err(mcs_client::Error::Conflict(_)) => "conflict",
        Err(mcs_client::Error::Invalid { .. } | mcs_client::Error::Forbidden { .. }) => "refused",
        Err(_) => "error",
    }
}

fn registry_call<T>(call: &'static str, result: &Result<T, mcs_client::Error>) {
    ::metrics::counter!(metrics::REGISTRY_CALLS, "call" => call, "outcome" => call_outcome(result))
        .increment(1);
}

/// Sets `mcs_controller_exports{condition,status}` from every export's
/// conditions.
fn set_export_gauges(state: &State) {
    for condition in [conditions::VALID, conditions::READY, conditions::CONFLICT] {
        for status in ["True", "False", "Unknown"] {
            let n = state.count(condition, status);
            ::metrics::gauge!(metrics::EXPORTS, "condition" => condition, "status" => status)
                .set(n as f64);
        }
    }
}

/// Exponential backoff of a failing export: 1 s doubling to 5 min, jittered.
fn backoff(failures: u32) -> Duration {
    jittered(Duration::from_secs(1u64 << failures.min(9)).min(MAX_BACKOFF))
}

async fn reconcile(se: Arc<ServiceExport>, ex: Arc<Exporter>) -> Result<Action, Error> {
    // The controller reconciles only once its store is filled.
    ex.state().synced();
    let result = if se.finalizers().iter().any(|f| f == FINALIZER) {
        // An earlier controller's: applied as ever, and on deletion the
        // export withdrawn, then the finalizer removed.
        let api = Api::<ServiceExport>::namespaced(ex.ctx.kube.clone(), &id_of(&se).0);
        finalizer(&api, FINALIZER, se, |event| async {
            match event {
                Event::Apply(se) => ex.apply(&se).await,
                Event::Cleanup(se) => ex.cleanup(&se).await,
            }
        })
        .await
        .or_else(|e| match e {
            // Cleaned up twice (a queued event of an object already gone).
            finalizer::Error::RemoveFinalizer(kube::Error::Api(s)) if s.is_not_found() => {
                Ok(Action::await_change())
            }
            e => Err(Error::Finalizer(Box::new(e))),
        })
    } else if se.metadata.deletion_timestamp.is_some() {
        let result = ex.cleanup(&se).await;
        if is_tombstone(&se) {
            ex.tombstones.forget(&se);
        }
        result
    } else {
        ex.apply(&se).await
    };
    let outcome = if result.is_ok() { "ok" } else { "error" };
    ::metrics::counter!(metrics::RECONCILES, "controller" => "export", "outcome" => outcome)
        .increment(1);
    result
}

fn error_policy(se: Arc<ServiceExport>, error: &Error, ex: Arc<Exporter>) -> Action {
    let id = id_of(&se);
    let failures = ex.state().failed(&id);
    let delay = backoff(failures);
    tracing::warn!(namespace = %id.0, name = %id.1, error = %mcs_api::chain(error), failures, delay_ms = delay.as_millis() as u64, "export reconcile failed");
    Action::requeue(delay)
}

/// Follows the registry's exports; sends on `changed` each export of this
/// cluster whose conditions in the registry changed.
async fn follow_registry(
    ex: Arc<Exporter>,
    changed: mpsc::UnboundedSender<ObjectRef<ServiceExport>>,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        let mut watch = ex.ctx.registry.watch_changes::<ExportList>(cancel.clone());
        while let Some(update) = watch.next().await {
            match update {
                Ok(update) => {
                    let cluster = &ex.ctx.cluster_id;
                    let ids = match update {
                        Update::List(list) => ex.state().take_view(cluster, list),
                        Update::Changed(changes) => ex.state().take_changes(cluster, changes),
                    };
                    for (namespace, name) in ids {
                        let _ = changed.send(ObjectRef::new(&name).within(&namespace));
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "registry exports watch ended; restarting");
                    ::metrics::counter!(metrics::REGISTRY_CALLS, "call" => "watch_exports", "outcome" => call_outcome::<()>(&Err(error)))
                        .increment(1);
                }
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = tokio::time::sleep(jittered(Duration::from_secs(5))) => {}
        }
    }
}

/// A hash of what a reconcile reads of a ServiceExport beside its status:
/// its uid, generation (its spec), labels, annotations (a tombstone's
/// mark among them), finalizers and deletion.
fn reconcile_inputs(se: &ServiceExport) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let meta = &se.metadata;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.uid.hash(&mut hasher);
    meta.generation.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp.as_ref().map(|t| t.0.as_millisecond()).hash(&mut hasher);
    Some(hasher.finish())
}

/// Runs the export reconciler until `cancel`.
pub async fn run(ctx: Arc<Context>, cancel: CancellationToken) -> anyhow::Result<()> {
    let kube = ctx.kube.clone();
    let (caches, triggers) = Caches::start(&kube, &cancel);
    if !caches.ready(&cancel).await {
        return Ok(());
    }
    let ex = Arc::new(Exporter::new(ctx.clone(), caches));
    let (changed_tx, changed_rx) = mpsc::unbounded_channel();
    let follower_stop = cancel.child_token();
    let follower = tokio::spawn(follow_registry(ex.clone(), changed_tx, follower_stop.clone()));

    // Decoded object by object: one ServiceExport that does not decode
    // must not stop the others (watch.rs). Deleted ones stay in the store
    // as tombstones until withdrawn (tombstones.rs).
    let store = ex.tombstones.store();
    let applier = ex.clone();
    let exports = crate::watch::lenient::<ServiceExport>(
        kube.clone(),
        watcher::Config::default(),
        "ServiceExport",
    )
    .map_ok(move |event| applier.tombstones.apply(event));
    let conflicts =
        futures::stream::unfold(
            changed_rx,
            |mut rx| async move { rx.recv().await.map(|id| (id, rx)) },
        );
    // A change of status alone (the echo of this controller's own status
    // write, one per export) triggers no reconcile: it is no input
    // (design §13, "What a reconcile reads").
    let changed = exports.applied_objects().predicate_filter(reconcile_inputs, Default::default());
    let controller =
        Controller::for_stream(changed, store).reconcile_on(triggers).reconcile_on(conflicts);
    let store = controller.store();
    let listed = store.clone();
    let registrations = futures::stream::unfold(ctx.registrations.clone(), |mut rx| async move {
        rx.changed().await.ok().map(|()| ((), rx))
    });
    let resync_ex = ex.clone();
    let resyncs = ticks(ctx.settings.resync_interval).then(move |()| {
        let (ex, store) = (resync_ex.clone(), store.clone());
        async move {
            ex.state().next_epoch();
            ex.sweep_orphans(&store).await;
        }
    });
    let stop = cancel.clone();
    let results = controller
        .reconcile_all_on(registrations)
        .reconcile_all_on(resyncs)
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(reconcile, error_policy, ex);
    // kube's applier holds its runner, and with it its graceful shutdown,
    // until the ServiceExport store has listed once: one that never listed
    // (no CRD, no permission) has no reconcile in flight to finish.
    let never_listed = async {
        cancel.cancelled().await;
        if listed.wait_until_ready().now_or_never().is_some() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = drain(results, "export") => {}
        () = never_listed => {}
    }
    tracing::info!("export controller stopped");
    follower_stop.cancel();
    follower.await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> Id {
        ("demo".to_owned(), name.to_owned())
    }

    /// A status write (this controller's own, echoed by the watch) is no
    /// input; a new generation, label, annotation (the tombstone's mark),
    /// finalizer or deletion is.
    #[test]
    fn only_what_a_reconcile_reads_beside_status_triggers_one() {
        let mut se = ServiceExport::new("web", Default::default());
        se.metadata.uid = Some("u1".into());
        se.metadata.generation = Some(1);
        let before = reconcile_inputs(&se);
        se.status = Some(Default::default());
        se.metadata.resource_version = Some("2".into());
        assert_eq!(reconcile_inputs(&se), before, "status and resource version");
        let changes: [fn(&mut ServiceExport); 6] = [
            |se| se.metadata.uid = Some("u2".into()),
            |se| se.metadata.generation = Some(2),
            |se| {
                se.labels_mut().insert("a".into(), "b".into());
            },
            |se| {
                se.annotations_mut()
                    .insert(super::super::tombstones::TOMBSTONE.into(), "true".into());
            },
            |se| se.finalizers_mut().push("f".into()),
            |se| se.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH)),
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut changed = se.clone();
            change(&mut changed);
            assert_ne!(reconcile_inputs(&changed), before, "change {i}");
        }
    }

    #[test]
    fn the_sweep_withdraws_left_over_exports_until_their_service_export_is_back() {
        let mut later = BTreeSet::from([id("gone"), id("recreated")]);
        let exists = |i: &Id| i.1 == "recreated";
        let targets = sweep_targets(vec![id("orphan"), id("gone")], &mut later, exists);
        assert_eq!(targets, BTreeSet::from([id("gone"), id("orphan")]));
        assert_eq!(later, BTreeSet::from([id("gone")]), "a recreated one is not withdrawn");
        // Without a view (no orphans), what cleanups left is still withdrawn.
        assert_eq!(sweep_targets(vec![], &mut later, |_| false), BTreeSet::from([id("gone")]));
    }
}
