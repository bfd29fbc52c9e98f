//! The pure half of pool discovery (docs/design.md §14): from the
//! EndpointSlices imported into this cluster, and the annotations of their
//! ServiceImports, to the served pools and router replicas. No I/O, no
//! clock: every registry instance holding the same slices derives the same
//! lists, so their fingerprints agree.

use crate::config::PoolDiscovery;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use mcs_api::{
    Capacity, HostPort, Label, Location, NonBlank, Pool, PoolId, PoolKey, RouterId, RouterReplica,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The standard MCS label naming the imported service (KEP-1645).
pub const MCS_SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
/// The standard MCS label (or annotation) naming the source cluster.
pub const MCS_SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";
/// The EndpointSlice API's label naming a slice's Service.
pub const K8S_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// The annotation of Karmada's imported slices naming the execution
/// namespace of their source cluster (`karmada-es-<cluster>`).
pub const KARMADA_WORK_NAMESPACE: &str = "work.karmada.io/namespace";
/// Prefix of Karmada's execution namespaces.
pub const KARMADA_ES_PREFIX: &str = "karmada-es-";
/// Prefix of Karmada's imported slices: `imported-<cluster>-<slice>`.
pub const KARMADA_SLICE_PREFIX: &str = "imported-";
/// Prefix of Karmada's derived Services: `derived-<service>`.
pub const KARMADA_DERIVED_PREFIX: &str = "derived-";
/// The longest Kubernetes object name: a Karmada slice name carries its
/// cluster only while `imported-<cluster>-<slice>` fits in it.
pub const MAX_OBJECT_NAME: usize = 253;

/// The pool's model (exported annotation of the PoolRelay Service).
pub const MODEL_ANNOTATION: &str = "mcs-registry.io/model";
/// The pool's region.
pub const REGION_ANNOTATION: &str = "mcs-registry.io/region";
/// The pool's zone.
pub const ZONE_ANNOTATION: &str = "mcs-registry.io/zone";
/// The pool's worker count.
pub const WORKERS_ANNOTATION: &str = "mcs-registry.io/workers";

/// What selects the slices and names the router Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// `mcs` or `karmada`.
    pub mode: PoolDiscovery,
    /// The router Service's namespace.
    pub router_namespace: String,
    /// The router Service's name.
    pub router_service: String,
    /// The router Service's TCP port routers are reached on.
    pub router_port_name: String,
    /// The suffix of PoolRelay Services.
    pub pool_service_suffix: String,
}

/// Annotations by `(namespace, name)` of ServiceImport.
pub type ImportAnnotations = BTreeMap<(String, String), BTreeMap<String, String>>;

/// What the slices come to: the lists to serve and what was left out, and
/// why (each line names the object; logged by the caller when it changes).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    /// Pools, by id.
    pub pools: BTreeMap<PoolId, Pool>,
    /// Router replicas, by id.
    pub routers: BTreeMap<RouterId, RouterReplica>,
    /// What was skipped, and why.
    pub skipped: BTreeSet<String>,
}

/// The imported service and source cluster a slice belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SliceOf {
    /// The service's namespace (the slice's).
    pub namespace: String,
    /// The service's name, as exported.
    pub service: String,
    /// The cluster that exported it.
    pub cluster: String,
}

/// Which imported service and source cluster `slice` carries; `Ok(None)`
/// for a slice that is no import of `mode`, `Err` for one that is but
/// cannot be placed (why).
pub fn identify(mode: PoolDiscovery, slice: &EndpointSlice) -> Result<Option<SliceOf>, String> {
    let meta = &slice.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let label = |key: &str| meta.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    match mode {
        PoolDiscovery::Registrations => Ok(None),
        PoolDiscovery::Mcs => {
            let Some(service) = label(MCS_SERVICE_NAME) else { return Ok(None) };
            let Some(cluster) =
                label(MCS_SOURCE_CLUSTER).or_else(|| annotation(MCS_SOURCE_CLUSTER))
            else {
                return Err(format!(
                    "slice {namespace}/{name}: no {MCS_SOURCE_CLUSTER} label or annotation"
                ));
            };
            Ok(Some(SliceOf { namespace, service, cluster }))
        }
        PoolDiscovery::Karmada => {
            let Some(rest) = name.strip_prefix(KARMADA_SLICE_PREFIX) else { return Ok(None) };
            let Some(service) = label(K8S_SERVICE_NAME)
                .and_then(|s| s.strip_prefix(KARMADA_DERIVED_PREFIX).map(str::to_owned))
            else {
                return Ok(None);
            };
            let from_annotation = annotation(KARMADA_WORK_NAMESPACE)
                .and_then(|ns| ns.strip_prefix(KARMADA_ES_PREFIX).map(str::to_owned));
            // Else from the name: the member cluster's slice is named
            // `<service>-<suffix>` (its EndpointSlice controller's
            // generateName), so the cluster ends before `-<service>-`.
            let cluster = from_annotation
                .or_else(|| rest.find(&format!("-{service}-")).map(|at| rest[..at].to_owned()));
            match cluster {
                Some(cluster) if !cluster.is_empty() => {
                    Ok(Some(SliceOf { namespace, service, cluster }))
                }
                _ => Err(format!(
                    "slice {namespace}/{name}: no {KARMADA_WORK_NAMESPACE} annotation and the \
                     name does not carry the cluster (imported-<cluster>-{service}-<suffix>, \
                     at most {MAX_OBJECT_NAME} characters: too long a cluster and slice name \
                     are cut)"
                )),
            }
        }
    }
}

/// An endpoint's pod (by its target reference), else its hostname
/// (imported slices carry no target reference: the pod is another
/// cluster's), else the endpoint itself (its sorted addresses): what ties
/// its addresses in IPv4 and IPv6 slices together.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Member {
    Pod { namespace: String, name: String },
    Host(String),
    Addresses(Vec<IpAddr>),
}

fn member_of(endpoint: &Endpoint, addresses: &[IpAddr]) -> Member {
    match (endpoint.target_ref.as_ref(), endpoint.hostname.as_ref()) {
        (Some(r), _) if r.name.is_some() => Member::Pod {
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
        },
        (_, Some(host)) if !host.is_empty() => Member::Host(host.clone()),
        _ => {
            let mut sorted = addresses.to_vec();
            sorted.sort();
            Member::Addresses(sorted)
        }
    }
}

/// Ready as the EndpointSlice API defines it: unset is ready.
fn is_ready(endpoint: &Endpoint) -> bool {
    endpoint.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
}

/// A port routers or relays can be reached on: TCP (unset is TCP), a
/// number from 1 to 65535; never port 0.
fn usable(port: &EndpointPort) -> Option<u16> {
    let tcp = port.protocol.as_deref().is_none_or(|p| p == "TCP");
    port.port.and_then(|p| u16::try_from(p).ok()).filter(|p| tcp && *p > 0)
}

/// One address of one endpoint, with its slice's port.
#[derive(Debug, Clone)]
struct Seen {
    address: IpAddr,
    port: Option<u16>,
    ready: bool,
}

/// The addresses of every endpoint of `slices`, grouped by member (pod).
fn members<'a>(
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    port_of: impl Fn(&EndpointSlice) -> Option<u16>,
) -> BTreeMap<Member, Vec<Seen>> {
    let mut members: BTreeMap<Member, Vec<Seen>> = BTreeMap::new();
    for slice in slices {
        if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        let port = port_of(slice);
        for endpoint in slice.endpoints.iter().flatten() {
            let addresses: Vec<IpAddr> =
                endpoint.addresses.iter().filter_map(|a| a.parse().ok()).collect();
            let ready = is_ready(endpoint);
            let seen = members.entry(member_of(endpoint, &addresses)).or_default();
            seen.extend(addresses.into_iter().map(|address| Seen { address, port, ready }));
        }
    }
    members
}

/// `address:port`, IPv6 bracketed.
fn host_port(address: IpAddr, port: u16) -> Option<HostPort> {
    HostPort::new(std::net::SocketAddr::new(address, port).to_string()).ok()
}

/// Derives the served pools and routers from `slices` and the
/// ServiceImports' `annotations` (empty under Karmada, which carries none).
pub fn derive<'a>(
    rules: &Rules,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    annotations: &ImportAnnotations,
) -> Derived {
    let mut derived = Derived::default();
    let mut groups: BTreeMap<SliceOf, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in slices {
        match identify(rules.mode, slice) {
            Ok(Some(of)) => groups.entry(of).or_default().push(slice),
            Ok(None) => {}
            Err(why) => {
                derived.skipped.insert(why);
            }
        }
    }
    let mut routers_seen = false;
    for (of, mut slices) in groups {
        slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        if of.namespace == rules.router_namespace && of.service == rules.router_service {
            routers_seen = true;
            routers(rules, &of, &slices, &mut derived);
        } else if let Some(dgd) = of.service.strip_suffix(rules.pool_service_suffix.as_str())
            && !dgd.is_empty()
        {
            let import = annotations.get(&(of.namespace.clone(), of.service.clone()));
            match pool(&of, dgd, &slices, import) {
                Ok(Some(pool)) => {
                    derived.pools.insert(pool.pool_id.clone(), pool);
                }
                Ok(None) => {}
                Err(why) => {
                    derived.skipped.insert(format!(
                        "pool {}/{} from cluster {}: {why}",
                        of.namespace, of.service, of.cluster
                    ));
                }
            }
        }
    }
    if rules.mode == PoolDiscovery::Mcs
        && routers_seen
        && !annotations
            .contains_key(&(rules.router_namespace.clone(), rules.router_service.clone()))
    {
        derived.skipped.insert(format!(
            "router service {}/{}: imported slices but no ServiceImport",
            rules.router_namespace, rules.router_service
        ));
    }
    derived
}

/// The pool of one PoolRelay Service from one source cluster; `Ok(None)`
/// while it has no ready endpoint.
fn pool(
    of: &SliceOf,
    dgd: &str,
    slices: &[&EndpointSlice],
    import: Option<&BTreeMap<String, String>>,
) -> Result<Option<Pool>, String> {
    let members = members(slices.iter().copied(), |slice| {
        let mut ports: Vec<&EndpointPort> = slice.ports.iter().flatten().collect();
        ports.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
        ports.into_iter().find_map(usable)
    });
    // Bound to the ready endpoint with the lowest address (IPv4 before
    // IPv6), from the current slices only: every registry binds the same.
    let Some((member, bound)) = members
        .iter()
        .flat_map(|(m, seen)| seen.iter().filter(|s| s.ready).map(move |s| (m, s)))
        .min_by_key(|(_, s)| s.address)
    else {
        return Ok(None);
    };
    let port = bound.port.ok_or("its slice has no TCP port above 0")?;
    let relay_address = host_port(bound.address, port).ok_or("no valid relay address")?;
    let identities: BTreeSet<IpAddr> = members[member].iter().map(|s| s.address).collect();
    let relay_identities =
        identities.iter().filter_map(|a| NonBlank::new(a.to_string()).ok()).collect();
    // From the ServiceImport, else from the slices (Karmada).
    let annotation = |key: &str| -> Option<String> {
        import.and_then(|a| a.get(key)).cloned().or_else(|| {
            slices.iter().find_map(|s| s.metadata.annotations.as_ref()?.get(key).cloned())
        })
    };
    let model = annotation(MODEL_ANNOTATION)
        .and_then(|m| NonBlank::new(m).ok())
        .ok_or(format!("no {MODEL_ANNOTATION} annotation"))?;
    let region = annotation(REGION_ANNOTATION)
        .and_then(|r| NonBlank::new(r).ok())
        .ok_or(format!("no {REGION_ANNOTATION} annotation"))?;
    let zone = annotation(ZONE_ANNOTATION).and_then(|z| NonBlank::new(z).ok());
    let workers = match annotation(WORKERS_ANNOTATION) {
        None => 0,
        Some(w) => w.trim().parse::<u32>().map_err(|_| format!("{WORKERS_ANNOTATION} {w:?}"))?,
    };
    let label =
        |what: &str, value: &str| Label::new(value).map_err(|e| format!("{what} {value:?}: {e}"));
    let pool_key = PoolKey {
        cluster_id: label("cluster", &of.cluster)?,
        namespace: label("namespace", &of.namespace)?,
        dgd_name: label("deployment name", dgd)?,
    };
    Ok(Some(Pool {
        pool_id: pool_key.id(),
        pool_key,
        model,
        location: Location { region, zone },
        capacity: Capacity { workers },
        relay_address,
        relay_identities,
    }))
}

/// The router replicas of the router Service's slices from one source
/// cluster: each ready pod once, at its IPv4 address when it has one, on
/// the named TCP port.
fn routers(rules: &Rules, of: &SliceOf, slices: &[&EndpointSlice], derived: &mut Derived) {
    let named = |slice: &EndpointSlice| {
        slice
            .ports
            .iter()
            .flatten()
            .filter(|p| p.name.as_deref() == Some(rules.router_port_name.as_str()))
            .find_map(usable)
    };
    for slice in slices {
        if matches!(slice.address_type.as_str(), "IPv4" | "IPv6") && named(slice).is_none() {
            derived.skipped.insert(format!(
                "router slice {}/{}: no TCP port named {:?} above 0",
                of.namespace,
                slice.metadata.name.as_deref().unwrap_or_default(),
                rules.router_port_name
            ));
        }
    }
    for (member, seen) in members(slices.iter().copied(), named) {
        let Some(best) =
            seen.iter().filter(|s| s.ready && s.port.is_some()).min_by_key(|s| s.address)
        else {
            continue;
        };
        let Some(address) = best.port.and_then(|port| host_port(best.address, port)) else {
            continue;
        };
        let name = match &member {
            Member::Pod { name, .. } | Member::Host(name) => name.clone(),
            Member::Addresses(_) => format!("ip-{}", best.address).replace(['.', ':'], "-"),
        };
        match RouterId::new(format!("{name}.{}", of.cluster)) {
            Ok(router_id) => {
                derived.routers.insert(
                    router_id.clone(),
                    RouterReplica { router_id, address, location: None },
                );
            }
            Err(e) => {
                derived.skipped.insert(format!("router {name} from cluster {}: {e}", of.cluster));
            }
        }
    }
}

#[cfg(test)]
mod tests;
