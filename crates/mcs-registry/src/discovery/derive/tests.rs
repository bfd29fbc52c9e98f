use super::*;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1::EndpointConditions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn rules(mode: PoolDiscovery) -> Rules {
    Rules {
        mode,
        router_namespace: "gr".into(),
        router_service: "global-router".into(),
        router_port_name: "http".into(),
        pool_service_suffix: "-pool-relay".into(),
    }
}

/// `(pod, addresses, ready)`.
type Ep<'a> = (&'a str, &'a [&'a str], bool);

fn endpoint((pod, addresses, ready): Ep<'_>) -> Endpoint {
    Endpoint {
        addresses: addresses.iter().map(|a| a.to_string()).collect(),
        conditions: Some(EndpointConditions { ready: Some(ready), ..Default::default() }),
        target_ref: (!pod.is_empty()).then(|| ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("llm".into()),
            name: Some(pod.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn port(name: &str, number: i32) -> EndpointPort {
    EndpointPort { name: Some(name.into()), port: Some(number), ..Default::default() }
}

/// A standard MCS slice of `service` from `cluster`.
fn mcs(
    ns: &str,
    name: &str,
    service: &str,
    cluster: &str,
    family: &str,
    ports: Vec<EndpointPort>,
    eps: &[Ep<'_>],
) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(
                [(MCS_SERVICE_NAME, service), (MCS_SOURCE_CLUSTER, cluster)]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into(),
            ),
            ..Default::default()
        },
        address_type: family.into(),
        endpoints: Some(eps.iter().copied().map(endpoint).collect()),
        ports: Some(ports),
    }
}

/// The same slice as Karmada imports it (cluster in the annotation when
/// `annotated`, else only in the name).
fn karmada(slice: &EndpointSlice, annotated: bool) -> EndpointSlice {
    let labels = slice.metadata.labels.as_ref().unwrap();
    let (service, cluster) = (&labels[MCS_SERVICE_NAME], &labels[MCS_SOURCE_CLUSTER]);
    let name = slice.metadata.name.as_ref().unwrap();
    let mut annotations = slice.metadata.annotations.clone().unwrap_or_default();
    if annotated {
        annotations.insert(KARMADA_WORK_NAMESPACE.into(), format!("karmada-es-{cluster}"));
    }
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("imported-{cluster}-{name}")),
            namespace: slice.metadata.namespace.clone(),
            labels: Some([(K8S_SERVICE_NAME.to_owned(), format!("derived-{service}"))].into()),
            annotations: Some(annotations),
            ..Default::default()
        },
        ..slice.clone()
    }
}

fn pool_annotations() -> BTreeMap<String, String> {
    [
        (MODEL_ANNOTATION, "meta-llama/Llama-3.1-8B"),
        (REGION_ANNOTATION, "us-east-1"),
        (ZONE_ANNOTATION, "us-east-1a"),
        (WORKERS_ANNOTATION, "4"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into()
}

fn imports() -> ImportAnnotations {
    [(("llm".to_owned(), "llama-pool-relay".to_owned()), pool_annotations())].into()
}

fn relay_slices() -> Vec<EndpointSlice> {
    vec![
        mcs(
            "llm",
            "llama-pool-relay-v4",
            "llama-pool-relay",
            "east",
            "IPv4",
            vec![port("relay", 9000)],
            &[
                ("relay-b", &["10.0.0.9"], true),
                ("relay-a", &["10.0.0.7"], true),
                ("relay-c", &["10.0.0.1"], false),
            ],
        ),
        mcs(
            "llm",
            "llama-pool-relay-v6",
            "llama-pool-relay",
            "east",
            "IPv6",
            vec![port("relay", 9000)],
            &[("relay-a", &["fd00::7"], true), ("relay-b", &["fd00::1"], true)],
        ),
    ]
}

#[test]
fn a_pool_binds_the_lowest_ready_address_with_its_pods_addresses_in_both_families() {
    let d = derive(&rules(PoolDiscovery::Mcs), &relay_slices(), &imports());
    assert_eq!(d.skipped, BTreeSet::new());
    let pool = d.pools.values().next().expect("one pool");
    assert_eq!(d.pools.len(), 1);
    let key = PoolKey {
        cluster_id: Label::new("east").unwrap(),
        namespace: Label::new("llm").unwrap(),
        dgd_name: Label::new("llama").unwrap(),
    };
    assert_eq!(pool.pool_id, key.id(), "derived exactly as for registrations");
    assert_eq!(pool.pool_key, key);
    // 10.0.0.1 is lower but not ready; 10.0.0.7 (relay-a) is the lowest ready.
    assert_eq!(pool.relay_address.as_str(), "10.0.0.7:9000");
    let identities: Vec<&str> = pool.relay_identities.iter().map(|i| i.as_str()).collect();
    assert_eq!(identities, ["10.0.0.7", "fd00::7"], "relay-a in both families, not relay-b's");
    assert_eq!(pool.model.as_str(), "meta-llama/Llama-3.1-8B");
    assert_eq!(pool.location.region.as_str(), "us-east-1");
    assert_eq!(pool.location.zone.as_ref().unwrap().as_str(), "us-east-1a");
    assert_eq!(pool.capacity.workers, 4);
    // The order of slices and of endpoints does not matter.
    let mut reversed = relay_slices();
    reversed.reverse();
    for s in &mut reversed {
        s.endpoints.as_mut().unwrap().reverse();
    }
    assert_eq!(derive(&rules(PoolDiscovery::Mcs), &reversed, &imports()), d);
}

#[test]
fn an_ipv6_only_pool_binds_its_lowest_ipv6_address_bracketed() {
    let slices = &relay_slices()[1..];
    let d = derive(&rules(PoolDiscovery::Mcs), slices, &imports());
    assert_eq!(d.pools.values().next().unwrap().relay_address.as_str(), "[fd00::1]:9000");
}

#[test]
fn one_pool_per_source_cluster() {
    let mut slices = relay_slices();
    slices.push(mcs(
        "llm",
        "west-v4",
        "llama-pool-relay",
        "west",
        "IPv4",
        vec![port("relay", 9000)],
        &[("w", &["10.1.0.1"], true)],
    ));
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &imports());
    let clusters: Vec<&str> = d.pools.values().map(|p| p.pool_key.cluster_id.as_str()).collect();
    assert_eq!(clusters.len(), 2);
    assert!(clusters.contains(&"east") && clusters.contains(&"west"));
}

#[test]
fn annotations_come_from_the_service_import_else_from_the_slices_and_a_pool_without_a_model_is_skipped()
 {
    let d = derive(&rules(PoolDiscovery::Mcs), &relay_slices(), &ImportAnnotations::new());
    assert!(d.pools.is_empty());
    assert_eq!(d.skipped.len(), 1);
    let why = d.skipped.first().unwrap();
    assert!(why.contains("llm/llama-pool-relay") && why.contains(MODEL_ANNOTATION), "{why}");
    let mut slices = relay_slices();
    slices[1].metadata.annotations = Some(pool_annotations());
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &ImportAnnotations::new());
    assert_eq!(d.pools.values().next().unwrap().capacity.workers, 4);
    // The ServiceImport wins over the slices.
    let mut import = imports();
    import.values_mut().next().unwrap().insert(WORKERS_ANNOTATION.into(), "8".into());
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &import);
    assert_eq!(d.pools.values().next().unwrap().capacity.workers, 8);
}

#[test]
fn a_pool_without_a_ready_endpoint_is_not_served() {
    let slices = vec![mcs(
        "llm",
        "s",
        "llama-pool-relay",
        "east",
        "IPv4",
        vec![port("relay", 9000)],
        &[("a", &["10.0.0.1"], false)],
    )];
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &imports());
    assert!(d.pools.is_empty() && d.skipped.is_empty());
}

fn router_slices() -> Vec<EndpointSlice> {
    vec![
        mcs(
            "gr",
            "global-router-v4x",
            "global-router",
            "east",
            "IPv4",
            vec![port("metrics", 9090), port("http", 8080)],
            &[("gr-0", &["10.0.5.1"], true), ("gr-1", &["10.0.5.2"], true)],
        ),
        mcs(
            "gr",
            "global-router-v6x",
            "global-router",
            "east",
            "IPv6",
            vec![port("http", 8080)],
            &[("gr-0", &["fd00::5:1"], true), ("gr-2", &["fd00::5:3"], true)],
        ),
    ]
}

fn router_imports() -> ImportAnnotations {
    [(("gr".to_owned(), "global-router".to_owned()), BTreeMap::new())].into()
}

#[test]
fn routers_on_the_named_port_once_each_at_their_ipv4_address() {
    let d = derive(&rules(PoolDiscovery::Mcs), &router_slices(), &router_imports());
    assert_eq!(d.skipped, BTreeSet::new());
    let routers: Vec<(&str, &str)> =
        d.routers.values().map(|r| (r.router_id.as_str(), r.address.as_str())).collect();
    assert_eq!(
        routers,
        [
            ("gr-0.east", "10.0.5.1:8080"),
            ("gr-1.east", "10.0.5.2:8080"),
            ("gr-2.east", "[fd00::5:3]:8080")
        ]
    );
    assert!(d.pools.is_empty());
}

#[test]
fn a_router_slice_without_the_named_port_or_on_port_0_serves_nothing_and_is_reported() {
    let mut slices = router_slices();
    slices[0].ports = Some(vec![port("metrics", 9090)]);
    slices[1].ports = Some(vec![port("http", 0)]);
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &router_imports());
    assert!(d.routers.is_empty());
    assert_eq!(d.skipped.len(), 2, "{:?}", d.skipped);
    assert!(d.skipped.iter().all(|s| s.contains("no TCP port named \"http\"")));
    // A UDP port of that name is not it either.
    let mut slices = router_slices();
    for s in &mut slices {
        for p in s.ports.as_mut().unwrap() {
            p.protocol = Some("UDP".into());
        }
    }
    assert!(derive(&rules(PoolDiscovery::Mcs), &slices, &router_imports()).routers.is_empty());
}

#[test]
fn a_router_service_without_its_service_import_is_reported() {
    let d = derive(&rules(PoolDiscovery::Mcs), &router_slices(), &ImportAnnotations::new());
    assert_eq!(d.routers.len(), 3, "still served");
    assert!(d.skipped.iter().any(|s| s.contains("no ServiceImport")), "{:?}", d.skipped);
}

#[test]
fn karmada_names_give_the_same_pools_and_routers() {
    let mcs_slices: Vec<EndpointSlice> =
        relay_slices().into_iter().chain(router_slices()).collect();
    let want = derive(&rules(PoolDiscovery::Mcs), &mcs_slices, &imports());
    for annotated in [true, false] {
        // Karmada carries no ServiceImport annotations: they are on the slices.
        let slices: Vec<EndpointSlice> = mcs_slices
            .iter()
            .map(|s| {
                let mut s = karmada(s, annotated);
                if s.metadata.name.as_deref().unwrap().contains("pool-relay") {
                    s.metadata.annotations.as_mut().unwrap().extend(pool_annotations());
                }
                s
            })
            .collect();
        let got = derive(&rules(PoolDiscovery::Karmada), &slices, &ImportAnnotations::new());
        assert_eq!(
            (&got.pools, &got.routers),
            (&want.pools, &want.routers),
            "annotated: {annotated}"
        );
        // The standard MCS mode finds none of them, and Karmada none of MCS's.
        assert_eq!(derive(&rules(PoolDiscovery::Mcs), &slices, &imports()), Derived::default());
    }
    assert_eq!(derive(&rules(PoolDiscovery::Karmada), &mcs_slices, &imports()), Derived::default());
}

#[test]
fn karmada_names_that_do_not_carry_the_cluster_are_skipped() {
    let mut slice = karmada(&relay_slices()[0], false);
    // Cut, as a name past 253 characters would be.
    slice.metadata.name = Some("imported-east-llama-po".into());
    assert!(
        identify(PoolDiscovery::Karmada, &slice)
            .unwrap_err()
            .contains("does not carry the cluster")
    );
    let d = derive(&rules(PoolDiscovery::Karmada), &[slice], &ImportAnnotations::new());
    assert!(d.pools.is_empty());
    assert_eq!(d.skipped.len(), 1);
    // The annotation names it whatever the name.
    let mut slice = karmada(&relay_slices()[0], true);
    slice.metadata.name = Some("imported-x".into());
    let of = identify(PoolDiscovery::Karmada, &slice).unwrap().unwrap();
    assert_eq!((of.service.as_str(), of.cluster.as_str()), ("llama-pool-relay", "east"));
    // A cluster name with hyphens, from the name.
    let mut slice = karmada(&relay_slices()[0], false);
    slice.metadata.name = Some("imported-us-east-1-llama-pool-relay-x7k2p".into());
    assert_eq!(identify(PoolDiscovery::Karmada, &slice).unwrap().unwrap().cluster, "us-east-1");
}

#[test]
fn an_mcs_slice_takes_its_cluster_from_the_annotation_when_unlabelled() {
    let mut slice = relay_slices().remove(0);
    let labels = slice.metadata.labels.as_mut().unwrap();
    labels.remove(MCS_SOURCE_CLUSTER);
    assert!(identify(PoolDiscovery::Mcs, &slice).unwrap_err().contains(MCS_SOURCE_CLUSTER));
    slice.metadata.annotations = Some([(MCS_SOURCE_CLUSTER.to_owned(), "south".to_owned())].into());
    assert_eq!(identify(PoolDiscovery::Mcs, &slice).unwrap().unwrap().cluster, "south");
}

#[test]
fn without_a_target_reference_the_hostname_ties_families_and_names_the_router() {
    let mut slices = router_slices();
    for s in &mut slices {
        for e in s.endpoints.as_mut().unwrap() {
            e.hostname = e.target_ref.take().and_then(|r| r.name);
        }
    }
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &router_imports());
    assert_eq!(d, derive(&rules(PoolDiscovery::Mcs), &router_slices(), &router_imports()));
    // Neither: each endpoint on its own, named by its address.
    for s in &mut slices {
        for e in s.endpoints.as_mut().unwrap() {
            e.hostname = None;
        }
    }
    let d = derive(&rules(PoolDiscovery::Mcs), &slices, &router_imports());
    let ids: Vec<&str> = d.routers.keys().map(|r| r.as_str()).collect();
    assert_eq!(
        ids,
        ["ip-10-0-5-1.east", "ip-10-0-5-2.east", "ip-fd00--5-1.east", "ip-fd00--5-3.east"]
    );
}
