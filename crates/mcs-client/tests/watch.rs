//! List-and-watch against the fake registry: the first complete list, each
//! change once across cut connections, `complete` flips, cancellation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

mod common;

use common::{client, pool};
use mcs_api::PoolList;
use mcs_client::{CancellationToken, Update};
use mcs_testkit::eventually;
use mcs_testkit::fake::FakeRegistry;
use serde_json::json;
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(10);

async fn next<T>(watch: &mut mcs_client::Watch<T>) -> T {
    tokio::time::timeout(WITHIN, watch.next())
        .await
        .expect("a list within the bound")
        .expect("watch still open")
        .expect("no error")
}

fn names(list: &PoolList) -> Vec<String> {
    list.pools.iter().map(|p| p.pool_key.dgd_name.to_string()).collect()
}

#[tokio::test]
async fn survives_cut_connections_and_yields_each_change_once() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let stop = CancellationToken::new();
    let mut watch = c.watch::<PoolList>(stop.clone());
    let first = next(&mut watch).await;
    assert!(first.complete);
    assert!(first.pools.is_empty());

    // Three watches are cut mid-poll; the watch reconnects each time.
    let before = fake.watches_seen();
    fake.cut_next_watches(3);
    eventually(WITHIN, "the cuts happened", async || fake.watches_left_to_cut() == 0).await;
    assert!(fake.watches_seen() >= before + 3);

    c.register_pool(&pool("a", json!({}))).await.unwrap();
    assert_eq!(names(&next(&mut watch).await), ["a"]);
    fake.cut_next_watches(2);
    c.register_pool(&pool("b", json!({}))).await.unwrap();
    assert_eq!(names(&next(&mut watch).await), ["a", "b"]);
    // A heartbeat changes nothing; a reconnect with the last ETag yields
    // nothing; so the next list yielded is the next change, not a repeat.
    fake.cut_next_watches(2);
    c.register_pool(&pool("a", json!({}))).await.unwrap();
    eventually(WITHIN, "the cuts happened", async || fake.watches_left_to_cut() == 0).await;
    c.register_pool(&pool("c", json!({}))).await.unwrap();
    assert_eq!(names(&next(&mut watch).await), ["a", "b", "c"]);

    stop.cancel();
    let end = tokio::time::timeout(WITHIN, watch.next()).await.expect("ends on cancel");
    assert!(end.is_none(), "nothing after cancellation");
}

#[tokio::test]
async fn waits_for_a_complete_list_and_reports_complete_flips() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    c.register_pool(&pool("a", json!({}))).await.unwrap();
    fake.set_storage_unavailable(true);
    eventually(WITHIN, "lists turn incomplete", async || {
        c.pools().await.is_ok_and(|list| !list.complete)
    })
    .await;

    let stop = CancellationToken::new();
    let mut watch = c.watch::<PoolList>(stop.clone());
    // Nothing while the list is incomplete.
    assert!(
        tokio::time::timeout(Duration::from_millis(1_500), watch.next()).await.is_err(),
        "an incomplete list was yielded"
    );
    fake.set_storage_unavailable(false);
    let first = next(&mut watch).await;
    assert!(first.complete);
    assert_eq!(names(&first), ["a"]);

    fake.set_storage_unavailable(true);
    let flipped = next(&mut watch).await;
    assert!(!flipped.complete, "the flip to incomplete is reported");
    assert_eq!(names(&flipped), ["a"], "the last view is kept");
    fake.set_storage_unavailable(false);
    assert!(next(&mut watch).await.complete);
    stop.cancel();
}

#[tokio::test]
async fn a_stream_of_changes_comes_as_one_list_per_min_interval_and_a_lone_change_at_once() {
    let fake = FakeRegistry::start().await;
    let mut config = common::config(&fake);
    config.watch_min_interval = Duration::from_millis(1_500);
    let c = mcs_client::Client::new(config).unwrap();
    let stop = CancellationToken::new();
    let mut watch = c.watch::<PoolList>(stop.clone());
    assert!(next(&mut watch).await.pools.is_empty());
    let yielded = std::time::Instant::now();
    for name in ["a", "b", "c"] {
        c.register_pool(&pool(name, json!({}))).await.unwrap();
    }
    let list = next(&mut watch).await;
    assert!(yielded.elapsed() >= Duration::from_millis(1_400), "{:?}", yielded.elapsed());
    let mut coalesced = names(&list);
    coalesced.sort();
    assert_eq!(coalesced, ["a", "b", "c"], "three changes, one list");
    // After a quiet spell longer than the interval, a change comes at once.
    tokio::time::sleep(Duration::from_millis(1_700)).await;
    let changed = std::time::Instant::now();
    c.register_pool(&pool("d", json!({}))).await.unwrap();
    let mut after = names(&next(&mut watch).await);
    after.sort();
    assert_eq!(after, ["a", "b", "c", "d"]);
    assert!(changed.elapsed() < Duration::from_millis(1_000), "{:?}", changed.elapsed());
    stop.cancel();
}

/// The watch follows the event stream (one request lists and watches);
/// against a registry released before event watches (which refuses
/// `watch=events` with `422` naming `watch`) it long-polls instead, with
/// the same lists.
#[tokio::test]
async fn streams_events_and_long_polls_a_registry_without_them() {
    for before_events in [false, true] {
        let fake = FakeRegistry::start().await;
        fake.set_before_event_watches(before_events);
        let c = client(&fake);
        c.register_pool(&pool("a", json!({}))).await.unwrap();
        let stop = CancellationToken::new();
        let mut watch = c.watch::<PoolList>(stop.clone());
        let first = next(&mut watch).await;
        assert_eq!(names(&first), ["a"], "before_events={before_events}");
        assert_eq!(first, c.pools().await.unwrap(), "the list as GET serves it");
        let polls = fake.watches_seen();
        c.register_pool(&pool("b", json!({}))).await.unwrap();
        let second = next(&mut watch).await;
        assert_eq!(second, c.pools().await.unwrap());
        c.register_pool(&pool("b", json!({"capacity": {"workers": 9}}))).await.unwrap();
        let third = next(&mut watch).await;
        assert_eq!(third, c.pools().await.unwrap());
        let named =
            |n: &str| third.pools.iter().find(|p| p.pool_key.dgd_name.as_str() == n).unwrap();
        assert_eq!(named("b").capacity.workers, 9);
        c.withdraw_pool(&named("a").pool_id, &Default::default()).await.unwrap();
        let fourth = next(&mut watch).await;
        assert_eq!(names(&fourth), ["b"]);
        assert_eq!(fourth, c.pools().await.unwrap());
        if before_events {
            assert!(fake.watches_seen() > polls, "long-polls after the refusal");
            assert_eq!(fake.event_watches_seen(), 1, "asked once, then long-polled");
        } else {
            assert!(fake.event_watches_seen() >= 1);
            // A stream lists and watches: no long-poll was made.
            assert_eq!(fake.watches_seen(), fake.event_watches_seen());
        }
        stop.cancel();
    }
}

/// A stream the registry ends (its timeout, here 1 s) or that is cut is
/// resumed from the last bookmark: the changes meanwhile come once, and
/// nothing already yielded comes again.
#[tokio::test]
async fn a_resumed_stream_yields_only_what_changed() {
    let fake = FakeRegistry::start().await;
    let c = client(&fake);
    let stop = CancellationToken::new();
    let mut watch = c.watch::<PoolList>(stop.clone());
    assert!(next(&mut watch).await.pools.is_empty());
    // Streams of 1 s: several reconnections, nothing yielded.
    let seen = fake.event_watches_seen();
    eventually(WITHIN, "two reconnections", async || fake.event_watches_seen() >= seen + 2).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), watch.next()).await.is_err(),
        "a resumption yielded a repeat"
    );
    fake.cut_next_watches(2);
    c.register_pool(&pool("a", json!({}))).await.unwrap();
    assert_eq!(names(&next(&mut watch).await), ["a"]);
    stop.cancel();
}

fn pool_names(pools: &[mcs_api::Pool]) -> Vec<String> {
    pools.iter().map(|p| p.pool_key.dgd_name.to_string()).collect()
}

/// `watch_changes` yields the first list whole, then only what changed
/// (added, modified, deleted), the flip to incomplete as changes and the
/// first complete list after it whole; against a registry without event
/// streams, every list whole.
#[tokio::test]
async fn watch_changes_yields_what_changed_after_a_whole_list() {
    for before_events in [false, true] {
        let fake = FakeRegistry::start().await;
        fake.set_before_event_watches(before_events);
        let c = client(&fake);
        c.register_pool(&pool("a", json!({}))).await.unwrap();
        c.register_pool(&pool("c", json!({}))).await.unwrap();
        let stop = CancellationToken::new();
        let mut watch = c.watch_changes::<PoolList>(stop.clone());
        let first = next(&mut watch).await;
        assert_eq!(first, Update::List(c.pools().await.unwrap()), "before_events={before_events}");

        c.register_pool(&pool("b", json!({}))).await.unwrap();
        let added = next(&mut watch).await;
        c.register_pool(&pool("b", json!({"capacity": {"workers": 9}}))).await.unwrap();
        let modified = next(&mut watch).await;
        let a = c
            .pools()
            .await
            .unwrap()
            .pools
            .into_iter()
            .find(|p| p.pool_key.dgd_name.as_str() == "a");
        c.withdraw_pool(&a.unwrap().pool_id, &Default::default()).await.unwrap();
        let deleted = next(&mut watch).await;
        let now = c.pools().await.unwrap();
        if before_events {
            for update in [&added, &modified, &deleted] {
                assert!(matches!(update, Update::List(_)), "a registry without events: lists");
            }
            assert_eq!(deleted, Update::List(now));
            stop.cancel();
            continue;
        }
        let changes = |update: Update<PoolList>| match update {
            Update::Changed(changes) => changes,
            Update::List(list) => panic!("a whole list where changes were due: {list:?}"),
        };
        let (added, modified, deleted) = (changes(added), changes(modified), changes(deleted));
        assert_eq!(pool_names(&added.upserted), ["b"]);
        assert!(added.deleted.is_empty() && added.complete);
        assert_eq!(pool_names(&modified.upserted), ["b"]);
        assert_eq!(modified.upserted[0].capacity.workers, 9);
        assert!(modified.deleted.is_empty());
        assert!(deleted.upserted.is_empty());
        assert_eq!(pool_names(&deleted.deleted), ["a"], "deleted as it was last");
        assert_eq!(deleted.fingerprint, now.fingerprint, "the changes bring it to the list");

        // The flip to incomplete comes as changes; the complete list after
        // it whole.
        fake.set_storage_unavailable(true);
        let flipped = changes(next(&mut watch).await);
        assert!(!flipped.complete);
        fake.set_storage_unavailable(false);
        let back = next(&mut watch).await;
        let Update::List(back) = back else { panic!("changes after an incomplete list: {back:?}") };
        assert!(back.complete);
        assert_eq!(pool_names(&back.pools), ["b", "c"]);
        stop.cancel();
    }
}
