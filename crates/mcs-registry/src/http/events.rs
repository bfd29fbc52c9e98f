//! `GET` of a list with `?watch=events`: the list's changes as a stream of
//! newline-delimited events (`crate::events` encodes them, once per change
//! for every watcher). The stream ends at `timeout_secs` (the server's
//! `--max-watch-secs` by default and at most), when the process stops, or
//! with an `ERROR` event when the watcher falls too far behind; it holds a
//! slot of `--max-watches` while open.

use super::AppState;
use super::error::ApiError;
use super::watching::{WatchSlot, if_none_match};
use crate::events::{Resume, Subscription, lagged_event};
use crate::metrics as m;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use mcs_api::ListQuery;
use mcs_core::SectionKind;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// The media type of an event stream.
pub(super) const NDJSON: &str = "application/x-ndjson";

/// The stream of `section`'s changes, from where `query` and `headers`
/// say (docs/api.md, Event watches).
pub(super) fn stream(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    query: &ListQuery,
    section: SectionKind,
) -> Response {
    let Some(slot) = WatchSlot::take(state) else {
        metrics::counter!(m::HTTP_REFUSED, "reason" => "watches").increment(1);
        return super::unavailable("too many watches are waiting; retry later");
    };
    // A client's `ETag` is the fingerprint, suffixed while incomplete:
    // either way it holds the content of that fingerprint.
    let fingerprints: Vec<String> = if_none_match(headers)
        .into_iter()
        .map(|tag| tag.strip_suffix("-incomplete").map(str::to_owned).unwrap_or(tag))
        .collect();
    let resume =
        Resume { resource_version: query.resource_version.as_deref(), fingerprints: &fingerprints };
    let Subscription { first, batches } =
        match state.events.subscribe(&state.view, section, &resume) {
            Ok(subscription) => subscription,
            Err(_) => {
                return ApiError::Expired {
                    field: "resource_version".into(),
                    message:
                        "resource_version is not in this registry's history (older than it, or \
                          another process's): watch without it to list again"
                            .into(),
                }
                .into_response();
            }
        };
    let timeout =
        query.timeout_secs.map_or(state.max_watch, Duration::from_secs).min(state.max_watch);
    let open = Open {
        first: Some(first),
        batches,
        // `sleep` saturates a deadline past the clock's range.
        deadline: Box::pin(tokio::time::sleep(timeout)),
        shutdown: state.shutdown.clone(),
        ended: false,
        _slot: slot,
    };
    let body = Body::from_stream(futures::stream::unfold(open, Open::next));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(NDJSON)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

/// An open stream.
struct Open {
    first: Option<Bytes>,
    batches: tokio::sync::broadcast::Receiver<Arc<crate::events::Batch>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    ended: bool,
    _slot: WatchSlot,
}

impl Open {
    /// The next chunk to send, or `None` when the stream ends.
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        if let Some(first) = self.first.take() {
            return Some((Ok(first), self));
        }
        if self.ended {
            return None;
        }
        let chunk = tokio::select! {
            batch = self.batches.recv() => match batch {
                Ok(batch) => batch.bytes.clone(),
                Err(RecvError::Lagged(_)) => {
                    self.ended = true;
                    lagged_event()
                }
                Err(RecvError::Closed) => return None,
            },
            _ = &mut self.deadline => return None,
            _ = crate::shutdown::stopped(&mut self.shutdown) => return None,
        };
        Some((Ok(chunk), self))
    }
}
