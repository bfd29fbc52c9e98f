//! `kubectl mcs status` (issue 26) against a real API server: the
//! controller's leader Lease, a ServiceExport in conflict and a
//! ServiceImport with its source clusters, ports and clusterset IP, as the
//! plugin prints them for the current context, and side by side for every
//! context of a kubeconfig.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_controller::leader::INCARNATION_ANNOTATION;
use mcs_testkit::k8s::{K8sEnv, ensure_namespace};
use mcs_tests::controller::{SYSTEM_NAMESPACE, install_crds};
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// `kubectl-mcs args…` with `kubeconfig`: exit code and stdout.
fn plugin(kubeconfig: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-mcs-for-tests"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("kubectl-mcs runs");
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_leader_exports_and_imports_of_a_context_and_compares_contexts() {
    let Some(env) = K8sEnv::start("kubectl-mcs").await else { return };
    let kube = env.client().await;
    // Without the CRDs: one line naming what is missing and how to install
    // it. Before: kube's text, `ApiError: 404 page not found: Failed to
    // parse error data (Status { status: Some(Failure), code: 404, … })`.
    let (code, _, err) = plugin(env.kubeconfig(), &["status"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "): 404 page not found (404): the API server does not serve \
             serviceexports.multicluster.x-k8s.io (v1beta1): install the CRDs (`mcs-controller crds"
        ),
        "{err}"
    );
    assert!(!err.contains("Status {"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    install_crds(&kube).await;
    ensure_namespace(&kube, SYSTEM_NAMESPACE).await;
    ensure_namespace(&kube, "llm").await;

    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "mcs-controller", "namespace": SYSTEM_NAMESPACE,
                     "annotations": {INCARNATION_ANNOTATION: "east-1a2b"}},
        "spec": {"holderIdentity": "mcs-controller-7d9f", "renewTime": "2026-12-04T19:00:00.000000Z",
                 "leaseDurationSeconds": 15}
    }))
    .unwrap();
    Api::<Lease>::namespaced(kube.clone(), SYSTEM_NAMESPACE)
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();

    let exports: Api<ServiceExport> = Api::namespaced(kube.clone(), "llm");
    let export: ServiceExport = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": "llm"}
    }))
    .unwrap();
    exports.create(&PostParams::default(), &export).await.unwrap();
    let condition = |t: &str, s: &str, r: &str, m: &str| {
        json!({"type": t, "status": s, "reason": r, "message": m,
               "lastTransitionTime": "2026-12-04T19:00:00Z"})
    };
    let status = json!({"status": {"conditions": [
        condition("Valid", "True", "Valid", "the service is exported"),
        condition("Ready", "True", "Exported", "exported to the registry"),
        condition("Conflict", "True", "PortConflict", "ports differ from cluster west's"),
    ]}});
    exports.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();

    let imports: Api<ServiceImport> = Api::namespaced(kube.clone(), "llm");
    let import: ServiceImport = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "llm"},
        "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
                 "ips": ["10.96.0.10"]}
    }))
    .unwrap();
    imports.create(&PostParams::default(), &import).await.unwrap();
    let clusters = json!({"status": {"clusters": [{"cluster": "east"}, {"cluster": "west"}]}});
    imports.patch_status("web", &PatchParams::default(), &Patch::Merge(&clusters)).await.unwrap();

    let (code, out, err) = plugin(env.kubeconfig(), &["status"]);
    assert_eq!(code, Some(0), "{err}");
    for expected in [
        "controller  lease mcs-system/mcs-controller, leader mcs-controller-7d9f, renewed \
         2026-12-04T19:00:00Z, registry incarnation east-1a2b\n",
        "llm/web  True   True   True      Conflict=True PortConflict: ports differ from cluster \
         west's\n",
        "llm/web  ClusterSetIP  east,west  http/TCP/80  10.96.0.10\n",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from\n{out}");
    }

    // A kubeconfig of two contexts (the same cluster twice, as two names).
    let mut config: serde_json::Value =
        serde_norway::from_str(&std::fs::read_to_string(env.kubeconfig()).unwrap()).unwrap();
    let mut second = config["contexts"][0].clone();
    second["name"] = json!("second");
    config["contexts"].as_array_mut().unwrap().push(second);
    let first = config["contexts"][0]["name"].as_str().unwrap().to_owned();
    let two = env.dir().join("two-contexts.kubeconfig");
    std::fs::write(&two, serde_norway::to_string(&config).unwrap()).unwrap();
    let (code, out, err) = plugin(&two, &["status", "--all-contexts"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.matches("CONTEXT ").count(), 2, "{out}");
    let side = &out[out.find("SIDE BY SIDE\n").expect(&out)..];
    let row = side.lines().find(|l| l.starts_with("llm/web")).expect(side);
    assert_eq!(
        row.matches("export Ready=True conflict, import from east,west").count(),
        2,
        "{first} and second side by side: {side}"
    );

    let (code, _, err) = plugin(env.kubeconfig(), &["status", "--context", "nowhere"]);
    assert_eq!(code, Some(1), "an unknown context fails");
    assert!(err.starts_with("kubectl-mcs: "), "{err}");
}
