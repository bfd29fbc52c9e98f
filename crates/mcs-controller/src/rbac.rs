//! The controller's ClusterRole: exactly the verbs its code uses, per
//! resource. `mcs-controller rbac` prints it; the integration tests run the
//! controller under it (a ServiceAccount bound to nothing else) and check
//! the API server's audit log: nothing the controller asked was denied, and
//! every verb granted here was used.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

/// The ClusterRole's default name.
pub const NAME: &str = "mcs-controller";

/// `(API group, resource, verbs)` the controller calls.
pub const RULES: &[(&str, &str, &[&str])] = &[
    // Exports: read, the finalizer (patch), auto-export's create and delete.
    (
        "multicluster.x-k8s.io",
        "serviceexports",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    ("multicluster.x-k8s.io", "serviceexports/status", &["patch"]),
    // Imports: server-side apply (patch, and create when the apply creates
    // the object) of spec and status, deletion of what is gone.
    ("multicluster.x-k8s.io", "serviceimports", &["list", "watch", "create", "patch", "delete"]),
    ("multicluster.x-k8s.io", "serviceimports/status", &["patch"]),
    // Services: read for exports (get: the one of a ServiceExport); derived
    // Services applied and deleted.
    ("", "services", &["get", "list", "watch", "create", "patch", "delete"]),
    // EndpointSlices: read for exports; imported slices applied and deleted.
    ("discovery.k8s.io", "endpointslices", &["list", "watch", "create", "patch", "delete"]),
    // The importer creates nothing in a namespace that does not exist here.
    ("", "namespaces", &["list", "watch"]),
    // The cluster's id (KEP-2149).
    ("about.k8s.io", "clusterproperties", &["get"]),
    // Leader election.
    ("coordination.k8s.io", "leases", &["get", "create", "update"]),
];

/// The ClusterRole named `name` granting [`RULES`].
pub fn cluster_role(name: &str) -> ClusterRole {
    cluster_role_of(name, RULES)
}

/// The ClusterRole named `name` granting `rules`, each `(API group,
/// resource, verbs)`: a rule per resource, in the order given (also the
/// registry's discovery role, `mcs_registry::discovery::RBAC_RULES`).
pub fn cluster_role_of(name: &str, rules: &[(&str, &str, &[&str])]) -> ClusterRole {
    let mut role = ClusterRole::default();
    role.metadata.name = Some(name.to_owned());
    role.rules = Some(
        rules
            .iter()
            .map(|(group, resource, verbs)| PolicyRule {
                api_groups: Some(vec![(*group).to_owned()]),
                resources: Some(vec![(*resource).to_owned()]),
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                ..PolicyRule::default()
            })
            .collect(),
    );
    role
}

/// The ClusterRole as YAML.
pub fn rbac_yaml() -> Result<String, serde_norway::Error> {
    serde_norway::to_string(&cluster_role(NAME))
}

/// Whether `(group, resource, verb)` is granted (the audit log's terms:
/// `resource` with `/subresource` when there is one).
pub fn grants(group: &str, resource: &str, verb: &str) -> bool {
    RULES.iter().any(|(g, r, verbs)| *g == group && *r == resource && verbs.contains(&verb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_lists_each_resource_once_with_its_verbs() {
        let role = cluster_role(NAME);
        let rules = role.rules.unwrap_or_default();
        assert_eq!(rules.len(), RULES.len());
        let mut seen = std::collections::BTreeSet::new();
        for (group, resource, _) in RULES {
            assert!(seen.insert((group, resource)), "{group}/{resource} twice");
        }
        assert!(grants("discovery.k8s.io", "endpointslices", "patch"));
        assert!(!grants("discovery.k8s.io", "endpointslices", "update"));
        assert!(!grants("", "secrets", "get"));
        let yaml = rbac_yaml().unwrap();
        assert!(yaml.contains("kind: ClusterRole"), "{yaml}");
    }
}
