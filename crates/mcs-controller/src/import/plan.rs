//! What one imported service should look like in this cluster, computed
//! from the registry's merged import alone (pure: no API calls).
//!
//! ```text
//!  mcs_api::ServiceImport (registry) ──▶ ServiceImport CR <name>        (spec, labels, status)
//!                                    ──▶ Service derived-<hash>         (owned by the CR)
//!                                    ──▶ EndpointSlices <derived>-<cluster>-<family>-<n>
//!                                        one per source cluster × address family × chunk
//! ```
//!
//! Everything is deterministic: the same import gives the same objects, in
//! the same order, with the same names, so that comparing them with what
//! is in the cluster (see `diff.rs`) tells whether anything must be
//! written. See docs/design.md §13.

use crate::crd::{self, ClusterStatus, ServiceImportPort, ServiceImportSpec, ServiceImportStatus};
use crate::{MANAGED_BY, metadata};
use k8s_openapi::api::core::v1::SessionAffinityConfig;
use k8s_openapi::api::core::v1::{ClientIPConfig, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use mcs_api::{ConditionStatus, IpFamily, Protocol, ServiceType, SessionAffinity, TrafficPolicy};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Label of the imported service's name, on derived Services and slices.
pub const SERVICE_NAME_LABEL: &str = "multicluster.kubernetes.io/service-name";
/// Label of the cluster a slice's endpoints come from.
pub const SOURCE_CLUSTER_LABEL: &str = "multicluster.kubernetes.io/source-cluster";
/// Label tying a slice to its Service.
pub const SLICE_SERVICE_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages a slice.
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// Label naming the controller that manages the other objects.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The condition type of a ServiceImport.
pub const READY: &str = "Ready";
/// Hard cap of endpoints in one EndpointSlice (the API's own limit).
pub const MAX_ENDPOINTS_PER_SLICE: usize = 1000;

/// The derived Service's name: `derived-` and 16 hex digits of the SHA-256
/// of `namespace/name`; a DNS label of 24 characters.
pub fn derived_name(namespace: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("derived-{hex}")
}

/// A slice's name: `<derived>-<cluster>-<family>-<n>`. The cluster id is a
/// DNS label, so the name is a DNS subdomain of at most 24 + 63 + 10 + 20
/// characters; parsing it from the right is unambiguous.
pub fn slice_name(derived: &str, cluster: &str, family: IpFamily, chunk: usize) -> String {
    format!("{derived}-{cluster}-{}-{chunk}", family_suffix(family))
}

fn family_suffix(family: IpFamily) -> &'static str {
    match family {
        IpFamily::IPv4 => "ipv4",
        IpFamily::IPv6 => "ipv6",
    }
}

/// The Kubernetes spelling of an IP family (Service `ipFamilies`, slice
/// `addressType`).
pub fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::IPv4 => "IPv4",
        IpFamily::IPv6 => "IPv6",
    }
}

fn family_of(ip: &IpAddr) -> IpFamily {
    match ip {
        IpAddr::V4(_) => IpFamily::IPv4,
        IpAddr::V6(_) => IpFamily::IPv6,
    }
}

fn protocol_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::TCP => "TCP",
        Protocol::UDP => "UDP",
        Protocol::SCTP => "SCTP",
    }
}

/// The ServiceImport's `type`.
pub fn type_name(service_type: ServiceType) -> &'static str {
    match service_type {
        ServiceType::ClusterSetIP => "ClusterSetIP",
        ServiceType::Headless => "Headless",
    }
}

fn status_name(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

/// How the registry stands, as the importer last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryState {
    /// The last list was complete and the registry answers.
    Available,
    /// The registry serves `complete: false`; nothing is deleted.
    Incomplete,
    /// The registry does not answer (or refused the watch); nothing is deleted.
    Unreachable(String),
}

/// Reason of `Ready=False` while the registry does not answer.
pub const REGISTRY_UNAVAILABLE: &str = "RegistryUnavailable";
/// Reason of `Ready=False` while the registry's list is incomplete.
pub const REGISTRY_INCOMPLETE: &str = "RegistryIncomplete";

impl RegistryState {
    /// The `Ready` condition to report instead of the registry's, if any.
    fn override_ready(&self) -> Option<(&'static str, String)> {
        match self {
            RegistryState::Available => None,
            RegistryState::Incomplete => Some((
                REGISTRY_INCOMPLETE,
                "the registry's list of imports is incomplete; kept as last seen".into(),
            )),
            RegistryState::Unreachable(error) => Some((
                REGISTRY_UNAVAILABLE,
                format!("the registry is unreachable ({error}); kept as last seen"),
            )),
        }
    }
}

/// A condition with its transition time kept from `current` when its status
/// did not change, else `now`.
fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    current: &[Condition],
    now: jiff::Timestamp,
) -> Condition {
    let since = current
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)));
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.chars().take(32_768).collect(),
        last_transition_time: since,
        observed_generation: None,
    }
}

/// `current` with its `Ready` condition replaced by `Ready=False` for the
/// registry's state (what is written while the registry is unavailable,
/// everything else kept); `None` when the registry is available.
pub fn unavailable_status(
    current: Option<&ServiceImportStatus>,
    state: &RegistryState,
    now: jiff::Timestamp,
) -> Option<ServiceImportStatus> {
    let (reason, message) = state.override_ready()?;
    let mut status = current.cloned().unwrap_or_default();
    let ready = condition(READY, "False", reason, &message, &status.conditions, now);
    status.conditions.retain(|c| c.type_ != READY);
    status.conditions.push(ready);
    Some(status)
}

/// What the importer knows of the cluster when planning one service.
#[derive(Debug, Clone, Copy, Default)]
pub struct Observed<'a> {
    /// The derived Service's `spec.clusterIPs`, if it exists.
    pub cluster_ips: &'a [String],
    /// The ServiceImport's current conditions (their transition times are kept).
    pub conditions: &'a [Condition],
    /// The IP families this cluster gives Services; empty when not known.
    pub cluster_families: &'a [IpFamily],
}

/// The ServiceImport custom resource of `import`, status included; the
/// import's labels and annotations that Kubernetes would refuse are left
/// out ([`refused_metadata`] names them).
pub fn service_import(
    import: &mcs_api::ServiceImport,
    observed: Observed<'_>,
    state: &RegistryState,
    now: jiff::Timestamp,
) -> crd::ServiceImport {
    let ports = import
        .ports
        .iter()
        .map(|p| ServiceImportPort {
            name: p.name.clone(),
            protocol: Some(protocol_name(p.protocol).into()),
            app_protocol: p.app_protocol.clone(),
            port: i32::from(p.port),
        })
        .collect();
    let ips = match import.service_type {
        ServiceType::ClusterSetIP => ips_in_family_order(observed.cluster_ips, &import.ip_families),
        ServiceType::Headless => Vec::new(),
    };
    let spec = ServiceImportSpec {
        ports,
        ips,
        type_: type_name(import.service_type).into(),
        session_affinity: Some(affinity_name(import.session_affinity).into()),
        session_affinity_config: affinity_config(import),
        ip_families: import.ip_families.iter().map(|f| family_name(*f).into()).collect(),
        internal_traffic_policy: import.internal_traffic_policy.map(|p| policy_name(p).into()),
        traffic_distribution: import.traffic_distribution.clone(),
    };
    // What the API server would refuse (from an exporter that did not
    // check) is left out, or the whole ServiceImport would be refused.
    let (mut labels, _) = metadata::valid_labels(&import.labels);
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let (annotations, _) = metadata::valid_annotations(&import.annotations);
    let mut cr = crd::ServiceImport::new(import.name.as_str(), spec);
    cr.metadata.namespace = Some(import.namespace.as_str().into());
    cr.metadata.labels = Some(labels);
    cr.metadata.annotations = (!annotations.is_empty()).then_some(annotations);

    let ready = match state.override_ready() {
        Some((reason, message)) => {
            condition(READY, "False", reason, &message, observed.conditions, now)
        }
        None => match import.conditions.iter().find(|c| c.condition_type == READY) {
            Some(c) => condition(
                READY,
                status_name(c.status),
                &c.reason,
                &c.message,
                observed.conditions,
                now,
            ),
            None => condition(
                READY,
                "Unknown",
                "Pending",
                "the registry gave no readiness",
                observed.conditions,
                now,
            ),
        },
    };
    cr.status = Some(ServiceImportStatus {
        clusters: import
            .clusters
            .iter()
            .map(|c| ClusterStatus { cluster: c.cluster_id.as_str().into() })
            .collect(),
        conditions: vec![ready],
    });
    cr
}

/// The keys of `import`'s labels and annotations that [`service_import`]
/// leaves out, as `labels/<key>` and `annotations/<key>`.
pub fn refused_metadata(import: &mcs_api::ServiceImport) -> Vec<String> {
    let (_, labels) = metadata::valid_labels(&import.labels);
    let (_, annotations) = metadata::valid_annotations(&import.annotations);
    let labels = labels.into_iter().map(|k| format!("labels/{k}"));
    labels.chain(annotations.into_iter().map(|k| format!("annotations/{k}"))).collect()
}

/// The cluster IPs ordered by the import's IP families; IPs of other
/// families (or all, without families) keep their order after them.
fn ips_in_family_order(cluster_ips: &[String], families: &[IpFamily]) -> Vec<String> {
    let rank = |ip: &String| {
        let family = ip.parse::<IpAddr>().ok().map(|ip| family_of(&ip));
        families.iter().position(|f| Some(*f) == family).unwrap_or(families.len())
    };
    let mut ips: Vec<String> =
        cluster_ips.iter().filter(|ip| ip.as_str() != "None" && !ip.is_empty()).cloned().collect();
    ips.sort_by_key(rank);
    ips
}

fn affinity_name(affinity: SessionAffinity) -> &'static str {
    match affinity {
        SessionAffinity::None => "None",
        SessionAffinity::ClientIP => "ClientIP",
    }
}

fn affinity_config(import: &mcs_api::ServiceImport) -> Option<SessionAffinityConfig> {
    match (import.session_affinity, import.session_affinity_timeout_secs) {
        (SessionAffinity::ClientIP, Some(secs)) => Some(SessionAffinityConfig {
            client_ip: Some(ClientIPConfig { timeout_seconds: i32::try_from(secs).ok() }),
        }),
        _ => None,
    }
}

fn policy_name(policy: TrafficPolicy) -> &'static str {
    match policy {
        TrafficPolicy::Cluster => "Cluster",
        TrafficPolicy::Local => "Local",
    }
}

/// An imported service: (namespace, name).
pub type Key = (String, String);

/// The owner reference to the ServiceImport `name` with `uid`, put on the
/// slices so that deleting the import removes them. The derived Service
/// has none: it is created before the ServiceImport, whose `spec.ips` are
/// its cluster IPs, so that the ServiceImport is written once (design
/// §13), and a ServiceImport deleted by hand comes back with the same IPs.
pub fn owner_reference(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", crd::GROUP, crd::STORED_VERSION),
        kind: "ServiceImport".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

/// The derived Service of `import`: no selector (the slices carry the
/// endpoints); ClusterIP for ClusterSetIP, `clusterIP: None` for Headless.
///
/// Its IP families are the import's that this cluster has
/// (`cluster_families`; all of the import's when not known): the API server
/// refuses a Service naming a family it is not configured for, so a
/// dual-stack export imported into a single-stack cluster gets a
/// single-stack Service. With none in common, the cluster picks.
pub fn derived_service(import: &mcs_api::ServiceImport, cluster_families: &[IpFamily]) -> Service {
    let name = derived_name(import.namespace.as_str(), import.name.as_str());
    let headless = import.service_type == ServiceType::Headless;
    let families: Vec<String> = import
        .ip_families
        .iter()
        .filter(|f| cluster_families.is_empty() || cluster_families.contains(f))
        .map(|f| family_name(*f).into())
        .collect();
    let family_policy = match families.len() {
        0 => None,
        1 => Some("SingleStack".to_owned()),
        _ => Some("PreferDualStack".to_owned()),
    };
    let ports = import
        .ports
        .iter()
        .map(|p| ServicePort {
            name: (!p.name.is_empty()).then(|| p.name.clone()),
            protocol: Some(protocol_name(p.protocol).into()),
            port: i32::from(p.port),
            app_protocol: p.app_protocol.clone(),
            ..ServicePort::default()
        })
        .collect::<Vec<_>>();
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(import.namespace.as_str().into()),
            labels: Some(BTreeMap::from([
                (SERVICE_NAME_LABEL.into(), import.name.as_str().into()),
                (MANAGED_BY_LABEL.into(), MANAGED_BY.into()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: headless.then(|| "None".into()),
            ports: (!ports.is_empty()).then_some(ports),
            session_affinity: Some(affinity_name(import.session_affinity).into()),
            session_affinity_config: affinity_config(import),
            ip_families: (!families.is_empty()).then_some(families),
            ip_family_policy: family_policy,
            // Explicit, so that a policy dropped from the import is reset
            // rather than left as last written.
            internal_traffic_policy: Some(
                policy_name(import.internal_traffic_policy.unwrap_or(TrafficPolicy::Cluster))
                    .into(),
            ),
            traffic_distribution: import.traffic_distribution.clone(),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The endpoints per slice: `configured` clamped to 1..=1000.
pub fn chunk_size(configured: usize) -> usize {
    configured.clamp(1, MAX_ENDPOINTS_PER_SLICE)
}

/// The EndpointSlices of `import`: for each source cluster, each address
/// family (the import's families; all seen when it names none) and each
/// chunk of `chunk_size(max_per_slice)` endpoints, sorted by name.
///
/// An endpoint is split by family: its addresses of a family go to that
/// family's slices. Ports are the import's port names with the source
/// cluster's endpoint port numbers, and only the cluster's own ports that
/// are part of the import (a port that lost a conflict is left out).
pub fn endpoint_slices(
    import: &mcs_api::ServiceImport,
    owner: &OwnerReference,
    max_per_slice: usize,
) -> Vec<EndpointSlice> {
    let derived = derived_name(import.namespace.as_str(), import.name.as_str());
    let chunk = chunk_size(max_per_slice);
    let mut slices = Vec::new();
    for cluster in &import.clusters {
        // The slice ports of endpoints reached on `own` numbers where they
        // differ from the port's (mcs_api::Endpoint::target_ports).
        let ports = |own: &BTreeMap<String, u16>| -> Vec<EndpointPort> {
            let mut ports: Vec<EndpointPort> = cluster
                .ports
                .iter()
                .filter(|p| import.ports.iter().any(|i| i.name == p.name))
                .map(|p| EndpointPort {
                    name: Some(p.name.clone()),
                    port: Some(i32::from(own.get(&p.name).copied().unwrap_or(p.endpoint_port()))),
                    protocol: Some(protocol_name(p.protocol).into()),
                    app_protocol: p.app_protocol.clone(),
                })
                .collect();
            ports.sort_by(|a, b| a.name.cmp(&b.name));
            ports
        };
        for family in slice_families(import, cluster) {
            let mut endpoints: Vec<mcs_api::Endpoint> = cluster
                .endpoints
                .iter()
                .filter_map(|e| {
                    let addresses: Vec<IpAddr> =
                        e.addresses.iter().filter(|a| family_of(a) == family).copied().collect();
                    (!addresses.is_empty()).then(|| mcs_api::Endpoint { addresses, ..e.clone() })
                })
                .collect();
            endpoints.sort();
            endpoints.dedup();
            // One slice has one list of ports: endpoints with ports of
            // their own go to slices of their own, after the others (whose
            // slices keep their names).
            let mut by_ports: BTreeMap<&BTreeMap<String, u16>, Vec<mcs_api::Endpoint>> =
                BTreeMap::new();
            for e in &endpoints {
                by_ports.entry(&e.target_ports).or_default().push(e.clone());
            }
            let parts = by_ports.iter().flat_map(|(own, endpoints)| {
                let ports = ports(own);
                endpoints.chunks(chunk).map(move |part| (part, ports.clone()))
            });
            for (n, (part, ports)) in parts.enumerate() {
                slices.push(EndpointSlice {
                    metadata: ObjectMeta {
                        name: Some(slice_name(&derived, cluster.cluster_id.as_str(), family, n)),
                        namespace: Some(import.namespace.as_str().into()),
                        labels: Some(BTreeMap::from([
                            (SERVICE_NAME_LABEL.into(), import.name.as_str().into()),
                            (SOURCE_CLUSTER_LABEL.into(), cluster.cluster_id.as_str().into()),
                            (SLICE_SERVICE_LABEL.into(), derived.clone()),
                            (SLICE_MANAGED_BY_LABEL.into(), MANAGED_BY.into()),
                        ])),
                        owner_references: Some(vec![owner.clone()]),
                        ..ObjectMeta::default()
                    },
                    address_type: family_name(family).into(),
                    endpoints: Some(part.iter().map(slice_endpoint).collect()),
                    ports: Some(ports),
                });
            }
        }
    }
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    slices
}

/// The families a cluster's slices are made for, in order.
fn slice_families(
    import: &mcs_api::ServiceImport,
    cluster: &mcs_api::ImportCluster,
) -> Vec<IpFamily> {
    let seen: std::collections::BTreeSet<IpFamily> =
        cluster.endpoints.iter().flat_map(|e| e.addresses.iter().map(family_of)).collect();
    if import.ip_families.is_empty() {
        seen.into_iter().collect()
    } else {
        import.ip_families.iter().filter(|f| seen.contains(f)).copied().collect()
    }
}

fn slice_endpoint(e: &mcs_api::Endpoint) -> Endpoint {
    Endpoint {
        addresses: e.addresses.iter().map(ToString::to_string).collect(),
        conditions: Some(EndpointConditions {
            ready: Some(e.ready),
            ..EndpointConditions::default()
        }),
        // A hostname that is not a DNS label would make the API server
        // refuse the whole slice: leave it out instead.
        hostname: e.hostname.clone().filter(|h| mcs_api::Label::new(h.as_str()).is_ok()),
        zone: e.zone.clone(),
        ..Endpoint::default()
    }
}

/// The endpoints across `slices`.
pub fn endpoint_count(slices: &[EndpointSlice]) -> usize {
    slices.iter().map(|s| s.endpoints.as_ref().map_or(0, Vec::len)).sum()
}

/// Whether `slice` (one of ours) is of a cluster that `import` no longer
/// lists.
pub fn of_missing_cluster(slice: &EndpointSlice, import: &mcs_api::ServiceImport) -> bool {
    let labels = slice.metadata.labels.as_ref();
    labels.and_then(|l| l.get(SOURCE_CLUSTER_LABEL)).is_some_and(|source| {
        !import.clusters.iter().any(|c| c.cluster_id.as_str() == source.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_api::{ImportCluster, Label};

    fn label(s: &str) -> Label {
        Label::new(s).unwrap()
    }

    fn port(name: &str, port: u16, target: Option<u16>) -> mcs_api::ServicePort {
        mcs_api::ServicePort {
            name: name.into(),
            protocol: Protocol::TCP,
            port,
            app_protocol: None,
            target_port: target,
        }
    }

    fn endpoint(addresses: &[&str], ready: bool) -> mcs_api::Endpoint {
        mcs_api::Endpoint {
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
            ready,
            hostname: None,
            zone: Some("z1".into()),
            target_ports: BTreeMap::new(),
        }
    }

    fn endpoints_v4(n: usize) -> Vec<mcs_api::Endpoint> {
        (0..n)
            .map(|i| {
                endpoint(&[&format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)], true)
            })
            .collect()
    }

    fn import(clusters: Vec<ImportCluster>) -> mcs_api::ServiceImport {
        mcs_api::ServiceImport {
            namespace: label("llm"),
            name: label("web"),
            service_type: ServiceType::ClusterSetIP,
            ports: vec![port("grpc", 9090, None), port("http", 80, None)],
            session_affinity: SessionAffinity::None,
            session_affinity_timeout_secs: None,
            ip_families: vec![IpFamily::IPv4],
            internal_traffic_policy: None,
            traffic_distribution: None,
            labels: BTreeMap::from([("team".into(), "a".into())]),
            annotations: BTreeMap::from([("mcs-registry.io/pool".into(), "p1".into())]),
            clusters,
            conditions: vec![mcs_api::Condition {
                condition_type: READY.into(),
                status: ConditionStatus::True,
                reason: "EndpointsReady".into(),
                message: "ready endpoints exist".into(),
            }],
        }
    }

    fn cluster(id: &str, endpoints: Vec<mcs_api::Endpoint>) -> ImportCluster {
        ImportCluster {
            cluster_id: label(id),
            endpoints,
            ports: vec![port("http", 80, Some(8080)), port("grpc", 9090, None)],
        }
    }

    fn owner() -> OwnerReference {
        owner_reference("web", "uid-1")
    }

    fn now() -> jiff::Timestamp {
        "2026-12-03T09:00:00.5Z".parse().unwrap()
    }

    fn names(slices: &[EndpointSlice]) -> Vec<String> {
        slices.iter().map(|s| s.metadata.name.clone().unwrap()).collect()
    }

    /// Kubernetes' IsDNS1123Subdomain: at most 253 characters, dot-separated
    /// parts of lowercase alphanumerics and '-' that start and end alphanumeric.
    fn is_dns_subdomain(s: &str) -> bool {
        let part_ok = |p: &str| {
            let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            p.starts_with(alnum) && p.ends_with(alnum) && p.chars().all(|c| alnum(c) || c == '-')
        };
        s.len() <= 253 && s.split('.').all(part_ok)
    }

    #[test]
    fn names_are_deterministic_dns_safe_and_distinct_per_service() {
        let a = derived_name("llm", "web");
        assert_eq!(a, derived_name("llm", "web"));
        assert_eq!(a.len(), 24);
        assert!(a.starts_with("derived-"));
        assert!(mcs_api::Label::new(a.as_str()).is_ok(), "{a}");
        assert_ne!(a, derived_name("llm", "web2"));
        assert_ne!(a, derived_name("ll", "mweb"));
        let long_cluster = "c".repeat(63);
        let s = slice_name(&a, &long_cluster, IpFamily::IPv6, 999);
        assert!(is_dns_subdomain(&s), "{s}");
        assert_eq!(slice_name(&a, "east", IpFamily::IPv4, 0), format!("{a}-east-ipv4-0"));
    }

    #[test]
    fn slices_chunk_at_100_and_scale_down_to_fewer() {
        let imp = import(vec![cluster("east", endpoints_v4(2500))]);
        let slices = endpoint_slices(&imp, &owner(), 100);
        assert_eq!(slices.len(), 25);
        assert!(slices.iter().all(|s| s.endpoints.as_ref().unwrap().len() == 100));
        let again = endpoint_slices(&imp, &owner(), 100);
        assert_eq!(slices, again, "deterministic");
        let mut all: Vec<_> = slices
            .iter()
            .flat_map(|s| s.endpoints.clone().unwrap())
            .map(|e| e.addresses[0].clone())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 2500, "every endpoint exactly once");

        let smaller = import(vec![cluster("east", endpoints_v4(150))]);
        let kept = endpoint_slices(&smaller, &owner(), 100);
        assert_eq!(
            kept.iter().map(|s| s.endpoints.as_ref().unwrap().len()).collect::<Vec<_>>(),
            [100, 50]
        );
        let kept_names: std::collections::BTreeSet<_> = names(&kept).into_iter().collect();
        let to_delete: Vec<_> =
            names(&slices).into_iter().filter(|n| !kept_names.contains(n)).collect();
        assert_eq!(to_delete.len(), 23);
        assert!(kept_names.iter().all(|n| names(&slices).contains(n)), "the kept names are reused");
    }

    #[test]
    fn slice_size_is_clamped_to_the_api_cap() {
        assert_eq!(chunk_size(0), 1);
        assert_eq!(chunk_size(5000), 1000);
        let imp = import(vec![cluster("east", endpoints_v4(2500))]);
        let slices = endpoint_slices(&imp, &owner(), 5000);
        assert_eq!(
            slices.iter().map(|s| s.endpoints.as_ref().unwrap().len()).collect::<Vec<_>>(),
            [1000, 1000, 500]
        );
    }

    #[test]
    fn dual_stack_endpoints_split_by_family_in_the_import_order() {
        let mut imp = import(vec![cluster(
            "east",
            vec![endpoint(&["10.0.0.1", "fd00::1"], true), endpoint(&["fd00::2"], false)],
        )]);
        imp.ip_families = vec![IpFamily::IPv6, IpFamily::IPv4];
        let slices = endpoint_slices(&imp, &owner(), 100);
        let d = derived_name("llm", "web");
        assert_eq!(names(&slices), [format!("{d}-east-ipv4-0"), format!("{d}-east-ipv6-0")]);
        assert_eq!(slices[0].address_type, "IPv4");
        assert_eq!(slices[0].endpoints.as_ref().unwrap().len(), 1);
        assert_eq!(slices[0].endpoints.as_ref().unwrap()[0].addresses, ["10.0.0.1"]);
        let v6 = slices[1].endpoints.as_ref().unwrap();
        assert_eq!(slices[1].address_type, "IPv6");
        assert_eq!(
            v6.iter().map(|e| e.addresses.clone()).collect::<Vec<_>>(),
            [["fd00::1"], ["fd00::2"]]
        );
        assert_eq!(v6[1].conditions.as_ref().unwrap().ready, Some(false));

        // A single-stack import gets no slices of the other family.
        imp.ip_families = vec![IpFamily::IPv4];
        assert_eq!(names(&endpoint_slices(&imp, &owner(), 100)), [format!("{d}-east-ipv4-0")]);
    }

    /// Issue 29, item 2: endpoints reached on another port (a named
    /// targetPort during a rollout) go to slices of their own ports, after
    /// the others, whose slice names do not change.
    #[test]
    fn endpoints_with_ports_of_their_own_get_slices_of_those_ports() {
        let mut moved = endpoint(&["10.1.10.2"], true);
        moved.target_ports = BTreeMap::from([("http".into(), 9090)]);
        let mut east = cluster("east", endpoints_v4(150));
        east.endpoints.push(moved);
        let slices = endpoint_slices(&import(vec![east]), &owner(), 100);
        let d = derived_name("llm", "web");
        assert_eq!(
            names(&slices),
            [0, 1, 2].map(|n| slice_name(&d, "east", IpFamily::IPv4, n)),
            "the usual slices first, then the moved endpoint's"
        );
        let http = |s: &EndpointSlice| {
            s.ports.iter().flatten().find(|p| p.name.as_deref() == Some("http")).unwrap().port
        };
        let addresses = |s: &EndpointSlice| s.endpoints.iter().flatten().count();
        assert_eq!((http(&slices[0]), addresses(&slices[0])), (Some(8080), 100));
        assert_eq!((http(&slices[1]), addresses(&slices[1])), (Some(8080), 50));
        assert_eq!((http(&slices[2]), addresses(&slices[2])), (Some(9090), 1));
        assert_eq!(slices[2].endpoints.as_ref().unwrap()[0].addresses, ["10.1.10.2"]);
        let grpc = slices[2].ports.iter().flatten().find(|p| p.name.as_deref() == Some("grpc"));
        assert_eq!(grpc.and_then(|p| p.port), Some(9090), "the other ports as the cluster's");
    }

    #[test]
    fn slices_carry_the_labels_owner_and_the_clusters_endpoint_ports() {
        let mut west = cluster("west", vec![endpoint(&["10.2.0.1"], true)]);
        // west's grpc lost a conflict: the registry left it out.
        west.ports = vec![port("http", 80, None)];
        let mut east = cluster("east", vec![endpoint(&["10.1.0.1"], true)]);
        east.endpoints[0].hostname = Some("pod-0".into());
        let mut bad = endpoint(&["10.1.0.2"], true);
        bad.hostname = Some("Not_A_Label".into());
        east.endpoints.push(bad);
        let imp = import(vec![east, west]);
        let slices = endpoint_slices(&imp, &owner(), 100);
        assert_eq!(slices.len(), 2);
        let labels = slices[0].metadata.labels.clone().unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(labels[SOURCE_CLUSTER_LABEL], "east");
        assert_eq!(labels[SLICE_SERVICE_LABEL], derived_name("llm", "web"));
        assert_eq!(labels[SLICE_MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(slices[0].metadata.owner_references.clone().unwrap(), [owner()]);
        assert_eq!(slices[0].metadata.namespace.as_deref(), Some("llm"));
        let ports = |s: &EndpointSlice| {
            s.ports
                .clone()
                .unwrap()
                .into_iter()
                .map(|p| (p.name.unwrap(), p.port.unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ports(&slices[0]), [("grpc".to_owned(), 9090), ("http".to_owned(), 8080)]);
        assert_eq!(ports(&slices[1]), [("http".to_owned(), 80)]);
        assert_eq!(slices[1].metadata.labels.as_ref().unwrap()[SOURCE_CLUSTER_LABEL], "west");
        let eps = slices[0].endpoints.clone().unwrap();
        assert_eq!(eps[0].hostname.as_deref(), Some("pod-0"));
        assert_eq!(eps[0].zone.as_deref(), Some("z1"));
        assert_eq!(eps[1].hostname, None, "an invalid hostname is left out, not the slice");
    }

    #[test]
    fn clusterset_ip_import_gets_ips_in_family_order_and_a_cluster_ip_service() {
        let mut imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1"], false)])]);
        imp.ip_families = vec![IpFamily::IPv6, IpFamily::IPv4];
        imp.session_affinity = SessionAffinity::ClientIP;
        imp.session_affinity_timeout_secs = Some(30);
        imp.internal_traffic_policy = Some(TrafficPolicy::Local);
        imp.traffic_distribution = Some("PreferClose".into());
        imp.conditions[0].status = ConditionStatus::False;
        imp.conditions[0].reason = "NoReadyEndpoints".into();
        let ips = ["10.96.0.10".to_owned(), "fd00:96::10".to_owned()];
        let observed = Observed { cluster_ips: &ips, ..Observed::default() };
        let si = service_import(&imp, observed, &RegistryState::Available, now());
        assert_eq!(si.spec.type_, "ClusterSetIP");
        assert_eq!(si.spec.ips, ["fd00:96::10", "10.96.0.10"]);
        assert_eq!(si.spec.ip_families, ["IPv6", "IPv4"]);
        assert_eq!(
            si.spec.ports.iter().map(|p| (p.name.as_str(), p.port)).collect::<Vec<_>>(),
            [("grpc", 9090), ("http", 80)]
        );
        assert_eq!(si.spec.session_affinity.as_deref(), Some("ClientIP"));
        assert_eq!(
            si.spec.session_affinity_config.clone().unwrap().client_ip.unwrap().timeout_seconds,
            Some(30)
        );
        assert_eq!(si.spec.internal_traffic_policy.as_deref(), Some("Local"));
        assert_eq!(si.spec.traffic_distribution.as_deref(), Some("PreferClose"));
        assert_eq!(si.metadata.labels.clone().unwrap()["team"], "a");
        assert_eq!(si.metadata.labels.clone().unwrap()[MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(si.metadata.annotations.clone().unwrap()["mcs-registry.io/pool"], "p1");
        let status = si.status.unwrap();
        assert_eq!(status.clusters, [ClusterStatus { cluster: "east".into() }]);
        let ready = &status.conditions[0];
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str(), ready.reason.as_str()),
            (READY, "False", "NoReadyEndpoints")
        );
        assert_eq!(
            ready.last_transition_time.0,
            "2026-12-03T09:00:00Z".parse::<jiff::Timestamp>().unwrap()
        );

        let svc = derived_service(&imp, &[IpFamily::IPv4, IpFamily::IPv6]);
        let spec = svc.spec.unwrap();
        assert_eq!(svc.metadata.name.unwrap(), derived_name("llm", "web"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(spec.selector, None);
        assert_eq!(spec.ip_families.unwrap(), ["IPv6", "IPv4"]);
        assert_eq!(spec.ip_family_policy.as_deref(), Some("PreferDualStack"));
        assert_eq!(spec.ports.unwrap().iter().map(|p| p.port).collect::<Vec<_>>(), [9090, 80]);
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Local"));
        let labels = svc.metadata.labels.unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(labels[MANAGED_BY_LABEL], MANAGED_BY);
        assert_eq!(svc.metadata.owner_references, None);
        // Zero ready endpoints: the slices are still there, not ready.
        let slices = endpoint_slices(&imp, &owner(), 100);
        assert_eq!(
            slices[0].endpoints.as_ref().unwrap()[0].conditions.as_ref().unwrap().ready,
            Some(false)
        );
    }

    #[test]
    fn a_dual_stack_import_gets_a_single_stack_service_in_a_single_stack_cluster() {
        let mut imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1", "fd00::1"], true)])]);
        imp.ip_families = vec![IpFamily::IPv6, IpFamily::IPv4];
        let spec = derived_service(&imp, &[IpFamily::IPv4]).spec.unwrap();
        assert_eq!(spec.ip_families.unwrap(), ["IPv4"]);
        assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
        // No family in common: the cluster picks.
        imp.ip_families = vec![IpFamily::IPv6];
        let spec = derived_service(&imp, &[IpFamily::IPv4]).spec.unwrap();
        assert_eq!((spec.ip_families, spec.ip_family_policy), (None, None));
        // Not known: the import's.
        let spec = derived_service(&imp, &[]).spec.unwrap();
        assert_eq!(spec.ip_families.unwrap(), ["IPv6"]);
    }

    #[test]
    fn headless_import_has_no_ips_and_a_headless_service() {
        let mut imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1"], true)])]);
        imp.service_type = ServiceType::Headless;
        let ips = ["10.96.0.10".to_owned()];
        let si = service_import(
            &imp,
            Observed { cluster_ips: &ips, ..Observed::default() },
            &RegistryState::Available,
            now(),
        );
        assert_eq!(si.spec.type_, "Headless");
        assert!(si.spec.ips.is_empty());
        let spec = derived_service(&imp, &[]).spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
    }

    #[test]
    fn ready_keeps_its_transition_time_and_the_registry_state_overrides_it() {
        let imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1"], true)])]);
        let first = service_import(&imp, Observed::default(), &RegistryState::Available, now());
        let conditions = first.status.clone().unwrap().conditions;
        let later: jiff::Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let again = service_import(
            &imp,
            Observed { conditions: &conditions, ..Observed::default() },
            &RegistryState::Available,
            later,
        );
        assert_eq!(again.status, first.status, "nothing changed, nothing to write");

        let down = RegistryState::Unreachable("connection refused".into());
        let si = service_import(
            &imp,
            Observed { conditions: &conditions, ..Observed::default() },
            &down,
            later,
        );
        let ready = &si.status.unwrap().conditions[0];
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", REGISTRY_UNAVAILABLE));
        assert!(ready.message.contains("connection refused"), "{}", ready.message);
        assert_eq!(ready.last_transition_time.0, later);

        let current = first.status.unwrap();
        let status = unavailable_status(Some(&current), &RegistryState::Incomplete, later).unwrap();
        assert_eq!(status.clusters, current.clusters, "everything else kept");
        assert_eq!(status.conditions.len(), 1);
        assert_eq!(status.conditions[0].reason, REGISTRY_INCOMPLETE);
        assert_eq!(unavailable_status(Some(&current), &RegistryState::Available, later), None);
        let again = unavailable_status(Some(&status), &RegistryState::Incomplete, now()).unwrap();
        assert_eq!(again, status, "an unchanged outage writes nothing new");
    }

    #[test]
    fn labels_and_annotations_kubernetes_would_refuse_are_left_out_of_the_service_import() {
        let mut imp = import(vec![cluster("east", endpoints_v4(1))]);
        imp.labels.insert("tier".into(), "front end".into());
        imp.annotations.insert("a note".into(), "x".into());
        let si = service_import(&imp, Observed::default(), &RegistryState::Available, now());
        let labels = si.metadata.labels.unwrap();
        assert_eq!(labels.get("team").map(String::as_str), Some("a"), "the valid ones stay");
        assert!(!labels.contains_key("tier"));
        let annotations = si.metadata.annotations.unwrap();
        assert!(annotations.contains_key("mcs-registry.io/pool"));
        assert!(!annotations.contains_key("a note"));
        assert_eq!(refused_metadata(&imp), ["labels/tier", "annotations/a note"]);
        assert!(refused_metadata(&import(vec![])).is_empty());
    }

    #[test]
    fn slices_count_their_endpoints_and_only_the_slices_are_owned_by_the_import() {
        let imp = import(vec![
            cluster("east", endpoints_v4(120)),
            cluster("west", vec![endpoint(&["10.9.0.1"], true)]),
            cluster("north", vec![]),
        ]);
        let slices = endpoint_slices(&imp, &owner_reference("web", "uid-1"), 100);
        assert_eq!(slices.len(), 3, "east: 2 chunks, west: 1, north: none");
        assert_eq!(endpoint_count(&slices), 121);
        assert_eq!(endpoint_count(&slices[..1]), 100);
        for s in &slices {
            assert_eq!(s.metadata.owner_references.clone().unwrap()[0].uid, "uid-1");
        }
        let svc = derived_service(&imp, &[]);
        assert_eq!(svc.metadata.owner_references, None, "created before its ServiceImport");
    }

    #[test]
    fn protocols_are_named_as_the_kubernetes_api_spells_them() {
        let names: Vec<&str> =
            [Protocol::TCP, Protocol::UDP, Protocol::SCTP].into_iter().map(protocol_name).collect();
        assert_eq!(names, ["TCP", "UDP", "SCTP"]);
    }

    #[test]
    fn cluster_ips_leave_out_none_and_empty_and_follow_the_families() {
        let ips = |v: &[&str], families: &[IpFamily]| {
            let v: Vec<String> = v.iter().map(|s| (*s).to_owned()).collect();
            ips_in_family_order(&v, families)
        };
        assert!(ips(&["None"], &[IpFamily::IPv4]).is_empty(), "a headless Service's");
        assert!(ips(&[""], &[IpFamily::IPv4]).is_empty());
        assert_eq!(
            ips(&["10.0.0.1", "fd00::1", ""], &[IpFamily::IPv6, IpFamily::IPv4]),
            ["fd00::1", "10.0.0.1"]
        );
        assert_eq!(ips(&["fd00::1", "10.0.0.1"], &[]), ["fd00::1", "10.0.0.1"], "order kept");
    }

    #[test]
    fn the_derived_service_carries_each_port_field_its_affinity_and_namespace() {
        let mut imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1"], true)])]);
        let grpc = mcs_api::ServicePort {
            app_protocol: Some("kubernetes.io/h2c".into()),
            ..port("grpc", 9090, None)
        };
        let dns = mcs_api::ServicePort { protocol: Protocol::UDP, ..port("", 53, None) };
        imp.ports = vec![grpc, dns];
        imp.session_affinity = SessionAffinity::ClientIP;
        imp.session_affinity_timeout_secs = Some(30);
        imp.traffic_distribution = Some("PreferClose".into());
        let svc = derived_service(&imp, &[]);
        assert_eq!(svc.metadata.namespace.as_deref(), Some("llm"));
        let spec = svc.spec.unwrap();
        let ports: Vec<_> = spec
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name, p.protocol, p.port, p.app_protocol))
            .collect();
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            ports,
            [
                (some("grpc"), some("TCP"), 9090, some("kubernetes.io/h2c")),
                (None, some("UDP"), 53, None),
            ]
        );
        assert_eq!(spec.session_affinity.as_deref(), Some("ClientIP"));
        let config = spec.session_affinity_config.unwrap().client_ip.unwrap();
        assert_eq!(config.timeout_seconds, Some(30));
        assert_eq!(spec.traffic_distribution.as_deref(), Some("PreferClose"));
    }

    #[test]
    fn a_clusters_port_the_import_left_out_is_not_on_its_slices() {
        let mut imp = import(vec![cluster("east", vec![endpoint(&["10.1.0.1"], true)])]);
        // grpc lost a conflict: the import carries http alone.
        imp.ports = vec![port("http", 80, None)];
        let slices = endpoint_slices(&imp, &owner(), 100);
        let names: Vec<_> =
            slices[0].ports.iter().flatten().map(|p| p.name.clone().unwrap()).collect();
        assert_eq!(names, ["http"]);
    }

    #[test]
    fn a_slice_is_of_a_missing_cluster_when_its_source_is_not_listed() {
        let two = import(vec![cluster("east", endpoints_v4(2)), cluster("west", endpoints_v4(1))]);
        let slices = endpoint_slices(&two, &owner(), 100);
        assert_eq!(slices.len(), 2);
        assert!(slices.iter().all(|s| !of_missing_cluster(s, &two)));
        let west_only = import(vec![cluster("west", endpoints_v4(1))]);
        let missing: BTreeMap<&str, bool> = slices
            .iter()
            .map(|s| {
                let source = s.metadata.labels.as_ref().unwrap()[SOURCE_CLUSTER_LABEL].as_str();
                (source, of_missing_cluster(s, &west_only))
            })
            .collect();
        assert_eq!(missing, BTreeMap::from([("east", true), ("west", false)]));
        // Unlabelled: no cluster's, so none missing.
        assert!(!of_missing_cluster(&EndpointSlice::default(), &west_only));
    }
}
