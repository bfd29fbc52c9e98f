//! `mcs-registry --pool-discovery mcs|karmada` against real API servers
//! (`scripts/k8s-env`): slices made by hand in both naming schemes give the
//! same pools and routers; a slice update wakes a watch; RBAC revoked makes
//! lists incomplete and restored complete again; the flags by mode; and,
//! across the whole product, a PoolRelay Service exported in `east` by
//! mcs-controller, imported into `hub` by its controller, and listed by a
//! registry discovering pools in `hub`.
//!
//! Every discovering registry runs under the read-only ClusterRole of
//! `mcs_registry::discovery::RBAC_RULES`, and the first test checks the
//! audit log: only those verbs were used, and nothing was denied.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ObjectMeta};
use mcs_controller::crd::{ServiceExport, ServiceExportSpec, ServiceImport, ServiceImportSpec};
use mcs_testkit::eventually;
use mcs_testkit::k8s::{K8sEnv, ensure_namespace};
use mcs_tests::controller::{
    self as world, World, apply, bind_registry_role, install_crds, install_registry_rbac,
    start_discovering_registry, unbind_registry_role,
};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const WITHIN: Duration = Duration::from_secs(30);

fn registry_bin() -> std::path::PathBuf {
    mcs_tests::controller_binaries!().registry
}

/// The exported annotations of the PoolRelay Service `llm/llama-pool-relay`.
fn pool_annotations() -> BTreeMap<String, String> {
    [
        ("mcs-registry.io/model", "meta-llama/Llama-3.1-8B"),
        ("mcs-registry.io/region", "us-east-1"),
        ("mcs-registry.io/zone", "us-east-1a"),
        ("mcs-registry.io/workers", "4"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into()
}

/// A slice with `labels` and `annotations`, endpoints `(pod, address, ready)`.
fn slice(
    ns: &str,
    name: &str,
    family: &str,
    labels: Value,
    annotations: Value,
    endpoints: &[(&str, &str, bool)],
    ports: &[(&str, u16)],
) -> EndpointSlice {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(pod, a, ready)| {
            json!({"addresses": [a], "conditions": {"ready": ready},
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": pod}})
        })
        .collect();
    let ports: Vec<Value> =
        ports.iter().map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP"})).collect();
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": annotations},
        "addressType": family, "endpoints": endpoints, "ports": ports,
    }))
    .unwrap()
}

/// A standard MCS slice of `service` from cluster `east`.
fn mcs_slice(
    ns: &str,
    name: &str,
    service: &str,
    family: &str,
    eps: &[(&str, &str, bool)],
    ports: &[(&str, u16)],
) -> EndpointSlice {
    let labels = json!({
        "multicluster.kubernetes.io/service-name": service,
        "multicluster.kubernetes.io/source-cluster": "east",
        "endpointslice.kubernetes.io/managed-by": "mcs-tests",
    });
    slice(ns, name, family, labels, json!({}), eps, ports)
}

/// `mcs` as Karmada imports it: `imported-east-<name>`, labelled
/// `derived-<service>`, the cluster in the annotation when `annotated`,
/// `extra` annotations on the slice.
fn karmada_slice(
    mut mcs: EndpointSlice,
    annotated: bool,
    extra: &BTreeMap<String, String>,
) -> EndpointSlice {
    let meta = &mut mcs.metadata;
    let service = meta.labels.as_ref().unwrap()["multicluster.kubernetes.io/service-name"].clone();
    meta.name = Some(format!("imported-east-{}", meta.name.as_deref().unwrap()));
    meta.labels = Some(
        [
            ("kubernetes.io/service-name".to_owned(), format!("derived-{service}")),
            ("endpointslice.kubernetes.io/managed-by".to_owned(), "karmada".to_owned()),
        ]
        .into(),
    );
    let mut annotations = extra.clone();
    if annotated {
        annotations.insert("work.karmada.io/namespace".into(), "karmada-es-east".into());
    }
    meta.annotations = Some(annotations);
    mcs
}

fn service_import(ns: &str, name: &str, annotations: BTreeMap<String, String>) -> ServiceImport {
    ServiceImport {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: ServiceImportSpec { type_: "ClusterSetIP".into(), ..Default::default() },
        status: None,
    }
}

async fn get(url: &str) -> (reqwest::StatusCode, String, Value) {
    let reply = reqwest::get(url).await.unwrap();
    let status = reply.status();
    let etag =
        reply.headers().get("etag").map(|e| e.to_str().unwrap().to_owned()).unwrap_or_default();
    (status, etag, reply.json().await.unwrap_or(Value::Null))
}

/// A started, admin-reachable API server with the MCS CRDs and the
/// registry's read-only role; `None` when absent and not required.
async fn hub() -> Option<(K8sEnv, kube::Client, std::path::PathBuf)> {
    let env = K8sEnv::start("hub").await?;
    let kube = env.client().await;
    install_crds(&kube).await;
    let kubeconfig = install_registry_rbac(&env, &kube).await;
    for ns in ["llm", "gr"] {
        ensure_namespace(&kube, ns).await;
    }
    Some((env, kube, kubeconfig))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_naming_schemes_give_the_same_pools_and_routers_and_a_slice_update_wakes_a_watch() {
    let Some((env, kube, kubeconfig)) = hub().await else { return };
    let slices = |ns: &str| Api::<EndpointSlice>::namespaced(kube.clone(), ns);
    let relay_v4 = [
        ("relay-a", "10.0.0.7", true),
        ("relay-b", "10.0.0.9", true),
        ("relay-c", "10.0.0.1", false),
    ];
    let relay_v6 = [("relay-a", "fd00::7", true)];
    let routers = [("gr-0", "10.0.5.1", true), ("gr-1", "10.0.5.2", true)];
    let relay_port = [("relay", 9000)];
    let router_ports = [("metrics", 9090), ("http", 8080)];
    // Standard MCS: slices, and ServiceImports carrying the exported annotations.
    apply(
        &slices("llm"),
        &mcs_slice(
            "llm",
            "llama-pool-relay-v4",
            "llama-pool-relay",
            "IPv4",
            &relay_v4,
            &relay_port,
        ),
    )
    .await;
    apply(
        &slices("llm"),
        &mcs_slice(
            "llm",
            "llama-pool-relay-v6",
            "llama-pool-relay",
            "IPv6",
            &relay_v6,
            &relay_port,
        ),
    )
    .await;
    apply(
        &slices("gr"),
        &mcs_slice("gr", "global-router-x1", "global-router", "IPv4", &routers, &router_ports),
    )
    .await;
    let imports = |ns: &str| Api::<ServiceImport>::namespaced(kube.clone(), ns);
    apply(&imports("llm"), &service_import("llm", "llama-pool-relay", pool_annotations())).await;
    apply(&imports("gr"), &service_import("gr", "global-router", BTreeMap::new())).await;
    // Karmada: the same endpoints, the annotations on the slices, one slice
    // named with its cluster only in its name.
    let none = BTreeMap::new();
    apply(
        &slices("llm"),
        &karmada_slice(
            mcs_slice(
                "llm",
                "llama-pool-relay-4k2xq",
                "llama-pool-relay",
                "IPv4",
                &relay_v4,
                &relay_port,
            ),
            true,
            &pool_annotations(),
        ),
    )
    .await;
    apply(
        &slices("llm"),
        &karmada_slice(
            mcs_slice(
                "llm",
                "llama-pool-relay-6m3zr",
                "llama-pool-relay",
                "IPv6",
                &relay_v6,
                &relay_port,
            ),
            false,
            &none,
        ),
    )
    .await;
    apply(
        &slices("gr"),
        &karmada_slice(
            mcs_slice(
                "gr",
                "global-router-9pq1w",
                "global-router",
                "IPv4",
                &routers,
                &router_ports,
            ),
            true,
            &none,
        ),
    )
    .await;

    let mcs = start_discovering_registry(&registry_bin(), &kubeconfig, "mcs", &[]).await;
    let karmada = start_discovering_registry(&registry_bin(), &kubeconfig, "karmada", &[]).await;
    for registry in [&mcs, &karmada] {
        let url = format!("{}/v1/pools", registry.api_url());
        eventually(WITHIN, "pools discovered, complete", async || {
            let (_, _, body) = get(&url).await;
            body["complete"] == json!(true)
                && body["pools"].as_array().is_some_and(|p| p.len() == 1)
        })
        .await;
    }
    let (_, etag, pools) = get(&format!("{}/v1/pools", mcs.api_url())).await;
    let pool = &pools["pools"][0];
    assert_eq!(
        pool["pool_key"],
        json!({"cluster_id": "east", "namespace": "llm", "dgd_name": "llama"})
    );
    assert_eq!(pool["relay_address"], json!("10.0.0.7:9000"), "the lowest ready address");
    assert_eq!(pool["relay_identities"], json!(["10.0.0.7", "fd00::7"]));
    assert_eq!(pool["model"], json!("meta-llama/Llama-3.1-8B"));
    assert_eq!(pool["location"], json!({"region": "us-east-1", "zone": "us-east-1a"}));
    assert_eq!(pool["capacity"], json!({"workers": 4}));
    let (_, _, karmada_pools) = get(&format!("{}/v1/pools", karmada.api_url())).await;
    assert_eq!(karmada_pools, pools, "the same pools and fingerprint in both schemes");
    let (_, _, routers_mcs) = get(&format!("{}/v1/routers", mcs.api_url())).await;
    let (_, _, routers_karmada) = get(&format!("{}/v1/routers", karmada.api_url())).await;
    assert_eq!(
        routers_mcs["routers"],
        json!([
            {"router_id": "gr-0.east", "address": "10.0.5.1:8080"},
            {"router_id": "gr-1.east", "address": "10.0.5.2:8080"},
        ])
    );
    assert_eq!(routers_karmada, routers_mcs);

    // A slice update wakes a watch: relay-a turns not ready, so the pool
    // binds relay-b.
    let watch = {
        let url = format!("{}/v1/pools?watch=true&timeout_secs=30", mcs.api_url());
        let etag = etag.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let reply =
                reqwest::Client::new().get(url).header("if-none-match", etag).send().await.unwrap();
            (reply.status(), started.elapsed(), reply.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let moved = [("relay-a", "10.0.0.7", false), ("relay-b", "10.0.0.9", true)];
    apply(
        &slices("llm"),
        &mcs_slice("llm", "llama-pool-relay-v4", "llama-pool-relay", "IPv4", &moved, &relay_port),
    )
    .await;
    let (status, waited, body) = watch.await.unwrap();
    assert_eq!(status, 200, "woken by the change, not the timeout ({waited:?})");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    assert_eq!(body["pools"][0]["relay_address"], json!("10.0.0.9:9000"));
    assert_eq!(body["pools"][0]["relay_identities"], json!(["10.0.0.9"]));
    assert_ne!(body["fingerprint"], pools["fingerprint"]);

    // Pool registrations are refused while discovering.
    let refused = reqwest::Client::new()
        .post(format!("{}/v1/pools", mcs.api_url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 501);
    assert_eq!(refused.json::<Value>().await.unwrap()["error"], json!("not_implemented"));

    // RBAC: only the role's verbs were used, none denied, and all of them.
    let requests = world::audited(&env, &world::registry_username());
    let denied: Vec<_> = requests.iter().filter(|r| r.3 == 403).collect();
    assert!(denied.is_empty(), "denied: {denied:?}");
    let used: BTreeSet<(String, String, String)> = requests
        .iter()
        .map(|(verb, group, resource, _)| (group.clone(), resource.clone(), verb.clone()))
        .collect();
    let granted: BTreeSet<(String, String, String)> = mcs_registry::discovery::RBAC_RULES
        .iter()
        .flat_map(|(g, r, verbs)| {
            verbs.iter().map(|v| ((*g).to_owned(), (*r).to_owned(), (*v).to_owned()))
        })
        .collect();
    assert_eq!(used, granted, "the registry used exactly its read-only role");
    // Lists from the watch cache (resourceVersion=0), unpaged; watches the
    // server ends after 50 s.
    let log = std::fs::read_to_string(env.audit_log()).unwrap();
    let uris: Vec<(String, String)> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == world::registry_username())
        .filter_map(|e| {
            Some((e["verb"].as_str()?.to_owned(), e["requestURI"].as_str()?.to_owned()))
        })
        .collect();
    for (verb, uri) in &uris {
        match verb.as_str() {
            "list" => {
                assert!(uri.contains("resourceVersion=0") && !uri.contains("limit="), "{uri}")
            }
            "watch" => assert!(uri.contains("timeoutSeconds=50"), "{uri}"),
            _ => panic!("{verb} {uri}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_rbac_makes_lists_incomplete_after_the_window_and_restored_complete() {
    let Some((_env, kube, kubeconfig)) = hub().await else { return };
    let slices = Api::<EndpointSlice>::namespaced(kube.clone(), "gr");
    apply(
        &slices,
        &mcs_slice(
            "gr",
            "global-router-x1",
            "global-router",
            "IPv4",
            &[("gr-0", "10.0.5.1", true)],
            &[("http", 8080)],
        ),
    )
    .await;
    apply(
        &Api::<ServiceImport>::namespaced(kube.clone(), "gr"),
        &service_import("gr", "global-router", BTreeMap::new()),
    )
    .await;
    // The issue's minute and two minutes, scaled down to seconds.
    let windows =
        ["--pool-discovery-error-window-secs", "2", "--pool-discovery-recovery-secs", "4"];
    let registry = start_discovering_registry(&registry_bin(), &kubeconfig, "mcs", &windows).await;
    let url = format!("{}/v1/routers", registry.api_url());
    let complete = async |want: bool| {
        let (_, _, body) = get(&url).await;
        body["complete"] == json!(want) && body["routers"].as_array().is_some_and(|r| r.len() == 1)
    };
    eventually(WITHIN, "complete", async || complete(true).await).await;

    unbind_registry_role(&kube).await;
    // The open watch ends within 50 s; its relist is then refused.
    eventually(Duration::from_secs(120), "incomplete, the last view still served", async || {
        complete(false).await
    })
    .await;
    let (_, _, ready) = get(&format!("{}/readyz", registry.api_url())).await;
    assert_eq!(ready["pool_discovery_complete"], json!(false), "{ready}");
    let metrics = reqwest::get(format!("{}/metrics", registry.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(world::sum_samples(&metrics, "mcs_pool_discovery_errors_total", &[]) >= 2.0);

    bind_registry_role(&kube).await;
    eventually(Duration::from_secs(90), "complete again", async || complete(true).await).await;
}

/// Runs the registry binary with `args` (and `env`) to its exit, with a
/// `KUBECONFIG` that does not exist: flags past their checks then fail on
/// the missing configuration (exit 1), not as a usage error (exit 2).
fn run_registry(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = std::process::Command::new(registry_bin())
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(args)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_flags_by_mode() {
    let router = mcs_testkit::fixtures::ROUTER_FLAGS;
    let with = |mode: &str, extra: &[&'static str]| -> Vec<&'static str> {
        let mode: &'static str = if mode == "mcs" { "mcs" } else { "karmada" };
        let mut v = vec!["--pool-discovery", mode];
        v.extend_from_slice(&router);
        v.extend_from_slice(extra);
        v
    };
    for mode in ["mcs", "karmada"] {
        // The router flags are required: a clap error, exit 2.
        let (code, err) = run_registry(&["--pool-discovery", mode, "--router-service", "gr"], &[]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--router-namespace") && err.contains("--router-port-name"), "{err}");
        // Complete: past every check, to the Kubernetes configuration.
        let (code, err) = run_registry(&with(mode, &[]), &[]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("no Kubernetes configuration"), "{err}");
        // A suffix starting with a hyphen is the flag's value.
        let (code, err) = run_registry(&with(mode, &["--pool-service-suffix", "-relay"]), &[]);
        assert_eq!(code, 1, "{err}");
        // An empty one is refused.
        let (code, err) = run_registry(&with(mode, &["--pool-service-suffix", ""]), &[]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("--pool-service-suffix"), "{err}");
        // Required flags may come from the environment.
        let env = [
            ("MCS_ROUTER_NAMESPACE", "gr"),
            ("MCS_ROUTER_SERVICE", "r"),
            ("MCS_ROUTER_PORT_NAME", "http"),
        ];
        let (code, err) = run_registry(&["--pool-discovery", mode], &env);
        assert_eq!(code, 1, "{err}");
    }
    // A discovery flag in registrations mode fails at startup, from the
    // command line or from the environment.
    let (code, err) = run_registry(&["--router-service", "gr"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--router-service needs --pool-discovery mcs or karmada"), "{err}");
    for (var, flag) in [
        ("MCS_ROUTER_SERVICE", "--router-service"),
        ("MCS_POOL_SERVICE_SUFFIX", "--pool-service-suffix"),
    ] {
        let (code, err) = run_registry(&["--pool-discovery", "registrations"], &[(var, "x")]);
        assert_eq!(code, 2, "{var}: {err}");
        assert!(err.contains(&format!("{flag} needs --pool-discovery")), "{err}");
    }
    // --help groups them under their mode's heading.
    let out = std::process::Command::new(registry_bin()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let at = help.find(mcs_registry::config::DISCOVERY_HEADING).expect("the discovery heading");
    for flag in
        ["--router-namespace", "--router-service", "--router-port-name", "--pool-service-suffix"]
    {
        assert!(help[at..].contains(flag), "{flag} under the heading:\n{help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_relay_exported_in_east_imported_into_hub_is_listed_by_a_registry_discovering_in_hub()
 {
    let Some(world) = World::start(mcs_tests::controller_binaries!(), &["east", "hub"], &[]).await
    else {
        return;
    };
    let east = world.cluster("east");
    let hub = world.cluster("hub");
    for c in [east, hub] {
        ensure_namespace(&c.kube, "llm").await;
        ensure_namespace(&c.kube, "gr").await;
    }
    let kubeconfig = install_registry_rbac(&hub.env, &hub.kube).await;
    // In east: the PoolRelay Service, its slice, and its ServiceExport
    // exporting the pool's annotations; the router Service likewise.
    let export = |ns: &str, name: &str, annotations: BTreeMap<String, String>| ServiceExport {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        spec: ServiceExportSpec { exported_annotations: annotations, ..Default::default() },
        status: None,
    };
    let own_slice = |ns: &str, service: &str, eps: &[(&str, &str, bool)], ports: &[(&str, u16)]| {
        let labels = json!({"kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "mcs-tests"});
        slice(ns, &format!("{service}-own"), "IPv4", labels, json!({}), eps, ports)
    };
    for (ns, name, port_name, port, eps, annotations) in [
        (
            "llm",
            "llama-pool-relay",
            "relay",
            9000,
            vec![("relay-a", "10.0.0.7", true), ("relay-b", "10.0.0.9", true)],
            pool_annotations(),
        ),
        ("gr", "global-router", "http", 8080, vec![("gr-0", "10.0.5.1", true)], BTreeMap::new()),
    ] {
        apply(
            &Api::namespaced(east.kube.clone(), ns),
            &world::service(ns, name, &[(port_name, port, port)], false),
        )
        .await;
        apply(
            &Api::namespaced(east.kube.clone(), ns),
            &own_slice(ns, name, &eps, &[(port_name, port)]),
        )
        .await;
        apply(&Api::namespaced(east.kube.clone(), ns), &export(ns, name, annotations)).await;
    }
    let registry = start_discovering_registry(&registry_bin(), &kubeconfig, "mcs", &[]).await;
    let url = format!("{}/v1/pools", registry.api_url());
    eventually(Duration::from_secs(60), "the pool of east listed through hub", async || {
        let (_, _, body) = get(&url).await;
        body["complete"] == json!(true) && body["pools"].as_array().is_some_and(|p| p.len() == 1)
    })
    .await;
    let (_, _, body) = get(&url).await;
    let pool = &body["pools"][0];
    assert_eq!(
        pool["pool_key"],
        json!({"cluster_id": "east", "namespace": "llm", "dgd_name": "llama"})
    );
    assert_eq!(pool["relay_address"], json!("10.0.0.7:9000"));
    assert_eq!(pool["model"], json!("meta-llama/Llama-3.1-8B"));
    assert_eq!(pool["capacity"], json!({"workers": 4}));
    let routers = format!("{}/v1/routers", registry.api_url());
    // Imported slices carry no targetRef (the pod is another cluster's):
    // the replica is named by its address.
    let want = json!([{"router_id": "ip-10-0-5-1.east", "address": "10.0.5.1:8080"}]);
    let what = format!("the router of east listed through hub: {want}");
    eventually(WITHIN, &what, async || get(&routers).await.2["routers"] == want).await;
}
