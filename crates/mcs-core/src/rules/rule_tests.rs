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
