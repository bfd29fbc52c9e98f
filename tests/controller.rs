//! mcs-controller against real API servers (`scripts/k8s-env`), a real
//! registry (on DynamoDB, moto) and each other: two clusters exporting and
//! importing, conflicts, outages, drift, scale, failover, and the
//! controller's RBAC checked in the API servers' audit logs.
//!
//! Every controller here runs under the ClusterRole `mcs-controller rbac`
//! prints, through a ServiceAccount bound to nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta};
use mcs_controller::MANAGED_BY;
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_testkit::eventually;
use mcs_testkit::k8s::ensure_namespace;
use mcs_tests::controller::{Cluster, World, apply, endpoint_slice, export_progress, service};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const NS: &str = "demo";
const WITHIN: Duration = Duration::from_secs(30);
const SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
const SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";
const DRIFT_REPAIRS: &str = "mcs_controller_import_drift_repairs_total";

// The KEP-1645 conflict rules, one test per rule (issue 27).
#[path = "controller/conformance.rs"]
mod conformance;

async fn world(names: &[&str], flags: &[&str]) -> Option<World> {
    let world = World::start(mcs_tests::controller_binaries!(), names, flags).await?;
    for c in &world.clusters {
        ensure_namespace(&c.kube, NS).await;
    }
    Some(world)
}

fn export(name: &str) -> ServiceExport {
    mcs_tests::controller::service_export(NS, name)
}

/// Exports `name` from cluster `c`: its Service, one slice of `addresses`, the ServiceExport.
async fn export_service(c: &Cluster, name: &str, ports: &[(&str, u16, u16)], addresses: &[&str]) {
    export_as(c, &service(NS, name, ports, false), &export(name), addresses).await;
}

/// Exports Service `svc` from cluster `c` as ServiceExport `se`: the
/// Service, one slice (`<name>-own`) of `addresses` on its target ports,
/// the ServiceExport.
async fn export_as(c: &Cluster, svc: &Service, se: &ServiceExport, addresses: &[&str]) {
    let name = svc.metadata.name.as_deref().expect("a named Service");
    let slice_ports: Vec<(&str, u16)> = svc
        .spec
        .iter()
        .flat_map(|spec| spec.ports.iter().flatten())
        .map(|p| {
            let target = match &p.target_port {
                Some(IntOrString::Int(target)) => *target,
                _ => p.port,
            };
            (p.name.as_deref().unwrap_or_default(), u16::try_from(target).expect("a port"))
        })
        .collect();
    apply(&services(c), svc).await;
    apply(&slices(c), &endpoint_slice(NS, name, &format!("{name}-own"), addresses, &slice_ports))
        .await;
    apply(&exports(c), se).await;
}

fn services(c: &Cluster) -> Api<Service> {
    Api::namespaced(c.kube.clone(), NS)
}
fn slices(c: &Cluster) -> Api<EndpointSlice> {
    Api::namespaced(c.kube.clone(), NS)
}
fn exports(c: &Cluster) -> Api<ServiceExport> {
    Api::namespaced(c.kube.clone(), NS)
}
fn imports(c: &Cluster) -> Api<ServiceImport> {
    Api::namespaced(c.kube.clone(), NS)
}

/// The slices the controller imported for `service` (by our managed-by label).
async fn imported_slices(c: &Cluster, service: &str) -> Vec<EndpointSlice> {
    let selector =
        format!("{SERVICE_NAME}={service},endpointslice.kubernetes.io/managed-by={MANAGED_BY}");
    slices(c).list(&ListParams::default().labels(&selector)).await.expect("slices").items
}

/// `(source cluster, address)` of every endpoint of the imported slices.
async fn imported_endpoints(c: &Cluster, service: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for s in imported_slices(c, service).await {
        let source = label(&s.metadata, SOURCE_CLUSTER);
        for e in s.endpoints.into_iter().flatten() {
            for a in e.addresses {
                out.insert((source.clone(), a));
            }
        }
    }
    out
}

fn label(meta: &ObjectMeta, key: &str) -> String {
    meta.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default()
}

/// The status and reason of condition `kind` of export `name`.
async fn condition(c: &Cluster, name: &str, kind: &str) -> Option<(String, String)> {
    let export = exports(c).get_opt(name).await.ok()??;
    let cond = export.status?.conditions.into_iter().find(|x| x.type_ == kind)?;
    Some((cond.status, cond.reason))
}

async fn wait_condition(c: &Cluster, name: &str, kind: &str, status: &str, reason: &str) {
    let what = format!("{}: {name} {kind}={status} {reason}", c.name);
    eventually(WITHIN, &what, async || {
        condition(c, name, kind).await == Some((status.into(), reason.into()))
    })
    .await;
}

fn addresses(cluster: &str, list: &[&str]) -> BTreeSet<(String, String)> {
    list.iter().map(|a| (cluster.to_owned(), (*a).to_owned())).collect()
}

/// Requests of the controller's ServiceAccount in `c`'s audit log:
/// `(verb, group, resource[/subresource], status code)`.
fn audited(c: &Cluster) -> Vec<(String, String, String, u16)> {
    mcs_tests::controller::audited(&c.env, "system:serviceaccount:mcs-system:mcs-controller")
}

/// Writes by the controller (anything but reads and its leader Lease).
fn writes(c: &Cluster) -> usize {
    writes_of(c, "system:serviceaccount:mcs-system:mcs-controller")
}

/// Writes by `username` (anything but reads and the leader Lease).
fn writes_of(c: &Cluster, username: &str) -> usize {
    mcs_tests::controller::audited(&c.env, username)
        .iter()
        .filter(|(verb, _, resource, _)| {
            !matches!(verb.as_str(), "get" | "list" | "watch") && resource != "leases"
        })
        .count()
}

#[tokio::test]
async fn export_import_headless_invalid_unexport_and_rbac() {
    let flags = [
        "--resync-interval-secs",
        "4",
        "--auto-export-selector",
        "multicluster.x-k8s.io/export=true",
    ];
    let Some(world) = world(&["east", "west"], &flags).await else {
        return;
    };
    let (east, west) = (world.cluster("east"), world.cluster("west"));

    export_service(east, "web", &[("http", 80, 8080)], &["10.1.0.1", "10.1.0.2"]).await;
    wait_condition(east, "web", "Valid", "True", "Valid").await;
    wait_condition(east, "web", "Ready", "True", "Exported").await;
    wait_condition(east, "web", "Conflict", "False", "NoConflicts").await;

    // Imported in both clusters (its own too): ServiceImport, derived Service, slices.
    for c in [east, west] {
        let what = format!("{}: web imported", c.name);
        eventually(WITHIN, &what, async || {
            imported_endpoints(c, "web").await == addresses("east", &["10.1.0.1", "10.1.0.2"])
        })
        .await;
        let import = imports(c).get("web").await.expect("ServiceImport web");
        assert_eq!(import.spec.type_, "ClusterSetIP");
        let ports: Vec<_> = import.spec.ports.iter().map(|p| (p.name.as_str(), p.port)).collect();
        assert_eq!(ports, vec![("http", 80)]);
        let clusters: Vec<_> = import
            .status
            .clone()
            .unwrap_or_default()
            .clusters
            .into_iter()
            .map(|c| c.cluster)
            .collect();
        assert_eq!(clusters, vec!["east"]);
        let slice = &imported_slices(c, "web").await[0];
        let derived = label(&slice.metadata, "kubernetes.io/service-name");
        assert!(derived.starts_with("derived-"), "{derived}");
        let slice_ports: Vec<_> = slice
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap_or_default(), p.port.unwrap_or_default()))
            .collect();
        assert_eq!(
            slice_ports,
            vec![("http".to_owned(), 8080)],
            "the source cluster's target port"
        );
        let derived = services(c).get(&derived).await.expect("the derived Service");
        let ips = derived.spec.and_then(|s| s.cluster_ips).unwrap_or_default();
        eventually(WITHIN, "the ServiceImport carries the derived Service's IPs", async || {
            imports(c).get("web").await.is_ok_and(|i| i.spec.ips == ips)
        })
        .await;
    }

    // Headless, exported from west.
    apply(&services(west), &service(NS, "db", &[("pg", 5432, 5432)], true)).await;
    apply(&slices(west), &endpoint_slice(NS, "db", "db-own", &["10.2.0.9"], &[("pg", 5432)])).await;
    apply(&exports(west), &export("db")).await;
    for c in [east, west] {
        let what = format!("{}: db imported as Headless", c.name);
        eventually(WITHIN, &what, async || {
            imports(c)
                .get("db")
                .await
                .is_ok_and(|i| i.spec.type_ == "Headless" && i.spec.ips.is_empty())
                && imported_endpoints(c, "db").await == addresses("west", &["10.2.0.9"])
        })
        .await;
    }

    // Headless without ports (Kubernetes allows it): the upstream CRD
    // requires `spec.ports`, so the ServiceImport carries it empty (before:
    // left out, and the upstream CRD refused the ServiceImport).
    apply(&services(west), &service(NS, "bare", &[], true)).await;
    apply(&slices(west), &endpoint_slice(NS, "bare", "bare-own", &["10.2.0.8"], &[])).await;
    apply(&exports(west), &export("bare")).await;
    for c in [east, west] {
        let what = format!("{}: bare imported as Headless without ports", c.name);
        eventually(WITHIN, &what, async || {
            imports(c)
                .get("bare")
                .await
                .is_ok_and(|i| i.spec.type_ == "Headless" && i.spec.ports.is_empty())
                && imported_endpoints(c, "bare").await == addresses("west", &["10.2.0.8"])
        })
        .await;
    }

    // ExternalName: invalid. A ServiceExport without its Service: invalid until it appears.
    let mut external = service(NS, "ext", &[("http", 80, 80)], false);
    let spec = external.spec.as_mut().unwrap();
    spec.type_ = Some("ExternalName".into());
    spec.external_name = Some("example.com".into());
    spec.selector = None;
    apply(&services(east), &external).await;
    apply(&exports(east), &export("ext")).await;
    wait_condition(east, "ext", "Valid", "False", "InvalidServiceType").await;
    apply(&exports(east), &export("later")).await;
    wait_condition(east, "later", "Valid", "False", "NoService").await;
    apply(&services(east), &service(NS, "later", &[("http", 80, 80)], false)).await;
    wait_condition(east, "later", "Valid", "True", "Valid").await;
    wait_condition(east, "later", "Ready", "True", "Exported").await;

    // Nothing changes: over two resyncs, no write at all.
    eventually(WITHIN, "later imported", async || imports(west).get("later").await.is_ok()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = (writes(east), writes(west));
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(
        (writes(east), writes(west)),
        before,
        "a reconcile with nothing changed writes nothing"
    );

    // Unexported everywhere: import, derived Service and slices go. web
    // carries the finalizer that controllers before 2026-12-06 added: it
    // is removed once the export is withdrawn (no controller adds it now).
    let derived =
        label(&imported_slices(west, "web").await[0].metadata, "kubernetes.io/service-name");
    let legacy = json!({"metadata": {"finalizers": [mcs_controller::export::FINALIZER]}});
    let merge = kube::api::Patch::Merge(&legacy);
    exports(east).patch("web", &kube::api::PatchParams::default(), &merge).await.unwrap();
    exports(east).delete("web", &DeleteParams::default()).await.unwrap();
    for c in [east, west] {
        let what = format!("{}: web gone", c.name);
        eventually(WITHIN, &what, async || {
            imports(c).get_opt("web").await.unwrap().is_none()
                && imported_slices(c, "web").await.is_empty()
                && services(c).get_opt(&derived).await.unwrap().is_none()
        })
        .await;
    }
    eventually(WITHIN, "the old finalizer removed, the ServiceExport gone", async || {
        exports(east).get_opt("web").await.unwrap().is_none()
    })
    .await;

    // Auto-export: a Service with the label gets a ServiceExport marked as
    // the controller's; without the label it goes; a user's own stays.
    // Never a system Service, labelled or not (issue 29 item 11; before:
    // kube-system/dns and default/kubernetes were exported).
    let export_label = || Some([("multicluster.x-k8s.io/export".into(), "true".into())].into());
    let mut system = service("kube-system", "dns", &[("dns", 53, 53)], false);
    system.metadata.labels = export_label();
    apply(&Api::<Service>::namespaced(east.kube.clone(), "kube-system"), &system).await;
    let api_server = Api::<Service>::namespaced(east.kube.clone(), "default");
    let patch =
        serde_json::json!({"metadata": {"labels": {"multicluster.x-k8s.io/export": "true"}}});
    api_server
        .patch("kubernetes", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    let mut labelled = service(NS, "auto", &[("http", 80, 80)], false);
    labelled.metadata.labels = export_label();
    apply(&services(east), &labelled).await;
    eventually(WITHIN, "auto-exported", async || {
        exports(east)
            .get_opt("auto")
            .await
            .unwrap()
            .is_some_and(|e| label(&e.metadata, "app.kubernetes.io/managed-by") == MANAGED_BY)
    })
    .await;
    eventually(WITHIN, "the auto export is imported in west", async || {
        imports(west).get_opt("auto").await.unwrap().is_some()
    })
    .await;
    labelled.metadata.labels = Some(BTreeMap::new());
    apply(&services(east), &labelled).await;
    eventually(WITHIN, "the auto export goes with its label", async || {
        exports(east).get_opt("auto").await.unwrap().is_none()
    })
    .await;
    let mut user_made = service(NS, "later", &[("http", 80, 80)], false);
    user_made.metadata.labels = Some(BTreeMap::new());
    apply(&services(east), &user_made).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        exports(east).get_opt("later").await.unwrap().is_some(),
        "a user's ServiceExport stays"
    );
    for (namespace, name) in [("kube-system", "dns"), ("default", "kubernetes")] {
        let exports = Api::<ServiceExport>::namespaced(east.kube.clone(), namespace);
        assert!(exports.get_opt(name).await.unwrap().is_none(), "{namespace}/{name} auto-exported");
    }

    // RBAC: nothing the controller asked was denied, and every verb of the
    // generated role was used (apply that creates is authorized as create).
    let mut used = BTreeSet::new();
    for c in [east, west] {
        let requests = audited(c);
        let denied: Vec<_> = requests.iter().filter(|r| r.3 == 403).collect();
        assert!(denied.is_empty(), "{}: denied {denied:?}", c.name);
        for (verb, group, resource, code) in requests {
            used.insert((group.clone(), resource.clone(), verb.clone()));
            if verb == "patch" && code == 201 {
                used.insert((group, resource, "create".to_owned()));
            }
        }
    }
    for (group, resource, verbs) in mcs_controller::rbac::all_rules() {
        for verb in verbs {
            let key = (group.to_owned(), resource.to_owned(), (*verb).to_owned());
            assert!(used.contains(&key), "granted but never used: {key:?}; used: {used:?}");
        }
    }

    // Every series the controllers export is documented.
    let doc =
        std::fs::read_to_string(mcs_tests::workspace_root().join("docs/configuration.md")).unwrap();
    let documented = mcs_testkit::metrics::documented_names(&doc, "## mcs-controller metrics");
    for c in [east, west] {
        let text = c.controllers[0].metrics().await;
        for base in mcs_testkit::metrics::exported_names(&text) {
            assert!(documented.contains(&base), "{base} is not in docs/configuration.md");
        }
        let problems =
            mcs_testkit::metrics::type_mismatches(&text, &doc, "## mcs-controller metrics");
        assert!(problems.is_empty(), "{problems:#?}");
    }

    // Issue 23 item 9: the controller's alerts and dashboard name only
    // series the controllers export (or, for counters of rare events,
    // document: they appear with their first event).
    let mut exported = BTreeSet::new();
    for c in [east, west] {
        exported.extend(mcs_testkit::metrics::exported_names(&c.controllers[0].metrics().await));
    }
    let rare =
        ["mcs_controller_cluster_lease_losses_total", "mcs_controller_undecodable_objects_total"];
    for path in
        ["deploy/prometheus/mcs-controller-alerts.yaml", "deploy/grafana/mcs-controller.json"]
    {
        let file = std::fs::read_to_string(mcs_tests::workspace_root().join(path)).unwrap();
        let names = mcs_testkit::metrics::referenced_names(&file, &["mcs_controller_", "process_"]);
        assert!(names.len() >= 5, "{path} references metrics: {names:?}");
        let unknown: Vec<_> = names
            .iter()
            .filter(|n| {
                let rare_and_documented = rare.contains(&n.as_str()) && documented.contains(*n);
                !(exported.contains(*n) || rare_and_documented)
            })
            .collect();
        assert!(unknown.is_empty(), "{path} names series nobody exports: {unknown:?}");
    }
}

/// East exports `web` at 10.1.0.1, west at 10.2.0.1; west imports both.
async fn both_export_web(world: &World) {
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    export_service(east, "web", &[("http", 80, 8080)], &["10.1.0.1"]).await;
    export_service(west, "web", &[("http", 80, 8080)], &["10.2.0.1"]).await;
    let both = addresses("east", &["10.1.0.1"])
        .union(&addresses("west", &["10.2.0.1"]))
        .cloned()
        .collect();
    eventually(WITHIN, "west imports both", async || imported_endpoints(west, "web").await == both)
        .await;
}

/// Waits (up to `within`) until west imports only its own endpoint of
/// `web`; how long that took.
async fn east_gone_from_west(world: &World, within: Duration) -> Duration {
    let (west, since) = (world.cluster("west"), Instant::now());
    eventually(within, "east's slices gone from west", async || {
        imported_endpoints(west, "web").await == addresses("west", &["10.2.0.1"])
    })
    .await;
    since.elapsed()
}

#[tokio::test]
async fn registry_outage_deletes_nothing_and_a_stopped_cluster_loses_only_its_slices() {
    let Some(mut world) = world(&["east", "west"], &["--resync-interval-secs", "3"]).await else {
        return;
    };
    both_export_web(&world).await;
    world.stop_registry().await;
    {
        let west = world.cluster("west");
        // Over more than two resyncs nothing imported is deleted, and Ready says why.
        let until = Instant::now() + Duration::from_secs(8);
        while Instant::now() < until {
            assert_eq!(
                imported_endpoints(west, "web").await.len(),
                2,
                "deleted while the registry was down"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        eventually(WITHIN, "the ServiceImport reports the registry", async || {
            imports(west).get("web").await.is_ok_and(|i| {
                i.status
                    .unwrap_or_default()
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "False")
            })
        })
        .await;
    }
    // The importer's WARN names the registry and why it is unreachable.
    // Before: `registry unreachable: keeping every import error=no answer
    // within 10 s` (its bound cancelled the call, and the refused
    // connection its retries saw was lost).
    let unreachable = async || -> Option<String> {
        let log = world.cluster("west").controllers[0].log();
        log.into_iter().find(|l| l.contains("registry unreachable: keeping every import"))
    };
    eventually(WITHIN, "the importer warns that the registry is unreachable", async || {
        unreachable().await.is_some()
    })
    .await;
    let line = unreachable().await.unwrap_or_default();
    assert!(line.contains(&world.registry_url()), "the registry's URL: {line}");
    assert!(line.contains("Connection refused"), "the cause: {line}");
    world.start_registry().await;
    {
        let west = world.cluster("west");
        eventually(WITHIN, "Ready again", async || {
            imports(west).get("web").await.is_ok_and(|i| {
                i.status
                    .unwrap_or_default()
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await;
        wait_condition(world.cluster("east"), "web", "Ready", "True", "Exported").await;
        eventually(WITHIN, "west imports both again", async || {
            imported_endpoints(west, "web").await.len() == 2
        })
        .await;
    }
    // East's controller dies: after its lease only east's slices go in west.
    let east_controller = world.clusters[0].controllers.remove(0);
    east_controller.kill().await;
    let west = world.cluster("west");
    let lease = Duration::from_secs(mcs_tests::controller::LEASE_SECS);
    let gone = east_gone_from_west(&world, WITHIN + lease).await;
    assert!(gone >= lease / 2, "gone after {gone:?}, before the lease could end");
    assert!(imports(west).get("web").await.is_ok(), "west's own export keeps the import");
}

/// A registry stalled past every cluster's lease forgets them all: until
/// each exporter sends its exports again, its lists lack them. The removal
/// hold kept the services missing whole, but a service still listed for
/// another cluster lost the missing cluster's slices at once: seen as
/// east's slices deleted in west 0.9 s after the registry came back, while
/// east's controller was alive and about to send its export again (a
/// flaky failure of the test above; 0.7 s here before the fix). Here
/// east's controller is gone for good, so its slices must go, but only
/// once the hold has ended.
#[tokio::test]
async fn a_registry_that_forgot_takes_a_listed_service_s_missing_cluster_only_after_the_hold() {
    let Some(mut world) = world(&["east", "west"], &["--resync-interval-secs", "3"]).await else {
        return;
    };
    both_export_web(&world).await;
    let east_controller = world.clusters[0].controllers.remove(0);
    east_controller.kill().await;
    world.stop_registry().await;
    // Past every lease: the registry forgets both clusters.
    let lease = Duration::from_secs(mcs_tests::controller::LEASE_SECS);
    tokio::time::sleep(lease + Duration::from_secs(2)).await;
    world.start_registry().await;
    let gone = east_gone_from_west(&world, WITHIN + lease * 2).await;
    assert!(
        gone >= lease / 2,
        "east's slices gone {gone:?} after the registry came back, before a hold could end"
    );
}

/// Issue 29, item 1: a registry restarted on empty storage served complete,
/// empty lists, and every cluster deleted every ServiceImport, derived
/// Service and EndpointSlice, re-sent only at the next resync with new
/// clusterset IPs. Now the importers hold the mass removal back for a
/// lease, and each exporter's next renewal reads `renewed: false` and
/// sends its exports again at once (here within a few heartbeats, with the
/// resync an hour away).
#[tokio::test]
async fn a_registry_restarted_empty_deletes_no_import_and_the_exporters_resend_at_once() {
    let Some(mut world) = world(&["east", "west"], &["--resync-interval-secs", "3600"]).await
    else {
        return;
    };
    const N: usize = 12;
    let names: Vec<String> = (0..N).map(|i| format!("svc-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let (c, address) = match i % 2 {
            0 => (world.cluster("east"), format!("10.1.0.{}", i + 1)),
            _ => (world.cluster("west"), format!("10.2.0.{}", i + 1)),
        };
        export_service(c, name, &[("http", 80, 8080)], &[&address]).await;
    }
    let clusterset_ips = async |c: &Cluster| -> BTreeMap<String, Vec<String>> {
        let list = imports(c).list(&ListParams::default()).await.expect("imports");
        list.items.into_iter().map(|i| (i.metadata.name.unwrap_or_default(), i.spec.ips)).collect()
    };
    for c in &world.clusters {
        eventually(WITHIN, &format!("{} imports every service", c.name), async || {
            let ips = clusterset_ips(c).await;
            ips.len() == N && ips.values().all(|ips| !ips.is_empty())
        })
        .await;
    }
    let before: Vec<_> =
        futures::future::join_all(world.clusters.iter().map(&clusterset_ips)).await;
    let deletes = |c: &Cluster| {
        audited(c)
            .iter()
            .filter(|(verb, _, resource, _)| verb == "delete" && resource != "leases")
            .count()
    };
    let deleted_before: Vec<usize> = world.clusters.iter().map(deletes).collect();

    world.restart_registry_empty().await;
    let restarted = Instant::now();
    let registry = world.registry_client();
    eventually(Duration::from_secs(20), "every export sent again", async || {
        registry.exports().await.is_ok_and(|l| l.complete && l.exports.len() == N)
    })
    .await;
    let resent = restarted.elapsed();
    assert!(resent < Duration::from_secs(20), "re-sent after {resent:?}");
    // Past the hold (one lease) and then some: nothing was deleted, every
    // slice still holds its endpoint, the clusterset IPs are those of before.
    let lease = Duration::from_secs(mcs_tests::controller::LEASE_SECS);
    tokio::time::sleep((lease * 2).saturating_sub(restarted.elapsed())).await;
    for (i, c) in world.clusters.iter().enumerate() {
        assert_eq!(deletes(c), deleted_before[i], "{}: the controller deleted objects", c.name);
        assert_eq!(clusterset_ips(c).await, before[i], "{}: clusterset IPs changed", c.name);
        for (n, name) in names.iter().enumerate() {
            let (source, prefix) = if n % 2 == 0 { ("east", "10.1") } else { ("west", "10.2") };
            let address = format!("{prefix}.0.{}", n + 1);
            assert_eq!(
                imported_endpoints(c, name).await,
                addresses(source, &[address.as_str()]),
                "{}: {name}",
                c.name
            );
        }
    }
    eprintln!("exports re-sent {resent:?} after the registry restarted empty");

    // The hold is bounded: withdrawals go (the last, all that was left, one
    // hold late).
    for (i, name) in names.iter().enumerate() {
        let c = world.cluster(if i % 2 == 0 { "east" } else { "west" });
        exports(c).delete(name, &DeleteParams::default()).await.unwrap();
    }
    for c in &world.clusters {
        eventually(WITHIN + lease, &format!("{}: every import gone", c.name), async || {
            clusterset_ips(c).await.is_empty()
        })
        .await;
    }
}

/// Issue 29, item 2: a named targetPort resolving to different container
/// ports (a rollout) imported every endpoint under the first slice's port:
/// 10.1.10.2 listened on 9090 and was imported as 8080. Each endpoint now
/// keeps its own port, in every importing cluster.
#[tokio::test]
async fn endpoints_behind_a_named_target_port_keep_their_own_container_port() {
    let Some(world) = world(&["east", "west"], &[]).await else {
        return;
    };
    let east = world.cluster("east");
    apply(&services(east), &service(NS, "roll", &[("http", 80, 8080)], false)).await;
    apply(
        &slices(east),
        &endpoint_slice(NS, "roll", "roll-old", &["10.1.10.1"], &[("http", 8080)]),
    )
    .await;
    apply(
        &slices(east),
        &endpoint_slice(NS, "roll", "roll-new", &["10.1.10.2"], &[("http", 9090)]),
    )
    .await;
    apply(&exports(east), &export("roll")).await;
    for c in &world.clusters {
        eventually(WITHIN, &format!("{}: each endpoint on its own port", c.name), async || {
            let mut seen = BTreeSet::new();
            for s in imported_slices(c, "roll").await {
                let port = s.ports.iter().flatten().find_map(|p| p.port).unwrap_or_default();
                for e in s.endpoints.into_iter().flatten() {
                    for a in e.addresses {
                        seen.insert((a, port));
                    }
                }
            }
            seen == BTreeSet::from([("10.1.10.1".to_owned(), 8080), ("10.1.10.2".to_owned(), 9090)])
        })
        .await;
    }
}

#[tokio::test]
async fn drift_is_repaired_and_2500_endpoints_fit_in_slices() {
    let Some(world) = world(&["east", "west"], &["--resync-interval-secs", "3"]).await else {
        return;
    };
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    // 2,500 endpoints in three source slices of at most 1,000.
    let all: Vec<String> = (0..2500).map(|i| format!("10.3.{}.{}", i / 250, i % 250 + 1)).collect();
    apply(&services(east), &service(NS, "big", &[("http", 80, 8080)], false)).await;
    for (n, chunk) in all.chunks(1000).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        apply(
            &slices(east),
            &endpoint_slice(NS, "big", &format!("big-{n}"), &refs, &[("http", 8080)]),
        )
        .await;
    }
    apply(&exports(east), &export("big")).await;
    eventually(Duration::from_secs(60), "2,500 endpoints imported", async || {
        imported_endpoints(west, "big").await.len() == 2500
    })
    .await;
    let imported = imported_slices(west, "big").await;
    assert_eq!(imported.len(), 25, "100 endpoints a slice");
    assert!(imported.iter().all(|s| s.endpoints.as_ref().map_or(0, Vec::len) <= 100));

    // Our own writes, seen by our own watches, are no drift (issue 23 item 9).
    let repairs = async || west.controllers[0].metric(DRIFT_REPAIRS, &[]).await;
    assert_eq!(repairs().await, 0.0, "no drift repaired before any drift");

    // Drift: a slice deleted by hand, one edited by hand, one of ours that should not exist.
    let victim = imported[0].metadata.name.clone().unwrap();
    let edited = imported[1].metadata.name.clone().unwrap();
    slices(west).delete(&victim, &DeleteParams::default()).await.unwrap();
    let mut changed = imported[1].clone();
    changed.endpoints.as_mut().unwrap().truncate(1);
    changed.metadata.managed_fields = None;
    changed.metadata.resource_version = None;
    apply(&slices(west), &changed).await;
    let mut stray = imported[2].clone();
    stray.metadata = ObjectMeta {
        name: Some("stray-import".into()),
        namespace: Some(NS.into()),
        labels: stray.metadata.labels.clone(),
        ..Default::default()
    };
    apply(&slices(west), &stray).await;
    eventually(Duration::from_secs(20), "drift repaired", async || {
        let names: BTreeSet<String> = imported_slices(west, "big")
            .await
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        names.contains(&victim)
            && !names.contains("stray-import")
            && slices(west)
                .get(&edited)
                .await
                .is_ok_and(|s| s.endpoints.as_ref().map_or(0, Vec::len) == 100)
            && imported_endpoints(west, "big").await.len() == 2500
    })
    .await;
    // Each repair counted (the alert McsControllerImportDriftRepairs),
    // once the reconcile that made the last of them has returned.
    eventually(Duration::from_secs(5), "three objects repaired and counted", async || {
        repairs().await >= 3.0
    })
    .await;

    // Scaled down to 150: two slices, the rest deleted.
    for n in 1..3 {
        slices(east).delete(&format!("big-{n}"), &DeleteParams::default()).await.unwrap();
    }
    let refs: Vec<&str> = all[..150].iter().map(String::as_str).collect();
    apply(&slices(east), &endpoint_slice(NS, "big", "big-0", &refs, &[("http", 8080)])).await;
    eventually(WITHIN, "scaled down", async || {
        let s = imported_slices(west, "big").await;
        s.len() == 2 && imported_endpoints(west, "big").await.len() == 150
    })
    .await;
}

#[tokio::test]
async fn two_replicas_one_leader_and_failover_keeps_the_slices() {
    let Some(mut world) = world(&["east", "west"], &["--resync-interval-secs", "5"]).await else {
        return;
    };
    world.start_controller(0).await;
    {
        let (east, west) = (world.cluster("east"), world.cluster("west"));
        export_service(east, "web", &[("http", 80, 8080)], &["10.1.0.1"]).await;
        eventually(WITHIN, "imported", async || {
            imported_endpoints(west, "web").await == addresses("east", &["10.1.0.1"])
        })
        .await;
    }
    let mut leaders = Vec::new();
    for (i, c) in world.clusters[0].controllers.iter().enumerate() {
        if c.metric("mcs_controller_leader", &[]).await == 1.0 {
            leaders.push(i);
        }
    }
    assert_eq!(leaders.len(), 1, "one leader of two replicas");
    let slice_names = |c: &Cluster| {
        let api = slices(c);
        async move {
            let selector = format!("endpointslice.kubernetes.io/managed-by={MANAGED_BY}");
            let list = api.list(&ListParams::default().labels(&selector)).await.unwrap().items;
            list.into_iter().filter_map(|s| s.metadata.name).collect::<BTreeSet<_>>()
        }
    };
    let before = slice_names(world.cluster("west")).await;
    let leader = world.clusters[0].controllers.remove(leaders[0]);
    leader.kill().await;
    // The standby takes over; meanwhile east's slices never leave west, and
    // no slice is duplicated.
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        let west = world.cluster("west");
        assert_eq!(imported_endpoints(west, "web").await, addresses("east", &["10.1.0.1"]));
        assert_eq!(slice_names(west).await, before);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let standby = &world.clusters[0].controllers[0];
    assert_eq!(standby.metric("mcs_controller_leader", &[]).await, 1.0, "the standby leads");
    // A graceful stop (SIGTERM) exits 0 and withdraws nothing; a new replica
    // adopts the cluster's incarnation, so west never loses east's slices.
    let standby = world.clusters[0].controllers.remove(0);
    assert_eq!(standby.terminate().await, Some(0), "a graceful stop exits 0");
    world.start_controller(0).await;
    let until = Instant::now() + Duration::from_secs(mcs_tests::controller::LEASE_SECS * 2);
    while Instant::now() < until {
        let west = world.cluster("west");
        assert_eq!(imported_endpoints(west, "web").await, addresses("east", &["10.1.0.1"]));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The new leader exports: a change in east reaches west.
    let east = world.cluster("east");
    apply(
        &slices(east),
        &endpoint_slice(NS, "web", "web-own", &["10.1.0.1", "10.1.0.7"], &[("http", 8080)]),
    )
    .await;
    eventually(WITHIN, "the new leader exports changes", async || {
        imported_endpoints(world.cluster("west"), "web").await
            == addresses("east", &["10.1.0.1", "10.1.0.7"])
    })
    .await;
}

/// The KEP-2149 ClusterProperty names the cluster; a `--cluster-id` that
/// disagrees with it is refused.
#[tokio::test]
async fn the_cluster_property_names_the_cluster_and_a_contradicting_flag_is_refused() {
    let Some(mut world) = world(&["hub"], &[]).await else { return };
    let hub = &world.clusters[0];
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "clusterproperties.about.k8s.io",
                         "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/3084"}},
            "spec": {"group": "about.k8s.io", "scope": "Cluster",
                     "names": {"plural": "clusterproperties", "singular": "clusterproperty", "kind": "ClusterProperty"},
                     "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                       "spec": {"type": "object", "properties": {"value": {"type": "string"}}}}}}}]}
        }))
        .unwrap();
    apply(&Api::all(hub.kube.clone()), &crd).await;
    let resource = kube::discovery::ApiResource {
        group: "about.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "about.k8s.io/v1alpha1".into(),
        kind: "ClusterProperty".into(),
        plural: "clusterproperties".into(),
    };
    let properties: Api<kube::api::DynamicObject> = Api::all_with(hub.kube.clone(), &resource);
    let mut property = kube::api::DynamicObject::new("cluster.clusterset.k8s.io", &resource);
    property.data = serde_json::json!({"spec": {"value": "hub-1"}});
    eventually(WITHIN, "the ClusterProperty CRD is served", async || {
        properties
            .patch(
                "cluster.clusterset.k8s.io",
                &kube::api::PatchParams::apply("mcs-tests").force(),
                &kube::api::Patch::Apply(&property),
            )
            .await
            .is_ok()
    })
    .await;

    // The world's own controller (`--cluster-id hub`) may have read the
    // property before it existed, and then lead on: it goes first, so the
    // one started below leads (it exited by itself only when it read the
    // property late enough to find it contradicting its flag).
    for controller in std::mem::take(&mut world.clusters[0].controllers) {
        controller.terminate().await;
    }
    // Without --cluster-id: the property's value is the cluster's id.
    let (bin, kubeconfig, url) = (
        world.bins.controller.clone(),
        world.clusters[0].controller_kubeconfig.clone(),
        world.registry_url(),
    );
    let controller =
        mcs_tests::controller::ControllerProcess::start(&bin, &kubeconfig, None, &url, &[]).await;
    world.clusters[0].controllers.push(controller);
    let client = world.registry_client();
    eventually(WITHIN, "hub-1 registered", async || {
        client
            .clusters()
            .await
            .is_ok_and(|l| l.clusters.iter().any(|c| c.cluster_id.as_str() == "hub-1"))
    })
    .await;

    // A flag naming another cluster: refused, exit 1, saying why.
    let out = tokio::process::Command::new(&bin)
        .args(["--cluster-id", "hub-2", "--registry-url", &url, "--registry-allow-insecure-http"])
        .args(["--admin-listen", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("hub-2") && stderr.contains("hub-1"), "{stderr}");
}

/// Issue 29 item 6: the controller's own token reaches no Lease but its
/// election Lease (before: with it a `kube-system/kube-scheduler` Lease
/// was created, holder "attacker"), and its leader election works under
/// the Lease Role. Item 11: without `--auto-export-selector` a labelled
/// Service is not exported (before: the default selector exported it).
#[tokio::test]
async fn the_controllers_token_reaches_only_its_own_lease_services_and_slices_and_auto_export_is_opt_in()
 {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use kube::api::PostParams;
    use mcs_tests::controller::SYSTEM_NAMESPACE;

    let Some(world) = world(&["east"], &[]).await else { return };
    let east = world.cluster("east");
    eventually(WITHIN, "the controller leads", async || {
        east.controllers[0].metric("mcs_controller_leader", &[]).await == 1.0
    })
    .await;
    let own = Api::<Lease>::namespaced(east.kube.clone(), SYSTEM_NAMESPACE)
        .get("mcs-controller")
        .await
        .unwrap();
    assert!(own.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));

    let token = mcs_testkit::k8s::client_of(&east.controller_kubeconfig).await.unwrap();
    let lease = |name: &str, holder: &str| Lease {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        spec: Some(LeaseSpec { holder_identity: Some(holder.into()), ..LeaseSpec::default() }),
    };
    let refused = |result: kube::Result<Lease>, what: &str| match result {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what}: expected 403, got {other:?}"),
    };
    let params = PostParams::default();
    // No Lease outside its namespace, not even to create one.
    let kube_system = Api::<Lease>::namespaced(token.clone(), "kube-system");
    refused(kube_system.create(&params, &lease("kube-scheduler", "attacker")).await, "create");
    // Nor another Lease: not in kube-system, not in its own namespace.
    for namespace in ["kube-system", SYSTEM_NAMESPACE] {
        let admin = Api::<Lease>::namespaced(east.kube.clone(), namespace);
        admin.create(&params, &lease("someone-else", "real")).await.unwrap();
        let api = Api::<Lease>::namespaced(token.clone(), namespace);
        refused(api.get("someone-else").await, "get");
        refused(
            api.replace("someone-else", &params, &lease("someone-else", "attacker")).await,
            "update",
        );
        let held = admin.get("someone-else").await.unwrap().spec.and_then(|s| s.holder_identity);
        assert_eq!(held.as_deref(), Some("real"));
    }
    // Its own Lease it reads (and renews: it leads).
    Api::<Lease>::namespaced(token.clone(), SYSTEM_NAMESPACE).get("mcs-controller").await.unwrap();

    only_its_own_services_and_slices(east, &token).await;

    // Auto-export is off without a selector, whatever the labels.
    let mut labelled = service(NS, "labelled", &[("http", 80, 80)], false);
    labelled.metadata.labels =
        Some([("multicluster.x-k8s.io/export".into(), "true".into())].into());
    apply(&services(east), &labelled).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(exports(east).get_opt("labelled").await.unwrap().is_none(), "exported by label");
}

/// Issue 23 item 8: RBAC lets the controller write Services and
/// EndpointSlices in every namespace (derived Services, imported slices);
/// the admission policy `mcs-controller rbac` prints narrows that to the
/// objects carrying its managed-by label, before and after the write.
/// Before it, the controller's token deleted a user's Service, rewrote a
/// user's slice and took a Service over by labelling it. The controller's
/// own work is unaffected (`export_import_headless_invalid_unexport_and_rbac`
/// finds no refused request of it in the audit log).
async fn only_its_own_services_and_slices(east: &Cluster, token: &kube::Client) {
    use kube::api::{Patch, PatchParams, PostParams};
    use mcs_controller::import::plan::MANAGED_BY_LABEL;

    let users = service(NS, "users", &[("http", 80, 80)], false);
    apply(&services(east), &users).await;
    apply(&slices(east), &endpoint_slice(NS, "users", "users-1", &["10.9.0.1"], &[("http", 80)]))
        .await;
    let token_services = Api::<Service>::namespaced(token.clone(), NS);
    let token_slices = Api::<EndpointSlice>::namespaced(token.clone(), NS);
    let refused = |result: kube::Result<()>, what: &str| match result {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            assert!(s.message.contains("managed-by"), "{what}: the reason names the label: {s:?}");
        }
        other => panic!("{what}: expected 403, got {other:?}"),
    };
    // The policy takes effect a moment after it is created: a dry run
    // shows when (admission runs on dry runs, nothing is deleted).
    let dry = DeleteParams { dry_run: true, ..DeleteParams::default() };
    eventually(WITHIN, "the admission policy refuses the controller's token", async || {
        matches!(token_services.delete("users", &dry).await, Err(kube::Error::Api(s)) if s.code == 403)
    })
    .await;
    let delete = DeleteParams::default();
    refused(token_services.delete("users", &delete).await.map(drop), "delete a user's Service");
    refused(token_slices.delete("users-1", &delete).await.map(drop), "delete a user's slice");
    let mut taken = users.clone();
    taken.metadata.labels = Some([(MANAGED_BY_LABEL.into(), MANAGED_BY.into())].into());
    let ssa = PatchParams::apply("mcs-controller").force();
    refused(
        token_services.patch("users", &ssa, &Patch::Apply(&taken)).await.map(drop),
        "take a user's Service over by labelling it",
    );
    let mut unlabelled = service(NS, "made-by-token", &[("http", 80, 80)], false);
    refused(
        token_services.create(&PostParams::default(), &unlabelled).await.map(drop),
        "create an unlabelled Service",
    );
    // What carries the label it writes and deletes.
    unlabelled.metadata.labels = taken.metadata.labels.clone();
    token_services.create(&PostParams::default(), &unlabelled).await.unwrap();
    token_services.delete("made-by-token", &delete).await.unwrap();
    assert!(services(east).get_opt("users").await.unwrap().is_some(), "the user's Service");
    assert!(slices(east).get_opt("users-1").await.unwrap().is_some(), "the user's slice");
}

/// Issue 29 item 10: a leader paused (SIGSTOP) past its Lease and resumed
/// after a standby took over writes nothing on waking: it finds the Lease
/// lost and exits 1 (before: it wrote a stale slice 2 ms after logging
/// "leadership lost").
#[tokio::test]
async fn a_leader_paused_past_its_lease_writes_nothing_on_waking() {
    let Some(mut world) = world(&["east"], &["--resync-interval-secs", "1"]).await else {
        return;
    };
    {
        let east = world.cluster("east");
        eventually(WITHIN, "the first replica leads", async || {
            east.controllers[0].metric("mcs_controller_leader", &[]).await == 1.0
        })
        .await;
    }
    // The standby runs as an account of its own: the audit log tells the
    // paused leader's requests from the new leader's.
    world.start_controller_as(0, "mcs-controller-b").await;
    let east = world.cluster("east");
    export_service(east, "web", &[("http", 80, 8080)], &["10.1.0.1"]).await;
    eventually(WITHIN, "imported", async || {
        imported_endpoints(east, "web").await == addresses("east", &["10.1.0.1"])
    })
    .await;

    east.controllers[0].signal("STOP");
    eventually(WITHIN, "the standby takes over", async || {
        east.controllers[1].metric("mcs_controller_leader", &[]).await == 1.0
    })
    .await;
    // A change while the old leader sleeps: the new one imports it; the
    // old one wakes to its watches' news of it.
    apply(
        &slices(east),
        &endpoint_slice(NS, "web", "web-own", &["10.1.0.1", "10.1.0.7"], &[("http", 8080)]),
    )
    .await;
    eventually(WITHIN, "the new leader imports the change", async || {
        imported_endpoints(east, "web").await == addresses("east", &["10.1.0.1", "10.1.0.7"])
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let old = "system:serviceaccount:mcs-system:mcs-controller";
    let before = writes_of(east, old);
    assert!(before > 0, "the old leader wrote while it led");

    east.controllers[0].signal("CONT");
    let code = world.clusters[0].controllers[0].exited().await;
    assert_eq!(code, Some(1), "the deposed leader exits 1");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let east = world.cluster("east");
    let requests = mcs_tests::controller::audited(&east.env, old);
    assert_eq!(
        writes_of(east, old),
        before,
        "the deposed leader wrote after waking; its requests: {:?}",
        &requests[requests.len().saturating_sub(20)..]
    );
}

/// This cluster's exports the registry serves, as `namespace/name` with
/// their endpoint counts.
async fn served_exports(world: &World, cluster: &str) -> Option<BTreeMap<String, usize>> {
    let list = world.registry_client().exports().await.ok()?;
    Some(
        list.exports
            .into_iter()
            .filter(|e| e.cluster_id.as_str() == cluster)
            .map(|e| (format!("{}/{}", e.namespace, e.name), e.spec.endpoints.len()))
            .collect(),
    )
}

/// Sets the exported labels of ServiceExport `name` in `c`.
async fn export_labels(c: &Cluster, name: &str, labels: &[(&str, &str)]) {
    let mut se = export(name);
    se.spec.exported_labels = labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    apply(&exports(c), &se).await;
}

/// The message of condition `kind` of export `name`.
async fn condition_message(c: &Cluster, name: &str, kind: &str) -> String {
    let export = exports(c).get(name).await.unwrap();
    let conditions = export.status.unwrap_or_default().conditions;
    conditions.into_iter().find(|x| x.type_ == kind).map(|c| c.message).unwrap_or_default()
}

/// Issue 29, item 3: a label Kubernetes refuses froze the service in every
/// cluster (its ServiceImport refused, its slices then never updated)
/// while the exporter showed `Ready=True`.
#[tokio::test]
async fn an_invalid_exported_label_is_refused_at_export_and_a_refused_import_freezes_no_slice() {
    let Some(world) = world(&["east", "west"], &["--resync-interval-secs", "300"]).await else {
        return;
    };
    let (east, west) = (world.cluster("east"), world.cluster("west"));

    // A writer that does not check (here a client of the registry as
    // cluster north) exports `tier: front end`: west imports the service
    // anyway, without that label.
    let registry = world.registry_client();
    let north = mcs_api::Label::new("north").unwrap();
    let registration = serde_json::from_value(serde_json::json!({
        "incarnation": "north-1", "lease": {"duration_secs": 600, "heartbeat_interval_secs": 200},
    }))
    .unwrap();
    registry.register_cluster(&north, &registration).await.unwrap();
    let legacy = serde_json::from_value(serde_json::json!({
        "type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
        "exported_at": "2026-12-01T00:00:00Z",
        "endpoints": [{"addresses": ["10.9.0.1"], "ready": true}],
        "labels": {"tier": "front end", "team": "a"},
        // The holder of north's lease, as only it may write north's exports.
        "incarnation": "north-1",
    }))
    .unwrap();
    let key = mcs_api::ExportKey {
        cluster_id: north,
        namespace: mcs_api::Label::new(NS).unwrap(),
        name: mcs_api::Label::new("legacy").unwrap(),
    };
    registry.put_export(&key, &legacy).await.unwrap();
    eventually(WITHIN, "west imports legacy without the refused label", async || {
        imported_endpoints(west, "legacy").await == addresses("north", &["10.9.0.1"])
            && imports(west).get("legacy").await.is_ok_and(|i| {
                let labels = i.metadata.labels.unwrap_or_default();
                labels.get("team").map(String::as_str) == Some("a") && !labels.contains_key("tier")
            })
    })
    .await;

    // East's own ServiceExport with such a label is not valid, names the
    // key, and is not exported.
    export_service(east, "web", &[("http", 80, 8080)], &["10.1.0.1"]).await;
    eventually(WITHIN, "web imported", async || {
        imported_endpoints(west, "web").await == addresses("east", &["10.1.0.1"])
    })
    .await;
    export_labels(east, "web", &[("tier", "front end")]).await;
    wait_condition(east, "web", "Valid", "False", "InvalidExportedLabels").await;
    wait_condition(east, "web", "Ready", "False", "Pending").await;
    let message = condition_message(east, "web", "Valid").await;
    assert!(message.contains("\"tier\""), "{message}");
    eventually(WITHIN, "the invalid export is withdrawn", async || {
        imports(west).get_opt("web").await.unwrap().is_none()
    })
    .await;

    // A ServiceImport the API server refuses (here by an admission policy
    // against label `team`) keeps none of its slices from following the
    // endpoints.
    let policy = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-team-label"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["multicluster.x-k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["serviceimports"],
            }]},
            "validations": [{
                "expression": "!has(object.metadata.labels) || !('team' in object.metadata.labels)",
                "message": "no team label in this cluster",
            }],
        },
    }))
    .unwrap();
    let binding = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-team-label"},
        "spec": {"policyName": "no-team-label", "validationActions": ["Deny"]},
    }))
    .unwrap();
    use k8s_openapi::api::admissionregistration::v1 as admission;
    apply::<admission::ValidatingAdmissionPolicy>(&Api::all(west.kube.clone()), &policy).await;
    apply::<admission::ValidatingAdmissionPolicyBinding>(&Api::all(west.kube.clone()), &binding)
        .await;
    export_service(east, "api", &[("http", 80, 8080)], &["10.1.0.5"]).await;
    eventually(WITHIN, "api imported", async || {
        imported_endpoints(west, "api").await == addresses("east", &["10.1.0.5"])
    })
    .await;
    eventually(WITHIN, "the policy refuses a team label", async || {
        let mut si = imports(west).get("api").await.unwrap();
        si.metadata.labels.get_or_insert_default().insert("team".into(), "x".into());
        let params = kube::api::PostParams { dry_run: true, ..Default::default() };
        imports(west).replace("api", &params, &si).await.is_err()
    })
    .await;
    let errors_before = west.controllers[0]
        .metric(
            "mcs_controller_reconciles_total",
            &[("controller", "import"), ("outcome", "error")],
        )
        .await;
    export_labels(east, "api", &[("team", "x")]).await;
    apply(&slices(east), &endpoint_slice(NS, "api", "api-own", &["10.1.0.6"], &[("http", 8080)]))
        .await;
    eventually(WITHIN, "west's slices follow though its ServiceImport is refused", async || {
        imported_endpoints(west, "api").await == addresses("east", &["10.1.0.6"])
    })
    .await;
    assert!(
        !label(&imports(west).get("api").await.unwrap().metadata, "team").contains('x'),
        "the policy let the label through"
    );
    eventually(WITHIN, "the refusal is counted as a failed import reconcile", async || {
        west.controllers[0]
            .metric(
                "mcs_controller_reconciles_total",
                &[("controller", "import"), ("outcome", "error")],
            )
            .await
            > errors_before
    })
    .await;
    // And logged (issue 27, item 2): the object and the API server's cause.
    let warned = logged(west, "WARN", "import reconcile failed");
    assert!(
        warned.iter().any(|l| l.contains("\"name\":\"api\"")
            && l.contains(&format!("\"namespace\":\"{NS}\""))
            && l.contains("no team label in this cluster")),
        "{warned:?}"
    );
}

/// Issue 29, item 8: a slice moved to another service left its endpoints
/// in the old one's export until the next full reconcile, and the
/// exporter counted the slices this controller imported.
#[tokio::test]
async fn a_relabelled_slice_leaves_its_old_service_at_once_and_imported_slices_are_not_exported() {
    let Some(world) = world(&["east", "west"], &["--resync-interval-secs", "300"]).await else {
        return;
    };
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    export_service(east, "a", &[("http", 80, 8080)], &["10.1.0.1"]).await;
    export_service(east, "b", &[("http", 80, 8080)], &["10.1.0.2"]).await;
    eventually(WITHIN, "a and b imported", async || {
        imported_endpoints(west, "a").await == addresses("east", &["10.1.0.1"])
            && imported_endpoints(west, "b").await == addresses("east", &["10.1.0.2"])
    })
    .await;
    // Slice a-own now belongs to b.
    apply(&slices(east), &endpoint_slice(NS, "b", "a-own", &["10.1.0.1"], &[("http", 8080)])).await;
    eventually(WITHIN, "the endpoint moved from a to b", async || {
        imported_endpoints(west, "a").await.is_empty()
            && imported_endpoints(west, "b").await == addresses("east", &["10.1.0.1", "10.1.0.2"])
    })
    .await;

    // East imports b too, into a derived Service with slices of ours;
    // exporting that Service exports none of them.
    let derived = mcs_controller::import::plan::derived_name(NS, "b");
    eventually(WITHIN, "east imported b", async || imported_endpoints(east, "b").await.len() == 2)
        .await;
    apply(&exports(east), &export(&derived)).await;
    wait_condition(east, &derived, "Ready", "True", "Exported").await;
    let served = served_exports(&world, "east").await.unwrap();
    assert_eq!(served.get(&format!("{NS}/{derived}")), Some(&0), "{served:?}");
}

/// Issue 29, item 5: the finalizer held a namespace hostage while the
/// registry could not be reached.
#[tokio::test]
async fn a_namespace_goes_while_the_registry_is_down_and_its_export_is_withdrawn_later() {
    use k8s_openapi::api::core::v1::Namespace;
    let Some(mut world) = world(&["east", "west"], &["--resync-interval-secs", "3"]).await else {
        return;
    };
    const DOOMED: &str = "doomed";
    {
        let (east, west) = (world.cluster("east"), world.cluster("west"));
        for c in [east, west] {
            ensure_namespace(&c.kube, DOOMED).await;
        }
        // A service that stays, to tell when east is registered again.
        export_service(east, "keep", &[("http", 80, 8080)], &["10.1.0.1"]).await;
        apply(
            &Api::<Service>::namespaced(east.kube.clone(), DOOMED),
            &service(DOOMED, "web", &[("http", 80, 8080)], false),
        )
        .await;
        let slice = endpoint_slice(DOOMED, "web", "web-own", &["10.1.0.9"], &[("http", 8080)]);
        apply(&Api::namespaced(east.kube.clone(), DOOMED), &slice).await;
        let mut se = export("web");
        se.metadata.namespace = Some(DOOMED.into());
        apply(&Api::namespaced(east.kube.clone(), DOOMED), &se).await;
        let west_imports = Api::<ServiceImport>::namespaced(west.kube.clone(), DOOMED);
        eventually(WITHIN, "doomed/web imported in west", async || {
            west_imports.get_opt("web").await.unwrap().is_some()
        })
        .await;
    }
    world.stop_registry().await;
    let east = world.cluster("east");
    // A change while the registry is away: its send is still waiting on the
    // registry when the ServiceExport is deleted (a send once held the
    // deletion for the client's whole 30 s of retries).
    let slice =
        endpoint_slice(DOOMED, "web", "web-own", &["10.1.0.9", "10.1.0.10"], &[("http", 8080)]);
    apply(&Api::namespaced(east.kube.clone(), DOOMED), &slice).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The ServiceExport first (no finalizer of ours holds it; an earlier
    // controller's did, and the namespace waited on it), then its
    // namespace (kube-controller-manager's own pace).
    let doomed_exports = Api::<ServiceExport>::namespaced(east.kube.clone(), DOOMED);
    doomed_exports.delete("web", &DeleteParams::default()).await.unwrap();
    eventually(
        Duration::from_secs(15),
        "the ServiceExport goes with the registry down",
        async || doomed_exports.get_opt("web").await.unwrap().is_none(),
    )
    .await;
    let namespaces = Api::<Namespace>::all(east.kube.clone());
    namespaces.delete(DOOMED, &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "the namespace goes with the registry down", async || {
        namespaces.get_opt(DOOMED).await.unwrap().is_none()
    })
    .await;

    world.start_registry().await;
    let west_imports = Api::<ServiceImport>::namespaced(world.cluster("west").kube.clone(), DOOMED);
    eventually(Duration::from_secs(60), "east serves keep again, and no doomed/web", async || {
        served_exports(&world, "east").await.is_some_and(|s| {
            s.contains_key(&format!("{NS}/keep")) && !s.contains_key(&format!("{DOOMED}/web"))
        }) && west_imports.get_opt("web").await.unwrap().is_none()
    })
    .await;
    // And it stays withdrawn over two resyncs.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let served = served_exports(&world, "east").await.unwrap();
    assert!(!served.contains_key(&format!("{DOOMED}/web")), "{served:?}");
    assert!(west_imports.get_opt("web").await.unwrap().is_none());
    // Issue 27 item 8: the importer's writes refused in the namespace being
    // deleted are no warnings. (A guard only: this run showed none on main
    // either; the recognition's test is in import/apply.rs.)
    let east = world.cluster("east");
    let noise = logged(east, "WARN", "being terminated");
    assert!(noise.is_empty(), "{} warnings, e.g. {:?}", noise.len(), noise.first());
}

/// Issue 29, item 4: past the registry's body limit (about 3,500
/// endpoints) the previous export stayed, and importing clusters served
/// its endpoints as current while the exporter could not replace them.
/// Past about 7,000 endpoints, the stored item's limit refused the export
/// (`Ready=False`, "over the storage limit") until large payloads were
/// stored compressed: 8,000 now import whole. An export the registry
/// refuses (here: a registry restarted with a lower body limit) shows
/// `Ready=False` and is withdrawn rather than served stale.
#[tokio::test]
async fn a_large_export_imports_whole_and_one_the_registry_refuses_fails_and_is_withdrawn() {
    let flags = ["--resync-interval-secs", "300", "--max-endpoints-per-slice", "1000"];
    let Some(mut world) = world(&["east", "west"], &flags).await else { return };
    let all: Vec<String> = (0..9000).map(|i| format!("10.4.{}.{}", i / 250, i % 250 + 1)).collect();
    let add_slices = async |world: &World, range: std::ops::Range<usize>| {
        for n in range {
            let refs: Vec<&str> =
                all[n * 1000..(n + 1) * 1000].iter().map(String::as_str).collect();
            let slice = endpoint_slice(NS, "huge", &format!("huge-{n}"), &refs, &[("http", 8080)]);
            apply(&slices(world.cluster("east")), &slice).await;
        }
    };
    // 4,000 endpoints: past the old limit of 256 KiB a request (about
    // 3,500).
    let east = world.cluster("east");
    apply(&services(east), &service(NS, "huge", &[("http", 80, 8080)], false)).await;
    add_slices(&world, 0..4).await;
    apply(&exports(east), &export("huge")).await;
    let imported = async |world: &World, n: usize| {
        imported_endpoints(world.cluster("west"), "huge").await.len() == n
    };
    eventually(Duration::from_secs(240), "4,000 endpoints imported", async || {
        imported(&world, 4000).await
    })
    .await;
    wait_condition(east, "huge", "Ready", "True", "Exported").await;

    // 8,000: past what one plain stored item holds (about 7,000).
    add_slices(&world, 4..8).await;
    eventually(Duration::from_secs(240), "8,000 endpoints imported", async || {
        imported(&world, 8000).await
    })
    .await;
    wait_condition(world.cluster("east"), "huge", "Ready", "True", "Exported").await;

    // A registry that refuses the export (its body limit lowered below
    // 9,000 endpoints): Ready=False names the limit, and the previous
    // export is withdrawn rather than served as current.
    world.restart_registry_with(&["--max-export-body-bytes", "400000"]).await;
    add_slices(&world, 8..9).await;
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    eventually(Duration::from_secs(120), "Ready=False naming the body limit", async || {
        condition(east, "huge", "Ready").await == Some(("False".into(), "Failed".into()))
            && condition_message(east, "huge", "Ready").await.contains("413")
    })
    .await;
    eventually(Duration::from_secs(60), "the stale endpoints are no longer imported", async || {
        imports(west).get_opt("huge").await.unwrap().is_none()
            && imported_endpoints(west, "huge").await.is_empty()
    })
    .await;
    // Back under the limit, it is exported again.
    for n in 4..9 {
        slices(east).delete(&format!("huge-{n}"), &DeleteParams::default()).await.unwrap();
    }
    eventually(
        Duration::from_secs(240),
        "4,000 endpoints exported and imported again",
        async || {
            condition(east, "huge", "Ready").await == Some(("True".into(), "Exported".into()))
                && imported(&world, 4000).await
        },
    )
    .await;
}

/// Creates a ServiceExport as most manifests write it: no `spec` at all
/// (our type always writes `spec: {}`); the object as stored.
async fn export_without_spec(c: &Cluster, name: &str) -> kube::api::DynamicObject {
    use kube::api::{ApiResource, DynamicObject, PostParams};
    let resource = ApiResource::erase::<ServiceExport>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(c.kube.clone(), NS, &resource);
    let object = DynamicObject::new(name, &resource).within(NS).data(json!({}));
    api.create(&PostParams::default(), &object).await.unwrap()
}

/// Log lines of `c`'s controllers (all replicas so far) at `level` that contain `text`.
fn logged(c: &Cluster, level: &str, text: &str) -> Vec<String> {
    let level = format!("\"level\":\"{level}\"");
    c.controllers
        .iter()
        .flat_map(|p| p.log())
        .filter(|l| l.contains(&level) && l.contains(text))
        .collect()
}

/// Issue 27 item 6: with the mcs-api's own CRDs a ServiceExport may have
/// no `spec`. Before: such an object was skipped while the controller ran
/// (a DEBUG line naming nothing), and after a restart the whole LIST
/// failed to decode (`missing field spec`, retried forever): no export of
/// the cluster was processed, while `/readyz` said ok.
#[tokio::test]
async fn with_the_mcs_api_crds_an_export_without_spec_is_exported_before_and_after_a_restart() {
    use mcs_tests::controller::Crds;
    let bins = mcs_tests::controller_binaries!();
    let Some(mut world) = World::start_with(bins, &["upstream"], &[], Crds::Upstream).await else {
        return;
    };
    ensure_namespace(&world.clusters[0].kube, NS).await;
    let imported = async |c: &Cluster, name: &str, address: &str| {
        let what = format!("{name} imported");
        eventually(WITHIN, &what, async || {
            imported_endpoints(c, name).await == addresses("upstream", &[address])
        })
        .await;
    };
    {
        let c = world.cluster("upstream");
        for (name, address) in [("bare", "10.1.0.1"), ("full", "10.1.0.2")] {
            apply(&services(c), &service(NS, name, &[("http", 80, 8080)], false)).await;
            let slice =
                endpoint_slice(NS, name, &format!("{name}-own"), &[address], &[("http", 8080)]);
            apply(&slices(c), &slice).await;
        }
        let stored = export_without_spec(c, "bare").await;
        assert!(
            stored.data.get("spec").is_none(),
            "the mcs-api's CRD defaults no spec: {stored:?}"
        );
        apply(&exports(c), &export("full")).await;
        imported(c, "bare", "10.1.0.1").await;
        imported(c, "full", "10.1.0.2").await;
        wait_condition(c, "bare", "Ready", "True", "Exported").await;
    }
    // A new controller lists them all (the list holds objects without spec).
    let old = world.clusters[0].controllers.remove(0);
    old.kill().await;
    world.start_controller(0).await;
    let c = world.cluster("upstream");
    apply(&services(c), &service(NS, "late", &[("http", 80, 8080)], false)).await;
    let slice = endpoint_slice(NS, "late", "late-own", &["10.1.0.3"], &[("http", 8080)]);
    apply(&slices(c), &slice).await;
    export_without_spec(c, "late").await;
    imported(c, "late", "10.1.0.3").await;
    // Changes to the earlier ones are processed too.
    let slice = endpoint_slice(NS, "bare", "bare-own", &["10.1.0.9"], &[("http", 8080)]);
    apply(&slices(c), &slice).await;
    imported(c, "bare", "10.1.0.9").await;
    let slice = endpoint_slice(NS, "full", "full-own", &["10.1.0.8"], &[("http", 8080)]);
    apply(&slices(c), &slice).await;
    imported(c, "full", "10.1.0.8").await;
    wait_condition(c, "late", "Ready", "True", "Exported").await;
    let controller = &c.controllers[0];
    let ready = reqwest::get(format!("{}/readyz", controller.metrics_url)).await.unwrap();
    assert_eq!(ready.status(), 200, "{:?}", ready.text().await);
    assert!(logged(c, "WARN", "does not decode").is_empty(), "{:?}", logged(c, "WARN", "decode"));
    // Issue 27 item 7, in the state the issue found: there SIGTERM logged
    // "shutting down" and the process ran on (on main: still running 12 s
    // after SIGTERM, renewing its Lease).
    let mut controller = world.clusters[0].controllers.remove(0);
    controller.signal("TERM");
    let sent = Instant::now();
    assert_eq!(controller.exited().await, Some(0));
    assert!(sent.elapsed() < Duration::from_secs(10), "exited {:?} after SIGTERM", sent.elapsed());
}

/// Issue 27 items 6 and 7. A ServiceExport that does not decode (written
/// under a CRD that lets anything through) is logged with its name and
/// counted, and the others are exported; a watch that cannot list makes
/// the controller unready; and SIGTERM stops it within 10 s even while its
/// export watch fails, releasing the leader Lease so a standby takes over
/// at once. Before: the export controller waited forever for a store that
/// never filled, so the process ran on after SIGTERM, renewing its Lease.
#[tokio::test]
async fn an_undecodable_export_is_skipped_and_sigterm_stops_within_10_s_while_the_watch_fails() {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, PostParams};
    const CRD: &str = "serviceexports.multicluster.x-k8s.io";
    let Some(mut world) = world(&["east"], &[]).await else { return };
    let crds = Api::<CustomResourceDefinition>::all(world.clusters[0].kube.clone());
    {
        let c = world.cluster("east");
        // A ServiceExport CRD whose spec takes anything (as some hand-made ones do).
        let mut crd = crds.get(CRD).await.unwrap();
        for version in &mut crd.spec.versions {
            let schema = version.schema.as_mut().unwrap().open_api_v3_schema.as_mut().unwrap();
            schema.properties.as_mut().unwrap().insert(
                "spec".into(),
                serde_json::from_value(
                    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                )
                .unwrap(),
            );
        }
        crd.metadata.managed_fields = None;
        crds.replace(CRD, &PostParams::default(), &crd).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let resource = ApiResource::erase::<ServiceExport>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(c.kube.clone(), NS, &resource);
        let bad = DynamicObject::new("bad", &resource)
            .within(NS)
            .data(json!({"spec": {"exportedLabels": "team=a"}}));
        api.create(&PostParams::default(), &bad).await.unwrap();
        export_service(c, "good", &[("http", 80, 8080)], &["10.1.0.1"]).await;
    }
    // A new controller lists the bad one with the others.
    let old = world.clusters[0].controllers.remove(0);
    old.kill().await;
    world.start_controller(0).await;
    let c = world.cluster("east");
    apply(&slices(c), &endpoint_slice(NS, "good", "good-own", &["10.1.0.2"], &[("http", 8080)]))
        .await;
    eventually(WITHIN, "good exported while bad does not decode", async || {
        imported_endpoints(c, "good").await == addresses("east", &["10.1.0.2"])
    })
    .await;
    let warned = logged(c, "WARN", "object does not decode");
    assert!(
        warned
            .iter()
            .any(|l| l.contains("\"name\":\"bad\"") && l.contains("\"namespace\":\"demo\"")),
        "{warned:?}"
    );
    assert!(warned.iter().all(|l| l.contains("invalid type")), "the reason: {warned:?}");
    let controller = &c.controllers[0];
    let skipped =
        controller.metric("mcs_controller_undecodable_objects_total", &[("kind", "ServiceExport")]);
    assert!(skipped.await >= 1.0);
    let readyz = async |p: &mcs_tests::controller::ControllerProcess| {
        let r = reqwest::get(format!("{}/readyz", p.metrics_url)).await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    assert_eq!(readyz(controller).await.0, 200);

    // The ServiceExport kind goes: the watch cannot list, the pod is unready.
    crds.delete(CRD, &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(60), "the CRD is gone", async || {
        crds.get_opt(CRD).await.unwrap().is_none()
    })
    .await;
    eventually(WITHIN, "unready, naming the watch", async || {
        let (code, body) = readyz(&world.cluster("east").controllers[0]).await;
        code == 503 && body.contains("the ServiceExport watch cannot list")
    })
    .await;
    // What is missing and what to do, once (before: `ApiError: 404 page not
    // found: Failed to parse error data (Status { … })`).
    let failing = logged(world.cluster("east"), "WARN", "watch failing");
    assert!(
        failing.iter().any(|l| l.contains("serviceexports.multicluster.x-k8s.io")
            && l.contains("install the CRDs")),
        "{failing:?}"
    );
    // A controller that never listed them, and a standby.
    let old = world.clusters[0].controllers.remove(0);
    old.kill().await;
    world.start_controller(0).await;
    let leases = Api::<Lease>::namespaced(
        world.clusters[0].kube.clone(),
        mcs_tests::controller::SYSTEM_NAMESPACE,
    );
    let holder = async || {
        let lease = leases.get("mcs-controller").await.unwrap();
        lease.spec.and_then(|s| s.holder_identity).unwrap_or_default()
    };
    eventually(WITHIN, "the new controller leads, unready", async || {
        let p = &world.cluster("east").controllers[0];
        p.metric("mcs_controller_leader", &[]).await == 1.0 && readyz(p).await.0 == 503
    })
    .await;
    let leader = holder().await;
    world.start_controller(0).await;
    let mut first = world.clusters[0].controllers.remove(0);
    first.signal("TERM");
    let sent = Instant::now();
    let code = first.exited().await;
    let took = sent.elapsed();
    eprintln!("exited {took:?} after SIGTERM");
    assert!(took < Duration::from_secs(10), "exited {took:?} after SIGTERM");
    assert_eq!(code, Some(0), "a graceful stop");
    // Every task stopped of its own accord (before: the export controller
    // waited for a store that never listed, aborted after 5 s).
    let stuck: Vec<String> =
        first.log().into_iter().filter(|l| l.contains("did not stop in time")).collect();
    assert!(stuck.is_empty(), "{stuck:?}");
    let now = holder().await;
    assert_ne!(now, leader, "the Lease is released on the way out");
    // The standby takes over without waiting for the Lease (4 s) to run out.
    eventually(Duration::from_secs(3), "the standby leads", async || {
        world.cluster("east").controllers[0].metric("mcs_controller_leader", &[]).await == 1.0
    })
    .await;
}

/// Issue 29 item 7 (and issue 27 item 9): each change of the registry's
/// view made every export reconcile again, some on a store that had not
/// yet seen their own last write, so a status (or the finalizer) was
/// written again: about 2.5 status writes and 1.35 finalizer patches per
/// export. Then 7 requests per export, flat (a finalizer patch, and the
/// ServiceImport written twice: created first, its `spec.ips` once the
/// derived Service it owned had its cluster IP). Now 5, the issue's
/// budget: no finalizer; the derived Service first, then the ServiceImport
/// once, with its IPs (design §13).
#[tokio::test]
async fn exporting_and_importing_a_service_costs_five_writes_and_no_finalizer() {
    let Some(world) = world(&["east"], &[]).await else {
        return;
    };
    let east = world.cluster("east");
    const N: usize = 30;
    let names: Vec<String> = (0..N).map(|i| format!("once-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        apply(&services(east), &service(NS, name, &[("http", 80, 8080)], false)).await;
        let address = format!("10.7.0.{}", i + 1);
        let slice =
            endpoint_slice(NS, name, &format!("{name}-own"), &[&address], &[("http", 8080)]);
        apply(&slices(east), &slice).await;
    }
    // The Services are in the controller's caches before their exports
    // come (else `Valid=False NoService` first, a real change).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = audited(east).len();
    let controller = &east.controllers[0];
    let import_reconciles = async || {
        controller.metric("mcs_controller_reconciles_total", &[("controller", "import")]).await
    };
    let resyncs = || controller.log().iter().filter(|l| l.contains("periodic resync")).count();
    let (reconciles_before, resyncs_before) = (import_reconciles().await, resyncs());
    // Two waves: the second comes to the importer as the registry's
    // changes after a list it holds, and must cost its own services'
    // reconciles only (a defect once made every change reconcile every
    // service listed, issue 27 item 9).
    let (first, second) = names.split_at(N / 2);
    for name in first {
        apply(&exports(east), &export(name)).await;
    }
    let all_imported = async |names: &[String]| {
        eventually(WITHIN, "every export ready and imported (IPs, status, slice)", async || {
            export_progress(east, NS, |n| names.iter().any(|x| x == n)).await.done() == names.len()
        })
        .await;
    };
    all_imported(first).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (wave_before, wave_resyncs) = (import_reconciles().await, resyncs());
    for name in second {
        apply(&exports(east), &export(name)).await;
    }
    all_imported(&names).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let wave = import_reconciles().await - wave_before;
    let m = second.len() as f64;
    let wave_resynced = (resyncs() - wave_resyncs) as f64;
    assert!(
        wave <= m + N as f64 * wave_resynced + m / 2.0,
        "{wave} import reconciles for the second wave's {m} services \
         ({wave_resynced} periodic resyncs): the first wave's were reconciled again"
    );
    // Time for the registry's view of every export to come back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut writes = BTreeMap::new();
    for (verb, _, resource, code) in audited(east).into_iter().skip(before) {
        if !matches!(verb.as_str(), "get" | "list" | "watch") && resource != "leases" {
            *writes.entry((verb, resource, code)).or_insert(0usize) += 1;
        }
    }
    let count = |resource: &str| {
        writes.iter().filter(|((_, r, _), _)| r == resource).map(|(_, n)| *n).sum::<usize>()
    };
    assert_eq!(count("serviceexports"), 0, "no finalizer: {writes:?}");
    for resource in ["serviceexports/status", "services", "serviceimports", "serviceimports/status"]
    {
        assert_eq!(count(resource), N, "{resource}: {writes:?}");
    }
    assert_eq!(count("endpointslices"), N, "{writes:?}");
    assert_eq!(writes.values().sum::<usize>(), 5 * N, "five writes per service: {writes:?}");
    // One import reconcile per service (its import arriving), besides a
    // periodic resync's one each: the watch events of the importer's own
    // four writes are echoes, not changes (before: a second reconcile of
    // every service, which found nothing to write).
    let reconciles = import_reconciles().await - reconciles_before;
    let resynced = (resyncs() - resyncs_before) as f64;
    let n = N as f64;
    assert!(
        reconciles <= n * (1.0 + resynced) + n / 2.0,
        "{reconciles} import reconciles for {N} services ({resynced} periodic resyncs)"
    );
    let list = exports(east).list(&ListParams::default()).await.unwrap();
    assert!(list.items.iter().all(|e| e.metadata.finalizers.is_none()), "{:?}", list.items);
}
