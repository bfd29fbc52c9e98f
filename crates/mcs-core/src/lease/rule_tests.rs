//! The retention check at its boundary, and what its refusal says.

use super::*;

/// The shortest retention accepted with `skew_ms` of allowance, in ms.
fn minimum_ms(skew_ms: u64) -> u64 {
    86_400_000 + 2 * skew_ms
}

#[test]
fn a_retention_of_exactly_the_longest_lease_plus_twice_the_skew_is_enough() {
    let skew_ms = 1_500;
    let min_secs = minimum_ms(skew_ms) / 1000;
    assert_eq!(min_secs, 86_403);
    assert!(check_retention(min_secs, skew_ms).is_ok(), "exactly the minimum");
    assert!(check_retention(min_secs - 1, skew_ms).is_err(), "one second short");
}

#[test]
fn the_refusal_names_the_minimum_rounded_up_to_a_second() {
    let err = check_retention(60, 1_001).unwrap_err();
    assert!(err.starts_with("60s is below the minimum of 86403s:"), "{err}");
}

#[test]
fn a_granted_lease_ends_its_duration_after_the_grant() {
    let policy = LeasePolicy::new(90, 30).unwrap();
    assert_eq!(policy.until(1_000), 91_000);
    assert_eq!(policy.lease(), mcs_api::Lease::new(90, 30).unwrap());
    assert_eq!(policy.until(u64::MAX), u64::MAX, "saturates");
}

#[test]
fn a_lease_a_writer_asked_for_is_granted_as_asked_up_to_one_day() {
    let asked = mcs_api::Lease::new(600, 60).unwrap();
    assert_eq!(LeasePolicy::from_lease(asked).unwrap().lease(), asked);
    let day_and_more = mcs_api::Lease::new(MAX_LEASE_SECS + 1, 60).unwrap();
    assert!(LeasePolicy::from_lease(day_and_more).is_err());
}

#[test]
fn dead_items_are_kept_two_days_by_default() {
    assert_eq!(DEFAULT_RETENTION_SECS, 2 * 24 * 60 * 60);
}
