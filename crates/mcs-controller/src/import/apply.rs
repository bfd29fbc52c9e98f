//! Applying plans: the stores of what this controller owns in the cluster,
//! and the writes that bring one service in step with its plan.
//!
//! ```text
//!  reflectors (label managed-by=us): ServiceImports, Services, EndpointSlices; all Namespaces (metadata)
//!     └─ every change ─▶ Touched{key | namespace | all} ─▶ the importer's queue (mod.rs)
//!  sync(import):  derived Service ─▶ its cluster IPs ─▶ ServiceImport (spec.ips) ─▶ its uid
//!                 ─▶ status ─▶ slices (owned by it) ─▶ delete this service's slices/Services no longer planned
//! ```
//!
//! Every write is a server-side apply under [`FIELD_MANAGER`], forced, and
//! only made when `diff::differs` says it would change something. Each
//! object is applied whatever became of the others: one the API server
//! refuses fails the sync (logged, counted, retried with backoff) after
//! the rest were brought in step. Only a ServiceImport that does not exist
//! and cannot be created stops the slices, which it would own.

use super::diff;
use super::echo::Version;
use super::index::{ByService, belongs, key_by_label};
use super::plan::{self, Observed, RegistryState};
use crate::crd::{self, ServiceImportStatus};
use crate::metrics::{IMPORT_OBJECTS_DELETED, IMPORT_OBJECTS_WRITTEN};
use crate::{FIELD_MANAGER, MANAGED_BY};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{
    Api, DeleteParams, PartialObjectMeta, Patch, PatchParams, PostParams, Preconditions,
};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use mcs_api::IpFamily;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use super::plan::Key;

/// What changed among the objects the importer watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// An object of this service (deleted, or of no known version).
    Key(Key),
    /// An object of this service, now at this version: a change, unless a
    /// sync of ours wrote it (echo.rs).
    Changed(Key, Version),
    /// A namespace (appeared, changed or went).
    Namespace(String),
    /// One of our Services or slices that names no service (never desired).
    Unlabelled,
    /// A watch re-listed: anything may have changed.
    All,
}

/// The importer's views of the cluster, kept by reflectors.
#[derive(Clone)]
pub struct Stores {
    imports: Store<crd::ServiceImport>,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    /// Our Services and slices by the service they belong to (index.rs).
    services_by: Arc<Mutex<ByService>>,
    slices_by: Arc<Mutex<ByService>>,
}

fn locked(index: &Mutex<ByService>) -> MutexGuard<'_, ByService> {
    index.lock().unwrap_or_else(|e| e.into_inner())
}

impl Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("imports", &self.imports.len())
            .field("services", &self.services.len())
            .field("slices", &self.slices.len())
            .field("namespaces", &self.namespaces.len())
            .finish()
    }
}

fn managed_by_selector() -> String {
    format!("{}={MANAGED_BY}", plan::MANAGED_BY_LABEL)
}

fn key_by_name<K: Resource>(obj: &K) -> Option<Key> {
    Some((obj.namespace()?, obj.meta().name.clone()?))
}

impl Stores {
    /// Starts the reflectors (until `cancel`); each change is sent to `touched`.
    pub fn start(
        client: &kube::Client,
        touched: mpsc::UnboundedSender<Touched>,
        cancel: &CancellationToken,
    ) -> Self {
        let ours = watcher::Config::default().labels(&managed_by_selector());
        let slices_ours = watcher::Config::default()
            .labels(&format!("{}={MANAGED_BY}", plan::SLICE_MANAGED_BY_LABEL));
        let services_by = Arc::new(Mutex::new(ByService::default()));
        let slices_by = Arc::new(Mutex::new(ByService::default()));
        let imports = reflect(
            "ServiceImport (imported)",
            Api::all(client.clone()),
            ours.clone(),
            (touched.clone(), None),
            |o: &crd::ServiceImport| key_by_name(o).map(Touched::Key),
            cancel,
        );
        let services = reflect(
            "Service (imported)",
            Api::all(client.clone()),
            ours,
            (touched.clone(), Some(services_by.clone())),
            |o: &Service| Some(key_by_label(o).map_or(Touched::Unlabelled, Touched::Key)),
            cancel,
        );
        let slices = reflect(
            "EndpointSlice (imported)",
            Api::all(client.clone()),
            slices_ours,
            (touched.clone(), Some(slices_by.clone())),
            |o: &EndpointSlice| Some(key_by_label(o).map_or(Touched::Unlabelled, Touched::Key)),
            cancel,
        );
        let namespaces = reflect(
            "Namespace",
            Api::all(client.clone()),
            watcher::Config::default(),
            (touched, None),
            |o: &PartialObjectMeta<Namespace>| o.meta().name.clone().map(Touched::Namespace),
            cancel,
        );
        Stores { imports, services, slices, namespaces, services_by, slices_by }
    }

    /// Waits until every reflector has listed once.
    pub async fn ready(&self) -> anyhow::Result<()> {
        self.imports.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.slices.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        Ok(())
    }

    /// Our ServiceImport `namespace/name`.
    pub fn import(&self, namespace: &str, name: &str) -> Option<Arc<crd::ServiceImport>> {
        self.imports.get(&ObjectRef::new(name).within(namespace))
    }

    fn service(&self, namespace: &str, name: &str) -> Option<Arc<Service>> {
        self.services.get(&ObjectRef::new(name).within(namespace))
    }

    fn slice(&self, namespace: &str, name: &str) -> Option<Arc<EndpointSlice>> {
        self.slices.get(&ObjectRef::new(name).within(namespace))
    }

    /// Whether `namespace` exists and is not being deleted.
    pub fn namespace_usable(&self, namespace: &str) -> bool {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .is_some_and(|ns| ns.meta().deletion_timestamp.is_none())
    }

    /// The services that any of our objects belong to (a slice or Service
    /// without the service-name label belongs to none and is not listed).
    pub fn keys(&self) -> BTreeSet<Key> {
        let mut keys: BTreeSet<Key> =
            self.imports.state().iter().filter_map(|o| key_by_name(o.as_ref())).collect();
        keys.extend(locked(&self.services_by).keys().cloned());
        keys.extend(locked(&self.slices_by).keys().cloned());
        keys
    }

    /// Our Services and slices that name no service: never desired.
    fn unlabelled(&self) -> (Vec<Arc<Service>>, Vec<Arc<EndpointSlice>>) {
        (
            self.services.state_filter(|o| key_by_label(o).is_none()),
            self.slices.state_filter(|o| key_by_label(o).is_none()),
        )
    }

    /// The ServiceImports this controller manages.
    pub fn imports(&self) -> Vec<Arc<crd::ServiceImport>> {
        self.imports.state()
    }

    fn slices_of(&self, key: &Key) -> Vec<Arc<EndpointSlice>> {
        indexed(&self.slices, &self.slices_by, key)
    }

    fn services_of(&self, key: &Key) -> Vec<Arc<Service>> {
        indexed(&self.services, &self.services_by, key)
    }
}

/// Our objects of `key` in `store`, found through its `index` (no pass
/// over every object); each still carries the label, as the store holds
/// it now.
fn indexed<K>(store: &Store<K>, index: &Mutex<ByService>, key: &Key) -> Vec<Arc<K>>
where
    K: Resource + reflector::Lookup + Clone + 'static,
    <K as reflector::Lookup>::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let names = locked(index).names(key);
    names
        .iter()
        .filter_map(|n| store.get(&ObjectRef::new(n).within(&key.0)))
        .filter(|o| belongs(o.as_ref(), key))
        .collect()
}

/// Runs a reflector of `api` (the watch `name`, for readiness) into a new
/// store, keeping `index` (if any) in step with it, and sending
/// `touched(obj)` for each applied or deleted object and `All` after each
/// re-list, once the store and the index hold it.
fn reflect<K>(
    name: &'static str,
    api: Api<K>,
    config: watcher::Config,
    (tx, index): (mpsc::UnboundedSender<Touched>, Option<Arc<Mutex<ByService>>>),
    touched: fn(&K) -> Option<Touched>,
    cancel: &CancellationToken,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + reflector::Lookup
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
    <K as reflector::Lookup>::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let watch = crate::watch::tracked(name, watcher(api, config));
    let stream = reflector::reflector(writer, watch.default_backoff());
    let cancel = cancel.clone();
    let stored = reader.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut listed = false;
        loop {
            let event = tokio::select! {
                _ = cancel.cancelled() => return,
                event = stream.next() => event,
            };
            let Some(event) = event else { return };
            if let (Some(index), Ok(event)) = (&index, &event) {
                let mut index = locked(index);
                match event {
                    watcher::Event::Apply(o) => index.apply(o),
                    watcher::Event::Delete(o) => index.delete(o),
                    watcher::Event::InitDone => {
                        index.rebuild(stored.state().iter().map(|o| o.as_ref()))
                    }
                    watcher::Event::Init | watcher::Event::InitApply(_) => {}
                }
            }
            let send = match event {
                Ok(watcher::Event::Apply(o)) => touched(&o).map(|t| match (t, Version::of(&o)) {
                    (Touched::Key(key), Some(version)) => Touched::Changed(key, version),
                    (t, _) => t,
                }),
                Ok(watcher::Event::Delete(o)) => touched(&o),
                Ok(watcher::Event::InitDone) if listed => Some(Touched::All),
                Ok(watcher::Event::InitDone) => {
                    listed = true;
                    None
                }
                Ok(_) => None,
                // `tracked` has told it (WARN once, then readiness).
                Err(error) => {
                    tracing::debug!(kind = %<K as Resource>::kind(&Default::default()), error = %mcs_api::chain(&error), "watch failed");
                    None
                }
            };
            if let Some(t) = send
                && tx.send(t).is_err()
            {
                return;
            }
        }
    });
    reader
}

/// What one sync or removal did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Objects written (applies that changed something).
    pub writes: u64,
    /// Objects deleted.
    pub deletes: u64,
}

impl std::ops::AddAssign for Outcome {
    fn add_assign(&mut self, other: Self) {
        self.writes += other.writes;
        self.deletes += other.deletes;
    }
}

/// One synced service: what was done and what it holds now.
#[derive(Debug, Clone)]
pub struct Synced {
    /// The writes and deletes made.
    pub outcome: Outcome,
    /// Its slices.
    pub slices: usize,
    /// Its endpoints across the slices.
    pub endpoints: usize,
    /// The status of its `Ready` condition.
    pub ready: String,
    /// The versions its writes made (their watch events are echoes).
    pub written: Vec<Version>,
    /// Objects of ours no longer planned, kept because removals are held.
    pub kept: usize,
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Whether applying `desired` over `current` (absent: certainly) changes anything.
fn needs_apply<D: Serialize, C: Resource + Serialize>(
    desired: &D,
    current: Option<&C>,
    subresource: Option<&str>,
) -> anyhow::Result<bool> {
    let Some(current) = current else { return Ok(true) };
    let desired = serde_json::to_value(desired)?;
    let managed = current.meta().managed_fields.as_deref();
    Ok(diff::differs(&desired, &serde_json::to_value(current)?, managed, subresource))
}

async fn apply<K>(api: &Api<K>, obj: &K) -> kube::Result<K>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    K::DynamicType: Default,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let written = api.patch(&name, &apply_params(), &Patch::Apply(obj)).await?;
    metrics::counter!(IMPORT_OBJECTS_WRITTEN, "kind" => K::kind(&Default::default()).into_owned())
        .increment(1);
    Ok(written)
}

/// Deletes `obj` if it is still the object seen (its uid); false when it was
/// already gone or replaced.
async fn delete<K>(api: &Api<K>, obj: &K) -> kube::Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: obj.meta().uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => {
            let kind = K::kind(&Default::default()).into_owned();
            metrics::counter!(IMPORT_OBJECTS_DELETED, "kind" => kind.clone()).increment(1);
            tracing::info!(%kind, namespace = obj.meta().namespace.as_deref().unwrap_or(""), %name, "deleted");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(false),
        Err(e) => Err(e),
    }
}

fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

fn cluster_ips(svc: Option<&Service>) -> Vec<String> {
    svc.and_then(|s| s.spec.as_ref()).and_then(|s| s.cluster_ips.clone()).unwrap_or_default()
}

/// The status subresource's apply body: `desired` (`{"status": …}`) with
/// the kind and name added, so that the status is serialized once, for the
/// comparison and for the write.
fn status_body(namespace: &str, name: &str, mut desired: serde_json::Value) -> serde_json::Value {
    if let Some(body) = desired.as_object_mut() {
        body.insert("apiVersion".into(), format!("{}/{}", crd::GROUP, crd::STORED_VERSION).into());
        body.insert("kind".into(), "ServiceImport".into());
        body.insert("metadata".into(), serde_json::json!({"name": name, "namespace": namespace}));
    }
    desired
}

/// Whether applying `desired` (`{"status": …}`) changes `current`'s status.
fn status_differs(current: &crd::ServiceImport, desired: &serde_json::Value) -> bool {
    let shown = match &current.status {
        Some(shown) => serde_json::json!({"status": shown}),
        None => serde_json::json!({}),
    };
    diff::differs(desired, &shown, current.meta().managed_fields.as_deref(), Some("status"))
}

/// Applies `status` to `current` if it changes anything; the ServiceImport
/// written, if it did (as [`apply`] answers). Only the status is compared
/// (serialized alone, not the whole object): the apply sets nothing else.
async fn apply_status(
    api: &Api<crd::ServiceImport>,
    current: &crd::ServiceImport,
    status: &ServiceImportStatus,
) -> anyhow::Result<Option<crd::ServiceImport>> {
    let desired = serde_json::json!({"status": status});
    if !status_differs(current, &desired) {
        return Ok(None);
    }
    let name = current.name_any();
    let body = status_body(&current.namespace().unwrap_or_default(), &name, desired);
    let written = api.patch_status(&name, &apply_params(), &Patch::Apply(&body)).await?;
    metrics::counter!(IMPORT_OBJECTS_WRITTEN, "kind" => "ServiceImportStatus").increment(1);
    Ok(Some(written))
}

/// An error for a log line: a Kubernetes API refusal as its message and
/// code (kube's own text repeats the whole status), anything else whole.
pub(crate) fn brief(error: &anyhow::Error) -> String {
    match error.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => crate::shared_kube::refusal(status),
        _ => format!("{error:#}"),
    }
}

/// A sync the API server refused because the namespace is being deleted:
/// it takes our objects with it, so there is nothing to retry.
#[derive(Debug, thiserror::Error)]
#[error("namespace {0} is being deleted")]
pub struct NamespaceTerminating(pub String);

/// Whether `error` is the API server refusing new content in a namespace
/// being deleted: 403 with the cause `NamespaceTerminating` ("unable to
/// create new content in namespace … because it is being terminated").
pub fn namespace_terminating(error: &kube::Error) -> bool {
    let kube::Error::Api(status) = error else { return false };
    status.code == 403
        && (status
            .details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
            || status.message.contains("because it is being terminated"))
}

/// The failures of one sync. Each object is applied whatever became of
/// the others (a ServiceImport the API server refuses must not freeze the
/// slices); the sync then fails with all of them, and is retried, unless
/// the namespace is being deleted ([`NamespaceTerminating`]).
#[derive(Debug, Default)]
struct Failures {
    errors: Vec<String>,
    terminating: bool,
}

impl Failures {
    /// The value of `result`, or `None` with its error recorded against `what`.
    fn check<T, E: Into<anyhow::Error>>(
        &mut self,
        what: impl std::fmt::Display,
        result: Result<T, E>,
    ) -> Option<T> {
        let error: anyhow::Error = match result {
            Ok(value) => return Some(value),
            Err(error) => error.into(),
        };
        if error.downcast_ref::<kube::Error>().is_some_and(namespace_terminating) {
            self.terminating = true;
        } else {
            self.errors.push(format!("{what}: {}", brief(&error)));
        }
        None
    }

    fn into_result(self, namespace: &str) -> anyhow::Result<()> {
        if self.terminating {
            return Err(NamespaceTerminating(namespace.to_owned()).into());
        }
        match self.errors.len() {
            0 => Ok(()),
            n => Err(anyhow::anyhow!("{n} object(s) not in step: {}", self.errors.join("; "))),
        }
    }
}

/// Brings the objects of `import` in step with its plan; the namespace must
/// exist. With the registry not available, `Ready` says so and nothing is
/// deleted (the plan is the last complete list's). Every object is tried;
/// an error names each that failed (the rest were applied).
pub async fn sync(
    client: &kube::Client,
    stores: &Stores,
    import: &mcs_api::ServiceImport,
    state: &RegistryState,
    removals_held: bool,
    max_per_slice: usize,
    cluster_families: &[IpFamily],
) -> anyhow::Result<Synced> {
    let now = jiff::Timestamp::now();
    let (namespace, name) = (import.namespace.as_str(), import.name.as_str());
    let mut outcome = Outcome::default();
    let mut failures = Failures::default();
    let mut written = Vec::new();
    let imports: Api<crd::ServiceImport> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);

    // The derived Service first: its cluster IPs are the ServiceImport's
    // `spec.ips`, so the ServiceImport is written once (design §13).
    let current = stores.import(namespace, name);
    let conditions = current
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let derived = plan::derived_name(namespace, name);
    let current_svc = stores.service(namespace, &derived);
    let wanted = plan::derived_service(import, cluster_families);
    let what = format!("Service {namespace}/{derived}");
    let svc = apply_derived(&services, current_svc.clone(), &wanted, &mut outcome).await;
    if let Ok(s) = &svc
        && current_svc.as_ref().map(|c| c.resource_version()) != Some(s.resource_version())
    {
        written.extend(Version::of(s));
    }
    // Refused: the current one's IPs, unless it was being replaced.
    let svc = failures.check(what, svc).or_else(|| {
        current_svc.as_deref().filter(|c| is_headless(c) == is_headless(&wanted)).cloned()
    });
    let ips = cluster_ips(svc.as_ref());

    // The ServiceImport, which owns the slices. One that exists owns them
    // even when its update is refused.
    let observed = Observed { cluster_ips: &ips, conditions: &conditions, cluster_families };
    let mut desired = plan::service_import(import, observed, state, now);
    let status = desired.status.take().unwrap_or_default();
    let si = match &current {
        Some(c) if !needs_apply(&desired, Some(c.as_ref()), None)? => Some((**c).clone()),
        _ => {
            let refused = plan::refused_metadata(import);
            if !refused.is_empty() {
                tracing::warn!(%namespace, %name, ?refused, "exported labels or annotations Kubernetes refuses: left out");
            }
            let what = format!("ServiceImport {namespace}/{name}");
            match failures.check(what, apply(&imports, &desired).await) {
                Some(si) => {
                    outcome.writes += 1;
                    written.extend(Version::of(&si));
                    Some(si)
                }
                None => current.as_deref().cloned(),
            }
        }
    };
    let Some(si) = si else {
        // Nothing else can be owned before the ServiceImport exists.
        failures.into_result(namespace)?;
        anyhow::bail!("ServiceImport {namespace}/{name} was not created");
    };
    let uid = si
        .metadata
        .uid
        .clone()
        .ok_or_else(|| anyhow::anyhow!("ServiceImport {namespace}/{name} has no uid"))?;
    let planned_slices =
        plan::endpoint_slices(import, &plan::owner_reference(name, &uid), max_per_slice);
    let what = format!("ServiceImport {namespace}/{name} status");
    if let Some(Some(applied)) = failures.check(what, apply_status(&imports, &si, &status).await) {
        outcome.writes += 1;
        written.extend(Version::of(&applied));
    }

    // The slices, then (from a complete list, removals not held) what is
    // ours of this service and no longer planned.
    for slice in &planned_slices {
        let slice_name = slice.metadata.name.as_deref().unwrap_or_default();
        let current = stores.slice(namespace, slice_name);
        if needs_apply(slice, current.as_deref(), None)? {
            let what = format!("EndpointSlice {namespace}/{slice_name}");
            if let Some(applied) = failures.check(what, apply(&slices, slice).await) {
                outcome.writes += 1;
                written.extend(Version::of(&applied));
            }
        }
    }
    let planned: BTreeSet<&str> =
        planned_slices.iter().filter_map(|s| s.metadata.name.as_deref()).collect();
    let key = (namespace.to_owned(), name.to_owned());
    // A cluster no longer listed is a removal the list asks for: held
    // while removals are. Any other slice or Service of ours not planned
    // (a chunk fewer, an object left by hand) goes from a complete list.
    let (missing, stray): (Vec<_>, Vec<_>) = unplanned(stores.slices_of(&key), &planned)
        .into_iter()
        .partition(|slice| plan::of_missing_cluster(slice, import));
    let stray_services = unplanned(stores.services_of(&key), &BTreeSet::from([derived.as_str()]));
    let (doomed, doomed_services, kept) = match removal(state, removals_held) {
        Removal::Delete => (missing.into_iter().chain(stray).collect(), stray_services, 0),
        Removal::Held => (stray, stray_services, missing.len()),
        Removal::Unknown => (Vec::new(), Vec::new(), 0),
    };
    for extra in doomed {
        let what = format!("deleting EndpointSlice {namespace}/{}", extra.name_any());
        if failures.check(what, delete(&slices, extra.as_ref()).await) == Some(true) {
            outcome.deletes += 1;
        }
    }
    for extra in doomed_services {
        let what = format!("deleting Service {namespace}/{}", extra.name_any());
        if failures.check(what, delete(&services, extra.as_ref()).await) == Some(true) {
            outcome.deletes += 1;
        }
    }
    failures.into_result(namespace)?;
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == plan::READY)
        .map_or_else(|| "Unknown".to_owned(), |c| c.status.clone());
    let endpoints = plan::endpoint_count(&planned_slices);
    Ok(Synced { outcome, slices: planned_slices.len(), endpoints, ready, written, kept })
}

/// Applies the derived Service `wanted` over `current` (if it changes
/// anything); clusterIP cannot change between an IP and None, nor can the
/// IP families, so such a change replaces it.
async fn apply_derived(
    services: &Api<Service>,
    mut current: Option<Arc<Service>>,
    wanted: &Service,
    outcome: &mut Outcome,
) -> kube::Result<Service> {
    if let Some(svc) = &current
        && is_headless(svc) != is_headless(wanted)
    {
        if delete(services, svc.as_ref()).await? {
            outcome.deletes += 1;
        }
        current = None;
    }
    match &current {
        Some(c) if !needs_apply(wanted, Some(c.as_ref()), None).unwrap_or(true) => {
            return Ok((**c).clone());
        }
        _ => {}
    }
    outcome.writes += 1;
    match apply(services, wanted).await {
        Ok(svc) => Ok(svc),
        Err(kube::Error::Api(s)) if s.is_invalid() && current.is_some() => {
            let name = wanted.name_any();
            tracing::info!(%name, reason = %s.message, "replacing the derived service");
            if let Some(old) = &current
                && delete(services, old.as_ref()).await?
            {
                outcome.deletes += 1;
            }
            apply(services, wanted).await
        }
        Err(e) => Err(e),
    }
}

/// What becomes of what is ours of a service and no longer planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Removal {
    /// Deleted: the list is complete and removals are not held.
    Delete,
    /// The slices of a cluster no longer listed kept until the hold ends:
    /// the list is complete but may be one of a registry that forgot
    /// (docs/design.md §13), and a cluster missing from a service still
    /// listed comes back within one lease, as a whole service would.
    /// Other objects no longer planned are deleted.
    Held,
    /// Kept: the registry's list is not known complete.
    Unknown,
}

fn removal(state: &RegistryState, removals_held: bool) -> Removal {
    match state {
        RegistryState::Available if removals_held => Removal::Held,
        RegistryState::Available => Removal::Delete,
        _ => Removal::Unknown,
    }
}

/// Those of `ours` not named in `planned`.
fn unplanned<K: Resource>(ours: Vec<Arc<K>>, planned: &BTreeSet<&str>) -> Vec<Arc<K>> {
    ours.into_iter()
        .filter(|o| !o.meta().name.as_deref().is_some_and(|n| planned.contains(n)))
        .collect()
}

/// The namespace of the dry-run Service that [`cluster_families`] creates.
const FAMILY_PROBE_NAMESPACE: &str = "default";

/// The IP families this cluster gives Services, primary first: those the API
/// server assigns to a dry-run `PreferDualStack` Service (nothing is stored).
pub async fn cluster_families(client: &kube::Client) -> anyhow::Result<Vec<IpFamily>> {
    let services: Api<Service> = Api::namespaced(client.clone(), FAMILY_PROBE_NAMESPACE);
    // Labelled as ours, as everything it writes (the admission policy,
    // `rbac::policy`, refuses the controller any other Service).
    let probe: Service = serde_json::from_value(serde_json::json!({
        "metadata": {
            "generateName": "mcs-ip-family-probe-",
            "labels": {plan::MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {"ipFamilyPolicy": "PreferDualStack", "ports": [{"port": 1}]},
    }))?;
    let params = PostParams { dry_run: true, field_manager: Some(FIELD_MANAGER.into()) };
    let created = services.create(&params, &probe).await?;
    let families = created.spec.and_then(|s| s.ip_families).unwrap_or_default();
    Ok(families
        .iter()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some(IpFamily::IPv4),
            "IPv6" => Some(IpFamily::IPv6),
            _ => None,
        })
        .collect())
}

/// Deletes every object of `key` (the service is gone from a complete list).
pub async fn remove(client: &kube::Client, stores: &Stores, key: &Key) -> anyhow::Result<Outcome> {
    let (namespace, name) = key;
    let mut outcome = Outcome::default();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    for slice in stores.slices_of(key) {
        if delete(&slices, slice.as_ref()).await? {
            outcome.deletes += 1;
        }
    }
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    for svc in stores.services_of(key) {
        if delete(&services, svc.as_ref()).await? {
            outcome.deletes += 1;
        }
    }
    let imports: Api<crd::ServiceImport> = Api::namespaced(client.clone(), namespace);
    if let Some(si) = stores.import(namespace, name)
        && delete(&imports, si.as_ref()).await?
    {
        outcome.deletes += 1;
    }
    Ok(outcome)
}

/// Deletes our Services and slices that name no service at all.
pub async fn remove_unlabelled(client: &kube::Client, stores: &Stores) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::default();
    let (services, slices) = stores.unlabelled();
    for svc in services {
        let api: Api<Service> =
            Api::namespaced(client.clone(), &svc.namespace().unwrap_or_default());
        if delete(&api, svc.as_ref()).await? {
            outcome.deletes += 1;
        }
    }
    for slice in slices {
        let api: Api<EndpointSlice> =
            Api::namespaced(client.clone(), &slice.namespace().unwrap_or_default());
        if delete(&api, slice.as_ref()).await? {
            outcome.deletes += 1;
        }
    }
    Ok(outcome)
}

/// Sets `Ready=False` for the registry's `state` on the ServiceImport of
/// `key`, everything else kept; false when it already says so (or is gone).
pub async fn mark_unavailable(
    client: &kube::Client,
    stores: &Stores,
    key: &Key,
    state: &RegistryState,
) -> anyhow::Result<bool> {
    let Some(si) = stores.import(&key.0, &key.1) else { return Ok(false) };
    let Some(status) = plan::unavailable_status(si.status.as_ref(), state, jiff::Timestamp::now())
    else {
        return Ok(false);
    };
    let api: Api<crd::ServiceImport> = Api::namespaced(client.clone(), &key.0);
    Ok(apply_status(&api, &si, &status).await?.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(value: serde_json::Value) -> kube::Error {
        kube::Error::Api(Box::new(serde_json::from_value(value).unwrap()))
    }

    /// Issue 27 item 8 (before: each such refusal was a WARN and a retry).
    #[test]
    fn a_refusal_of_a_namespace_being_deleted_is_recognised() {
        // As kube-apiserver 1.37 answers a create in a terminating namespace.
        let terminating = api_error(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "endpointslices.discovery.k8s.io \"web-east-ipv4-0\" is forbidden: unable to create new content in namespace demo because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "web-east-ipv4-0", "group": "discovery.k8s.io", "kind": "endpointslices",
                "causes": [{"reason": "NamespaceTerminating", "message": "namespace demo is being terminated", "field": "metadata.namespace"}]},
            "code": 403,
        }));
        assert!(namespace_terminating(&terminating));
        // The message alone (an API server that gives no cause).
        let message_only = api_error(serde_json::json!({
            "message": "unable to create new content in namespace demo because it is being terminated",
            "reason": "Forbidden", "code": 403,
        }));
        assert!(namespace_terminating(&message_only));
        // Another 403, or the same cause under another code, is a failure.
        let rbac = api_error(serde_json::json!({
            "message": "endpointslices is forbidden: User \"x\" cannot create resource", "reason": "Forbidden", "code": 403,
        }));
        assert!(!namespace_terminating(&rbac));
        let other_code = api_error(serde_json::json!({
            "message": "x", "code": 409,
            "details": {"causes": [{"reason": "NamespaceTerminating"}]},
        }));
        assert!(!namespace_terminating(&other_code));

        let mut failures = Failures::default();
        assert_eq!(failures.check("EndpointSlice demo/a", Err::<(), _>(terminating)), None);
        let error = failures.into_result("demo").unwrap_err();
        assert!(error.downcast_ref::<NamespaceTerminating>().is_some(), "{error:#}");
        let mut failures = Failures::default();
        failures.check("EndpointSlice demo/a", Err::<(), _>(rbac));
        let error = failures.into_result("demo").unwrap_err();
        assert!(error.downcast_ref::<NamespaceTerminating>().is_none());
        assert!(error.to_string().contains("EndpointSlice demo/a: "), "{error}");
    }

    #[test]
    fn imports_are_keyed_by_their_name() {
        let mut si = crd::ServiceImport::new("web", crd::ServiceImportSpec::default());
        assert_eq!(key_by_name(&si), None, "no namespace, no key");
        si.metadata.namespace = Some("llm".into());
        assert_eq!(key_by_name(&si), Some(("llm".to_owned(), "web".to_owned())));
    }

    #[test]
    fn the_status_is_applied_alone_under_its_kind() {
        let status = ServiceImportStatus::default();
        let body = status_body("llm", "web", serde_json::json!({"status": status}));
        assert_eq!(body["apiVersion"], "multicluster.x-k8s.io/v1beta1");
        assert_eq!(body["kind"], "ServiceImport");
        assert_eq!(body["metadata"], serde_json::json!({"name": "web", "namespace": "llm"}));
        assert!(body.get("spec").is_none(), "{body}");
        assert_eq!(body["status"], serde_json::to_value(&status).unwrap());
    }

    #[test]
    fn only_a_change_of_the_status_or_of_what_we_own_of_it_needs_a_status_apply() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let status = |clusters: &[&str]| ServiceImportStatus {
            clusters: clusters
                .iter()
                .map(|c| crd::ClusterStatus { cluster: (*c).to_owned() })
                .collect(),
            ..ServiceImportStatus::default()
        };
        let desired = |s: &ServiceImportStatus| serde_json::json!({"status": s});
        let mut si = crd::ServiceImport::new("web", crd::ServiceImportSpec::default());
        // No status yet: an empty one is no change, any other is.
        assert!(!status_differs(&si, &desired(&status(&[]))));
        assert!(status_differs(&si, &desired(&status(&["east"]))));
        si.status = Some(status(&["east"]));
        assert!(!status_differs(&si, &desired(&status(&["east"]))));
        assert!(status_differs(&si, &desired(&status(&["east", "west"]))));
        // The spec is no part of it.
        si.spec.ports = vec![Default::default()];
        assert!(!status_differs(&si, &desired(&status(&["east"]))));
        // A status field we applied and no longer set is a change.
        si.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some(crate::FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            subresource: Some("status".into()),
            fields_v1: Some(FieldsV1(serde_json::json!({"f:status": {"f:gone": {}}}))),
            ..ManagedFieldsEntry::default()
        }]);
        assert!(status_differs(&si, &desired(&status(&["east"]))));
    }

    #[test]
    fn a_headless_service_is_told_by_its_cluster_ip() {
        let svc = |ip: Option<&str>| Service {
            spec: Some(k8s_openapi::api::core::v1::ServiceSpec {
                cluster_ip: ip.map(Into::into),
                cluster_ips: ip.map(|ip| vec![ip.to_owned()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(is_headless(&svc(Some("None"))));
        assert!(!is_headless(&svc(Some("10.96.0.1"))));
        assert!(!is_headless(&svc(None)));
        assert_eq!(cluster_ips(Some(&svc(Some("10.96.0.1")))), ["10.96.0.1"]);
        assert!(cluster_ips(None).is_empty());
    }

    #[test]
    fn extra_objects_are_deleted_only_from_a_complete_list_and_no_hold() {
        let slice = |name: &str| {
            let mut s = EndpointSlice::default();
            s.metadata.name = Some(name.into());
            Arc::new(s)
        };
        let ours = || vec![slice("a-0"), slice("a-1"), slice("stray")];
        let planned = BTreeSet::from(["a-0", "a-1"]);
        let names = |v: Vec<Arc<EndpointSlice>>| -> Vec<String> {
            v.iter().map(|s| s.name_any()).collect()
        };
        assert_eq!(names(unplanned(ours(), &planned)), ["stray"]);
        assert_eq!(removal(&RegistryState::Available, false), Removal::Delete);
        assert_eq!(removal(&RegistryState::Available, true), Removal::Held);
        assert_eq!(removal(&RegistryState::Incomplete, false), Removal::Unknown);
        let down = RegistryState::Unreachable("refused".into());
        assert_eq!(removal(&down, false), Removal::Unknown);
        assert_eq!(removal(&down, true), Removal::Unknown);
    }

    #[test]
    fn a_missing_object_always_needs_an_apply_and_an_equal_one_never() {
        let slice = EndpointSlice { address_type: "IPv4".into(), ..Default::default() };
        assert!(needs_apply(&slice, None::<&EndpointSlice>, None).unwrap());
        assert!(!needs_apply(&slice, Some(&slice), None).unwrap());
        let other = EndpointSlice { address_type: "IPv6".into(), ..Default::default() };
        assert!(needs_apply(&slice, Some(&other), None).unwrap());
    }
}
