//! Benchmark: how long a Service's endpoint change in one cluster takes to
//! reach the imported EndpointSlice of another, through both controllers
//! and the registry, beside the registry's own propagation (an export
//! written through its API until a watcher of its imports sees it),
//! measured in the same run against the same registry.
//!
//! ```text
//! scripts/with-moto.sh cargo bench -p mcs-tests --bench controller_propagation [-- ROUNDS]
//! ```
//!
//! Two real API servers (scripts/k8s-env), the registry on DynamoDB (moto)
//! with the test settings of `mcs_tests::controller` (200 ms refresh), a
//! controller per cluster. Results: docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ObjectMeta};
use kube::runtime::{WatchStreamExt, watcher};
use mcs_api::{ClusterRegistration, ExportKey, ExportRequest, ImportList, Incarnation, Label};
use mcs_bench::report::{Stats, Table, print_machine};
use mcs_controller::crd::ServiceExport;
use mcs_tests::controller::{World, apply, endpoint_slice, service};
use std::time::{Duration, Instant};

const NS: &str = "bench";

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(40);
    print_machine();
    let world = World::for_bench(mcs_tests::controller_binaries!(), NS).await;
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(east.kube.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(east.kube.clone(), NS);
    let exports: Api<ServiceExport> = Api::namespaced(east.kube.clone(), NS);
    apply(&services, &service(NS, "web", &[("http", 80, 8080)], false)).await;
    apply(&slices, &endpoint_slice(NS, "web", "web-own", &["10.9.0.1"], &[("http", 8080)])).await;
    let export = ServiceExport {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    };
    apply(&exports, &export).await;

    // West's imported slices of web, as a stream of address sets.
    let west_slices: Api<EndpointSlice> = Api::namespaced(west.kube.clone(), NS);
    let selector = format!(
        "multicluster.kubernetes.io/service-name=web,endpointslice.kubernetes.io/managed-by={}",
        mcs_controller::MANAGED_BY
    );
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<String>)>();
    tokio::spawn(async move {
        let mut stream = watcher(west_slices, watcher::Config::default().labels(&selector))
            .applied_objects()
            .boxed();
        while let Some(Ok(slice)) = stream.next().await {
            let addresses =
                slice.endpoints.into_iter().flatten().flat_map(|e| e.addresses).collect();
            let _ = tx.send((Instant::now(), addresses));
        }
    });
    wait_for(&mut seen, "10.9.0.1").await;

    let mut controller_ms = Vec::new();
    for round in 0..rounds {
        let address = format!("10.9.1.{}", round + 1);
        let changed = Instant::now();
        apply(
            &slices,
            &endpoint_slice(NS, "web", "web-own", &["10.9.0.1", &address], &[("http", 8080)]),
        )
        .await;
        let arrived = wait_for(&mut seen, &address).await;
        controller_ms.push(arrived.duration_since(changed).as_secs_f64() * 1e3);
    }

    // The registry alone: an export written through the API by a cluster of
    // the benchmark's own, until a watcher of the imports sees it.
    let client = world.registry_client();
    let cluster = Label::new("bench").unwrap();
    let incarnation = Incarnation::new("bench-1").unwrap();
    let _lease = client
        .keep(mcs_client::Registration::Cluster(
            cluster.clone(),
            ClusterRegistration {
                cluster_id: None,
                lease: None,
                incarnation: incarnation.clone(),
                generation: None,
            },
        ))
        .await
        .unwrap();
    let stop = mcs_client::CancellationToken::new();
    let mut watch = client.watch::<ImportList>(stop.clone());
    let key = ExportKey {
        cluster_id: cluster,
        namespace: Label::new(NS).unwrap(),
        name: Label::new("direct").unwrap(),
    };
    let mut registry_ms = Vec::new();
    for round in 0..rounds {
        let address: std::net::IpAddr = format!("10.8.1.{}", round + 1).parse().unwrap();
        let request: ExportRequest = serde_json::from_value(serde_json::json!({
            "type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}],
            "exported_at": "2026-12-03T00:00:00Z",
            "endpoints": [{"addresses": [address], "ready": true}],
            "incarnation": incarnation,
        }))
        .unwrap();
        let written = Instant::now();
        client.put_export(&key, &request).await.unwrap();
        loop {
            let list = watch.next().await.expect("watching").expect("a list");
            let found = list.imports.iter().any(|i| {
                i.name.as_str() == "direct"
                    && i.clusters
                        .iter()
                        .any(|c| c.endpoints.iter().any(|e| e.addresses.contains(&address)))
            });
            if found {
                registry_ms.push(written.elapsed().as_secs_f64() * 1e3);
                break;
            }
        }
    }
    stop.cancel();

    let (c, r) = (Stats::of(&controller_ms).unwrap(), Stats::of(&registry_ms).unwrap());
    println!(
        "\n## controller propagation: endpoint change in east → imported slice in west ({rounds} rounds)"
    );
    let mut table = Table::new(&["path", "p50 ms", "p99 ms", "max ms"]);
    table.row(vec![
        "east slice → west slice (controllers + registry)".into(),
        format!("{:.0}", c.p50),
        format!("{:.0}", c.p99),
        format!("{:.0}", c.max),
    ]);
    table.row(vec![
        "export PUT → import watch (registry alone)".into(),
        format!("{:.0}", r.p50),
        format!("{:.0}", r.p99),
        format!("{:.0}", r.max),
    ]);
    table.print();
    println!(
        "ratio (controllers + registry) / registry alone: p50 {:.1}×, p99 {:.1}×",
        c.p50 / r.p50.max(0.001),
        c.p99 / r.p99.max(0.001)
    );
}

/// When west's watcher first saw `address` in an imported slice.
async fn wait_for(
    seen: &mut tokio::sync::mpsc::UnboundedReceiver<(Instant, Vec<String>)>,
    address: &str,
) -> Instant {
    loop {
        let (at, addresses) = tokio::time::timeout(Duration::from_secs(60), seen.recv())
            .await
            .expect("the change reaches west within a minute")
            .expect("watching");
        if addresses.iter().any(|a| a == address) {
            return at;
        }
    }
}
