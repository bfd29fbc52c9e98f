//! [`View::delta_start`] and [`View::unseen`]: which writes of a delta
//! poll's window the view has not seen, and where the poll reads changes
//! from (docs/design.md §6 "Reaching back for late changes").

use super::*;
use crate::fixtures::{mk_pool, mk_tombstone};

/// Pool `name` at generation `generation` of writer `writer`, written at `at_ms`.
fn written(name: &str, generation: u64, writer: &str, at_ms: u64) -> Record {
    let mut record = mk_pool(name, generation, writer, None, None);
    record.changed_at_ms = at_ms;
    record
}

fn stamp(name: &str, generation: u64, at_ms: u64) -> ChangeStamp {
    ChangeStamp::of(&written(name, generation, "r", at_ms))
}

fn view_of(records: &[Record]) -> View {
    let mut v = View::new(0);
    for record in records {
        v.apply(record.clone(), 0);
    }
    v
}

fn unseen(v: &View, stamps: &[ChangeStamp]) -> Vec<u64> {
    v.unseen(stamps).map(|s| s.changed_at_ms).collect()
}

#[test]
fn the_writes_a_view_holds_or_was_offered_are_seen() {
    let a = written("a", 3, "r", 1_000);
    let b = written("b", 1, "r", 2_000);
    // Another origin's older item of b, offered and lost the merge.
    let b_loser = written("b", 0, "q", 2_500);
    let v = view_of(&[a.clone(), b.clone(), b_loser.clone()]);
    assert_eq!(v.record(&b.key), Some(&b));
    let stamps = [&a, &b, &b_loser].map(ChangeStamp::of);
    assert_eq!(unseen(&v, &stamps), Vec::<u64>::new());
    // Held records count even when not offered (a full read's).
    let mut full = View::new(0);
    full.replace_all(vec![a.clone()], 0, 0);
    assert_eq!(unseen(&full, &[ChangeStamp::of(&a)]), Vec::<u64>::new());
}

#[test]
fn a_write_not_seen_is_unseen_whatever_it_would_do() {
    let v = view_of(&[written("a", 3, "r", 5_000)]);
    assert_eq!(unseen(&v, &[stamp("a", 4, 4_000)]), [4_000], "a later generation");
    assert_eq!(unseen(&v, &[stamp("z", 1, 6_000)]), [6_000], "an unknown key");
    assert_eq!(unseen(&v, &[stamp("a", 3, 7_000)]), [7_000], "the version renewed by a put");
    assert_eq!(unseen(&v, &[stamp("a", 2, 9_000)]), [9_000], "an older version, read once");
}

#[test]
fn another_writer_of_the_same_generation_and_time_is_unseen() {
    // Two registrars of two regions writing one key in the same millisecond
    // pick the same generation (found by mcs-sim, seed 8158): only the
    // writer tells the two items apart, and the other may win.
    let v = view_of(&[written("a", 3, "reg-a", 5_000)]);
    let other = ChangeStamp::of(&written("a", 3, "reg-b", 5_000));
    assert_eq!(unseen(&v, &[other]), [5_000]);
}

#[test]
fn a_poll_reads_from_just_before_the_earliest_unseen_write() {
    let a = written("a", 3, "r", 5_000);
    let mut v = view_of(&[a.clone(), written("b", 2, "r", 6_000)]);
    let stamps = [
        ChangeStamp::of(&a),
        stamp("b", 3, 8_000), // late: written before the watermark
        stamp("c", 1, 7_500), // late
        stamp("d", 1, 9_500), // fresh: after the watermark
        stamp("b", 2, 6_000), // held
    ];
    let start = v.delta_start(&stamps, 1_000, 9_000);
    assert_eq!(start, DeltaStart { since_ms: Some(7_499), unseen: 3, late: 2 });
    // Nothing unseen: no changes to read.
    let none = v.delta_start(&stamps[..1], 1_000, 9_000);
    assert_eq!(none, DeltaStart { since_ms: None, unseen: 0, late: 0 });
    // Never before the lookback's start.
    assert_eq!(v.delta_start(&stamps, 7_800, 9_000).since_ms, Some(7_800));
}

#[test]
fn offered_writes_are_forgotten_below_the_reach() {
    let loser = written("b", 0, "q", 2_500);
    let mut v = view_of(&[written("b", 1, "r", 2_000), loser.clone()]);
    let stamps = [ChangeStamp::of(&loser)];
    assert_eq!(v.delta_start(&stamps, 2_000, 3_000).since_ms, None, "offered");
    // A reach past it forgets it: a stamp that old is never asked again.
    v.delta_start(&[], 2_500, 4_000);
    assert!(v.offered.is_empty());
    // Without stamps too (a table before schema 5): the reader forgets
    // them at every poll, so they stay within a lookback's writes.
    v.apply(written("c", 1, "r", 5_000), 0);
    v.forget_offered(4_999);
    assert_eq!(v.offered.len(), 1);
    v.forget_offered(5_000);
    assert!(v.offered.is_empty());
}

#[test]
fn a_withdrawal_the_view_holds_is_seen_and_a_later_one_is_not() {
    let mut tombstone = mk_tombstone("a", 4, "r");
    tombstone.changed_at_ms = 9_000;
    let v = view_of(&[written("a", 3, "r", 5_000), tombstone.clone()]);
    assert_eq!(unseen(&v, &[ChangeStamp::of(&tombstone)]), Vec::<u64>::new());
    assert_eq!(unseen(&v, &[stamp("a", 5, 9_500)]), [9_500]);
}

#[test]
fn a_stamp_is_one_sortable_number_that_round_trips() {
    let a = stamp("a", u64::MAX, u64::MAX);
    let n = a.sort_value();
    assert_eq!(n >> 32, u128::from(u64::MAX));
    assert_eq!(ChangeStamp::from_sort_value(a.key.clone(), n), Some(a.clone()));
    assert_eq!(ChangeStamp::from_sort_value(a.key.clone(), u128::MAX), None, "out of range");
    // A range of write times is a range of sort values.
    let (early, late) = (stamp("a", 9, 1_000), stamp("a", 1, 1_001));
    assert!(ChangeStamp::first_sort_value(1_000) <= early.sort_value());
    assert!(early.sort_value() < ChangeStamp::first_sort_value(1_001));
    assert!(ChangeStamp::first_sort_value(1_001) <= late.sort_value());
    // Stable across builds: SHA-256 of the generation (8 bytes, big-endian)
    // and the writer id, first four bytes.
    assert_eq!(ChangeStamp::version_hash(&crate::Version::new(1, "reg-a")), 0x5e27_a46c);
}
