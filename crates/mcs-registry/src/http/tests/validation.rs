//! Bad input (a JSON 4xx naming the field, nothing stored) and unknown
//! routes, records and methods.

use super::*;

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_stored() {
    let h = harness().await;
    let cases: Vec<(Option<String>, StatusCode, Option<&str>)> = vec![
        (Some("{\"pool_key\":".into()), StatusCode::BAD_REQUEST, Some("pool_key")),
        (Some("not json".into()), StatusCode::BAD_REQUEST, Some("body")),
        (Some(String::new()), StatusCode::BAD_REQUEST, Some("body")),
        (Some(format!("{} trailing", pool("a"))), StatusCode::BAD_REQUEST, Some("body")),
        // Cut inside a key: the parser knows no field there (it named it `?`).
        (Some("{\"pool_k".into()), StatusCode::BAD_REQUEST, Some("body")),
        (Some("{\"pool_key\": {\"nam".into()), StatusCode::BAD_REQUEST, Some("pool_key")),
        (
            Some(with(pool("a"), "model", json!("  ")).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("model"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p["pool_key"]["namespace"] = json!("Bad_NS");
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("pool_key.namespace"),
        ),
        (
            Some(
                with(
                    pool("a"),
                    "lease",
                    json!({"duration_secs": 10, "heartbeat_interval_secs": 10}),
                )
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lease"),
        ),
        (
            Some(
                with(
                    pool("a"),
                    "lease",
                    json!({"duration_secs": 90000, "heartbeat_interval_secs": 10}),
                )
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lease.duration_secs"),
        ),
        (
            Some(
                with(
                    pool("a"),
                    "lease",
                    json!({"duration_secs": 30, "heartbeat_interval_secs": 0}),
                )
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("lease.heartbeat_interval_secs"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p["capacity"]["workers"] = json!(-1);
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("capacity.workers"),
        ),
        (
            Some(with(pool("a"), "relay_address", json!("nowhere")).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("relay_address"),
        ),
        (
            Some(
                {
                    let mut p = pool("a");
                    p.as_object_mut().unwrap().remove("model");
                    p
                }
                .to_string(),
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("model"),
        ),
        (
            Some(with(pool("a"), "generation", json!(3)).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("incarnation"),
        ),
        (
            Some(with(pool("a"), "relay_identities", json!(["x".repeat(4096)])).to_string()),
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
        ),
    ];
    for (body, status, field) in cases {
        let shown = body.clone().unwrap_or_default().chars().take(80).collect::<String>();
        let reply = h.call(Method::POST, "/v1/pools", body, &[]).await;
        assert_eq!(reply.status, status, "{shown}: {}", reply.body);
        if let Some(field) = field {
            assert_eq!(reply.body["field"], json!(field), "{shown}: {}", reply.body);
            let error =
                if status == StatusCode::BAD_REQUEST { "malformed" } else { "invalid_argument" };
            assert_eq!(reply.body["error"], json!(error));
        }
        assert!(
            reply.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{shown}: a message"
        );
    }
    assert_eq!(h.stored().await, 0, "nothing is stored");
    assert_eq!(h.get("/v1/pools").await.body["pools"], json!([]));
}

#[tokio::test]
async fn unknown_routes_records_and_methods() {
    let h = harness().await;
    let missing = h.call(Method::DELETE, &format!("/v1/pools/{}", "0".repeat(32)), None, &[]).await;
    assert_eq!(
        (missing.status, missing.body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    let bad_id = h.call(Method::DELETE, "/v1/pools/xyz", None, &[]).await;
    assert_eq!(
        (bad_id.status, bad_id.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("pool_id"))
    );
    // The path no route serves is named (before: `no such route` alone, so
    // a base URL with a path of its own, `…/v1/v1/status`, went unseen).
    let unrouted = h.get("/v1/v1/status").await;
    assert_eq!(unrouted.status, StatusCode::NOT_FOUND);
    assert_eq!(
        unrouted.body["message"],
        json!("no such route: GET /v1/v1/status (see docs/api.md)")
    );
    let long = h.get(&format!("/v2/{}", "a".repeat(300))).await;
    let message = long.body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("no such route: GET /v2/aaa") && message.contains("a… (see"),
        "{message}"
    );
    assert!(message.len() < 260, "{message}");
    let wrong = h.call(Method::PATCH, "/v1/pools", None, &[]).await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(wrong.body["message"].is_string());
    let bad_query = h.get("/v1/pools?watch=maybe").await;
    assert_eq!(
        (bad_query.status, bad_query.body["field"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("watch"))
    );
    let bad_delete = h
        .call(Method::DELETE, &format!("/v1/pools/{}?generation=4", "0".repeat(32)), None, &[])
        .await;
    assert_eq!(bad_delete.body["field"], json!("incarnation"));
}
