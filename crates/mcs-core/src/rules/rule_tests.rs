//! The rules pinned at their boundaries, stated as what a writer or a
//! reader sees.

use super::*;
use crate::fixtures::mk_pool;

#[test]
fn a_renewal_that_does_not_extend_the_lease_is_refused() {
    let stored = mk_pool("p", 5, "r1", Some("x"), Some(100));
    let same_end = mk_pool("p", 5, "r1", Some("x"), Some(100));
    assert!(!renewal_extends(&stored, &same_end), "the same end is no extension");
    let without_lease = mk_pool("p", 5, "r1", Some("x"), None);
    assert!(!renewal_extends(&stored, &without_lease), "no lease ends before any lease");
    let unleased = mk_pool("p", 5, "r1", Some("x"), None);
    assert!(renewal_extends(&unleased, &stored), "any lease extends none");
}

#[test]
fn a_registration_continues_only_its_own_record_that_was_not_withdrawn() {
    use crate::fixtures::mk_cluster;
    let held = mk_cluster("east", 5, "inc-1", 100);
    assert!(continues_registration(Some(&held), "inc-1"), "its own lease");
    let expired = mk_cluster("east", 5, "inc-1", 0);
    assert!(continues_registration(Some(&expired), "inc-1"), "expired, its exports still stored");
    assert!(!continues_registration(Some(&held), "inc-2"), "another incarnation's");
    assert!(!continues_registration(None, "inc-1"), "nothing held: the registry forgot");
    let withdrawn = Record { body: crate::Body::Tombstone, ..mk_cluster("east", 6, "inc-1", 100) };
    assert!(!continues_registration(Some(&withdrawn), "inc-1"), "withdrawn");
    let unowned = Record { owner: None, ..held };
    assert!(!continues_registration(Some(&unowned), "inc-1"), "no owner recorded");
}

/// Issue 22, item 2: a tombstone carries the lease end of what it
/// withdraws, so that a withdrawal reaching a replica later than the
/// lookback shows in the `lease_ends` read; it is still never live, and
/// it is kept at least until that lease has ended.
#[test]
fn a_tombstone_carries_the_withdrawn_lease_end_and_is_never_live() {
    use crate::fixtures::{mk_export, mk_export_spec, mk_tombstone};
    let leased = mk_pool("p", 5, "r1", Some("x"), Some(9_000));
    assert_eq!(withdrawn_lease_end(Some(&leased)), Some(9_000), "the withdrawn lease's end");
    let export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
    assert_eq!(withdrawn_lease_end(Some(&export)), None, "an export has no lease");
    assert_eq!(withdrawn_lease_end(None), None, "nothing held");
    let mut tomb = mk_tombstone("p", 6, "r1");
    tomb.changed_at_ms = 2_000;
    tomb.lease_until_ms = Some(9_000);
    assert_eq!(withdrawn_lease_end(Some(&tomb)), Some(9_000), "a tombstone's, carried on");
    assert!(!is_live(&tomb, 0, 0), "a tombstone with a lease end is not live");
    assert_eq!(expires_at_ms(&tomb), Some(9_000), "kept until the withdrawn lease ends");
    tomb.lease_until_ms = Some(1_000);
    assert_eq!(expires_at_ms(&tomb), Some(2_000), "or its own write, if later");
    tomb.lease_until_ms = None;
    assert_eq!(expires_at_ms(&tomb), Some(2_000));
    let mut owned = tomb.clone();
    owned.owner = Some("x".into());
    owned.lease_until_ms = Some(9_000);
    let by_y = mk_pool("p", 7, "r1", Some("y"), Some(20_000));
    assert_eq!(decide(Some(&owned), &by_y, 5_000), WriteDecision::Apply, "it owns nothing");
}

/// Issue 22, item 1: TTL deleted the tombstone of an export withdrawn
/// through another region than it was written through, and the export,
/// which has no `ttl`, was served again. An export's items, tombstones
/// included, have no TTL expiry; other records keep theirs.
#[test]
fn ttl_never_deletes_an_export_or_its_tombstone() {
    use crate::fixtures::{mk_export, mk_export_spec, mk_tombstone};
    let export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
    assert_eq!(ttl_expires_at_ms(&export), None);
    let withdrawn = Record { body: crate::Body::Tombstone, changed_at_ms: 700, ..export };
    assert_eq!(ttl_expires_at_ms(&withdrawn), None, "its tombstone neither");
    assert_eq!(expires_at_ms(&withdrawn), Some(700), "gc still knows when it expired");
    let mut tomb = mk_tombstone("p", 6, "r1");
    tomb.changed_at_ms = 700;
    assert_eq!(ttl_expires_at_ms(&tomb), Some(700), "a pool's tombstone");
    assert_eq!(ttl_expires_at_ms(&mk_pool("p", 5, "r1", None, Some(900))), Some(900));
}
