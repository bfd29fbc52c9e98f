//! Events of a list's event stream (`GET /v1/<list>?watch=events`), one
//! JSON object a line, in the Kubernetes watch conventions: the items as
//! `ADDED`, `MODIFIED` and `DELETED`, each batch of changes closed by a
//! `BOOKMARK` that names the revision and fingerprint it brings the list
//! to.

use crate::ErrorBody;
use serde::{Deserialize, Serialize};

/// One line of an event stream over items of type `T`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WatchEvent<T> {
    /// An item appeared (or, at the start of a stream, is served).
    Added {
        /// The item's key, as people read it (`pool_id`,
        /// `cluster/namespace/name`...): what `MODIFIED` and `DELETED`
        /// name it by.
        key: String,
        /// The item, as the list serves it.
        object: T,
    },
    /// An item's served content changed.
    Modified {
        /// The item's key.
        key: String,
        /// The item as it is now.
        object: T,
    },
    /// An item is no longer served.
    Deleted {
        /// The item's key.
        key: String,
        /// The item as it was last served.
        object: T,
    },
    /// The list's `complete` flipped.
    Completeness {
        /// The list's `complete` from now on.
        complete: bool,
    },
    /// The events before it are a consistent state of the list: the one
    /// with `fingerprint`, at `resource_version`.
    Bookmark(Bookmark),
    /// The stream ends: the watcher fell too far behind (or the registry
    /// stops); list again, or resume from the last bookmark.
    Error {
        /// Why.
        object: ErrorBody,
    },
    /// An event this version does not know: skip it.
    #[serde(other)]
    Unknown,
}

/// Where a stream stands after the events before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bookmark {
    /// The revision to resume from (`resource_version=`); opaque, and
    /// meaningful only to the process that sent it.
    pub resource_version: String,
    /// The list's fingerprint at this revision (the list's `ETag`
    /// without `-incomplete`).
    pub fingerprint: String,
    /// The list's `complete` at this revision.
    pub complete: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn events_read_as_the_registry_writes_them() {
        let added: WatchEvent<serde_json::Value> =
            parse(r#"{"type":"ADDED","key":"k","object":{"a":1}}"#).unwrap();
        assert_eq!(
            added,
            WatchEvent::Added { key: "k".into(), object: serde_json::json!({"a": 1}) }
        );
        let bookmark: WatchEvent<serde_json::Value> = parse(
            r#"{"type":"BOOKMARK","resource_version":"a-1","fingerprint":"f","complete":true}"#,
        )
        .unwrap();
        assert_eq!(
            bookmark,
            WatchEvent::Bookmark(Bookmark {
                resource_version: "a-1".into(),
                fingerprint: "f".into(),
                complete: true
            })
        );
        let later: WatchEvent<serde_json::Value> = parse(r#"{"type":"LATER","x":1}"#).unwrap();
        assert_eq!(later, WatchEvent::Unknown);
        round_trip(&WatchEvent::<u8>::Deleted { key: "k".into(), object: 3 });
        round_trip(&WatchEvent::<u8>::Modified { key: "k".into(), object: 4 });
        round_trip(&WatchEvent::<u8>::Completeness { complete: false });
        round_trip(&WatchEvent::<u8>::Error {
            object: ErrorBody::new(ErrorCode::Expired, "behind"),
        });
    }
}
