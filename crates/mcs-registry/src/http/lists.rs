//! `GET` of the lists: strong `ETag` = fingerprint (suffixed `-incomplete`
//! while the list is incomplete, and `-gzip` for the gzip-compressed body
//! that `Accept-Encoding: gzip` gets, compressed once per change),
//! `If-None-Match` → `304`, and
//! `?watch=true&timeout_secs=N` long-polls until the `ETag` differs; at most
//! `--max-watches` wait at once, one more is answered `503`;
//! `?watch=events` streams the changes instead (`super::events`).

use super::AppState;
use super::extract::ValidQuery;
use super::watching::{GZIP_TAG, WatchSlot, if_none_match};
use crate::live::Rendered;
use crate::metrics as m;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcs_api::{ListQuery, Watch};
use mcs_core::SectionKind;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

/// Default long-poll length when `timeout_secs` is absent.
const DEFAULT_WATCH: Duration = Duration::from_secs(30);

pub(super) async fn pools(
    s: State<Arc<AppState>>,
    h: HeaderMap,
    q: ValidQuery<ListQuery>,
) -> Response {
    list(s, h, q, SectionKind::Pools).await
}

pub(super) async fn routers(
    s: State<Arc<AppState>>,
    h: HeaderMap,
    q: ValidQuery<ListQuery>,
) -> Response {
    list(s, h, q, SectionKind::Routers).await
}

pub(super) async fn clusters(
    s: State<Arc<AppState>>,
    h: HeaderMap,
    q: ValidQuery<ListQuery>,
) -> Response {
    list(s, h, q, SectionKind::Clusters).await
}

pub(super) async fn exports(
    s: State<Arc<AppState>>,
    h: HeaderMap,
    q: ValidQuery<ListQuery>,
) -> Response {
    list(s, h, q, SectionKind::Exports).await
}

pub(super) async fn imports(
    s: State<Arc<AppState>>,
    h: HeaderMap,
    q: ValidQuery<ListQuery>,
) -> Response {
    list(s, h, q, SectionKind::Imports).await
}

async fn list(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    ValidQuery(query): ValidQuery<ListQuery>,
    section: SectionKind,
) -> Response {
    if query.watch == Watch::Events {
        let mut response = super::events::stream(&state, &headers, &query, section);
        response.extensions_mut().insert(super::Watched);
        return response;
    }
    let known = if_none_match(&headers);
    let gzip = accepts_gzip(&headers);
    // Subscribe before the first look, so a change between the look and the
    // wait is not missed.
    let mut changes = state.view.subscribe();
    let mut shutdown = state.shutdown.clone();
    let timeout =
        query.timeout_secs.map_or(DEFAULT_WATCH, Duration::from_secs).min(state.max_watch);
    let poll = query.watch == Watch::Poll;
    let mut response =
        watch(&state, &known, &mut changes, &mut shutdown, timeout, poll, section, gzip).await;
    if poll {
        response.extensions_mut().insert(super::Watched);
    }
    response
}

/// Answers the list, waiting (when `watch`) until its `ETag` is not one of
/// `known`, `timeout` passes or the process stops; gzip-compressed when
/// `gzip`.
#[allow(clippy::too_many_arguments)]
async fn watch(
    state: &AppState,
    known: &[String],
    changes: &mut tokio::sync::watch::Receiver<u64>,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    timeout: Duration,
    watch: bool,
    section: SectionKind,
    gzip: bool,
) -> Response {
    // `sleep` saturates a deadline past the clock's range (`Instant + timeout`
    // would panic), whatever `max_watch` says.
    let mut deadline = pin!(tokio::time::sleep(timeout));
    let mut slot = None;
    loop {
        let rendered = state.view.render(section);
        if !known.iter().any(|etag| etag == "*" || *etag == rendered.etag) {
            return ok(&rendered, gzip);
        }
        if !watch {
            return not_modified(&rendered, gzip);
        }
        if slot.is_none() {
            match WatchSlot::take(state) {
                Some(taken) => slot = Some(taken),
                None => {
                    metrics::counter!(m::HTTP_REFUSED, "reason" => "watches").increment(1);
                    return super::unavailable("too many watches are waiting; retry later");
                }
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return not_modified(&rendered, gzip) },
            _ = &mut deadline => return not_modified(&rendered, gzip),
            _ = crate::shutdown::stopped(shutdown) => return not_modified(&rendered, gzip),
        }
    }
}

/// Whether `Accept-Encoding` accepts gzip (`gzip`, `x-gzip` or `*`, with
/// a quality above zero).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            !refused && ["gzip", "x-gzip", "*"].iter().any(|c| name.eq_ignore_ascii_case(c))
        })
}

fn etag(rendered: &Rendered, gzip: bool) -> HeaderValue {
    let suffix = if gzip { GZIP_TAG } else { "" };
    HeaderValue::from_str(&format!("\"{}{suffix}\"", rendered.etag))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

fn ok(rendered: &Rendered, gzip: bool) -> Response {
    let mut response = (
        StatusCode::OK,
        [
            (header::ETAG, etag(rendered, gzip)),
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ],
        if gzip { rendered.gzip().clone() } else { rendered.body.clone() },
    )
        .into_response();
    if gzip {
        response.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

fn not_modified(rendered: &Rendered, gzip: bool) -> Response {
    (
        StatusCode::NOT_MODIFIED,
        [
            (header::ETAG, etag(rendered, gzip)),
            (header::VARY, HeaderValue::from_static("accept-encoding")),
        ],
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_encoding_parsing() {
        let accepts = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            accepts_gzip(&headers)
        };
        for yes in ["gzip", "br, GZIP;q=0.5", "x-gzip", "*", "deflate, gzip;q=1.0"] {
            assert!(accepts(yes), "{yes}");
        }
        for no in ["identity", "br", "gzip;q=0", "gzip; q=0.0", "gzipped"] {
            assert!(!accepts(no), "{no}");
        }
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
