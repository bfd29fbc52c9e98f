//! `lock`: GET latency while the reader confirms leases (issue 28, "Locks").
//!
//! A registry assembled in this process (`mcs_registry::server::Registry`
//! over the embedded store, on a manual clock) serves its HTTP API on
//! 127.0.0.1. Its view holds N pools whose holders renew on time outside
//! the change feed (renewals in place), so every poll's read of lease ends
//! is empty and the view raises each lease about once every seven polls,
//! as in `view`'s `confirm_leases` row: at 100k pools, about 14.6k raises
//! a poll. A poller thread plays the reader: every `--poll-gap-ms` it moves
//! the clock one refresh interval on and confirms the leases
//! (`LiveView::confirm_leases_in_parts`). A client GETs `/v1/clusters` (an
//! empty list: the time is the wait for the view, not the body) at a fixed
//! rate, open loop (each GET sent on its tick whatever the others are
//! doing), over kept-alive connections; a thread renders the same list from
//! the view once a millisecond (`LiveView::render`, the view's part of a
//! GET, without HTTP and the runtime).
//!
//! Four phases of `--secs` each, in this order: idle (no polls); the
//! control, polls of another view of the same pools that nothing serves
//! (the poller's CPU without a lock shared); polls of the served view
//! applied whole under one hold of its write lock (the baseline: the code
//! before parts); polls applied in parts of
//! [`mcs_registry::live::CONFIRM_PART`] steps (what the registry does).
//! The client, the server's runtime, the prober and the poller share the
//! machine's cores (no pinning): the CPU the poller takes shows in the
//! GETs of every phase but idle, which the render probe mostly escapes.

use crate::records::{REFRESH_MS, lease_window, renewing_pools};
use crate::report::{self, Stats, Table, f, ratio, verdict};
use clap::Parser;
use mcs_core::SectionKind;
use mcs_registry::clock::{Clock, ManualClock};
use mcs_registry::config::{Args, Settings};
use mcs_registry::live::{CONFIRM_PART, LiveView};
use mcs_registry::server::{Registry, serve};
use mcs_store::MemoryStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of `lock`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Pools in the view, each a lease renewing outside the change feed.
    #[arg(long, default_value_t = 100_000)]
    pub records: usize,
    /// Seconds of GETs per phase.
    #[arg(long, default_value_t = 20)]
    pub secs: u64,
    /// Steps of a poll's plan applied under one hold of the write lock in
    /// the third phase (default: the registry's `CONFIRM_PART`).
    #[arg(long, default_value_t = CONFIRM_PART)]
    pub part: usize,
    /// GETs a second (open loop: each sent on its tick).
    #[arg(long, default_value_t = 1_000)]
    pub rate: u32,
    /// Real time between the end of one poll and the start of the next
    /// (the registry's refresh is 2 s; shorter gaps give more polls to
    /// sample in the same time).
    #[arg(long, default_value_t = 200)]
    pub poll_gap_ms: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["lock"])
    }
}

const NOW: u64 = 1_000_000_000;

/// What one phase measured.
struct Phase {
    gets: Stats,
    /// `LiveView::render` of the clusters list from a thread of its own,
    /// once a millisecond: the view's part of a GET, ms. A render that
    /// waited d ms counts as the d renders its wait kept from starting,
    /// waiting d, d - 1, ... ms (no coordinated omission).
    renders: Stats,
    /// Wall time of each poll's `confirm_leases`, ms.
    polls: Option<Stats>,
    raised: usize,
}

/// Runs the benchmark: four phases of GETs against one registry.
pub async fn run(o: &Options) -> anyhow::Result<()> {
    report::begin("lock", "GET latency while the reader confirms leases");
    let n = o.records;
    let settings = Settings::from_args(&<Args as clap::Parser>::try_parse_from([
        "mcs-registry",
        "--writer-id",
        "bench",
    ])?)
    .map_err(|e| anyhow::anyhow!("registry settings: {e}"))?;
    let clock = Arc::new(ManualClock::new(NOW));
    let registry = Registry::new(Arc::new(MemoryStore::new()), clock.clone(), &settings);
    let view = registry.state.view.clone();
    // The control: the same view, not served, on a clock of its own.
    let (shadow_clock, shadow) = {
        let clock = Arc::new(ManualClock::new(NOW));
        let view = LiveView::new(
            settings.skew_allowance_ms,
            settings.stale_after.as_millis() as u64,
            settings.expiry_hold,
            clock.clone(),
        );
        (clock, Arc::new(view))
    };
    for v in [&view, &shadow] {
        v.apply_all(renewing_pools(n, NOW));
        anyhow::ensure!(v.read().pools().len() == n, "{n} pools served");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/clusters", listener.local_addr()?);
    let stop = registry.shutdown.subscribe();
    tokio::spawn(serve(
        listener,
        mcs_registry::http::router(registry.state.clone()),
        settings,
        "api",
        stop,
        None,
    ));
    // Steady state first: the first leases are raised from the eighth poll.
    for _ in 0..15 {
        poll(&view, &clock, usize::MAX);
        poll(&shadow, &shadow_clock, usize::MAX);
    }
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    // Warm: the connection, and the list rendered once.
    gets(&http, &url, Duration::from_secs(1), o.rate).await?;

    let idle = phase(&http, &url, o, &view, None).await?;
    let cpu = phase(&http, &url, o, &view, Some((&shadow, &shadow_clock, usize::MAX))).await?;
    let whole = phase(&http, &url, o, &view, Some((&view, &clock, usize::MAX))).await?;
    let parts = phase(&http, &url, o, &view, Some((&view, &clock, o.part))).await?;
    anyhow::ensure!(view.read().pools().len() == n, "every lease still served after the polls");
    registry.shutdown.send_replace(true);

    let mut table = Table::new(&[
        "phase",
        "GETs",
        "GET p50 ms",
        "GET p99 ms",
        "GET max ms",
        "p99 vs idle",
        "view p50 ms",
        "view p99 ms",
        "view max ms",
        "view p99 vs idle",
        "polls",
        "raises / poll",
        "poll p50 ms",
        "poll max ms",
    ]);
    let phases = [
        ("idle: no polls".to_owned(), &idle),
        ("polls of another view (the CPU alone, no lock shared)".to_owned(), &cpu),
        ("polls, one hold of the write lock (baseline)".to_owned(), &whole),
        (format!("polls, parts of {} steps", o.part), &parts),
    ];
    for (name, p) in phases {
        let (polls, per_poll, poll_p50, poll_max) = match &p.polls {
            Some(s) => {
                (s.n.to_string(), f(p.raised as f64 / s.n as f64, 0), f(s.p50, 2), f(s.max, 2))
            }
            None => ("0".into(), "-".into(), "-".into(), "-".into()),
        };
        table.row(vec![
            name,
            p.gets.n.to_string(),
            f(p.gets.p50, 3),
            f(p.gets.p99, 3),
            f(p.gets.max, 3),
            ratio(p.gets.p99 / idle.gets.p99),
            f(p.renders.p50, 3),
            f(p.renders.p99, 3),
            f(p.renders.max, 3),
            ratio(p.renders.p99 / idle.renders.p99),
            polls,
            per_poll,
            poll_p50,
            poll_max,
        ]);
    }
    table.print();
    let ratio_now = parts.gets.p99 / idle.gets.p99;
    println!(
        "target: GET p99 during polls at {n} records within 2x idle: {} ({})",
        ratio(ratio_now),
        verdict(ratio_now <= 2.0)
    );
    let ratio_view = parts.renders.p99 / idle.renders.p99;
    println!(
        "the view's part of a GET (LiveView::render), p99 during polls against idle: {} ({})",
        ratio(ratio_view),
        verdict(ratio_view <= 2.0)
    );
    report::end("lock");
    Ok(())
}

/// GETs `url` for `secs` at `--rate` a second, open loop: each GET is sent
/// on its tick whatever the ones before it are doing (a stall delays every
/// GET sent during it, as it does a registry's many clients, rather than
/// the one a closed loop would have in flight). Latencies in ms, from the
/// send.
async fn gets(
    http: &reqwest::Client,
    url: &str,
    secs: Duration,
    rate: u32,
) -> anyhow::Result<Stats> {
    let every = Duration::from_secs(1) / rate.max(1);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut sent = tokio::task::JoinSet::new();
    let until = Instant::now() + secs;
    let mut scheduled = Instant::now();
    while scheduled < until {
        ticks.tick().await;
        let (http, url) = (http.clone(), url.to_owned());
        // Sent now: the timer's own lateness (its resolution is a
        // millisecond) is not the registry's.
        let at = Instant::now();
        sent.spawn(async move {
            let response = http.get(&url).send().await?;
            anyhow::ensure!(response.status().is_success(), "GET {url}: {}", response.status());
            response.bytes().await?;
            Ok(report::ms(at.elapsed()))
        });
        scheduled += every;
    }
    let mut samples = Vec::new();
    while let Some(done) = sent.join_next().await {
        samples.push(done??);
    }
    Stats::of(&samples).ok_or_else(|| anyhow::anyhow!("no GET in {secs:?}"))
}

/// GETs for `--secs`, `view` rendered once a millisecond meanwhile, and
/// with `polled`, a thread polling that view (the served one, or another)
/// every `--poll-gap-ms`, applying each poll's plan in parts of `part`
/// steps.
async fn phase(
    http: &reqwest::Client,
    url: &str,
    o: &Options,
    view: &Arc<LiveView>,
    polled: Option<(&Arc<LiveView>, &Arc<ManualClock>, usize)>,
) -> anyhow::Result<Phase> {
    let gap = Duration::from_millis(o.poll_gap_ms);
    let stop = Arc::new(AtomicBool::new(false));
    let poller = polled.map(|(view, clock, part)| {
        let (view, clock, stop) = (view.clone(), clock.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut took, mut raised) = (Vec::new(), 0);
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                raised += poll(&view, &clock, part);
                took.push(report::ms(started.elapsed()));
                std::thread::sleep(gap);
            }
            (took, raised)
        })
    });
    let prober = {
        let (view, stop) = (view.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut took = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
                let started = Instant::now();
                std::hint::black_box(view.render(SectionKind::Clusters));
                let ms = report::ms(started.elapsed());
                // The renders a stall kept from starting, once a
                // millisecond, each waiting a millisecond less.
                took.push(ms);
                took.extend((1..ms as usize).map(|k| ms - k as f64));
            }
            took
        })
    };
    let got = gets(http, url, Duration::from_secs(o.secs), o.rate).await;
    stop.store(true, Ordering::SeqCst);
    let panicked = |_| anyhow::anyhow!("a thread of the benchmark panicked");
    let renders = prober.join().map_err(panicked)?;
    let (polls, raised) = match poller {
        Some(poller) => {
            let (took, raised) = poller.join().map_err(panicked)?;
            (Stats::of(&took), raised)
        }
        None => (None, 0),
    };
    Ok(Phase {
        gets: got?,
        renders: Stats::of(&renders).ok_or_else(|| anyhow::anyhow!("no render measured"))?,
        polls,
        raised,
    })
}

/// One poll one refresh interval after the last: its read of lease ends is
/// empty (every holder renewed on time), applied in parts of `part` steps;
/// returns how many leases it raised.
fn poll(view: &LiveView, clock: &ManualClock, part: usize) -> usize {
    clock.advance(REFRESH_MS);
    view.confirm_leases_in_parts(&[], lease_window(clock.now_ms()), part).extended
}
