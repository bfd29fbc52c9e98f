//! The view's rules pinned at their boundaries: which writes count as
//! heartbeats when the view learns how often a holder renews
//! (`View::note_renewal`, docs/design.md §6: the same version and owner
//! written later; anything else starts the count over, so that the lease is
//! at risk only once it is due), and what a full read may drop.

use super::*;
use crate::fixtures::mk_pool;

const SKEW: u64 = 500;
const LEASE: u64 = 60_000;

/// Pool `p` at generation 1, held by `owner`, written at `at_ms` with a lease
/// of `lease_ms`.
fn write(owner: &str, generation: u64, at_ms: u64, lease_ms: u64) -> Record {
    let mut record = mk_pool("p", generation, "r", Some(owner), Some(at_ms + lease_ms));
    record.changed_at_ms = at_ms;
    record
}

/// A view that saw `x` renew pool `p` every second from 0 to 3 s.
fn renewed_every_second() -> View {
    let mut v = View::new(SKEW);
    for at in [0, 1_000, 2_000, 3_000] {
        assert!(v.apply(write("x", 1, at, LEASE), at));
    }
    // The next renewal is due at 4 s: late past 4 s + skew.
    assert_eq!(v.leases_at_risk(4_000 + SKEW, 0), 0);
    assert_eq!(v.leases_at_risk(4_000 + SKEW + 1, 0), 1, "a missed heartbeat");
    v
}

#[test]
fn a_write_by_another_owner_is_not_a_heartbeat() {
    let mut v = renewed_every_second();
    assert!(v.apply(write("y", 1, 4_000, LEASE), 4_000));
    assert_eq!(v.leases_at_risk(6_000, 0), 0, "y's interval is unknown: at risk only when due");
}

#[test]
fn a_new_version_is_not_a_heartbeat() {
    let mut v = renewed_every_second();
    assert!(v.apply(write("x", 2, 4_000, LEASE), 4_000));
    assert_eq!(v.leases_at_risk(6_000, 0), 0, "a new registration starts the count over");
}

#[test]
fn a_write_at_the_same_time_is_not_a_heartbeat() {
    let mut v = renewed_every_second();
    // The same write time with a longer lease: not a renewal interval.
    assert!(v.apply(write("x", 1, 3_000, 2 * LEASE), 3_000));
    assert_eq!(v.leases_at_risk(5_000, 0), 0, "the count starts over");
}

#[test]
fn a_record_written_or_taken_as_the_full_read_began_survives_it() {
    let read_started = 1_500;
    let mut v = View::new(SKEW);
    v.apply(write("x", 1, read_started, LEASE), 1_400);
    assert_eq!(v.replace_all(Vec::new(), read_started, 2_000).dropped, 0, "written then");
    let mut v = View::new(SKEW);
    v.apply(write("x", 1, 1_000, LEASE), read_started);
    assert_eq!(v.replace_all(Vec::new(), read_started, 2_000).dropped, 0, "taken then");
    let mut v = View::new(SKEW);
    v.apply(write("x", 1, 1_000, LEASE), 1_400);
    assert_eq!(v.replace_all(Vec::new(), read_started, 2_000).dropped, 1, "both before");
}

/// Issue 22 (found by mcs-sim; its `Rules::BROKEN_KEEPS_RETIRED` is the
/// rule before): a held record whose item TTL deleted gives way to the older version the read holds, so this
/// process serves what a process that never held it serves. The held
/// version read, or one newer, keeps it; so does one written or taken as
/// the read began, as for a dropped key.
#[test]
fn a_record_no_item_holds_any_more_gives_way_to_the_older_one_read() {
    let read_started = 100_000;
    let retired = || write("old", 9, 1_000, LEASE);
    let new = write("new", 3, 90_000, LEASE);
    let mut v = View::new(SKEW);
    v.apply(retired(), 1_000);
    assert!(!v.apply(new.clone(), 90_000), "the held record supersedes the new one");
    let result = v.replace_all(vec![new.clone()], read_started, read_started + 1);
    assert_eq!(result, Resync { applied: 0, dropped: 0, retired: 1 });
    assert_eq!(v.record(&new.key), Some(&new));
    assert_eq!(v.pools().len(), 1, "the new registration is served");

    // The held version still read, from any item, or a newer one: kept.
    for also in [retired(), write("old", 10, 2_000, LEASE)] {
        let mut v = View::new(SKEW);
        v.apply(retired(), 1_000);
        let kept = v.record(&new.key).cloned().unwrap();
        let result = v.replace_all(vec![new.clone(), also.clone()], read_started, read_started);
        assert_eq!(result.retired, 0, "{also:?}");
        let winner = if also.version > kept.version { also } else { kept };
        assert_eq!(v.record(&new.key), Some(&winner));
    }
    // Of two older versions read, the newer takes over.
    let mut v = View::new(SKEW);
    v.apply(retired(), 1_000);
    let older = write("new", 2, 80_000, LEASE);
    assert_eq!(
        v.replace_all(vec![new.clone(), older.clone()], read_started, read_started).retired,
        1
    );
    assert_eq!(v.record(&new.key), Some(&new));
    let mut v = View::new(SKEW);
    v.apply(retired(), 1_000);
    assert_eq!(
        v.replace_all(vec![older.clone(), new.clone()], read_started, read_started).retired,
        1
    );
    assert_eq!(v.record(&new.key), Some(&new));
    let stamps = [ChangeStamp::of(&older), ChangeStamp::of(&new)];
    assert_eq!(v.unseen(&stamps).count(), 0, "the read offered both");

    // Written, or taken, as the read began: it may have landed behind the scan.
    let mut late = retired();
    late.changed_at_ms = read_started;
    let mut v = View::new(SKEW);
    v.apply(late.clone(), 1_000);
    assert_eq!(v.replace_all(vec![new.clone()], read_started, read_started).retired, 0);
    assert_eq!(v.record(&new.key), Some(&late));
    let mut v = View::new(SKEW);
    v.apply(retired(), read_started);
    assert_eq!(v.replace_all(vec![new.clone()], read_started, read_started).retired, 0);
    assert_eq!(v.record(&new.key), Some(&retired()));
}

#[test]
fn the_view_counts_every_record_it_holds_live_or_not() {
    let mut v = View::new(SKEW);
    assert_eq!(v.record_count(), 0);
    v.apply(write("x", 1, 0, LEASE), 0);
    v.apply(crate::fixtures::mk_tombstone("q", 1, "r"), 0);
    let mut ended = mk_pool("e", 1, "r", None, Some(10));
    ended.changed_at_ms = 0;
    v.apply(ended, 0);
    v.advance(LEASE);
    assert_eq!(v.record_count(), 3, "a lease, a withdrawal, an expired lease");
    assert_eq!(v.records().count(), 3);
    assert_eq!(v.pools().len(), 1, "only the live lease is served");
}

#[test]
fn a_router_replica_is_served_while_its_lease_is_live() {
    let router_id = mcs_api::RouterId::new("gr-0.us-east-1").unwrap();
    let replica = mcs_api::RouterReplica {
        router_id: router_id.clone(),
        address: mcs_api::HostPort::new("10.0.2.1:8000").unwrap(),
        location: None,
    };
    let record = Record {
        terms: None,
        key: Key::Router { router_id: router_id.clone() },
        version: crate::Version::new(1, "r"),
        owner: Some("gr-0-a".into()),
        lease_until_ms: Some(LEASE),
        changed_at_ms: 0,
        body: Body::Router(replica.clone()),
    };
    let mut v = View::new(SKEW);
    v.apply(record, 0);
    assert_eq!(v.routers().get(&router_id), Some(&replica));
    v.advance(LEASE + SKEW);
    assert!(v.routers().is_empty(), "its lease ended");
}

/// Issue 22, item 8: the leases at risk are counted by holder, a pool's
/// cluster or the cluster itself, so that one writer's many leases are one
/// holder ([`crate::expiry::MIN_HOLDERS`]).
#[test]
fn leases_at_risk_are_counted_by_holder() {
    use crate::fixtures::mk_cluster;
    let mut v = View::new(SKEW);
    for dgd in ["a", "b", "c"] {
        assert!(v.apply(mk_pool(dgd, 1, "r", Some("x"), Some(1_000)), 0));
    }
    let due = 10_000;
    assert_eq!(v.holders_at_risk(due, 0), 1, "three pools of one cluster");
    assert_eq!(v.leases_at_risk(due, 0), 3);
    assert_eq!(v.holders_at_risk(0, 0), 0, "nothing due yet");
    assert!(v.apply(mk_cluster("west", 1, "y", 1_000), 0));
    assert_eq!(v.holders_at_risk(due, 0), 2, "and a cluster of its own");
    assert_eq!(v.leases_at_risk(due, 0), 4);

    // Clusters alone: each its own holder.
    let mut clusters = View::new(SKEW);
    for id in ["west", "north"] {
        assert!(clusters.apply(mk_cluster(id, 1, "y", 1_000), 0));
    }
    assert_eq!(clusters.holders_at_risk(due, 0), 2);
    // Pools of two clusters: two holders, whatever the pools' names.
    let mut pools = View::new(SKEW);
    for (dgd, cluster) in [("a", "east"), ("b", "south")] {
        let mut pool = mk_pool(dgd, 1, "r", Some("x"), Some(1_000));
        if let Body::Pool(p) = &mut pool.body {
            p.pool_key.cluster_id = crate::fixtures::label(cluster);
        }
        assert!(pools.apply(pool, 0));
    }
    assert_eq!(pools.holders_at_risk(due, 0), 2);
}
