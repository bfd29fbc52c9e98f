//! The Multi-Cluster Services CRDs (`multicluster.x-k8s.io`), as in
//! kubernetes-sigs/mcs-api: ServiceExport and ServiceImport.
//!
//! Both versions, v1alpha1 and v1beta1, are served with one schema (so no
//! conversion webhook is needed); v1beta1 is stored and is what the
//! controller reads and writes. `mcs-controller crds` prints them.
//! See docs/design.md §13.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// The API group of both CRDs.
pub const GROUP: &str = "multicluster.x-k8s.io";
/// The version served and stored.
pub const STORED_VERSION: &str = "v1beta1";
/// The older version, served with the same schema.
pub const OLDER_VERSION: &str = "v1alpha1";

/// Marks a Service of the same namespace and name for export to the clusterset.
///
/// A ServiceExport without `spec` (or with `spec: null`) decodes with an
/// empty one: the mcs-api's CRD neither requires nor defaults it, and most
/// manifests are only a name (see the `Deserialize` impl below).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1beta1",
    kind = "ServiceExport",
    plural = "serviceexports",
    shortname = "svcex",
    namespaced,
    status = "ServiceExportStatus",
    printcolumn = r#"{"name":"Valid","type":"string","jsonPath":".status.conditions[?(@.type==\"Valid\")].status"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Conflict","type":"string","jsonPath":".status.conditions[?(@.type==\"Conflict\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","priority":1,"jsonPath":".status.conditions[?(@.status!=\"True\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportSpec {
    /// Labels exported with the service, on the ServiceImport of every cluster.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    /// Annotations exported with the service.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
}

/// Decodes `spec` through `Option`, so that an absent or null `spec`
/// is the empty spec: serde hands a missing field to `deserialize_option`,
/// which a derived struct would refuse (`missing field spec`) but an
/// `Option` takes as `None`.
impl<'de> Deserialize<'de> for ServiceExportSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Fields {
            #[serde(default)]
            exported_labels: BTreeMap<String, String>,
            #[serde(default)]
            exported_annotations: BTreeMap<String, String>,
        }
        let fields = Option::<Fields>::deserialize(deserializer)?;
        Ok(fields.map_or_else(Self::default, |f| Self {
            exported_labels: f.exported_labels,
            exported_annotations: f.exported_annotations,
        }))
    }
}

/// A ServiceExport's status: `Valid`, `Ready` and `Conflict`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportStatus {
    /// The export's conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A service imported from the clusterset: written by the controller only.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1beta1",
    kind = "ServiceImport",
    plural = "serviceimports",
    shortname = "svcim",
    namespaced,
    status = "ServiceImportStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"IPs","type":"string","jsonPath":".spec.ips"}"#,
    printcolumn = r#"{"name":"Ports","type":"string","priority":1,"jsonPath":".spec.ports"}"#,
    printcolumn = r#"{"name":"Clusters","type":"string","priority":1,"jsonPath":".status.clusters"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportSpec {
    /// The union of the exports' ports.
    // Written when empty too: the upstream mcs-api CRD requires the field,
    // and a headless Service may have no port.
    #[serde(default)]
    pub ports: Vec<ServiceImportPort>,
    /// The clusterset IPs (the derived Service's cluster IPs), ClusterSetIP only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    /// `ClusterSetIP` or `Headless`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `None` or `ClientIP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// The ClientIP affinity's timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<k8s_openapi::api::core::v1::SessionAffinityConfig>,
    /// `IPv4` and/or `IPv6`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<String>,
    /// `Cluster` or `Local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    /// E.g. `PreferClose`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
}

/// One port of a ServiceImport.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportPort {
    /// The port's name; may be empty for a service's only port.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `TCP`, `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Application protocol hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// The port number.
    pub port: i32,
}

/// A ServiceImport's status: the clusters exporting it and `Ready`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportStatus {
    /// Every cluster exporting the service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterStatus>,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One exporting cluster of a ServiceImport.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterStatus {
    /// The cluster's id.
    pub cluster: String,
}

/// The CRD of `K`, served as v1beta1 (stored) and v1alpha1 with one schema.
/// v1alpha1 must stay served: CoreDNS's `kubernetes` plugin reads
/// ServiceImports at that version only (ClusterSet DNS, tests/dns.rs).
fn both_versions<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut crd = K::crd();
    let mut older = crd.spec.versions[0].clone();
    older.name = OLDER_VERSION.into();
    older.storage = false;
    older.served = true;
    crd.spec.versions[0].storage = true;
    crd.spec.versions.push(older);
    crd
}

/// The two CRDs, as `mcs-controller crds` prints them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut export = both_versions::<ServiceExport>();
    optional_spec(&mut export);
    vec![export, both_versions::<ServiceImport>()]
}

/// A ServiceExport needs no `spec` (the MCS API's v1alpha1 has none, and
/// most manifests are only a name): our CRD defaults it to `{}`. The
/// mcs-api's own CRD does not, so [`ServiceExport`] decodes a missing
/// `spec` as empty too.
fn optional_spec(crd: &mut CustomResourceDefinition) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;
    for version in &mut crd.spec.versions {
        let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else {
            continue;
        };
        if let Some(required) = root.required.as_mut() {
            required.retain(|r| r != "spec");
        }
        if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            spec.default = Some(JSON(serde_json::json!({})));
        }
    }
}

/// The CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> Result<String, serde_norway::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_crds_serve_two_versions_and_store_v1beta1() {
        for crd in crds() {
            assert_eq!(crd.spec.group, GROUP);
            let versions: Vec<_> =
                crd.spec.versions.iter().map(|v| (v.name.as_str(), v.served, v.storage)).collect();
            assert_eq!(
                versions,
                vec![(STORED_VERSION, true, true), (OLDER_VERSION, true, false)],
                "{}",
                crd.metadata.name.as_deref().unwrap_or_default()
            );
            assert_eq!(crd.spec.versions[0].schema, crd.spec.versions[1].schema);
            assert!(crd.spec.versions[0].subresources.as_ref().is_some_and(|s| s.status.is_some()));
        }
        let export = &crds()[0].spec.versions[0];
        let root = export.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
        assert!(!root.required.iter().flatten().any(|r| r == "spec"), "{:?}", root.required);
        let spec_default = root.properties.as_ref().unwrap()["spec"].default.as_ref();
        assert_eq!(spec_default.map(|d| &d.0), Some(&serde_json::json!({})));
        let yaml = crds_yaml().unwrap();
        assert!(yaml.contains("name: serviceexports.multicluster.x-k8s.io"), "{yaml}");
        assert!(yaml.contains("name: serviceimports.multicluster.x-k8s.io"), "{yaml}");
    }

    /// Issue 27 item 6 (before: `missing field spec`, and with the
    /// mcs-api's CRD one such object failed the whole LIST).
    #[test]
    fn a_service_export_without_spec_decodes_with_an_empty_one() {
        let meta = serde_json::json!({"name": "web", "namespace": "demo"});
        for object in [
            serde_json::json!({"metadata": meta}),
            serde_json::json!({"metadata": meta, "spec": null}),
            serde_json::json!({"metadata": meta, "spec": {}}),
        ] {
            let se: ServiceExport = serde_json::from_value(object.clone()).expect("decodes");
            assert_eq!(se.spec, ServiceExportSpec::default(), "{object}");
        }
        let se: ServiceExport = serde_json::from_value(serde_json::json!({
            "metadata": meta,
            "spec": {"exportedLabels": {"a": "1"}, "exportedAnnotations": {"b": "2"}},
        }))
        .unwrap();
        assert_eq!(se.spec.exported_labels, BTreeMap::from([("a".into(), "1".into())]));
        assert_eq!(se.spec.exported_annotations, BTreeMap::from([("b".into(), "2".into())]));
        // What is there must still be right.
        let bad = serde_json::json!({"metadata": meta, "spec": {"exportedLabels": "a=1"}});
        assert!(serde_json::from_value::<ServiceExport>(bad).is_err());
        // Written back, the empty spec is `{}`.
        let written = serde_json::to_value(ServiceExport::new("web", Default::default())).unwrap();
        assert_eq!(written["spec"], serde_json::json!({}));
    }
}
