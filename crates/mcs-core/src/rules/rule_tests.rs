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
