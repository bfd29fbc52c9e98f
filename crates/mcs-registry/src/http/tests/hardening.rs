//! Regression tests of the defects of the hardening review (issue 7):
//! each failed before its fix.

use super::faulty::registry_on_faulty;
use super::*;
use crate::clock::Clock;
use mcs_core::Record;
use std::sync::atomic::Ordering;

fn pool_id_of(reply: &Reply) -> String {
    reply.body["pool_id"].as_str().unwrap().to_owned()
}

/// Defect 1: `"generation": u64::MAX` was accepted; every reader folded it
/// into the process-wide HLC, which saturated, and from then on every
/// registry-assigned write of every key tied and was refused as stale.
#[tokio::test]
async fn a_generation_far_ahead_is_refused_and_wedges_no_other_key() {
    let mut h = harness().await;
    assert_eq!(h.send(Method::POST, "/v1/pools", pool("a")).await.status, StatusCode::OK);
    let far = with(with(pool("b"), "incarnation", json!("x")), "generation", json!(u64::MAX));
    let refused = h.send(Method::POST, "/v1/pools", far).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert_eq!(refused.body["field"], json!("generation"));
    let just_over = (T0 + 300_001) << 16;
    let over = with(with(pool("b"), "incarnation", json!("x")), "generation", json!(just_over));
    assert_eq!(
        h.send(Method::POST, "/v1/pools", over).await.status,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let within = with(with(pool("b"), "incarnation", json!("x")), "generation", json!(T0 << 16));
    assert_eq!(h.send(Method::POST, "/v1/pools", within).await.status, StatusCode::OK);

    // Such an item may still reach storage (an older binary, a bug in
    // another region): readers must not be dragged by it.
    let mut poison =
        mcs_core::fixtures::mk_pool("poison", u64::MAX, "x", Some("x"), Some(T0 + 60_000));
    poison.changed_at_ms = T0;
    h.store.put(&poison, T0).await.unwrap();
    h.registry.reader.poll_once().await;
    for model in ["m1", "m2", "m3"] {
        let update = with(pool("a"), "model", json!(model));
        let reply = h.send(Method::POST, "/v1/pools", update).await;
        assert_eq!(reply.status, StatusCode::OK, "update to {model}: {}", reply.body);
    }
    let a = h.get("/v1/pools").await.body["pools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["model"] == json!("m3"));
    assert!(a, "the last update is served");
}

/// Defect 3: writes were accepted before the first full read, with a
/// view blind to ownership, withdrawals and generations.
#[tokio::test]
async fn writes_before_the_first_full_read_answer_503_and_store_nothing() {
    let mut h = unready_harness();
    let refused = h.send(Method::POST, "/v1/pools", pool("a")).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.body);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.body["error"], json!("unavailable"));
    let cluster = h.send(Method::PUT, "/v1/clusters/east", json!({"incarnation": "c1"})).await;
    assert_eq!(cluster.status, StatusCode::SERVICE_UNAVAILABLE);
    let id = "0123456789abcdef0123456789abcdef";
    let gone = h.call(Method::DELETE, &format!("/v1/pools/{id}"), None, &[]).await;
    assert_eq!(gone.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(h.stored().await, 0);
    h.registry.reader.poll_once().await;
    assert_eq!(h.send(Method::POST, "/v1/pools", pool("a")).await.status, StatusCode::OK);
}

/// Defect 2: with two registry processes on one region's table, relay x
/// withdrew through P1; its heartbeat reached P2, whose view still held the
/// live record; storage refused it as stale, and P2's retry with a fresh
/// generation wrote a live record over the tombstone: the pool was back
/// for a full lease.
#[tokio::test]
async fn a_withdrawal_holds_against_a_late_heartbeat_through_another_process() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(T0));
    let mut p1 = harness_on(store.clone(), clock.clone(), "reg-1", &[]);
    let mut p2 = harness_on(store.clone(), clock.clone(), "reg-2", &[]);
    p1.registry.reader.poll_once().await;
    p2.registry.reader.poll_once().await;
    let by_x = with(pool("a"), "incarnation", json!("x"));
    let registered = p1.send(Method::POST, "/v1/pools", by_x.clone()).await;
    let pool_id = pool_id_of(&registered);
    clock.advance(100);
    p2.registry.reader.poll_once().await;
    assert_eq!(p2.get("/v1/pools").await.body["pools"].as_array().unwrap().len(), 1);

    let gone =
        p1.call(Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=x"), None, &[]).await;
    assert_eq!(gone.status, StatusCode::OK);
    clock.advance(100);
    // P2 has not polled since: its view holds the live record.
    let late = p2.send(Method::POST, "/v1/pools", by_x.clone()).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.body);
    assert_eq!(late.body["stored_generation"], gone.body["generation"]);
    let stored = store.read_all().await.unwrap();
    assert!(stored.iter().all(Record::is_tombstone), "storage still holds the tombstone");
    p2.registry.reader.poll_once().await;
    assert_eq!(p2.get("/v1/pools").await.body["pools"], json!([]));

    // A process that never saw the record at all is fenced by storage too.
    let mut p3 = harness_on(store.clone(), clock.clone(), "reg-3", &[]);
    // Its first full read comes before the registration and withdrawal
    // below, so its view knows nothing of either.
    p3.registry.reader.poll_once().await;
    let by_z = with(pool("b"), "incarnation", json!("z"));
    let b = p1.send(Method::POST, "/v1/pools", by_z.clone()).await;
    let b_id = pool_id_of(&b);
    clock.advance(100);
    assert_eq!(
        p1.call(Method::DELETE, &format!("/v1/pools/{b_id}?incarnation=z"), None, &[]).await.status,
        StatusCode::OK
    );
    clock.advance(100);
    let blind = p3.send(Method::POST, "/v1/pools", by_z).await;
    assert_eq!(blind.status, StatusCode::CONFLICT, "{}", blind.body);
}

/// Defect 9: after a failed periodic full read every poll became a full
/// read, so a throttled scan froze the view although delta queries worked.
#[tokio::test]
async fn a_failed_full_read_backs_off_while_delta_polls_go_on() {
    let (mut registry, clock, store) =
        registry_on_faulty(&["--refresh-interval-ms", "100", "--full-resync-interval-secs", "1"]);
    registry.reader.poll_once().await;
    assert!(registry.state.view.is_ready());
    store.scans_fail.store(true, Ordering::SeqCst);
    // The periodic full read is due (by either clock), and refused.
    clock.advance(1_000);
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    registry.reader.poll_once().await;
    // Another process writes a pool; the next poll must be a delta.
    let mut other = mcs_core::fixtures::mk_pool("late", 1 << 50, "reg-b", None, Some(T0 + 60_000));
    clock.advance(100);
    other.changed_at_ms = clock.now_ms();
    store.put(&other, clock.now_ms()).await.unwrap();
    registry.reader.poll_once().await;
    assert_eq!(registry.state.view.read().pools().len(), 1, "the delta poll saw the new pool");
    assert!(registry.state.view.is_complete(), "polls succeed: the view stays complete");
}
