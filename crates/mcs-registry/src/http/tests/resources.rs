//! Registering, listing and withdrawing each kind of record: pools,
//! routers, clusters, their exports and the imports derived from them.

use super::*;

#[tokio::test]
async fn register_list_and_withdraw_a_pool() {
    let h = harness().await;
    let reply = h.send(Method::POST, "/v1/pools", pool("llama")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let pool_id = reply.body["pool_id"].as_str().unwrap().to_owned();
    assert_eq!(reply.body["lease"], json!({"duration_secs": 30, "heartbeat_interval_secs": 10}));
    assert!(reply.body["generation"].as_u64().unwrap() >= T0 << 16);

    // Read-your-writes: no reader poll in between.
    let list = h.get("/v1/pools").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["pools"][0]["pool_id"], json!(pool_id));
    assert_eq!(list.body["pools"][0]["model"], json!("meta-llama/Llama-3.1-8B"));
    assert_eq!(list.body["complete"], json!(true));
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{}\"", fingerprint(&list)));

    let deleted = h.call(Method::DELETE, &format!("/v1/pools/{pool_id}"), None, &[]).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert!(
        deleted.body["generation"].as_u64().unwrap() > reply.body["generation"].as_u64().unwrap()
    );
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]));
    let again = h.call(Method::DELETE, &format!("/v1/pools/{pool_id}"), None, &[]).await;
    assert_eq!(again.status, StatusCode::OK, "withdrawing twice is idempotent");
    assert_eq!(again.body["generation"], deleted.body["generation"]);
}

#[tokio::test]
async fn unversioned_aliases_serve_the_same_lists() {
    let h = harness().await;
    assert_eq!(h.send(Method::POST, "/pools", pool("a")).await.status, StatusCode::OK);
    let v1 = h.get("/v1/pools").await;
    let alias = h.get("/pools").await;
    assert_eq!(alias.body, v1.body);
    assert_eq!(alias.body["pools"].as_array().unwrap().len(), 1);
    let reg = json!({"router_id": "gr-0", "address": "10.0.0.9:8080"});
    assert_eq!(h.send(Method::POST, "/v1/routers", reg).await.status, StatusCode::OK);
    assert_eq!(h.get("/routers").await.body, h.get("/v1/routers").await.body);
    assert_eq!(h.get("/healthz").await.body["status"], json!("ok"));
}

#[tokio::test]
async fn routers_register_list_and_withdraw() {
    let h = harness().await;
    let reg = json!({"router_id": "gr-0.us-east-1", "address": "10.0.0.9:8080", "incarnation": "r1",
                     "lease": {"duration_secs": 60, "heartbeat_interval_secs": 20}});
    let reply = h.send(Method::POST, "/v1/routers", reg).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["lease"]["duration_secs"], json!(60), "the lease asked for is granted");
    let list = h.get("/v1/routers").await;
    assert_eq!(list.body["routers"][0]["address"], json!("10.0.0.9:8080"));
    let other =
        h.call(Method::DELETE, "/v1/routers/gr-0.us-east-1?incarnation=r2", None, &[]).await;
    assert_eq!(other.status, StatusCode::CONFLICT, "another incarnation may not withdraw it");
    h.clock.advance(60_000 + SKEW - 1);
    assert_eq!(
        h.get("/v1/routers").await.body["routers"].as_array().unwrap().len(),
        1,
        "60 s lease"
    );
    let mine = h.call(Method::DELETE, "/v1/routers/gr-0.us-east-1?incarnation=r1", None, &[]).await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.body);
    assert_eq!(h.get("/v1/routers").await.body["routers"], json!([]));
}

#[tokio::test]
async fn clusters_exports_and_imports() {
    let h = harness().await;
    let early = h
        .send(Method::PUT, "/v1/clusters/east/exports/llm/web", export("2026-12-01T00:00:00Z", 80))
        .await;
    assert_eq!(early.status, StatusCode::OK, "{}", early.body);
    assert_eq!(early.body["conditions"][1]["reason"], json!("NoClusterLease"));
    assert_eq!(h.get("/v1/imports").await.body["imports"], json!([]), "no cluster lease yet");

    for cluster in ["east", "west"] {
        let reply = h
            .send(
                Method::PUT,
                &format!("/v1/clusters/{cluster}"),
                json!({"incarnation": format!("{cluster}-1"), "generation": 17}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["generation"], json!(17));
    }
    assert_eq!(h.get("/v1/clusters").await.body["clusters"].as_array().unwrap().len(), 2);
    let west = h
        .send(
            Method::PUT,
            "/v1/clusters/west/exports/llm/web",
            with(export("2026-12-02T00:00:00Z", 8080), "incarnation", json!("west-1")),
        )
        .await;
    assert_eq!(west.status, StatusCode::OK);
    let conflict = &west.body["conditions"][2];
    assert_eq!(
        (conflict["type"].as_str(), conflict["status"].as_str(), conflict["reason"].as_str()),
        (Some("Conflict"), Some("True"), Some("PortConflict"))
    );

    let imports = h.get("/v1/imports").await;
    let import = &imports.body["imports"][0];
    assert_eq!(import["ports"][0]["port"], json!(80), "the oldest export's port wins");
    assert_eq!(import["clusters"].as_array().unwrap().len(), 2);
    let exports = h.get("/v1/exports").await;
    for e in exports.body["exports"].as_array().unwrap() {
        assert_eq!(
            e["conditions"][2]["status"],
            json!("True"),
            "every export reports the conflict"
        );
    }

    let gone = h
        .call(Method::DELETE, "/v1/clusters/east/exports/llm/web?incarnation=east-1", None, &[])
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.body);
    let imports = h.get("/v1/imports").await;
    assert_eq!(imports.body["imports"][0]["ports"][0]["port"], json!(8080));
    assert_eq!(
        h.get("/v1/exports").await.body["exports"][0]["conditions"][2]["status"],
        json!("False")
    );

    let left = h
        .call(Method::DELETE, "/v1/clusters/west?incarnation=west-1&generation=18", None, &[])
        .await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.body);
    assert_eq!(
        h.get("/v1/imports").await.body["imports"],
        json!([]),
        "exports live on their cluster"
    );
    assert_eq!(h.get("/v1/exports").await.body["exports"], json!([]));
}

/// A `PUT` is fenced like a `DELETE` (issue 22, item 11: before, a `PUT`
/// by an old leader, or naming no incarnation, rewrote the export).
#[tokio::test]
async fn an_export_is_written_and_withdrawn_only_by_its_cluster_lease_holder_while_it_is_live() {
    let h = harness().await;
    let reply = h.send(Method::PUT, "/v1/clusters/east", json!({"incarnation": "east-1"})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let uri = "/v1/clusters/east/exports/llm/web";
    let holder = with(export("2026-12-01T00:00:00Z", 80), "incarnation", json!("east-1"));
    let reply = h.send(Method::PUT, uri, holder).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let refused_as_owned = |what: &str, refused: &Reply| {
        assert_eq!(refused.status, StatusCode::CONFLICT, "{what}: {}", refused.body);
        assert_eq!(refused.body["error"], json!("owned"), "{what}");
        assert_eq!(refused.body["owner"], json!("east-1"), "{what}");
        assert!(refused.body["lease_until_ms"].is_u64(), "{what}: {}", refused.body);
    };
    for (query, incarnation) in [("", None), ("?incarnation=east-0", Some("east-0"))] {
        let mut rewrite = export("2026-12-01T00:00:00Z", 81);
        if let Some(incarnation) = incarnation {
            rewrite = with(rewrite, "incarnation", json!(incarnation));
        }
        refused_as_owned(&format!("PUT {incarnation:?}"), &h.send(Method::PUT, uri, rewrite).await);
        let delete = h.call(Method::DELETE, &format!("{uri}{query}"), None, &[]).await;
        refused_as_owned(&format!("DELETE {query}"), &delete);
    }
    let exports = h.get("/v1/exports").await.body["exports"].clone();
    assert_eq!(exports.as_array().unwrap().len(), 1);
    assert_eq!(exports[0]["ports"][0]["port"], json!(80), "not rewritten: {exports}");

    // Once the cluster is withdrawn its exports are no longer served, and
    // anyone may withdraw them (cleaning up what a removed cluster left).
    let left = h.call(Method::DELETE, "/v1/clusters/east?incarnation=east-1", None, &[]).await;
    assert_eq!(left.status, StatusCode::OK, "{}", left.body);
    assert_eq!(h.get("/v1/exports").await.body["exports"], json!([]));
    let cleaned = h.call(Method::DELETE, "/v1/clusters/east/exports/llm/web", None, &[]).await;
    assert_eq!(cleaned.status, StatusCode::OK, "{}", cleaned.body);
}

#[tokio::test]
async fn a_cluster_body_must_match_its_path() {
    let h = harness().await;
    let reply = h
        .send(Method::PUT, "/v1/clusters/east", json!({"cluster_id": "west", "incarnation": "i"}))
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["field"], json!("cluster_id"));
    let reply = h.send(Method::PUT, "/v1/clusters/East", json!({"incarnation": "i"})).await;
    assert_eq!(reply.body["field"], json!("cluster_id"));
    let reply = h
        .send(Method::PUT, "/v1/clusters/east/exports/LLM/web", export("2026-12-01T00:00:00Z", 80))
        .await;
    assert_eq!(
        (reply.status, reply.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("namespace"))
    );
    assert_eq!(h.stored().await, 0);
}
