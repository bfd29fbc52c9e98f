//! Benchmark: export → resolvable through ClusterSet DNS, and unexport →
//! NXDOMAIN: a Service exported in one cluster until CoreDNS, reading the
//! other cluster's API server, answers its `clusterset.local` name with the
//! clusterset IP; beside it, in the same rounds, the time until that
//! cluster's ServiceImport carries the IP (the controllers and the registry
//! alone), so the ratio is what DNS adds.
//!
//! ```text
//! scripts/with-moto.sh cargo bench -p mcs-tests --bench dns_propagation [-- ROUNDS]
//! ```
//!
//! Two real API servers (scripts/k8s-env), the registry on DynamoDB (moto)
//! with the test settings of `mcs_tests::controller` (200 ms refresh), a
//! controller per cluster, CoreDNS (scripts/k8s-env builds it) with `ttl 0`.
//! Both are polled every 20 ms. Four other services stay exported
//! throughout, so that one unexport is not a wave the importer holds
//! (half or more of its imports at once: design §13); the last table row
//! measures such a wave (the only import of a cluster going) for
//! comparison. Results: docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams};
use mcs_bench::report::{Stats, Table, print_machine};
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_tests::controller::{World, apply, endpoint_slice, service};
use mcs_tests::dns::{CoreDns, MULTICLUSTER_BLOCK, coredns_rbac};
use std::time::{Duration, Instant};

const NS: &str = "bench";
const POLL: Duration = Duration::from_millis(20);

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20);
    print_machine();
    let world = World::for_bench(mcs_tests::controller_binaries!(), NS).await;
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    coredns_rbac(&west.kube, false).await;
    coredns_rbac(&west.kube, true).await;
    let dns = CoreDns::start(&west.env, MULTICLUSTER_BLOCK).await;
    let services: Api<Service> = Api::namespaced(east.kube.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(east.kube.clone(), NS);
    let exports: Api<ServiceExport> = Api::namespaced(east.kube.clone(), NS);
    let imports: Api<ServiceImport> = Api::namespaced(west.kube.clone(), NS);

    let export = |name: &str| mcs_tests::controller::service_export(NS, name);
    // The services that stay: an unexport of one of five is no wave.
    for i in 0..4 {
        let name = format!("stays-{i}");
        apply(&services, &service(NS, &name, &[("http", 80, 8080)], false)).await;
        let own = format!("{name}-own");
        let address = format!("10.9.3.{}", i + 1);
        apply(&slices, &endpoint_slice(NS, &name, &own, &[&address], &[("http", 8080)])).await;
        apply(&exports, &export(&name)).await;
    }
    let last = "stays-3.bench.svc.clusterset.local.";
    dns.until(last, RecordType::A, Duration::from_secs(60), "resolvable", |a| {
        !a.addresses.is_empty()
    })
    .await;

    let (mut import_ms, mut dns_ms, mut gone_ms) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let name = format!("web-{round}");
        let fqdn = format!("{name}.{NS}.svc.clusterset.local.");
        apply(&services, &service(NS, &name, &[("http", 80, 8080)], false)).await;
        let address = format!("10.9.2.{}", round + 1);
        let own = format!("{name}-own");
        apply(&slices, &endpoint_slice(NS, &name, &own, &[&address], &[("http", 8080)])).await;
        let exported = Instant::now();
        apply(&exports, &export(&name)).await;
        let (mut imported, mut resolved) = (None, None);
        while imported.is_none() || resolved.is_none() {
            assert!(exported.elapsed() < Duration::from_secs(60), "{name}: not within 60 s");
            if imported.is_none()
                && let Ok(Some(import)) = imports.get_opt(&name).await
                && !import.spec.ips.is_empty()
            {
                imported = Some(exported.elapsed());
            }
            if resolved.is_none() {
                let answer = dns.ask(&fqdn, RecordType::A).await;
                if !answer.addresses.is_empty() {
                    resolved = Some(exported.elapsed());
                }
            }
            tokio::time::sleep(POLL).await;
        }
        import_ms.push(imported.unwrap().as_secs_f64() * 1e3);
        dns_ms.push(resolved.unwrap().as_secs_f64() * 1e3);

        let unexported = Instant::now();
        exports.delete(&name, &DeleteParams::default()).await.unwrap();
        dns.until(&fqdn, RecordType::A, Duration::from_secs(60), "NXDOMAIN", |a| a.nxdomain())
            .await;
        gone_ms.push(unexported.elapsed().as_secs_f64() * 1e3);
        services.delete(&name, &DeleteParams::default()).await.unwrap();
        slices.delete(&own, &DeleteParams::default()).await.unwrap();
    }

    // A wave: the four that stayed go at once (every import of west).
    let unexported = Instant::now();
    for i in 0..4 {
        exports.delete(&format!("stays-{i}"), &DeleteParams::default()).await.unwrap();
    }
    dns.until(last, RecordType::A, Duration::from_secs(600), "NXDOMAIN", |a| a.nxdomain()).await;
    let wave_ms = unexported.elapsed().as_secs_f64() * 1e3;

    let (i, d, g) =
        (Stats::of(&import_ms).unwrap(), Stats::of(&dns_ms).unwrap(), Stats::of(&gone_ms).unwrap());
    println!(
        "\n## dns propagation: export in east → A record from west's CoreDNS ({rounds} rounds)"
    );
    let mut table = Table::new(&["path", "p50 ms", "p99 ms", "max ms"]);
    for (path, s) in [
        ("export → west's ServiceImport has its IP (baseline)", &i),
        ("export → web.bench.svc.clusterset.local answers A", &d),
        ("unexport of 1 of 5 imports → NXDOMAIN", &g),
    ] {
        table.row(vec![
            path.into(),
            format!("{:.0}", s.p50),
            format!("{:.0}", s.p99),
            format!("{:.0}", s.max),
        ]);
    }
    table.row(vec![
        "unexport of every import at once → NXDOMAIN (a held wave, 1 sample)".into(),
        format!("{wave_ms:.0}"),
        "".into(),
        "".into(),
    ]);
    table.print();
    println!(
        "ratio resolvable / imported: p50 {:.2}×, p99 {:.2}× (polled every {} ms)",
        d.p50 / i.p50.max(0.001),
        d.p99 / i.p99.max(0.001),
        POLL.as_millis()
    );
}
