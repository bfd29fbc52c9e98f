//! ClusterSet DNS (issue 25): CoreDNS's `kubernetes` plugin with its
//! `multicluster` option, built by `scripts/k8s-env` and run outside the
//! clusters against their API servers, answers `clusterset.local` names
//! from the ServiceImports and EndpointSlices our controllers write.
//!
//! ```text
//!  east: Service + slices + ServiceExport ─► controller ─► registry
//!  west: controller ─► ServiceImport, derived Service, slices ─► CoreDNS ◄─ DNS query (this test)
//! ```
//!
//! Asked as a pod would ask, over UDP: A, AAAA and SRV of a ClusterSetIP
//! import (dual stack), of a headless one exported from two clusters (named
//! endpoints, endpoints known by their address only, IPv6, one not ready),
//! names that must not exist, and the name's end after the unexport. CoreDNS
//! runs under a ServiceAccount allowed only to read; the audit log shows it
//! read ServiceImports at `v1alpha1`, the version it knows.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams};
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_testkit::eventually;
use mcs_testkit::k8s::ensure_namespace;
use mcs_tests::controller::{Cluster, World, apply};
use mcs_tests::dns::{Answer, CoreDns, MULTICLUSTER_BLOCK, USERNAME, coredns_rbac};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const NS: &str = "demo";
const ZONE: &str = "svc.clusterset.local.";
/// Export to resolvable, and unexport to NXDOMAIN, as docs/deployment.md
/// states them ("ClusterSet DNS"): the controllers' import plus CoreDNS's
/// watch, with a generous margin for a loaded CI machine.
const WITHIN: Duration = Duration::from_secs(30);

/// A Service with TCP ports `(name, port, target)`; dual stack where the
/// cluster has both families, or headless.
fn service(name: &str, ports: &[(&str, u16, u16)], headless: bool) -> Service {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, t)| json!({"name": n, "port": p, "targetPort": t, "protocol": "TCP"}))
        .collect();
    let mut spec =
        json!({"ports": ports, "selector": {"app": name}, "ipFamilyPolicy": "PreferDualStack"});
    if headless {
        spec["clusterIP"] = json!("None");
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .unwrap()
}

/// One endpoint of a slice: its address, hostname and readiness.
struct Endpoint(&'static str, Option<&'static str>, bool);

/// An EndpointSlice of `service` as the endpointslice controller writes
/// one: one address family, TCP ports `(name, port)`.
fn slice(
    service: &str,
    name: &str,
    family: &str,
    endpoints: &[Endpoint],
    ports: &[(&str, u16)],
) -> EndpointSlice {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|Endpoint(address, hostname, ready)| {
            let mut e = json!({"addresses": [address], "conditions": {"ready": ready}});
            if let Some(hostname) = hostname {
                e["hostname"] = json!(hostname);
            }
            e
        })
        .collect();
    let ports: Vec<Value> =
        ports.iter().map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP"})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "mcs-tests",
        }},
        "addressType": family,
        "endpoints": endpoints,
        "ports": ports,
    }))
    .unwrap()
}

fn export(name: &str) -> ServiceExport {
    mcs_tests::controller::service_export(NS, name)
}

async fn exports(c: &Cluster) -> Api<ServiceExport> {
    Api::namespaced(c.kube.clone(), NS)
}

/// `name` in the clusterset zone.
fn fqdn(name: &str) -> String {
    format!("{name}.{NS}.{ZONE}")
}

#[tokio::test]
async fn clusterset_names_resolve_through_coredns() {
    let Some(world) = World::start(mcs_tests::controller_binaries!(), &["east", "west"], &[]).await
    else {
        return;
    };
    for c in &world.clusters {
        ensure_namespace(&c.kube, NS).await;
    }
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    for c in [east, west] {
        coredns_rbac(&c.kube, false).await;
        coredns_rbac(&c.kube, true).await;
    }
    let dns = CoreDns::start(&west.env, MULTICLUSTER_BLOCK).await;
    let east_dns = CoreDns::start(&east.env, MULTICLUSTER_BLOCK).await;

    // Nothing exported yet: the name does not exist.
    assert!(dns.ask(&fqdn("web"), RecordType::A).await.nxdomain());

    // ClusterSetIP, dual stack: A and AAAA are the import's clusterset IPs,
    // SRV the import's port with the service's own name as target.
    apply(&Api::namespaced(east.kube.clone(), NS), &service("web", &[("http", 80, 8080)], false))
        .await;
    let web_slice =
        slice("web", "web-own", "IPv4", &[Endpoint("10.1.0.1", None, true)], &[("http", 8080)]);
    apply(&Api::namespaced(east.kube.clone(), NS), &web_slice).await;
    let exported = Instant::now();
    apply(&exports(east).await, &export("web")).await;
    let imports: Api<ServiceImport> = Api::namespaced(west.kube.clone(), NS);
    let ips_of = async || -> Vec<String> {
        match imports.get_opt("web").await {
            Ok(Some(import)) => import.spec.ips,
            _ => Vec::new(),
        }
    };
    eventually(WITHIN, "west's ServiceImport web to carry both families' IPs", async || {
        ips_of().await.len() == 2
    })
    .await;
    let ips = ips_of().await;
    let v4: Vec<&str> = ips.iter().map(String::as_str).filter(|ip| !ip.contains(':')).collect();
    let v6: Vec<&str> = ips.iter().map(String::as_str).filter(|ip| ip.contains(':')).collect();
    assert_eq!((v4.len(), v6.len()), (1, 1), "one IP per family: {ips:?}");
    dns.until(&fqdn("web"), RecordType::A, WITHIN, "the IPv4 clusterset IP", |a| a.has(&v4)).await;
    let resolvable = exported.elapsed();
    dns.until(&fqdn("web"), RecordType::AAAA, WITHIN, "the IPv6 clusterset IP", |a| a.has(&v6))
        .await;
    let srv = dns.ask(&format!("_http._tcp.{}", fqdn("web")), RecordType::SRV).await;
    assert_eq!(srv.code, ResponseCode::NoError, "{srv:?}");
    assert_eq!(
        srv.srv,
        BTreeSet::from([(80, fqdn("web"))]),
        "the import's port, not the target port"
    );
    assert!(
        srv.glue.contains(&(fqdn("web"), v4[0].to_owned())),
        "the target's address in the additional section: {srv:?}"
    );
    // The exporting cluster imports its own export too.
    east_dns
        .until(&fqdn("web"), RecordType::A, WITHIN, "an IPv4 clusterset IP", |a| {
            a.code == ResponseCode::NoError && a.addresses.len() == 1
        })
        .await;

    // Headless, exported from both clusters: every ready endpoint of both,
    // per family; endpoints by `<hostname>.<cluster>` or, without a
    // hostname, by their dashed address; SRV the endpoints' own port.
    let db_ports = [("pg", 5432, 15432)];
    for (c, v4_slice, v6_slice) in [
        (
            east,
            vec![
                Endpoint("10.2.0.1", Some("db-0"), true),
                Endpoint("10.2.0.2", None, true),
                Endpoint("10.2.0.3", Some("db-9"), false),
            ],
            vec![Endpoint("fd00:2::1", Some("db-0"), true)],
        ),
        (west, vec![Endpoint("10.3.0.1", Some("db-1"), true)], vec![]),
    ] {
        apply(&Api::namespaced(c.kube.clone(), NS), &service("db", &db_ports, true)).await;
        let slices: Api<EndpointSlice> = Api::namespaced(c.kube.clone(), NS);
        apply(&slices, &slice("db", "db-v4", "IPv4", &v4_slice, &[("pg", 15432)])).await;
        if !v6_slice.is_empty() {
            apply(&slices, &slice("db", "db-v6", "IPv6", &v6_slice, &[("pg", 15432)])).await;
        }
        apply(&exports(c).await, &export("db")).await;
    }
    let every_v4 = ["10.2.0.1", "10.2.0.2", "10.3.0.1"];
    for resolver in [&dns, &east_dns] {
        resolver
            .until(&fqdn("db"), RecordType::A, WITHIN, "both clusters' ready endpoints", |a| {
                a.has(&every_v4)
            })
            .await;
        resolver
            .until(&fqdn("db"), RecordType::AAAA, WITHIN, "east's IPv6 endpoint", |a| {
                a.has(&["fd00:2::1"])
            })
            .await;
    }
    for (name, kind, expected) in [
        ("db-0.east.db", RecordType::A, "10.2.0.1"),
        ("db-0.east.db", RecordType::AAAA, "fd00:2::1"),
        ("db-1.west.db", RecordType::A, "10.3.0.1"),
        ("10-2-0-2.east.db", RecordType::A, "10.2.0.2"),
    ] {
        let answer = dns.ask(&fqdn(name), kind).await;
        assert!(answer.has(&[expected]), "{name} {kind}: {answer:?}");
    }
    for name in [
        "db-0.west.db", // the cluster is part of the name
        "db-0.db",      // and cannot be left out
        "db-9.east.db", // not ready: not served
        "nope",
    ] {
        let answer = dns.ask(&fqdn(name), RecordType::A).await;
        assert!(answer.nxdomain(), "{name}: {answer:?}");
    }
    let srv = dns.ask(&format!("_pg._tcp.{}", fqdn("db")), RecordType::SRV).await;
    let targets: BTreeSet<(u16, String)> = ["db-0.east.db", "10-2-0-2.east.db", "db-1.west.db"]
        .iter()
        .map(|n| (15432, fqdn(n)))
        .collect();
    assert_eq!(srv.srv, targets, "headless SRV: each endpoint, at its own port: {srv:?}");
    let missing_namespace = dns.ask("web.elsewhere.svc.clusterset.local.", RecordType::A).await;
    assert!(missing_namespace.nxdomain(), "{missing_namespace:?}");

    // Unexported: the name ends. (web is one of the two services each
    // cluster imports, so its going is half of them: a wave the importer
    // holds for one window, the tests' lease of 6 s, before it removes.)
    exports(east).await.delete("web", &DeleteParams::default()).await.unwrap();
    let unexported = Instant::now();
    dns.until(&fqdn("web"), RecordType::A, WITHIN, "NXDOMAIN", Answer::nxdomain).await;
    let gone = unexported.elapsed();
    println!(
        "dns: web resolvable {:.1} s after its export; NXDOMAIN {:.1} s after the unexport",
        resolvable.as_secs_f64(),
        gone.as_secs_f64()
    );

    // CoreDNS read the ServiceImports at v1alpha1, and only read.
    for c in [east, west] {
        let events = std::fs::read_to_string(c.env.audit_log()).unwrap_or_default();
        let mine: Vec<Value> = events
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["user"]["username"] == USERNAME)
            .collect();
        let imports_read: Vec<&Value> =
            mine.iter().filter(|e| e["objectRef"]["resource"] == "serviceimports").collect();
        assert!(!imports_read.is_empty(), "{}: CoreDNS never asked for ServiceImports", c.name);
        // Allowed, never refused. An API server that has just started
        // answers 429 "storage is (re)initializing" to the first watches
        // (CoreDNS retries it): that is not a refusal, but one read must
        // have succeeded.
        let code = |e: &Value| e["responseStatus"]["code"].as_u64();
        for e in &imports_read {
            assert_eq!(e["objectRef"]["apiVersion"], "v1alpha1", "{}: {e}", c.name);
            assert!(!matches!(code(e), Some(401 | 403)), "{}: CoreDNS refused: {e}", c.name);
        }
        assert!(
            imports_read.iter().any(|e| code(e).is_some_and(|c| c < 300)),
            "{}: no read of ServiceImports succeeded: {imports_read:?}",
            c.name
        );
        for e in &mine {
            let verb = e["verb"].as_str().unwrap_or("");
            assert!(["list", "watch", "get"].contains(&verb), "{}: CoreDNS wrote: {e}", c.name);
        }
    }
}
