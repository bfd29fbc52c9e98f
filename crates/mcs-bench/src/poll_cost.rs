//! `poll-cost`: read capacity per refresh of the delta reader
//! (`DynamoStore::read_changed_since`: one Query per shard of the `changes`
//! index) beside the full-scan reader (`DynamoStore::read_all`: a parallel,
//! strongly consistent Scan), on moto_server, at several table sizes.
//!
//! Both readers are the store's real code paths; they talk to moto through
//! the [`meter`], which sizes every page on the wire (moto reports a
//! constant capacity, see there). Time is virtual: the benchmark writes
//! records with chosen `changed_at_ms` values and asks for changes since a
//! chosen watermark, so a "refresh interval" costs no waiting.
//!
//! For each size: idle deltas, then churn (a share of the records rewritten
//! per refresh interval, for as many intervals as the reader's window
//! spans), deltas again, the full scan, and finally every record
//! heartbeating (rewritten at the same version within one heartbeat
//! interval, as renewals are) and deltas once more.
//!
//! Then the design of docs/design.md §6 ("Renewals and the change feed"):
//! every record renewed within the last heartbeat interval with its
//! `changed_at_ms` kept, read by the poll that design makes (the `changes`
//! index over the reader's window plus one Query per shard of `lease_ends`
//! for the leases ending within the horizon), beside the idle poll of an
//! unchanging table; then the same with churn on top, beside the full
//! scan. Last, the write units of one renewal, today's and the design's,
//! index writes included, from the item sizes on the wire.

mod load;
mod meter;

use crate::records::{now_ms, pool_record};
use crate::report::{self, Table, f, ratio, verdict};
use anyhow::{Context, bail, ensure};
use aws_sdk_dynamodb::Client;
use clap::Parser;
use mcs_core::{Record, Version, View};
use mcs_store::metrics::READ_OPS;
use mcs_store::{DynamoConfig, DynamoStore, PutOutcome, Store, StoreError};
use mcs_testkit::dynamo::{self, unique_name};
use mcs_testkit::metrics::MemoryRecorder;
use meter::Meter;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Options of `poll-cost`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Table sizes, ascending: the table grows from one to the next.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    pub sizes: Vec<usize>,
    /// Records changed per refresh interval, in percent of the table.
    #[arg(long, default_value_t = 1.0)]
    pub churn_percent: f64,
    /// The reader's refresh interval (the registry's default).
    #[arg(long, default_value_t = 2000)]
    pub refresh_ms: u64,
    /// The reader's lookback behind its watermark (the registry's default).
    #[arg(long, default_value_t = 10_000)]
    pub lookback_ms: u64,
    /// Heartbeat interval of the heartbeating rows (the registry's default).
    #[arg(long, default_value_t = 10)]
    pub heartbeat_secs: u64,
    /// Lease duration of the heartbeating rows (the registry's default).
    #[arg(long, default_value_t = 30)]
    pub lease_secs: u64,
    /// The reader's skew allowance (the registry's default).
    #[arg(long, default_value_t = 1000)]
    pub skew_ms: u64,
    /// Conditional puts in flight while churning.
    #[arg(long, default_value_t = 8)]
    pub put_concurrency: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["poll-cost"])
    }
}

const WRITER: &str = "bench-writer";
const HOUR_MS: u64 = 3_600_000;

/// What one read cost.
#[derive(Debug, Clone, Default)]
struct Reading {
    records: usize,
    requests: usize,
    items: usize,
    bytes: u64,
    units: f64,
    moto_units: f64,
    elapsed: Duration,
}

impl std::ops::AddAssign for Reading {
    fn add_assign(&mut self, other: Reading) {
        self.records += other.records;
        self.requests += other.requests;
        self.items += other.items;
        self.bytes += other.bytes;
        self.units += other.units;
        self.moto_units += other.moto_units;
        self.elapsed += other.elapsed;
    }
}

/// Mean sizes of items and of their index entries, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Sizes {
    item: f64,
    lease_ends: f64,
    stamps: f64,
}

/// How a registry's delta poll reads changes.
#[derive(Debug, Clone, Copy)]
enum Poll {
    /// The changes since the last poll only: the least any reader reads.
    SinceLast,
    /// The changes since the last poll less the lookback (schema 3).
    Lookback,
    /// The change stamps since the last poll less the lookback, then the
    /// changes from the earliest write the view has not seen (schema 5).
    Stamps,
}

/// The state of one benchmark run.
struct Bench {
    store: DynamoStore,
    direct: Client,
    table: String,
    meter: Meter,
    recorder: &'static MemoryRecorder,
    options: Options,
}

impl Bench {
    fn moto_units(&self) -> f64 {
        READ_OPS
            .iter()
            .map(|op| {
                let id =
                    format!("{}{{op={op}}}", mcs_store::metrics::READ_CAPACITY_MILLIUNITS_TOTAL);
                self.recorder.counter(&id) as f64 / 1000.0
            })
            .sum()
    }

    /// Read requests the store itself counted.
    fn store_requests(&self) -> u64 {
        READ_OPS
            .iter()
            .map(|op| {
                self.recorder.counter(&format!(
                    "{}{{op={op},outcome=ok}}",
                    mcs_store::metrics::REQUESTS_TOTAL
                ))
            })
            .sum()
    }

    /// Runs one read and sizes what crossed the wire for it.
    async fn measure<F, T>(&self, read: F) -> anyhow::Result<Reading>
    where
        F: Future<Output = Result<Vec<T>, StoreError>>,
    {
        Ok(self.measure_kept(read).await?.1)
    }

    /// [`Bench::measure`], keeping what the read returned.
    async fn measure_kept<F, T>(&self, read: F) -> anyhow::Result<(Vec<T>, Reading)>
    where
        F: Future<Output = Result<Vec<T>, StoreError>>,
    {
        self.meter.take_pages();
        let moto_before = self.moto_units();
        let requests_before = self.store_requests();
        let started = Instant::now();
        let records = read.await.context("a read of the store")?;
        let elapsed = started.elapsed();
        let pages = self.meter.take_pages();
        let counted = self.store_requests() - requests_before;
        ensure!(
            counted == pages.len() as u64,
            "the store counted {counted} read requests, the meter saw {}",
            pages.len()
        );
        let reading = Reading {
            records: records.len(),
            requests: pages.len(),
            items: pages.iter().map(|p| p.items).sum(),
            bytes: pages.iter().map(|p| p.bytes).sum(),
            units: pages.iter().map(meter::Page::read_units).sum(),
            moto_units: self.moto_units() - moto_before,
            elapsed,
        };
        Ok((records, reading))
    }

    /// A registry's delta poll at `now` (crates/mcs-registry/src/reader.rs),
    /// one refresh after the last (its watermark), made as `poll` says,
    /// with `view` as what the registry has read: the reads of changes
    /// (and of change stamps) then the lease ends to the horizon.
    async fn design_poll(&self, now: u64, poll: Poll, view: &mut View) -> anyhow::Result<Reading> {
        let o = &self.options;
        let watermark = now - o.refresh_ms;
        let reached = watermark - o.lookback_ms;
        let mut reading = Reading::default();
        let since = match poll {
            Poll::SinceLast => Some(watermark),
            Poll::Lookback => Some(reached),
            Poll::Stamps => {
                let read = self.store.read_change_stamps(reached + 1, u64::MAX);
                let (stamps, units) = self.measure_kept(read).await?;
                reading += units;
                let start = view.delta_start(&stamps, reached, watermark);
                ensure!(start.late == 0, "{} writes read as late in virtual time", start.late);
                start.since_ms
            }
        };
        if let Some(since) = since {
            reading += self.measure(self.store.read_changed_since(since)).await?;
        }
        let horizon = mcs_core::LeasePolicy::new(o.lease_secs, o.heartbeat_secs)
            .map_err(anyhow::Error::msg)?
            .horizon_ms(o.skew_ms, o.refresh_ms, o.lookback_ms);
        reading += self.measure(self.store.read_lease_ends(reached, now + horizon)).await?;
        Ok(reading)
    }

    /// Writes `records` fast: the store encodes each (its `put`, captured by
    /// the meter), then BatchWriteItem stores the encoded items. Returns
    /// the mean sizes, by DynamoDB's rules, of the encoded items and of
    /// their index entries.
    async fn load(&self, records: Vec<Record>) -> anyhow::Result<Sizes> {
        let count = records.len();
        let started = Instant::now();
        self.meter.take_captured();
        self.meter.set_capture(true);
        let encoded = self.put_all(records).await;
        self.meter.set_capture(false);
        encoded?;
        let items = self.meter.take_captured();
        ensure!(items.len() == count, "captured {} items of {count}", items.len());
        // What each index projects (docs/design.md §3): the table's keys,
        // the index's keys and its projected attributes.
        const LEASE_ENDS: [&str; 6] = ["pk", "sk", "shard", "lease_until_ms", "gen", "writer"];
        const STAMPS: [&str; 4] = ["pk", "sk", "shard", "c"];
        let entry = |item: &meter::JsonItem, names: &[&str]| {
            let projected: meter::JsonItem = item
                .iter()
                .filter(|(name, _)| names.contains(&name.as_str()))
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            meter::item_size(&projected)
        };
        let mut sizes = Sizes::default();
        for item in &items {
            sizes.item += meter::item_size(item) as f64;
            sizes.lease_ends += entry(item, &LEASE_ENDS) as f64;
            sizes.stamps += entry(item, &STAMPS) as f64;
        }
        load::batch_write(&self.direct, &self.table, items, 4).await?;
        eprintln!("poll-cost: loaded {count} records in {:.1} s", started.elapsed().as_secs_f64());
        let n = count.max(1) as f64;
        Ok(Sizes {
            item: sizes.item / n,
            lease_ends: sizes.lease_ends / n,
            stamps: sizes.stamps / n,
        })
    }

    /// Conditional puts of `records` through the store, some in flight at
    /// once; each must be applied.
    async fn put_all(&self, records: Vec<Record>) -> anyhow::Result<()> {
        let now = now_ms();
        let mut tasks = JoinSet::new();
        let in_flight = self.options.put_concurrency.max(1);
        for record in records {
            if tasks.len() >= in_flight
                && let Some(done) = tasks.join_next().await
            {
                done??;
            }
            let store = self.store.clone();
            tasks.spawn(async move {
                match store.put(&record, now).await? {
                    PutOutcome::Applied => Ok::<_, anyhow::Error>(()),
                    other => bail!("put of {} not applied: {other:?}", record.key),
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        Ok(())
    }
}

/// Content changes spread over the reader's window: `per_round` records
/// rewritten at a new generation in each of `rounds` refresh intervals.
struct Churn {
    rounds: usize,
    per_round: usize,
    refresh: u64,
}

impl Churn {
    /// The changes of the window ending at `t`, taking records round robin
    /// from `cursor` and bumping their `generations`; `lease_until` gives
    /// each change's lease end from its write time.
    fn records(
        &self,
        t: u64,
        cursor: &mut usize,
        generations: &mut [u64],
        lease_until: impl Fn(u64) -> u64,
    ) -> Vec<Record> {
        let n = generations.len();
        let mut churn = Vec::with_capacity(self.per_round * self.rounds);
        for round in 0..self.rounds {
            for j in 0..self.per_round {
                let i = *cursor % n;
                *cursor += 1;
                generations[i] += 1;
                let g = generations[i];
                let changed = t
                    - round as u64 * self.refresh
                    - (j as u64 * self.refresh / self.per_round as u64);
                let version = Version::new(g, WRITER);
                churn.push(pool_record(i, 4 + g as u32, version, changed, lease_until(changed)));
            }
        }
        churn
    }
}

/// Runs `poll-cost`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin("poll-cost", "read capacity units per refresh, delta reader vs full scan");
    let endpoint = env.endpoint()?;
    let mut sizes = options.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    ensure!(!sizes.is_empty(), "no --sizes");
    let recorder = MemoryRecorder::global();
    mcs_store::metrics::describe();
    let meter = Meter::start(endpoint).await?;
    let direct = Client::new(&dynamo::sdk_config(Some(endpoint), dynamo::REGION).await);
    let table = unique_name("mcs-bench-poll");
    mcs_store::dynamo::migrate(&direct, &table).await.context("migrating the table")?;
    let mut config = DynamoConfig::new(table.clone());
    config.region = Some("us-east-1".into());
    config.endpoint = Some(meter.url.clone());
    // moto answers a 100k-item query in seconds, one request at a time: no
    // attempt may time out and be retried (the meter would count it twice).
    config.attempt_timeout = Duration::from_secs(600);
    config.operation_timeout = Duration::from_secs(3000);
    config.max_attempts = 1;
    let store = DynamoStore::from_sdk_config(
        &dynamo::sdk_config(Some(&meter.url), dynamo::REGION).await,
        config,
    )?;
    store.ensure_schema().await.context("reading the table's schema")?;
    ensure!(store.renewals_keep_changed_at(), "the benchmark's table renews in place");
    let bench = Bench { store, direct, table, meter, recorder, options: options.clone() };

    let refresh = options.refresh_ms;
    let window = refresh + options.lookback_ms;
    let heartbeat_ms = options.heartbeat_secs * 1000;
    // Intervals of churn the reader's window spans.
    let rounds = window.div_ceil(refresh) as usize;
    let v0 = now_ms();
    let lease_until = now_ms() + 24 * HOUR_MS;
    let mut generations: Vec<u64> = Vec::new();
    let mut cursor = 0usize;
    let mut table_rows = Table::new(&[
        "records",
        "reader",
        "changes since",
        "returned",
        "requests",
        "KiB read",
        "RCU",
        "moto RCU",
        "vs full scan",
        "moto ms",
    ]);
    let mut idle_units = Vec::new();
    let mut largest = None;
    let mut design = Vec::new();
    let mut design_largest = None;
    let mut renewal_rows = Table::new(&[
        "records",
        "item B",
        "lease_ends entry B",
        "change_stamps entry B",
        "WCU/renewal before",
        "schema 2",
        "schema 3 and 5 (in place)",
        "WCU/content change, schema 3",
        "schema 5",
    ]);
    for (stage, &n) in sizes.iter().enumerate() {
        let t = v0 + (stage as u64 + 1) * HOUR_MS;
        let loaded = generations.len();
        let fresh: Vec<Record> = (loaded..n)
            .map(|i| pool_record(i, 4, Version::new(1, WRITER), t - HOUR_MS / 2, lease_until))
            .collect();
        bench.load(fresh).await?;
        generations.resize(n, 1);

        let idle = bench.measure(bench.store.read_changed_since(t - refresh)).await?;
        let idle_window = bench.measure(bench.store.read_changed_since(t - window)).await?;
        ensure!(idle.records == 0 && idle_window.records == 0, "idle deltas returned records");

        let per_round = ((n as f64 * options.churn_percent / 100.0).ceil() as usize).clamp(1, n);
        ensure!(per_round * rounds <= n, "churn of {rounds} intervals exceeds the table");
        let churn =
            Churn { rounds, per_round, refresh }
                .records(t, &mut cursor, &mut generations, |_| lease_until);
        let started = Instant::now();
        bench.put_all(churn).await?;
        eprintln!(
            "poll-cost: {} conditional puts of churn in {:.1} s",
            per_round * rounds,
            started.elapsed().as_secs_f64()
        );
        let churned = bench.measure(bench.store.read_changed_since(t - refresh)).await?;
        let churned_window = bench.measure(bench.store.read_changed_since(t - window)).await?;
        let full = bench.measure(bench.store.read_all()).await?;
        ensure!(full.records == n, "the full read returned {} records of {n}", full.records);

        // Every record renewed once within the last heartbeat interval.
        let th = t + HOUR_MS / 4;
        let beats: Vec<Record> = (0..n)
            .map(|i| {
                let g = generations[i];
                let changed = th - (i as u64 * heartbeat_ms / n as u64);
                pool_record(
                    i,
                    4 + g as u32,
                    Version::new(g, WRITER),
                    changed,
                    lease_until + HOUR_MS,
                )
            })
            .collect();
        bench.load(beats).await?;
        let beating = bench.measure(bench.store.read_changed_since(th - refresh)).await?;
        let beating_window = bench.measure(bench.store.read_changed_since(th - window)).await?;

        // The design: every record renewed within the last heartbeat
        // interval with its changed_at_ms kept (its content last changed
        // before the reader's window), read by the design's poll.
        let tk = t + HOUR_MS / 2;
        let lease_ms = options.lease_secs * 1000;
        let kept: Vec<Record> = (0..n)
            .map(|i| {
                let g = generations[i];
                let renewed = tk - (i as u64 * heartbeat_ms / n as u64);
                pool_record(i, 4 + g as u32, Version::new(g, WRITER), th + 1, renewed + lease_ms)
            })
            .collect();
        // Loaded in batches for speed; the registry's own renewals
        // (`Store::renew`, one UpdateItem each) leave items in the same
        // state, as a sample renewed through it shows: changed_at kept,
        // lease ends moved out of the window.
        let sample: Vec<Record> = kept.iter().take(32).cloned().collect();
        // What the registry has read: every record as loaded (a full read),
        // then the churn below (its delta polls).
        let mut view = View::new(options.skew_ms);
        for record in &kept {
            view.apply(record.clone(), tk);
        }
        let sizes_kept = bench.load(kept).await?;
        for record in sample {
            let later = Record {
                lease_until_ms: record.lease_until_ms.map(|u| u + heartbeat_ms),
                ..record
            };
            let kept_at = bench.store.renew(&later, tk).await?;
            ensure!(kept_at == Some(th + 1), "a renewal in place kept changed_at: {kept_at:?}");
        }
        let kept_lookback = bench.design_poll(tk, Poll::Lookback, &mut view).await?;
        let kept_idle = bench.design_poll(tk, Poll::Stamps, &mut view).await?;
        ensure!(
            kept_idle.records == 0 && kept_lookback.records == 0,
            "renewals that keep changed_at were read"
        );
        // Then content churn on top, as in the churn above: the view has
        // read all of it but the last refresh's.
        let churn = Churn { rounds, per_round, refresh }.records(
            tk,
            &mut cursor,
            &mut generations,
            |changed| changed + lease_ms,
        );
        for record in churn.iter().filter(|r| r.changed_at_ms <= tk - refresh) {
            view.apply(record.clone(), tk);
        }
        bench.load(churn).await?;
        let kept_churned = bench.design_poll(tk, Poll::SinceLast, &mut view).await?;
        let kept_churned_window = bench.design_poll(tk, Poll::Lookback, &mut view).await?;
        let stamped_churn = bench.design_poll(tk, Poll::Stamps, &mut view).await?;
        renewal_rows.row(renewal_row(n, sizes_kept));

        let churn_label = format!("delta, {}% changed per refresh", options.churn_percent);
        let beat_label = format!("delta, all heartbeating every {} s", options.heartbeat_secs);
        let kept_label = |schema: u32| {
            format!(
                "schema {schema}: all heartbeating every {} s, changed_at kept",
                options.heartbeat_secs
            )
        };
        let kept_churn_label =
            |schema: u32| format!("schema {schema}: that + {}% changed", options.churn_percent);
        let lease_ends = |since: u64| format!("{} s ago + lease_ends", since as f64 / 1e3);
        let stamps = format!("stamps {} s + lease_ends", window as f64 / 1e3);
        let rows: [(String, String, &Reading); 12] = [
            ("full scan (baseline)".into(), "-".to_owned(), &full),
            ("delta, idle".into(), format!("{} s ago", refresh as f64 / 1e3), &idle),
            ("delta, idle".into(), format!("{} s ago", window as f64 / 1e3), &idle_window),
            (churn_label.clone(), format!("{} s ago", refresh as f64 / 1e3), &churned),
            (churn_label, format!("{} s ago", window as f64 / 1e3), &churned_window),
            (beat_label.clone(), format!("{} s ago", refresh as f64 / 1e3), &beating),
            (beat_label, format!("{} s ago", window as f64 / 1e3), &beating_window),
            (kept_label(3), lease_ends(window), &kept_lookback),
            (kept_label(5), stamps.clone(), &kept_idle),
            (kept_churn_label(5), lease_ends(refresh), &kept_churned),
            (kept_churn_label(3), lease_ends(window), &kept_churned_window),
            (kept_churn_label(5), stamps, &stamped_churn),
        ];
        for (reader, since, r) in rows {
            table_rows.row(vec![
                n.to_string(),
                reader,
                since,
                r.records.to_string(),
                r.requests.to_string(),
                f(r.bytes as f64 / 1024.0, 1),
                f(r.units, 1),
                f(r.moto_units, 1),
                ratio(r.units / full.units),
                f(report::ms(r.elapsed), 0),
            ]);
        }
        eprintln!(
            "poll-cost: {n} records: mean item size {:.0} B (DynamoDB rules)",
            full.bytes as f64 / full.items.max(1) as f64
        );
        idle_units.push((n, idle.units, idle_window.units));
        design.push((n, kept_idle.units / idle_window.units));
        ensure!(kept_lookback.units >= idle_window.units, "a poll costs at least the idle one");
        largest = Some((n, full.units, churned.units, churned_window.units));
        design_largest = Some((
            n,
            kept_churned.units / full.units,
            kept_churned_window.units / full.units,
            stamped_churn.units / full.units,
        ));
    }
    table_rows.print();
    println!(
        "RCU: computed from the items on the wire by DynamoDB's rules (moto reports a constant \
         1.0 per request: column \"moto RCU\"). Delta = one eventually consistent Query per shard \
         ({} shards) of the GSI, 0.5 RCU per 4 KB, at least 0.5 per Query; full scan = strongly \
         consistent parallel Scan ({} segments), 1 RCU per 4 KB per page. The registry polls \
         changes since its last poll minus --lookback-ms: with the defaults ({} ms refresh, {} ms \
         lookback) that is the {} s row.",
        mcs_store::dynamo::SHARDS,
        DynamoConfig::new("t").scan_segments,
        refresh,
        options.lookback_ms,
        window as f64 / 1e3
    );
    let flat = idle_units.iter().all(|(_, a, b)| *a == idle_units[0].1 && *b == idle_units[0].1);
    let idle_list: Vec<String> =
        idle_units.iter().map(|(n, a, _)| format!("{n}: {a} RCU")).collect();
    println!(
        "target: idle poll cost flat across sizes ({}): {}",
        idle_list.join(", "),
        verdict(flat)
    );
    if let Some((n, full, exact, window_units)) = largest {
        println!(
            "target: delta at most 1/100 of the full scan at {n} records, {}% churn: \
             changes since the last poll {} ({}), with the reader's lookback {} ({})",
            options.churn_percent,
            ratio(exact / full),
            verdict(exact / full <= 0.01),
            ratio(window_units / full),
            verdict(window_units / full <= 0.01),
        );
    }
    let kept_list: Vec<String> =
        design.iter().map(|(n, r)| format!("{n}: {}", ratio(*r))).collect();
    println!(
        "target: schema 5 poll, all heartbeating, at most 2x the idle poll of an unchanging \
         table (both over the reader's window): {}: {}",
        kept_list.join(", "),
        verdict(design.iter().all(|(_, r)| *r <= 2.0))
    );
    if let Some((n, exact, window_units, stamped)) = design_largest {
        println!(
            "target: a poll with {}% churn at most 0.01x the full scan at {n} records: since the \
             last poll {} ({}), schema 3 with the reader's lookback {} ({}), schema 5 with change \
             stamps {} ({})",
            options.churn_percent,
            ratio(exact),
            verdict(exact <= 0.01),
            ratio(window_units),
            verdict(window_units <= 0.01),
            ratio(stamped),
            verdict(stamped <= 0.01),
        );
    }
    renewal_rows.print();
    println!(
        "WCU per write of one item in one replica (each replica of a global table pays the \
         same again), from the sizes above: the item, 1 per KB; the changes index (ALL \
         projection) 2 entries of the item's size when changed_at_ms moves (its sort key: \
         delete + put), 1 when only projected attributes change (lease_until_ms, ttl); the \
         lease_ends index 2 entries (its sort key moves); the change_stamps index (keys only) \
         2 entries when c moves (a content change), none on a renewal in place."
    );
    report::end("poll-cost");
    Ok(())
}

/// One row of the write cost table, from the mean `sizes`: per renewal,
/// the item rewritten (before), plus the `lease_ends` entry moved (schema
/// 2), in place (the item and the `lease_ends` entry; `changes` gets the
/// new `lease_until_ms` and `ttl`, `change_stamps` nothing); per content
/// change, the item, its `changes` entry moved, its `lease_ends` entry
/// moved, and from schema 5 its `change_stamps` entry moved.
fn renewal_row(n: usize, sizes: Sizes) -> Vec<String> {
    let kb = |bytes: f64| (bytes / 1024.0).ceil().max(1.0);
    let (item, entry, stamp) = (kb(sizes.item), kb(sizes.lease_ends), kb(sizes.stamps));
    let content = 3.0 * item + 2.0 * entry;
    vec![
        n.to_string(),
        f(sizes.item, 0),
        f(sizes.lease_ends, 0),
        f(sizes.stamps, 0),
        f(3.0 * item, 0),
        f(3.0 * item + 2.0 * entry, 0),
        f(2.0 * item + 2.0 * entry, 0),
        f(content, 0),
        f(content + 2.0 * stamp, 0),
    ]
}
