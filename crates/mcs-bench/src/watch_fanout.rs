//! `watch-fanout`: N watchers of a 100-pool list, one write, and the time
//! from the write's `2xx` to the last watcher's answer, for long-polls
//! (`?watch=true`, each woken with the whole list) and for event streams
//! (`?watch=events`, each sent the one encoded batch) in the same run.
//!
//! For each N, one registry (pinned to the server CPUs) serves the pools.
//! Long-polls: each round arms N long-polls with the list's `ETag`, waits
//! until the registry counts N waiting (`mcs_http_watchers`), sends one
//! registration that changes one pool, and takes the time each watcher's
//! body has fully arrived. Event streams: N streams are opened once and
//! read up to their first bookmark (the list); each round sends one such
//! write and takes the time each stream has read the batch's bookmark.
//! Also reported: the body bytes each watcher received for the change,
//! and the registry's CPU time per watcher woken (the write included).
//!
//! Then a reconnect storm, as when a replica restarts and its watchers come
//! back at once: N event streams opened in the same instant on a fresh
//! registry, and the time from the storm's start until each has its list
//! (its first bookmark); once with `--listen-backlog`'s default and once
//! with 1,024, the queue of `TcpListener::bind` before the flag (the
//! baseline, in the same run).

use crate::cpu;
use crate::records::registration;
use crate::report::{self, Stats, Table, f};
use crate::watch::watchers_reach;
use anyhow::{Context, bail, ensure};
use clap::Parser;
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_NONE_MATCH};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Options of `watch-fanout`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Watcher counts, one registry each.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    pub watchers: Vec<usize>,
    /// Pools registered; each write changes one of them.
    #[arg(long, default_value_t = 100)]
    pub pools: usize,
    /// Measured writes per watcher count and mode.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Watchers opened at a time (then the bench waits for them).
    #[arg(long, default_value_t = 500)]
    pub open_batch: usize,
    /// Skip the reconnect storm.
    #[arg(long)]
    pub no_storm: bool,
    /// Event streams only: skip the long-polls (to profile the streams alone).
    #[arg(long)]
    pub no_long_poll: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["watch-fanout"])
    }
}

/// One watcher's answer to a change: when it had fully arrived, and its
/// body bytes.
struct Arrival {
    round: usize,
    at: Instant,
    bytes: usize,
}

/// One round's figures.
struct Round {
    /// Each watcher's arrival after the write's 2xx, ms.
    after_ack: Vec<f64>,
    bytes: Vec<f64>,
    cpu_per_wake_us: f64,
}

/// Runs `watch-fanout`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin("watch-fanout", "N watchers, one write: long-polls vs event streams");
    cpu::pin_self(&env.client_cpus)?;
    let result = measure(env, options).await;
    cpu::unpin_self()?;
    result?;
    report::end("watch-fanout");
    Ok(())
}

async fn measure(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    let mut table = Table::new(&[
        "watchers",
        "mode",
        "rounds",
        "first ms",
        "p50 ms",
        "p99 ms",
        "last ms (worst round)",
        "bytes/watcher/change",
        "registry CPU µs/wake",
    ]);
    for &n in &options.watchers {
        for (mode, rounds) in fanout(env, options, n).await? {
            let after: Vec<f64> = rounds.iter().flat_map(|r| r.after_ack.clone()).collect();
            let all = Stats::of(&after).context("no samples")?;
            let worst = rounds
                .iter()
                .filter_map(|r| Stats::of(&r.after_ack))
                .map(|s| s.max)
                .fold(0.0, f64::max);
            let bytes: Vec<f64> = rounds.iter().flat_map(|r| r.bytes.clone()).collect();
            let bytes = Stats::of(&bytes).context("no samples")?;
            let cpu = rounds.iter().map(|r| r.cpu_per_wake_us).sum::<f64>() / rounds.len() as f64;
            table.row(vec![
                n.to_string(),
                mode.to_owned(),
                rounds.len().to_string(),
                f(all.min, 1),
                f(all.p50, 1),
                f(all.p99, 1),
                f(worst, 1),
                f(bytes.p50, 0),
                f(cpu, 1),
            ]);
        }
    }
    table.print();
    if !options.no_storm {
        storms(env, options).await?;
    }
    println!(
        "{} pools, embedded storage; registry pinned to CPUs {}, this process (every watcher \
         and the writer) to CPUs {}; times from the write's 2xx to each watcher's answer fully \
         read (long-poll: the body; stream: the batch's bookmark); bytes are body bytes (the \
         long-poll's headers come on top); CPU is the registry's user+system time over the \
         round, divided by the watchers woken.",
        options.pools, env.server_cpus, env.client_cpus
    );
    Ok(())
}

/// The reconnect storm at each N, with the default listen backlog and
/// with the old 1,024.
async fn storms(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    let mut table = Table::new(&[
        "streams at once",
        "listen backlog",
        "first ms",
        "p50 ms",
        "p99 ms",
        "last ms",
        "listed after 1 s",
        "last vs default",
    ]);
    for &n in &options.watchers {
        let mut baseline = None;
        for backlog in [None, Some(1024u32)] {
            let times = storm(env, options, n, backlog).await?;
            let stats = Stats::of(&times).context("no samples")?;
            let late = times.iter().filter(|t| **t > 1000.0).count();
            let base = *baseline.get_or_insert(stats.max);
            table.row(vec![
                n.to_string(),
                backlog.map_or("default (4096)".to_owned(), |b| b.to_string()),
                f(stats.min, 1),
                f(stats.p50, 1),
                f(stats.p99, 1),
                f(stats.max, 1),
                late.to_string(),
                format!("{:.2}x", stats.max / base.max(f64::MIN_POSITIVE)),
            ]);
        }
    }
    table.print();
    println!(
        "Reconnect storm: N `?watch=events` streams started in the same instant on a fresh \
         registry ({} pools); each time runs from the storm's start to the stream's first \
         bookmark (its whole list). The kernel caps the backlog at net.core.somaxconn \
         (here {}).",
        options.pools,
        std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into())
    );
    Ok(())
}

/// The registry's flags for `n` watchers: leases that outlast the run,
/// and room for every watcher's connection and watch.
fn registry_flags(n: usize) -> Vec<String> {
    [
        "--lease-duration-secs",
        "3600",
        "--heartbeat-interval-secs",
        "60",
        "--max-connections",
        &(n + 256).to_string(),
        "--max-watches",
        &(n + 128).to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// One storm of `n` streams against a fresh registry; each stream's time
/// to its list, ms.
async fn storm(
    env: &crate::Env,
    options: &Options,
    n: usize,
    backlog: Option<u32>,
) -> anyhow::Result<Vec<f64>> {
    let mut flags = registry_flags(n);
    if let Some(backlog) = backlog {
        flags.extend(["--listen-backlog".to_owned(), backlog.to_string()]);
    }
    let registry = env.start_registry(Some(&env.server_cpus), &flags).await?;
    let writer = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let pools_url = format!("{}/v1/pools", registry.api_url());
    for i in 0..options.pools.max(1) {
        let reply = writer.post(&pools_url).json(&registration(i, 1, None)).send().await?;
        ensure!(reply.status().is_success(), "registering pool {i}: {}", reply.status());
    }
    // Every stream its own connection, none reused: a storm of connects.
    let http = reqwest::Client::builder().tcp_nodelay(true).pool_max_idle_per_host(0).build()?;
    let url = format!("{pools_url}?watch=events&timeout_secs=900");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let streams: Vec<_> =
        (0..n).map(|_| tokio::spawn(stream(http.clone(), url.clone(), tx.clone()))).collect();
    let mut times = Vec::with_capacity(n);
    while times.len() < n {
        let arrival = tokio::time::timeout(Duration::from_secs(300), rx.recv())
            .await
            .context("streams of the storm still not listed after 300 s")?
            .context("every stream ended")?;
        ensure!(arrival.round == 0, "a change during the storm");
        times.push(signed_ms(start, arrival.at));
    }
    for s in streams {
        s.abort();
    }
    registry.kill().await;
    Ok(times)
}

/// Both modes at `n` watchers, on one registry.
async fn fanout(
    env: &crate::Env,
    options: &Options,
    n: usize,
) -> anyhow::Result<Vec<(&'static str, Vec<Round>)>> {
    let mut flags = registry_flags(n);
    flags.extend(["--max-watch-secs".to_owned(), "900".to_owned()]);
    let registry = env.start_registry(Some(&env.server_cpus), &flags).await?;
    let pid = registry.pid().context("the registry's pid")?;
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let writer = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let pools_url = format!("{}/v1/pools", registry.api_url());
    let pools = options.pools.max(1);
    for i in 0..pools {
        let reply = writer.post(&pools_url).json(&registration(i, 1, None)).send().await?;
        ensure!(reply.status().is_success(), "registering pool {i}: {}", reply.status());
    }
    let mut write = 0u32;
    let mut next_write = || {
        write += 1;
        registration(write as usize % pools, 1000 + write, None)
    };

    let mut polls = Vec::new();
    let long_poll_rounds = if options.no_long_poll { 0 } else { options.rounds };
    for round in 0..long_poll_rounds {
        let etag = etag_of(&writer, &pools_url).await?;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let url = format!("{pools_url}?watch=true&timeout_secs=600");
        let mut opened = 0;
        while opened < n {
            let batch = options.open_batch.min(n - opened);
            for _ in 0..batch {
                tokio::spawn(long_poll(http.clone(), url.clone(), etag.clone(), round, tx.clone()));
            }
            opened += batch;
            watchers_reach(
                &writer,
                registry.admin_url(),
                opened as u64,
                Duration::from_millis(10),
                6000,
            )
            .await?;
        }
        polls.push(change(&writer, &pools_url, pid, n, round, &mut rx, next_write()).await?);
    }

    let (tx, mut rx) = mpsc::unbounded_channel();
    let url = format!("{pools_url}?watch=events&timeout_secs=900");
    let mut streams = Vec::new();
    let mut opened = 0;
    while opened < n {
        let batch = options.open_batch.min(n - opened);
        for _ in 0..batch {
            streams.push(tokio::spawn(stream(http.clone(), url.clone(), tx.clone())));
        }
        opened += batch;
        for _ in 0..batch {
            let first = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await;
            ensure!(matches!(first, Ok(Some(Arrival { round: 0, .. }))), "a stream did not list");
        }
    }
    let mut events = Vec::new();
    for round in 1..=options.rounds {
        events.push(change(&writer, &pools_url, pid, n, round, &mut rx, next_write()).await?);
    }
    for s in streams {
        s.abort();
    }
    registry.kill().await;
    let mut modes = vec![("long-poll", polls), ("event stream", events)];
    modes.retain(|(_, rounds)| !rounds.is_empty());
    Ok(modes)
}

async fn etag_of(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let reply = http.get(url).send().await?;
    Ok(reply.headers().get(ETAG).and_then(|v| v.to_str().ok()).context("an ETag")?.to_owned())
}

/// Sends one write and collects the `n` watchers' arrivals for `round`.
async fn change(
    writer: &reqwest::Client,
    url: &str,
    pid: u32,
    n: usize,
    round: usize,
    rx: &mut mpsc::UnboundedReceiver<Arrival>,
    body: mcs_api::PoolRegistration,
) -> anyhow::Result<Round> {
    let before = cpu::process_cpu(pid)?;
    let reply = writer.post(url).json(&body).send().await?;
    let acked = Instant::now();
    ensure!(reply.status().is_success(), "the write: {}", reply.status());
    let mut after_ack = Vec::with_capacity(n);
    let mut bytes = Vec::with_capacity(n);
    while after_ack.len() < n {
        let arrival = tokio::time::timeout(Duration::from_secs(120), rx.recv())
            .await
            .context("watchers still not woken after 120 s")?
            .context("every watcher ended")?;
        ensure!(arrival.round == round, "an answer of round {} in round {round}", arrival.round);
        after_ack.push(signed_ms(acked, arrival.at));
        bytes.push(arrival.bytes as f64);
    }
    let cpu = cpu::process_cpu(pid)?.saturating_sub(before);
    Ok(Round { after_ack, bytes, cpu_per_wake_us: cpu.as_secs_f64() * 1e6 / n as f64 })
}

/// Signed milliseconds from `from` to `to`.
fn signed_ms(from: Instant, to: Instant) -> f64 {
    match to.checked_duration_since(from) {
        Some(d) => report::ms(d),
        None => -report::ms(from.duration_since(to)),
    }
}

async fn long_poll(
    http: reqwest::Client,
    url: String,
    etag: String,
    round: usize,
    tx: mpsc::UnboundedSender<Arrival>,
) -> anyhow::Result<()> {
    let reply = http.get(url).header(IF_NONE_MATCH, &etag).send().await?;
    ensure!(reply.status() == StatusCode::OK, "the watch answered {}", reply.status());
    let body = reply.bytes().await?;
    let _ = tx.send(Arrival { round, at: Instant::now(), bytes: body.len() });
    Ok(())
}

/// Reads an event stream, reporting each bookmark (round 0: the list).
async fn stream(
    http: reqwest::Client,
    url: String,
    tx: mpsc::UnboundedSender<Arrival>,
) -> anyhow::Result<()> {
    let mut reply = http.get(url).send().await?;
    ensure!(reply.status() == StatusCode::OK, "the stream answered {}", reply.status());
    let (mut round, mut bytes, mut line) = (0, 0, Vec::new());
    while let Some(chunk) = reply.chunk().await? {
        let at = Instant::now();
        bytes += chunk.len();
        for byte in chunk {
            if byte != b'\n' {
                line.push(byte);
                continue;
            }
            if line.starts_with(br#"{"type":"BOOKMARK""#) {
                let _ = tx.send(Arrival { round, at, bytes });
                round += 1;
                bytes = 0;
            }
            line.clear();
        }
    }
    bail!("the stream ended")
}
