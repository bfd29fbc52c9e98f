//! `watch`: how soon a long-poll (`GET /v1/pools?watch=true` with
//! `If-None-Match`) answers after a write to the same registry process.
//!
//! Each round arms one watch, waits until the registry counts it as waiting
//! (`mcs_http_watchers` on the admin port), sends a registration that
//! changes one pool, and takes the time of the write's `2xx` and of the
//! watcher's `200` on one clock. The baseline is the write's own round trip.
//! The registry runs on the server CPUs, this process on the client CPUs.

use crate::cpu;
use crate::records::registration;
use crate::report::{self, Stats, Table, f, ratio, verdict};
use anyhow::{Context, bail, ensure};
use clap::Parser;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_NONE_MATCH};
use std::time::{Duration, Instant};

/// Options of `watch`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Measured writes (after 20 unmeasured).
    #[arg(long, default_value_t = 500)]
    pub writes: usize,
    /// Pools registered; each write changes one of them.
    #[arg(long, default_value_t = 100)]
    pub pools: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["watch"])
    }
}

/// Signed milliseconds from `from` to `to`.
fn signed_ms(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => report::ms(d),
        None => -report::ms(from.duration_since(to)),
    }
}

/// The long-poll's answer and when it had fully arrived.
struct Woken {
    at: Instant,
    etag: String,
    body: serde_json::Value,
}

async fn long_poll(http: reqwest::Client, url: String, etag: String) -> anyhow::Result<Woken> {
    let reply = http.get(url).header(IF_NONE_MATCH, &etag).send().await?;
    let status = reply.status();
    let etag = reply.headers().get(ETAG).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let bytes = reply.bytes().await?;
    let at = Instant::now();
    ensure!(status == StatusCode::OK, "the watch answered {status}, not 200");
    Ok(Woken { at, etag, body: serde_json::from_slice(&bytes)? })
}

/// Whether `body` serves pool `pool_id` with `workers` workers.
fn shows(body: &serde_json::Value, pool_id: &str, workers: u32) -> bool {
    body["pools"].as_array().is_some_and(|pools| {
        pools.iter().any(|p| p["pool_id"] == pool_id && p["capacity"]["workers"] == workers)
    })
}

/// Waits until the registry counts `n` open watches (its
/// `mcs_http_watchers` gauge), looking every `every`, at most `tries`
/// times. Shared with `watch-fanout`.
pub(crate) async fn watchers_reach(
    http: &reqwest::Client,
    admin: &str,
    n: u64,
    every: Duration,
    tries: u32,
) -> anyhow::Result<()> {
    for _ in 0..tries {
        let text = http.get(format!("{admin}/metrics")).send().await?.text().await?;
        let waiting = text
            .lines()
            .find_map(|l| l.strip_prefix("mcs_http_watchers "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if waiting >= n as f64 {
            return Ok(());
        }
        tokio::time::sleep(every).await;
    }
    bail!("{n} watches never waited at once")
}

/// Runs `watch`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin("watch", "long-poll wake-up after a write to the same registry");
    cpu::pin_self(&env.client_cpus)?;
    let result = measure(env, options).await;
    cpu::unpin_self()?;
    result?;
    report::end("watch");
    Ok(())
}

async fn measure(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    let long = ["--lease-duration-secs", "3600", "--heartbeat-interval-secs", "60"];
    let registry = env.start_registry(Some(&env.server_cpus), &long.map(str::to_owned)).await?;
    let writer = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let watcher = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let pools_url = format!("{}/v1/pools", registry.api_url());
    let pools = options.pools.max(1);
    for i in 0..pools {
        let reply = writer.post(&pools_url).json(&registration(i, 1, None)).send().await?;
        ensure!(reply.status().is_success(), "registering pool {i}: {}", reply.status());
    }
    let first = writer.get(&pools_url).send().await?;
    let mut etag =
        first.headers().get(ETAG).and_then(|v| v.to_str().ok()).context("an ETag")?.to_owned();
    let watch_url = format!("{pools_url}?watch=true&timeout_secs=60");
    let warmup = 20;
    let (mut write_ms, mut after_ack, mut after_send) = (Vec::new(), Vec::new(), Vec::new());
    let mut spurious = 0usize;
    for w in 0..warmup + options.writes {
        let i = w % pools;
        let workers = 1000 + w as u32;
        let pool_id = crate::records::pool_key(i).id().to_string();
        let mut watch = tokio::spawn(long_poll(watcher.clone(), watch_url.clone(), etag.clone()));
        watchers_reach(&writer, registry.admin_url(), 1, Duration::from_micros(200), 5000).await?;
        let sent = Instant::now();
        let reply = writer.post(&pools_url).json(&registration(i, workers, None)).send().await?;
        let acked = Instant::now();
        ensure!(reply.status().is_success(), "write {w}: {}", reply.status());
        let woken = loop {
            let woken = watch.await??;
            etag = woken.etag.clone();
            if shows(&woken.body, &pool_id, workers) {
                break woken;
            }
            // Woken by some other change: watch again for ours.
            spurious += 1;
            watch = tokio::spawn(long_poll(watcher.clone(), watch_url.clone(), etag.clone()));
        };
        if w >= warmup {
            write_ms.push(report::ms(acked - sent));
            after_ack.push(signed_ms(acked, woken.at));
            after_send.push(report::ms(woken.at - sent));
        }
    }
    registry.kill().await;

    let base = Stats::of(&write_ms).context("no samples")?;
    let mut table = Table::new(&[
        "measure",
        "samples",
        "p50 ms",
        "p99 ms",
        "max ms",
        "p50 vs baseline",
        "p99 vs baseline",
    ]);
    let rows = [
        ("POST /v1/pools, send to 2xx (baseline)", base),
        ("watcher 200 after the write's 2xx", Stats::of(&after_ack).context("no samples")?),
        ("watcher 200 after the write was sent", Stats::of(&after_send).context("no samples")?),
    ];
    for (what, s) in &rows {
        table.row(vec![
            (*what).to_owned(),
            s.n.to_string(),
            f(s.p50, 3),
            f(s.p99, 3),
            f(s.max, 3),
            ratio(s.p50 / base.p50),
            ratio(s.p99 / base.p99),
        ]);
    }
    table.print();
    println!(
        "{} pools, embedded storage; registry pinned to CPUs {}, this process (writer and \
         watcher, separate keep-alive connections) to CPUs {}; {spurious} wake-ups by other \
         changes. Negative: the watcher's 200 arrived before the writer's 2xx.",
        pools, env.server_cpus, env.client_cpus
    );
    let p99 = rows[1].1.p99;
    println!(
        "target: watch wake-up p99 under 10 ms after the write's 2xx: {} ms ({})",
        f(p99, 3),
        verdict(p99 < 10.0)
    );
    Ok(())
}
