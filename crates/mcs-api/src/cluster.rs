//! Clusters: each mcs-controller holds its cluster's lease.

use crate::{FieldError, Incarnation, Label, Lease, Validate};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `PUT /v1/clusters/{cluster_id}`: register or renew a cluster's lease.
/// `cluster_id` may be repeated in the body; if it is, it must match the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterRegistration {
    /// The cluster, if repeated from the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Label>,
    /// The lease asked for; the registry's default lease when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// The controller process holding the lease.
    pub incarnation: Incarnation,
    /// The controller's own ordering of its intents; else the registrar assigns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub generation: Option<u64>,
}

impl Validate for ClusterRegistration {
    fn validate(&self) -> Result<(), FieldError> {
        crate::requested_lease_fits(self.lease.as_ref())?;
        crate::generation_needs_incarnation(self.generation, Some(&self.incarnation))
    }
}

impl ClusterRegistration {
    /// Checks the body's `cluster_id`, if any, against the path's.
    pub fn check_path(&self, path_cluster: &Label) -> Result<(), FieldError> {
        match &self.cluster_id {
            Some(id) if id != path_cluster => Err(FieldError::new(
                "cluster_id",
                format!("body names cluster {id:?} but the path names {path_cluster:?}"),
            )),
            _ => Ok(()),
        }
    }
}

/// The reply to a cluster registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterRegistered {
    /// The generation now stored.
    pub generation: u64,
    /// The lease granted.
    pub lease: Lease,
    /// Whether this registration continued a lease the registry already
    /// held for the same incarnation (a renewal). `false` when the lease
    /// begins with this write: the first registration, a takeover, or a
    /// registry that lost its records (restarted on empty storage, a table
    /// recreated or restored). A holder that had registered before and
    /// reads `false` writes again what lives on its lease (its exports);
    /// docs/design.md §13. Absent (older registries): `true`.
    #[serde(default = "renewed_when_absent")]
    pub renewed: bool,
}

fn renewed_when_absent() -> bool {
    true
}

/// A cluster with a live lease, as `GET /v1/clusters` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Cluster {
    /// The cluster's id.
    pub cluster_id: Label,
    /// The controller process holding its lease.
    pub incarnation: Incarnation,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    #[test]
    fn cluster_types_round_trip_and_check_the_path() {
        let reg: ClusterRegistration =
            parse(r#"{"incarnation":"9a0e","generation":17,"cluster_id":"east"}"#).unwrap();
        round_trip(&reg);
        assert_eq!(reg.validate(), Ok(()));
        assert_eq!(reg.check_path(&Label::new("east").unwrap()), Ok(()));
        assert_eq!(reg.check_path(&Label::new("west").unwrap()).unwrap_err().field, "cluster_id");
        round_trip(&ClusterRegistered {
            generation: 17,
            lease: Lease::new(30, 10).unwrap(),
            renewed: false,
        });
        round_trip(&Cluster {
            cluster_id: Label::new("east").unwrap(),
            incarnation: Incarnation::new("9a0e").unwrap(),
        });
    }

    #[test]
    fn a_reply_of_an_older_registry_reads_as_a_renewal() {
        let reply: ClusterRegistered =
            parse(r#"{"generation":17,"lease":{"duration_secs":30,"heartbeat_interval_secs":10}}"#)
                .unwrap();
        assert!(reply.renewed, "no news is not a lost registry");
        let fresh: ClusterRegistered = parse(
            r#"{"generation":17,"lease":{"duration_secs":30,"heartbeat_interval_secs":10},"renewed":false}"#,
        )
        .unwrap();
        assert!(!fresh.renewed);
    }

    #[test]
    fn a_cluster_needs_an_incarnation() {
        let (field, message) = parse::<ClusterRegistration>(r#"{"generation":1}"#).unwrap_err();
        assert!(message.contains("incarnation"), "{field}: {message}");
    }
}
