//! Builders of records for tests of this crate and of the crates above it
//! (feature `fixtures`).

use crate::{Body, Key, Record, Version};
use mcs_api::{
    Endpoint, ExportKey, ExportSpec, HostPort, Label, Location, NonBlank, Pool, PoolKey, Protocol,
    ServicePort, ServiceType, SessionAffinity,
};

/// A label, panicking on an invalid one (tests only).
pub fn label(s: &str) -> Label {
    Label::new(s).expect("valid label")
}

/// The key of pool `dgd_name` in cluster `c1`, namespace `llm`.
pub fn pool_key(dgd_name: &str) -> PoolKey {
    PoolKey { cluster_id: label("c1"), namespace: label("llm"), dgd_name: label(dgd_name) }
}

/// A served pool named `dgd_name` serving `model`.
pub fn pool(dgd_name: &str, model: &str) -> Pool {
    let key = pool_key(dgd_name);
    Pool {
        pool_id: key.id(),
        pool_key: key,
        model: NonBlank::new(model).expect("model"),
        location: Location { region: NonBlank::new("us-east-1").expect("region"), zone: None },
        capacity: mcs_api::Capacity { workers: 4 },
        relay_address: HostPort::new("10.0.1.7:9000").expect("address"),
        relay_identities: vec![],
    }
}

/// A pool record at `(generation, writer)` held by `owner` until `lease_until_ms`.
pub fn mk_pool(
    dgd_name: &str,
    generation: u64,
    writer: &str,
    owner: Option<&str>,
    lease_until_ms: Option<u64>,
) -> Record {
    let body = pool(dgd_name, "m");
    Record {
        terms: None,
        key: Key::Pool { pool_id: body.pool_id.clone() },
        version: Version::new(generation, writer),
        owner: owner.map(str::to_owned),
        lease_until_ms,
        changed_at_ms: generation,
        body: Body::Pool(body),
    }
}

/// A tombstone of pool `dgd_name` at `(generation, writer)`.
pub fn mk_tombstone(dgd_name: &str, generation: u64, writer: &str) -> Record {
    Record {
        terms: None,
        key: Key::Pool { pool_id: pool_key(dgd_name).id() },
        version: Version::new(generation, writer),
        owner: None,
        lease_until_ms: None,
        changed_at_ms: generation,
        body: Body::Tombstone,
    }
}

/// A cluster lease record held by `owner` until `lease_until_ms`.
pub fn mk_cluster(cluster: &str, generation: u64, owner: &str, lease_until_ms: u64) -> Record {
    Record {
        terms: None,
        key: Key::Cluster { cluster_id: label(cluster) },
        version: Version::new(generation, "w"),
        owner: Some(owner.into()),
        lease_until_ms: Some(lease_until_ms),
        changed_at_ms: generation,
        body: Body::Cluster,
    }
}

/// A named TCP port.
pub fn port(name: &str, number: u16) -> ServicePort {
    ServicePort {
        name: name.into(),
        protocol: Protocol::TCP,
        port: number,
        app_protocol: None,
        target_port: None,
    }
}

/// A ClusterSetIP export exported at `exported_at_secs` with one ready endpoint.
pub fn mk_export_spec(exported_at_secs: i64, ports: Vec<ServicePort>) -> ExportSpec {
    ExportSpec {
        service_type: ServiceType::ClusterSetIP,
        ports,
        session_affinity: SessionAffinity::None,
        session_affinity_timeout_secs: None,
        exported_at: jiff::Timestamp::from_second(exported_at_secs).expect("timestamp"),
        endpoints: vec![Endpoint {
            addresses: vec!["10.1.0.5".parse().expect("ip")],
            ready: true,
            hostname: None,
            zone: None,
            target_ports: Default::default(),
        }],
        labels: Default::default(),
        annotations: Default::default(),
        ip_families: vec![],
        internal_traffic_policy: None,
        traffic_distribution: None,
    }
}

/// `n` distinct ready IPv4 endpoints in one zone (`10.{i/65536}.{..}.{..}`):
/// an export's endpoints as a cluster has them, which compress well.
pub fn mk_endpoints(n: usize) -> Vec<Endpoint> {
    (0..n)
        .map(|i| Endpoint {
            addresses: vec![std::net::Ipv4Addr::from(0x0a00_0000 + i as u32).into()],
            ready: true,
            hostname: None,
            zone: Some("us-east-1a".into()),
            target_ports: Default::default(),
        })
        .collect()
}

/// `n` endpoints as [`mk_endpoints`], each with a pseudo-random hostname of
/// 60 letters (a fixed sequence): endpoints that barely compress.
pub fn mk_incompressible_endpoints(n: usize) -> Vec<Endpoint> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut letter = move || {
        state =
            state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        char::from(b'a' + ((state >> 33) % 26) as u8)
    };
    let mut endpoints = mk_endpoints(n);
    for endpoint in &mut endpoints {
        endpoint.hostname = Some((0..60).map(|_| letter()).collect());
    }
    endpoints
}

/// An export record of service `llm/{service}` by `cluster` at `generation`.
pub fn mk_export(cluster: &str, service: &str, generation: u64, spec: ExportSpec) -> Record {
    Record {
        terms: None,
        key: Key::Export(ExportKey {
            cluster_id: label(cluster),
            namespace: label("llm"),
            name: label(service),
        }),
        version: Version::new(generation, "w"),
        owner: None,
        lease_until_ms: None,
        changed_at_ms: generation,
        body: Body::Export(spec),
    }
}
