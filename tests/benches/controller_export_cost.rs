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
//! 1,000 in all. `--at-once=N` (default 1) creates N services at a time
//! (each one's Service, slice and ServiceExport in turn), as a user
//! applying many at once does; 1 creates them one after the other.
//! `cargo bench` builds the controller it runs (the
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
//! resident memory and its context switches (every thread's, voluntary
//! and not: how often it slept and was woken; the floor's too) are read
//! then from `/proc`, and its reconciles per export (each side) are
//! counted from its metrics.
//!
//! The baseline of the CPU: the floor (`kube-floor-for-bench`,
//! src/bin/kube_floor.rs), a process that makes the controller's
//! Kubernetes messages per export (its watches, its five writes), on its
//! runtime (one thread), and nothing else, exports the same two batches
//! in a second API server without a controller, measured the same way,
//! each batch right after the controller's. The controller's CPU per
//! export over the floor's is what its own work costs beyond the
//! messages. Results: docs/benchmarks.md.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark that cannot run should stop loudly

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use mcs_bench::report::{Table, print_machine};
use mcs_controller::crd::ServiceExport;
use mcs_tests::controller::{Cluster, World, apply, endpoint_slice, export_progress, service};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NS: &str = "bench";
const USER: &str = "system:serviceaccount:mcs-system:mcs-controller";
/// How long the processes are watched at rest after each batch: four of
/// the importer's registry probes (every 15 s).
const REST: Duration = Duration::from_secs(60);

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

/// The CPU seconds of process `pid` so far (user and system), from
/// `/proc/<pid>/stat` in clock ticks of `getconf CLK_TCK`.
async fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which ends with the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    let hz = tokio::process::Command::new("getconf").arg("CLK_TCK").output().await.unwrap();
    ticks / String::from_utf8_lossy(&hz.stdout).trim().parse::<f64>().unwrap()
}

/// The controller's reconciles so far, `[export, import]` (its
/// `mcs_controller_reconciles_total`, every outcome); none for the floor.
async fn reconciles(c: &Cluster) -> Option<[f64; 2]> {
    let controller = c.controllers.first()?;
    let name = "mcs_controller_reconciles_total";
    Some([
        controller.metric(name, &[("controller", "export")]).await,
        controller.metric(name, &[("controller", "import")]).await,
    ])
}

/// The resident memory of process `pid` in MiB (`VmRSS` of `/proc/<pid>/status`).
fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .expect("VmRSS in kB");
    kib / 1024.0
}

/// The context switches of process `pid` so far, voluntary and not, over
/// its threads that still run (`/proc/<pid>/task/*/status`): how often it
/// was put to sleep and woken, the cost that dominates its profile
/// (docs/benchmarks.md §8).
fn context_switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .map(|status| {
            status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split(':').nth(1)?.trim().parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Exports services `from..to` in namespace `ns`, `at_once` services
/// created at a time (each one's Service, slice and ServiceExport in that
/// order), and waits until every export so far is Ready and imported, and
/// the controller is quiet.
async fn export_batch(c: &Cluster, ns: &str, (from, to): (usize, usize), at_once: usize) {
    let services: Api<Service> = Api::namespaced(c.kube.clone(), ns);
    let slices: Api<EndpointSlice> = Api::namespaced(c.kube.clone(), ns);
    let exports: Api<ServiceExport> = Api::namespaced(c.kube.clone(), ns);
    futures::stream::iter(from..to)
        .for_each_concurrent(at_once, |i| {
            let (services, slices, exports) = (&services, &slices, &exports);
            async move {
                let name = format!("svc-{i:05}");
                let address = format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256);
                apply(services, &service(ns, &name, &[("http", 80, 8080)], false)).await;
                let slice = endpoint_slice(
                    ns,
                    &name,
                    &format!("{name}-own"),
                    &[&address],
                    &[("http", 8080)],
                );
                apply(slices, &slice).await;
                apply(exports, &mcs_tests::controller::service_export(ns, &name)).await;
            }
        })
        .await;
    // A batch that stops moving fails the run: none of its counts
    // (Ready, imported, sliced) changed for STALL.
    const STALL: Duration = Duration::from_secs(120);
    let (mut last, mut moved) = (None, Instant::now());
    loop {
        let progress = export_progress(c, ns, |_| true).await;
        if progress.done() >= to {
            break;
        }
        if last != Some(progress) {
            (last, moved) = (Some(progress), Instant::now());
        }
        assert!(moved.elapsed() < STALL, "nothing moved for {STALL:?}; of {to}: {progress:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let deadline = Instant::now() + STALL;
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

/// One batch's figures: `(requests / export, CPU ms / export)` and its row.
async fn batch(
    c: &Cluster,
    subject: &str,
    pid: u32,
    ns: &str,
    (label, from, to): (&str, usize, usize),
    at_once: usize,
    by_kind: &mut BTreeMap<(&'static str, String, String, u16), usize>,
) -> ((f64, f64), Vec<String>) {
    let (seen_before, cpu_before) = (requests(c).len(), cpu_seconds(pid).await);
    let switches_before = context_switches(pid);
    let reconciles_before = reconciles(c).await;
    let started = Instant::now();
    export_batch(c, ns, (from, to), at_once).await;
    let elapsed = started.elapsed().as_secs_f64();
    let n = (to - from) as f64;
    let made: Vec<_> = requests(c).into_iter().skip(seen_before).collect();
    let on = |wanted: &str| made.iter().filter(|(_, r, _)| side(r) == wanted).count() as f64;
    let (reqs, export_side, import_side) =
        (made.len() as f64 / n, on("export") / n, on("import") / n);
    let cpu_ms = (cpu_seconds(pid).await - cpu_before) * 1000.0 / n;
    let switches = context_switches(pid).saturating_sub(switches_before) as f64 / n;
    let [export_reconciles, import_reconciles] = match (reconciles_before, reconciles(c).await) {
        (Some(before), Some(after)) => [0, 1].map(|i| format!("{:.2}", (after[i] - before[i]) / n)),
        _ => ["-".to_owned(), "-".to_owned()],
    };
    by_kind.clear();
    for (verb, resource, code) in made {
        *by_kind.entry((side(&resource), verb, resource, code)).or_insert(0usize) += 1;
    }
    let row = vec![
        subject.to_owned(),
        label.to_owned(),
        format!("{}", to - from),
        format!("{to}"),
        format!("{reqs:.2}"),
        format!("{export_side:.2}"),
        format!("{import_side:.2}"),
        export_reconciles,
        import_reconciles,
        format!("{cpu_ms:.2}"),
        format!("{switches:.1}"),
        format!("{elapsed:.1}"),
        format!("{:.0}", resident_mib(pid)),
    ];
    ((reqs, cpu_ms), row)
}

/// Starts the floor (`kube-floor-for-bench`) as the controller's
/// ServiceAccount and waits until its watches have listed.
async fn start_floor(c: &Cluster) -> tokio::process::Child {
    use tokio::io::AsyncBufReadExt;
    let mut floor = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-floor-for-bench"))
        .arg(&c.name)
        .env("KUBECONFIG", &c.controller_kubeconfig)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting kube-floor-for-bench");
    let stdout = floor.stdout.take().expect("its stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    assert!(
        matches!(&line, Ok(Ok(Some(l))) if l == "ready"),
        "the floor did not get ready: {line:?}"
    );
    floor
}

#[tokio::main]
async fn main() {
    let first: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(100);
    let at_once: usize = std::env::args()
        .find_map(|a| a.strip_prefix("--at-once=").map(|n| n.parse().expect("--at-once=N, N > 0")))
        .unwrap_or(1);
    assert!(at_once > 0, "--at-once=N needs N > 0");
    let second = first * 4;
    print_machine();
    println!("services created {at_once} at a time");
    // Logging as deployed: the chart's default filter (`log: info`), not
    // the tests' `mcs_controller=debug`.
    let mut world = World::start(
        mcs_tests::controller_binaries!(),
        &["east", "west"],
        &["--log", "info"],
    )
    .await
    .expect("the benchmark needs scripts/k8s-env and a DynamoDB endpoint (scripts/with-moto.sh)");
    // The floor runs in a cluster of its own, without the controller, so
    // that its batches can alternate with the controller's: this machine's
    // speed drifts by the minute (docs/benchmarks.md §8).
    world.kill_controllers("west").await;
    let (east, west) = (world.cluster("east"), world.cluster("west"));
    mcs_testkit::k8s::ensure_namespace(&east.kube, NS).await;
    mcs_testkit::k8s::ensure_namespace(&west.kube, NS).await;
    let floor_process = start_floor(west).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let subjects = [
        ("mcs-controller", east, east.controllers[0].pid().expect("the controller runs")),
        ("floor", west, floor_process.id().expect("the floor runs")),
    ];
    let batches = [("first batch (baseline)", 0, first), ("second batch", first, first + second)];
    let mut rows = Vec::new();
    let mut kinds = [BTreeMap::new(), BTreeMap::new()];
    let mut figures = [Vec::new(), Vec::new()];
    let mut at_rest = Vec::new();
    for b in batches {
        for (i, (subject, cluster, pid)) in subjects.iter().enumerate() {
            let (measured, row) =
                batch(cluster, subject, *pid, NS, b, at_once, &mut kinds[i]).await;
            figures[i].push(measured);
            rows.push(row);
        }
        // At rest: the batch's exports held, nothing changing. What a
        // process spends then recurs with time: after each batch, so that
        // a cost growing with the exports held shows.
        let pids = [subjects[0].2, subjects[1].2];
        let before = [cpu_seconds(pids[0]).await, cpu_seconds(pids[1]).await];
        tokio::time::sleep(REST).await;
        let after = [cpu_seconds(pids[0]).await, cpu_seconds(pids[1]).await];
        let per_second = |i: usize| (after[i] - before[i]) * 1000.0 / REST.as_secs_f64();
        at_rest.push((b.2, per_second(0), per_second(1)));
    }
    let [controller, floor] = figures;
    let mut table = Table::new(&[
        "process",
        "batch",
        "exports",
        "exports in all",
        "API requests / export",
        "export side",
        "import side",
        "export reconciles / export",
        "import reconciles / export",
        "CPU ms / export",
        "context switches / export",
        "seconds",
        "RSS MiB at the end",
    ]);
    for row in rows {
        table.row(row);
    }
    println!("{}", table.render());
    for ((subject, ..), kinds) in subjects.iter().zip(&kinds) {
        println!(
            "{subject}, second batch, requests per export by side, verb, resource and status code:"
        );
        for ((side, verb, resource, code), n) in kinds {
            println!("  {side}: {verb} {resource} {code}: {:.2}", *n as f64 / second as f64);
        }
    }
    for (held, controller, floor) in at_rest {
        println!(
            "at rest for {} s with {held} exports held, CPU ms per second: mcs-controller {controller:.2}, floor {floor:.2}",
            REST.as_secs(),
        );
    }
    let (base, large) = (controller[0], controller[1]);
    println!(
        "mcs-controller, ratio second / first batch: requests {:.2}x, CPU {:.2}x (1x: linear in the exports)",
        large.0 / base.0,
        large.1 / base.1
    );
    println!(
        "CPU per export, mcs-controller / floor: first batch {:.2}x, second batch {:.2}x",
        controller[0].1 / floor[0].1,
        controller[1].1 / floor[1].1
    );
}
