//! The registrar's write planning pinned at its boundaries.

use super::*;
use crate::fixtures::mk_pool;

const NOW: u64 = 1_767_225_600_000;

fn intent(incarnation: Option<&str>, generation: Option<u64>) -> Intent {
    let pool = mk_pool("a", 1, "w", None, None);
    Intent {
        terms: None,
        key: pool.key,
        body: pool.body,
        incarnation: incarnation.map(str::to_owned),
        generation,
        lease_until_ms: Some(NOW + 30_000),
    }
}

#[test]
fn a_client_generation_exactly_at_the_bound_is_accepted() {
    let mut hlc = Hlc::new(60_000);
    let bound = hlc.bound(NOW);
    let at_bound = super::tests::plan_now(intent(Some("x"), Some(bound)), None, &mut hlc);
    assert_eq!(at_bound.unwrap().record().version, Version::new(bound, "x"));
    let past = super::tests::plan_now(intent(Some("x"), Some(bound + 1)), None, &mut hlc);
    assert!(matches!(past, Err(Refusal::GenerationAhead { .. })));
}

#[test]
fn a_generation_the_registrar_assigns_is_not_client_ordered() {
    let mut hlc = Hlc::default();
    let planned = super::tests::plan_now(intent(Some("x"), None), None, &mut hlc);
    let planned = planned.unwrap();
    assert!(!planned.is_client_ordered());
    assert_eq!(planned.record().version.writer, "reg");
}

/// Issue 22, item 2: a withdrawal's tombstone carries the lease end of the
/// record it withdraws (or of the tombstone it follows) and no terms.
#[test]
fn a_tombstone_carries_the_lease_end_of_what_it_withdraws() {
    use crate::fixtures::mk_tombstone;
    let mut held = mk_pool("a", 1, "w", Some("x"), Some(NOW + 9_000));
    held.terms = Some(crate::LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
    let withdrawal = |held: Option<&Record>, lease_until_ms| {
        let intent = Intent {
            terms: held.and_then(|h| h.terms),
            key: held.map_or_else(|| mk_pool("a", 1, "w", None, None).key, |h| h.key.clone()),
            body: crate::Body::Tombstone,
            incarnation: Some("x".into()),
            generation: None,
            lease_until_ms,
        };
        let planned = super::tests::plan_now(intent, held, &mut Hlc::default()).unwrap();
        let record = planned.into_record();
        (record.lease_until_ms, record.terms)
    };
    assert_eq!(withdrawal(Some(&held), None), (Some(NOW + 9_000), None));
    assert_eq!(withdrawal(None, None), (None, None), "nothing held");
    assert_eq!(withdrawal(Some(&held), Some(NOW + 10_000)), (Some(NOW + 10_000), None), "later");
    let mut tomb = mk_tombstone("a", 2, "w");
    tomb.lease_until_ms = Some(NOW + 5_000);
    assert_eq!(withdrawal(Some(&tomb), None), (Some(NOW + 5_000), None), "carried on");
    let registration = intent(Some("x"), None);
    let planned = super::tests::plan_now(registration, Some(&held), &mut Hlc::default()).unwrap();
    assert_eq!(planned.record().lease_until_ms, Some(NOW + 30_000), "a registration: its own");
}

/// Issue 22 (mcs-sim seed 2223): after TTL deleted the tombstone that
/// superseded it, a view still held an older, lapsed version of the key;
/// the client's unchanged content reused that version and the registrar
/// stored the withdrawn record live again. A heartbeat reuses the held
/// version only while its lease lasts; a lease without an end never lapses.
#[test]
fn a_heartbeat_after_the_held_lease_lapsed_gets_a_new_generation() {
    let until = NOW + 1_000;
    let held = mk_pool("a", 7, "reg-0", Some("x"), Some(until));
    let version_at = |held: &Record, now_ms: u64| {
        let mut intent = intent(Some("x"), None);
        intent.key = held.key.clone();
        intent.body = held.body.clone();
        let planned =
            PlannedWrite::plan(intent, Some(held), None, true, now_ms, "reg", &mut Hlc::default());
        planned.unwrap().into_record().version
    };
    assert_eq!(version_at(&held, until - 1), held.version, "live: a heartbeat");
    assert!(version_at(&held, until) > held.version, "lapsed at its end: a change");
    assert!(version_at(&held, until + 60_000) > held.version, "long lapsed: a change");
    let mut unleased = held.clone();
    unleased.lease_until_ms = None;
    assert_eq!(version_at(&unleased, until + 60_000), unleased.version, "no lease to lapse");
}
