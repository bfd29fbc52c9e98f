//! Regression tests of the operator limits (issue 7, defect 8): items too
//! large to store, the watch cap and the watch length.

use super::*;

/// A polled registry on the embedded store whose settings are the test
/// flags with `adjust` applied.
async fn harness_adjusted(adjust: impl FnOnce(&mut Settings)) -> Harness {
    let args = Args::try_parse_from(["mcs-registry", "--writer-id", "reg-a"]).unwrap();
    let mut settings = Settings::from_args(&args).unwrap();
    adjust(&mut settings);
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(T0));
    let mut registry = Registry::new(store.clone(), clock.clone(), &settings);
    registry.reader.poll_once().await;
    Harness { registry, clock, store }
}

/// Defect 8: an export under the body limit whose stored item is over
/// DynamoDB's 400 KB item limit was a 500 (DynamoDB refused the PutItem);
/// on the embedded store it was even accepted. Both stores now refuse it
/// alike, and the API answers 413 naming the field. (Its endpoints have
/// random hostnames: an item's payload is compressed when large, and
/// these barely compress.)
#[tokio::test]
async fn an_export_too_large_to_store_answers_413_naming_the_field() {
    let h = harness_adjusted(|s| s.max_body_bytes = 2 << 20).await;
    let mut big = export("2026-01-01T00:00:00Z", 80);
    big["endpoints"] =
        serde_json::to_value(mcs_core::fixtures::mk_incompressible_endpoints(12_000)).unwrap();
    assert!(big.to_string().len() < 2 << 20, "within the body limit");
    let uri = "/v1/clusters/east/exports/llm/web";
    let reply = h.send(Method::PUT, uri, big).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.body);
    assert_eq!(reply.body["error"], json!("payload_too_large"));
    assert_eq!(reply.body["field"], json!("endpoints"));
    assert_eq!(h.stored().await, 0, "nothing stored");
    let ok = h.send(Method::PUT, uri, export("2026-01-01T00:00:00Z", 80)).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
}

/// Issue 29, item 4: an export of about 3,500 endpoints and more was over
/// the one body limit of 256 KiB and refused; exports have their own,
/// larger limit (2 MiB by default). Past about 7,000 endpoints the stored
/// item was then over DynamoDB's limit and refused; a large payload is now
/// stored compressed, so 20,000 endpoints (1.5 MB of JSON) are stored and
/// served whole, and the body limit binds. Every other write keeps 256 KiB.
#[tokio::test]
async fn an_export_of_20000_endpoints_is_stored_and_served_whole() {
    let mut h = harness_adjusted(|_| {}).await;
    let endpoints = serde_json::to_value(mcs_core::fixtures::mk_endpoints(20_000)).unwrap();
    let lease = json!({"incarnation": "east-1", "generation": 1});
    assert_eq!(h.send(Method::PUT, "/v1/clusters/east", lease).await.status, StatusCode::OK);
    let mut big = with(export("2026-01-01T00:00:00Z", 80), "incarnation", json!("east-1"));
    big["endpoints"] = endpoints.clone();
    assert!(big.to_string().len() > 1_000_000, "{}", big.to_string().len());
    let reply = h.send(Method::PUT, "/v1/clusters/east/exports/llm/web", big).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    h.registry.reader.poll_once().await;
    let served = h.get("/v1/exports").await;
    let export = &served.body["exports"][0];
    let got = export["endpoints"].as_array().or(export["spec"]["endpoints"].as_array());
    // Compared without printing 20,000 endpoints on failure.
    assert_eq!(got.map(Vec::len), Some(20_000));
    assert!(got == endpoints.as_array(), "the endpoints served differ from those sent");
    let padded = with(pool("p1"), "model", json!("m".repeat(300 * 1024)));
    let reply = h.send(Method::POST, "/v1/pools", padded).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", reply.body);
}

/// A watch of the pools list sent with `If-None-Match: etag`, answered with
/// its status once it ends.
fn spawn_watch(
    state: Arc<AppState>,
    etag: &str,
    timeout_secs: u64,
) -> tokio::task::JoinHandle<StatusCode> {
    let request = Request::get(format!("/v1/pools?watch=true&timeout_secs={timeout_secs}"))
        .header("if-none-match", etag)
        .body(Body::empty())
        .unwrap();
    tokio::spawn(async move { router(state).oneshot(request).await.unwrap().status() })
}

/// Waits (bounded) until `n` watches hold a slot.
async fn until_waiting(state: &AppState, max_watches: usize, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while max_watches - state.watch_slots.available_permits() != n {
        assert!(std::time::Instant::now() < deadline, "{n} watches never waited");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Defect 8: nothing capped the watches waiting at once. Past
/// `--max-watches` a watch is answered 503 with `Retry-After`, and once
/// the waiting watches end, watches are accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_past_the_cap_get_503_and_are_accepted_again_once_others_end() {
    let metrics = crate::metrics::install();
    let h = harness_adjusted(|s| s.max_watches = 2).await;
    let state = h.registry.state.clone();
    let etag = h.get("/v1/pools").await.headers["etag"].to_str().unwrap().to_owned();
    let waiting = [spawn_watch(state.clone(), &etag, 60), spawn_watch(state.clone(), &etag, 60)];
    until_waiting(&state, 2, 2).await;
    let uri = "/v1/pools?watch=true&timeout_secs=60";
    let refused = h.call(Method::GET, uri, None, &[("if-none-match", &etag)]).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.body);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.body["error"], json!("unavailable"));
    let rendered = metrics.render();
    assert!(rendered.contains("mcs_http_refused_total{reason=\"watches\"}"), "{rendered}");
    // A watch that need not wait is answered at once, cap or not.
    assert_eq!(h.call(Method::GET, uri, None, &[("if-none-match", "\"old\"")]).await.status, 200);

    assert_eq!(h.send(Method::POST, "/v1/pools", pool("a")).await.status, StatusCode::OK);
    for watch in waiting {
        assert_eq!(watch.await.unwrap(), StatusCode::OK, "the change ends the watch");
    }
    until_waiting(&state, 2, 0).await;
    let etag = h.get("/v1/pools").await.headers["etag"].to_str().unwrap().to_owned();
    let again = spawn_watch(state.clone(), &etag, 1);
    assert_eq!(again.await.unwrap(), StatusCode::NOT_MODIFIED, "waited until its timeout");
}

/// Defect 8: a `--max-watch-secs` too large for the clock panicked on
/// `Instant + timeout` (now refused at startup, see config.rs); the watch
/// itself never panics whatever the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_longer_than_the_clock_can_count_does_not_panic() {
    let h = harness_adjusted(|s| s.max_watch = std::time::Duration::MAX).await;
    let state = h.registry.state.clone();
    let etag = h.get("/v1/pools").await.headers["etag"].to_str().unwrap().to_owned();
    let slots = state.watch_slots.available_permits();
    let watch = spawn_watch(state.clone(), &etag, u64::MAX);
    until_waiting(&state, slots, 1).await;
    assert_eq!(h.send(Method::POST, "/v1/pools", pool("a")).await.status, StatusCode::OK);
    assert_eq!(watch.await.unwrap(), StatusCode::OK);
}
