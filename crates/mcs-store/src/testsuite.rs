//! The store conformance suite: written once against [`Store`], run against
//! every backend.
//!
//! `store_conformance_suite!(expr)` expands to one `#[tokio::test]` per case;
//! `expr` is evaluated (and may `.await`) once per test, so every test gets a
//! store of its own. `store_conformance_suite!(optional: expr)` takes an
//! `expr` of type `Option<S>` instead, and a test whose store is `None`
//! passes without running (a backend whose server is not configured).
//! Every backend it runs against implements [`EmulatesTtl`], so that the
//! suite can delete what DynamoDB's TTL would.

#![allow(clippy::unwrap_used)] // test code: a failed call should fail the test loudly

use crate::{
    ChangeStamp, LeaseEnd, MAX_ITEM_BYTES, PutOutcome, Store, StoreError, record_item_size,
};
use mcs_core::fixtures::{
    mk_endpoints, mk_export, mk_export_spec, mk_incompressible_endpoints, mk_pool, mk_tombstone,
    pool, pool_key,
};
use mcs_core::{Body, Key, LeaseTerms, Record, Version};
use std::sync::Arc;

pub use crate::EmulatesTtl;

/// Expands to the conformance suite for the store built by `$make`; with
/// `optional:`, `$make` is an `Option` and `None` skips the test.
#[macro_export]
macro_rules! store_conformance_suite {
    (optional: $make:expr) => {
        $crate::store_conformance_suite!(@suite $make);
    };
    ($make:expr) => {
        $crate::store_conformance_suite!(@suite ::std::option::Option::Some($make));
    };
    (@suite $make:expr) => {
        $crate::store_conformance_suite!(@cases $make;
            put_then_read_back,
            idempotent_retry_is_applied_once,
            racing_writers_get_exactly_one_applied_per_generation,
            stale_writes_name_the_stored_version,
            renewal_extends_and_never_shortens_the_lease,
            a_tombstone_refuses_older_writes,
            owner_fencing_until_the_lease_expires,
            a_withdrawal_fences_its_incarnation_in_storage,
            changed_since_returns_exactly_the_later_writes,
            lease_ends_are_exactly_the_stored_leases_in_the_window,
            a_tombstone_shows_the_withdrawn_lease_end_in_lease_ends,
            change_stamps_are_exactly_the_stored_writes_in_the_window,
            an_item_over_the_size_limit_is_refused_naming_its_field,
            an_export_larger_than_a_plain_item_is_stored_whole,
            a_renewal_in_place_keeps_changed_at_and_moves_the_lease,
            a_renewal_in_place_is_refused_unless_it_renews_the_stored_record,
            ttl_never_leaves_a_withdrawn_key_live,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let ::std::option::Option::Some(store) = $make else {
                    return;
                };
                $crate::testsuite::$case(std::sync::Arc::new(store)).await;
            }
        )*
    };
}

fn at(mut record: Record, changed_at_ms: u64) -> Record {
    record.changed_at_ms = changed_at_ms;
    record
}

/// A write is read back by `get`, `read_all` and `read_changed_since`.
pub async fn put_then_read_back(store: Arc<dyn Store>) {
    let record = at(mk_pool("a", 1, "w", Some("x"), Some(10_000)), 1_000);
    assert_eq!(store.put(&record, 1_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&record.key).await.unwrap(), Some(record.clone()));
    assert_eq!(store.read_all().await.unwrap(), vec![record.clone()]);
    assert_eq!(store.read_changed_since(0).await.unwrap(), vec![record.clone()]);
    let missing = mk_pool("nope", 1, "w", None, None);
    assert_eq!(store.get(&missing.key).await.unwrap(), None);
}

/// The same write twice is applied, and stored once.
pub async fn idempotent_retry_is_applied_once(store: Arc<dyn Store>) {
    let record = at(mk_pool("a", 7, "w", Some("x"), Some(10_000)), 1_000);
    assert_eq!(store.put(&record, 1_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.put(&record, 1_001).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.read_all().await.unwrap(), vec![record]);
}

/// 16 tasks race writes of one generation with different content: exactly
/// one is applied and the others learn the stored version.
pub async fn racing_writers_get_exactly_one_applied_per_generation(store: Arc<dyn Store>) {
    for generation in 1..=5u64 {
        let mut tasks = Vec::new();
        for i in 0..16 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut record =
                    at(mk_pool("race", generation, "w", None, Some(1 << 40)), generation);
                record.body = Body::Pool(pool("race", &format!("model-{i}")));
                (store.put(&record, 0).await.unwrap(), record)
            }));
        }
        let mut applied = Vec::new();
        for task in tasks {
            let (outcome, record) = task.await.unwrap();
            match outcome {
                PutOutcome::Applied => applied.push(record),
                PutOutcome::Stale { stored } => {
                    assert_eq!(stored, Version::new(generation, "w"), "generation {generation}")
                }
                other => panic!("generation {generation}: unexpected {other:?}"),
            }
        }
        assert_eq!(applied.len(), 1, "generation {generation}: exactly one winner");
        let stored = store.get(&applied[0].key).await.unwrap();
        assert_eq!(stored.as_ref(), Some(&applied[0]), "the winner is what is stored");
    }
}

/// An older or equal-but-different write is refused with the stored version.
pub async fn stale_writes_name_the_stored_version(store: Arc<dyn Store>) {
    let newer = at(mk_pool("a", 10, "w2", None, Some(10_000)), 1_000);
    store.put(&newer, 1_000).await.unwrap();
    for older in
        [mk_pool("a", 9, "w9", None, Some(20_000)), mk_pool("a", 10, "w1", None, Some(20_000))]
    {
        assert_eq!(
            store.put(&at(older, 2_000), 2_000).await.unwrap(),
            PutOutcome::Stale { stored: newer.version.clone() }
        );
    }
    assert_eq!(store.get(&newer.key).await.unwrap(), Some(newer));
}

/// A heartbeat (same version and content) extends the lease; a delayed
/// retry of an earlier heartbeat does not shorten it.
pub async fn renewal_extends_and_never_shortens_the_lease(store: Arc<dyn Store>) {
    let first = at(mk_pool("a", 3, "w", Some("x"), Some(10_000)), 1_000);
    store.put(&first, 1_000).await.unwrap();
    let beat = at(mk_pool("a", 3, "w", Some("x"), Some(20_000)), 11_000);
    assert_eq!(store.put(&beat, 9_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(beat.clone()));
    assert_eq!(
        store.read_changed_since(10_000).await.unwrap(),
        vec![beat.clone()],
        "a renewal is a change"
    );
    let late_retry = at(mk_pool("a", 3, "w", Some("x"), Some(15_000)), 12_000);
    assert_eq!(store.put(&late_retry, 9_500).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(beat), "lease not shortened");
}

/// After a withdrawal, an older write is refused and the record stays
/// withdrawn; a newer one may register again.
pub async fn a_tombstone_refuses_older_writes(store: Arc<dyn Store>) {
    let live = at(mk_pool("a", 5, "w", None, Some(10_000)), 1_000);
    store.put(&live, 1_000).await.unwrap();
    let tomb = at(mk_tombstone("a", 6, "w"), 2_000);
    assert_eq!(store.put(&tomb, 2_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(
        store.put(&at(mk_pool("a", 5, "z", None, Some(10_000)), 3_000), 3_000).await.unwrap(),
        PutOutcome::Stale { stored: tomb.version.clone() }
    );
    assert_eq!(store.get(&tomb.key).await.unwrap(), Some(tomb.clone()));
    let again = at(mk_pool("a", 7, "w", None, Some(10_000)), 4_000);
    assert_eq!(store.put(&again, 4_000).await.unwrap(), PutOutcome::Applied);
}

/// A record held by incarnation x refuses y (and anonymous writers) while
/// x's lease is live, and lets y take over once it has expired.
pub async fn owner_fencing_until_the_lease_expires(store: Arc<dyn Store>) {
    let held = at(mk_pool("a", 1, "w", Some("x"), Some(10_000)), 1_000);
    store.put(&held, 1_000).await.unwrap();
    let owned = PutOutcome::Owned { owner: "x".into(), until_ms: 10_000 };
    let by_y = at(mk_pool("a", 2, "w", Some("y"), Some(20_000)), 2_000);
    assert_eq!(store.put(&by_y, 9_999).await.unwrap(), owned);
    let anonymous = at(mk_pool("a", 2, "w", None, Some(20_000)), 2_000);
    assert_eq!(store.put(&anonymous, 9_999).await.unwrap(), owned);
    assert_eq!(store.get(&held.key).await.unwrap(), Some(held.clone()));
    let by_x = at(mk_pool("a", 2, "w", Some("x"), Some(20_000)), 2_000);
    assert_eq!(store.put(&by_x, 9_999).await.unwrap(), PutOutcome::Applied, "the owner may write");
    let takeover = at(mk_pool("a", 3, "w", Some("y"), Some(40_000)), 30_000);
    assert_eq!(store.put(&takeover, 20_000).await.unwrap(), PutOutcome::Applied, "after expiry");
    assert_eq!(store.get(&held.key).await.unwrap(), Some(takeover));
}

/// A tombstone written by incarnation x refuses x's later writes whose
/// generation the registrar chose (a heartbeat x sent before withdrawing,
/// arriving late through another registry process), however high that
/// generation; x's own generation, or another incarnation, may register it.
pub async fn a_withdrawal_fences_its_incarnation_in_storage(store: Arc<dyn Store>) {
    let live = at(mk_pool("a", 5, "reg-1", Some("x"), Some(10_000)), 1_000);
    store.put(&live, 1_000).await.unwrap();
    let mut tomb = at(mk_tombstone("a", 6, "reg-1"), 2_000);
    tomb.owner = Some("x".into());
    assert_eq!(store.put(&tomb, 2_000).await.unwrap(), PutOutcome::Applied);
    let late = at(mk_pool("a", 9, "reg-2", Some("x"), Some(20_000)), 3_000);
    assert_eq!(
        store.put(&late, 3_000).await.unwrap(),
        PutOutcome::Stale { stored: tomb.version.clone() },
        "a registrar-assigned generation of the incarnation that withdrew"
    );
    assert_eq!(store.get(&tomb.key).await.unwrap(), Some(tomb.clone()), "still withdrawn");
    let ordered = at(mk_pool("a", 10, "x", Some("x"), Some(20_000)), 4_000);
    assert_eq!(store.put(&ordered, 4_000).await.unwrap(), PutOutcome::Applied);
}

/// `read_changed_since(w)` returns exactly the records written after `w`.
pub async fn changed_since_returns_exactly_the_later_writes(store: Arc<dyn Store>) {
    let names = ["a", "b", "c", "d", "e", "f"];
    for (i, name) in names.iter().enumerate() {
        let t = 1_000 * (i as u64 + 1);
        store.put(&at(mk_pool(name, 1, "w", None, Some(1 << 40)), t), t).await.unwrap();
    }
    for watermark in [0, 999, 1_000, 3_500, 6_000] {
        let mut got: Vec<u64> = store
            .read_changed_since(watermark)
            .await
            .unwrap()
            .iter()
            .map(|r| r.changed_at_ms)
            .collect();
        got.sort_unstable();
        let want: Vec<u64> = (1..=6).map(|i| i * 1_000).filter(|t| *t > watermark).collect();
        assert_eq!(got, want, "watermark {watermark}");
    }
}

/// `read_lease_ends(from, to)` returns the stored lease ends in
/// `from..=to`, with their versions: a renewal moves a lease out of the
/// window it was in, and records without a lease (exports) never appear.
pub async fn lease_ends_are_exactly_the_stored_leases_in_the_window(store: Arc<dyn Store>) {
    let names = ["a", "b", "c", "d", "e", "f"];
    for (i, name) in names.iter().enumerate() {
        let until = 10_000 * (i as u64 + 1);
        store.put(&at(mk_pool(name, 7, "w", None, Some(until)), 1_000), 1_000).await.unwrap();
    }
    store.put(&export_with(mk_endpoints(1)), 1_000).await.unwrap();
    let window = async |from, to| {
        let mut got: Vec<LeaseEnd> = store.read_lease_ends(from, to).await.unwrap();
        got.sort_by_key(|e| e.lease_until_ms);
        got
    };
    let ends = |got: &[LeaseEnd]| got.iter().map(|e| e.lease_until_ms).collect::<Vec<_>>();
    assert_eq!(ends(&window(0, u64::MAX).await), (1..=6).map(|i| i * 10_000).collect::<Vec<_>>());
    assert_eq!(ends(&window(20_000, 40_000).await), vec![20_000, 30_000, 40_000], "inclusive");
    assert_eq!(ends(&window(41_000, 49_999).await), Vec::<u64>::new());
    let first = window(10_000, 10_000).await;
    assert_eq!(
        first,
        vec![LeaseEnd {
            key: Key::Pool { pool_id: pool_key("a").id() },
            version: Version::new(7, "w"),
            lease_until_ms: 10_000,
        }]
    );
    // A renewal (same version, later lease end) leaves the window.
    let renewed = at(mk_pool("a", 7, "w", None, Some(70_000)), 1_000);
    assert_eq!(store.put(&renewed, 2_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(ends(&window(0, 15_000).await), Vec::<u64>::new());
    assert_eq!(ends(&window(65_000, 75_000).await), vec![70_000]);
}

/// A tombstone that carries the lease end of the record it withdrew
/// (`mcs_core::rules::withdrawn_lease_end`) is in `read_lease_ends` at that
/// end, at the tombstone's version (docs/design.md §6: how a reader finds a
/// withdrawal that reached its replica later than the lookback); one
/// without a lease end is not.
pub async fn a_tombstone_shows_the_withdrawn_lease_end_in_lease_ends(store: Arc<dyn Store>) {
    let live = with_terms(at(mk_pool("a", 5, "w", Some("x"), Some(30_000)), 1_000), TERMS);
    store.put(&live, 1_000).await.unwrap();
    let mut tomb = at(mk_tombstone("a", 6, "w"), 2_000);
    tomb.owner = Some("x".into());
    tomb.lease_until_ms = Some(30_000);
    assert_eq!(store.put(&tomb, 2_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&tomb.key).await.unwrap(), Some(tomb.clone()));
    assert_eq!(
        store.read_lease_ends(20_000, 40_000).await.unwrap(),
        vec![LeaseEnd {
            key: tomb.key.clone(),
            version: tomb.version.clone(),
            lease_until_ms: 30_000
        }]
    );
    let bare = at(mk_tombstone("b", 6, "w"), 2_000);
    store.put(&bare, 2_000).await.unwrap();
    assert_eq!(store.read_lease_ends(0, u64::MAX).await.unwrap().len(), 1, "no end, no entry");
    // It owns nothing: another incarnation registers over it at once.
    let by_y = with_terms(at(mk_pool("a", 7, "w", Some("y"), Some(40_000)), 3_000), TERMS);
    assert_eq!(store.put(&by_y, 3_000).await.unwrap(), PutOutcome::Applied);
}

/// `read_change_stamps(from, to)` returns a stamp (key, generation,
/// `changed_at_ms`) of every stored item written in `from..=to`, exports
/// and withdrawals included; a renewal in place leaves its stamp where it
/// was, a new version moves it.
pub async fn change_stamps_are_exactly_the_stored_writes_in_the_window(store: Arc<dyn Store>) {
    assert!(store.reads_change_stamps(), "the suite's stores are at the current schema");
    let mut written = Vec::new();
    for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
        let record = with_terms(
            at(mk_pool(name, i as u64 + 2, "w", Some("x"), Some(100_000)), 1_000 * (i as u64 + 1)),
            TERMS,
        );
        store.put(&record, 1_000).await.unwrap();
        written.push(record);
    }
    let export = at(export_with(mk_endpoints(1)), 5_000);
    store.put(&export, 1_000).await.unwrap();
    let withdrawn = at(mk_tombstone("w", 9, "w"), 6_000);
    store.put(&withdrawn, 1_000).await.unwrap();
    let window = async |from, to| {
        let mut got: Vec<ChangeStamp> = store.read_change_stamps(from, to).await.unwrap();
        got.sort_by_key(|s| s.changed_at_ms);
        got
    };
    let all: Vec<ChangeStamp> =
        written.iter().chain([&export, &withdrawn]).map(ChangeStamp::of).collect();
    assert_eq!(window(0, u64::MAX).await, all);
    assert_eq!(window(2_000, 4_000).await, all[1..4], "inclusive");
    assert_eq!(window(4_001, 4_999).await, Vec::<ChangeStamp>::new());
    // A renewal in place keeps the stamp; a new version moves it.
    let mut beat = written[0].clone();
    beat.lease_until_ms = Some(120_000);
    assert_eq!(store.renew(&beat, 2_000).await.unwrap(), Some(1_000));
    assert_eq!(window(1_000, 1_000).await, all[..1]);
    let mut next = at(written[0].clone(), 7_000);
    next.version = Version::new(3, "w");
    assert_eq!(store.put(&next, 7_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(window(1_000, 1_000).await, Vec::<ChangeStamp>::new());
    assert_eq!(window(7_000, 7_000).await, vec![ChangeStamp::of(&next)]);
}

/// `record` with lease terms `(duration_ms, heartbeat_ms)`.
fn with_terms(mut record: Record, terms: Option<(u64, u64)>) -> Record {
    record.terms =
        terms.map(|(duration_ms, heartbeat_ms)| LeaseTerms { duration_ms, heartbeat_ms });
    record
}

/// The default lease's terms, as the registrar records them.
const TERMS: Option<(u64, u64)> = Some((30_000, 10_000));

/// `Store::renew` of the stored version, content and lease terms with a
/// later lease (a heartbeat) moves the lease end and keeps `changed_at_ms`
/// (returned): the renewal is in every read but the change feed
/// (docs/design.md §6).
pub async fn a_renewal_in_place_keeps_changed_at_and_moves_the_lease(store: Arc<dyn Store>) {
    assert!(store.renewals_keep_changed_at(), "the suite's stores are at the current schema");
    let first = with_terms(at(mk_pool("a", 3, "w", Some("x"), Some(10_000)), 1_000), TERMS);
    assert_eq!(store.put(&first, 1_000).await.unwrap(), PutOutcome::Applied);
    let beat = with_terms(at(mk_pool("a", 3, "w", Some("x"), Some(20_000)), 11_000), TERMS);
    assert_eq!(store.renew(&beat, 9_000).await.unwrap(), Some(1_000));
    let renewed = at(beat.clone(), 1_000);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(renewed.clone()));
    assert_eq!(store.read_all().await.unwrap(), vec![renewed.clone()]);
    assert_eq!(
        store.read_lease_ends(15_000, 25_000).await.unwrap(),
        vec![LeaseEnd {
            key: first.key.clone(),
            version: first.version.clone(),
            lease_until_ms: 20_000
        }]
    );
    assert!(store.read_lease_ends(0, 15_000).await.unwrap().is_empty(), "the old end is gone");
    assert!(
        store.read_changed_since(1_000).await.unwrap().is_empty(),
        "a renewal in place is not a change"
    );
    assert_eq!(store.read_changed_since(999).await.unwrap(), vec![renewed]);
}

/// `Store::renew` writes nothing and answers `None` unless the stored
/// record is the renewal's version, content and lease terms with an
/// earlier lease: other content, another owner, another version, a lease
/// not later, other terms or none (a reader bounds a renewal it has not
/// read by the terms it holds), a tombstone (stored or renewed) and a
/// missing item are refused.
pub async fn a_renewal_in_place_is_refused_unless_it_renews_the_stored_record(
    store: Arc<dyn Store>,
) {
    let stored = with_terms(at(mk_pool("a", 3, "w", Some("x"), Some(20_000)), 1_000), TERMS);
    store.put(&stored, 1_000).await.unwrap();
    let termless = at(mk_pool("b", 3, "w", Some("x"), Some(20_000)), 1_000);
    store.put(&termless, 1_000).await.unwrap();
    let mut tomb = at(mk_tombstone("t", 3, "w"), 1_000);
    tomb.owner = Some("x".into());
    store.put(&tomb, 1_000).await.unwrap();
    let later = |mut r: Record| {
        r.lease_until_ms = Some(30_000);
        with_terms(at(r, 2_000), TERMS)
    };
    let mut other_content = later(stored.clone());
    other_content.body = Body::Pool(pool("a", "another-model"));
    let mut other_owner = later(stored.clone());
    other_owner.owner = Some("y".into());
    let mut over_tomb = later(mk_pool("t", 3, "w", Some("x"), None));
    over_tomb.owner = Some("x".into());
    let cases = [
        ("other content", other_content),
        ("another owner", other_owner),
        ("a newer generation", later(mk_pool("a", 4, "w", Some("x"), None))),
        ("an older generation", later(mk_pool("a", 2, "w", Some("x"), None))),
        ("another writer", later(mk_pool("a", 3, "v", Some("x"), None))),
        ("the same lease end", at(stored.clone(), 2_000)),
        (
            "an earlier lease end",
            with_terms(at(mk_pool("a", 3, "w", Some("x"), Some(15_000)), 2_000), TERMS),
        ),
        ("no lease", with_terms(at(mk_pool("a", 3, "w", Some("x"), None), 2_000), TERMS)),
        ("other terms", with_terms(later(stored.clone()), Some((20_000, 5_000)))),
        ("no terms", with_terms(later(stored.clone()), None)),
        ("over an item without terms", later(termless.clone())),
        ("a tombstone", at(tomb.clone(), 2_000)),
        ("over a stored tombstone", over_tomb),
        ("a missing item", later(mk_pool("missing", 3, "w", Some("x"), None))),
    ];
    for (case, renewal) in cases {
        assert_eq!(store.renew(&renewal, 1_500).await.unwrap(), None, "{case}");
    }
    let mut all = store.read_all().await.unwrap();
    all.sort_by_key(|r| r.key.clone());
    let mut want = vec![stored.clone(), termless, tomb];
    want.sort_by_key(|r| r.key.clone());
    assert_eq!(all, want, "nothing written");
}

/// A day, in ms: the longest lease, and the retention of the suite's
/// stores (the DynamoDB store's default).
const DAY_MS: u64 = 86_400_000;

/// Ten days, in ms: past every retention (a day to a few) after every
/// lease (a day at most).
const TEN_DAYS_MS: u64 = 10 * DAY_MS;

/// Issue 22, item 1: a live item is never left behind by a tombstone that
/// supersedes it, whatever TTL does (docs/design.md §3). An export's
/// withdrawal is still read ten days on, TTL emulated (its tombstone has no
/// `ttl`: only gc deletes it); a pool's withdrawal is kept a retention past
/// the lease it withdrew, and after TTL has deleted it nothing live of the
/// key remains.
pub async fn ttl_never_leaves_a_withdrawn_key_live<S: EmulatesTtl>(store: Arc<S>) {
    let export = at(mk_export("c1", "svc", 5, mk_export_spec(1_700_000_000, vec![])), 1_000);
    // The longest lease, withdrawn at once.
    let lease_end = 1_000 + DAY_MS;
    let pool = with_terms(at(mk_pool("p", 5, "w", Some("x"), Some(lease_end)), 1_000), TERMS);
    let mut withdrawals = Vec::new();
    for live in [&export, &pool] {
        assert_eq!(store.put(live, 1_000).await.unwrap(), PutOutcome::Applied);
        let mut tomb = at(mk_tombstone("p", 6, "w"), 2_000);
        tomb.key = live.key.clone();
        tomb.owner = live.owner.clone();
        tomb.lease_until_ms = mcs_core::rules::withdrawn_lease_end(Some(live));
        assert_eq!(store.put(&tomb, 2_000).await.unwrap(), PutOutcome::Applied);
        withdrawals.push(tomb);
    }
    let [export_tomb, pool_tomb] = &withdrawals[..] else { unreachable!() };
    // Within a day of the withdrawn lease's end (the suite's stores keep a
    // day), nothing goes: a tombstone outlives the lease it withdrew.
    let within = store.emulate_ttl(lease_end + DAY_MS - 1_000).await.unwrap();
    for tomb in [export_tomb, pool_tomb] {
        assert_eq!(store.get(&tomb.key).await.unwrap().as_ref(), Some(tomb), "within a day");
    }
    assert_eq!(within, 0, "nothing deleted within a day");

    let deleted = store.emulate_ttl(1_000 + TEN_DAYS_MS).await.unwrap();
    assert_eq!(
        store.get(&export.key).await.unwrap().as_ref(),
        Some(export_tomb),
        "the export is still withdrawn"
    );
    assert_eq!(store.get(&pool.key).await.unwrap(), None, "nothing of the pool is left");
    let all = store.read_all().await.unwrap();
    assert_eq!(all, vec![export_tomb.clone()], "a full read: the export's withdrawal only");
    assert_eq!(deleted, 1, "the pool's tombstone, not the export's");
}

/// An export of `endpoints`.
fn export_with(endpoints: Vec<mcs_api::Endpoint>) -> Record {
    let mut spec = mk_export_spec(1_700_000_000, vec![]);
    spec.endpoints = endpoints;
    at(mk_export("c1", "big", 1, spec), 1_000)
}

/// Issue 29, item 4: an export of 20,000 endpoints, about three times what
/// one item holds in the plain encoding (refused before as over the
/// limit), is stored packed and read back whole by `get`, `read_all` and
/// `read_changed_since`.
pub async fn an_export_larger_than_a_plain_item_is_stored_whole(store: Arc<dyn Store>) {
    let big = export_with(mk_endpoints(20_000));
    assert_eq!(store.put(&big, 1_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&big.key).await.unwrap().as_ref(), Some(&big));
    assert_eq!(store.read_all().await.unwrap(), vec![big.clone()]);
    assert_eq!(store.read_changed_since(0).await.unwrap(), vec![big]);
}

/// An export too large for an item even packed is refused with
/// `TooLarge` naming `endpoints` and its packed size, and nothing is
/// written.
pub async fn an_item_over_the_size_limit_is_refused_naming_its_field(store: Arc<dyn Store>) {
    let over = export_with(mk_incompressible_endpoints(12_000));
    let size = record_item_size(&over).unwrap();
    assert!(size > MAX_ITEM_BYTES);
    match store.put(&over, 1_000).await {
        Err(StoreError::TooLarge { size: refused, limit, field }) => {
            assert_eq!((limit, field.as_deref()), (MAX_ITEM_BYTES, Some("endpoints")));
            assert_eq!(refused, size);
        }
        other => panic!("an oversized item: {other:?}"),
    }
    assert_eq!(store.get(&over.key).await.unwrap(), None, "nothing written");
    let under = export_with(mk_incompressible_endpoints(4_000));
    assert_eq!(store.put(&under, 1_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&under.key).await.unwrap(), Some(under));
}

/// The variable that names the DynamoDB API of the tests.
pub const ENDPOINT_ENV: &str = "MCS_TEST_DYNAMODB_ENDPOINT";

/// The variable that makes a missing endpoint fail the DynamoDB tests
/// instead of skipping them: `scripts/test` (and so CI) sets it to `true`;
/// `CI=true` has the same effect.
pub const REQUIRE_ENV: &str = "MCS_TEST_REQUIRE_DYNAMODB";

/// The DynamoDB endpoint of the tests (`scripts/with-moto.sh` sets it), or
/// `None` when a test should skip. Every test tree that needs DynamoDB
/// uses this one rule:
///
/// - set: the test runs against it;
/// - unset under `scripts/test` or CI (`MCS_TEST_REQUIRE_DYNAMODB=true` or
///   `CI=true`): the test fails;
/// - unset otherwise (a plain `cargo test`): the test skips, after a notice
///   written to the terminal even when the harness captures test output
///   (once per test binary).
pub fn dynamodb_endpoint() -> Option<String> {
    match std::env::var(ENDPOINT_ENV) {
        Ok(e) if !e.trim().is_empty() => Some(e),
        _ if is_true(REQUIRE_ENV) || is_true("CI") => panic!(
            "{ENDPOINT_ENV} is not set but the DynamoDB tests are required \
             ({REQUIRE_ENV}=true or CI=true): run them through scripts/with-moto.sh"
        ),
        _ => {
            static NOTICE: std::sync::Once = std::sync::Once::new();
            NOTICE.call_once(|| {
                // Straight to stderr: the test harness captures `eprintln!`.
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "notice: {ENDPOINT_ENV} is not set: the DynamoDB tests of this binary SKIP \
                     (run them with scripts/with-moto.sh, or scripts/test)"
                );
            });
            None
        }
    }
}

fn is_true(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "true")
}
