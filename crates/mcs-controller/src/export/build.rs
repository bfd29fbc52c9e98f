//! What a ServiceExport sends to the registry, built from its Service and
//! the Service's EndpointSlices; a pure function, so hashing and every
//! field's mapping are tested without an API server.
//!
//! Exported labels and annotations that Kubernetes would refuse on the
//! importing clusters' ServiceImports make the ServiceExport invalid here,
//! naming the key, rather than exported to fail everywhere else.

use crate::crd::ServiceExport;
use crate::import::plan::SLICE_MANAGED_BY_LABEL;
use crate::{MANAGED_BY, metadata};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mcs_api::{
    Endpoint, ExportRequest, ExportSpec, IpFamily, Protocol, ServicePort, ServiceType,
    SessionAffinity, TrafficPolicy,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Reason of `Valid=False` when the ServiceExport has no Service.
pub const NO_SERVICE: &str = "NoService";
/// Reason of `Valid=False` for an ExternalName Service.
pub const INVALID_SERVICE_TYPE: &str = "InvalidServiceType";
/// Reason of `Valid=False` for an `exportedLabels` entry Kubernetes would
/// refuse (not one of the MCS API's reasons, which name none for it).
pub const INVALID_EXPORTED_LABELS: &str = "InvalidExportedLabels";
/// Reason of `Valid=False` for `exportedAnnotations` Kubernetes would
/// refuse (a key, or their total size).
pub const INVALID_EXPORTED_ANNOTATIONS: &str = "InvalidExportedAnnotations";

/// A ServiceExport's export, or why it cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Built {
    /// The export to send (without incarnation and generation).
    Valid(Box<ExportRequest>),
    /// `Valid=False` with this reason and message; nothing is exported.
    Invalid {
        /// `NoService`, `InvalidServiceType`, `InvalidExportedLabels` or
        /// `InvalidExportedAnnotations`.
        reason: &'static str,
        /// A human sentence.
        message: String,
    },
}

/// Builds the export of `export` from its Service (if any) and the
/// Service's EndpointSlices. Deterministic: the same objects in any order
/// build the same request. Slices managed by this controller (those it
/// imported) are not the Service's own endpoints and are left out.
pub fn build(export: &ServiceExport, service: Option<&Service>, slices: &[EndpointSlice]) -> Built {
    let name = export.metadata.name.as_deref().unwrap_or_default();
    if let Some(problem) = metadata::labels_problem(&export.spec.exported_labels) {
        return Built::Invalid {
            reason: INVALID_EXPORTED_LABELS,
            message: format!("exportedLabels: {problem}"),
        };
    }
    if let Some(problem) = metadata::annotations_problem(&export.spec.exported_annotations) {
        return Built::Invalid {
            reason: INVALID_EXPORTED_ANNOTATIONS,
            message: format!("exportedAnnotations: {problem}"),
        };
    }
    let Some(service) = service else {
        return Built::Invalid {
            reason: NO_SERVICE,
            message: format!("no Service named {name} in the ServiceExport's namespace"),
        };
    };
    let spec = service.spec.clone().unwrap_or_default();
    if spec.type_.as_deref() == Some("ExternalName") {
        return Built::Invalid {
            reason: INVALID_SERVICE_TYPE,
            message: format!("Service {name} is of type ExternalName, which cannot be exported"),
        };
    }
    let service_type = if spec.cluster_ip.as_deref() == Some("None") {
        ServiceType::Headless
    } else {
        ServiceType::ClusterSetIP
    };
    let mut slices: Vec<&EndpointSlice> =
        slices.iter().filter(|s| s.address_type != "FQDN" && !imported_by_us(s)).collect();
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    let ports: Vec<ServicePort> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            let name = p.name.clone().unwrap_or_default();
            let protocol = to_protocol(p.protocol.as_deref());
            let port = to_port(p.port).unwrap_or_default();
            let from_slices = slices
                .iter()
                .flat_map(|s| s.ports.iter().flatten())
                .find(|sp| {
                    sp.name.as_deref().unwrap_or_default() == name
                        && to_protocol(sp.protocol.as_deref()) == protocol
                })
                .and_then(|sp| sp.port.and_then(to_port));
            let numeric = match &p.target_port {
                Some(IntOrString::Int(n)) => to_port(*n),
                _ => None,
            };
            ServicePort {
                name,
                protocol,
                port,
                app_protocol: p.app_protocol.clone(),
                target_port: from_slices.or(numeric).or(Some(port)),
            }
        })
        .collect();

    let (session_affinity, session_affinity_timeout_secs) = match spec.session_affinity.as_deref() {
        Some("ClientIP") => (
            SessionAffinity::ClientIP,
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .and_then(|t| u32::try_from(t).ok()),
        ),
        _ => (SessionAffinity::None, None),
    };

    let mut endpoints: Vec<Endpoint> = slices
        .iter()
        .flat_map(|s| {
            let own = own_ports(&ports, s);
            s.endpoints.iter().flatten().map(move |e| (e, own.clone()))
        })
        .filter_map(|(e, target_ports)| {
            let mut addresses: Vec<IpAddr> =
                e.addresses.iter().filter_map(|a| a.parse().ok()).collect();
            if addresses.is_empty() {
                return None;
            }
            addresses.sort();
            addresses.dedup();
            Some(Endpoint {
                addresses,
                // Per the EndpointSlice API, an unknown readiness is ready.
                ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
                hostname: e.hostname.clone(),
                zone: e.zone.clone(),
                target_ports,
            })
        })
        .collect();
    endpoints.sort();
    endpoints.dedup();

    let ip_families = spec
        .ip_families
        .iter()
        .flatten()
        .filter_map(|f| match f.as_str() {
            "IPv4" => Some(IpFamily::IPv4),
            "IPv6" => Some(IpFamily::IPv6),
            _ => None,
        })
        .collect();
    let internal_traffic_policy = match spec.internal_traffic_policy.as_deref() {
        Some("Cluster") => Some(TrafficPolicy::Cluster),
        Some("Local") => Some(TrafficPolicy::Local),
        _ => None,
    };
    let exported = export.spec.clone();
    Built::Valid(Box::new(ExportRequest {
        service_type,
        ports,
        session_affinity,
        session_affinity_timeout_secs,
        exported_at: export
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0),
        endpoints,
        labels: exported.exported_labels,
        annotations: exported.exported_annotations,
        ip_families,
        internal_traffic_policy,
        traffic_distribution: spec.traffic_distribution,
        incarnation: None,
        generation: None,
    }))
}

/// Hex SHA-256 of an export's content (everything but the writer's
/// incarnation and generation): equal hashes, nothing to send. Also
/// computed over the registry's copy (`GET /v1/exports`) to find drift.
pub fn content_hash(spec: &ExportSpec) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(serde_json::to_vec(spec).unwrap_or_default());
    let mut hex = String::with_capacity(2 * digest.len());
    for b in digest {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

/// The numbers `slice` gives the export's `ports` where they differ from
/// the port's `target_port` (the first slice's): a named `targetPort` that
/// resolves to other container ports on this slice's pods. The endpoints of
/// the slice carry them, so that each is imported with its own port.
fn own_ports(ports: &[ServicePort], slice: &EndpointSlice) -> BTreeMap<String, u16> {
    ports
        .iter()
        .filter_map(|p| {
            let number = slice
                .ports
                .iter()
                .flatten()
                .find(|sp| {
                    sp.name.as_deref().unwrap_or_default() == p.name
                        && to_protocol(sp.protocol.as_deref()) == p.protocol
                })
                .and_then(|sp| sp.port.and_then(to_port))?;
            (number != p.endpoint_port()).then(|| (p.name.clone(), number))
        })
        .collect()
}

/// Whether `slice` is one this controller wrote for an import.
pub fn imported_by_us(slice: &EndpointSlice) -> bool {
    slice.metadata.labels.as_ref().and_then(|l| l.get(SLICE_MANAGED_BY_LABEL)).map(String::as_str)
        == Some(MANAGED_BY)
}

fn to_protocol(p: Option<&str>) -> Protocol {
    match p {
        Some("UDP") => Protocol::UDP,
        Some("SCTP") => Protocol::SCTP,
        _ => Protocol::TCP,
    }
}

fn to_port(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests;
