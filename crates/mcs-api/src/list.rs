//! List envelopes: `{<items>, complete, fingerprint}`.
//!
//! The list field has no default, so a reply without it does not parse: an
//! empty or truncated body never reads as "nothing there".

use crate::{Cluster, Export, Pool, RouterReplica, ServiceImport};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

macro_rules! list_envelope {
    ($(#[$doc:meta])* $name:ident, $field:ident: $item:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        pub struct $name {
            /// The live items, sorted by key.
            pub $field: Vec<$item>,
            /// False until the registry's first full read, while its view is
            /// stale, and while expiries are held back.
            pub complete: bool,
            /// Hash of the served content; equal content, equal fingerprint in
            /// every region. Also the list's `ETag`.
            pub fingerprint: String,
        }
    };
}

list_envelope!(
    /// `GET /v1/pools`.
    PoolList, pools: Pool);
list_envelope!(
    /// `GET /v1/routers`.
    RouterList, routers: RouterReplica);
list_envelope!(
    /// `GET /v1/clusters`.
    ClusterList, clusters: Cluster);
list_envelope!(
    /// `GET /v1/exports`.
    ExportList, exports: Export);
list_envelope!(
    /// `GET /v1/imports`.
    ImportList, imports: ServiceImport);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn a_reply_without_its_list_does_not_parse() {
        assert!(parse::<PoolList>(r#"{"complete":true,"fingerprint":"f"}"#).is_err());
        assert!(parse::<RouterList>(r#"{"complete":true,"fingerprint":"f"}"#).is_err());
        assert!(parse::<ClusterList>(r#"{"complete":true,"fingerprint":"f"}"#).is_err());
        assert!(parse::<ExportList>(r#"{"complete":true,"fingerprint":"f"}"#).is_err());
        assert!(parse::<ImportList>(r#"{"complete":true,"fingerprint":"f"}"#).is_err());
        assert!(parse::<PoolList>("").is_err());
    }

    #[test]
    fn lists_round_trip_and_ignore_unknown_fields() {
        let list: PoolList =
            parse(r#"{"pools":[],"complete":false,"fingerprint":"abc","region":"x"}"#).unwrap();
        assert!(!list.complete);
        round_trip(&list);
        round_trip(&RouterList { routers: vec![], complete: true, fingerprint: "f".into() });
        round_trip(&ClusterList { clusters: vec![], complete: true, fingerprint: "f".into() });
        round_trip(&ExportList { exports: vec![], complete: true, fingerprint: "f".into() });
        round_trip(&ImportList { imports: vec![], complete: true, fingerprint: "f".into() });
    }
}
