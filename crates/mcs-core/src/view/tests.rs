use super::*;
use crate::Version;
use crate::fixtures::*;
use mcs_api::ConditionStatus;

const SKEW: u64 = 500;

fn fingerprints(v: &View) -> [String; 5] {
    [
        v.pools().fingerprint(),
        v.routers().fingerprint(),
        v.clusters().fingerprint(),
        v.exports().fingerprint(),
        v.imports().fingerprint(),
    ]
}

#[test]
fn a_pool_is_served_until_its_lease_plus_skew() {
    let mut v = View::new(SKEW);
    assert!(v.apply(mk_pool("a", 1, "r", None, Some(10_000)), 1_000));
    assert_eq!(v.pools().len(), 1);
    assert!(v.advance(10_000 + SKEW - 1).is_empty(), "still inside the skew allowance");
    assert_eq!(v.pools().len(), 1);
    let expired = v.advance(10_000 + SKEW);
    assert_eq!(expired.len(), 1);
    assert!(v.pools().is_empty());
    assert_eq!(v.live_leases(), 0);
    assert!(v.record(&expired[0]).is_some(), "expired records are kept to refuse older writes");
}

#[test]
fn an_already_expired_record_is_not_served() {
    let mut v = View::new(SKEW);
    v.apply(mk_pool("a", 1, "r", None, Some(1_000)), 5_000);
    assert!(v.pools().is_empty());
    assert_eq!(v.live_leases(), 0);
}

#[test]
fn a_heartbeat_extends_the_lease_without_changing_the_fingerprint() {
    let mut v = View::new(SKEW);
    v.apply(mk_pool("a", 1, "r", None, Some(10_000)), 1_000);
    let before = fingerprints(&v);
    let version = v.pools().version();
    let mut beat = mk_pool("a", 1, "r", None, Some(20_000));
    beat.changed_at_ms = 9_000;
    assert!(v.apply(beat, 9_000));
    assert_eq!(fingerprints(&v), before);
    assert_eq!(v.pools().version(), version, "no change of served content");
    assert!(v.advance(15_000).is_empty(), "the old deadline is gone");
    assert_eq!(v.advance(20_000 + SKEW).len(), 1);
}

#[test]
fn older_versions_never_replace_newer_ones() {
    let mut v = View::new(SKEW);
    let newer = mk_pool("a", 5, "r", None, Some(10_000));
    v.apply(newer.clone(), 1_000);
    let mut older = mk_pool("a", 4, "r", None, Some(99_000));
    older.body = Body::Pool(pool("a", "other-model"));
    assert!(!v.apply(older, 1_000));
    assert_eq!(v.record(&newer.key), Some(&newer));
}

#[test]
fn a_withdrawal_stays_withdrawn() {
    let mut v = View::new(SKEW);
    v.apply(mk_pool("a", 5, "r", None, Some(10_000)), 1_000);
    assert!(v.apply(mk_tombstone("a", 6, "r"), 1_000));
    assert!(v.pools().is_empty());
    assert!(!v.apply(mk_pool("a", 5, "z", None, Some(10_000)), 1_000), "late older write");
    assert!(v.pools().is_empty());
    assert!(
        v.apply(mk_pool("a", 7, "r", None, Some(10_000)), 1_000),
        "a newer write may re-register"
    );
    assert_eq!(v.pools().len(), 1);
}

#[test]
fn equal_content_gives_equal_fingerprints_whatever_the_order() {
    let records = vec![
        mk_pool("a", 1, "r", None, Some(10_000)),
        mk_pool("b", 2, "r", None, Some(10_000)),
        mk_pool("a", 3, "r", None, Some(10_000)),
        mk_tombstone("b", 4, "r"),
        mk_cluster("east", 1, "i1", 10_000),
        mk_export("east", "web", 2, mk_export_spec(1, vec![port("http", 80)])),
    ];
    let mut forward = View::new(SKEW);
    for r in records.clone() {
        forward.apply(r, 1_000);
    }
    let mut backward = View::new(SKEW);
    for r in records.into_iter().rev() {
        backward.apply(r, 1_000);
    }
    assert_eq!(fingerprints(&forward), fingerprints(&backward));
    assert_eq!(forward.pools().len(), 1);
    assert_eq!(forward.imports().len(), 1);
}

#[test]
fn exports_live_only_while_their_cluster_does() {
    let mut v = View::new(SKEW);
    let export = mk_export("east", "web", 2, mk_export_spec(1, vec![port("http", 80)]));
    v.apply(export.clone(), 1_000);
    assert!(v.exports().is_empty(), "no cluster lease yet");
    assert!(v.imports().is_empty());
    v.apply(mk_cluster("east", 1, "i1", 10_000), 1_000);
    assert_eq!(v.exports().len(), 1);
    assert_eq!(v.imports().len(), 1);
    v.advance(10_000 + SKEW);
    assert!(v.clusters().is_empty());
    assert!(v.exports().is_empty(), "the cluster's lease ended");
    assert!(v.imports().is_empty());
    let mut renewed = mk_cluster("east", 2, "i2", 30_000);
    renewed.changed_at_ms = 20_000;
    v.apply(renewed, 20_000);
    assert_eq!(v.exports().len(), 1, "a new lease brings the exports back");
    v.apply(mk_export("east", "web", 3, mk_export_spec(1, vec![])).tap_tombstone(), 20_000);
    assert!(v.exports().is_empty());
    assert!(v.imports().is_empty());
}

trait TapTombstone {
    fn tap_tombstone(self) -> Self;
}
impl TapTombstone for Record {
    fn tap_tombstone(mut self) -> Self {
        self.body = Body::Tombstone;
        self
    }
}

#[test]
fn conflicts_are_reported_on_every_export_of_the_service() {
    let mut v = View::new(SKEW);
    v.apply(mk_cluster("east", 1, "i1", 10_000), 0);
    v.apply(mk_cluster("west", 1, "i1", 10_000), 0);
    v.apply(mk_export("east", "web", 2, mk_export_spec(1, vec![port("http", 80)])), 0);
    v.apply(mk_export("west", "web", 2, mk_export_spec(2, vec![port("http", 81)])), 0);
    for cluster in ["east", "west"] {
        let key =
            ExportKey { cluster_id: label(cluster), namespace: label("llm"), name: label("web") };
        let conflict = v
            .export_conditions(&key)
            .unwrap()
            .iter()
            .find(|c| c.condition_type == "Conflict")
            .unwrap();
        assert_eq!(
            (conflict.status, conflict.reason.as_str()),
            (ConditionStatus::True, "PortConflict"),
            "{cluster}"
        );
    }
    let import = v.imports().values().next().unwrap();
    assert_eq!(import.ports[0].port, 80, "the older export's port");
    // The older exporter's cluster expires: the conflict goes with it.
    let mut west = mk_cluster("west", 2, "i1", 99_000);
    west.changed_at_ms = 5;
    v.apply(west, 5);
    v.advance(10_000 + SKEW);
    let west_key =
        ExportKey { cluster_id: label("west"), namespace: label("llm"), name: label("web") };
    let conflict = v
        .export_conditions(&west_key)
        .unwrap()
        .iter()
        .find(|c| c.condition_type == "Conflict")
        .unwrap();
    assert_eq!(conflict.status, ConditionStatus::False);
    assert_eq!(v.imports().values().next().unwrap().ports[0].port, 81);
}

#[test]
fn a_full_read_drops_what_storage_no_longer_holds() {
    let mut v = View::new(SKEW);
    let kept = mk_pool("a", 1, "r", None, Some(90_000));
    let deleted = mk_pool("b", 1, "r", None, Some(90_000));
    let mut fresh = mk_pool("c", 1, "r", None, Some(90_000));
    fresh.changed_at_ms = 2_000;
    for r in [kept.clone(), deleted.clone(), fresh.clone()] {
        v.apply(r, 1_000);
    }
    let missed = mk_pool("d", 1, "r", None, Some(90_000));
    let result = v.replace_all(vec![kept.clone(), missed], 1_500, 2_000);
    assert_eq!(result, Resync { applied: 1, dropped: 1, retired: 0 });
    assert!(v.record(&deleted.key).is_none());
    assert!(v.record(&fresh.key).is_some(), "written after the read began: kept");
    assert_eq!(v.pools().len(), 3);
}

#[test]
fn a_write_acknowledged_during_a_full_read_survives_it() {
    // The registrar reads its clock (changed_at 1_000), the scan starts at
    // 1_500 and passes the item's segment, then the write lands and is
    // applied to the view at 1_700: the scan does not hold it, but it is
    // an acknowledged write and must stay.
    let mut v = View::new(SKEW);
    let mut written = mk_pool("a", 1, "r", None, Some(90_000));
    written.changed_at_ms = 1_000;
    v.apply(written.clone(), 1_700);
    let result = v.replace_all(Vec::new(), 1_500, 2_000);
    assert_eq!(result.dropped, 0);
    assert_eq!(v.record(&written.key), Some(&written), "read-your-writes across a full read");
    // The next full read that does not hold it drops it.
    assert_eq!(v.replace_all(Vec::new(), 2_500, 3_000).dropped, 1);
}

/// xorshift64*: deterministic, seedable, good enough to shuffle tests.
pub(super) struct Rng(pub(super) u64);
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn incremental_fingerprints_match_a_view_rebuilt_from_scratch() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut v = View::new(SKEW);
        let mut now = 1_000;
        for step in 0..300u64 {
            now += rng.below(400);
            let generation = step + 1;
            let name = ["a", "b", "c", "d", "e", "f"][rng.below(6) as usize];
            let cluster = ["east", "west", "north"][rng.below(3) as usize];
            let record = match rng.below(5) {
                0 => mk_pool(name, generation, "r", None, Some(now + rng.below(3_000))),
                1 => mk_tombstone(name, generation, "r"),
                2 => mk_cluster(cluster, generation, "i", now + rng.below(3_000)),
                3 => mk_export(
                    cluster,
                    name,
                    generation,
                    mk_export_spec(
                        rng.below(4) as i64,
                        vec![port("http", 80 + rng.below(2) as u16)],
                    ),
                ),
                _ => {
                    mk_export(cluster, name, generation, mk_export_spec(0, vec![])).tap_tombstone()
                }
            };
            let mut record = record;
            record.changed_at_ms = now;
            v.apply(record, now);
            v.advance(now);
        }
        let mut rebuilt = View::new(SKEW);
        for r in v.records().cloned().collect::<Vec<_>>() {
            rebuilt.apply(r, now);
        }
        assert_eq!(fingerprints(&v), fingerprints(&rebuilt), "seed {seed}");
        assert_eq!(v.pools().fingerprint(), v.pools().fingerprint_from_scratch(), "seed {seed}");
        assert_eq!(
            v.exports().fingerprint(),
            v.exports().fingerprint_from_scratch(),
            "seed {seed}"
        );
        assert_eq!(
            v.imports().fingerprint(),
            v.imports().fingerprint_from_scratch(),
            "seed {seed}"
        );
        let _ = Version::new(0, "");
    }
}

/// A pool record renewed at `at_ms` with a lease of `duration_ms`.
fn beat(dgd_name: &str, at_ms: u64, duration_ms: u64) -> Record {
    let mut record = mk_pool(dgd_name, 1, "r", None, Some(at_ms + duration_ms));
    record.changed_at_ms = at_ms;
    record
}

/// Feeds the view heartbeats of `dgd_name` every `every_ms` from `from_ms`
/// to `to_ms` (inclusive), each seen as soon as it is written.
fn heartbeat(v: &mut View, dgd_name: &str, duration_ms: u64, every_ms: u64, from: u64, to: u64) {
    let mut at = from;
    while at <= to {
        v.apply(beat(dgd_name, at, duration_ms), at);
        at += every_ms;
    }
}

/// The rule of the mass-expiry hold (docs/design.md §6): a lease is at risk when it
/// is due or has missed a renewal its holder's heartbeat interval promises;
/// a lease that merely ends soon is not. Healthy leases of every length,
/// the short ones a client chose included, are never at risk.
#[test]
fn only_leases_that_missed_a_renewal_are_at_risk_whatever_their_length() {
    const SLACK: u64 = 2_000;
    let mut v = View::new(SKEW);
    // Mixed lengths: 6 s renewed every 2 s (the README walkthrough), 30 s
    // every 10 s (the defaults), 3 s every 1 s and 86 400 s every 60 s
    // (leases clients asked for).
    heartbeat(&mut v, "short", 6_000, 2_000, 0, 60_000);
    heartbeat(&mut v, "default", 30_000, 10_000, 0, 60_000);
    heartbeat(&mut v, "tiny", 3_000, 1_000, 0, 60_000);
    heartbeat(&mut v, "day", 86_400_000, 60_000, 0, 60_000);
    // A dead holder: renewed every 2 s with a 6 s lease, last at 52 s.
    heartbeat(&mut v, "dead", 6_000, 2_000, 0, 52_000);
    assert_eq!(v.live_leases(), 5);
    assert_eq!(v.leases_at_risk(60_000, SLACK), 1, "only the dead pool missed its renewals");
    // Every healthy lease ends within 10 s, but none is at risk.
    assert_eq!(v.leases_at_risk(60_000 + 999, SLACK), 1);
    // The dead pool is due at 58.5 s; still the only one.
    assert_eq!(v.leases_at_risk(58_500, SLACK), 1);
    // Its renewal was due at 54 s: at risk only past 54 s + skew + slack.
    assert_eq!(v.leases_at_risk(54_000 + SKEW + SLACK, SLACK), 0);
    assert_eq!(v.leases_at_risk(54_000 + SKEW + SLACK + 1, SLACK), 1);
}

#[test]
fn in_a_stall_every_lease_is_at_risk_within_a_heartbeat_interval() {
    const SLACK: u64 = 2_000;
    let mut v = View::new(SKEW);
    // The view stops receiving writes after 60 s; holders renewed every
    // 2 s (6 s leases) and every 10 s (30 s leases), out of step.
    for i in 0..4u64 {
        heartbeat(&mut v, &format!("s{i}"), 6_000, 2_000, i * 400, 60_000);
        heartbeat(&mut v, &format!("l{i}"), 30_000, 10_000, i * 2_000, 60_000);
    }
    // At the first expiry (s1, last renewed at 58.4 s), every short lease
    // is at risk, and the long ones whose renewal was due more than skew +
    // slack ago: l1, renewed at 52 s.
    let first = v.next_deadline().unwrap();
    assert_eq!(first, 58_400 + 6_000 + SKEW);
    assert_eq!(v.leases_at_risk(first, SLACK), 4 + 1, "s0..s3 and l1");
    // One long heartbeat interval later every lease missed a renewal.
    assert_eq!(v.leases_at_risk(60_000 + 10_000 + SKEW + SLACK + 1, SLACK), 8);
}

#[test]
fn a_lease_whose_heartbeat_the_view_has_not_seen_is_at_risk_only_when_due() {
    let mut v = View::new(SKEW);
    v.apply(beat("a", 1_000, 6_000), 1_000);
    assert_eq!(v.leases_at_risk(7_000 + SKEW - 1, 0), 0);
    assert_eq!(v.leases_at_risk(7_000 + SKEW, 0), 1);
    // A new registration (another version) forgets the interval seen.
    heartbeat(&mut v, "b", 6_000, 1_000, 0, 3_000);
    assert_eq!(v.leases_at_risk(5_000, 0), 1, "b renews every second");
    let mut again = mk_pool("b", 2, "r", None, Some(3_500 + 6_000));
    again.changed_at_ms = 3_500;
    v.apply(again, 3_500);
    assert_eq!(v.leases_at_risk(5_000, 0), 0, "b's new version has no interval yet");
}

#[test]
fn a_retry_right_after_a_renewal_is_not_taken_for_the_heartbeat() {
    let mut v = View::new(SKEW);
    heartbeat(&mut v, "a", 30_000, 10_000, 0, 20_000);
    // Two retries 50 ms apart after the renewal at 20 s (or writes whose
    // changed_at was moved just past the held one's).
    v.apply(beat("a", 20_050, 30_000), 20_050);
    v.apply(beat("a", 20_100, 30_000), 20_100);
    assert_eq!(v.leases_at_risk(25_000, 2_000), 0, "still renewing every 10 s");
    assert_eq!(v.leases_at_risk(20_100 + 10_000 + SKEW + 2_001, 2_000), 1);
}

/// [`View::leases_at_risk`] counted the slow way, from every served lease.
pub(super) fn at_risk_by_brute_force(v: &View, now: u64, slack: u64) -> usize {
    let raised_late = v.confirmed_poll_ms + v.skew_ms + slack < now;
    v.deadlines
        .iter()
        .filter(|(deadline, key)| {
            let overdue = if v.raised.contains(key) {
                raised_late
            } else {
                v.renewal_due(&v.records[key]) + v.skew_ms + slack < now
            };
            *deadline <= now || overdue
        })
        .count()
}

#[test]
fn the_index_of_renewals_due_follows_every_change() {
    let mut v = View::new(SKEW);
    let mut now = 0;
    let check = |v: &View, now: u64| {
        assert_eq!(v.renewals_due.len(), v.deadlines.len(), "one entry per served lease");
        assert_eq!(v.renewal_due_of.len(), v.deadlines.len());
        for slack in [0, 700, 2_000] {
            for at in [now, now + 1_500, now + 4_000, now + 9_000] {
                assert_eq!(v.leases_at_risk(at, slack), at_risk_by_brute_force(v, at, slack));
            }
        }
    };
    for round in 0..12u64 {
        for i in 0..6u64 {
            // Pool i renews every (i + 1) s with a lease of 3 (i + 1) s;
            // pools 4 and 5 stop after round 5; pool 3 is re-registered
            // (a new version) in round 7; pool 2 is withdrawn in round 9.
            if (i >= 4 && round > 5) || round % (i + 1) != 0 {
                continue;
            }
            let name = format!("p{i}");
            let record = match (i, round) {
                (2, 9..) => mk_tombstone(&name, 2 + round, "r"),
                (3, 7..) => {
                    let mut r = mk_pool(&name, 2, "r", None, Some(now + 12_000));
                    r.changed_at_ms = now;
                    r
                }
                _ => beat(&name, now, 3_000 * (i + 1)),
            };
            v.apply(record, now);
            check(&v, now);
        }
        now += 1_000;
        v.advance(now);
        check(&v, now);
    }
    let records: Vec<Record> = v
        .records()
        .filter(|r| r.key != Key::Pool { pool_id: pool("p0", "m").pool_id })
        .cloned()
        .collect();
    v.replace_all(records, now + 1, now + 1);
    check(&v, now + 1);
}

#[test]
fn a_discovered_view_serves_pools_and_routers_only_as_set() {
    let mut v = View::discovered(SKEW);
    assert!(v.is_discovered());
    // A pool record (left in storage by registrations) is kept, not served.
    assert!(v.apply(mk_pool("stale", 1, "r", None, Some(10_000)), 1_000));
    assert!(v.pools().is_empty());
    assert_eq!(v.live_leases(), 0, "nor does its lease count toward expiries");
    let a = pool("a", "m");
    let b = pool("b", "m");
    let empty = View::discovered(SKEW).pools().fingerprint();
    let both: BTreeMap<_, _> = [a.clone(), b.clone()].map(|p| (p.pool_id.clone(), p)).into();
    assert!(v.replace_discovered(both.clone(), BTreeMap::new()));
    assert_eq!(v.pools().len(), 2);
    let version = v.pools().version();
    assert!(!v.replace_discovered(both, BTreeMap::new()), "the same content changes nothing");
    assert_eq!(v.pools().version(), version);
    assert!(v.replace_discovered([(b.pool_id.clone(), b.clone())].into(), BTreeMap::new()));
    assert_eq!(v.pools().values().collect::<Vec<_>>(), vec![&b]);
    assert_eq!(v.pools().fingerprint(), v.pools().fingerprint_from_scratch());
    assert!(v.replace_discovered(BTreeMap::new(), BTreeMap::new()));
    assert_eq!(v.pools().fingerprint(), empty);
    // A view of registrations ignores it.
    let mut registrations = View::new(SKEW);
    assert!(!registrations.replace_discovered([(a.pool_id.clone(), a)].into(), BTreeMap::new()));
    assert!(registrations.pools().is_empty());
}
