//! List-and-watch against the fake registry: the first complete list, each
//! change once across cut connections, `complete` flips, cancellation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

mod common;

use common::{client, pool};
use mcs_api::PoolList;
use mcs_client::CancellationToken;
use mcs_testkit::eventually;
use mcs_testkit::fake::FakeRegistry;
use serde_json::json;
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(10);

async fn next(watch: &mut mcs_client::Watch<PoolList>) -> PoolList {
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
