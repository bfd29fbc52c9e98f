use super::*;
use serde_json::{Value, json};

fn export() -> ServiceExport {
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": "llm", "creationTimestamp": "2026-12-02T08:00:00Z"},
        "spec": {"exportedLabels": {"tier": "front"}, "exportedAnnotations": {"note": "x"}}
    }))
    .unwrap()
}

fn service_json() -> Value {
    json!({
        "metadata": {"name": "web", "namespace": "llm"},
        "spec": {
            "type": "ClusterIP", "clusterIP": "10.96.0.10",
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http-named"},
                {"name": "grpc", "port": 9090, "protocol": "TCP", "targetPort": 9091, "appProtocol": "kubernetes.io/h2c"},
                {"name": "dns", "port": 53, "protocol": "UDP"}
            ],
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
            "ipFamilies": ["IPv4", "IPv6"],
            "internalTrafficPolicy": "Local",
            "trafficDistribution": "PreferClose"
        }
    })
}

fn service(v: Value) -> Service {
    serde_json::from_value(v).unwrap()
}

fn slices() -> Vec<EndpointSlice> {
    let slice = |name: &str, endpoints: Value| -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "llm", "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints
        }))
        .unwrap()
    };
    vec![
        slice(
            "web-a",
            json!([
                {"addresses": ["10.1.0.5"], "conditions": {"ready": true}, "zone": "z1"},
                {"addresses": ["10.1.0.6"], "conditions": {"ready": false}, "hostname": "h6", "zone": "z2"}
            ]),
        ),
        slice("web-b", json!([{"addresses": ["10.1.0.7"], "conditions": {}}])),
    ]
}

fn valid(built: Built) -> ExportRequest {
    match built {
        Built::Valid(req) => *req,
        other => panic!("not valid: {other:?}"),
    }
}

#[test]
fn a_cluster_ip_service_maps_every_field() {
    let req = valid(build(&export(), Some(&service(service_json())), &slices()));
    assert_eq!(req.service_type, ServiceType::ClusterSetIP);
    let ports: Vec<_> =
        req.ports.iter().map(|p| (p.name.as_str(), p.protocol, p.port, p.target_port)).collect();
    assert_eq!(
        ports,
        vec![
            // Named target port: resolved from the slices' port of that name.
            ("http", Protocol::TCP, 80, Some(8080)),
            // Numeric target port, no slice port of that name.
            ("grpc", Protocol::TCP, 9090, Some(9091)),
            // No target port at all: the port.
            ("dns", Protocol::UDP, 53, Some(53)),
        ]
    );
    assert_eq!(req.ports[1].app_protocol.as_deref(), Some("kubernetes.io/h2c"));
    assert_eq!(req.session_affinity, SessionAffinity::ClientIP);
    assert_eq!(req.session_affinity_timeout_secs, Some(600));
    assert_eq!(req.ip_families, vec![IpFamily::IPv4, IpFamily::IPv6]);
    assert_eq!(req.internal_traffic_policy, Some(TrafficPolicy::Local));
    assert_eq!(req.traffic_distribution.as_deref(), Some("PreferClose"));
    assert_eq!(req.labels.get("tier").map(String::as_str), Some("front"));
    assert_eq!(req.annotations.get("note").map(String::as_str), Some("x"));
    assert_eq!(req.exported_at.to_string(), "2026-12-02T08:00:00Z");
    assert_eq!((req.incarnation.as_ref(), req.generation), (None, None));
    let endpoints: Vec<_> = req
        .endpoints
        .iter()
        .map(|e| (e.addresses[0].to_string(), e.ready, e.hostname.as_deref(), e.zone.as_deref()))
        .collect();
    assert_eq!(
        endpoints,
        vec![
            ("10.1.0.5".into(), true, None, Some("z1")),
            ("10.1.0.6".into(), false, Some("h6"), Some("z2")),
            // `conditions.ready` absent: ready, per the EndpointSlice API.
            ("10.1.0.7".into(), true, None, None),
        ]
    );
    assert_eq!(mcs_api::Validate::validate(&req), Ok(()));
}

#[test]
fn a_headless_service_is_headless_and_no_affinity_has_no_timeout() {
    let mut v = service_json();
    v["spec"]["clusterIP"] = json!("None");
    v["spec"]["sessionAffinity"] = json!("None");
    let req = valid(build(&export(), Some(&service(v)), &[]));
    assert_eq!(req.service_type, ServiceType::Headless);
    assert_eq!(req.session_affinity, SessionAffinity::None);
    assert_eq!(req.session_affinity_timeout_secs, None);
    // No slices: a named target port is unknown, the port stands in.
    assert_eq!(req.ports[0].target_port, Some(80));
    assert!(req.endpoints.is_empty());
}

#[test]
fn no_service_and_external_name_are_invalid() {
    let Built::Invalid { reason, message } = build(&export(), None, &[]) else { panic!() };
    assert_eq!(reason, NO_SERVICE);
    assert!(message.contains("web"), "{message}");
    let mut v = service_json();
    v["spec"] = json!({"type": "ExternalName", "externalName": "example.com"});
    let Built::Invalid { reason, .. } = build(&export(), Some(&service(v)), &[]) else { panic!() };
    assert_eq!(reason, INVALID_SERVICE_TYPE);
}

#[test]
fn the_hash_is_stable_across_slice_and_endpoint_order() {
    let svc = service(service_json());
    let hash = |slices: &[EndpointSlice]| {
        content_hash(&valid(build(&export(), Some(&svc), slices)).spec())
    };
    let forward = slices();
    let mut backward = slices();
    backward.reverse();
    for s in &mut backward {
        s.endpoints.as_mut().unwrap().reverse();
    }
    // A duplicate endpoint (an address seen twice) changes nothing either.
    let mut duplicated = slices();
    duplicated.push(slices()[1].clone());
    assert_eq!(hash(&forward), hash(&backward));
    assert_eq!(hash(&forward), hash(&duplicated));
    assert_eq!(hash(&forward).len(), 64);
    // Lowercase hex of the SHA-256 of the spec's JSON, as the hashes kept
    // in memory across versions are.
    let spec = valid(build(&export(), Some(&svc), &forward)).spec();
    let digest = Sha256::digest(serde_json::to_vec(&spec).unwrap());
    let expected: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hash(&forward), expected);
}

#[test]
fn the_hash_changes_with_each_field() {
    let base = valid(build(&export(), Some(&service(service_json())), &slices()));
    let h = |r: &ExportRequest| content_hash(&r.spec());
    let mut writer = base.clone();
    writer.incarnation = Some(mcs_api::Incarnation::new("c1").unwrap());
    writer.generation = Some(5);
    assert_eq!(h(&base), h(&writer), "incarnation and generation are not content");
    type Change = Box<dyn Fn(&mut ExportRequest)>;
    let changes: Vec<(&str, Change)> = vec![
        ("type", Box::new(|r| r.service_type = ServiceType::Headless)),
        ("port", Box::new(|r| r.ports[0].port = 81)),
        ("target port", Box::new(|r| r.ports[0].target_port = Some(8081))),
        ("affinity", Box::new(|r| r.session_affinity = SessionAffinity::None)),
        ("timeout", Box::new(|r| r.session_affinity_timeout_secs = Some(1))),
        ("exported_at", Box::new(|r| r.exported_at = jiff::Timestamp::UNIX_EPOCH)),
        ("ready", Box::new(|r| r.endpoints[0].ready = false)),
        ("hostname", Box::new(|r| r.endpoints[0].hostname = Some("h".into()))),
        ("zone", Box::new(|r| r.endpoints[0].zone = None)),
        ("address", Box::new(|r| r.endpoints[0].addresses[0] = "10.9.9.9".parse().unwrap())),
        ("labels", Box::new(|r| r.labels.clear())),
        ("annotations", Box::new(|r| r.annotations.clear())),
        ("families", Box::new(|r| r.ip_families.reverse())),
        ("policy", Box::new(|r| r.internal_traffic_policy = None)),
        ("distribution", Box::new(|r| r.traffic_distribution = None)),
    ];
    for (field, change) in changes {
        let mut changed = base.clone();
        change(&mut changed);
        assert_ne!(h(&base), h(&changed), "{field}");
    }
}

/// Issue 29, item 2: a named `targetPort` resolving to another container
/// port on some pods (a rollout) put every endpoint under the first
/// slice's port; each endpoint now keeps its own where it differs.
#[test]
fn an_endpoint_behind_another_container_port_keeps_it() {
    let mut rolled = slices();
    rolled[1].ports = Some(vec![k8s_openapi::api::discovery::v1::EndpointPort {
        name: Some("http".into()),
        port: Some(9090),
        protocol: Some("TCP".into()),
        app_protocol: None,
    }]);
    let req = valid(build(&export(), Some(&service(service_json())), &rolled));
    assert_eq!(req.ports[0].target_port, Some(8080), "the first slice's port names the port");
    let own: Vec<_> = req
        .endpoints
        .iter()
        .map(|e| (e.addresses[0].to_string(), e.port_of(&req.ports[0]), e.target_ports.len()))
        .collect();
    assert_eq!(
        own,
        vec![
            ("10.1.0.5".into(), 8080, 0),
            ("10.1.0.6".into(), 8080, 0),
            ("10.1.0.7".into(), 9090, 1)
        ]
    );
    assert_eq!(mcs_api::Validate::validate(&req), Ok(()));
    // A slice of another protocol's port of the same name is not the port.
    rolled[1].ports.as_mut().unwrap()[0].protocol = Some("UDP".into());
    let req = valid(build(&export(), Some(&service(service_json())), &rolled));
    assert!(req.endpoints.iter().all(|e| e.target_ports.is_empty()));
}

#[test]
fn labels_or_annotations_kubernetes_would_refuse_make_it_invalid_naming_the_key() {
    let svc = service(service_json());
    let mut labelled = export();
    labelled.spec.exported_labels.insert("tier".into(), "front end".into());
    let Built::Invalid { reason, message } = build(&labelled, Some(&svc), &slices()) else {
        panic!("a label value with a space was exported")
    };
    assert_eq!(reason, INVALID_EXPORTED_LABELS);
    assert!(message.contains("exportedLabels") && message.contains("\"tier\""), "{message}");
    let mut annotated = export();
    annotated.spec.exported_annotations.insert("my note".into(), "x".into());
    let Built::Invalid { reason, message } = build(&annotated, Some(&svc), &slices()) else {
        panic!("an annotation key with a space was exported")
    };
    assert_eq!(reason, INVALID_EXPORTED_ANNOTATIONS);
    assert!(message.contains("\"my note\""), "{message}");
    // Annotation values are free text.
    let mut free = export();
    free.spec.exported_annotations.insert("note".into(), "any text, spaces too".into());
    valid(build(&free, Some(&svc), &slices()));
}

#[test]
fn slices_this_controller_imported_are_not_exported() {
    let mut ours = slices()[0].clone();
    ours.metadata.name = Some("derived-0123456789abcdef-west-ipv4-0".into());
    ours.metadata.labels.as_mut().unwrap().insert(SLICE_MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    ours.endpoints.as_mut().unwrap()[0].addresses = vec!["10.2.0.1".into()];
    let svc = service(service_json());
    let alone = valid(build(&export(), Some(&svc), &slices()));
    let mut with_ours = slices();
    with_ours.push(ours);
    let req = valid(build(&export(), Some(&svc), &with_ours));
    assert_eq!(req.endpoints, alone.endpoints);
    assert!(!req.endpoints.iter().any(|e| e.addresses[0].to_string() == "10.2.0.1"));
}

#[test]
fn protocols_port_numbers_and_traffic_policies_map_each_value() {
    assert_eq!(to_protocol(Some("UDP")), Protocol::UDP);
    assert_eq!(to_protocol(Some("SCTP")), Protocol::SCTP);
    assert_eq!(to_protocol(Some("TCP")), Protocol::TCP);
    assert_eq!(to_protocol(None), Protocol::TCP, "the API's default");
    assert_eq!(to_port(1), Some(1));
    assert_eq!(to_port(65_535), Some(65_535));
    assert_eq!(to_port(0), None, "no port");
    assert_eq!(to_port(-1), None);
    assert_eq!(to_port(65_536), None);
    for (policy, expected) in [
        ("Cluster", Some(TrafficPolicy::Cluster)),
        ("Local", Some(TrafficPolicy::Local)),
        ("Elsewhere", None),
    ] {
        let mut svc = service_json();
        svc["spec"]["internalTrafficPolicy"] = json!(policy);
        let req = valid(build(&export(), Some(&service(svc)), &slices()));
        assert_eq!(req.internal_traffic_policy, expected, "{policy}");
    }
}
