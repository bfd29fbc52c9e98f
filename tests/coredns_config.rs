//! The controller chart configures CoreDNS itself (issue 25,
//! `coredns.configure=true`), on a real API server holding kubeadm's
//! ConfigMap `kube-system/coredns`: `helm install`, `upgrade` and
//! `uninstall` run their hooks for real, and this test plays the part of
//! the Job controller and the kubelet, which the test cluster lacks.
//!
//! ```text
//!  helm install ─► hook SA + Role + binding ─► Job coredns-configure ─┐
//!                                                                     │ this test: the Job's args run
//!  mcs-controller coredns configure (as the Job's ServiceAccount) ◄───┘ here, its status written back
//!    ─► Corefile: clusterset.local + multicluster line, record annotation
//!  helm upgrade   ─► the same Job again: nothing written (same resourceVersion)
//!  CoreDNS on the result, under kubeadm's role + the chart's ServiceImport grant ─► ready
//!  helm uninstall ─► Job coredns-unconfigure ─► kubeadm's Corefile byte for byte; grant gone
//! ```
//!
//! The Job's command runs under a token of the Job's own ServiceAccount,
//! which the chart binds to nothing but its hook Role: the Role is tested
//! too. Refusals (no ConfigMap, a Corefile it cannot edit, no right to
//! write) are checked on the binary directly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use hickory_proto::rr::RecordType;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use mcs_controller::coredns::RECORD_ANNOTATION;
use mcs_testkit::k8s::K8sEnv;
use mcs_tests::charts::{Helm, chart_dir, pod_args};
use mcs_tests::dns::{CoreDns, KUBEADM_COREFILE, coredns_rbac, kubernetes_block};
use serde_json::json;
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

/// The release's namespace and name.
const NS: &str = "mcs-system";
const RELEASE: &str = "ctl";

/// Values every install of the controller chart needs.
const CONTROLLER_MIN: &[&str] =
    &["registryUrl=http://mcs-registry:8080", "registryAllowInsecureHttp=true"];

/// kubeadm's Corefile as `coredns configure` leaves it.
fn configured() -> String {
    KUBEADM_COREFILE.replace(
        "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n",
        "    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n       \
         multicluster clusterset.local\n",
    )
}

/// Creates ConfigMap `kube-system/coredns` with `corefile` under `Corefile`.
async fn create_configmap(maps: &Api<ConfigMap>, corefile: &str) {
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "coredns", "namespace": "kube-system"},
        "data": {"Corefile": corefile},
    }))
    .unwrap();
    maps.create(&PostParams::default(), &map).await.expect("ConfigMap kube-system/coredns");
}

/// The Corefile, the record annotation and the resourceVersion of
/// `kube-system/coredns`.
async fn read(maps: &Api<ConfigMap>) -> (String, Option<String>, String) {
    let map = maps.get("coredns").await.expect("ConfigMap kube-system/coredns");
    let corefile = map.data.as_ref().and_then(|d| d.get("Corefile")).cloned().expect("Corefile");
    let record = map.metadata.annotations.as_ref().and_then(|a| a.get(RECORD_ANNOTATION)).cloned();
    (corefile, record, map.metadata.resource_version.expect("a resourceVersion"))
}

/// Runs `binary args…` with `kubeconfig`, to its end.
async fn run(binary: &Path, kubeconfig: &Path, args: &[String]) -> Output {
    tokio::process::Command::new(binary)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()))
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Starts `helm args…` against `env` in the background (it waits for its
/// hook Jobs, which [`play_hook_job`] completes).
fn helm_in_background(
    helm: &Arc<Helm>,
    env: &K8sEnv,
    args: &[&str],
) -> tokio::task::JoinHandle<Output> {
    let helm = Arc::clone(helm);
    let kubeconfig = env.kubeconfig().to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        helm.run("helm", &args, Some(&kubeconfig), None)
    })
}

/// Waits for `helm` to end, successfully.
async fn helm_done(helm: tokio::task::JoinHandle<Output>, what: &str) {
    let out = helm.await.expect("helm's thread");
    assert!(out.status.success(), "{what}:\n{}", text(&out));
}

/// What the Job controller and the kubelet would do for hook Job `name`:
/// once helm has created it, runs its container's args with `binary` (the
/// image's entrypoint) under a token of the Job's ServiceAccount, and
/// writes the outcome into the Job's status (`Complete`, or `Failed`),
/// which helm waits for. The command's output.
async fn play_hook_job(env: &K8sEnv, kube: &kube::Client, name: &str, binary: &Path) -> Output {
    let jobs: Api<Job> = Api::namespaced(kube.clone(), NS);
    let mut job = None;
    mcs_testkit::eventually(
        Duration::from_secs(60),
        &format!("helm creates Job {name}"),
        async || {
            job = jobs.get_opt(name).await.ok().flatten();
            job.is_some()
        },
    )
    .await;
    let job = serde_json::to_value(job.expect("the Job")).unwrap();
    let args = pod_args(&job, &[]);
    let account = job["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .expect("the Job's ServiceAccount");
    // Made by the hook before the Job (weight -10), not by the test.
    Api::<ServiceAccount>::namespaced(kube.clone(), NS)
        .get(account)
        .await
        .unwrap_or_else(|e| panic!("the hook's ServiceAccount {account} before its Job: {e}"));
    let kubeconfig = env.service_account_kubeconfig(NS, account).await;
    let out = run(binary, &kubeconfig, &args).await;
    eprintln!("--- Job {name}: mcs-controller {args:?} ({}):\n{}", out.status, text(&out));

    let now = serde_json::to_value(Time(k8s_openapi::jiff::Timestamp::now())).unwrap();
    let status = if out.status.success() {
        json!({
            "startTime": now, "completionTime": now, "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "lastTransitionTime": now},
            ],
        })
    } else {
        json!({
            "startTime": now, "failed": 1,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "lastTransitionTime": now},
                {"type": "Failed", "status": "True", "lastTransitionTime": now},
            ],
        })
    };
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status})))
        .await
        .unwrap_or_else(|e| panic!("the status of Job {name}: {e}"));
    out
}

/// Whether `api` has no object `name`.
async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.is_ok_and(|o| o.is_none())
}

#[tokio::test]
async fn the_charts_hooks_configure_kubeadms_corefile_once_and_restore_it_on_uninstall() {
    let Some(helm) = Helm::find() else { return };
    let Some(env) = K8sEnv::start("coredns-config").await else { return };
    let helm = Arc::new(helm);
    let binary = mcs_tests::controller_binaries!().controller;
    let kube = env.client().await;
    let maps: Api<ConfigMap> = Api::namespaced(kube.clone(), "kube-system");
    // What kubeadm installs: the ConfigMap, CoreDNS's ServiceAccount and
    // its system:coredns role (no ServiceImports).
    coredns_rbac(&kube, false).await;
    create_configmap(&maps, KUBEADM_COREFILE).await;

    let hook = "ctl-mcs-controller-coredns";
    let grant = "ctl-mcs-controller-coredns-serviceimports";
    let jobs: Api<Job> = Api::namespaced(kube.clone(), NS);
    let hook_roles: Api<Role> = Api::namespaced(kube.clone(), "kube-system");
    let hook_bindings: Api<RoleBinding> = Api::namespaced(kube.clone(), "kube-system");
    let hook_accounts: Api<ServiceAccount> = Api::namespaced(kube.clone(), NS);
    let cluster_roles: Api<ClusterRole> = Api::all(kube.clone());
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(kube.clone());

    // Install: the post-install hook configures.
    let dir = chart_dir("mcs-controller");
    let chart = dir.to_str().expect("utf-8");
    let mut args = vec!["install", RELEASE, chart, "-n", NS, "--create-namespace"];
    args.extend(["--timeout", "2m", "--set", "coredns.configure=true"]);
    for v in CONTROLLER_MIN {
        args.extend(["--set", v]);
    }
    let install = helm_in_background(&helm, &env, &args);
    let out = play_hook_job(&env, &kube, &format!("{hook}-configure"), &binary).await;
    assert!(out.status.success(), "coredns configure:\n{}", text(&out));
    helm_done(install, "helm install").await;
    let (corefile, record, version) = read(&maps).await;
    assert_eq!(corefile, configured());
    let record: serde_json::Value = serde_json::from_str(&record.expect("the record")).unwrap();
    assert_eq!(
        record,
        json!({"zone": "clusterset.local", "zoneAdded": true, "multiclusterLineAdded": true})
    );
    // The hooks and their rights are gone once they succeeded.
    mcs_testkit::eventually(Duration::from_secs(30), "the hooks deleted", async || {
        gone(&jobs, &format!("{hook}-configure")).await
            && gone(&hook_roles, hook).await
            && gone(&hook_bindings, hook).await
            && gone(&hook_accounts, hook).await
    })
    .await;

    // Upgrade: the hook runs again and writes nothing.
    let args = ["upgrade", RELEASE, chart, "-n", NS, "--reuse-values", "--timeout", "2m"];
    let upgrade = helm_in_background(&helm, &env, &args);
    let out = play_hook_job(&env, &kube, &format!("{hook}-configure"), &binary).await;
    assert!(out.status.success(), "coredns configure, again:\n{}", text(&out));
    assert!(text(&out).contains("nothing written"), "{}", text(&out));
    helm_done(upgrade, "helm upgrade").await;
    let (again, _, version_again) = read(&maps).await;
    assert_eq!(again, configured());
    assert_eq!(version_again, version, "the second configure wrote the ConfigMap");

    // CoreDNS accepts the Corefile and, with the chart's grant, syncs its
    // ServiceImport informer (`ready` waits for it): the zone is served.
    let role = cluster_roles.get(grant).await.expect("CoreDNS's ServiceImport ClusterRole");
    assert_eq!(
        role.rules,
        mcs_controller::rbac::cluster_role_of("x", mcs_controller::coredns::SERVICEIMPORT_RULES)
            .rules
    );
    let block = kubernetes_block(&again).expect("a kubernetes block");
    let coredns = CoreDns::start(&env, &block).await;
    let answer = coredns.ask("web.demo.svc.clusterset.local.", RecordType::A).await;
    assert!(answer.nxdomain(), "the clusterset zone is not served: {answer:?}\n{}", coredns.log());
    drop(coredns);

    // Uninstall: the pre-delete hook restores kubeadm's Corefile, then the
    // grant goes with the release.
    let args = ["uninstall", RELEASE, "-n", NS, "--timeout", "2m"];
    let uninstall = helm_in_background(&helm, &env, &args);
    let out = play_hook_job(&env, &kube, &format!("{hook}-unconfigure"), &binary).await;
    assert!(out.status.success(), "coredns unconfigure:\n{}", text(&out));
    helm_done(uninstall, "helm uninstall").await;
    let (restored, record, version) = read(&maps).await;
    assert_eq!(restored, KUBEADM_COREFILE, "not kubeadm's Corefile byte for byte");
    assert_eq!(record, None, "the record annotation stays");
    mcs_testkit::eventually(Duration::from_secs(30), "the grant and the hooks gone", async || {
        gone(&cluster_roles, grant).await
            && gone(&cluster_bindings, grant).await
            && gone(&jobs, &format!("{hook}-unconfigure")).await
            && gone(&hook_roles, hook).await
    })
    .await;

    // Unconfigure once more, on a Corefile with nothing of ours: nothing written.
    let args = ["coredns", "unconfigure"].map(str::to_owned);
    let out = run(&binary, env.kubeconfig(), &args).await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(read(&maps).await.2, version, "unconfigure wrote an unconfigured ConfigMap");
}

/// What the command refuses, naming the ConfigMap: exit 2 for the target
/// (missing, no such key, a Corefile it cannot edit), exit 1 for the API
/// server's refusal; and none of them writes.
#[tokio::test]
async fn refusals_name_the_configmap_and_write_nothing() {
    let Some(env) = K8sEnv::start("coredns-refusals").await else { return };
    let binary = mcs_tests::controller_binaries!().controller;
    let kube = env.client().await;
    let maps: Api<ConfigMap> = Api::namespaced(kube.clone(), "kube-system");
    let admin = env.kubeconfig();
    let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let configure = args(&["coredns", "configure"]);

    // No ConfigMap: configure refuses; unconfigure has nothing to undo.
    let out = run(&binary, admin, &configure).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("ConfigMap kube-system/coredns not found"), "{}", text(&out));
    let out = run(&binary, admin, &args(&["coredns", "unconfigure"])).await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to undo"), "{}", text(&out));

    // A Corefile without the cluster's kubernetes block.
    let forward_only = ".:53 {\n    errors\n    forward . /etc/resolv.conf\n}\n";
    create_configmap(&maps, forward_only).await;
    let (_, _, version) = read(&maps).await;
    let out = run(&binary, admin, &configure).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(
            "ConfigMap kube-system/coredns key \"Corefile\": no `kubernetes` plugin block whose \
             zones include cluster.local"
        ),
        "{}",
        text(&out)
    );
    let out = run(&binary, admin, &args(&["coredns", "configure", "--key", "Corefile.main"])).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("has no key \"Corefile.main\""), "{}", text(&out));

    // A ServiceAccount without the hook's Role: the API server refuses.
    let nobody = env.service_account_kubeconfig("kube-system", "nobody").await;
    let out = run(&binary, &nobody, &configure).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("forbidden"), "{}", text(&out));

    assert_eq!(read(&maps).await, (forward_only.to_owned(), None, version));
}
