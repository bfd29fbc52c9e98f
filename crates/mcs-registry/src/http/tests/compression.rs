//! Compressed lists: `Accept-Encoding: gzip` gets the list compressed once
//! per change, under its own `ETag`, with `Vary: Accept-Encoding`; `304`
//! works with either validator.

use super::*;
use bytes::Bytes;
use std::io::Read;

/// A raw reply: status, headers and the body's bytes as sent.
async fn raw(h: &Harness, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = Request::get(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router(h.registry.state.clone())
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    (parts.status, parts.headers, axum::body::to_bytes(body, usize::MAX).await.unwrap())
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

#[tokio::test]
async fn a_gzip_list_is_the_list_compressed_under_its_own_etag() {
    let h = harness().await;
    for name in ["a", "b", "c"] {
        h.send(Method::POST, "/v1/pools", pool(name)).await;
    }
    let (status, plain_headers, plain) = raw(&h, "/v1/pools", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(plain_headers.get("content-encoding").is_none());
    assert_eq!(plain_headers["vary"], "accept-encoding");
    let gzip = [("accept-encoding", "br;q=1, gzip;q=0.8")];
    let (status, headers, compressed) = raw(&h, "/v1/pools", &gzip).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-encoding"], "gzip");
    assert_eq!(headers["vary"], "accept-encoding");
    assert_eq!(gunzip(&compressed), plain.to_vec(), "the same list");
    assert!(compressed.len() < plain.len(), "{} vs {}", compressed.len(), plain.len());
    let plain_etag = plain_headers["etag"].to_str().unwrap().to_owned();
    let gzip_etag = headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(gzip_etag, format!("{}-gzip\"", plain_etag.trim_end_matches('"')));

    // Either validator gets 304, with the tag of the encoding asked for.
    for known in [&gzip_etag, &plain_etag] {
        let (status, headers, _) =
            raw(&h, "/v1/pools", &[gzip[0], ("if-none-match", known.as_str())]).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{known}");
        assert_eq!(headers["etag"].to_str().unwrap(), gzip_etag);
        assert_eq!(headers["vary"], "accept-encoding");
        let (status, headers, _) = raw(&h, "/v1/pools", &[("if-none-match", known.as_str())]).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{known}");
        assert_eq!(headers["etag"].to_str().unwrap(), plain_etag);
    }
    let (status, _, _) = raw(&h, "/v1/pools", &[("accept-encoding", "gzip;q=0")]).await;
    assert_eq!(status, StatusCode::OK);

    // A change: a new body, compressed anew; a long-poll gets it compressed.
    let state = h.registry.state.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let request = Request::post("/v1/pools").body(Body::from(pool("d").to_string())).unwrap();
        router(state).oneshot(request).await.unwrap().status()
    });
    let uri = "/v1/pools?watch=true&timeout_secs=10";
    let (status, headers, woken) =
        raw(&h, uri, &[gzip[0], ("if-none-match", gzip_etag.as_str())]).await;
    assert_eq!(writer.await.unwrap(), StatusCode::OK);
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-encoding"], "gzip");
    let list: Value = serde_json::from_slice(&gunzip(&woken)).unwrap();
    assert_eq!(list["pools"].as_array().unwrap().len(), 4);
    assert_ne!(headers["etag"].to_str().unwrap(), gzip_etag);
}

/// The compressed body is computed once per change and shared by every
/// request for it.
#[tokio::test]
async fn a_list_is_compressed_once_per_change() {
    let h = harness().await;
    h.send(Method::POST, "/v1/pools", pool("a")).await;
    let view = &h.registry.state.view;
    let first = view.render(mcs_core::SectionKind::Pools);
    let again = view.render(mcs_core::SectionKind::Pools);
    assert_eq!(first.gzip().as_ptr(), again.gzip().as_ptr(), "one compression, shared");
    h.send(Method::POST, "/v1/pools", pool("b")).await;
    let changed = view.render(mcs_core::SectionKind::Pools);
    assert_ne!(gunzip(changed.gzip()), gunzip(first.gzip()));
}
