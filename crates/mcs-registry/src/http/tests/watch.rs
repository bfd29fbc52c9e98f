//! ETags and long polls: what an ETag matches, and what wakes a watcher
//! (including a flip of `complete`).

use super::*;

#[tokio::test]
async fn etags_and_long_polls() {
    let h = harness().await;
    let list = h.get("/v1/pools").await;
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
    assert_eq!(cached.headers["etag"].to_str().unwrap(), etag);

    // A watch with nothing changing ends with 304 at its timeout.
    let started = std::time::Instant::now();
    let idle = h
        .call(Method::GET, "/v1/pools?watch=true&timeout_secs=1", None, &[("if-none-match", &etag)])
        .await;
    assert_eq!(idle.status, StatusCode::NOT_MODIFIED);
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    // A watch returns the new list as soon as a write changes it.
    let state = h.registry.state.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let request = Request::post("/v1/pools").body(Body::from(pool("w").to_string())).unwrap();
        router(state).oneshot(request).await.unwrap().status()
    });
    let woken = h.watch_pools(&etag).await;
    assert_eq!(writer.await.unwrap(), StatusCode::OK);
    assert_eq!(woken.status, StatusCode::OK);
    assert_eq!(woken.body["pools"].as_array().unwrap().len(), 1);
    assert_ne!(woken.headers["etag"].to_str().unwrap(), etag);

    // Shutdown ends waiting long-polls at once.
    let etag = woken.headers["etag"].to_str().unwrap().to_owned();
    let stop = h.registry.shutdown.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        stop.send_replace(true);
    });
    let started = std::time::Instant::now();
    let ended = h.watch_pools(&etag).await;
    assert_eq!(ended.status, StatusCode::NOT_MODIFIED);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test]
async fn an_etag_taken_while_complete_does_not_match_an_incomplete_list() {
    let mut h = stale_after_5s().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let list = h.get("/v1/pools").await;
    let etag = list.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{}\"", fingerprint(&list)));
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);

    // An outage outlasts --stale-after-secs, not the lease: same content,
    // incomplete.
    h.store.set_unavailable(true);
    h.clock.advance(6_000);
    h.registry.reader.poll_once().await;
    let stale = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &etag)]).await;
    assert_eq!(stale.status, StatusCode::OK, "a 304 would hide complete: false");
    assert_eq!(stale.body["complete"], json!(false));
    assert_eq!(fingerprint(&stale), fingerprint(&list), "the body's fingerprint stays plain");
    let incomplete = stale.headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(incomplete, format!("\"{}-incomplete\"", fingerprint(&list)));
    let cached = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &incomplete)]).await;
    assert_eq!(cached.status, StatusCode::NOT_MODIFIED);

    // Recovery: the incomplete validator no longer matches.
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    let back = h.call(Method::GET, "/v1/pools", None, &[("if-none-match", &incomplete)]).await;
    assert_eq!(back.status, StatusCode::OK);
    assert_eq!(back.body["complete"], json!(true));
    assert_eq!(back.headers["etag"].to_str().unwrap(), etag);
}

#[tokio::test]
async fn a_flip_of_complete_wakes_watchers_both_ways() {
    let h = stale_after_5s().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let etag = h.get("/v1/pools").await.headers["etag"].to_str().unwrap().to_owned();
    let h = Arc::new(tokio::sync::Mutex::new(h));

    // Each step flips completeness 200 ms into a watch that would otherwise
    // wait 10 s: the outage, then the recovery.
    async fn watch_through(
        h: &Arc<tokio::sync::Mutex<Harness>>,
        etag: &str,
        outage: bool,
    ) -> (Reply, std::time::Duration) {
        let (state, store, clock) = {
            let h = h.lock().await;
            (h.registry.state.clone(), h.store.clone(), h.clock.clone())
        };
        let flipper = {
            let h = h.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                store.set_unavailable(outage);
                if outage {
                    clock.advance(6_000);
                }
                h.lock().await.registry.reader.poll_once().await;
            })
        };
        let started = std::time::Instant::now();
        let request = Request::get("/v1/pools?watch=true&timeout_secs=10")
            .header("if-none-match", etag)
            .body(Body::empty())
            .unwrap();
        let response = router(state).oneshot(request).await.unwrap();
        let waited = started.elapsed();
        flipper.await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        let body =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        (Reply { status, headers, body }, waited)
    }

    let (woken, waited) = watch_through(&h, &etag, true).await;
    assert_eq!(woken.status, StatusCode::OK, "woken by the turn to incomplete");
    assert_eq!(woken.body["complete"], json!(false));
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    let incomplete = woken.headers["etag"].to_str().unwrap().to_owned();

    let (woken, waited) = watch_through(&h, &incomplete, false).await;
    assert_eq!(woken.status, StatusCode::OK, "woken by the turn back to complete");
    assert_eq!(woken.body["complete"], json!(true));
    assert!(waited < std::time::Duration::from_secs(5), "{waited:?}");
    assert_eq!(woken.headers["etag"].to_str().unwrap(), etag);
}

/// A ready harness whose view turns incomplete 5 s after its last
/// successful poll, well within the 30 s leases.
async fn stale_after_5s() -> Harness {
    let mut h = unready_harness_with(&["--stale-after-secs", "5"]);
    h.registry.reader.poll_once().await;
    h
}
