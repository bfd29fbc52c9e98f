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
//! FIRST (default 100) exports first, then 4 × FIRST more: `-- 200` makes
//! 1,000 in all. `cargo bench` builds the controller it runs (the
//! `mcs-controller-for-tests` binary of this package) with the bench
//! profile, an optimized release build; `--profile dev` gives a debug one.
//!
//! One real API server (scripts/k8s-env), the registry on DynamoDB (moto)
//! with the test settings of `mcs_tests::controller`, one controller.
//! Requests are the controller ServiceAccount's in the API server's audit
//! log, its leader Lease's excepted, split into the export side
//! (`serviceexports`, its status) and the import side (the cluster imports
//! its own exports, MCS semantics: ServiceImports, their status, derived
//! Services, EndpointSlices). CPU is the controller process's user and
//! system time (`/proc/<pid>/stat`). A batch is done when every one of its
//! ServiceExports shows `Ready=True`, every one of its services is imported
//! (a ServiceImport with its clusterset IP and status, an imported slice)
//! and the controller has made no request for 3 s; the controller's
//! resident memory is read then, and its reconciles per export (each side)
//! are counted from its metrics. Results:
//! docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use mcs_bench::report::{Table, print_machine};
use mcs_controller::MANAGED_BY;
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_tests::controller::{Cluster, World, apply, endpoint_slice, service};
use std::time::{Duration, Instant};

const NS: &str = "bench";
const USER: &str = "system:serviceaccount:mcs-system:mcs-controller";

/// The controller's requests so far, its leader Lease's excepted:
/// `(verb, resource[/subresource], status code)`.
fn requests(c: &Cluster) -> Vec<(String, String, u16)> {
    mcs_tests::controller::audited(&c.env, USER)
        .into_iter()
        .filter(|(_, _, resource, _)| resource != "leases")
        .map(|(verb, _, resource, code)| (verb, resource, code))
        .collect()
}

/// The side a request of the controller is made for: its ServiceExports
/// (their status) or the imports (ServiceImports, derived Services,
/// EndpointSlices, and the watches behind both).
fn side(resource: &str) -> &'static str {
    if resource.starts_with("serviceexports") { "export" } else { "import" }
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

/// The controller's reconciles so far, `[export, import]` (its
/// `mcs_controller_reconciles_total`, every outcome).
async fn reconciles(c: &Cluster) -> [f64; 2] {
    let controller = &c.controllers[0];
    let name = "mcs_controller_reconciles_total";
    [
        controller.metric(name, &[("controller", "export")]).await,
        controller.metric(name, &[("controller", "import")]).await,
    ]
}

/// The controller's resident memory in MiB (`VmRSS` of `/proc/<pid>/status`).
fn resident_mib(c: &Cluster) -> f64 {
    let pid = c.controllers[0].pid().expect("the controller runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("VmRSS in kB");
    kib / 1024.0
}

/// Exports services `from..to` and waits until every export so far is
/// Ready and imported, and the controller is quiet.
async fn export_batch(c: &Cluster, from: usize, to: usize) {
    let services: Api<Service> = Api::namespaced(c.kube.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(c.kube.clone(), NS);
    let exports: Api<ServiceExport> = Api::namespaced(c.kube.clone(), NS);
    let imports: Api<ServiceImport> = Api::namespaced(c.kube.clone(), NS);
    for i in from..to {
        let name = format!("svc-{i:05}");
        let address = format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256);
        apply(&services, &service(NS, &name, &[("http", 80, 8080)], false)).await;
        let slice =
            endpoint_slice(NS, &name, &format!("{name}-own"), &[&address], &[("http", 8080)]);
        apply(&slices, &slice).await;
        apply(&exports, &mcs_tests::controller::service_export(NS, &name)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    let imported_slices = ListParams::default()
        .labels(&format!("endpointslice.kubernetes.io/managed-by={MANAGED_BY}"));
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
        let imported = imports
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|i| {
                !i.spec.ips.is_empty() && i.status.as_ref().is_some_and(|s| !s.clusters.is_empty())
            })
            .count();
        let sliced = slices.list(&imported_slices).await.unwrap().items.len();
        if ready >= to && imported >= to && sliced >= to {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 30 min: {ready} of {to} exports ready, {imported} imported, {sliced} slices"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Quiet: no request of the controller for 3 s (late status writes,
    // import updates).
    let mut seen = requests(c).len();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = requests(c).len();
        if now != seen {
            (seen, quiet_since) = (now, Instant::now());
        }
        assert!(Instant::now() < deadline, "the controller never went quiet");
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
        let (seen_before, cpu_before) = (requests(east).len(), cpu_seconds(east).await);
        let reconciles_before = reconciles(east).await;
        let started = Instant::now();
        export_batch(east, from, to).await;
        let elapsed = started.elapsed().as_secs_f64();
        let n = (to - from) as f64;
        let made: Vec<_> = requests(east).into_iter().skip(seen_before).collect();
        let on = |wanted: &str| made.iter().filter(|(_, r, _)| side(r) == wanted).count() as f64;
        let (reqs, export_side, import_side) =
            (made.len() as f64 / n, on("export") / n, on("import") / n);
        let cpu_ms = (cpu_seconds(east).await - cpu_before) * 1000.0 / n;
        let reconciles_after = reconciles(east).await;
        let [export_reconciles, import_reconciles] =
            [0, 1].map(|i| (reconciles_after[i] - reconciles_before[i]) / n);
        per_export.push((reqs, cpu_ms));
        by_kind.clear();
        for (verb, resource, code) in made {
            *by_kind.entry((side(&resource), verb, resource, code)).or_insert(0usize) += 1;
        }
        rows.push(vec![
            label.to_owned(),
            format!("{}", to - from),
            format!("{to}"),
            format!("{reqs:.2}"),
            format!("{export_side:.2}"),
            format!("{import_side:.2}"),
            format!("{export_reconciles:.2}"),
            format!("{import_reconciles:.2}"),
            format!("{cpu_ms:.2}"),
            format!("{elapsed:.1}"),
            format!("{:.0}", resident_mib(east)),
        ]);
    }
    let mut table = Table::new(&[
        "batch",
        "exports",
        "exports in all",
        "API requests / export",
        "export side",
        "import side",
        "export reconciles / export",
        "import reconciles / export",
        "controller CPU ms / export",
        "seconds",
        "controller RSS MiB at the end",
    ]);
    for row in rows {
        table.row(row);
    }
    println!("{}", table.render());
    println!("second batch, requests per export by side, verb, resource and status code:");
    for ((side, verb, resource, code), n) in &by_kind {
        println!("  {side}: {verb} {resource} {code}: {:.2}", *n as f64 / second as f64);
    }
    let (base, large) = (per_export[0], per_export[1]);
    println!(
        "ratio second / first batch: requests {:.2}x, CPU {:.2}x (1x: linear in the exports)",
        large.0 / base.0,
        large.1 / base.1
    );
}
