//! Benchmarks of mcs-registry. They are not tests: nothing here asserts a
//! time; each benchmark prints a table of what it measured beside a baseline
//! measured in the same run, so that the noise of a shared machine cancels
//! in the ratio. `docs/benchmarks.md` records the figures and the commands.
//!
//! ```text
//!  poll-cost       DynamoStore::read_changed_since vs read_all, on moto_server,
//!                  read units computed from the item bytes on the wire (meter)
//!  view            mcs_core::View: 100 changes on 100k records; fingerprints
//!  propagation     registry A ─POST─► table ◄─poll─ registry B ─watch─► bench
//!  watch           one registry: POST ─► long-poll wakes; vs the write's 2xx
//!  watch-fanout    N watchers, one POST: long-polls vs event streams, same run
//!  get-throughput  wrk ─► GET /v1/pools (registry) vs the same bytes (nginx)
//!  register-throughput  POST /v1/pools (registry) vs its raw conditional
//!                  PutItem (DynamoStore::put), same endpoint
//!
//! `report` is public: the controller's benchmark (tests/benches) prints with it.
//! ```

mod cpu;
mod get_throughput;
mod lock;
mod poll_cost;
mod propagation;
mod records;
mod register_throughput;
pub mod report;
mod view;
mod watch;
mod watch_fanout;

use anyhow::Context;
use clap::{Parser, Subcommand};
use mcs_testkit::process::{Launch, RegistryProcess};
use std::path::PathBuf;

/// mcs-bench: benchmarks of mcs-registry, each reported against a baseline
/// measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "mcs-bench", version, about)]
pub struct Args {
    /// The mcs-registry binary to start (default: next to this binary).
    #[arg(long, env = "MCS_BENCH_REGISTRY_BIN", global = true)]
    pub registry_bin: Option<PathBuf>,

    /// DynamoDB API endpoint (moto_server); `scripts/with-moto.sh` sets it.
    #[arg(long, env = "MCS_TEST_DYNAMODB_ENDPOINT", global = true)]
    pub dynamodb_endpoint: Option<String>,

    /// CPU list the servers under test are pinned to (taskset -c).
    #[arg(long, env = "MCS_BENCH_SERVER_CPUS", default_value = "1", global = true)]
    pub server_cpus: String,

    /// CPU list this process and the load generator are pinned to.
    #[arg(long, env = "MCS_BENCH_CLIENT_CPUS", default_value = "0", global = true)]
    pub client_cpus: String,

    /// The benchmark to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read units per refresh: delta reader vs full scan (needs moto_server).
    PollCost(poll_cost::Options),
    /// View::apply and fingerprints on a 100k-record view (no I/O).
    View(view::Options),
    /// Write→visible between two registries on one table (needs moto_server).
    Propagation(propagation::Options),
    /// GET latency while the reader confirms leases on a 100k view.
    Lock(lock::Options),
    /// Long-poll wake-up after a write to the same registry.
    Watch(watch::Options),
    /// N watchers, one write: long-polls vs event streams.
    WatchFanout(watch_fanout::Options),
    /// GET /v1/pools throughput vs nginx serving the same bytes (wrk).
    GetThroughput(get_throughput::Options),
    /// POST /v1/pools throughput vs the raw conditional PutItem it issues.
    RegisterThroughput(register_throughput::Options),
    /// Every benchmark with its defaults, one after the other.
    All,
}

/// What every benchmark needs from the command line.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    registry_bin: PathBuf,
    dynamodb_endpoint: Option<String>,
    server_cpus: String,
    client_cpus: String,
}

impl Env {
    /// Starts the registry under test with `extra` flags, pinned to `cpus`
    /// when given, logging its warnings here (they would explain odd
    /// figures).
    async fn start_registry(
        &self,
        cpus: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<RegistryProcess> {
        if !self.registry_bin.exists() {
            anyhow::bail!(
                "{} not found: build it (cargo build --release -p mcs-registry) or pass --registry-bin",
                self.registry_bin.display()
            );
        }
        Launch::new(&self.registry_bin)
            .cpus(cpus)
            .args(["--log", "warn,mcs_registry::server=info"])
            .args(extra)
            .echo_warnings()
            .start()
            .await
    }

    fn endpoint(&self) -> anyhow::Result<&str> {
        self.dynamodb_endpoint.as_deref().context(
            "no DynamoDB endpoint: run through scripts/with-moto.sh or pass --dynamodb-endpoint",
        )
    }
}

/// Runs the benchmark `args` names.
pub fn run(args: Args) -> anyhow::Result<()> {
    let registry_bin = match args.registry_bin {
        Some(bin) => bin,
        None => {
            std::env::current_exe().context("locating this binary")?.with_file_name("mcs-registry")
        }
    };
    let env = Env {
        registry_bin,
        dynamodb_endpoint: args.dynamodb_endpoint,
        server_cpus: args.server_cpus,
        client_cpus: args.client_cpus,
    };
    report::print_machine();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match args.command {
        Command::PollCost(o) => runtime.block_on(poll_cost::run(&env, &o)),
        Command::View(o) => view::run(&o),
        Command::Lock(o) => runtime.block_on(lock::run(&o)),
        Command::Propagation(o) => runtime.block_on(propagation::run(&env, &o)),
        Command::Watch(o) => runtime.block_on(watch::run(&env, &o)),
        Command::WatchFanout(o) => runtime.block_on(watch_fanout::run(&env, &o)),
        Command::GetThroughput(o) => runtime.block_on(get_throughput::run(&env, &o)),
        Command::RegisterThroughput(o) => runtime.block_on(register_throughput::run(&env, &o)),
        Command::All => {
            view::run(&view::Options::default())?;
            runtime.block_on(async {
                lock::run(&lock::Options::default()).await?;
                watch::run(&env, &watch::Options::default()).await?;
                get_throughput::run(&env, &get_throughput::Options::default()).await?;
                register_throughput::run(&env, &register_throughput::Options::default()).await?;
                propagation::run(&env, &propagation::Options::default()).await?;
                poll_cost::run(&env, &poll_cost::Options::default()).await
            })
        }
    }
}
