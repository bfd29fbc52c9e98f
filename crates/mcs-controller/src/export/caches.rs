//! The export reconciler's watch caches of Services and EndpointSlices: a
//! reconcile reads the Service and the slices of its ServiceExport from
//! them instead of a GET and a LIST each (issue 29: exporting 500 services
//! cost 27,443 API requests, 11,897 of them Service GETs and 11,690 slice
//! LISTs; one conflict then re-read every export).
//!
//! ```text
//!  watch Services ──▶ reflector (Store) ──▶ the ServiceExport of the same name ─┐
//!  watch slices   ──▶ reflector (Store) ──▶ SliceIndex: the Service named, and  ├─▶ triggers
//!   (not ours)                               the one left                        ┘
//! ```
//!
//! Each event is applied to its cache before it triggers a reconcile, so a
//! reconcile never reads a cache older than the event that woke it, and
//! the reconciler starts only once both caches hold a first complete list
//! (an empty cache would read as "no Service": the export withdrawn).

use super::build::SERVICE_NAME_LABEL;
use super::slice_index::SliceIndex;
use crate::MANAGED_BY;
use crate::crd::ServiceExport;
use crate::import::plan::SLICE_MANAGED_BY_LABEL;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The caches a reconcile reads.
#[derive(Clone)]
pub struct Caches {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    /// Which slices each Service has (`slices` is keyed by slice name).
    index: Arc<Mutex<SliceIndex>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("services", &self.services.state().len())
            .field("slices", &self.slices.state().len())
            .finish()
    }
}

impl Caches {
    /// Starts both watches until `cancel`; the caches, and the stream of
    /// ServiceExports their events touch.
    pub fn start(
        kube: &kube::Client,
        cancel: &CancellationToken,
    ) -> (Self, impl Stream<Item = ObjectRef<ServiceExport>> + Send + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        // Every Service, those derived from imports too: a derived Service
        // may be exported again (its imported slices are not part of it).
        let (services, writer) = reflector::store();
        let watch = reflector::reflector(
            writer,
            crate::watch::tracked(
                "Service",
                watcher(Api::<Service>::all(kube.clone()), watcher::Config::default()),
            )
            .modify(crate::watch::forget_managed_fields),
        )
        .default_backoff()
        .touched_objects()
        .filter_map(|svc| async move {
            let svc = svc.map_err(|error| tracing::debug!(%error, "service watch")).ok()?;
            Some(ObjectRef::new(&svc.name_any()).within(&svc.namespace()?))
        });
        tokio::spawn(forward(watch, tx.clone(), cancel.clone()));

        // The slices this controller imported are no Service's own endpoints.
        let selector = format!("{SERVICE_NAME_LABEL},{SLICE_MANAGED_BY_LABEL}!={MANAGED_BY}");
        let (slices, writer) = reflector::store();
        let index = Arc::new(Mutex::new(SliceIndex::default()));
        let indexing = index.clone();
        let watch = reflector::reflector(
            writer,
            crate::watch::tracked(
                "EndpointSlice",
                watcher(
                    Api::<EndpointSlice>::all(kube.clone()),
                    watcher::Config::default().labels(&selector),
                ),
            )
            .modify(crate::watch::forget_managed_fields),
        )
        .default_backoff()
        .filter_map(|event| async move {
            event.map_err(|error| tracing::debug!(%error, "endpointslice watch")).ok()
        })
        .flat_map(move |event| {
            let touched = lock(&indexing).on_event(event);
            futures::stream::iter(
                touched.into_iter().map(|(ns, name)| ObjectRef::new(&name).within(&ns)),
            )
        });
        tokio::spawn(forward(watch, tx, cancel.clone()));
        let triggers = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|trigger| (trigger, rx))
        });
        (Self { services, slices, index }, triggers)
    }

    /// Waits until both caches hold a first complete list; false if
    /// `cancel` came first.
    pub async fn ready(&self, cancel: &CancellationToken) -> bool {
        tokio::select! {
            _ = cancel.cancelled() => false,
            ready = async {
                self.services.wait_until_ready().await.is_ok()
                    && self.slices.wait_until_ready().await.is_ok()
            } => ready,
        }
    }

    /// The Service `namespace/name`, as last seen.
    pub fn service(&self, namespace: &str, name: &str) -> Option<Service> {
        self.services.get(&ObjectRef::new(name).within(namespace)).map(|s| (*s).clone())
    }

    /// The slices of Service `namespace/name` (not ours), as last seen,
    /// found through the index: no pass over every slice.
    pub fn slices_of(&self, namespace: &str, name: &str) -> Vec<EndpointSlice> {
        let names = lock(&self.index).slices_of(namespace, name);
        names
            .iter()
            .filter_map(|slice| self.slices.get(&ObjectRef::new(slice).within(namespace)))
            // The index follows the store's events: a slice relabelled
            // since is no longer this Service's.
            .filter(|s| s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(name))
            .map(|s| (*s).clone())
            .collect()
    }
}

fn lock(index: &Mutex<SliceIndex>) -> std::sync::MutexGuard<'_, SliceIndex> {
    index.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drives `events` (which fills a cache) and forwards what it yields until
/// `cancel` or the receiver is gone.
async fn forward<T>(
    events: impl Stream<Item = T> + Send,
    tx: mpsc::UnboundedSender<T>,
    cancel: CancellationToken,
) {
    let mut events = std::pin::pin!(events);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            next = events.next() => match next {
                Some(item) => {
                    if tx.send(item).is_err() {
                        return;
                    }
                }
                None => return,
            },
        }
    }
}
