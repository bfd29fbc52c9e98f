//! Event watches (`?watch=events`): the list then its changes as
//! events, resumption from a revision or a fingerprint, `410` past the
//! history, and slow watchers cut off without holding anyone back.

use super::*;
use crate::events::LAG;
use futures::StreamExt;
use std::time::Duration;

/// An open event stream, read a line at a time.
struct Stream {
    chunks: axum::body::BodyDataStream,
    buffered: Vec<u8>,
}

impl Stream {
    /// The next event; `None` once the stream ended.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffered.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffered.drain(..=end).collect();
                return Some(serde_json::from_slice(&line).unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(5), self.chunks.next())
                .await
                .expect("an event within 5 s");
            self.buffered.extend_from_slice(&chunk?.unwrap());
        }
    }

    /// The events up to and including the next bookmark.
    async fn batch(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let bookmark = event["type"] == "BOOKMARK";
            events.push(event);
            if bookmark {
                return events;
            }
        }
        panic!("the stream ended before a bookmark: {events:?}");
    }
}

impl Harness {
    /// Opens `uri` (a `?watch=events` query) with `headers`: the stream on
    /// `200`, else the reply.
    async fn events(&self, uri: &str, headers: &[(&str, &str)]) -> Result<Stream, Reply> {
        let mut request = Request::get(uri);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Body::empty()).unwrap();
        let response = router(self.registry.state.clone()).oneshot(request).await.unwrap();
        if response.status() != StatusCode::OK {
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
            return Err(Reply { status, headers, body: serde_json::from_slice(&bytes).unwrap() });
        }
        assert_eq!(response.headers()["content-type"], "application/x-ndjson");
        Ok(Stream { chunks: response.into_body().into_data_stream(), buffered: Vec::new() })
    }

    /// Brings the event journals up to date now, as their task does on
    /// every change (a test that counts batches must not let two changes
    /// fall into one look).
    fn sync_events(&self) {
        let state = &self.registry.state;
        state.events.sync(&state.view);
    }
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn pool_ids(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["object"]["pool_id"].as_str()).collect()
}

#[tokio::test]
async fn a_stream_sends_the_list_then_each_change_with_the_lists_fingerprint() {
    let h = harness().await;
    let a = h.send(Method::POST, "/v1/pools", pool("a")).await.body["pool_id"].clone();
    let mut stream = h.events("/v1/pools?watch=events&timeout_secs=30", &[]).await.unwrap();
    let first = stream.batch().await;
    assert_eq!(kinds(&first), ["ADDED", "BOOKMARK"]);
    assert_eq!(first[0]["object"], h.get("/v1/pools").await.body["pools"][0]);
    assert_eq!(first[0]["key"], a, "keyed as people read pool keys");
    let list = h.get("/v1/pools").await;
    assert_eq!(first[1]["fingerprint"], list.body["fingerprint"]);
    assert_eq!(first[1]["complete"], json!(true));

    let b = h.send(Method::POST, "/v1/pools", pool("b")).await.body["pool_id"].clone();
    let added = stream.batch().await;
    assert_eq!(kinds(&added), ["ADDED", "BOOKMARK"]);
    assert_eq!(added[0]["object"]["pool_id"], b);
    assert_eq!(added[1]["fingerprint"], h.get("/v1/pools").await.body["fingerprint"]);
    assert_ne!(added[1]["resource_version"], first[1]["resource_version"]);

    let bigger = with(pool("a"), "capacity", json!({"workers": 8}));
    h.send(Method::POST, "/v1/pools", bigger).await;
    let modified = stream.batch().await;
    assert_eq!(kinds(&modified), ["MODIFIED", "BOOKMARK"]);
    assert_eq!(modified[0]["object"]["capacity"]["workers"], json!(8));

    let uri = format!("/v1/pools/{}", a.as_str().unwrap());
    assert_eq!(h.call(Method::DELETE, &uri, None, &[]).await.status, StatusCode::OK);
    let deleted = stream.batch().await;
    assert_eq!(kinds(&deleted), ["DELETED", "BOOKMARK"]);
    assert_eq!(deleted[0]["object"]["pool_id"], a);
    assert_eq!(deleted[0]["key"], a);
    assert_eq!(deleted[1]["fingerprint"], h.get("/v1/pools").await.body["fingerprint"]);

    // Every list streams; each only its own changes.
    let mut clusters = h.events("/v1/clusters?watch=events", &[]).await.unwrap();
    assert_eq!(kinds(&clusters.batch().await), ["BOOKMARK"]);
}

#[tokio::test]
async fn a_stream_resumed_from_its_revision_gets_only_what_it_missed() {
    let h = harness().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let mut stream = h.events("/v1/pools?watch=events", &[]).await.unwrap();
    let bookmark = stream.batch().await.pop().unwrap();
    drop(stream);
    let rv = bookmark["resource_version"].as_str().unwrap();

    let b = h.send(Method::POST, "/v1/pools", pool("b")).await.body["pool_id"].clone();
    h.sync_events();
    let c = h.send(Method::POST, "/v1/pools", pool("c")).await.body["pool_id"].clone();
    h.sync_events();
    let uri = format!("/v1/pools?watch=events&resource_version={rv}");
    let mut resumed = h.events(&uri, &[]).await.unwrap();
    let missed = [resumed.batch().await, resumed.batch().await];
    assert_eq!(pool_ids(&missed[0]), [b.as_str().unwrap()], "not a again");
    assert_eq!(pool_ids(&missed[1]), [c.as_str().unwrap()]);
    assert_eq!(missed[1][1]["fingerprint"], h.get("/v1/pools").await.body["fingerprint"]);

    // Resumed at the newest revision: nothing missed, a bookmark.
    let newest = missed[1][1]["resource_version"].as_str().unwrap();
    let uri = format!("/v1/pools?watch=events&resource_version={newest}");
    let mut current = h.events(&uri, &[]).await.unwrap();
    let batch = current.batch().await;
    assert_eq!(kinds(&batch), ["BOOKMARK"]);
    assert_eq!(batch[0]["resource_version"], json!(newest));
}

#[tokio::test]
async fn a_revision_past_the_history_or_of_another_process_is_gone() {
    let h = harness().await;
    let mut stream = h.events("/v1/pools?watch=events", &[]).await.unwrap();
    let rv = stream.batch().await[0]["resource_version"].as_str().unwrap().to_owned();
    drop(stream);
    let (tag, _) = rv.split_once('-').unwrap();
    for gone in [format!("{tag}-999"), "0000000000000000-1".to_owned(), "nonsense".to_owned()] {
        let uri = format!("/v1/pools?watch=events&resource_version={gone}");
        let reply = h.events(&uri, &[]).await.err().expect("410");
        assert_eq!(reply.status, StatusCode::GONE, "{gone}");
        assert_eq!(reply.body["error"], json!("expired"));
        assert_eq!(reply.body["field"], json!("resource_version"));
    }

    // Past the history: more changes than it keeps.
    for i in 0..=crate::events::HISTORY {
        h.send(Method::POST, "/v1/pools", with(pool("a"), "capacity", json!({"workers": i + 1})))
            .await;
        h.sync_events();
    }
    let uri = format!("/v1/pools?watch=events&resource_version={rv}");
    assert_eq!(h.events(&uri, &[]).await.err().expect("410").status, StatusCode::GONE);

    // A revision only with watch=events.
    let reply = h.get(&format!("/v1/pools?watch=true&resource_version={rv}")).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["field"], json!("resource_version"));
    let reply = h.get("/v1/pools?watch=sometimes").await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reply.body["field"], json!("watch"));
}

/// Revisions are one process's; another replica with the same content (the
/// same fingerprint) resumes the stream without a relist, and one with
/// other content answers 410.
#[tokio::test]
async fn another_replica_resumes_a_stream_when_its_fingerprint_is_the_clients() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::new(T0));
    let mut a = harness_on(store.clone(), clock.clone(), "reg-a", &[]);
    let mut b = harness_on(store, clock, "reg-b", &[]);
    a.registry.reader.poll_once().await;
    a.send(Method::POST, "/v1/pools", pool("a")).await;
    b.registry.reader.poll_once().await;

    let mut stream = a.events("/v1/pools?watch=events", &[]).await.unwrap();
    let bookmark = stream.batch().await.pop().unwrap();
    let rv = bookmark["resource_version"].as_str().unwrap();
    let fp = bookmark["fingerprint"].as_str().unwrap();
    let uri = format!("/v1/pools?watch=events&resource_version={rv}");

    let etag = format!("\"{fp}\"");
    let mut resumed = b.events(&uri, &[("if-none-match", &etag)]).await.unwrap();
    let batch = resumed.batch().await;
    assert_eq!(kinds(&batch), ["BOOKMARK"], "no relist");
    assert_eq!(batch[0]["fingerprint"], json!(fp));
    assert_ne!(batch[0]["resource_version"], json!(rv), "b's own revision");
    // It streams b's changes from there.
    let c = b.send(Method::POST, "/v1/pools", pool("c")).await.body["pool_id"].clone();
    assert_eq!(pool_ids(&resumed.batch().await), [c.as_str().unwrap()]);

    // Other content: the client relists.
    let stale = b.events(&uri, &[("if-none-match", &etag)]).await.err().expect("410");
    assert_eq!(stale.status, StatusCode::GONE);
    assert_eq!(b.events(&uri, &[]).await.err().expect("410").status, StatusCode::GONE);
}

#[tokio::test]
async fn a_watcher_too_far_behind_gets_an_error_event_and_the_others_everything() {
    let h = harness().await;
    let mut slow = h.events("/v1/pools?watch=events", &[]).await.unwrap();
    let mut kept = h.events("/v1/pools?watch=events", &[]).await.unwrap();
    assert_eq!(kinds(&slow.batch().await), ["BOOKMARK"]);
    assert_eq!(kinds(&kept.batch().await), ["BOOKMARK"]);
    let mut last = Value::Null;
    for i in 0..=LAG {
        last =
            h.send(Method::POST, "/v1/pools", pool(&format!("p{i}"))).await.body["pool_id"].clone();
        h.sync_events();
        assert_eq!(pool_ids(&kept.batch().await), [last.as_str().unwrap()]);
    }
    let error = slow.next().await.unwrap();
    assert_eq!(error["type"], json!("ERROR"));
    assert_eq!(error["object"]["error"], json!("expired"));
    assert_eq!(slow.next().await, None, "the stream ends");

    // The kept watcher still gets the next change.
    h.send(Method::POST, "/v1/pools", pool("after")).await;
    assert_eq!(kinds(&kept.batch().await), ["ADDED", "BOOKMARK"]);
    assert_ne!(last, Value::Null);
}

#[tokio::test]
async fn a_flip_of_complete_is_an_event() {
    let mut h = unready_harness_with(&["--stale-after-secs", "5"]);
    h.registry.reader.poll_once().await;
    let mut stream = h.events("/v1/pools?watch=events", &[]).await.unwrap();
    assert_eq!(stream.batch().await[0]["complete"], json!(true));
    h.store.set_unavailable(true);
    h.clock.advance(6_000);
    h.registry.reader.poll_once().await;
    let flipped = stream.batch().await;
    assert_eq!(kinds(&flipped), ["COMPLETENESS", "BOOKMARK"]);
    assert_eq!(flipped[0]["complete"], json!(false));
    assert_eq!(flipped[1]["complete"], json!(false));
    h.store.set_unavailable(false);
    h.registry.reader.poll_once().await;
    let back = stream.batch().await;
    assert_eq!(back[0], json!({"type": "COMPLETENESS", "complete": true}));
}

#[tokio::test]
async fn a_stream_ends_at_its_timeout_and_holds_a_watch_slot_until_then() {
    let h = harness().await;
    let slots = h.registry.state.watch_slots.available_permits();
    let started = std::time::Instant::now();
    let mut stream = h.events("/v1/pools?watch=events&timeout_secs=1", &[]).await.unwrap();
    assert_eq!(h.registry.state.watch_slots.available_permits(), slots - 1);
    assert_eq!(kinds(&stream.batch().await), ["BOOKMARK"]);
    assert_eq!(stream.next().await, None);
    assert!(started.elapsed() >= Duration::from_millis(900));
    drop(stream);
    assert_eq!(h.registry.state.watch_slots.available_permits(), slots);
}
