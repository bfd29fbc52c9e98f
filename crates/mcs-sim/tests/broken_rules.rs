//! Deliberately broken rules, injected through [`Rules`] without touching
//! mcs-core: the invariants must catch each within a bounded number of
//! schedules, and say which invariant and which seed.

use mcs_sim::{
    Confirm, Failure, Invariant, Knobs, Options, Reach, Rules, run, run_many, search_seeds,
};

/// The lowest failing seed below `limit` (or `MCS_SIM_SEED`, replayed).
fn hunt(rules: Rules, options: Options, limit: u64) -> Failure {
    let seeds = search_seeds(limit);
    let report = run_many(&seeds, rules, options, true);
    match report.failures.into_iter().next() {
        Some(failure) => failure,
        None => panic!(
            "{} passed {} schedules: the invariants missed a broken rule",
            rules.name, report.ran
        ),
    }
}

#[test]
fn a_write_rule_that_lets_lower_generations_replace_tombstones_is_caught() {
    let failure = hunt(Rules::BROKEN_TOMBSTONE_WRITE, Options::default(), 2_000);
    eprintln!("caught:\n{failure}");
    // Caught on the conditional write itself, by one of the per-step checks.
    assert!(
        matches!(
            failure.violation.invariant,
            Invariant::ReplicaMonotone | Invariant::WithdrawalFence
        ),
        "{failure}"
    );

    // Without the check on every replica step, the end-to-end invariants
    // (1–4) catch it too.
    let options = Options { check_replicas: false, ..Options::default() };
    let failure = hunt(Rules::BROKEN_TOMBSTONE_WRITE, options, 2_000);
    eprintln!("caught by the end-to-end invariants:\n{failure}");
    assert!(
        matches!(
            failure.violation.invariant,
            Invariant::Converged
                | Invariant::NoLostWrite
                | Invariant::NoResurrection
                | Invariant::NoStaleServe
        ),
        "{failure}"
    );
}

#[test]
fn a_merge_rule_blind_to_tombstones_is_caught() {
    let failure = hunt(Rules::BROKEN_TOMBSTONE_MERGE, Options::default(), 2_000);
    eprintln!("caught:\n{failure}");
    assert_ne!(failure.violation.invariant, Invariant::Panicked, "{failure}");
    assert_ne!(failure.violation.invariant, Invariant::ReplicaMonotone, "{failure}");
}

/// Defect 2 of the hardening review, re-introduced: with the fence only in
/// the registrar's view, two registrars of one region sharing a table let a
/// late heartbeat undo a withdrawal.
#[test]
fn a_withdrawal_fence_held_only_in_the_view_is_caught() {
    let failure = hunt(Rules::BROKEN_UNFENCED_WRITE, Options::default(), 5_000);
    eprintln!("caught:\n{failure}");
    assert_eq!(failure.violation.invariant, Invariant::WithdrawalFence, "{failure}");
}

/// Options with the reader confirming its leases as `confirm` says.
fn confirming(confirm: Confirm) -> Options {
    Options { knobs: Knobs { confirm, ..Knobs::default() }, ..Options::default() }
}

/// A reader that never reads lease ends: renewals keep `changed_at`, so they
/// reach its view only with a full read, and a relay heartbeating on time
/// stops being served between two full reads.
#[test]
fn a_reader_that_never_confirms_its_leases_is_caught() {
    let failure = hunt(Rules::REAL, confirming(Confirm::Never), 500);
    eprintln!("caught:\n{failure}");
    assert_eq!(failure.violation.invariant, Invariant::RenewalServed, "{failure}");
}

/// A reader that raises a lease absent from the lease ends read to the
/// window's end, without the `settled + duration` cap: a write too recent
/// to have reached the index (index lag) looks absent, and the raise
/// overshoots what is stored (`LeaseBound`), or keeps serving a version
/// replaced meanwhile (`NoStaleServe`).
#[test]
fn a_raise_without_the_settled_cap_is_caught() {
    let failure = hunt(Rules::REAL, confirming(Confirm::Uncapped), 5_000);
    eprintln!("caught:\n{failure}");
    assert!(
        matches!(failure.violation.invariant, Invariant::LeaseBound | Invariant::NoStaleServe),
        "{failure}"
    );
    // The cap is what makes the difference: the same schedule passes with
    // the real confirmation.
    let real = run(failure.seed, Rules::REAL, Options::default());
    assert!(real.is_ok(), "seed {} fails with the real confirmation too: {real:?}", failure.seed);
}

/// A delta poll that reads from its watermark and never reaches back: a
/// write that reached the replica's indexes after the poll that covered its
/// `changed_at` (index lag, a writer's clock behind) is missed until a full
/// read. Reading the lookback again whole, as before change stamps, misses
/// nothing on the same schedule, and neither does reaching back by stamps.
#[test]
fn a_delta_poll_that_never_reaches_back_is_caught() {
    let reaching =
        |reach| Options { knobs: Knobs { reach, ..Knobs::default() }, ..Options::default() };
    let failure = hunt(Rules::REAL, reaching(Reach::Watermark), 2_000);
    eprintln!("caught:\n{failure}");
    assert_eq!(failure.violation.invariant, Invariant::DeltaComplete, "{failure}");
    for reach in [Reach::Stamps, Reach::Lookback] {
        let ok = run(failure.seed, Rules::REAL, reaching(reach));
        assert!(ok.is_ok(), "seed {} fails with {reach:?} too: {ok:?}", failure.seed);
    }
}

/// A tombstone whose `ttl` is the end of the lease it withdrew, without
/// the retention: TTL deletes it while an older item of its key in another
/// region (renewed after the withdrawing registrar's view learned its
/// lease, or before its region had the tombstone) is still live, and that
/// item wins the key again in the replica (`LeftBehind`, issue 22). The
/// same schedule passes with the `ttl` the store writes, and without TTL
/// events.
#[test]
fn a_tombstone_ttl_without_the_retention_is_caught() {
    let failure = hunt(Rules::BROKEN_TTL_AT_WITHDRAWN_LEASE_END, Options::default(), 2_000);
    eprintln!("caught:\n{failure}");
    assert_eq!(failure.violation.invariant, Invariant::LeftBehind, "{failure}");
    let real = run(failure.seed, Rules::REAL, Options::default());
    assert!(real.is_ok(), "seed {} fails with the real ttl too: {real:?}", failure.seed);
    let untouched = Options { ttl: false, ..Options::default() };
    let without = run(failure.seed, Rules::BROKEN_TTL_AT_WITHDRAWN_LEASE_END, untouched);
    assert!(without.is_ok(), "seed {} fails without TTL events: {without:?}", failure.seed);
}

/// Issue 22 (found with TTL modelled, `known_issues.rs` until fixed): a
/// full read that keeps a held winner no item holds any more. Once TTL has
/// deleted every item of a key, a process that still held the last record
/// (lapsed, of a high generation) kept it over a new incarnation's
/// registration with its own lower generation, which every process that
/// no longer held the key served: views disagree (invariant 1). The same
/// schedule passes with the real full read, having retired the record.
#[test]
fn a_full_read_that_keeps_a_retired_winner_is_caught() {
    let failure = hunt(Rules::BROKEN_KEEPS_RETIRED, Options::default(), 2_000);
    eprintln!("caught:\n{failure}");
    assert_eq!(failure.violation.invariant, Invariant::Converged, "{failure}");
    let real = run(failure.seed, Rules::REAL, Options::default())
        .unwrap_or_else(|f| panic!("seed {} fails with the real full read too: {f}", f.seed));
    assert!(real.records_retired > 0, "nothing retired:\n{real}");
}
