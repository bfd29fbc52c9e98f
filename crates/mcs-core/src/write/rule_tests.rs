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
