//! `GET /v1/status` and the `/status` page (issue 26): what the document
//! reports of clusters, conflicts, sections, the hold, a stale reader and
//! failed polls; the page shows the same, paginated.

use super::faulty::registry_on_faulty;
use super::*;
use mcs_api::status::Status;
use std::sync::atomic::Ordering;

/// `GET uri` on `app`: the status and the body as text.
async fn fetch(app: axum::Router, uri: &str) -> (StatusCode, HeaderMap, String) {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    let response = app.oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The status document of `state`, from the API port, decoded as
/// mcs-admin decodes it.
async fn status(state: &Arc<AppState>) -> Status {
    let (code, _, body) = fetch(router(state.clone()), "/v1/status").await;
    assert_eq!(code, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The `/status` page of `state` at `uri`, from the admin port.
async fn page(state: &Arc<AppState>, uri: &str) -> String {
    let admin = admin_router(state.clone(), crate::metrics::install());
    let (code, headers, body) = fetch(admin, uri).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    body
}

/// Clusters `east` and `west`, each exporting `llm/web` on another port
/// (a conflict; east's export is older), and a pool in `east`.
async fn conflicted(h: &Harness) {
    for (cluster, at, port) in
        [("east", "2026-12-01T00:00:00Z", 80), ("west", "2026-12-02T00:00:00Z", 8080)]
    {
        let lease = json!({"incarnation": format!("{cluster}-1")});
        let reply = h.send(Method::PUT, &format!("/v1/clusters/{cluster}"), lease).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let body = with(export(at, port), "incarnation", json!(format!("{cluster}-1")));
        let uri = format!("/v1/clusters/{cluster}/exports/llm/web");
        assert_eq!(h.send(Method::PUT, &uri, body).await.status, StatusCode::OK);
    }
    let in_east = json!({"cluster_id": "east", "namespace": "llm", "dgd_name": "a"});
    let reply = h.send(Method::POST, "/v1/pools", with(pool("a"), "pool_key", in_east)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn the_document_reports_clusters_conflicts_and_each_sections_fingerprint() {
    let h = harness().await;
    conflicted(&h).await;
    let state = &h.registry.state;
    let doc = status(state).await;

    assert!(doc.process.ready);
    assert_eq!((doc.process.storage.as_str(), doc.process.writer_id.as_str()), ("memory", "reg-a"));
    assert_eq!(doc.process.now_ms, T0);
    assert!(doc.view.complete && doc.view.incomplete_because.is_empty());
    for section in &doc.view.sections {
        let list = h.get(&format!("/v1/{}", section.section)).await;
        assert_eq!(section.fingerprint, fingerprint(&list), "{}", section.section);
        let items = list.body[&section.section].as_array().unwrap().len() as u64;
        assert_eq!(section.items, items, "{}", section.section);
    }
    assert_eq!(doc.view.sections.len(), 5);

    let clusters: Vec<(&str, u64, u64, u64)> = doc
        .clusters
        .iter()
        .map(|c| (c.cluster_id.as_str(), c.exports, c.conflicts, c.pools))
        .collect();
    assert_eq!(clusters, [("east", 1, 1, 1), ("west", 1, 1, 0)]);
    let east = &doc.clusters[0];
    assert_eq!(east.incarnation, "east-1");
    assert_eq!(east.renewed_ms_ago, Some(0));
    assert_eq!(east.expires_in_ms, Some(30_000 + SKEW), "a 30 s lease plus the skew allowance");
    assert!(!east.at_risk);

    assert_eq!(doc.conflicts.len(), 1);
    let conflict = &doc.conflicts[0];
    assert_eq!((conflict.namespace.as_str(), conflict.name.as_str()), ("llm", "web"));
    assert_eq!(conflict.clusters.iter().map(|c| c.as_str()).collect::<Vec<_>>(), ["east", "west"]);
    assert_eq!(conflict.reason, "PortConflict");

    assert_eq!(doc.pools.count, 1);
    let groups: Vec<(&str, u64, u64)> = doc
        .pools
        .per_cluster
        .iter()
        .map(|g| (g.cluster_id.as_str(), g.pools, g.expiring_soon))
        .collect();
    assert_eq!(groups, [("east", 1, 0)]);
    assert!(!doc.hold.active);
    assert_eq!(doc.findings.len(), 1, "{:#?}", doc.findings);
    assert_eq!(doc.findings[0].code, "conflict");
    assert_eq!(doc.findings[0].runbook, "docs/operations.md#runbook-exports-not-ready");
    assert!(!doc.is_critical());
    assert_eq!(doc.findings, mcs_api::status::findings(&doc), "derived from the facts it shows");

    let admin = admin_router(state.clone(), crate::metrics::install());
    let (code, _, body) = fetch(admin, "/v1/status").await;
    assert_eq!(code, StatusCode::OK);
    let from_admin: Status = serde_json::from_str(&body).unwrap();
    assert_eq!(from_admin.clusters, doc.clusters, "the admin port serves the same document");
}

#[tokio::test]
async fn leases_past_their_renewal_are_expiring_soon_before_they_end() {
    let h = harness().await;
    conflicted(&h).await;
    // At the heartbeat (10 s) plus the skew allowance (1 s) and one poll
    // (2 s), not yet; a millisecond later, at risk.
    h.clock.advance(13_000);
    let doc = status(&h.registry.state).await;
    assert_eq!(doc.pools.expiring_soon, 0);
    assert!(doc.clusters.iter().all(|c| !c.at_risk), "{:?}", doc.clusters);
    assert_eq!(doc.findings.len(), 1, "the conflict alone: {:?}", doc.findings);
    h.clock.advance(1);
    let doc = status(&h.registry.state).await;
    assert_eq!(doc.pools.expiring_soon, 1);
    assert_eq!(doc.pools.per_cluster[0].expiring_soon, 1, "counted in its cluster's group");
    assert!(doc.clusters.iter().all(|c| c.at_risk), "{:?}", doc.clusters);
    assert_eq!(doc.clusters[0].renewed_ms_ago, Some(13_001));
    assert_eq!(doc.clusters[0].expires_in_ms, Some(30_000 + SKEW - 13_001));
    let codes: Vec<&str> = doc.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(codes, ["leases_at_risk", "conflict"]);
}

#[tokio::test]
async fn a_hold_is_a_critical_finding_with_the_leases_it_holds() {
    let mut h = harness().await;
    for name in ["a", "b", "c", "d", "e", "f"] {
        let in_own =
            json!({"cluster_id": format!("c-{name}"), "namespace": "llm", "dgd_name": name});
        let body = with(pool(name), "pool_key", in_own);
        assert_eq!(h.send(Method::POST, "/v1/pools", body).await.status, StatusCode::OK);
    }
    h.clock.advance(30_000 + SKEW);
    h.registry.reader.poll_once().await;
    let doc = status(&h.registry.state).await;
    assert!(doc.hold.active);
    assert_eq!(doc.hold.held_leases, 6);
    assert_eq!(doc.hold.since_ms_ago, Some(0));
    assert_eq!(doc.hold.max_hold_ms, 30_000);
    assert_eq!(doc.view.incomplete_because, [mcs_api::status::Incomplete::Hold]);
    assert_eq!(doc.findings[0].code, "expiry_hold");
    assert!(doc.is_critical());
    assert_eq!(doc.pools.count, 6, "held, so still served");
    let html = page(&h.registry.state, "/status").await;
    assert!(html.contains("<strong>Holding expiries</strong> of 6 leases"), "{html}");
    assert!(html.contains(r#"data-code="expiry_hold""#), "{html}");

    h.clock.advance(30_000);
    let released = status(&h.registry.state).await;
    assert!(!released.hold.active && released.hold.since_ms_ago.is_none());
    assert_eq!((released.pools.count, released.hold.held_leases), (0, 0));
}

#[tokio::test]
async fn a_stale_reader_is_a_critical_finding() {
    let h = harness().await;
    h.clock.advance(30_000);
    assert!(status(&h.registry.state).await.findings.is_empty(), "stale only past 30 s");
    h.clock.advance(1);
    let doc = status(&h.registry.state).await;
    assert!(!doc.view.complete);
    assert_eq!(doc.view.incomplete_because, [mcs_api::status::Incomplete::Stale]);
    assert_eq!(doc.reader.last_poll_age_ms, Some(30_001));
    assert_eq!(doc.findings.len(), 1);
    assert_eq!(doc.findings[0].code, "stale");
    assert!(doc.is_critical());
}

#[tokio::test]
async fn failed_polls_are_counted_by_kind_of_storage_error() {
    let (mut registry, clock, store) = registry_on_faulty(&[]);
    store.scans_fail.store(true, Ordering::SeqCst);
    registry.reader.poll_once().await;
    let doc = status(&registry.state).await;
    assert!(!doc.process.ready);
    assert_eq!(doc.reader.failed_polls_in_a_row, 1);
    let errors: Vec<(&str, u64)> =
        doc.reader.storage_errors.iter().map(|e| (e.kind.as_str(), e.count)).collect();
    assert_eq!(errors, [("unavailable", 1)]);
    assert_eq!(doc.view.incomplete_because, [mcs_api::status::Incomplete::NotReady]);
    assert_eq!(doc.findings[0].code, "not_ready");

    store.scans_fail.store(false, Ordering::SeqCst);
    // Past the backoff of the failed full read (twice the refresh interval).
    clock.advance(4_000);
    registry.reader.poll_once().await;
    clock.advance(500);
    let doc = status(&registry.state).await;
    assert!(doc.process.ready);
    assert_eq!(doc.reader.failed_polls_in_a_row, 0);
    assert_eq!(doc.reader.last_poll, Some(mcs_api::status::PollKind::Full));
    assert_eq!(doc.reader.last_full_read_age_ms, Some(500));
    assert_eq!(doc.reader.storage_errors.len(), 1, "errors since startup stay counted");
    assert!(doc.findings.is_empty(), "{:?}", doc.findings);
}

#[tokio::test]
async fn the_page_shows_the_documents_clusters_conflicts_and_findings() {
    let h = harness().await;
    conflicted(&h).await;
    let html = page(&h.registry.state, "/status").await;
    for expected in [
        "<!DOCTYPE html>",
        r#"<html lang="en">"#,
        r#"<tr data-cluster="east">"#,
        r#"<tr data-cluster="west">"#,
        r#"<tr data-service="llm/web">"#,
        "PortConflict",
        r#"<li class="finding warning" data-code="conflict">"#,
        "docs/operations.md#runbook-exports-not-ready",
        r#"<th scope="col">cluster</th>"#,
        "Lists are complete.",
        "No hold.",
    ] {
        assert!(html.contains(expected), "{expected} missing from {html}");
    }
    assert_eq!(html.matches("<h1>").count(), 1);
}

/// 120 clusters and 1,000 pools (ten in each of the first hundred
/// clusters): fifty clusters a page, each row counting its pools.
#[tokio::test]
async fn the_page_lists_fifty_clusters_a_page_with_their_pools_counted() {
    let h = harness().await;
    for n in 0..120 {
        let reply = h
            .send(Method::PUT, &format!("/v1/clusters/c{n:03}"), json!({"incarnation": "i"}))
            .await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    for n in 0..1_000 {
        let cluster = format!("c{:03}", n / 10);
        let key = json!({"cluster_id": cluster, "namespace": "llm", "dgd_name": format!("p{n}")});
        let reply = h.send(Method::POST, "/v1/pools", with(pool("p"), "pool_key", key)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let rows = |html: &str| html.matches("<tr data-cluster=").count();
    let first = page(&h.registry.state, "/status").await;
    assert_eq!(rows(&first), 50);
    assert!(first.contains(r#"data-cluster="c000""#) && !first.contains(r#"data-cluster="c050""#));
    assert!(first.contains(r#"<a href="?page=3">page 3</a>"#), "{first}");
    assert!(first.contains("Clusters (120)"));
    assert!(first.contains("Pools: 1000 (0 expiring soon)"), "{first}");
    let c000 = &first[first.find(r#"data-cluster="c000""#).unwrap()..];
    let row = &c000[..c000.find("</tr>").unwrap()];
    assert!(row.ends_with("<td>10</td>"), "ten pools counted in the row: {row}");
    assert_eq!(first.matches("<tr data-pool-cluster=").count(), 50, "pools by cluster, paged");
    assert!(first.contains("Pools by cluster (1000 pools, 100 clusters)"), "{first}");
    assert!(first.len() < 64 * 1024, "a page of {} bytes", first.len());
    let last = page(&h.registry.state, "/status?page=3").await;
    assert_eq!(rows(&last), 20);
    assert_eq!(last.matches("<tr data-pool-cluster=").count(), 50, "the last of two pages");
    assert!(last.contains(r#"data-cluster="c119""#));
    assert!(last.contains(r#"<strong aria-current="page">page 3</strong>"#));
    let beyond = page(&h.registry.state, "/status?page=99").await;
    assert_eq!(rows(&beyond), 20, "past the end: the last page");
    let unreadable = page(&h.registry.state, "/status?page=x").await;
    assert!(unreadable.contains(r#"data-cluster="c000""#), "an unreadable page: the first");
}

#[tokio::test]
async fn values_on_the_page_are_escaped() {
    let h = harness().await;
    conflicted(&h).await;
    let mut doc = status(&h.registry.state).await;
    doc.conflicts[0].message = "<script>alert(1)</script>".into();
    let html = crate::http::status::page::render(&doc, 1, 0).into_string();
    assert!(!html.contains("<script>alert(1)</script>"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{html}");
}

#[tokio::test]
async fn the_page_waits_for_a_change_of_the_view_past_its_epoch() {
    let h = harness().await;
    let epoch = |html: &str| -> u64 {
        let at = html.find("data-epoch=\"").unwrap() + "data-epoch=\"".len();
        html[at..].split('"').next().unwrap().parse().unwrap()
    };
    let shown = page(&h.registry.state, "/status").await;
    let now = epoch(&shown);
    let stale = page(&h.registry.state, &format!("/status?after={}", now + 7)).await;
    assert_eq!(epoch(&stale), now, "an epoch it does not show: answered at once");

    let state = h.registry.state.clone();
    let waiting = tokio::spawn(async move { page(&state, &format!("/status?after={now}")).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "nothing changed: it waits");
    let reply = h.send(Method::PUT, "/v1/clusters/east", json!({"incarnation": "east-1"})).await;
    assert_eq!(reply.status, StatusCode::OK);
    let changed = tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
    assert!(epoch(&changed) > now);
    assert!(changed.contains(r#"<tr data-cluster="east">"#), "the page of the new view");
}
