//! [`View::confirm_leases`]: renewals that keep `changed_at` reach the view
//! through reads of stored lease ends (docs/design.md §6 "Renewals and the
//! change feed").

use super::tests::{Rng, at_risk_by_brute_force};
use super::*;
use crate::fixtures::mk_pool;
use crate::{LeasePolicy, LeaseTerms};

const SKEW: u64 = 500;
const LOOKBACK: u64 = 10_000;
const REFRESH: u64 = 2_000;

fn terms(duration_ms: u64, heartbeat_ms: u64) -> LeaseTerms {
    LeaseTerms { duration_ms, heartbeat_ms }
}

/// Pool `name` written at `at_ms` under `terms`.
fn leased(name: &str, at_ms: u64, terms: LeaseTerms) -> Record {
    let mut record = mk_pool(name, 1, "r", None, Some(at_ms + terms.duration_ms));
    record.changed_at_ms = at_ms;
    record.terms = Some(terms);
    record
}

/// The window a reader polling at `polled_at` after one at `previous`
/// asks for, with the defaults' horizon.
fn window(previous: u64, polled_at: u64) -> LeaseWindow {
    let horizon = LeasePolicy::new(30, 10).unwrap().horizon_ms(SKEW, REFRESH, LOOKBACK);
    LeaseWindow {
        from_ms: previous.saturating_sub(LOOKBACK),
        to_ms: polled_at + horizon,
        settled_ms: polled_at.saturating_sub(LOOKBACK),
        polled_at_ms: polled_at,
        raise_by_ms: polled_at + 2 * REFRESH,
    }
}

fn lease_of(v: &View, record: &Record) -> Option<u64> {
    v.record(&record.key).and_then(|r| r.lease_until_ms)
}

fn end(record: &Record, lease_until_ms: u64) -> LeaseEnd {
    LeaseEnd { key: record.key.clone(), version: record.version.clone(), lease_until_ms }
}

#[test]
fn the_defaults_horizon_keeps_leases_renewed_on_time_out_of_the_answer() {
    // 30 s lease, 10 s heartbeat, 500 ms skew, 2 s refresh: 17.5 s, above
    // the lookback plus two polls (14 s).
    let horizon = LeasePolicy::new(30, 10).unwrap().horizon_ms(SKEW, REFRESH, LOOKBACK);
    assert_eq!(horizon, 17_500);
    // A policy with a thin margin falls back to the lookback plus two polls.
    assert_eq!(LeasePolicy::new(6, 5).unwrap().horizon_ms(SKEW, REFRESH, LOOKBACK), 14_000);
}

#[test]
fn a_lease_absent_from_the_read_is_raised_to_the_window_end_and_no_further() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(30_000, 10_000));
    v.apply(pool.clone(), 0);
    let before = v.pools().fingerprint();
    // Poll at 10 s: the lease (30 s) is beyond the window (27.5 s).
    assert_eq!(v.confirm_leases(&[], window(8_000, 10_000), 10_000), Confirmed::default());
    // Poll at 24 s: in the window, but ending after the next two polls:
    // left for a later one.
    assert_eq!(v.confirm_leases(&[], window(22_000, 24_000), 24_000), Confirmed::default());
    assert_eq!(lease_of(&v, &pool), Some(30_000));
    // Poll at 26 s: due by the poll after next and not returned, so stored
    // beyond the window: raised to its end (43.5 s).
    let got = v.confirm_leases(&[], window(24_000, 26_000), 26_000);
    assert_eq!((got.renewed, got.extended), (0, 1));
    assert_eq!(lease_of(&v, &pool), Some(43_500));
    assert_eq!(v.next_deadline(), Some(43_500 + SKEW));
    assert_eq!(v.pools().fingerprint(), before, "served content is unchanged");
    assert!(v.advance(43_000).is_empty(), "the old deadline is gone");
    // A later stored end read back is taken as it is.
    let got = v.confirm_leases(&[end(&pool, 50_000)], window(26_000, 28_000), 28_000);
    assert_eq!((got.renewed, got.extended), (1, 0));
    assert_eq!(lease_of(&v, &pool), Some(50_000));
}

#[test]
fn a_short_lease_is_raised_only_to_the_earliest_end_a_recent_write_can_have() {
    let mut v = View::new(SKEW);
    // 12 s lease: a renewal written within the lookback may be missing
    // from the index, and ends no earlier than settled + 12 s.
    let pool = leased("a", 0, terms(12_000, 4_000));
    v.apply(pool.clone(), 0);
    v.confirm_leases(&[], window(8_000, 10_000), 10_000);
    assert_eq!(lease_of(&v, &pool), Some(12_000), "settled 0 + 12 s is no later");
    v.confirm_leases(&[], window(10_000, 12_000), 12_000);
    assert_eq!(lease_of(&v, &pool), Some(14_000), "settled 2 s + 12 s");
}

#[test]
fn a_holder_that_stopped_expires_at_its_stored_end() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(30_000, 10_000));
    v.apply(pool.clone(), 0);
    // The stored end is the view's: returned, so nothing is raised; once
    // due within two polls it is named for a whole read (another origin's
    // item might hold a later end), which finds the same end.
    for polled_at in (14_000..=30_000).step_by(2_000) {
        let ends = [end(&pool, 30_000)];
        let got = v.confirm_leases(&ends, window(polled_at - 2_000, polled_at), polled_at);
        assert_eq!((got.renewed, got.extended), (0, 0));
        let due_soon = 30_000 <= polled_at + 2 * REFRESH;
        assert_eq!(got.recheck.len(), usize::from(due_soon), "at {polled_at}");
    }
    assert!(v.advance(30_000 + SKEW - 1).is_empty());
    assert_eq!(v.advance(30_000 + SKEW).len(), 1);
}

#[test]
fn an_end_of_another_version_does_not_count_as_the_records() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(30_000, 10_000));
    v.apply(pool.clone(), 0);
    let mut other = end(&pool, 20_000);
    other.version = crate::Version::new(0, "r");
    let got = v.confirm_leases(&[other], window(24_000, 26_000), 26_000);
    assert_eq!(got.extended, 1, "the view's version is stored beyond the window");
    assert_eq!(lease_of(&v, &pool), Some(43_500));
}

#[test]
fn records_without_terms_are_left_to_the_change_feed() {
    let mut v = View::new(SKEW);
    let mut pool = leased("a", 0, terms(30_000, 10_000));
    pool.terms = None;
    v.apply(pool.clone(), 0);
    assert_eq!(v.confirm_leases(&[], window(24_000, 26_000), 26_000), Confirmed::default());
    assert_eq!(lease_of(&v, &pool), Some(30_000));
}

#[test]
fn a_lapsed_lease_absent_from_the_read_is_read_whole_not_revived() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(12_000, 4_000));
    v.apply(pool.clone(), 0);
    assert_eq!(v.advance(12_000 + SKEW).len(), 1);
    assert!(v.pools().is_empty());
    // Absent from a read whose window holds the view's end: renewed late,
    // or its item lost its lease end (a late withdrawal). Read whole.
    let got = v.confirm_leases(&[], window(12_000, 14_000), 14_000);
    assert_eq!((got.extended, got.recheck.clone()), (0, vec![pool.key.clone()]));
    assert!(v.pools().is_empty(), "not revived by inference");
    // The whole read finds the late renewal: served again.
    v.apply(Record { lease_until_ms: Some(25_000), ..pool.clone() }, 14_000);
    assert_eq!(v.pools().len(), 1, "served again");
    // Once its end is below every window, a lapsed lease is not looked at.
    v.advance(25_000 + SKEW);
    v.confirm_leases(&[], window(40_000, 42_000), 42_000);
    assert!(v.lapsed.is_empty());
}

#[test]
fn a_lease_the_last_read_returned_is_read_whole_once_absent() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(30_000, 10_000));
    v.apply(pool.clone(), 0);
    // Returned at its stored end (the holder is late) ...
    let got = v.confirm_leases(&[end(&pool, 30_000)], window(22_000, 24_000), 24_000);
    assert!(got.recheck.is_empty(), "not due within two polls yet");
    // ... then absent: renewed late beyond the window, or withdrawn (a
    // tombstone has no lease end). Read whole, not raised.
    let got = v.confirm_leases(&[], window(24_000, 26_000), 26_000);
    assert_eq!((got.extended, got.recheck), (0, vec![pool.key.clone()]));
    assert_eq!(lease_of(&v, &pool), Some(30_000));
}

#[test]
fn raised_leases_are_at_risk_together_once_a_poll_is_missed() {
    let mut v = View::new(SKEW);
    let pool = leased("a", 0, terms(30_000, 10_000));
    v.apply(pool.clone(), 0);
    v.confirm_leases(&[], window(24_000, 26_000), 26_000);
    assert_eq!(v.leases_at_risk(26_000 + SKEW + REFRESH, REFRESH), 0);
    assert_eq!(v.leases_at_risk(26_000 + SKEW + REFRESH + 1, REFRESH), 1);
    assert_eq!(at_risk_by_brute_force(&v, 26_000 + SKEW + REFRESH + 1, REFRESH), 1);
    let keys: Vec<&Key> = v.keys_at_risk(26_000 + SKEW + REFRESH + 1, REFRESH).collect();
    assert_eq!(keys, [&pool.key], "the keys counted, for reports of which");
    // A poll that does not raise it again still confirms it.
    v.confirm_leases(&[], window(26_000, 28_000), 28_000);
    assert_eq!(lease_of(&v, &pool), Some(43_500), "not raised again yet");
    assert_eq!(v.leases_at_risk(28_000 + SKEW + REFRESH, REFRESH), 0);
    // Read back at its stored end: due by its terms again (renewed at
    // 25.5 s, next due at 35.5 s).
    v.confirm_leases(&[end(&pool, 55_500)], window(28_000, 30_000), 30_000);
    assert_eq!(lease_of(&v, &pool), Some(55_500));
    assert_eq!(v.leases_at_risk(35_500 + SKEW + REFRESH, REFRESH), 0);
    assert_eq!(v.leases_at_risk(35_500 + SKEW + REFRESH + 1, REFRESH), 1);
}

/// One holder in the model of [`confirmed_views_keep_live_leases_and_drop_dead_ones`].
struct Holder {
    record: Record,
    terms: LeaseTerms,
    /// `(written_at, lease end)` of its last two writes, the latest last.
    writes: [(u64, u64); 2],
    /// When the holder stops renewing, if it does.
    stops_at: Option<u64>,
}

impl Holder {
    fn stored_until(&self) -> u64 {
        self.writes[1].1
    }

    /// The index's entry at `now` if it lags writes by `lag`: the last
    /// write older than that; for a newer one still on its way, the
    /// previous entry, or none while the moved entry is between its delete
    /// and its put (`gap_ms` after the write).
    fn indexed(&self, now: u64, lag: u64, gap_ms: u64) -> Option<u64> {
        let [(_, before), (written_at, until)] = self.writes;
        if written_at + lag <= now {
            Some(until)
        } else if written_at + gap_ms.min(lag) > now {
            None
        } else {
            Some(before)
        }
    }
}

/// A reader that sees no renewal through the change feed, only through
/// reads of lease ends from an index that lags writes by up to `max_lag`
/// (an entry being moved shows its previous end meanwhile, or nothing for
/// `gap_ms`), polling every 2 s:
/// - never holds a lease end above the stored one, whatever the lag
///   within the lookback;
/// - stops serving a holder that stopped by its stored end plus the skew;
/// - with an index lag small beside the leases (400 ms here) and no gap,
///   serves every holder that renews on time at every instant. (The change
///   feed needs the same of its index: an entry of `changes` missing at a
///   poll hides a renewal just as one of `lease_ends` does, and a 3 s
///   lease renewed every second outlives one such poll only by luck.)
///
/// With `parts`, each poll's plan is applied a few steps at a time, the
/// view expiring what is due between the parts (as a registry's GETs do
/// while its reader applies a plan under the write lock, part by part).
fn run_confirmed_views(max_lag: u64, gap_ms: u64, check_liveness: bool, parts: bool) {
    let kinds = [
        terms(30_000, 10_000),
        terms(6_000, 2_000),
        terms(3_000, 1_000),
        terms(20_000, 15_000),
        terms(120_000, 30_000),
    ];
    for seed in 1..=30u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut v = View::new(SKEW);
        let mut holders: Vec<Holder> = (0..12)
            .map(|i| {
                let terms = kinds[rng.below(kinds.len() as u64) as usize];
                let record = leased(&format!("p{i}"), 0, terms);
                let stops_at = (rng.below(3) == 0).then(|| 5_000 + rng.below(60_000));
                let first = (0, terms.duration_ms);
                Holder { record, terms, writes: [first, first], stops_at }
            })
            .collect();
        for h in &holders {
            v.apply(h.record.clone(), 0);
        }
        let mut previous_poll = 0;
        let mut next_poll = REFRESH;
        for now in (100..=90_000u64).step_by(100) {
            // Holders renew on time, a little early at random.
            for h in holders.iter_mut() {
                let due = h.writes[1].0 + h.terms.heartbeat_ms - rng.below(300);
                if now >= due && h.stops_at.is_none_or(|stop| now < stop) {
                    h.writes = [h.writes[1], (now, now + h.terms.duration_ms)];
                }
            }
            if now >= next_poll {
                let w = window(previous_poll, now);
                let ends: Vec<LeaseEnd> = holders
                    .iter()
                    .filter_map(|h| {
                        let until = h.indexed(now, rng.below(max_lag + 1), gap_ms)?;
                        (w.from_ms..=w.to_ms).contains(&until).then(|| end(&h.record, until))
                    })
                    .collect();
                let confirmed = if parts {
                    let mut plan = v.plan_leases(&ends, w);
                    let steps = plan.pending();
                    let done = (0..=steps).any(|_| {
                        let done = v.apply_leases(&mut plan, 1 + rng.below(3) as usize, now);
                        v.advance(now);
                        done
                    });
                    assert!(done, "seed {seed} at {now}: {steps} steps not done in as many parts");
                    plan.into_confirmed()
                } else {
                    v.confirm_leases(&ends, w, now)
                };
                // The reader reads whole what the read cannot settle.
                for key in confirmed.recheck {
                    let h = holders.iter().find(|h| h.record.key == key).unwrap();
                    let stored =
                        Record { lease_until_ms: Some(h.stored_until()), ..h.record.clone() };
                    v.apply(stored, now);
                }
                previous_poll = now;
                next_poll = now + REFRESH;
            }
            v.advance(now);
            for h in &holders {
                let held = lease_of(&v, &h.record).unwrap();
                let stored = h.stored_until();
                assert!(held <= stored, "seed {seed} at {now}: view {held} above stored {stored}");
                let served = v.pools().get(&pool_id(&h.record)).is_some();
                if check_liveness && h.stops_at.is_none_or(|stop| now < stop) {
                    assert!(
                        served,
                        "seed {seed} at {now}: live holder {:?} not served (view {held}, writes {:?}, polled {previous_poll})",
                        h.terms, h.writes
                    );
                }
                if now >= stored + SKEW {
                    assert!(!served, "seed {seed} at {now}: dead holder served past its end");
                }
            }
            assert_eq!(at_risk_by_brute_force(&v, now, REFRESH), v.leases_at_risk(now, REFRESH));
        }
    }
}

#[test]
fn confirmed_views_keep_live_leases_and_drop_dead_ones() {
    run_confirmed_views(400, 0, true, false);
}

#[test]
fn confirmed_views_applied_in_parts_keep_live_leases_and_drop_dead_ones() {
    run_confirmed_views(400, 0, true, true);
}

#[test]
fn confirmed_views_applied_in_parts_never_hold_a_lease_above_the_stored_one() {
    run_confirmed_views(LOOKBACK - 1, LOOKBACK - 1, false, true);
}

#[test]
fn confirmed_views_never_hold_a_lease_above_the_stored_one_whatever_the_index_lag() {
    run_confirmed_views(LOOKBACK - 1, LOOKBACK - 1, false, false);
}

fn pool_id(record: &Record) -> mcs_api::PoolId {
    match &record.key {
        Key::Pool { pool_id } => pool_id.clone(),
        _ => unreachable!("pools only"),
    }
}

#[test]
fn keys_a_read_cannot_settle_are_named_for_a_whole_read() {
    let mut v = View::new(SKEW);
    let failed_over = leased("failed-over", 0, terms(30_000, 10_000));
    let replaced = leased("replaced", 0, terms(30_000, 10_000));
    let renewed = leased("renewed", 0, terms(30_000, 10_000));
    let later = leased("later", 10_000, terms(30_000, 10_000));
    let mut termless = leased("termless", 0, terms(30_000, 10_000));
    termless.terms = None;
    for r in [&failed_over, &replaced, &renewed, &later, &termless] {
        v.apply(r.clone(), 0);
    }
    let mut newer = end(&replaced, 55_000);
    newer.version = crate::Version::new(9, "r");
    let ends = [
        // Another origin's item of the view's version, ending no later:
        // the item the view's end came from may be renewed beyond.
        end(&failed_over, 29_000),
        // A newer version than the view's: a change the poll missed.
        newer,
        // A later end: a renewal, settled by the read itself.
        end(&renewed, 45_000),
        // Due after the next two polls: left for later.
        end(&later, 40_000),
        end(&termless, 30_000),
    ];
    let w = window(24_000, 26_000);
    let mut got = v.leases_to_recheck(&ends, w);
    got.sort();
    let mut want = vec![failed_over.key.clone(), replaced.key.clone()];
    want.sort();
    assert_eq!(got, want);
    // The replaced version is not raised meanwhile: its key is read whole.
    let confirmed = v.confirm_leases(&ends, w, 26_000);
    assert_eq!((confirmed.renewed, confirmed.extended), (1, 0));
    assert_eq!(confirmed.recheck.len(), 2);
    assert_eq!(lease_of(&v, &replaced), Some(30_000));
    assert_eq!(lease_of(&v, &failed_over), Some(30_000), "neither renewed nor raised");
}

/// Leases of `n` pools written at 0 under 30 s terms, and a view of them.
fn view_of_leases(n: usize) -> (View, Vec<Record>) {
    let mut v = View::new(SKEW);
    let pools: Vec<Record> =
        (0..n).map(|i| leased(&format!("p{i}"), 0, terms(30_000, 10_000))).collect();
    for pool in &pools {
        v.apply(pool.clone(), 0);
    }
    (v, pools)
}

#[test]
fn a_plan_applied_in_parts_changes_what_the_whole_does() {
    let (mut whole, pools) = view_of_leases(40);
    let (mut parted, _) = view_of_leases(40);
    // Half the pools read back with later ends, the rest absent: raised.
    let ends: Vec<LeaseEnd> = pools.iter().step_by(2).map(|p| end(p, 44_000)).collect();
    let w = window(24_000, 26_000);
    let expected = whole.confirm_leases(&ends, w, 26_000);
    assert_eq!((expected.renewed, expected.extended), (20, 20));
    let mut plan = parted.plan_leases(&ends, w);
    assert_eq!(plan.pending(), 40);
    for part in 1..=5 {
        assert!(!parted.apply_leases(&mut plan, 7, 26_000), "part {part} of 6");
        assert_eq!(plan.pending(), 40 - 7 * part, "seven steps a part");
    }
    assert!(parted.apply_leases(&mut plan, 7, 26_000), "40 steps in parts of 7: the sixth ends it");
    assert_eq!(plan.pending(), 0);
    assert_eq!(plan.into_confirmed(), expected);
    for pool in &pools {
        assert_eq!(lease_of(&parted, pool), lease_of(&whole, pool), "{:?}", pool.key);
    }
    assert_eq!(parted.next_deadline(), whole.next_deadline());
    assert_eq!(parted.raised, whole.raised);
    assert_eq!(parted.answered, whole.answered);
    assert_eq!(parted.confirmed_poll_ms, 26_000);
}

#[test]
fn a_step_planned_for_a_version_since_replaced_is_skipped() {
    let (mut v, pools) = view_of_leases(2);
    let (renewed, raised) = (&pools[0], &pools[1]);
    let w = window(24_000, 26_000);
    let mut plan = v.plan_leases(&[end(renewed, 44_000)], w);
    assert_eq!(plan.pending(), 2, "one renewal, one raise");
    // Both rewritten between the plan and its application, ending sooner
    // than the plan would move them.
    for i in 0..pools.len() {
        let mut newer = leased(&format!("p{i}"), 20_000, terms(30_000, 10_000));
        newer.version = crate::Version::new(2, "r");
        newer.lease_until_ms = Some(31_000);
        v.apply(newer, 25_000);
    }
    assert!(v.apply_leases(&mut plan, usize::MAX, 26_000));
    assert_eq!((lease_of(&v, renewed), lease_of(&v, raised)), (Some(31_000), Some(31_000)));
    let got = plan.into_confirmed();
    assert_eq!((got.renewed, got.extended), (0, 0));
    assert!(v.raised.is_empty(), "nothing raised");
}

#[test]
fn lapsed_leases_below_the_window_are_forgotten_once_the_whole_plan_is_applied() {
    let (mut v, pools) = view_of_leases(3);
    // The first lapses here; the others are read back renewed.
    v.advance(30_000 + SKEW);
    assert_eq!(v.lapsed.len(), 3);
    let ends: Vec<LeaseEnd> = pools.iter().skip(1).map(|p| end(p, 80_000)).collect();
    // A window starting past the lapsed end.
    let w = window(42_000, 44_000);
    let mut plan = v.plan_leases(&ends, w);
    assert!(!v.apply_leases(&mut plan, 1, 44_000), "one of two renewals");
    assert_eq!(v.lapsed.len(), 2, "kept until the plan is done");
    assert!(v.apply_leases(&mut plan, 1, 44_000));
    assert!(v.lapsed.is_empty());
    let (mut empty, _) = view_of_leases(0);
    let mut plan = empty.plan_leases(&[], w);
    assert_eq!(plan.pending(), 0);
    assert!(empty.apply_leases(&mut plan, 0, 44_000), "nothing to apply: done at once");
}

#[test]
fn a_lease_already_at_its_bound_is_neither_raised_nor_counted() {
    let (mut v, pools) = view_of_leases(1);
    // Settled at 0: a 30 s lease written since ends no earlier than 30 s,
    // the view's end already.
    let w = LeaseWindow {
        from_ms: 0,
        to_ms: 40_000,
        settled_ms: 0,
        polled_at_ms: 10_000,
        raise_by_ms: 40_000,
    };
    let mut plan = v.plan_leases(&[], w);
    assert_eq!(plan.pending(), 1, "absent from the read, in the window");
    assert!(v.apply_leases(&mut plan, usize::MAX, 10_000));
    assert_eq!(plan.into_confirmed(), Confirmed::default());
    assert_eq!(lease_of(&v, &pools[0]), Some(30_000));
    assert!(v.raised.is_empty(), "a stored end, not a raised one");
}

#[test]
fn a_lapsed_lease_ending_at_the_window_start_is_kept() {
    let (mut v, _) = view_of_leases(1);
    v.advance(30_000 + SKEW);
    assert_eq!(v.lapsed.len(), 1);
    let w = LeaseWindow {
        from_ms: 30_000,
        to_ms: 60_000,
        settled_ms: 40_000,
        polled_at_ms: 50_000,
        raise_by_ms: 54_000,
    };
    // Read back at a later end: a late renewal, served again.
    let mut plan = v.plan_leases(&[], w);
    assert!(v.apply_leases(&mut plan, usize::MAX, 50_000));
    assert_eq!(v.lapsed.len(), 1, "its end is in the window: a later read may still find it");
}
