//! The cluster's id: `--cluster-id`, or the KEP-2149 ClusterProperty
//! `cluster.clusterset.k8s.io` (`about.k8s.io/v1alpha1`, cluster-scoped,
//! `spec.value`). Both given and different: the controller refuses to start.
//! See docs/design.md §13.

use kube::api::{Api, ApiResource, DynamicObject};
use mcs_api::Label;

/// The ClusterProperty holding the cluster's id in the clusterset.
pub const CLUSTER_ID_PROPERTY: &str = "cluster.clusterset.k8s.io";

/// Why no cluster id could be settled on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    /// Neither the flag nor the ClusterProperty names the cluster.
    #[error(
        "no cluster id: set --cluster-id or the ClusterProperty {CLUSTER_ID_PROPERTY} (about.k8s.io)"
    )]
    Missing,
    /// The flag and the ClusterProperty disagree.
    #[error(
        "--cluster-id {flag:?} differs from the ClusterProperty {CLUSTER_ID_PROPERTY} value {property:?}"
    )]
    Mismatch {
        /// The `--cluster-id` flag.
        flag: String,
        /// The ClusterProperty's `spec.value`.
        property: String,
    },
    /// The id is not a DNS-1123 label of at most 63 characters.
    #[error("cluster id {value:?} (from {source_name}) is not a DNS label: {reason}")]
    Invalid {
        /// The value given.
        value: String,
        /// Where it came from: `--cluster-id` or the ClusterProperty.
        source_name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Settles the cluster id from the `--cluster-id` flag and the
/// ClusterProperty's value (either may be absent).
pub fn resolve_cluster_id(
    flag: Option<&str>,
    property: Option<&str>,
) -> Result<Label, IdentityError> {
    let (value, source_name) = match (flag, property) {
        (None, None) => return Err(IdentityError::Missing),
        (Some(f), Some(p)) if f != p => {
            return Err(IdentityError::Mismatch { flag: f.into(), property: p.into() });
        }
        (_, Some(p)) => (p, "the ClusterProperty"),
        (Some(f), None) => (f, "--cluster-id"),
    };
    Label::new(value).map_err(|reason| IdentityError::Invalid {
        value: value.into(),
        source_name,
        reason,
    })
}

/// The `about.k8s.io/v1alpha1` ClusterProperty resource.
fn cluster_property_resource() -> ApiResource {
    ApiResource {
        group: "about.k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "about.k8s.io/v1alpha1".into(),
        kind: "ClusterProperty".into(),
        plural: "clusterproperties".into(),
    }
}

/// Reads `spec.value` of the ClusterProperty `cluster.clusterset.k8s.io`;
/// `None` when its CRD is not installed or the object does not exist.
pub async fn read_cluster_property(kube: kube::Client) -> Result<Option<String>, kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(kube, &cluster_property_resource());
    let object = match api.get(CLUSTER_ID_PROPERTY).await {
        Ok(object) => Some(object),
        Err(e) if is_absent(&e) => None,
        Err(e) => return Err(e),
    };
    Ok(object.and_then(|o| o.data.get("spec")?.get("value")?.as_str().map(str::to_owned)))
}

/// A 404: no such object, or no such resource at all (no CRD: the API
/// server then answers a plain-text `404 page not found`, not a `Status`
/// with reason `NotFound`).
fn is_absent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_or_the_property_names_the_cluster_and_both_must_agree() {
        assert_eq!(resolve_cluster_id(Some("east"), None).unwrap().as_str(), "east");
        assert_eq!(resolve_cluster_id(None, Some("west")).unwrap().as_str(), "west");
        assert_eq!(resolve_cluster_id(Some("east"), Some("east")).unwrap().as_str(), "east");
        assert_eq!(resolve_cluster_id(None, None), Err(IdentityError::Missing));
        assert_eq!(
            resolve_cluster_id(Some("east"), Some("west")),
            Err(IdentityError::Mismatch { flag: "east".into(), property: "west".into() })
        );
    }

    #[test]
    fn a_missing_crd_reads_as_no_property() {
        let status = |code, reason: &str| {
            let mut s = kube::core::Status::failure("m", reason);
            s.code = code;
            kube::Error::Api(Box::new(s))
        };
        // What kube makes of the API server's plain-text 404 without the CRD.
        assert!(is_absent(&status(404, "Failed to parse error data")));
        assert!(is_absent(&status(404, "NotFound")));
        assert!(!is_absent(&status(403, "Forbidden")));
    }

    #[test]
    fn the_id_must_be_a_dns_label_of_at_most_63_characters() {
        let long = "a".repeat(64);
        for (flag, property, source) in [
            (Some(long.as_str()), None, "--cluster-id"),
            (None, Some("East_1"), "the ClusterProperty"),
            (Some("a.b"), None, "--cluster-id"),
            (None, Some(""), "the ClusterProperty"),
        ] {
            let err = resolve_cluster_id(flag, property).unwrap_err();
            assert!(
                matches!(&err, IdentityError::Invalid { source_name, .. } if *source_name == source),
                "{err:?}"
            );
        }
        assert!(resolve_cluster_id(Some(&"a".repeat(63)), None).is_ok());
    }
}
