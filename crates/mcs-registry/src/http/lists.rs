//! `GET` of the lists: strong `ETag` = fingerprint (suffixed `-incomplete`
//! while the list is incomplete), `If-None-Match` → `304`, and
//! `?watch=true&timeout_secs=N` long-polls until the `ETag` differs; at most
//! `--max-watches` wait at once, one more is answered `503`;
//! `?watch=events` streams the changes instead (`super::events`).

use super::AppState;
use super::extract::ValidQuery;
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
use tokio::sync::OwnedSemaphorePermit;

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
    // Subscribe before the first look, so a change between the look and the
    // wait is not missed.
    let mut changes = state.view.subscribe();
    let mut shutdown = state.shutdown.clone();
    let timeout =
        query.timeout_secs.map_or(DEFAULT_WATCH, Duration::from_secs).min(state.max_watch);
    let poll = query.watch == Watch::Poll;
    let mut response =
        watch(&state, &known, &mut changes, &mut shutdown, timeout, poll, section).await;
    if poll {
        response.extensions_mut().insert(super::Watched);
    }
    response
}

/// Answers the list, waiting (when `watch`) until its `ETag` is not one of
/// `known`, `timeout` passes or the process stops.
async fn watch(
    state: &AppState,
    known: &[String],
    changes: &mut tokio::sync::watch::Receiver<u64>,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
    timeout: Duration,
    watch: bool,
    section: SectionKind,
) -> Response {
    // `sleep` saturates a deadline past the clock's range (`Instant + timeout`
    // would panic), whatever `max_watch` says.
    let mut deadline = pin!(tokio::time::sleep(timeout));
    let mut slot = None;
    loop {
        let rendered = state.view.render(section);
        if !known.iter().any(|etag| etag == "*" || *etag == rendered.etag) {
            return ok(&rendered);
        }
        if !watch {
            return not_modified(&rendered);
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
            changed = changes.changed() => if changed.is_err() { return not_modified(&rendered) },
            _ = &mut deadline => return not_modified(&rendered),
            _ = crate::server::stopped(shutdown) => return not_modified(&rendered),
        }
    }
}

/// The entity tags of `If-None-Match`, unquoted (weak ones compared by
/// their opaque part, as RFC 9110 prescribes for this header).
pub(super) fn if_none_match(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| {
            let tag = tag.trim();
            let tag = tag.strip_prefix("W/").unwrap_or(tag);
            tag.trim_matches('"').to_owned()
        })
        .filter(|tag| !tag.is_empty())
        .collect()
}

fn etag(rendered: &Rendered) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{}\"", rendered.etag))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

fn ok(rendered: &Rendered) -> Response {
    (
        StatusCode::OK,
        [
            (header::ETAG, etag(rendered)),
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        rendered.body.clone(),
    )
        .into_response()
}

fn not_modified(rendered: &Rendered) -> Response {
    (StatusCode::NOT_MODIFIED, [(header::ETAG, etag(rendered))]).into_response()
}

/// A slot of `--max-watches`, held (and counted in `mcs_http_watchers`)
/// while a long-poll waits or an event stream is open.
pub(super) struct WatchSlot {
    _permit: OwnedSemaphorePermit,
}

impl WatchSlot {
    /// A slot, or `None` when every slot is taken.
    pub(super) fn take(state: &AppState) -> Option<Self> {
        let permit = state.watch_slots.clone().try_acquire_owned().ok()?;
        metrics::gauge!(m::WATCHERS).increment(1.0);
        Some(WatchSlot { _permit: permit })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        metrics::gauge!(m::WATCHERS).decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_parsing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"a\", W/\"b\" ,*"));
        assert_eq!(if_none_match(&headers), vec!["a", "b", "*"]);
        assert!(if_none_match(&HeaderMap::new()).is_empty());
    }
}
