//! The rules of the expiry guard, each pinned at its boundary: what makes a
//! wave, how long applied expiries count toward one, how long a hold lasts
//! and when the next one may begin (docs/design.md §6).

use super::*;

const WINDOW_MS: u64 = 10_000;
const MAX_HOLD_MS: u64 = 30_000;

/// Half the served leases must be at risk, and at least three of them.
fn policy() -> HoldPolicy {
    HoldPolicy {
        threshold: 0.5,
        min_count: 3,
        window_ms: WINDOW_MS,
        renewal_slack_ms: 2_000,
        max_hold_ms: MAX_HOLD_MS,
    }
}

fn leases(due: usize, at_risk: usize, live: usize) -> LeaseCounts {
    LeaseCounts { due, at_risk, live, holders: 2 }
}

fn is_hold(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Hold { .. })
}

#[test]
fn the_guard_tells_the_view_how_late_a_renewal_may_arrive() {
    let g = ExpiryGuard::new(policy());
    assert_eq!(g.renewal_slack_ms(), 2_000);
    let g = ExpiryGuard::new(HoldPolicy { renewal_slack_ms: 750, ..policy() });
    assert_eq!(g.renewal_slack_ms(), 750, "the configured slack, whatever it is");
}

#[test]
fn a_new_guard_holds_nothing() {
    assert!(!ExpiryGuard::new(policy()).is_holding());
}

#[test]
fn a_wave_is_more_than_the_threshold_share_of_the_served_leases() {
    let mut g = ExpiryGuard::new(policy());
    assert_eq!(g.judge(0, leases(5, 5, 10)), Verdict::Expire, "exactly half is not a wave");
    assert_eq!(
        g.judge(0, leases(6, 6, 10)),
        Verdict::Hold { since_ms: 0, started: true },
        "more than half is"
    );
}

#[test]
fn a_wave_has_at_least_min_count_leases_at_risk_whatever_the_share() {
    let anything = HoldPolicy { threshold: 0.0, ..policy() };
    let mut g = ExpiryGuard::new(anything);
    assert_eq!(g.judge(0, leases(2, 2, 100)), Verdict::Expire, "two are below min_count");
    let mut g = ExpiryGuard::new(anything);
    assert!(is_hold(g.judge(0, leases(3, 3, 100))), "three are a wave");
}

#[test]
fn expiries_already_applied_count_toward_the_wave_and_the_base() {
    // One expiry applied, then two of the four leases left are due: three of
    // five leases gone within the window is a wave.
    let mut g = ExpiryGuard::new(policy());
    assert_eq!(g.judge(0, leases(1, 1, 5)), Verdict::Expire);
    g.expired(0, 1);
    assert!(is_hold(g.judge(1_000, leases(2, 2, 4))));

    // Four applied, one of the six left due: five of ten, not more than half.
    let mut g = ExpiryGuard::new(policy());
    g.expired(0, 4);
    assert_eq!(
        g.judge(1_000, leases(1, 1, 6)),
        Verdict::Expire,
        "the applied ones count in the base"
    );
    // Two due: six of ten.
    assert!(is_hold(g.judge(1_000, leases(2, 2, 6))));
}

#[test]
fn applied_expiries_count_for_window_ms_and_not_a_millisecond_longer() {
    let at = 20_000;
    // Four applied at `at`, two of the six left due: six of ten.
    let mut g = ExpiryGuard::new(policy());
    g.expired(at, 4);
    assert!(is_hold(g.judge(at + WINDOW_MS, leases(2, 2, 6))), "still within the window");

    let mut g = ExpiryGuard::new(policy());
    g.expired(at, 4);
    assert_eq!(
        g.judge(at + WINDOW_MS + 1, leases(2, 2, 6)),
        Verdict::Expire,
        "past the window only the two due count: below min_count"
    );
}

#[test]
fn a_hold_ends_when_nothing_is_due() {
    let mut g = ExpiryGuard::new(policy());
    assert!(is_hold(g.judge(0, leases(6, 6, 10))));
    assert_eq!(g.judge(1_000, leases(0, 0, 10)), Verdict::Expire);
    assert!(!g.is_holding());
    assert_eq!(
        g.judge(2_000, leases(6, 6, 10)),
        Verdict::Hold { since_ms: 2_000, started: true },
        "a new wave is a new hold"
    );
}

#[test]
fn a_hold_lasts_max_hold_ms_at_any_clock_value() {
    let start = 1_767_225_600_000;
    let mut g = ExpiryGuard::new(policy());
    assert!(is_hold(g.judge(start, leases(6, 6, 10))));
    assert_eq!(
        g.judge(start + MAX_HOLD_MS - 1, leases(6, 6, 10)),
        Verdict::Hold { since_ms: start, started: false },
        "one millisecond short of the maximum"
    );
    assert_eq!(g.judge(start + MAX_HOLD_MS, leases(6, 6, 10)), Verdict::Expire, "the maximum");
    assert!(!g.is_holding());
}

#[test]
fn after_a_release_no_hold_begins_for_window_ms() {
    let mut g = ExpiryGuard::new(policy());
    assert!(is_hold(g.judge(0, leases(6, 6, 10))));
    let released = MAX_HOLD_MS;
    assert_eq!(g.judge(released, leases(6, 6, 10)), Verdict::Expire);
    assert_eq!(
        g.judge(released + WINDOW_MS - 1, leases(6, 6, 10)),
        Verdict::Expire,
        "still cooling down"
    );
    assert_eq!(
        g.judge(released + WINDOW_MS, leases(6, 6, 10)),
        Verdict::Hold { since_ms: released + WINDOW_MS, started: true },
        "a wave window_ms after the release is held again"
    );
}

/// Issue 22, item 8: one writer's dozen 2 s leases lapsing together held
/// every list incomplete for everyone. A wave needs two holders or more.
#[test]
fn one_holders_leases_are_never_a_wave() {
    let mut g = ExpiryGuard::new(policy());
    let one = LeaseCounts { holders: 1, ..leases(12, 12, 14) };
    assert_eq!(g.judge(0, one), Verdict::Expire, "one holder");
    assert!(!g.is_holding());
    assert!(is_hold(g.judge(0, LeaseCounts { holders: MIN_HOLDERS, ..leases(12, 12, 14) })));
    // A hold in force ends when the wave narrows to one holder.
    assert_eq!(g.judge(1_000, one), Verdict::Expire, "released");
    assert!(!g.is_holding());
}
