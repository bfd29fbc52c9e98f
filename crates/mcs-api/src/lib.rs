//! The JSON contract of mcs-registry (docs/design.md §7).
//!
//! Every type here is what travels over HTTP, and every request type is
//! validated *while it is parsed*: a [`Label`] that is not a DNS-1123 label, a
//! blank model or a heartbeat interval that is not below its lease never
//! becomes a value. Cross-field rules that a single field cannot check live in
//! [`Validate`]. Replies are strict where it matters: a list envelope without
//! its list does not parse, so an empty body never reads as "nothing there";
//! unknown fields are ignored everywhere so that old readers survive new
//! writers.
//!
//! This crate does no I/O and knows nothing of storage or HTTP servers.

mod cluster;
mod error;
mod event;
mod lease;
mod list;
mod pool;
mod query;
mod router_replica;
mod scalar;
mod service;
pub mod status;

pub use cluster::{Cluster, ClusterRegistered, ClusterRegistration};
pub use error::{ErrorBody, ErrorCode, FieldError, causes, chain, one_line};
pub use event::{Bookmark, WatchEvent};
pub use lease::Lease;
pub use list::{ClusterList, ExportList, ImportList, PoolList, RouterList};
pub use pool::{Capacity, Location, Pool, PoolId, PoolKey, PoolRegistered, PoolRegistration};
pub use query::{ListQuery, MAX_RESOURCE_VERSION_LEN, Watch, Withdrawal};
pub use router_replica::{RouterId, RouterRegistered, RouterRegistration, RouterReplica};
pub use scalar::{HostPort, Incarnation, Label, NonBlank};
pub use service::{
    Condition, ConditionStatus, Endpoint, Export, ExportAccepted, ExportKey, ExportRequest,
    ExportSpec, ImportCluster, IpFamily, Protocol, ServiceImport, ServiceName, ServicePort,
    ServiceType, SessionAffinity, TrafficPolicy, Withdrawn,
};
pub use status::{Finding, Severity, Status};

/// Rules that span several fields of a parsed request.
///
/// Field-level rules are enforced by the field types while parsing; this is
/// for what remains (for example "a generation needs an incarnation"). The
/// error names the offending field by its JSON path.
pub trait Validate {
    /// Checks the cross-field rules of a parsed request.
    fn validate(&self) -> Result<(), FieldError> {
        Ok(())
    }
}

/// A lease a writer asks for must not exceed [`Lease::MAX_DURATION_SECS`].
pub(crate) fn requested_lease_fits(lease: Option<&Lease>) -> Result<(), FieldError> {
    match lease {
        Some(lease) if lease.duration_secs > Lease::MAX_DURATION_SECS => Err(FieldError::new(
            "lease.duration_secs",
            format!("must be at most {} (one day)", Lease::MAX_DURATION_SECS),
        )),
        _ => Ok(()),
    }
}

/// A generation chosen by a client must name the incarnation that ordered it:
/// `(generation, incarnation)` is what breaks ties between writers.
pub(crate) fn generation_needs_incarnation(
    generation: Option<u64>,
    incarnation: Option<&Incarnation>,
) -> Result<(), FieldError> {
    match (generation, incarnation) {
        (Some(0), _) => Err(FieldError::new("generation", "generation must be above zero")),
        (Some(_), None) => {
            Err(FieldError::new("incarnation", "incarnation is required when generation is given"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use serde::de::DeserializeOwned;

    /// Parses `json` the way the server does and returns the failing path and
    /// message, or the value.
    pub fn parse<T: DeserializeOwned>(json: &str) -> Result<T, (String, String)> {
        let de = &mut serde_json::Deserializer::from_str(json);
        serde_path_to_error::deserialize(de)
            .map_err(|e| (e.path().to_string(), e.inner().to_string()))
    }

    /// Serializes and parses back, asserting the value survives.
    pub fn round_trip<T>(value: &T)
    where
        T: serde::Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let json = serde_json::to_string(value).expect("serializes");
        let back: T = serde_json::from_str(&json).expect("parses back");
        assert_eq!(&back, value, "round trip through {json}");
    }
}

#[cfg(test)]
mod rule_tests;
