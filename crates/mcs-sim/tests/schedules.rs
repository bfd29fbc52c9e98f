//! The real rules over many seeded schedules.
//!
//! `MCS_SIM_SCHEDULES=<n>` runs n seeds (default 10,000); `MCS_SIM_SEED=<n>`
//! replays one seed and prints its trace.

use mcs_sim::{Options, Rules, run, run_many, run_traced, seeds_from_env};
use std::time::Instant;

#[test]
fn ten_thousand_schedules() {
    let seeds = seeds_from_env(10_000);
    if let [seed] = seeds[..] {
        let (outcome, trace) =
            run_traced(seed, Rules::REAL, Options { trace: true, ..Options::default() });
        eprintln!("seed {seed}, last {} events:\n  {}", trace.len(), trace.join("\n  "));
        match outcome {
            Ok(stats) => eprintln!("passed:\n{stats}"),
            Err(failure) => panic!("{failure}"),
        }
        return;
    }
    let started = Instant::now();
    let report = run_many(&seeds, Rules::REAL, Options::default(), false);
    eprintln!("{} schedules in {:.2?}\n{}", report.ran, started.elapsed(), report.stats);
    if let Some(failure) = report.failures.first() {
        panic!(
            "{} of {} schedules failed; the first:\n{failure}",
            report.failures.len(),
            report.ran
        );
    }
    if report.ran < 10_000 {
        return;
    }
    // The schedules must exercise the rules, or passing means nothing.
    let stats = &report.stats;
    for (name, value) in stats.fields() {
        let may_be_zero = matches!(
            name,
            "view_rebuilds"
                | "records_dropped"
                | "owned_by_stale_item"
                | "withdraw_not_found_while_live"
                | "late_resurrections"
                | "view_only_images"
                | "raised_after_missed_change"
                | "renewals_masked"
                | "ttl_deletes_erasing_newer"
                | "deliveries_refused_by_delete"
        );
        assert!(may_be_zero || value > 0, "no schedule exercised {name}:\n{stats}");
    }
    assert_eq!(stats.view_rebuilds, 0, "a View disagreed with Record::supersedes");
    // Issue 22: TTL deleted tombstones while older items of their keys
    // remained, lapsed (`LeftBehind` held there), and no sweep erased a
    // newer write (it skips an image its origin replaced).
    assert!(stats.ttl_tombstones_deleted > 0 && stats.superseded_lapsed_after_ttl > 0, "{stats}");
    assert_eq!(stats.ttl_deletes_erasing_newer, 0, "{stats}");
}

/// Issue 22, item 2: a withdrawal that reached a replica later than the
/// lookback left no trace in the lease ends read, and the view raised the
/// withdrawn lease past every lease stored for it until the next full read.
/// These seeds broke `LeaseBound` by default before tombstones carried the
/// withdrawn lease's end (26 of 10,000 did).
#[test]
fn a_late_withdrawal_is_not_served_past_the_withdrawn_lease() {
    for seed in [410, 803, 900, 1154, 2369, 2894, 3735, 4429] {
        if let Err(failure) = run(seed, Rules::REAL, Options::default()) {
            panic!("{failure}");
        }
    }
}

/// Issue 22: once TTL had deleted every item of a key, a process that held
/// the last record (lapsed, of a high generation) kept it through its full
/// reads over a new incarnation's registration of a lower generation,
/// which the other processes served. These seeds broke invariant 1 with
/// the check made strict, before `View::replace_all` retired such records
/// (66 of 10,000 did).
#[test]
fn a_record_ttl_deleted_gives_way_to_a_new_registration() {
    for seed in [89, 130, 183, 305, 355] {
        match run(seed, Rules::REAL, Options::default()) {
            Ok(stats) => assert!(stats.records_retired > 0, "seed {seed}:\n{stats}"),
            Err(failure) => panic!("{failure}"),
        }
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 49, 480] {
        let options = Options { trace: true, ..Options::default() };
        let (first, first_trace) = run_traced(seed, Rules::REAL, options);
        let (second, second_trace) = run_traced(seed, Rules::REAL, options);
        assert_eq!(
            first.map_err(|f| f.to_string()),
            second.map_err(|f| f.to_string()),
            "seed {seed}"
        );
        assert_eq!(first_trace, second_trace, "seed {seed}");
        assert!(!first_trace.is_empty());
    }
    let broken = |seed| {
        run(seed, Rules::BROKEN_TOMBSTONE_WRITE, Options::default()).map_err(|f| f.to_string())
    };
    assert_eq!(broken(35), broken(35));
}

/// After quiescence and a full read, views holding the same items agree on
/// every winner's lease and serve the same sections at every instant until
/// the last lease ends (a regression test: equal versions were once merged
/// by write time, not lease end). Not before: renewals keep `changed_at`,
/// so during the run a view holds lower bounds of the stored lease ends
/// that depend on when it polled; what holds at every instant then is
/// `LeaseBound` and `RenewalServed`, checked by every schedule.
#[test]
fn after_a_full_read_views_agree_on_leases_at_every_instant() {
    let seeds: Vec<u64> = (1..=3_000).collect();
    let options = Options { strict_leases: true, ..Options::default() };
    let report = run_many(&seeds, Rules::REAL, options, false);
    if let Some(failure) = report.failures.first() {
        panic!("{} of {} failed; the first:\n{failure}", report.failures.len(), report.ran);
    }
    assert_eq!(report.ran, seeds.len() as u64);
    let stats = &report.stats;
    assert!(stats.writes_acked > 0 && stats.renewals_out_of_feed > 0, "{stats}");
    assert!(stats.leases_renewed_by_read > 0 && stats.leases_extended_by_absence > 0, "{stats}");
}
