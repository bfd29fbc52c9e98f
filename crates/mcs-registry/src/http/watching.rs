//! What long-polls (`super::lists`) and event streams (`super::events`)
//! share: the slots of `--max-watches` and the client's validators.

use super::AppState;
use crate::metrics as m;
use axum::http::{HeaderMap, header};
use tokio::sync::OwnedSemaphorePermit;

/// The suffix of the gzip body's entity tag.
pub(super) const GZIP_TAG: &str = "-gzip";

/// The entity tags of `If-None-Match`, unquoted (weak ones compared by
/// their opaque part, as RFC 9110 prescribes for this header) and without
/// [`GZIP_TAG`]: a validator of the compressed body validates the same
/// content, and the `304` carries the tag of the encoding asked for.
pub(super) fn if_none_match(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| {
            let tag = tag.trim();
            let tag = tag.strip_prefix("W/").unwrap_or(tag).trim_matches('"');
            tag.strip_suffix(GZIP_TAG).unwrap_or(tag).to_owned()
        })
        .filter(|tag| !tag.is_empty())
        .collect()
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
    use axum::http::HeaderValue;

    #[test]
    fn if_none_match_parsing() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"a\", W/\"b\" ,*, \"c-incomplete-gzip\""),
        );
        assert_eq!(if_none_match(&headers), vec!["a", "b", "*", "c-incomplete"]);
        assert!(if_none_match(&HeaderMap::new()).is_empty());
    }
}
