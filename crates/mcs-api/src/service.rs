//! ServiceExports sent by clusters and the ServiceImports merged from them
//! (Multi-Cluster Services, KEP-1645).

use crate::{FieldError, Incarnation, Label, Validate};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use utoipa::ToSchema;

/// How a multi-cluster service is reached.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub enum ServiceType {
    /// One virtual IP for the whole clusterset.
    ClusterSetIP,
    /// Endpoints are addressed directly.
    Headless,
}

/// Transport protocol of a port.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    ToSchema,
)]
#[allow(clippy::upper_case_acronyms)]
pub enum Protocol {
    /// TCP, the default.
    #[default]
    TCP,
    /// UDP.
    UDP,
    /// SCTP.
    SCTP,
}

/// Session affinity of a service.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    ToSchema,
)]
pub enum SessionAffinity {
    /// No affinity, the default.
    #[default]
    None,
    /// Requests from one client IP go to one endpoint.
    ClientIP,
}

/// One port of a service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct ServicePort {
    /// The port's name, a DNS-1123 label unique among the service's ports;
    /// may be empty (or absent) only when it is the service's one port.
    #[serde(default)]
    #[schema(pattern = "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$", max_length = 63)]
    pub name: String,
    /// Its protocol.
    #[serde(default)]
    pub protocol: Protocol,
    /// Its number, 1–65535.
    #[schema(minimum = 1, maximum = 65_535)]
    pub port: u16,
    /// Application protocol hint, e.g. `kubernetes.io/h2c`.
    #[serde(default)]
    pub app_protocol: Option<String>,
    /// The port on the exporting cluster's endpoints (the Service's resolved
    /// `targetPort`); `port` when absent. Local to that cluster, so not part
    /// of the merge: exports that differ only here do not conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 65_535)]
    pub target_port: Option<u16>,
}

impl ServicePort {
    /// The port as the merge compares and the import serves it: without the
    /// exporting cluster's `target_port`.
    pub fn definition(&self) -> ServicePort {
        ServicePort { target_port: None, ..self.clone() }
    }

    /// The port number on the exporting cluster's endpoints.
    pub fn endpoint_port(&self) -> u16 {
        self.target_port.unwrap_or(self.port)
    }
}

/// An IP family of a service, in the Service's `ipFamilies` order.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub enum IpFamily {
    /// IPv4.
    IPv4,
    /// IPv6.
    IPv6,
}

/// A Service's `internalTrafficPolicy`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub enum TrafficPolicy {
    /// Every endpoint of the service.
    Cluster,
    /// Only endpoints on the client's node.
    Local,
}

/// A set of addresses behind a service in one cluster.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct Endpoint {
    /// The endpoint's IP addresses.
    #[schema(schema_with = ip_addresses)]
    pub addresses: Vec<IpAddr>,
    /// Whether it is ready to serve.
    pub ready: bool,
    /// Its hostname, for headless services.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The zone it runs in.
    #[serde(default)]
    pub zone: Option<String>,
    /// This endpoint's own port numbers, by the name of the service port,
    /// where they differ from that port's `target_port`: a named
    /// `targetPort` resolves to different container ports on different
    /// pods (during a rollout that renames or moves a port). Empty for most
    /// endpoints; importers put such endpoints in slices of their own ports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub target_ports: BTreeMap<String, u16>,
}

impl Endpoint {
    /// The number `port` is reached on at this endpoint.
    pub fn port_of(&self, port: &ServicePort) -> u16 {
        self.target_ports.get(&port.name).copied().unwrap_or_else(|| port.endpoint_port())
    }
}

/// The schema of a list of IP addresses: each an IPv4 or an IPv6 address.
fn ip_addresses() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, Type};
    let ip = |format| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
    };
    utoipa::openapi::schema::Array::new(
        OneOfBuilder::new().item(ip(KnownFormat::Ipv4)).item(ip(KnownFormat::Ipv6)),
    )
}

/// A service's name in the clusterset: the same namespace and name in every
/// cluster is the same service ("namespace sameness").
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct ServiceName {
    /// Its namespace.
    pub namespace: Label,
    /// Its name.
    pub name: Label,
}

/// One cluster's export of one service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct ExportKey {
    /// The exporting cluster.
    pub cluster_id: Label,
    /// The service's namespace.
    pub namespace: Label,
    /// The service's name.
    pub name: Label,
}

/// `namespace/name`.
impl std::fmt::Display for ServiceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `cluster_id/namespace/name`.
impl std::fmt::Display for ExportKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.cluster_id, self.namespace, self.name)
    }
}

impl ExportKey {
    /// The service this export belongs to.
    pub fn service(&self) -> ServiceName {
        ServiceName { namespace: self.namespace.clone(), name: self.name.clone() }
    }
}

/// What a cluster exports of one Service: the part that the merge reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExportSpec {
    /// ClusterSetIP or Headless.
    #[serde(rename = "type")]
    pub service_type: ServiceType,
    /// The Service's ports.
    pub ports: Vec<ServicePort>,
    /// The Service's session affinity.
    #[serde(default)]
    pub session_affinity: SessionAffinity,
    /// Affinity timeout, with `ClientIP` only.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86_400)]
    pub session_affinity_timeout_secs: Option<u32>,
    /// When the cluster first exported the service; the oldest export wins
    /// conflicts.
    #[schema(value_type = String, format = DateTime)]
    pub exported_at: jiff::Timestamp,
    /// The Service's endpoints in this cluster.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// Labels exported with the service.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations exported with the service.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The Service's IP families, in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<IpFamily>,
    /// The Service's `internalTrafficPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<TrafficPolicy>,
    /// The Service's `trafficDistribution`, e.g. `PreferClose`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 63)]
    pub traffic_distribution: Option<String>,
}

impl Validate for ExportSpec {
    fn validate(&self) -> Result<(), FieldError> {
        let mut names = std::collections::BTreeSet::new();
        for (i, port) in self.ports.iter().enumerate() {
            if port.port == 0 {
                return Err(FieldError::new(format!("ports[{i}].port"), "port must be 1 to 65535"));
            }
            if port.target_port == Some(0) {
                return Err(FieldError::new(
                    format!("ports[{i}].target_port"),
                    "target_port must be 1 to 65535",
                ));
            }
            if port.name.is_empty() {
                if self.ports.len() > 1 {
                    return Err(FieldError::new(
                        format!("ports[{i}].name"),
                        "every port needs a name when there are several",
                    ));
                }
            } else if let Err(e) = Label::new(port.name.as_str()) {
                return Err(FieldError::new(format!("ports[{i}].name"), e));
            }
            if !names.insert(port.name.as_str()) {
                return Err(FieldError::new(
                    format!("ports[{i}].name"),
                    format!("duplicate port name {:?}", port.name),
                ));
            }
        }
        for (i, endpoint) in self.endpoints.iter().enumerate() {
            for (name, number) in &endpoint.target_ports {
                let field = || format!("endpoints[{i}].target_ports.{name}");
                if !names.contains(name.as_str()) {
                    return Err(FieldError::new(field(), "names no port of the export"));
                }
                if *number == 0 {
                    return Err(FieldError::new(field(), "must be 1 to 65535"));
                }
            }
        }
        if self.traffic_distribution.as_ref().is_some_and(|t| t.chars().count() > 63) {
            return Err(FieldError::new("traffic_distribution", "at most 63 characters"));
        }
        match (self.session_affinity, self.session_affinity_timeout_secs) {
            (SessionAffinity::None, Some(_)) => Err(FieldError::new(
                "session_affinity_timeout_secs",
                "a timeout needs session_affinity ClientIP",
            )),
            (SessionAffinity::ClientIP, Some(t)) if t == 0 || t > 86_400 => {
                Err(FieldError::new("session_affinity_timeout_secs", "must be 1 to 86400"))
            }
            _ => Ok(()),
        }
    }
}

/// `PUT /v1/clusters/{cluster_id}/exports/{namespace}/{name}`: the export
/// and, optionally, the writer's own ordering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExportRequest {
    /// ClusterSetIP or Headless.
    #[serde(rename = "type")]
    pub service_type: ServiceType,
    /// The Service's ports.
    pub ports: Vec<ServicePort>,
    /// The Service's session affinity.
    #[serde(default)]
    pub session_affinity: SessionAffinity,
    /// Affinity timeout, with `ClientIP` only.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86_400)]
    pub session_affinity_timeout_secs: Option<u32>,
    /// When the cluster first exported the service.
    #[schema(value_type = String, format = DateTime)]
    pub exported_at: jiff::Timestamp,
    /// The Service's endpoints in this cluster.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// Labels exported with the service.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations exported with the service.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The Service's IP families, in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<IpFamily>,
    /// The Service's `internalTrafficPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<TrafficPolicy>,
    /// The Service's `trafficDistribution`, e.g. `PreferClose`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 63)]
    pub traffic_distribution: Option<String>,
    /// The controller process sending it: while the export's cluster holds
    /// a live lease, the incarnation holding it (`409 owned` otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<Incarnation>,
    /// The controller's own ordering of its intents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub generation: Option<u64>,
}

impl ExportRequest {
    /// The export itself, without the writer's ordering.
    pub fn spec(&self) -> ExportSpec {
        ExportSpec {
            service_type: self.service_type,
            ports: self.ports.clone(),
            session_affinity: self.session_affinity,
            session_affinity_timeout_secs: self.session_affinity_timeout_secs,
            exported_at: self.exported_at,
            endpoints: self.endpoints.clone(),
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            ip_families: self.ip_families.clone(),
            internal_traffic_policy: self.internal_traffic_policy,
            traffic_distribution: self.traffic_distribution.clone(),
        }
    }
}

impl Validate for ExportRequest {
    fn validate(&self) -> Result<(), FieldError> {
        self.spec().validate()?;
        crate::generation_needs_incarnation(self.generation, self.incarnation.as_ref())
    }
}

/// Status of a condition, as in Kubernetes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// Not known.
    Unknown,
}

/// A condition of the MCS API: `Valid`, `Ready`, `Conflict` on exports and
/// `Ready` on imports. Several reasons are joined by commas.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema)]
pub struct Condition {
    /// `Valid`, `Ready` or `Conflict`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// CamelCase reasons, comma-separated.
    pub reason: String,
    /// A human sentence.
    pub message: String,
}

/// A live export as `GET /v1/exports` serves it, with its conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Export {
    /// The exporting cluster.
    pub cluster_id: Label,
    /// The service's namespace.
    pub namespace: Label,
    /// The service's name.
    pub name: Label,
    /// The export.
    #[serde(flatten)]
    pub spec: ExportSpec,
    /// `Valid`, `Ready` and `Conflict`.
    pub conditions: Vec<Condition>,
}

/// One cluster's part of an import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImportCluster {
    /// The exporting cluster.
    pub cluster_id: Label,
    /// Its endpoints for the service.
    pub endpoints: Vec<Endpoint>,
    /// Its ports that are part of the import, with its own target ports; a
    /// port whose definition lost a conflict is left out.
    #[serde(default)]
    pub ports: Vec<ServicePort>,
}

/// A merged ServiceImport as `GET /v1/imports` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ServiceImport {
    /// The service's namespace.
    pub namespace: Label,
    /// The service's name.
    pub name: Label,
    /// The type of the winning export.
    #[serde(rename = "type")]
    pub service_type: ServiceType,
    /// Ports unioned by name across the exports.
    pub ports: Vec<ServicePort>,
    /// The winning export's session affinity.
    pub session_affinity: SessionAffinity,
    /// The winning export's affinity timeout.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 86_400)]
    pub session_affinity_timeout_secs: Option<u32>,
    /// The winning export's IP families.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<IpFamily>,
    /// The winning export's `internalTrafficPolicy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<TrafficPolicy>,
    /// The winning export's `trafficDistribution`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
    /// Exported labels, unioned; the oldest export's value of a key wins.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Exported annotations, unioned; the oldest export's value of a key wins.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Every cluster exporting the service, with its endpoints.
    pub clusters: Vec<ImportCluster>,
    /// `Ready`.
    pub conditions: Vec<Condition>,
}

/// The reply to an export write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExportAccepted {
    /// The generation now stored.
    pub generation: u64,
    /// The export's conditions as the registry now sees them.
    pub conditions: Vec<Condition>,
}

/// The reply to a withdrawal (a `DELETE`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Withdrawn {
    /// The generation of the tombstone now stored.
    pub generation: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{parse, round_trip};

    const EXPORT: &str = r#"{"type": "ClusterSetIP",
        "ports": [{"name": "http", "protocol": "TCP", "port": 80, "app_protocol": null},
                  {"name": "grpc", "port": 9090, "app_protocol": "kubernetes.io/h2c"}],
        "session_affinity": "None", "session_affinity_timeout_secs": null,
        "exported_at": "2026-12-02T08:00:00Z",
        "endpoints": [{"addresses": ["10.1.0.5", "fd00::5"], "ready": true, "hostname": null, "zone": "us-east-1a"}],
        "labels": {"app": "web"}, "annotations": {}, "generation": 18, "incarnation": "c1"}"#;

    #[test]
    fn export_request_parses_validates_and_round_trips() {
        let req: ExportRequest = parse(EXPORT).unwrap();
        assert_eq!(req.validate(), Ok(()));
        assert_eq!(req.ports[1].protocol, Protocol::TCP);
        round_trip(&req);
        round_trip(&req.spec());
        let export = Export {
            cluster_id: Label::new("east").unwrap(),
            namespace: Label::new("llm").unwrap(),
            name: Label::new("web").unwrap(),
            spec: req.spec(),
            conditions: vec![Condition {
                condition_type: "Conflict".into(),
                status: ConditionStatus::True,
                reason: "PortConflict,TypeConflict".into(),
                message: "m".into(),
            }],
        };
        round_trip(&export);
        round_trip(&ServiceImport {
            namespace: export.namespace.clone(),
            name: export.name.clone(),
            service_type: ServiceType::Headless,
            ports: req.ports.clone(),
            session_affinity: SessionAffinity::ClientIP,
            session_affinity_timeout_secs: Some(30),
            ip_families: vec![IpFamily::IPv4, IpFamily::IPv6],
            internal_traffic_policy: Some(TrafficPolicy::Local),
            traffic_distribution: Some("PreferClose".into()),
            labels: req.labels.clone(),
            annotations: req.annotations.clone(),
            clusters: vec![ImportCluster {
                cluster_id: export.cluster_id.clone(),
                endpoints: req.endpoints.clone(),
                ports: req.ports.clone(),
            }],
            conditions: export.conditions.clone(),
        });
        round_trip(&ExportAccepted { generation: 1, conditions: vec![] });
        round_trip(&Withdrawn { generation: 2 });
    }

    #[test]
    fn a_ports_definition_leaves_the_clusters_target_port_out() {
        let req: ExportRequest = parse(EXPORT).unwrap();
        let local = ServicePort { target_port: Some(8080), ..req.ports[0].clone() };
        let definition = local.definition();
        assert_eq!(definition.target_port, None);
        assert_eq!(definition, ServicePort { target_port: None, ..local.clone() });
        assert_eq!(local.endpoint_port(), 8080);
        assert_eq!(definition.endpoint_port(), definition.port);
    }

    #[test]
    fn a_traffic_distribution_of_63_characters_is_valid() {
        let mut req: ExportRequest = parse(EXPORT).unwrap();
        req.traffic_distribution = Some("x".repeat(63));
        assert_eq!(req.validate(), Ok(()));
    }

    #[test]
    fn an_endpoint_keeps_its_own_port_where_it_differs() {
        let json = EXPORT.replacen(
            r#""zone": "us-east-1a""#,
            r#""zone": "a", "target_ports": {"grpc": 9191}"#,
            1,
        );
        let req: ExportRequest = parse(&json).unwrap();
        assert_eq!(req.validate(), Ok(()));
        round_trip(&req);
        let endpoint = &req.endpoints[0];
        assert_eq!(endpoint.port_of(&req.ports[1]), 9191, "its own");
        assert_eq!(endpoint.port_of(&req.ports[0]), 80, "the port's, else");
        let plain: ExportRequest = parse(EXPORT).unwrap();
        assert!(plain.endpoints[0].target_ports.is_empty());
        let written = serde_json::to_string(&plain.endpoints[0]).unwrap();
        assert!(!written.contains("target_ports"), "left out when empty: {written}");
    }

    #[test]
    fn export_fields_are_named_when_invalid() {
        let bad = |from: &str, to: &str| EXPORT.replacen(from, to, 1);
        let parse_cases = [
            (bad(r#""ClusterSetIP""#, r#""LoadBalancer""#), "type"),
            (bad(r#""10.1.0.5""#, r#""10.1.0.500""#), "endpoints[0].addresses[0]"),
            (bad("\"port\": 80", "\"port\": 70000"), "ports[0].port"),
            (bad("2026-12-02T08:00:00Z", "yesterday"), "exported_at"),
            (bad(r#""protocol": "TCP""#, r#""protocol": "HTTP""#), "ports[0].protocol"),
        ];
        for (json, path) in parse_cases {
            let (got, message) = parse::<ExportRequest>(&json).unwrap_err();
            assert_eq!(got, path, "{message}");
        }
        let validate_cases = [
            (bad("\"port\": 80", "\"port\": 0"), "ports[0].port"),
            (bad("\"port\": 80", "\"port\": 80, \"target_port\": 0"), "ports[0].target_port"),
            (
                bad(
                    r#""annotations": {}"#,
                    &format!(
                        r#""annotations": {{}}, "traffic_distribution": "{}""#,
                        "*".repeat(64)
                    ),
                ),
                "traffic_distribution",
            ),
            (bad(r#""name": "grpc""#, r#""name": "http""#), "ports[1].name"),
            (bad(r#""name": "grpc""#, r#""name": """#), "ports[1].name"),
            (bad(r#""name": "http""#, r#""name": "HTTP_1""#), "ports[0].name"),
            (
                bad(
                    r#""session_affinity_timeout_secs": null"#,
                    r#""session_affinity_timeout_secs": 5"#,
                ),
                "session_affinity_timeout_secs",
            ),
            (bad(r#", "incarnation": "c1""#, ""), "incarnation"),
            (
                bad(r#""zone": "us-east-1a""#, r#""zone": "a", "target_ports": {"web": 8080}"#),
                "endpoints[0].target_ports.web",
            ),
            (
                bad(r#""zone": "us-east-1a""#, r#""zone": "a", "target_ports": {"http": 0}"#),
                "endpoints[0].target_ports.http",
            ),
        ];
        for (json, path) in validate_cases {
            let req: ExportRequest = parse(&json).unwrap();
            assert_eq!(req.validate().unwrap_err().field, path, "{json}");
        }
    }
}
