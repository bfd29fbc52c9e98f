//! Free exploration of the simulation, not a test: runs many schedules with
//! a choice of rules and knobs and prints how many failed, their seeds and
//! the first two failures.
//!
//! ```text
//!  RULES=real|changed_at|supersedes|broken_ttl|keeps_retired
//!  KNOBS=drift,stored_only,strict,strict_lease_bound,strict_renewals,no_recheck,reach_lookback,reach_watermark,
//!        never_confirm,uncapped,no_ttl,strict_ttl_sweeps
//!  RETENTION_MS=<n> (default 60,000)
//!  MCS_SIM_SCHEDULES=<n> (default 2,000)  MCS_SIM_SEED=<n> (one seed)
//!  cargo run --release -p mcs-sim --example explore
//! ```

use mcs_sim::{Confirm, Knobs, Options, Reach, Rules, run_many, seeds_from_env};

fn main() {
    let rules = match std::env::var("RULES").as_deref() {
        Ok("changed_at") => Rules::CHANGED_AT_REPLICATION,
        Ok("supersedes") => Rules::SUPERSEDES_REPLICATION,
        Ok("broken_ttl") => Rules::BROKEN_TTL_AT_WITHDRAWN_LEASE_END,
        Ok("keeps_retired") => Rules::BROKEN_KEEPS_RETIRED,
        _ => Rules::REAL,
    };
    let knobs_var = std::env::var("KNOBS").unwrap_or_default();
    let has = |k: &str| knobs_var.split(',').any(|x| x == k);
    let options = Options {
        strict_leases: has("strict"),
        strict_lease_bound: has("strict_lease_bound"),
        strict_renewals: has("strict_renewals"),
        ttl: !has("no_ttl"),
        strict_ttl_sweeps: has("strict_ttl_sweeps"),
        knobs: Knobs {
            lease_drift: has("drift"),
            view_applies_stored_only: has("stored_only"),
            confirm: if has("no_recheck") {
                Confirm::NoRecheck
            } else if has("never_confirm") {
                Confirm::Never
            } else if has("uncapped") {
                Confirm::Uncapped
            } else {
                Confirm::Real
            },
            reach: if has("reach_lookback") {
                Reach::Lookback
            } else if has("reach_watermark") {
                Reach::Watermark
            } else {
                Reach::Stamps
            },
            retention_ms: std::env::var("RETENTION_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(Knobs::default().retention_ms),
        },
        ..Options::default()
    };
    let seeds = seeds_from_env(2_000);
    let report = run_many(&seeds, rules, options, false);
    println!("{} [{knobs_var}]: {} failures of {}", rules.name, report.failures.len(), report.ran);
    println!("seeds: {:?}", report.failures.iter().map(|f| f.seed).take(20).collect::<Vec<_>>());
    for f in report.failures.iter().take(2) {
        println!("{f}");
    }
}
