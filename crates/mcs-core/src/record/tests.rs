//! What a record shows of itself: the names logs and error bodies print,
//! and the rules its methods delegate to ([`crate::rules`]).

use super::*;
use crate::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone, pool_key};

#[test]
fn display_of_kind_key_and_version_is_what_logs_and_error_bodies_show() {
    let names: Vec<String> = Kind::ALL.iter().map(Kind::to_string).collect();
    assert_eq!(names, ["cluster", "export", "pool", "router"]);

    let cluster = mk_cluster("c1", 1, "ctl", 0).key;
    assert_eq!(cluster.to_string(), "cluster/c1");
    let export = mk_export("c1", "web", 1, mk_export_spec(0, vec![])).key;
    assert_eq!(export.to_string(), "export/c1/llm/web");
    let pool = mk_pool("p", 1, "w", None, None).key;
    assert_eq!(pool.to_string(), format!("pool/{}", pool_key("p").id()));
    let router = Key::Router { router_id: RouterId::new("gr-0.us-east-1").unwrap() };
    assert_eq!(router.to_string(), "router/gr-0.us-east-1");

    assert_eq!(Version::new(42, "registrar-a").to_string(), "42@registrar-a");
}

#[test]
fn a_key_names_its_kind() {
    let kinds = [
        mk_cluster("c1", 1, "ctl", 0).key.kind(),
        mk_export("c1", "web", 1, mk_export_spec(0, vec![])).key.kind(),
        mk_pool("p", 1, "w", None, None).key.kind(),
        Key::Router { router_id: RouterId::new("gr-0").unwrap() }.kind(),
    ];
    assert_eq!(kinds, Kind::ALL);
}

#[test]
fn a_record_expires_at_its_lease_end_or_its_withdrawal() {
    let leased = mk_pool("p", 1, "w", Some("x"), Some(5_000));
    assert_eq!(leased.expires_at_ms(), Some(5_000), "the lease's end");
    let mut withdrawn = mk_tombstone("p", 2, "w");
    withdrawn.changed_at_ms = 7_000;
    assert_eq!(withdrawn.expires_at_ms(), Some(7_000), "the withdrawal's write");
    let export = mk_export("c1", "web", 1, mk_export_spec(0, vec![]));
    assert_eq!(export.expires_at_ms(), None, "an export lives on its cluster");
    let cluster = mk_cluster("c1", 1, "ctl", 9_000);
    assert_eq!(export.expires_at_ms_on(Some(&cluster)), Some(9_000), "its cluster's lease end");
}

#[test]
fn a_record_is_live_until_its_lease_ends() {
    let leased = mk_pool("p", 1, "w", Some("x"), Some(5_000));
    assert!(leased.is_live(4_999, 0));
    assert!(!leased.is_live(5_000, 0));
    assert!(leased.is_live(5_000, 1), "within the skew allowance");
}

#[test]
fn a_record_supersedes_an_older_version_only() {
    let old = mk_pool("p", 1, "w", None, Some(5_000));
    let new = mk_pool("p", 2, "w", None, Some(5_000));
    assert!(new.supersedes(&old));
    assert!(!old.supersedes(&new));
}

#[test]
fn the_content_digest_covers_the_owner_and_the_payload_only() {
    let a = mk_pool("p", 1, "w", Some("x"), Some(5_000));
    let mut renewed = a.clone();
    renewed.lease_until_ms = Some(9_000);
    renewed.changed_at_ms += 1_000;
    assert_eq!(renewed.content_digest(), a.content_digest(), "a renewal has the same content");
    let mut other_owner = a.clone();
    other_owner.owner = Some("y".into());
    assert_ne!(other_owner.content_digest(), a.content_digest());
    let other_body = mk_pool("q", 1, "w", Some("x"), Some(5_000));
    assert_ne!(other_body.content_digest(), a.content_digest());
    assert_eq!(a.content_digest().len(), 32, "16 bytes in hex");
}

#[test]
fn a_tombstone_is_a_withdrawal() {
    assert!(mk_tombstone("p", 1, "w").is_tombstone());
    assert!(!mk_pool("p", 1, "w", None, None).is_tombstone());
}

#[test]
fn a_record_was_last_written_at_its_content_change_or_its_last_renewal() {
    let mut pool = mk_pool("p", 1, "w", Some("x"), Some(40_000));
    pool.changed_at_ms = 1_000;
    assert_eq!(pool.last_written_ms(), 1_000, "no terms: the content's write");
    pool.terms = Some(LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
    assert_eq!(pool.last_written_ms(), 10_000, "renewed at the lease end less its duration");
    pool.changed_at_ms = 12_000;
    assert_eq!(pool.last_written_ms(), 12_000, "a content change after the renewal");
    pool.lease_until_ms = None;
    assert_eq!(pool.last_written_ms(), 12_000, "no lease: the content's write");
}
