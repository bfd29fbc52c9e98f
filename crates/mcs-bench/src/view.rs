//! `view`: the cost of keeping the served view current, without I/O.
//!
//! A [`View`] of 100k records takes batches of 100 changes
//! ([`View::apply`], which also keeps every section's fingerprint up to
//! date); the baseline is what a non-incremental design would pay per
//! change set, recomputing a section's fingerprint from every item
//! ([`Section::fingerprint_from_scratch`](mcs_core::Section)). A second
//! view mixes kinds (pools, clusters, exports of shared services), where an
//! export change re-merges its service's import.

use crate::records::{LOOKBACK_MS, REFRESH_MS, lease_window, pool_record, renewing_pools};
use crate::report::{self, Stats, Table, f, ratio, verdict};
use clap::Parser;
use mcs_api::{Pool, PoolId};
use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, port};
use mcs_core::{Body, ChangeStamp, Record, Section, SectionKind, Version, View};
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// Options of `view`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Records in the view.
    #[arg(long, default_value_t = 100_000)]
    pub records: usize,
    /// Changes applied per measured batch.
    #[arg(long, default_value_t = 100)]
    pub changes: usize,
    /// Measured batches (after as many unmeasured for warm-up, up to 200).
    #[arg(long, default_value_t = 2000)]
    pub reps: usize,
    /// Repetitions of the from-scratch fingerprint.
    #[arg(long, default_value_t = 30)]
    pub scratch_reps: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["view"])
    }
}

const NOW: u64 = 1_000_000_000;
const LEASE_UNTIL: u64 = NOW + 10 * 3_600_000;
/// A prime stride, so consecutive batches touch keys spread over the view.
const STRIDE: usize = 7_919;

fn time<R>(f: impl FnOnce() -> R) -> Duration {
    let started = Instant::now();
    black_box(f());
    started.elapsed()
}

/// Measures `reps` batches of `make_batch(rep)` applied to `view`.
fn apply_batches(
    view: &mut View,
    reps: usize,
    mut make_batch: impl FnMut(usize) -> Vec<Record>,
) -> Vec<f64> {
    let warmup = reps.min(200);
    let mut samples = Vec::with_capacity(reps);
    for rep in 0..warmup + reps {
        let batch = make_batch(rep);
        let started = Instant::now();
        let mut changed = 0;
        for record in batch {
            changed += usize::from(view.apply(record, NOW));
        }
        let elapsed = started.elapsed();
        assert!(changed > 0, "a batch changed nothing: the benchmark is wrong");
        if rep >= warmup {
            samples.push(report::us(elapsed));
        }
    }
    samples
}

/// Runs `view`.
pub fn run(options: &Options) -> anyhow::Result<()> {
    report::begin("view", "View::apply and fingerprints, no I/O");
    let n = options.records;
    let changes = options.changes.min(n);
    anyhow::ensure!(n >= 10 && changes > 0, "--records at least 10 and --changes above 0");

    // Pools only.
    let mut view = View::new(1000);
    for i in 0..n {
        view.apply(pool_record(i, 4, Version::new(1, "w"), NOW, LEASE_UNTIL), NOW);
    }
    let mut generations = vec![1u64; n];
    let apply = apply_batches(&mut view, options.reps, |rep| {
        (0..changes)
            .map(|j| {
                let i = ((rep * changes + j) * STRIDE) % n;
                generations[i] += 1;
                let g = generations[i];
                pool_record(i, 4 + g as u32, Version::new(g, "w"), NOW, LEASE_UNTIL)
            })
            .collect()
    });
    let pools = view.pools();
    let scratch: Vec<f64> = (0..options.scratch_reps.max(1))
        .map(|_| report::us(time(|| pools.fingerprint_from_scratch())))
        .collect();
    assert_eq!(pools.fingerprint(), pools.fingerprint_from_scratch(), "fingerprints agree");
    // One call is about a microsecond: time batches of them.
    const CALLS: u32 = 1000;
    let incremental: Vec<f64> = (0..500)
        .map(|_| {
            report::us(time(|| {
                for _ in 0..CALLS {
                    black_box(black_box(pools).fingerprint());
                }
            })) / f64::from(CALLS)
        })
        .collect();
    let pool_count = pools.len();
    drop(view);

    // The fingerprint upkeep alone: the same changes on a bare section.
    let mut section: Section<PoolId, Pool> = Section::new(SectionKind::Pools.name());
    for i in 0..n {
        let pool = crate::records::pool(i, 4);
        section.upsert(pool.pool_id.clone(), pool);
    }
    let mut workers = vec![4u32; n];
    let warmup = options.reps.min(200);
    let mut upserts = Vec::with_capacity(options.reps);
    for rep in 0..warmup + options.reps {
        let batch: Vec<Pool> = (0..changes)
            .map(|j| {
                let i = ((rep * changes + j) * STRIDE) % n;
                workers[i] += 1;
                crate::records::pool(i, workers[i])
            })
            .collect();
        let started = Instant::now();
        for pool in batch {
            black_box(section.upsert(pool.pool_id.clone(), pool));
        }
        if rep >= warmup {
            upserts.push(report::us(started.elapsed()));
        }
    }
    drop(section);

    // Mixed kinds: clusters, exports of shared services (3 clusters each),
    // pools for the rest.
    let clusters = (n / 100).max(3);
    let exports = n * 9 / 100 / 3 * 3;
    let mut mixed = View::new(1000);
    for c in 0..clusters {
        mixed.apply(mk_cluster(&format!("c{c}"), 1, "controller", LEASE_UNTIL), NOW);
    }
    let cluster_of = |e: usize| {
        let service = e / 3;
        format!("c{}", (service + (e % 3) * (clusters / 3)) % clusters)
    };
    let export = |e: usize, g: u64| {
        let mut spec = mk_export_spec(1_700_000_000, vec![port("http", 80)]);
        let a = (g as usize * 31 + e) as u32;
        spec.endpoints[0].addresses = vec![IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | a))];
        mk_export(&cluster_of(e), &format!("svc-{}", e / 3), g, spec)
    };
    for e in 0..exports {
        mixed.apply(export(e, 1), NOW);
    }
    for i in 0..n.saturating_sub(clusters + exports) {
        mixed.apply(pool_record(i, 4, Version::new(1, "w"), NOW, LEASE_UNTIL), NOW);
    }
    let mixed_records = mixed.record_count();
    let imports = mixed.imports().len();
    let mut export_generations = vec![1u64; exports];
    let apply_exports = apply_batches(&mut mixed, options.reps, |rep| {
        (0..changes.min(exports))
            .map(|j| {
                let e = ((rep * changes + j) * STRIDE) % exports;
                export_generations[e] += 1;
                let record = export(e, export_generations[e]);
                debug_assert!(matches!(record.body, Body::Export(_)));
                record
            })
            .collect()
    });

    // Every pool renewing on time with renewals outside the change feed:
    // each poll's read of lease ends is empty and every lease is raised
    // (docs/design.md §6, "Renewals and the change feed").
    let mut renewing = View::new(1000);
    for record in renewing_pools(n, NOW) {
        renewing.apply(record, NOW);
    }
    let (refresh, lookback) = (REFRESH_MS, LOOKBACK_MS);
    let mut raised = 0;
    let confirm: Vec<f64> = (1..=60u64)
        .map(|poll| {
            let polled_at = NOW + poll * refresh;
            let window = lease_window(polled_at);
            let started = Instant::now();
            let confirmed = renewing.confirm_leases(&[], window, polled_at);
            let took = report::us(started.elapsed());
            raised += confirmed.extended;
            took
        })
        .collect();
    // Past the first lease, every lease is raised about once per
    // (horizon - two polls) / refresh polls.
    // The first leases end 20 s in: from poll 8 on, raises.
    const STEADY: usize = 15;
    let polls = confirm.len() - STEADY;
    let per_poll = raised as f64 / (confirm.len() - 8) as f64;
    anyhow::ensure!(raised >= n, "every lease raised at least once: {raised} raises");

    // 1% of the pools changed per poll, each poll's change stamps spanning
    // the lookback plus a refresh, as a registry at schema 5 reads them
    // (docs/design.md §6, "Reaching back for late changes"): the writes of
    // the earlier polls were offered to the view, the last refresh's not.
    let churn = (n / 100).max(1);
    let span = ((lookback + refresh) / refresh) as usize;
    let mut window: std::collections::VecDeque<Vec<Record>> = std::collections::VecDeque::new();
    let mut unseen = 0;
    let start_of = |poll: u64| NOW + 100 * refresh + poll * refresh;
    let reach: Vec<f64> = (0..60u64)
        .map(|poll| {
            let polled_at = start_of(poll);
            let fresh: Vec<Record> = (0..churn)
                .map(|j| {
                    let i = (poll as usize * churn + j) % n;
                    let at = polled_at - refresh + (j as u64 * refresh / churn as u64);
                    pool_record(i, 5, Version::new(poll + 2, "w"), at, at + 30_000)
                })
                .collect();
            window.push_back(fresh);
            if window.len() > span {
                window.pop_front();
            }
            let stamps: Vec<ChangeStamp> = window.iter().flatten().map(ChangeStamp::of).collect();
            let (watermark, reached) = (polled_at - refresh, polled_at - refresh - lookback);
            let started = Instant::now();
            let start = renewing.delta_start(&stamps, reached, watermark);
            let took = report::us(started.elapsed());
            unseen += start.unseen;
            for record in window.back().into_iter().flatten() {
                renewing.apply(record.clone(), polled_at);
            }
            took
        })
        .collect();
    anyhow::ensure!(unseen == 60 * churn, "each poll saw its own churn unseen: {unseen}");
    drop(renewing);

    let stats = |s: &[f64]| {
        Stats::of(s).unwrap_or(Stats { n: 0, min: 0.0, p50: 0.0, p99: 0.0, max: 0.0, mean: 0.0 })
    };
    let base = stats(&scratch);
    let rows = [
        (format!("fingerprint_from_scratch(), {pool_count} pools (baseline)"), base),
        (format!("fingerprint(), incremental, {pool_count} pools (per call)"), stats(&incremental)),
        (format!("apply {changes} pool changes, {n}-pool view"), stats(&apply)),
        (
            format!("  of which fingerprint upkeep: Section::upsert x{changes}, {n}-pool section"),
            stats(&upserts),
        ),
        (
            format!(
                "apply {changes} export changes, mixed view ({mixed_records} records: \
                 {clusters} clusters, {exports} exports of {imports} services, pools)"
            ),
            stats(&apply_exports),
        ),
        (
            format!(
                "confirm_leases, {n} pools renewing: empty read, {per_poll:.0} leases raised \
                 per poll ({polls} polls)"
            ),
            stats(&confirm[STEADY..]),
        ),
        (
            format!(
                "delta_start, {n} pools: {} change stamps of the window, {churn} unseen \
                 (1% changed per poll)",
                churn * span
            ),
            stats(&reach[span..]),
        ),
    ];
    let mut table =
        Table::new(&["operation", "samples", "p50 µs", "p99 µs", "max µs", "p50 vs baseline"]);
    for (what, s) in &rows {
        table.row(vec![
            what.clone(),
            s.n.to_string(),
            f(s.p50, 2),
            f(s.p99, 2),
            f(s.max, 2),
            ratio(s.p50 / base.p50),
        ]);
    }
    table.print();
    let p99_ms = rows[2].1.p99 / 1000.0;
    println!(
        "target: {changes} changes on a {n}-record view under 1 ms: p99 {} ms ({})",
        f(p99_ms, 3),
        verdict(p99_ms < 1.0)
    );
    report::end("view");
    Ok(())
}
