//! The Kubernetes half of pool discovery: kube-runtime watchers of the
//! imported EndpointSlices (and, under `mcs`, of the ServiceImports'
//! metadata), kept in memory, derived again after each batch of events and
//! handed to the served view; list/watch errors feed [`Health`].
//!
//! Lists are answered from the API server's watch cache (resourceVersion
//! 0, no paging); the server ends each watch after [`WATCH_TIMEOUT_SECS`];
//! the client gives up connecting after [`CONNECT_TIMEOUT`] and reading
//! after [`READ_TIMEOUT`]. A relist that fails drops what it had listed
//! (the last complete list stays) and the watcher backs off (0.8 s doubling
//! to 30 s), never retrying every second.

use super::derive::{self, ImportAnnotations, Rules};
use super::health::Health;
use crate::config::{DEFAULT_DISCOVERY_RECOVERY_SECS, DiscoverySettings, PoolDiscovery};
use crate::live::LiveView;
use crate::metrics as m;
use anyhow::Context;
use futures::{FutureExt, StreamExt, stream};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch as signal;

/// The client's connect timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The client's read timeout: above [`WATCH_TIMEOUT_SECS`], so a healthy
/// watch always ends on the server's side first.
pub const READ_TIMEOUT: Duration = Duration::from_secs(75);
/// How long the server keeps each watch open.
pub const WATCH_TIMEOUT_SECS: u32 = 50;

// A hung request fails (and counts as an error) before a quiet stretch as
// long as the recovery window could pass for health; and a watch the server
// ends in time never trips the read timeout.
const _: () = assert!(
    CONNECT_TIMEOUT.as_secs() + READ_TIMEOUT.as_secs() < DEFAULT_DISCOVERY_RECOVERY_SECS
        && (WATCH_TIMEOUT_SECS as u64) < READ_TIMEOUT.as_secs()
);

/// How often completeness is judged again with nothing happening (it
/// changes with time alone: the recovery window).
const HEALTH_TICK: Duration = Duration::from_secs(1);

/// A ServiceImport (`multicluster.x-k8s.io/v1alpha1`, served by every MCS
/// implementation), of which only the metadata is read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServiceImport {
    /// Its metadata.
    pub metadata: ObjectMeta,
}

impl Resource for ServiceImport {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "ServiceImport".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "multicluster.x-k8s.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "serviceimports".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The kube client of `KUBECONFIG` or the pod's service account, with the
/// timeouts above.
pub async fn client() -> anyhow::Result<Client> {
    let mut config = kube::Config::infer()
        .await
        .context("pool discovery: no Kubernetes configuration (in-cluster or KUBECONFIG)")?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    Client::try_from(config).context("pool discovery: building the Kubernetes client")
}

/// Lists from the watch cache (resourceVersion 0), unpaged; watches the
/// server ends after [`WATCH_TIMEOUT_SECS`].
fn watch_config(labels: Option<&str>) -> watcher::Config {
    let mut config = watcher::Config::default().any_semantic().timeout(WATCH_TIMEOUT_SECS);
    config.page_size = None;
    match labels {
        Some(labels) => config.labels(labels),
        None => config,
    }
}

/// The objects of one watcher: the last complete list with the changes
/// since, and the list under way (dropped if it fails).
#[derive(Debug)]
struct Store<K> {
    current: BTreeMap<(String, String), K>,
    pending: Option<BTreeMap<(String, String), K>>,
    /// Which objects are kept (under `karmada` the label selector matches
    /// every Service's slices; only imports are kept).
    keep: fn(&K) -> bool,
    /// Whether a list has completed once.
    listed: bool,
}

/// What an event did to a [`Store`].
#[derive(Debug, PartialEq, Eq)]
enum Taken {
    Nothing,
    Changed,
    /// A list completed, with this many objects; `first`: its first.
    Listed {
        count: usize,
        first: bool,
    },
}

impl<K: Resource> Store<K> {
    fn new(keep: fn(&K) -> bool) -> Self {
        Self { current: BTreeMap::new(), pending: None, keep, listed: false }
    }

    fn key(object: &K) -> (String, String) {
        let meta = object.meta();
        (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
    }

    fn take(&mut self, event: watcher::Event<K>) -> Taken {
        match event {
            watcher::Event::Init => {
                self.pending = Some(BTreeMap::new());
                Taken::Nothing
            }
            watcher::Event::InitApply(object) => {
                if (self.keep)(&object) {
                    let key = Self::key(&object);
                    self.pending.get_or_insert_with(BTreeMap::new).insert(key, object);
                }
                Taken::Nothing
            }
            watcher::Event::InitDone => {
                self.current = self.pending.take().unwrap_or_default();
                let first = !std::mem::replace(&mut self.listed, true);
                Taken::Listed { count: self.current.len(), first }
            }
            watcher::Event::Apply(object) if (self.keep)(&object) => {
                self.current.insert(Self::key(&object), object);
                Taken::Changed
            }
            // No longer one to keep (relabelled): as good as deleted.
            watcher::Event::Apply(object) => match self.current.remove(&Self::key(&object)) {
                Some(_) => Taken::Changed,
                None => Taken::Nothing,
            },
            watcher::Event::Delete(object) => {
                self.current.remove(&Self::key(&object));
                Taken::Changed
            }
        }
    }

    /// A list or watch failed: a relist under way is dropped.
    fn failed(&mut self) {
        self.pending = None;
    }
}

/// One event of either watcher.
enum Input {
    Slice(Result<watcher::Event<EndpointSlice>, watcher::Error>),
    Import(Result<watcher::Event<PartialObjectMeta<ServiceImport>>, watcher::Error>),
}

/// Everything the watchers hold, and what was last published.
struct Discovery {
    rules: Rules,
    view: Arc<LiveView>,
    slices: Store<EndpointSlice>,
    imports: Store<PartialObjectMeta<ServiceImport>>,
    health: Health,
    skipped: BTreeSet<String>,
    complete: Option<bool>,
    dirty: bool,
}

impl Discovery {
    fn take(&mut self, input: Input) {
        let now = self.view.clock().now_ms();
        let (resource, taken) = match input {
            Input::Slice(Ok(event)) => ("endpointslices", self.slices.take(event)),
            Input::Import(Ok(event)) => ("serviceimports", self.imports.take(event)),
            Input::Slice(Err(error)) => {
                let told = crate::shared_kube::watch_failure::<EndpointSlice>(&error);
                return self.failed(now, "endpointslices", &told);
            }
            Input::Import(Err(error)) => {
                let told = crate::shared_kube::watch_failure::<ServiceImport>(&error);
                return self.failed(now, "serviceimports", &told);
            }
        };
        match taken {
            Taken::Nothing => {}
            Taken::Changed => self.dirty = true,
            Taken::Listed { count, first } => {
                self.dirty = true;
                if count == 0 {
                    tracing::warn!(resource, "pool discovery: a list found nothing");
                }
                if first {
                    self.health.listed();
                }
            }
        }
    }

    fn failed(&mut self, now: u64, resource: &'static str, error: &str) {
        match resource {
            "endpointslices" => self.slices.failed(),
            _ => self.imports.failed(),
        }
        self.health.error(now);
        metrics::counter!(m::DISCOVERY_ERRORS, "resource" => resource).increment(1);
        tracing::error!(resource, %error, "pool discovery: list/watch of Kubernetes failed; backing off");
    }

    /// Derives again if anything changed, and publishes completeness.
    fn publish(&mut self) {
        if std::mem::take(&mut self.dirty) {
            let annotations: ImportAnnotations = self
                .imports
                .current
                .iter()
                .map(|(key, import)| {
                    (key.clone(), import.metadata.annotations.clone().unwrap_or_default())
                })
                .collect();
            let derived = derive::derive(&self.rules, self.slices.current.values(), &annotations);
            for why in derived.skipped.difference(&self.skipped) {
                tracing::warn!(%why, "pool discovery: left out");
            }
            metrics::gauge!(m::DISCOVERY_SKIPPED).set(derived.skipped.len() as f64);
            self.skipped = derived.skipped;
            if self.view.replace_discovered(derived.pools, derived.routers) {
                tracing::debug!("pool discovery: served pools or routers changed");
            }
        }
        let now = self.view.clock().now_ms();
        let complete = self.health.is_complete(now);
        if self.complete != Some(complete) {
            if complete {
                tracing::info!("pool discovery: lists complete");
            } else if self.complete.is_some() {
                tracing::error!(
                    "pool discovery: list/watch errors span the error window; lists are \
                     complete: false, the last view is served"
                );
            }
            self.complete = Some(complete);
            self.view.set_discovery_complete(complete);
        }
    }
}

/// Watches until `stop` turns true, serving what is discovered in `view`.
pub async fn run(
    client: Client,
    settings: DiscoverySettings,
    view: Arc<LiveView>,
    mut stop: signal::Receiver<bool>,
) {
    let mcs = settings.mode == PoolDiscovery::Mcs;
    let selector = if mcs { derive::MCS_SERVICE_NAME } else { derive::K8S_SERVICE_NAME };
    let slices = watcher(Api::<EndpointSlice>::all(client.clone()), watch_config(Some(selector)))
        .modify(|slice| slice.metadata.managed_fields = None)
        .default_backoff()
        .map(Input::Slice)
        .boxed();
    let imports = if mcs {
        watcher(Api::<PartialObjectMeta<ServiceImport>>::all(client), watch_config(None))
            .modify(|import| import.metadata.managed_fields = None)
            .default_backoff()
            .map(Input::Import)
            .boxed()
    } else {
        stream::pending().boxed()
    };
    let mut inputs = stream::select(slices, imports);
    let mut discovery = Discovery {
        rules: Rules {
            mode: settings.mode,
            router_namespace: settings.router_namespace,
            router_service: settings.router_service,
            router_port_name: settings.router_port_name,
            pool_service_suffix: settings.pool_service_suffix,
        },
        view,
        slices: Store::new(match settings.mode {
            PoolDiscovery::Karmada => {
                |s| !matches!(derive::identify(PoolDiscovery::Karmada, s), Ok(None))
            }
            _ => |_| true,
        }),
        imports: Store::new(|_| true),
        health: Health::new(if mcs { 2 } else { 1 }, settings.error_window, settings.recovery),
        skipped: BTreeSet::new(),
        complete: None,
        dirty: false,
    };
    discovery.publish();
    let mut tick = tokio::time::interval(HEALTH_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            input = inputs.next() => {
                let Some(input) = input else { break };
                discovery.take(input);
                // Take the whole batch ready now, then derive once.
                while let Some(Some(input)) = inputs.next().now_or_never() {
                    discovery.take(input);
                }
                discovery.publish();
            }
            _ = tick.tick() => discovery.publish(),
            _ = crate::shutdown::stopped(&mut stop) => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn slice(name: &str) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_relist_replaces_the_store_only_once_done_and_a_failed_one_is_dropped() {
        let mut store = Store::new(|_| true);
        assert_eq!(store.take(watcher::Event::Init), Taken::Nothing);
        store.take(watcher::Event::InitApply(slice("a")));
        assert!(store.current.is_empty(), "nothing served from a list under way");
        assert_eq!(store.take(watcher::Event::InitDone), Taken::Listed { count: 1, first: true });
        assert_eq!(store.take(watcher::Event::Apply(slice("b"))), Taken::Changed);
        // A relist fails halfway: its partial slices are dropped, the last
        // complete state stays.
        store.take(watcher::Event::Init);
        store.take(watcher::Event::InitApply(slice("c")));
        store.failed();
        assert_eq!(store.current.keys().map(|k| k.1.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        // The next relist starts afresh and replaces everything.
        store.take(watcher::Event::Init);
        store.take(watcher::Event::InitApply(slice("d")));
        assert_eq!(
            store.take(watcher::Event::InitDone),
            Taken::Listed { count: 1, first: false },
            "a relist is no first list: it does not count toward completeness again"
        );
        assert_eq!(store.current.keys().map(|k| k.1.as_str()).collect::<Vec<_>>(), ["d"]);
        assert_eq!(store.take(watcher::Event::Delete(slice("d"))), Taken::Changed);
        assert!(store.current.is_empty());
    }

    #[test]
    fn lists_come_from_the_watch_cache_unpaged_and_watches_end_in_time() {
        let config = watch_config(Some("x"));
        assert_eq!(config.list_semantic, watcher::ListSemantic::Any);
        assert_eq!(config.page_size, None);
        assert_eq!(config.timeout, Some(WATCH_TIMEOUT_SECS));
        assert_eq!(config.label_selector.as_deref(), Some("x"));
    }

    #[test]
    fn only_the_objects_to_keep_are_kept() {
        let mut store = Store::new(|s: &EndpointSlice| {
            s.metadata.name.as_deref().is_some_and(|n| n.starts_with("imported-"))
        });
        store.take(watcher::Event::Init);
        store.take(watcher::Event::InitApply(slice("imported-a")));
        store.take(watcher::Event::InitApply(slice("web-x1")));
        assert_eq!(store.take(watcher::Event::InitDone), Taken::Listed { count: 1, first: true });
        assert_eq!(store.take(watcher::Event::Apply(slice("web-x2"))), Taken::Nothing);
        assert_eq!(store.current.len(), 1);
    }

    fn discovery(mode: PoolDiscovery) -> Discovery {
        use clap::Parser;
        let args = crate::config::Args::try_parse_from(["mcs-registry"]).unwrap();
        let settings = crate::config::Settings::from_args(&args).unwrap();
        let clock = Arc::new(crate::clock::ManualClock::new(1_000_000));
        let view = LiveView::discovered(0, 30_000, settings.expiry_hold, clock);
        Discovery {
            rules: Rules {
                mode,
                router_namespace: "gr".into(),
                router_service: "global-router".into(),
                router_port_name: "http".into(),
                pool_service_suffix: "-pool-relay".into(),
            },
            view: Arc::new(view),
            slices: Store::new(|_| true),
            imports: Store::new(|_| true),
            health: Health::new(2, Duration::from_secs(60), Duration::from_secs(120)),
            skipped: BTreeSet::new(),
            complete: None,
            dirty: false,
        }
    }

    /// Regression: every watcher's first list counted, not any two lists
    /// (the slices' relist after an error made discovery complete while
    /// ServiceImports had never been listed).
    #[test]
    fn complete_only_once_every_watcher_listed_however_often_one_relists() {
        let mut d = discovery(PoolDiscovery::Mcs);
        for _ in 0..2 {
            d.take(Input::Slice(Ok(watcher::Event::Init)));
            d.take(Input::Slice(Ok(watcher::Event::InitDone)));
        }
        d.publish();
        assert!(!d.view.is_discovery_complete(), "ServiceImports never listed");
        d.take(Input::Import(Ok(watcher::Event::Init)));
        d.take(Input::Import(Ok(watcher::Event::InitDone)));
        d.publish();
        assert!(d.view.is_discovery_complete());
    }
}
