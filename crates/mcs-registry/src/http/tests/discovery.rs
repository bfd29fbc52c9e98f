//! `--pool-discovery mcs|karmada` as the API shows it: pool and router
//! writes answer `501`; discovered pools are served, fingerprinted, tagged
//! and watched as registered ones are; completeness follows discovery.

use super::*;
use mcs_api::{Pool, PoolId};
use std::collections::BTreeMap;

fn discovering() -> Harness {
    unready_harness_with(
        &[&["--pool-discovery", "mcs"][..], &mcs_testkit::fixtures::ROUTER_FLAGS].concat(),
    )
}

fn discovered(dgd: &str) -> BTreeMap<PoolId, Pool> {
    let pool: Pool = serde_json::from_value({
        let mut v = pool(dgd);
        let key: mcs_api::PoolKey = serde_json::from_value(v["pool_key"].clone()).unwrap();
        v["pool_id"] = json!(key.id());
        v
    })
    .unwrap();
    [(pool.pool_id.clone(), pool)].into()
}

#[tokio::test]
async fn pool_and_router_writes_answer_501_and_store_nothing() {
    let mut h = discovering();
    h.registry.reader.poll_once().await;
    let router = json!({"router_id": "gr-0", "address": "10.0.0.1:8080"});
    for (method, uri, body) in [
        (Method::POST, "/v1/pools", Some(pool("a"))),
        (Method::POST, "/pools", Some(pool("a"))),
        (Method::DELETE, "/v1/pools/0123456789abcdef0123456789abcdef", None),
        (Method::POST, "/v1/routers", Some(router)),
        (Method::DELETE, "/v1/routers/gr-0", None),
    ] {
        let reply = h.call(method.clone(), uri, body.map(|b| b.to_string()), &[]).await;
        assert_eq!(reply.status, StatusCode::NOT_IMPLEMENTED, "{method} {uri}");
        assert_eq!(reply.body["error"], json!("not_implemented"), "{method} {uri}");
        assert!(reply.body["message"].is_string());
    }
    assert_eq!(h.stored().await, 0);
    // Clusters and exports are registered as ever.
    let cluster = json!({"incarnation": "inc-1"});
    let reply = h.send(Method::PUT, "/v1/clusters/east", cluster).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
}

#[tokio::test]
async fn discovered_pools_are_served_tagged_and_watched_like_registered_ones() {
    let mut h = discovering();
    h.registry.reader.poll_once().await;
    let view = h.registry.state.view.clone();
    let list = h.get("/v1/pools").await;
    assert_eq!(list.body["complete"], json!(false), "not before discovery's first list");
    let ready = h.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK, "readiness is storage's alone");
    assert_eq!(ready.body["pool_discovery_complete"], json!(false), "/readyz says why");
    view.set_discovery_complete(true);
    assert_eq!(h.get("/readyz").await.body["pool_discovery_complete"], json!(true));
    let list = h.get("/v1/pools").await;
    assert_eq!(list.body["complete"], json!(true));
    let etag = list.headers["etag"].to_str().unwrap().to_owned();

    let waker = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        view.replace_discovered(discovered("a"), BTreeMap::new())
    });
    let woken = h.watch_pools(&etag).await;
    assert!(waker.await.unwrap());
    assert_eq!(woken.status, StatusCode::OK);
    assert_eq!(woken.body["pools"].as_array().unwrap().len(), 1);
    // The same pool registered in another registry has the same fingerprint.
    let mut registered = harness().await;
    registered.registry.reader.poll_once().await;
    assert_eq!(registered.send(Method::POST, "/v1/pools", pool("a")).await.status, StatusCode::OK);
    assert_eq!(fingerprint(&registered.get("/v1/pools").await), fingerprint(&woken));
    // Discovery losing completeness flips the lists' ETag.
    h.registry.state.view.set_discovery_complete(false);
    let list = h.get("/v1/pools").await;
    assert_eq!(list.body["complete"], json!(false));
    assert!(list.headers["etag"].to_str().unwrap().ends_with("-incomplete\""));
}
