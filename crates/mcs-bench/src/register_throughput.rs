//! `register-throughput`: `POST /v1/pools` through a registry beside the
//! raw conditional write it issues for each (`DynamoStore::renew`, else
//! `DynamoStore::put`: the registrar's own calls), on the same DynamoDB
//! endpoint, in one run.
//!
//! ```text
//!  registry:  bench ─POST /v1/pools─► registry ─conditional UpdateItem | PutItem─► endpoint
//!  raw:       bench ──── DynamoStore::renew | put ─conditional UpdateItem | PutItem─► endpoint
//! ```
//!
//! Each phase keeps `--concurrency` requests in flight for `--secs`
//! seconds over `--pools` pools; the first write of a pool registers it
//! (a conditional PutItem), the others renew it (a heartbeat: same
//! version, later lease end, one conditional UpdateItem each, docs/design.md
//! §6). The phases alternate, raw first, so that a
//! drift of the shared machine falls on both.

use crate::records::{now_ms, pool_record, registration};
use crate::report::{self, Table, f, ratio, verdict};
use anyhow::{Context, ensure};
use clap::Parser;
use mcs_core::Version;
use mcs_store::{DynamoConfig, DynamoStore, PutOutcome, Store};
use mcs_testkit::dynamo::{self, unique_name};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Options of `register-throughput`.
#[derive(Debug, Clone, Parser)]
pub struct Options {
    /// Requests in flight.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 10)]
    pub secs: u64,
    /// Rounds of (raw, registry).
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// Pools written, round robin.
    #[arg(long, default_value_t = 256)]
    pub pools: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self::parse_from(["register-throughput"])
    }
}

/// Runs `write` from `concurrency` tasks until `secs` pass; returns the
/// writes per second. `write(i)` writes pool `i` of the task's share.
async fn drive<F, Fut>(options: &Options, write: F) -> anyhow::Result<f64>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let write = Arc::new(write);
    let deadline = Instant::now() + Duration::from_secs(options.secs);
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    let tasks_n = options.concurrency.max(1);
    for task in 0..tasks_n {
        let write = write.clone();
        let pools = options.pools.max(tasks_n);
        tasks.spawn(async move {
            let mut done = 0u64;
            let mut i = task;
            while Instant::now() < deadline {
                write(i).await?;
                done += 1;
                i = (i + tasks_n) % pools;
            }
            Ok::<_, anyhow::Error>(done)
        });
    }
    let mut total = 0u64;
    while let Some(joined) = tasks.join_next().await {
        total += joined.context("a writer task")??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// Runs `register-throughput`.
pub async fn run(env: &crate::Env, options: &Options) -> anyhow::Result<()> {
    report::begin(
        "register-throughput",
        "POST /v1/pools vs the raw conditional write it issues, same endpoint",
    );
    let endpoint = env.endpoint()?;
    let table = unique_name("mcs-bench-reg");
    mcs_store::dynamo::migrate(&dynamo::client(endpoint, dynamo::REGION), &table).await?;
    let registry = env
        .start_registry(Some(&env.server_cpus), &dynamo::registry_args(endpoint, &table))
        .await?;
    let url = format!("{}/v1/pools", registry.api_url());
    let mut config = DynamoConfig::new(table.clone());
    config.region = Some(dynamo::REGION.into());
    config.endpoint = Some(endpoint.to_owned());
    let store = DynamoStore::from_sdk_config(
        &dynamo::sdk_config(Some(endpoint), dynamo::REGION).await,
        config,
    )?;
    // At the table's schema (3): renewals in place, as the registry's.
    store.ensure_schema().await?;
    ensure!(store.renewals_keep_changed_at(), "the benchmark's table renews in place");
    let http = reqwest::Client::new();
    // The raw writes use pools of their own, far from the registry's.
    const RAW_BASE: usize = 1_000_000;
    let (mut raw, mut posted) = (Vec::new(), Vec::new());
    for _ in 0..options.rounds.max(1) {
        let store = store.clone();
        raw.push(
            drive(options, move |i| {
                let store = store.clone();
                async move {
                    let now = now_ms();
                    let record =
                        pool_record(RAW_BASE + i, 4, Version::new(1, "bench"), now, now + 30_000);
                    // What the registrar issues: a renewal in place, else
                    // the conditional put (the first write of a pool).
                    if store.renew(&record, now).await?.is_some() {
                        return Ok(());
                    }
                    match store.put(&record, now).await? {
                        PutOutcome::Applied => Ok(()),
                        other => anyhow::bail!("raw put of pool {i} not applied: {other:?}"),
                    }
                }
            })
            .await?,
        );
        let (http, url) = (http.clone(), url.clone());
        posted.push(
            drive(options, move |i| {
                let (http, url) = (http.clone(), url.clone());
                async move {
                    let reply = http.post(&url).json(&registration(i, 4, None)).send().await?;
                    ensure!(reply.status().is_success(), "POST of pool {i}: {}", reply.status());
                    Ok(())
                }
            })
            .await?,
        );
    }
    registry.kill().await;
    let mut rows = Table::new(&["round", "raw renew or put /s", "POST /v1/pools /s", "POST / raw"]);
    for (round, (r, p)) in raw.iter().zip(&posted).enumerate() {
        rows.row(vec![(round + 1).to_string(), f(*r, 0), f(*p, 0), ratio(p / r)]);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (r, p) = (mean(&raw), mean(&posted));
    rows.row(vec!["mean".to_owned(), f(r, 0), f(p, 0), ratio(p / r)]);
    rows.print();
    println!(
        "{} in flight, {} s per phase, {} pools round robin (first write registers, the rest \
         renew); registry pinned to CPUs {}, endpoint {endpoint}",
        options.concurrency, options.secs, options.pools, env.server_cpus
    );
    println!(
        "target: POST /v1/pools at least 0.9x the raw write it issues: {}",
        verdict(p / r >= 0.9)
    );
    report::end("register-throughput");
    Ok(())
}
