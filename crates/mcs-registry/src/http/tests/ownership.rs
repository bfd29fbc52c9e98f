//! Who may write a record: incarnations and their leases, generations,
//! fencing after a withdrawal, and versions later than what they follow.

use super::*;

#[tokio::test]
async fn ownership_blocks_other_incarnations_until_the_lease_expires() {
    let h = harness().await;
    let by_x = with(pool("a"), "incarnation", json!("x"));
    assert_eq!(h.send(Method::POST, "/v1/pools", by_x).await.status, StatusCode::OK);
    let by_y = with(with(pool("a"), "incarnation", json!("y")), "model", json!("other"));
    let refused = h.send(Method::POST, "/v1/pools", by_y.clone()).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.body["error"], json!("owned"));
    assert_eq!(refused.body["owner"], json!("x"));
    assert_eq!(refused.body["lease_until_ms"], json!(T0 + 30_000));
    assert_eq!(
        h.get("/v1/pools").await.body["pools"][0]["model"],
        json!("meta-llama/Llama-3.1-8B")
    );

    h.clock.advance(30_000);
    let taken = h.send(Method::POST, "/v1/pools", by_y).await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.body);
    assert_eq!(h.get("/v1/pools").await.body["pools"][0]["model"], json!("other"));
}

#[tokio::test]
async fn heartbeats_and_repeats_keep_the_fingerprint() {
    let h = harness().await;
    let first = h.send(Method::POST, "/v1/pools", pool("a")).await;
    let fp = fingerprint(&h.get("/v1/pools").await);
    h.clock.advance(10_000);
    let beat = h.send(Method::POST, "/v1/pools", pool("a")).await;
    assert_eq!(
        beat.body["generation"], first.body["generation"],
        "a heartbeat keeps the generation"
    );
    assert_eq!(fingerprint(&h.get("/v1/pools").await), fp);
    // The heartbeat moved the lease: still served past the first lease's end.
    h.clock.advance(25_000);
    assert_eq!(h.get("/v1/pools").await.body["pools"].as_array().unwrap().len(), 1);
    h.clock.advance(5_000 + SKEW);
    let expired = h.get("/v1/pools").await;
    assert_eq!(expired.body["pools"], json!([]), "expired after lease plus skew");
    assert_ne!(fingerprint(&expired), fp);

    // The same content in a fresh registry gives the same fingerprint.
    let other = harness().await;
    other.send(Method::POST, "/v1/pools", pool("a")).await;
    assert_eq!(fingerprint(&other.get("/v1/pools").await), fp);
}

#[tokio::test]
async fn after_a_withdrawal_an_older_generation_is_refused() {
    let h = harness().await;
    let reg = with(with(pool("a"), "incarnation", json!("x")), "generation", json!(5));
    assert_eq!(h.send(Method::POST, "/v1/pools", reg).await.status, StatusCode::OK);
    let pool_id = h.get("/v1/pools").await.body["pools"][0]["pool_id"].as_str().unwrap().to_owned();
    let gone = h
        .call(Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=x&generation=6"), None, &[])
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    assert_eq!(gone.body["generation"], json!(6));
    let late = with(with(pool("a"), "incarnation", json!("x")), "generation", json!(5));
    let refused = h.send(Method::POST, "/v1/pools", late).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.body["error"], json!("stale_generation"));
    assert_eq!(refused.body["stored_generation"], json!(6));
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]), "stays withdrawn");
}

#[tokio::test]
async fn writes_are_later_than_what_they_follow_even_against_a_fast_clock() {
    let h = harness().await;
    // A record written by a registrar whose clock runs 5 s ahead.
    let mut ahead = mcs_core::fixtures::mk_pool("a", 1, "reg-fast", None, Some(T0 + 60_000));
    ahead.body = mcs_core::Body::Pool(
        serde_json::from_value(with(pool("a"), "pool_id", json!(ahead_id()))).unwrap(),
    );
    ahead.changed_at_ms = T0 + 5_000;
    ahead.key = mcs_core::Key::Pool { pool_id: mcs_api::PoolId::parse(&ahead_id()).unwrap() };
    h.store.put(&ahead, T0).await.unwrap();
    h.registry.state.view.apply(ahead.clone());
    let reply = h.send(Method::POST, "/v1/pools", with(pool("a"), "model", json!("changed"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let stored = h.store.get(&ahead.key).await.unwrap().unwrap();
    assert_eq!(stored.changed_at_ms, T0 + 5_001, "after the record it replaced, not at this clock");
    assert!(stored.version > ahead.version);
}

fn ahead_id() -> String {
    let key: mcs_api::PoolKey = serde_json::from_value(pool("a")["pool_key"].clone()).unwrap();
    key.id().to_string()
}

#[tokio::test]
async fn a_withdrawal_fences_its_incarnation_against_late_registrations() {
    let h = harness().await;
    let by_x = with(pool("a"), "incarnation", json!("x"));
    let first = h.send(Method::POST, "/v1/pools", by_x.clone()).await;
    let pool_id = first.body["pool_id"].as_str().unwrap().to_owned();
    let gone =
        h.call(Method::DELETE, &format!("/v1/pools/{pool_id}?incarnation=x"), None, &[]).await;
    assert_eq!(gone.status, StatusCode::OK);
    // A heartbeat x sent before withdrawing, arriving late.
    let late = h.send(Method::POST, "/v1/pools", by_x).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.body);
    assert_eq!(late.body["stored_generation"], gone.body["generation"]);
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]), "stays withdrawn");
    let by_y = with(pool("a"), "incarnation", json!("y"));
    assert_eq!(
        h.send(Method::POST, "/v1/pools", by_y).await.status,
        StatusCode::OK,
        "a new incarnation may"
    );
}
