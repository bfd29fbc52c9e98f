//! The clock's allowance and its errors, as its users see them.

use super::*;

#[test]
fn the_clock_keeps_the_allowance_it_was_given() {
    assert_eq!(Hlc::new(60_000).max_ahead_ms(), 60_000);
    assert_eq!(Hlc::default().max_ahead_ms(), 300_000, "five minutes by default");
}

#[test]
fn the_bound_is_the_last_generation_of_the_millisecond_the_allowance_reaches() {
    let hlc = Hlc::new(1_000);
    assert_eq!(hlc.bound(5_000), generation_at(6_001) - 1);
}

#[test]
fn clock_errors_read_as_sentences_in_logs_and_refusals() {
    assert_eq!(
        ClockError::WallClockOutOfRange { now_ms: 1 << 48 }.to_string(),
        "wall clock 281474976710656 ms is beyond the range of generations"
    );
    assert_eq!(ClockError::Exhausted.to_string(), "the hybrid logical clock is exhausted");
}

#[test]
fn a_bound_beyond_the_range_of_generations_is_the_highest_generation() {
    assert_eq!(Hlc::new(u64::MAX).bound(1_000), u64::MAX, "an allowance without limit");
    assert_eq!(Hlc::new(0).bound(1 << 48), u64::MAX, "a wall clock past 48 bits");
}
