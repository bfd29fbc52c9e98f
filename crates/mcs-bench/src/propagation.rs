//! `propagation`: write→visible between registry processes.
//!
//! ```text
//!  same region:   bench ─POST─► registry A ─► table (us-east-1) ◄─poll─ registry B ◄─watch─ bench
//!  cross region:  bench ─POST─► registry A ─► table (us-east-1) ─stream─► replicator
//!                   ─► table (eu-west-1) ◄─poll─ registry B ◄─watch─ bench
//! ```
//!
//! Writes go to A at irregular gaps (so they fall at every phase of B's
//! poll cycle); a long-poll on B notes when each pool first appears. The
//! baseline is the refresh interval: a write becomes visible on B at B's
//! next poll after it lands, so half an interval is the expected median
//! and a whole one the bound (plus the poll's own time, and for the second
//! case the replicator's stream polling). The replicator is the
//! multi-region tests' (`mcs_testkit::multiregion`), run at zero delay.

use crate::records::registration;
use crate::report::{self, Stats, Table, f, ratio};
use anyhow::{Context, ensure};
use clap::Parser;
use mcs_api::Lease;
use mcs_testkit::RegistryProcess;
use mcs_testkit::dynamo::{self, unique_name};
use mcs_testkit::multiregion::replicator;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_NONE_MATCH};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `propagation`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Measured writes per scenario.
    #[arg(long, default_value_t = 200)]
    pub writes: usize,
    /// The registries' --refresh-interval-ms (the registry's default).
    #[arg(long, default_value_t = 2000)]
    pub refresh_ms: u64,
    /// Shortest gap between writes, ms.
    #[arg(long, default_value_t = 100)]
    pub min_gap_ms: u64,
    /// Longest gap between writes, ms.
    #[arg(long, default_value_t = 400)]
    pub max_gap_ms: u64,
    /// Skip the cross-region scenario.
    #[arg(long)]
    pub same_region_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["propagation"])
    }
}

const A: &str = "us-east-1";
const B: &str = "eu-west-1";

/// When each pool id was first seen by the watcher.
type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Long-polls `url` for ever, noting when each pool first appears.
async fn watch_pools(url: String, seen: Seen) {
    let http = reqwest::Client::new();
    let mut etag = String::from("\"none\"");
    loop {
        let reply = http
            .get(format!("{url}?watch=true&timeout_secs=30"))
            .header(IF_NONE_MATCH, &etag)
            .send()
            .await;
        let Ok(reply) = reply else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if reply.status() != StatusCode::OK {
            continue;
        }
        let tag = reply.headers().get(ETAG).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let Ok(bytes) = reply.bytes().await else { continue };
        let at = Instant::now();
        let Ok(body) = serde_json::from_slice::<serde_json::Value>(&bytes) else { continue };
        if let Some(tag) = tag {
            etag = tag;
        }
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        for pool in body["pools"].as_array().into_iter().flatten() {
            if let Some(id) = pool["pool_id"].as_str() {
                seen.entry(id.to_owned()).or_insert(at);
            }
        }
    }
}

/// A small deterministic generator for the gaps (SplitMix64).
fn gap(options: &Options, w: usize) -> Duration {
    let mut z = (w as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let span = options.max_gap_ms.saturating_sub(options.min_gap_ms) + 1;
    Duration::from_millis(options.min_gap_ms + z % span)
}

/// Per write: POST latency, visible after the 2xx, visible after the send;
/// and, from the registries' own metrics, the mean time of B's delta polls
/// and of A's storage writes.
struct Samples {
    post: Vec<f64>,
    after_ack: Vec<f64>,
    after_send: Vec<f64>,
    missing: usize,
    reader_poll_ms: Option<f64>,
    writer_put_ms: Option<f64>,
}

/// The mean in ms of histogram `name` (seconds) for series `labels` (as
/// the exposition writes them, e.g. `mode="delta"`), from a registry's
/// `/metrics`.
async fn mean_ms(admin: &str, name: &str, labels: &str) -> Option<f64> {
    let text = reqwest::get(format!("{admin}/metrics")).await.ok()?.text().await.ok()?;
    let value = |suffix: &str| -> Option<f64> {
        let prefix = format!("{name}_{suffix}{{{labels}}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
    };
    let (sum, count) = (value("sum")?, value("count")?);
    (count > 0.0).then(|| 1e3 * sum / count)
}

/// Writes to `writer`, watches `reader`; `first` offsets pool numbers so
/// scenarios on one server never share pools.
async fn measure(
    options: &Options,
    writer: &RegistryProcess,
    reader: &RegistryProcess,
    first: usize,
) -> anyhow::Result<Samples> {
    let seen: Seen = Arc::default();
    let watcher = tokio::spawn(watch_pools(format!("{}/v1/pools", reader.api_url()), seen.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/pools", writer.api_url());
    let lease = Lease::new(3600, 60).ok();
    let mut writes = Vec::with_capacity(options.writes);
    for w in 0..options.writes {
        tokio::time::sleep(gap(options, w)).await;
        let i = first + w;
        let sent = Instant::now();
        let reply = http.post(&url).json(&registration(i, 4, lease)).send().await?;
        let acked = Instant::now();
        ensure!(reply.status().is_success(), "write {w}: {}", reply.status());
        writes.push((crate::records::pool_key(i).id().to_string(), sent, acked));
    }
    let deadline =
        Instant::now() + Duration::from_millis(3 * options.refresh_ms) + Duration::from_secs(20);
    while Instant::now() < deadline {
        let all = {
            let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            writes.iter().all(|(id, _, _)| seen.contains_key(id))
        };
        if all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watcher.abort();
    let reader_poll_ms =
        mean_ms(reader.admin_url(), "mcs_reader_poll_duration_seconds", "mode=\"delta\"").await;
    let writer_put_ms =
        mean_ms(writer.admin_url(), "mcs_store_request_duration_seconds", "op=\"put\"").await;
    let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
    let mut samples = Samples {
        post: Vec::new(),
        after_ack: Vec::new(),
        after_send: Vec::new(),
        missing: 0,
        reader_poll_ms,
        writer_put_ms,
    };
    for (id, sent, acked) in &writes {
        samples.post.push(report::ms(*acked - *sent));
        match seen.get(id) {
            Some(at) => {
                let after_ack = match at.checked_duration_since(*acked) {
                    Some(d) => report::ms(d),
                    None => -report::ms(acked.duration_since(*at)),
                };
                samples.after_ack.push(after_ack);
                samples.after_send.push(report::ms(at.saturating_duration_since(*sent)));
            }
            None => samples.missing += 1,
        }
    }
    Ok(samples)
}

/// Registry flags for region `region` of `table`, refreshing every
/// `refresh_ms`.
fn registry_flags(endpoint: &str, region: &str, table: &str, refresh_ms: u64) -> Vec<String> {
    let mut flags = dynamo::registry_args_in(endpoint, region, table);
    flags.extend(["--refresh-interval-ms".to_owned(), refresh_ms.to_string()]);
    flags
}

/// The cross-region scenario: one table per region, the replicator between
/// them at zero delay, a registry in each. Returns the samples and what the
/// replicator did.
async fn cross_region(
    env: &crate::Env,
    options: &Options,
    endpoint: &str,
) -> anyhow::Result<(Samples, String)> {
    let table = unique_name("mcs-bench-xreg");
    for region in [A, B] {
        mcs_store::dynamo::migrate(&dynamo::client(endpoint, region), &table).await?;
    }
    let replicator = replicator::Replicator::start(endpoint, &table, &[A, B], 7).await;
    let flags = |region| registry_flags(endpoint, region, &table, options.refresh_ms);
    let a = env.start_registry(None, &flags(A)).await?;
    let b = env.start_registry(None, &flags(B)).await?;
    let samples = measure(options, &a, &b, 1_000_000).await?;
    let stats = replicator.stats();
    drop(replicator);
    a.kill().await;
    b.kill().await;
    let summary = format!(
        "replicator: {} read, {} applied, {} superseded, {} errors; stream polled at {:?} when idle",
        stats.read,
        stats.applied,
        stats.superseded,
        stats.errors,
        replicator::POLL_INTERVAL
    );
    Ok((samples, summary))
}

/// Runs `propagation`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin("propagation", "write→visible between two registries");
    let endpoint = env.endpoint()?;
    let flags = |region, table: &str| registry_flags(endpoint, region, table, options.refresh_ms);

    // Same region: two processes on one table.
    let table = unique_name("mcs-bench-prop");
    mcs_store::dynamo::migrate(&dynamo::client(endpoint, A), &table).await?;
    let a1 = env.start_registry(None, &flags(A, &table)).await?;
    let a2 = env.start_registry(None, &flags(A, &table)).await?;
    let same = measure(options, &a1, &a2, 0).await?;
    a1.kill().await;
    a2.kill().await;

    let cross = if options.same_region_only {
        None
    } else {
        Some(cross_region(env, options, endpoint).await?)
    };

    let base = options.refresh_ms as f64;
    let mut table = Table::new(&[
        "scenario",
        "measure",
        "samples",
        "p50 ms",
        "p99 ms",
        "max ms",
        "p50 vs refresh",
        "p99 vs refresh",
    ]);
    table.row(vec![
        "-".into(),
        "refresh interval (baseline)".to_owned(),
        "-".into(),
        f(base, 0),
        f(base, 0),
        "-".into(),
        ratio(1.0),
        ratio(1.0),
    ]);
    let mut add = |scenario: &str, s: &Samples| -> anyhow::Result<()> {
        for (what, samples) in [
            ("POST to A, send to 2xx", &s.post),
            ("visible on B after A's 2xx", &s.after_ack),
            ("visible on B after the send", &s.after_send),
        ] {
            let st = Stats::of(samples).context("no samples")?;
            // The write's own latency is context, not a propagation figure.
            let vs = |v: f64| {
                if std::ptr::eq(samples, &s.post) { "-".to_owned() } else { ratio(v / base) }
            };
            table.row(vec![
                scenario.to_owned(),
                what.to_owned(),
                st.n.to_string(),
                f(st.p50, 1),
                f(st.p99, 1),
                f(st.max, 1),
                vs(st.p50),
                vs(st.p99),
            ]);
        }
        Ok(())
    };
    add("same region (2 processes, 1 table)", &same)?;
    if let Some((samples, _)) = &cross {
        add(&format!("cross region ({A} → {B}, replicator at zero delay)"), samples)?;
    }
    table.print();
    let means = |s: &Samples| {
        let ms = |v: Option<f64>| v.map_or_else(|| "?".to_owned(), |v| format!("{v:.0} ms"));
        format!(
            "B's delta poll {}, A's storage write {}",
            ms(s.reader_poll_ms),
            ms(s.writer_put_ms)
        )
    };
    println!(
        "mean times from the registries' metrics: same region: {}{}",
        means(&same),
        cross.as_ref().map(|(s, _)| format!("; cross region: {}", means(s))).unwrap_or_default()
    );
    println!(
        "--refresh-interval-ms {} on both registries, other flags default (lookback 10 s, full \
         resync 300 s); storage: moto_server; writes at gaps of {}–{} ms; never visible: same \
         region {}{}.",
        options.refresh_ms,
        options.min_gap_ms,
        options.max_gap_ms,
        same.missing,
        cross
            .as_ref()
            .map(|(s, summary)| format!(", cross region {} ({summary})", s.missing))
            .unwrap_or_default()
    );
    report::end("propagation");
    Ok(())
}
