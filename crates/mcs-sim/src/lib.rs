//! A seeded, deterministic simulation of mcs-registry's rules (docs/design.md §10):
//! regions with one replica each of a global table that holds one item per
//! `(key, origin region)`, registrar processes that write only their own
//! region's items and serve a [`mcs_core::View`] fed by polls, PoolRelays
//! that register, heartbeat, withdraw, fail over and crash, and a
//! replication stream with delay, reordering, loss and partitions.
//!
//! Renewals keep the stored `changed_at` (docs/design.md §6, "Renewals and
//! the change feed"): readers learn them from the `lease_ends` index after
//! each delta poll, and the replicas' indexes lag their items (within what
//! the lookback allows). [`check`] says which lease invariants hold at
//! every instant (lease bound, renewal served: checked after every event,
//! beside what each view serves) and which only after a full read.
//!
//! DynamoDB's TTL is modelled (docs/design.md §3, "Invariant (issue 22)"):
//! each replica's sweep deletes the items whose `ttl` ([`Rules::ttl`]: the
//! store's, `mcs_core::rules::ttl_expires_at_ms` plus a retention of 60 s,
//! the simulation's day) has passed there, and the delete replicates,
//! settled by last-writer-wins on its time. Sweeps draw from their own
//! generator and do not count as steps, so a seed does what it did without
//! TTL until a sweep deletes something; after the steps, a TTL phase pauses
//! the relays past the retention and resumes them. Invariant `LeftBehind`:
//! once TTL took a tombstone from a replica, no live record it superseded
//! wins there. The `ttl_*` counters of [`Stats`] say what TTL did. Only
//! leased records (pools) are simulated, not exports, whose tombstones
//! carry no `ttl`.
//!
//! No I/O, no async runtime, no wall clock and no hash-order dependence: one
//! `u64` seed decides everything, so a failing seed replays exactly.
//!
//! ```text
//!  seed ─► Params ─► World ─► events … ─► quiesce ─► check (invariants 1–4)
//!                      │                                   │
//!                      └── Rules (write, merge, replica) ──┘   Stats
//! ```
//!
//! The rules are pluggable ([`Rules`]), so a deliberately broken variant can
//! be run to show the invariants catch it; [`Knobs`] vary the registrar's
//! model to try a suspected problem or a proposed fix.
//!
//! Running it:
//!
//! ```text
//!  cargo test -p mcs-sim                                   10,000 schedules (about 25 s a
//!                                                          test binary on two cores: the
//!                                                          dev profile optimises mcs-sim
//!                                                          and mcs-core), broken rules caught
//!  MCS_SIM_SCHEDULES=100000 cargo test -p mcs-sim --test schedules
//!  MCS_SIM_SEED=2814 cargo test -p mcs-sim <test> -- --include-ignored --nocapture
//!                                                          replay one seed, with its trace
//!  cargo test -p mcs-sim --test known_issues -- --nocapture
//!                                                          what the simulation found
//!  RULES=changed_at cargo run --release -p mcs-sim --example explore
//!                                                          other rules and knobs
//! ```

pub mod check;
pub mod params;
pub mod registrar;
pub mod relay;
pub mod rng;
pub mod rules;
pub mod stats;
pub mod table;
mod world;

pub use check::{Invariant, Violation};
pub use params::{Confirm, Knobs, Reach};
pub use rules::Rules;
pub use stats::Stats;
pub use world::Options;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use world::World;

/// A schedule that broke an invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed that replays it.
    pub seed: u64,
    /// The rules it ran with.
    pub rules: &'static str,
    /// What broke.
    pub violation: Violation,
    /// The end of the schedule, when it was traced.
    pub trace: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} broke invariant {} (rules: {})",
            self.seed, self.violation.invariant, self.rules
        )?;
        writeln!(f, "  {}", self.violation.detail)?;
        if !self.trace.is_empty() {
            writeln!(f, "  schedule (last {} events):", self.trace.len())?;
            for line in &self.trace {
                writeln!(f, "    {line}")?;
            }
        }
        write!(
            f,
            "  replay: MCS_SIM_SEED={} cargo test -p mcs-sim <the test that found it> -- --include-ignored --nocapture",
            self.seed
        )
    }
}

/// Runs the schedule of `seed`; its counters, or the invariant it broke.
pub fn run(seed: u64, rules: Rules, options: Options) -> Result<Stats, Failure> {
    run_traced(seed, rules, options).0
}

/// Runs the schedule of `seed` and returns, beside the outcome, the end of
/// its trace (empty unless `options.trace`).
pub fn run_traced(
    seed: u64,
    rules: Rules,
    options: Options,
) -> (Result<Stats, Failure>, Vec<String>) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut world = World::new(seed, rules, options);
        let result = world.run();
        (result, world.stats.clone(), world.trace())
    }));
    match outcome {
        Ok((Ok(()), stats, trace)) => (Ok(stats), trace),
        Ok((Err(violation), _, trace)) => {
            (Err(Failure { seed, rules: rules.name, violation, trace: trace.clone() }), trace)
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            let violation = Violation { invariant: Invariant::Panicked, detail: message };
            (Err(Failure { seed, rules: rules.name, violation, trace: Vec::new() }), Vec::new())
        }
    }
}

/// What a run of many schedules found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Counters summed over the schedules that passed.
    pub stats: Stats,
    /// Failing schedules, lowest seed first, the first ones traced.
    pub failures: Vec<Failure>,
    /// How many schedules ran.
    pub ran: u64,
}

/// How many failures [`run_many`] replays with a trace.
const TRACED_FAILURES: usize = 3;

/// Runs every seed of `seeds` on all cores. With `stop_at_first`, stops at
/// the lowest failing seed (deterministically: seeds below a failure found
/// are still run, seeds above it are not).
pub fn run_many(seeds: &[u64], rules: Rules, options: Options, stop_at_first: bool) -> Report {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let bound = AtomicU64::new(u64::MAX);
    let report = Mutex::new(Report::default());
    std::thread::scope(|scope| {
        for worker in 0..threads {
            let (bound, report) = (&bound, &report);
            scope.spawn(move || {
                let mut local = Report::default();
                for &seed in seeds.iter().skip(worker).step_by(threads) {
                    if stop_at_first && seed > bound.load(Ordering::SeqCst) {
                        break;
                    }
                    local.ran += 1;
                    match run(seed, rules, options) {
                        Ok(stats) => local.stats += &stats,
                        Err(failure) => {
                            bound.fetch_min(seed, Ordering::SeqCst);
                            local.failures.push(failure);
                        }
                    }
                }
                let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
                report.stats += &local.stats;
                report.ran += local.ran;
                report.failures.extend(local.failures);
            });
        }
    });
    let mut report = report.into_inner().unwrap_or_else(|p| p.into_inner());
    report.failures.sort_by_key(|f| f.seed);
    if stop_at_first {
        report.failures.truncate(1);
    }
    for failure in report.failures.iter_mut().take(TRACED_FAILURES) {
        if let Err(traced) = run(failure.seed, rules, Options { trace: true, ..options }) {
            *failure = traced;
        }
    }
    report
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok())
}

/// The seeds a test covers: `MCS_SIM_SEED=<n>` replays exactly that one;
/// otherwise `MCS_SIM_SCHEDULES=<n>` (or `default`) seeds from 0.
pub fn seeds_from_env(default: u64) -> Vec<u64> {
    match env_u64("MCS_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (0..env_u64("MCS_SIM_SCHEDULES").unwrap_or(default)).collect(),
    }
}

/// The seeds a search for a failure covers: `MCS_SIM_SEED=<n>` replays
/// exactly that one; otherwise seeds `0..limit` (`MCS_SIM_SCHEDULES` does
/// not shorten a search that must find something).
pub fn search_seeds(limit: u64) -> Vec<u64> {
    match env_u64("MCS_SIM_SEED") {
        Some(seed) => vec![seed],
        None => (0..limit).collect(),
    }
}
