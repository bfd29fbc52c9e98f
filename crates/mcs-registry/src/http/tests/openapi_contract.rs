//! Regression tests of the defects that fuzzing the API from its OpenAPI
//! document (scripts/schemathesis) and probing around it found: each failed
//! before its fix.

use super::*;

/// A path segment that is not UTF-8 once percent-decoded (`%FF`) was
/// refused with axum's own plain-text `400` ("Invalid URL: Invalid UTF-8 in
/// `pool_id`"), not the `ErrorBody` every non-2xx answer carries, so a
/// client reading `error`/`field` could not parse it.
#[tokio::test]
async fn a_path_segment_that_is_not_utf8_is_an_error_body_naming_it() {
    let h = harness().await;
    let registration = json!({"incarnation": "c1"}).to_string();
    let cases = [
        (Method::DELETE, "/v1/pools/%FF", None, "pool_id"),
        (Method::DELETE, "/v1/routers/gr-%C3%28", None, "router_id"),
        (Method::PUT, "/v1/clusters/%FF", Some(registration), "cluster_id"),
        (Method::DELETE, "/v1/clusters/%FF", None, "cluster_id"),
        (Method::DELETE, "/v1/clusters/east/exports/%FF/web", None, "namespace"),
        (
            Method::PUT,
            "/v1/clusters/east/exports/llm/%FF",
            Some(export("2026-12-02T08:00:00Z", 80).to_string()),
            "name",
        ),
    ];
    for (method, uri, body, field) in cases {
        let request = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, Body::from))
            .unwrap();
        let response = router(h.registry.state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{method} {uri}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{method} {uri} answers an ErrorBody"
        );
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["error"], json!("malformed"), "{method} {uri}: {body}");
        assert_eq!(body["field"], json!(field), "{method} {uri}: {body}");
    }
    assert_eq!(h.stored().await, 0);
}
