//! The controller's RBAC: exactly the verbs its code uses, per resource.
//! A ClusterRole for what it watches and writes across the cluster, and a
//! Role in the Lease's namespace for leader election. `mcs-controller rbac`
//! prints both with their bindings; the chart renders the same; the
//! integration tests run the controller under them (a ServiceAccount bound
//! to nothing else) and check the API server's audit log: nothing the
//! controller asked was denied, and every verb granted here was used.
//!
//! ```text
//!  ClusterRole  mcs-controller   RULES (no leases)
//!  Role         <ns>/mcs-controller  leases: get, update on the election Lease by name;
//!                                    create (RBAC cannot limit create by name)
//! ```
//!
//! Why `create` is granted in the namespace rather than the Lease made by
//! the installer: the first leader writes the cluster's incarnation into
//! the Lease it creates (docs/design.md §13), and a Lease deleted by hand
//! or with its namespace comes back by itself. What `create` adds over the
//! named verbs is the right to create other Leases in the controller's own
//! namespace, none of which the controller can then change; it can neither
//! read nor change any Lease but its own.
//!
//! What RBAC cannot narrow (it has no rule by label: writes to derived
//! Services and imported EndpointSlices must be allowed in every namespace)
//! a ValidatingAdmissionPolicy does (issue 23 item 8, Kubernetes ≥ 1.30):
//! for requests of the controller's ServiceAccount only, a Service or an
//! EndpointSlice may be created, changed or deleted only when it carries
//! the controller's managed-by label, before and after ([`policy`]).
//!
//! ```text
//!  ValidatingAdmissionPolicy         <name>   services, endpointslices: CREATE, UPDATE, DELETE
//!    matchConditions  request.userInfo.username == system:serviceaccount:<ns>:<sa>
//!    validations      the old object (UPDATE, DELETE) and the new one (CREATE, UPDATE)
//!                     carry app.kubernetes.io/managed-by (Services) or
//!                     endpointslice.kubernetes.io/managed-by (slices) = MANAGED_BY
//!  ValidatingAdmissionPolicyBinding  <name>   validationActions: [Deny]
//! ```

use crate::MANAGED_BY;
use crate::import::plan::{MANAGED_BY_LABEL, SLICE_MANAGED_BY_LABEL};
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The default name of the ClusterRole, the Role and their bindings.
pub const NAME: &str = "mcs-controller";

/// `(API group, resource, verbs)` the controller calls across the cluster.
pub const RULES: &[(&str, &str, &[&str])] = &[
    // Exports: read, an earlier controller's finalizer removed (patch),
    // auto-export's create and delete.
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
    // Services: read for exports (a watch cache); derived Services applied
    // and deleted.
    ("", "services", &["list", "watch", "create", "patch", "delete"]),
    // EndpointSlices: read for exports; imported slices applied and deleted.
    ("discovery.k8s.io", "endpointslices", &["list", "watch", "create", "patch", "delete"]),
    // The importer creates nothing in a namespace that does not exist here.
    ("", "namespaces", &["list", "watch"]),
    // The cluster's id (KEP-2149).
    ("about.k8s.io", "clusterproperties", &["get"]),
];

/// Leader election's rule, granted only in the Lease's namespace (a Role):
/// `get` and `update` name the Lease ([`LEASE_NAMED_VERBS`]); `create`
/// cannot, as RBAC does not match `create` by name.
pub const LEASE_RULE: (&str, &str, &[&str]) =
    ("coordination.k8s.io", "leases", &["get", "create", "update"]);

/// The verbs of [`LEASE_RULE`] limited to the election Lease by name.
pub const LEASE_NAMED_VERBS: &[&str] = &["get", "update"];

/// Where the controller runs: what `mcs-controller rbac` binds and names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// Name of the ClusterRole, the Role and their bindings.
    pub name: String,
    /// Namespace of the ServiceAccount, the Role and the Lease.
    pub namespace: String,
    /// The controller's ServiceAccount.
    pub service_account: String,
    /// The leader-election Lease (`--leader-election-lease`).
    pub lease: String,
}

/// What [`Install`] needs: the ClusterRole, the Role and their bindings.
#[derive(Debug, Clone)]
pub struct Objects {
    /// [`RULES`].
    pub cluster_role: ClusterRole,
    /// Binds the ClusterRole to the ServiceAccount.
    pub cluster_role_binding: ClusterRoleBinding,
    /// [`LEASE_RULE`] in the Lease's namespace.
    pub role: Role,
    /// Binds the Role to the ServiceAccount.
    pub role_binding: RoleBinding,
    /// Only objects of the controller's own: [`policy`].
    pub policy: ValidatingAdmissionPolicy,
    /// Binds the policy to every namespace, denying what fails it.
    pub policy_binding: ValidatingAdmissionPolicyBinding,
}

impl Install {
    /// The objects that let the controller of this install run.
    pub fn objects(&self) -> Objects {
        let subjects = Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: self.service_account.clone(),
            namespace: Some(self.namespace.clone()),
            ..Subject::default()
        }]);
        let role_ref = |kind: &str| RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: kind.into(),
            name: self.name.clone(),
        };
        let namespaced = ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            ..ObjectMeta::default()
        };
        Objects {
            cluster_role: cluster_role(&self.name),
            cluster_role_binding: ClusterRoleBinding {
                metadata: ObjectMeta { name: Some(self.name.clone()), ..ObjectMeta::default() },
                role_ref: role_ref("ClusterRole"),
                subjects: subjects.clone(),
            },
            role: Role { metadata: namespaced.clone(), rules: Some(lease_rules(&self.lease)) },
            role_binding: RoleBinding {
                metadata: namespaced,
                role_ref: role_ref("Role"),
                subjects,
            },
            policy: policy(&self.name, &self.namespace, &self.service_account),
            policy_binding: policy_binding(&self.name),
        }
    }

    /// The six objects as one YAML stream, as `kubectl apply -f -` takes it.
    pub fn yaml(&self) -> Result<String, serde_norway::Error> {
        let o = self.objects();
        let docs = [
            serde_norway::to_string(&o.cluster_role)?,
            serde_norway::to_string(&o.cluster_role_binding)?,
            serde_norway::to_string(&o.role)?,
            serde_norway::to_string(&o.role_binding)?,
            serde_norway::to_string(&o.policy)?,
            serde_norway::to_string(&o.policy_binding)?,
        ];
        Ok(docs.iter().map(|d| format!("---\n{d}")).collect())
    }
}

/// `(API group, resource, the label that marks the controller's own)`:
/// what [`policy`] limits the controller to its own objects of.
pub const OWN_OBJECTS_ONLY: &[(&str, &str, &str)] = &[
    ("", "services", MANAGED_BY_LABEL),
    ("discovery.k8s.io", "endpointslices", SLICE_MANAGED_BY_LABEL),
];

/// The ValidatingAdmissionPolicy named `name`: requests of ServiceAccount
/// `namespace/service_account` to create, change or delete an object of
/// [`OWN_OBJECTS_ONLY`] pass only when the object carries its label with
/// the value [`MANAGED_BY`], before the request (UPDATE, DELETE) and after
/// it (CREATE, UPDATE): the controller can neither change nor take over an
/// object it did not make. Other users are not matched at all.
pub fn policy(name: &str, namespace: &str, service_account: &str) -> ValidatingAdmissionPolicy {
    let rules = OWN_OBJECTS_ONLY
        .iter()
        .map(|(group, resource, _)| NamedRuleWithOperations {
            api_groups: Some(vec![(*group).to_owned()]),
            api_versions: Some(vec!["*".to_owned()]),
            operations: Some(["CREATE", "UPDATE", "DELETE"].map(str::to_owned).into()),
            resources: Some(vec![(*resource).to_owned()]),
            ..NamedRuleWithOperations::default()
        })
        .collect();
    // The label that marks the request's kind of object as ours.
    // A chain of `resource == R ? label : …`, the last label the fallback.
    let (last, others) = OWN_OBJECTS_ONLY.split_last().expect("at least one kind");
    let label =
        others.iter().rev().fold(format!("'{}'", last.2), |otherwise, (_, resource, label)| {
            format!("request.resource.resource == '{resource}' ? '{label}' : {otherwise}")
        });
    let ours = |object: &str| {
        format!(
            "has({object}.metadata.labels) && variables.label in {object}.metadata.labels \
             && {object}.metadata.labels[variables.label] == '{MANAGED_BY}'"
        )
    };
    let message = |when: &str| {
        format!(
            "'{service_account} may ' + request.operation.lowerAscii() + ' only ' + \
             request.resource.resource + ' labelled ' + variables.label + \
             '={MANAGED_BY} ({when})'"
        )
    };
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".into()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(rules),
                ..MatchResources::default()
            }),
            match_conditions: Some(vec![MatchCondition {
                name: "the-controller".into(),
                expression: format!(
                    "request.userInfo.username == \
                     'system:serviceaccount:{namespace}:{service_account}'"
                ),
            }]),
            variables: Some(vec![Variable { name: "label".into(), expression: label }]),
            validations: Some(vec![
                Validation {
                    expression: format!("request.operation == 'CREATE' || ({})", ours("oldObject")),
                    message_expression: Some(message("the object as it was")),
                    reason: Some("Forbidden".into()),
                    ..Validation::default()
                },
                Validation {
                    expression: format!("request.operation == 'DELETE' || ({})", ours("object")),
                    message_expression: Some(message("the object as written")),
                    reason: Some("Forbidden".into()),
                    ..Validation::default()
                },
            ]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    }
}

/// Binds [`policy`] `name` everywhere, denying what fails it.
pub fn policy_binding(name: &str) -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        spec: ValidatingAdmissionPolicyBindingSpec {
            policy_name: name.to_owned(),
            validation_actions: vec!["Deny".into()],
            ..ValidatingAdmissionPolicyBindingSpec::default()
        },
    }
}

/// The ClusterRole named `name` granting [`RULES`].
pub fn cluster_role(name: &str) -> ClusterRole {
    cluster_role_of(name, RULES)
}

/// The Role's rules for the election Lease `lease`: [`LEASE_NAMED_VERBS`]
/// on it by name, the rest of [`LEASE_RULE`] (`create`) without a name.
pub fn lease_rules(lease: &str) -> Vec<PolicyRule> {
    let (group, resource, verbs) = LEASE_RULE;
    let rule = |verbs: Vec<String>, names: Option<Vec<String>>| PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(vec![resource.to_owned()]),
        resource_names: names,
        verbs,
        ..PolicyRule::default()
    };
    let (named, unnamed): (Vec<&str>, Vec<&str>) =
        verbs.iter().partition(|v| LEASE_NAMED_VERBS.contains(v));
    vec![
        rule(named.into_iter().map(str::to_owned).collect(), Some(vec![lease.to_owned()])),
        rule(unnamed.into_iter().map(str::to_owned).collect(), None),
    ]
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

/// Every `(API group, resource, verbs)` granted: [`RULES`] and [`LEASE_RULE`].
pub fn all_rules() -> impl Iterator<Item = (&'static str, &'static str, &'static [&'static str])> {
    RULES.iter().copied().chain([LEASE_RULE])
}

/// Whether `(group, resource, verb)` is granted, anywhere (the audit log's
/// terms: `resource` with `/subresource` when there is one).
pub fn grants(group: &str, resource: &str, verb: &str) -> bool {
    all_rules().any(|(g, r, verbs)| g == group && r == resource && verbs.contains(&verb))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> Install {
        Install {
            name: NAME.into(),
            namespace: "mcs-system".into(),
            service_account: "mcs-controller".into(),
            lease: "mcs-east".into(),
        }
    }

    #[test]
    fn the_role_lists_each_resource_once_with_its_verbs() {
        let role = cluster_role(NAME);
        let rules = role.rules.unwrap_or_default();
        assert_eq!(rules.len(), RULES.len());
        let mut seen = std::collections::BTreeSet::new();
        for (group, resource, _) in all_rules() {
            assert!(seen.insert((group, resource)), "{group}/{resource} twice");
        }
        assert!(grants("discovery.k8s.io", "endpointslices", "patch"));
        assert!(!grants("discovery.k8s.io", "endpointslices", "update"));
        assert!(!grants("", "secrets", "get"));
        assert!(grants("coordination.k8s.io", "leases", "create"));
    }

    /// Issue 29 item 6 (before: the ClusterRole granted `get`, `create`,
    /// `update` on every Lease of every namespace).
    #[test]
    fn leases_are_granted_only_in_the_leases_namespace_and_by_name() {
        let objects = install().objects();
        let cluster_rules = objects.cluster_role.rules.unwrap_or_default();
        assert!(
            !cluster_rules.iter().any(|r| r.resources.iter().flatten().any(|r| r == "leases")),
            "{cluster_rules:?}"
        );
        assert_eq!(objects.role.metadata.namespace.as_deref(), Some("mcs-system"));
        let rules = objects.role.rules.unwrap_or_default();
        let summary: Vec<_> =
            rules.iter().map(|r| (r.verbs.clone(), r.resource_names.clone())).collect();
        assert_eq!(
            summary,
            [
                (vec!["get".to_owned(), "update".to_owned()], Some(vec!["mcs-east".to_owned()])),
                (vec!["create".to_owned()], None),
            ]
        );
        for binding_ref in [&objects.role_binding.role_ref, &objects.cluster_role_binding.role_ref]
        {
            assert_eq!(binding_ref.name, NAME);
        }
        assert_eq!(objects.role_binding.role_ref.kind, "Role");
        assert_eq!(objects.role_binding.metadata.namespace.as_deref(), Some("mcs-system"));
        let subject = &objects.cluster_role_binding.subjects.unwrap_or_default()[0];
        assert_eq!(
            (subject.name.as_str(), subject.namespace.as_deref()),
            ("mcs-controller", Some("mcs-system"))
        );
    }

    #[test]
    fn the_yaml_is_six_documents_kubectl_can_apply() {
        let yaml = install().yaml().unwrap();
        let kinds: Vec<&str> = yaml.lines().filter_map(|l| l.strip_prefix("kind: ")).collect();
        assert_eq!(
            kinds,
            [
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding"
            ],
            "{yaml}"
        );
        assert_eq!(yaml.matches("---\n").count(), 6, "{yaml}");
    }
}
