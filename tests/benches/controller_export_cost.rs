//! Benchmark: what exporting Services costs the exporting controller, in
//! Kubernetes API requests and CPU per export, for a first batch (the
//! baseline) and a four times larger second batch on top of it, measured
//! in the same run; the ratio of the two per-export figures shows whether
//! the cost grows with the exports already there (issue 27: CPU grew with
//! their square) and the requests against the budget of issue 29 (at most
//! 5 API requests per exported service).
//!
//! ```text
//! scripts/with-moto.sh cargo bench -p mcs-tests --bench controller_export_cost [-- FIRST]
//! ```
//!
//! One real API server (scripts/k8s-env), the registry on DynamoDB (moto)
//! with the test settings of `mcs_tests::controller`, one controller.
//! Requests are the controller ServiceAccount's in the API server's audit
//! log, its leader Lease's excepted; CPU is the controller process's user
//! and system time (`/proc/<pid>/stat`). A batch is done when every one of its
//! ServiceExports shows `Ready=True`. Results: docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, ObjectMeta};
use mcs_bench::report::{Table, print_machine};
use mcs_controller::crd::ServiceExport;
use mcs_tests::controller::{Cluster, World, apply, endpoint_slice, service};
use std::time::{Duration, Instant};

const NS: &str = "bench";
const USER: &str = "system:serviceaccount:mcs-system:mcs-controller";

/// The controller's requests so far, its leader Lease's excepted.
fn requests(c: &Cluster) -> usize {
    mcs_tests::controller::audited(&c.env, USER)
        .iter()
        .filter(|(_, _, resource, _)| resource != "leases")
        .count()
}

/// The controller's CPU seconds so far (user and system), from
/// `/proc/<pid>/stat` in clock ticks of `getconf CLK_TCK`.
async fn cpu_seconds(c: &Cluster) -> f64 {
    let pid = c.controllers[0].pid().expect("the controller runs");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which ends with the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let hz = tokio::process::Command::new("getconf").arg("CLK_TCK").output().await.unwrap();
    ticks / String::from_utf8_lossy(&hz.stdout).trim().parse::<f64>().unwrap()
}

/// Exports services `from..to` and waits until every export so far is Ready.
async fn export_batch(c: &Cluster, from: usize, to: usize) {
    let services: Api<Service> = Api::namespaced(c.kube.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(c.kube.clone(), NS);
    let exports: Api<ServiceExport> = Api::namespaced(c.kube.clone(), NS);
    for i in from..to {
        let name = format!("svc-{i:05}");
        let address = format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256);
        apply(&services, &service(NS, &name, &[("http", 80, 8080)], false)).await;
        let slice =
            endpoint_slice(NS, &name, &format!("{name}-own"), &[&address], &[("http", 8080)]);
        apply(&slices, &slice).await;
        let export = ServiceExport {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        };
        apply(&exports, &export).await;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let list = exports.list(&ListParams::default()).await.unwrap();
        let ready = list
            .items
            .iter()
            .filter(|e| {
                e.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        if ready >= to {
            return;
        }
        assert!(Instant::now() < deadline, "{ready} of {to} exports ready after 30 min");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() {
    let first: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(100);
    let second = first * 4;
    print_machine();
    let world = World::start(mcs_tests::controller_binaries!(), &["east"], &[]).await.expect(
        "the benchmark needs scripts/k8s-env and a DynamoDB endpoint (scripts/with-moto.sh)",
    );
    let east = world.cluster("east");
    mcs_testkit::k8s::ensure_namespace(&east.kube, NS).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut rows = Vec::new();
    let mut by_kind = std::collections::BTreeMap::new();
    let mut per_export = Vec::new();
    for (label, from, to) in
        [("first batch (baseline)", 0, first), ("second batch", first, first + second)]
    {
        let (requests_before, cpu_before) = (requests(east), cpu_seconds(east).await);
        let seen_before = mcs_tests::controller::audited(&east.env, USER).len();
        let started = Instant::now();
        export_batch(east, from, to).await;
        // Let the status writes and watches settle before counting.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let n = (to - from) as f64;
        let reqs = (requests(east) - requests_before) as f64 / n;
        let cpu_ms = (cpu_seconds(east).await - cpu_before) * 1000.0 / n;
        per_export.push((reqs, cpu_ms));
        by_kind.clear();
        for (verb, _, resource, _) in
            mcs_tests::controller::audited(&east.env, USER).into_iter().skip(seen_before)
        {
            if resource != "leases" {
                *by_kind.entry((verb, resource)).or_insert(0usize) += 1;
            }
        }
        rows.push(vec![
            label.to_owned(),
            format!("{}", to - from),
            format!("{to}"),
            format!("{reqs:.2}"),
            format!("{cpu_ms:.2}"),
            format!("{:.1}", started.elapsed().as_secs_f64()),
        ]);
    }
    let mut table = Table::new(&[
        "batch",
        "exports",
        "exports in all",
        "API requests / export",
        "controller CPU ms / export",
        "seconds",
    ]);
    for row in rows {
        table.row(row);
    }
    println!("{}", table.render());
    println!("second batch, requests per export by verb and resource:");
    for ((verb, resource), n) in &by_kind {
        println!("  {verb} {resource}: {:.2}", *n as f64 / second as f64);
    }
    let (base, large) = (per_export[0], per_export[1]);
    println!(
        "ratio second / first batch: requests {:.2}x, CPU {:.2}x (1x: linear in the exports)",
        large.0 / base.0,
        large.1 / base.1
    );
}
