//! Readiness and storage outages: 503 while storage is down, recovery,
//! the first full read, staleness.

use super::*;

#[tokio::test]
async fn storage_outage_answers_503_and_recovers() {
    let mut h = harness().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    h.store.set_unavailable(true);
    let refused = h.send(Method::POST, "/v1/pools", pool("b")).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.body["error"], json!("unavailable"));
    assert_eq!(refused.headers["retry-after"], "1");
    // Reads keep serving the last view; it turns incomplete once stale.
    h.clock.advance(31_000);
    h.registry.reader.poll_once().await;
    let list = h.get("/v1/pools").await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["complete"], json!(false));
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(true));
    assert_eq!(h.send(Method::POST, "/v1/pools", pool("b")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn readiness_waits_for_the_first_full_read() {
    let mut h = unready_harness();
    assert_eq!(h.get("/readyz").await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(false));
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
    assert_eq!(h.get("/v1/pools").await.body["complete"], json!(true));
}

/// Issue 14, defect 6: readiness as docs/operations.md (Probes) defines it.
/// With storage down, a ready registry stays ready by default (its stale
/// view is worth serving), and says how stale it is.
#[tokio::test]
async fn readiness_reports_staleness_and_survives_a_storage_outage_by_default() {
    let mut h = harness().await;
    let ready = h.get("/readyz").await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.body["complete"], json!(true));
    assert_eq!(ready.body["holding_expiries"], json!(false));
    assert_eq!(ready.body["pool_discovery_complete"], json!(true), "registrations: always");
    assert_eq!(ready.body["last_poll_age_ms"], json!(0));
    h.store.set_unavailable(true);
    h.clock.advance(31_000);
    h.registry.reader.poll_once().await;
    let stale = h.get("/readyz").await;
    assert_eq!(stale.status, StatusCode::OK, "a stale view is still served");
    assert_eq!(stale.body["complete"], json!(false));
    assert_eq!(stale.body["last_poll_age_ms"], json!(31_000));
    h.clock.advance(3_600_000);
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK, "no bound by default");
}

/// With `--ready-max-staleness-secs`, a registry whose last successful poll
/// is older than the bound leaves the load balancer, and comes back with
/// the next successful poll.
#[tokio::test]
async fn readiness_with_a_staleness_bound_follows_storage() {
    let mut h = unready_harness_with(&["--ready-max-staleness-secs", "40"]);
    h.registry.reader.poll_once().await;
    h.store.set_unavailable(true);
    h.clock.advance(40_000);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK, "at the bound: still ready");
    h.clock.advance(1);
    let out = h.get("/readyz").await;
    assert_eq!(out.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(out.body["error"], json!("unavailable"));
    assert!(out.body["message"].as_str().unwrap().contains("--ready-max-staleness-secs"));
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    assert_eq!(h.get("/readyz").await.status, StatusCode::OK);
}

/// Issue 22, item 9: in a storage hang no poll returned, so completeness
/// was never published: watchers learned `complete: false` after about
/// 80 s against a stale-after of 30 s. It is published by timer during a
/// poll, so watchers are woken once the last successful poll is older than
/// `--stale-after-secs`, within a poll interval.
#[tokio::test]
async fn a_storage_hang_turns_lists_incomplete_at_stale_after_by_timer() {
    use std::sync::atomic::Ordering;
    let (mut registry, clock, store) = super::faulty::registry_on_faulty(&[
        "--stale-after-secs",
        "2",
        "--refresh-interval-ms",
        "50",
    ]);
    registry.reader.poll_once().await;
    let view = registry.state.view.clone();
    assert!(view.is_complete());
    let mut changes = view.subscribe();
    changes.borrow_and_update();
    store.reads_hang.store(true, Ordering::SeqCst);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let reader = tokio::spawn(registry.reader.run(stopped));
    // The reader is inside a poll that never answers.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(view.is_complete(), "not stale yet");
    clock.advance(2_001);
    tokio::time::timeout(Duration::from_secs(2), changes.changed())
        .await
        .expect("watchers woken within a poll interval or so of stale-after")
        .unwrap();
    assert!(!view.is_complete());
    let _ = stop.send(true);
    reader.abort();
}

/// Issue 22, item 13: a schema-3 registry went on serving and writing when
/// the table reached schema 5. A full read that finds the table past this
/// binary's schema stops its writes (503) and its readiness, naming the
/// version to run; a later read that finds it usable lifts both.
#[tokio::test]
async fn a_table_past_this_binarys_schema_stops_writes_and_readiness() {
    use tower::ServiceExt;
    let (mut registry, clock, store) = super::faulty::registry_on_faulty(&[
        "--refresh-interval-ms",
        "100",
        "--full-resync-interval-secs",
        "1",
    ]);
    registry.reader.poll_once().await;
    let call = async |registry: &Registry, method: Method, uri: &str, body: Option<Value>| {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let response = router(registry.state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    };
    let write = |dgd: &str| Some(pool(dgd));
    assert_eq!(call(&registry, Method::POST, "/v1/pools", write("a")).await.0, StatusCode::OK);

    *store.schema_too_new.lock().unwrap() = Some((7, 5));
    clock.advance(1_000);
    registry.reader.poll_once().await; // a full read re-reads the schema
    let (status, body) = call(&registry, Method::POST, "/v1/pools", write("b")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("schema version 7"), "{body}");
    let (status, body) = call(&registry, Method::GET, "/readyz", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("run a registry release of schema version 7"), "{body}");
    assert_eq!(store.read_all().await.unwrap().len(), 1, "nothing written");

    *store.schema_too_new.lock().unwrap() = None;
    clock.advance(1_000);
    registry.reader.poll_once().await;
    assert_eq!(call(&registry, Method::GET, "/readyz", None).await.0, StatusCode::OK);
    assert_eq!(call(&registry, Method::POST, "/v1/pools", write("b")).await.0, StatusCode::OK);
}
