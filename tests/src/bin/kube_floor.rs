//! The floor of `controller_export_cost`: a process that makes the same
//! Kubernetes messages per export as `mcs-controller` and nothing else,
//! so the benchmark can set the controller's CPU per export against what
//! those messages alone cost on the same machine in the same run
//! (docs/benchmarks.md §8).
//!
//! It watches what the controller watches, with the same selectors, into
//! the same kind of caches (kube-runtime reflectors, `managedFields`
//! dropped where the controller drops them): every Service, the
//! EndpointSlices not ours, every ServiceExport, the ServiceImports,
//! Services and slices of ours, every Namespace (metadata only). For each
//! ServiceExport not yet Ready, once its Service is cached, it makes the
//! controller's five writes by server-side apply: the import side's four
//! in the controller's order (the derived Service, the ServiceImport with
//! that Service's cluster IP, the ServiceImport's status, the imported
//! slice with the exported slice's endpoints), then the export side's,
//! the ServiceExport's status `Ready=True`. No registry, no rules, no
//! conflicts: what is left of the controller's CPU beyond this is the
//! controller's own work. It runs on the controller's runtime (tokio's
//! current-thread runtime, `--worker-threads 1`, the default): on the
//! multi-threaded one the hand-off of each message between threads cost
//! it about a third more (docs/benchmarks.md §8).
//!
//! ```text
//! KUBECONFIG=... kube-floor-for-bench CLUSTER   prints "ready" once every watch has listed
//! ```
//!
//! The exported slice is found by the benchmark's naming (`<service>-own`),
//! not by an index: a floor has no lookups to speak of.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark's helper that cannot run should stop loudly

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_controller::export::build::SERVICE_NAME_LABEL as KUBE_SERVICE_NAME_LABEL;
use mcs_controller::import::plan::{MANAGED_BY_LABEL, SERVICE_NAME_LABEL, SLICE_MANAGED_BY_LABEL};
use mcs_controller::watch::forget_managed_fields;
use mcs_controller::{FIELD_MANAGER, MANAGED_BY};
use serde_json::{Value, json};
use std::collections::HashSet;
use tokio::sync::mpsc;

/// Follows `api` into a store (dropping `managedFields` if `forget`), and
/// sends each touched object's namespace and name to `touched` if given.
fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    forget: bool,
    touched: Option<mpsc::UnboundedSender<(String, String)>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let events = watcher(api, config).modify(move |o: &mut K| {
        if forget {
            forget_managed_fields(o);
        }
    });
    let mut objects =
        reflector::reflector(writer, events).default_backoff().touched_objects().boxed();
    tokio::spawn(async move {
        while let Some(object) = objects.next().await {
            if let (Ok(object), Some(tx)) = (object, &touched) {
                let _ = tx.send((object.namespace().unwrap_or_default(), object.name_any()));
            }
        }
    });
    store
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let cluster = std::env::args().nth(1).expect("usage: kube-floor-for-bench CLUSTER");
    let kube = kube::Client::try_default().await.expect("a kubeconfig (KUBECONFIG)");
    let ours = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let not_ours = watcher::Config::default()
        .labels(&format!("{KUBE_SERVICE_NAME_LABEL},{SLICE_MANAGED_BY_LABEL}!={MANAGED_BY}"));
    let slices_ours =
        watcher::Config::default().labels(&format!("{SLICE_MANAGED_BY_LABEL}={MANAGED_BY}"));
    // A ServiceExport is taken up when it or its Service changes: either
    // may reach its cache first (the controller's export reconciler is
    // woken by both too).
    let (tx, mut touched) = mpsc::unbounded_channel();
    let services = reflect(
        Api::<Service>::all(kube.clone()),
        watcher::Config::default(),
        true,
        Some(tx.clone()),
    );
    let slices = reflect(Api::<EndpointSlice>::all(kube.clone()), not_ours, true, None);
    let export_store = reflect(
        Api::<ServiceExport>::all(kube.clone()),
        watcher::Config::default(),
        true,
        Some(tx),
    );
    let imports = reflect(Api::<ServiceImport>::all(kube.clone()), ours.clone(), false, None);
    let derived = reflect(Api::<Service>::all(kube.clone()), ours, false, None);
    let imported = reflect(Api::<EndpointSlice>::all(kube.clone()), slices_ours, false, None);
    let namespaces = reflect(
        Api::<PartialObjectMeta<Namespace>>::all(kube.clone()),
        watcher::Config::default(),
        false,
        None,
    );
    services.wait_until_ready().await.unwrap();
    slices.wait_until_ready().await.unwrap();
    export_store.wait_until_ready().await.unwrap();
    imports.wait_until_ready().await.unwrap();
    derived.wait_until_ready().await.unwrap();
    imported.wait_until_ready().await.unwrap();
    namespaces.wait_until_ready().await.unwrap();
    println!("ready");

    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut done = HashSet::new();
    while let Some((ns, name)) = touched.recv().await {
        let key = ObjectRef::<ServiceExport>::new(&name).within(&ns);
        let Some(se) = export_store.get(&key) else { continue };
        let ready =
            se.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready"));
        if ready || done.contains(&key) {
            continue;
        }
        // Not seen yet: its Service's event will bring the export back.
        let Some(svc) = services.get(&ObjectRef::new(&name).within(&ns)) else { continue };
        done.insert(key);
        let ports: Vec<Value> = svc
            .spec
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .map(|p| json!({"name": p.name, "port": p.port, "protocol": p.protocol}))
            .collect();
        let derived = format!("floor-{name}");
        let labels = json!({MANAGED_BY_LABEL: MANAGED_BY, SERVICE_NAME_LABEL: name});
        let written: Service = Api::<Service>::namespaced(kube.clone(), &ns)
            .patch(
                &derived,
                &params,
                &Patch::Apply(json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": derived, "namespace": ns, "labels": labels},
                    "spec": {"type": "ClusterIP", "ports": ports},
                })),
            )
            .await
            .expect("the derived Service");
        let ip = written.spec.and_then(|s| s.cluster_ip).expect("a cluster IP");
        let imports = Api::<ServiceImport>::namespaced(kube.clone(), &ns);
        let (si_version, si_kind) = (ServiceImport::api_version(&()), ServiceImport::kind(&()));
        let si = json!({
            "apiVersion": si_version, "kind": si_kind,
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"type": "ClusterSetIP", "ips": [ip], "ports": ports},
        });
        imports.patch(&name, &params, &Patch::Apply(si)).await.expect("the ServiceImport");
        let status = json!({
            "apiVersion": si_version, "kind": si_kind,
            "status": {"clusters": [{"cluster": cluster}]},
        });
        imports.patch_status(&name, &params, &Patch::Apply(status)).await.expect("its status");
        let own = slices.get(&ObjectRef::new(&format!("{name}-own")).within(&ns));
        let endpoints =
            own.map(|s| serde_json::to_value(&s.endpoints).unwrap()).unwrap_or(json!([]));
        let slice = format!("{derived}-{cluster}");
        Api::<EndpointSlice>::namespaced(kube.clone(), &ns)
            .patch(
                &slice,
                &params,
                &Patch::Apply(json!({
                    "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": slice, "namespace": ns, "labels": {
                        KUBE_SERVICE_NAME_LABEL: derived,
                        SLICE_MANAGED_BY_LABEL: MANAGED_BY,
                        SERVICE_NAME_LABEL: name,
                        MANAGED_BY_LABEL: MANAGED_BY,
                    }},
                    "addressType": "IPv4", "endpoints": endpoints, "ports": ports,
                })),
            )
            .await
            .expect("the imported slice");
        let ready = json!({
            "apiVersion": ServiceExport::api_version(&()), "kind": ServiceExport::kind(&()),
            "status": {"conditions": [{
                "type": "Ready", "status": "True", "reason": "Ready", "message": "floor",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]},
        });
        Api::<ServiceExport>::namespaced(kube.clone(), &ns)
            .patch_status(&name, &params, &Patch::Apply(ready))
            .await
            .expect("the ServiceExport's status");
    }
}
