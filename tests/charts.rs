//! The Helm charts of `charts/` with real helm and a real API server:
//! lint, the helm-unittest suites, the controller chart's CRDs and
//! ClusterRole against what `mcs-controller` generates, the READMEs'
//! values tables, a server-side dry run of every value combination, a
//! real install, upgrade and uninstall, and the controller as its chart
//! deploys it registering with a registry. Pods never run (there is no
//! kubelet): the objects are what is checked, and the controller runs as
//! a local process with the Deployment's own flags and environment.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use mcs_testkit::k8s::{K8sEnv, ensure_namespace};
use mcs_tests::charts::{
    Helm, README_MARKER, chart_dir, expected_readme, find_kind, materialize_mounts, pod_args,
    pod_env, substitute_mounts,
};
use mcs_tests::controller::ControllerProcess;
use std::path::PathBuf;
use std::time::Duration;

/// The registry's flags a local process sets itself (`mcs_testkit::process::Launch`).
const LISTEN_FLAGS: &[&str] = &["--listen=", "--admin-listen=", "--log-format="];

/// Values every render of the controller chart needs.
const CONTROLLER_MIN: &[&str] =
    &["registryUrl=http://mcs-registry:8080", "registryAllowInsecureHttp=true"];

#[test]
fn both_charts_pass_helm_lint_strict() {
    let Some(helm) = Helm::find() else { return };
    for (chart, values) in [("mcs-registry", &[][..]), ("mcs-controller", CONTROLLER_MIN)] {
        let dir = chart_dir(chart);
        let mut args = vec!["lint", "--strict", dir.to_str().expect("utf-8")];
        for v in values {
            args.extend(["--set", v]);
        }
        let out = helm.ok("helm", &args, None, None);
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

#[test]
fn the_helm_unittest_suites_pass_with_at_least_80_cases() {
    let Some(helm) = Helm::find() else { return };
    let mut total = 0;
    for chart in ["mcs-registry", "mcs-controller"] {
        let dir = chart_dir(chart);
        let out = helm.ok("untt", &["--color=false", dir.to_str().expect("utf-8")], None, None);
        let passed = out
            .lines()
            .find_map(|l| l.strip_prefix("Tests:"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("no test count in:\n{out}"));
        assert!(!out.contains("FAIL"), "{out}");
        total += passed;
    }
    assert!(total >= 80, "{total} helm-unittest cases; the issue asks for at least 80");
}

#[test]
fn the_controller_charts_crds_are_what_mcs_controller_crds_prints() {
    let path = chart_dir("mcs-controller").join("crds/crds.yaml");
    let want = mcs_controller::crd::crds_yaml().expect("crds yaml");
    if std::env::var("UPDATE_CHART_CRDS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).expect("writing the CRDs");
    }
    let have = std::fs::read_to_string(&path).expect("the chart's CRDs");
    assert!(
        have == want,
        "charts/mcs-controller/crds/crds.yaml differs from `mcs-controller crds`: refresh it with \
         UPDATE_CHART_CRDS=1 cargo test -p mcs-tests --test charts crds"
    );
}

#[test]
fn the_controller_charts_roles_grant_exactly_the_controllers_rules() {
    let Some(helm) = Helm::find() else { return };
    let docs = helm.template("mcs-controller", "mcs-system", CONTROLLER_MIN);
    let role: ClusterRole =
        serde_json::from_value(find_kind(&docs, "ClusterRole").clone()).expect("a ClusterRole");
    let want = mcs_controller::rbac::cluster_role("x").rules;
    assert_eq!(role.rules, want, "the chart's rbac.yaml must list mcs_controller::rbac::RULES");
    let role: Role = serde_json::from_value(find_kind(&docs, "Role").clone()).expect("a Role");
    assert_eq!(role.metadata.namespace.as_deref(), Some("mcs-system"));
    let want = mcs_controller::rbac::lease_rules("mcs-controller");
    assert_eq!(role.rules, Some(want), "the chart's Lease Role against rbac::lease_rules");
}

/// Issue 25: with `coredns.configure=true`, CoreDNS's ClusterRole grants
/// exactly `mcs_controller::coredns::SERVICEIMPORT_RULES`, and the hooks'
/// Role exactly `CONFIGMAP_VERBS` on CoreDNS's ConfigMap by name.
#[test]
fn the_controller_charts_coredns_roles_grant_exactly_what_coredns_and_the_hooks_use() {
    let Some(helm) = Helm::find() else { return };
    let values = [CONTROLLER_MIN, &["coredns.configure=true", "coredns.configMap=dns"]].concat();
    let docs = helm.template("mcs-controller", "mcs-system", &values);
    let named = |kind: &str, name: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .clone()
    };
    let role: ClusterRole =
        serde_json::from_value(named("ClusterRole", "t-mcs-controller-coredns-serviceimports"))
            .unwrap();
    let want =
        mcs_controller::rbac::cluster_role_of("x", mcs_controller::coredns::SERVICEIMPORT_RULES)
            .rules;
    assert_eq!(role.rules, want, "templates/coredns-rbac.yaml against SERVICEIMPORT_RULES");
    let role: Role = serde_json::from_value(named("Role", "t-mcs-controller-coredns")).unwrap();
    assert_eq!(role.metadata.namespace.as_deref(), Some("kube-system"));
    let rules = role.rules.unwrap_or_default();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0].resources, Some(vec!["configmaps".to_owned()]));
    assert_eq!(rules[0].resource_names, Some(vec!["dns".to_owned()]));
    let verbs: Vec<&str> = rules[0].verbs.iter().map(String::as_str).collect();
    assert_eq!(verbs, mcs_controller::coredns::CONFIGMAP_VERBS);
}

/// Issue 23 item 8: the chart ships the admission policy that
/// `mcs-controller rbac` prints, for the release's ServiceAccount, and
/// leaves it out when asked.
#[test]
fn the_controller_charts_admission_policy_is_the_controllers() {
    let Some(helm) = Helm::find() else { return };
    let docs = helm.template("mcs-controller", "mcs-system", CONTROLLER_MIN);
    let account = find_kind(&docs, "ServiceAccount")["metadata"]["name"].as_str().unwrap();
    let role = find_kind(&docs, "ClusterRole")["metadata"]["name"].as_str().unwrap();
    let policy: ValidatingAdmissionPolicy =
        serde_json::from_value(find_kind(&docs, "ValidatingAdmissionPolicy").clone()).unwrap();
    let want = mcs_controller::rbac::policy(role, "mcs-system", account);
    assert_eq!(policy.metadata.name, want.metadata.name);
    assert_eq!(policy.spec, want.spec, "templates/admission-policy.yaml against rbac::policy");
    let binding: ValidatingAdmissionPolicyBinding =
        serde_json::from_value(find_kind(&docs, "ValidatingAdmissionPolicyBinding").clone())
            .unwrap();
    assert_eq!(binding.spec, mcs_controller::rbac::policy_binding(role).spec);
    let without = [CONTROLLER_MIN, &["rbac.admissionPolicy=false"]].concat();
    let docs = helm.template("mcs-controller", "mcs-system", &without);
    assert!(!docs.iter().any(|d| d["kind"].as_str().unwrap_or("").starts_with("ValidatingAdm")));
}

/// Issue 23 item 9: each chart ships its alerting rules as a
/// PrometheusRule when asked (off by default), exactly the rules of
/// deploy/prometheus/, with the labels a Prometheus selects rules by; asked
/// where the operator's API is not served, it fails saying so.
#[test]
fn each_chart_ships_its_alerting_rules_as_a_prometheus_rule_when_asked() {
    let Some(helm) = Helm::find() else { return };
    for (chart, values, rules) in [
        ("mcs-registry", &[][..], "deploy/prometheus/alerts.yaml"),
        ("mcs-controller", CONTROLLER_MIN, "deploy/prometheus/mcs-controller-alerts.yaml"),
    ] {
        let docs = helm.template(chart, "mcs-system", values);
        assert!(!docs.iter().any(|d| d["kind"] == "PrometheusRule"), "{chart}: off by default");
        let asked =
            [values, &["prometheusRule.enabled=true", "prometheusRule.labels.release=p"]].concat();
        let served = ["--api-versions", "monitoring.coreos.com/v1"];
        let args = helm.template_args(chart, "mcs-system", &asked, &served);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let docs = mcs_tests::charts::documents(&helm.ok("helm", &args, None, None));
        let rule = find_kind(&docs, "PrometheusRule");
        let path = mcs_tests::workspace_root().join(rules);
        let want: serde_json::Value =
            serde_norway::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(rule["spec"], want, "{chart}: the PrometheusRule against {rules}");
        assert_eq!(rule["metadata"]["labels"]["release"], "p");
        let args = helm.template_args(chart, "mcs-system", &asked, &[]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = helm.run("helm", &args, None, None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains("monitoring.coreos.com/v1"), "{stderr}");
    }
}

/// Issue 23 item 9: promtool accepts the alerting rules of both charts
/// (deploy/prometheus/), and each dashboard of deploy/grafana/ is JSON a
/// Grafana imports: panels with distinct ids, each with a query on the
/// dashboard's data source variable.
#[test]
fn promtool_accepts_the_alerting_rules_and_the_dashboards_are_well_formed() {
    let Some(helm) = Helm::find() else { return };
    let root = mcs_tests::workspace_root();
    for rules in ["deploy/prometheus/alerts.yaml", "deploy/prometheus/mcs-controller-alerts.yaml"] {
        let path = root.join(rules);
        let out = helm.ok("promtool", &["check", "rules", path.to_str().unwrap()], None, None);
        assert!(out.contains("SUCCESS"), "promtool check rules {rules}: {out}");
    }
    for dashboard in ["mcs-registry", "mcs-controller"] {
        let path = root.join(format!("deploy/grafana/{dashboard}.json"));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(json["uid"], dashboard);
        let panels = json["panels"].as_array().unwrap();
        let ids: std::collections::BTreeSet<u64> =
            panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
        assert_eq!(ids.len(), panels.len(), "{dashboard}: panel ids repeat");
        for panel in panels {
            let targets = panel["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{dashboard}: {} has no query", panel["title"]);
            assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        }
    }
}

#[test]
fn the_registry_charts_discovery_role_grants_what_pool_discovery_reads() {
    let Some(helm) = Helm::find() else { return };
    let mode_values = |mode: &str| {
        vec![
            format!("poolDiscovery.mode={mode}"),
            "poolDiscovery.routerNamespace=router".to_owned(),
            "poolDiscovery.routerService=router".to_owned(),
            "poolDiscovery.routerPortName=http".to_owned(),
        ]
    };
    for (mode, resources) in
        [("mcs", vec!["endpointslices", "serviceimports"]), ("karmada", vec!["endpointslices"])]
    {
        let values = mode_values(mode);
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let docs = helm.template("mcs-registry", "mcs", &values);
        let role: ClusterRole =
            serde_json::from_value(find_kind(&docs, "ClusterRole").clone()).expect("a ClusterRole");
        let granted: Vec<_> = mcs_registry::discovery::RBAC_RULES
            .iter()
            .filter(|(_, resource, _)| resources.contains(resource))
            .copied()
            .collect();
        let want = mcs_controller::rbac::cluster_role_of("x", &granted).rules;
        assert_eq!(role.rules, want, "{mode}: the chart's rbac.yaml against discovery::RBAC_RULES");
    }
}

#[test]
fn the_chart_readmes_are_generated_from_their_values() {
    let update = std::env::var("UPDATE_CHART_READMES").is_ok_and(|v| v == "1");
    for chart in ["mcs-registry", "mcs-controller"] {
        let want = expected_readme(chart).unwrap_or_else(|e| panic!("charts/{chart}: {e}"));
        let path = chart_dir(chart).join("README.md");
        if update {
            std::fs::write(&path, &want).expect("writing the README");
        }
        let have = std::fs::read_to_string(&path).expect("README");
        assert!(
            have == want,
            "charts/{chart}/README.md is not current with values.yaml: refresh it with \
             UPDATE_CHART_READMES=1 cargo test -p mcs-tests --test charts readmes"
        );
        assert!(have.contains(README_MARKER));
    }
}

/// The registry chart's value combinations (each one rendered, dry-run
/// on the server, and every object checked by the API server's schema).
const REGISTRY_COMBINATIONS: &[&[&str]] = &[
    &[],
    &[
        "storage=dynamodb",
        "dynamodb.table=mcs",
        "dynamodb.region=us-east-1",
        "replicaCount=3",
        "migrate.enabled=true",
        "migrate.create=true",
        "serviceAccount.irsaRoleArn=arn:aws:iam::123456789012:role/mcs-registry",
    ],
    &[
        "storage=dynamodb",
        "dynamodb.table=mcs",
        "dynamodb.endpoint=http://ddb:8000",
        "extraEnvFrom=[{\"secretRef\":{\"name\":\"aws\"}}]",
    ],
    &["tls.secretName=reg-tls"],
    &["tls.secretName=reg-tls", "tls.clientCa.configMapName=clients-ca"],
    &[
        "tls.secretName=reg-tls",
        "tls.clientCa.secretName=reg-tls",
        "tls.adminTls=true",
        "authz.mode=spiffe",
        "authz.spiffeTrustDomain=example.org",
    ],
    &[
        "poolDiscovery.mode=mcs",
        "poolDiscovery.routerNamespace=gr",
        "poolDiscovery.routerService=gr",
        "poolDiscovery.routerPortName=http",
    ],
    &[
        "poolDiscovery.mode=karmada",
        "poolDiscovery.routerNamespace=gr",
        "poolDiscovery.routerService=gr",
        "poolDiscovery.routerPortName=http",
        "poolDiscovery.poolServiceSuffix=-relay",
    ],
    &["serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom"],
    &["serviceMonitor.enabled=true", "tls.secretName=t", "tls.adminTls=true"],
    &[
        "networkPolicy.enabled=true",
        "networkPolicy.apiFrom=[{\"namespaceSelector\":{\"matchLabels\":{\"mcs\":\"client\"}}}]",
    ],
    &[
        "topologySpread.enabled=false",
        "podDisruptionBudget.enabled=false",
        "service.type=LoadBalancer",
    ],
];

/// The controller chart's value combinations (with [`CONTROLLER_MIN`]
/// unless they name the registry themselves).
const CONTROLLER_COMBINATIONS: &[&[&str]] = &[
    CONTROLLER_MIN,
    &[
        "registryUrl=https://mcs-registry.mcs.svc:8080",
        "registryTlsCa.configMapName=registry-ca",
        "registryClientCert.secretName=mcs-controller-east",
        "clusterId=east",
    ],
    &[
        "registryUrl=http://r:8080",
        "registryAllowInsecureHttp=true",
        "replicaCount=1",
        "autoExport.enabled=true",
    ],
    &["registryUrl=http://r:8080", "registryAllowInsecureHttp=true", "serviceMonitor.enabled=true"],
    // The hooks' Role in CoreDNS's namespace: the release's here, as the
    // dry run applies every object to one namespace.
    &[
        "registryUrl=http://r:8080",
        "registryAllowInsecureHttp=true",
        "coredns.configure=true",
        "coredns.namespace=mcs",
    ],
];

/// The Deployment `name` in `namespace` as the API server holds it, as JSON.
async fn installed_deployment(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
) -> serde_json::Value {
    let d = Api::<Deployment>::namespaced(kube.clone(), namespace)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("Deployment {namespace}/{name}: {e}"));
    serde_json::to_value(&d).expect("json")
}

#[tokio::test]
async fn every_value_combination_passes_a_server_side_dry_run() {
    let Some(helm) = Helm::find() else { return };
    let Some(env) = K8sEnv::start("charts-dry").await else { return };
    let kubeconfig = env.kubeconfig();
    let kube = env.client().await;
    ensure_namespace(&kube, "mcs").await;
    // Pods of the namespace must meet the restricted Pod Security
    // Standard; templates that would not are warned about, which fails.
    helm.ok(
        "kubectl",
        &[
            "label",
            "namespace",
            "mcs",
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/warn=restricted",
        ],
        Some(kubeconfig),
        None,
    );
    // The CRDs of the controller chart, and the ServiceMonitor's, so that
    // the capability the charts ask for exists and the object is checked.
    let crds = chart_dir("mcs-controller").join("crds/crds.yaml");
    helm.ok(
        "kubectl",
        &["apply", "--server-side", "-f", crds.to_str().expect("utf-8")],
        Some(kubeconfig),
        None,
    );
    helm.ok(
        "kubectl",
        &["apply", "--server-side", "-f", "-"],
        Some(kubeconfig),
        Some(SERVICE_MONITOR_CRD),
    );
    wait_established(&kube, "servicemonitors.monitoring.coreos.com").await;

    let mut seen = std::collections::BTreeSet::new();
    for values in REGISTRY_COMBINATIONS {
        let kinds = helm.dry_run_server(kubeconfig, "mcs-registry", "mcs", values);
        let monitor = values.contains(&"serviceMonitor.enabled=true");
        assert_eq!(kinds.iter().any(|k| k == "ServiceMonitor"), monitor, "{values:?}: {kinds:?}");
        seen.extend(kinds);
    }
    for values in CONTROLLER_COMBINATIONS {
        let kinds = helm.dry_run_server(kubeconfig, "mcs-controller", "mcs", values);
        assert!(kinds.iter().any(|k| k == "ClusterRole"), "{kinds:?}");
        seen.extend(kinds);
    }
    for kind in [
        "Deployment",
        "Service",
        "ServiceAccount",
        "PodDisruptionBudget",
        "ClusterRole",
        "ClusterRoleBinding",
        "Job",
        "ServiceMonitor",
        "NetworkPolicy",
    ] {
        assert!(seen.contains(kind), "no combination rendered a {kind}: {seen:?}");
    }
}

/// A ServiceMonitor CRD as small as the API server accepts (the Prometheus
/// Operator's is megabytes): it makes `monitoring.coreos.com/v1` served.
const SERVICE_MONITOR_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

async fn wait_established(kube: &kube::Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    mcs_testkit::eventually(
        Duration::from_secs(30),
        &format!("CRD {name} established"),
        async || {
            crds.get(name)
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        },
    )
    .await;
}

fn args_of(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

fn replicas_of(deployment: &Deployment) -> Option<i32> {
    deployment.spec.replicas
}

#[tokio::test]
async fn install_upgrade_and_uninstall_create_change_and_remove_the_objects() {
    let Some(helm) = Helm::find() else { return };
    let Some(env) = K8sEnv::start("charts-install").await else { return };
    let kubeconfig = env.kubeconfig();
    let kube = env.client().await;
    let registry_dir = chart_dir("mcs-registry");
    let registry_chart = registry_dir.to_str().expect("utf-8");
    let controller_dir = chart_dir("mcs-controller");
    let controller_chart = controller_dir.to_str().expect("utf-8");
    let deployments: Api<Deployment> = Api::namespaced(kube.clone(), "mcs");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(kube.clone(), "mcs");
    let roles: Api<ClusterRole> = Api::all(kube.clone());

    // The registry: install (defaults), upgrade (DynamoDB, 3 replicas,
    // TLS, pool discovery), uninstall.
    helm.ok(
        "helm",
        &["install", "reg", registry_chart, "-n", "mcs", "--create-namespace"],
        Some(kubeconfig),
        None,
    );
    let d = deployments.get("reg-mcs-registry").await.expect("the registry Deployment");
    assert!(args_of(&d).contains(&"--storage=memory".to_owned()), "{:?}", args_of(&d));
    assert_eq!(replicas_of(&d), Some(1));
    Api::<Service>::namespaced(kube.clone(), "mcs").get("reg-mcs-registry").await.expect("Service");
    Api::<ServiceAccount>::namespaced(kube.clone(), "mcs")
        .get("reg-mcs-registry")
        .await
        .expect("ServiceAccount");
    assert!(
        pdbs.get_opt("reg-mcs-registry").await.expect("get").is_none(),
        "no PDB for one replica"
    );
    assert!(roles.get_opt("reg-mcs-registry-pool-discovery").await.expect("get").is_none());

    let upgrade = [
        "storage=dynamodb",
        "dynamodb.table=mcs",
        "replicaCount=3",
        "tls.secretName=reg-tls",
        "poolDiscovery.mode=mcs",
        "poolDiscovery.routerNamespace=gr",
        "poolDiscovery.routerService=gr",
        "poolDiscovery.routerPortName=http",
    ];
    helm.release(kubeconfig, &["upgrade", "reg", registry_chart, "-n", "mcs"], &upgrade);
    let d = deployments.get("reg-mcs-registry").await.expect("the registry Deployment");
    let a = args_of(&d);
    for flag in [
        "--storage=dynamodb",
        "--table=mcs",
        "--tls-cert-file=/tls/tls.crt",
        "--pool-discovery=mcs",
    ] {
        assert!(a.contains(&flag.to_owned()), "{flag} after the upgrade: {a:?}");
    }
    assert_eq!(replicas_of(&d), Some(3));
    pdbs.get("reg-mcs-registry").await.expect("a PDB for three replicas");
    let role =
        roles.get("reg-mcs-registry-pool-discovery").await.expect("the pool-discovery ClusterRole");
    assert_eq!(role.rules.map(|r| r.len()), Some(2));

    helm.ok("helm", &["uninstall", "reg", "-n", "mcs", "--wait"], Some(kubeconfig), None);
    mcs_testkit::eventually(Duration::from_secs(30), "the registry's objects gone", async || {
        deployments.get_opt("reg-mcs-registry").await.is_ok_and(|d| d.is_none())
            && pdbs.get_opt("reg-mcs-registry").await.is_ok_and(|d| d.is_none())
            && roles.get_opt("reg-mcs-registry-pool-discovery").await.is_ok_and(|d| d.is_none())
    })
    .await;

    // The controller: CRDs from crds/, its ClusterRole, two replicas.
    let values = [&["clusterId=east"], CONTROLLER_MIN].concat();
    helm.release(kubeconfig, &["install", "ctl", controller_chart, "-n", "mcs"], &values);
    let crds: Api<CustomResourceDefinition> = Api::all(kube.clone());
    for name in ["serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"] {
        crds.get(name).await.unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    }
    let d = deployments.get("ctl-mcs-controller").await.expect("the controller Deployment");
    assert_eq!(replicas_of(&d), Some(2));
    assert!(args_of(&d).contains(&"--leader-election-namespace=mcs".to_owned()));
    // Auto-export is opt-in (issue 29 item 11).
    assert!(!args_of(&d).iter().any(|a| a.starts_with("--auto-export-selector")), "{d:?}");
    roles.get("ctl-mcs-controller").await.expect("ClusterRole");
    Api::<ClusterRoleBinding>::all(kube.clone()).get("ctl-mcs-controller").await.expect("binding");
    pdbs.get("ctl-mcs-controller").await.expect("a PDB for two replicas");

    helm.release(
        kubeconfig,
        &["upgrade", "ctl", controller_chart, "-n", "mcs", "--reuse-values"],
        &["replicaCount=1", "autoExport.enabled=true"],
    );
    let d = deployments.get("ctl-mcs-controller").await.expect("the controller Deployment");
    assert_eq!(replicas_of(&d), Some(1));
    let selector = "--auto-export-selector=multicluster.x-k8s.io/export=true".to_owned();
    assert!(args_of(&d).contains(&selector), "{:?}", args_of(&d));
    mcs_testkit::eventually(Duration::from_secs(30), "the controller's PDB gone", async || {
        pdbs.get_opt("ctl-mcs-controller").await.is_ok_and(|p| p.is_none())
    })
    .await;

    helm.ok("helm", &["uninstall", "ctl", "-n", "mcs", "--wait"], Some(kubeconfig), None);
    mcs_testkit::eventually(Duration::from_secs(30), "the controller's objects gone", async || {
        deployments.get_opt("ctl-mcs-controller").await.is_ok_and(|d| d.is_none())
            && roles.get_opt("ctl-mcs-controller").await.is_ok_and(|r| r.is_none())
    })
    .await;
    // Helm never deletes CRDs (that would delete every ServiceExport).
    crds.get("serviceexports.multicluster.x-k8s.io").await.expect("the CRDs stay");
}

#[tokio::test]
async fn the_controller_as_its_chart_deploys_it_registers_with_a_registry() {
    let Some(helm) = Helm::find() else { return };
    let Some(env) = K8sEnv::start("charts-run").await else { return };
    let bins = mcs_tests::controller_binaries!();
    // The registry as its chart runs it by default (listen addresses aside).
    let rendered = helm.template("mcs-registry", "mcs", &[]);
    let registry_args = pod_args(find_kind(&rendered, "Deployment"), LISTEN_FLAGS);
    assert!(registry_args.contains(&"--storage=memory".to_owned()), "{registry_args:?}");
    let registry = mcs_tests::RegistryProcess::start(&bins.registry, &registry_args).await;
    let kubeconfig = env.kubeconfig();
    let kube = env.client().await;
    let dir = chart_dir("mcs-controller");
    let url = format!("registryUrl={}", registry.api_url());
    helm.release(
        kubeconfig,
        &["install", "ctl", dir.to_str().expect("utf-8"), "-n", "mcs-system", "--create-namespace"],
        &[&url, "registryAllowInsecureHttp=true", "clusterId=east"],
    );

    // The Deployment as installed: its flags, its environment (the
    // downward API resolved as the kubelet would), its ServiceAccount.
    let deployment = installed_deployment(&kube, "mcs-system", "ctl-mcs-controller").await;
    // Substituted: the metrics address (the pod's own network is this
    // machine's here); nothing else.
    let mut args = pod_args(&deployment, &["--admin-listen="]);
    args.push("--admin-listen=127.0.0.1:0".to_owned());
    let envs = pod_env(&deployment, "ctl-mcs-controller-0", "mcs-system");
    assert!(envs.iter().any(|(k, v)| k == "POD_NAMESPACE" && v == "mcs-system"), "{envs:?}");
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .expect("a ServiceAccount")
        .to_owned();
    // A token of the chart's ServiceAccount (it exists: the chart made it),
    // bound only by the chart's ClusterRole.
    Api::<ServiceAccount>::namespaced(kube.clone(), "mcs-system")
        .get(&account)
        .await
        .expect("the chart's ServiceAccount");
    let sa_kubeconfig = env.service_account_kubeconfig("mcs-system", &account).await;
    let controller =
        ControllerProcess::start_with_args(&bins.controller, &sa_kubeconfig, &args, &envs).await;

    let clusters_url = format!("{}/v1/clusters", registry.api_url());
    mcs_testkit::eventually(Duration::from_secs(30), "cluster east registered", async || {
        let Ok(r) = reqwest::get(&clusters_url).await else { return false };
        let Ok(body) = r.json::<serde_json::Value>().await else { return false };
        body["clusters"].as_array().is_some_and(|cs| cs.iter().any(|c| c["cluster_id"] == "east"))
    })
    .await;
    // It leads on the chart's Lease, in the release namespace.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(kube.clone(), "mcs-system");
    let lease = leases.get("mcs-controller").await.expect("the leader-election Lease");
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));
    drop(controller);
}

#[test]
fn the_charts_run_what_the_dockerfile_builds() {
    let Some(helm) = Helm::find() else { return };
    let dockerfile = std::fs::read_to_string(mcs_tests::workspace_root().join("Dockerfile"))
        .expect("Dockerfile");
    // The registry chart runs the default image's ENTRYPOINT, and the
    // migrate Job mcs-admin of the same image.
    let docs = helm.template(
        "mcs-registry",
        "mcs",
        &["storage=dynamodb", "dynamodb.table=t", "migrate.enabled=true"],
    );
    let job = find_kind(&docs, "Job");
    let command =
        job["spec"]["template"]["spec"]["containers"][0]["command"][0].as_str().expect("command");
    let last_stage = dockerfile.rsplit("\nFROM ").next().expect("a stage");
    assert!(last_stage.contains(command), "{command} is not in the registry image:\n{last_stage}");
    assert!(last_stage.contains(r#"ENTRYPOINT ["/usr/local/bin/mcs-registry"]"#));
    // The controller chart runs the image of the `mcs-controller` target.
    let stage = dockerfile
        .split("\nFROM ")
        .find(|s| s.lines().next().is_some_and(|l| l.ends_with(" AS mcs-controller")))
        .expect("a Dockerfile stage `AS mcs-controller`");
    assert!(stage.contains(r#"ENTRYPOINT ["/usr/local/bin/mcs-controller"]"#), "{stage}");
}

#[tokio::test]
async fn the_registry_as_its_chart_deploys_it_migrates_and_serves_its_dynamodb_table() {
    let Some(helm) = Helm::find() else { return };
    let Some(endpoint) = mcs_tests::dynamodb_endpoint() else { return };
    let bins = mcs_tests::binaries!();
    let table = mcs_tests::unique_table("chart");
    let values = [
        "storage=dynamodb".to_owned(),
        format!("dynamodb.table={table}"),
        format!("dynamodb.region={}", mcs_testkit::dynamo::REGION),
        format!("dynamodb.endpoint={endpoint}"),
        "migrate.enabled=true".to_owned(),
        "migrate.create=true".to_owned(),
    ];
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let rendered = helm.template("mcs-registry", "mcs", &values);
    // The hook Job's command, run here: it creates and migrates the table.
    let job = find_kind(&rendered, "Job");
    let command = job["spec"]["template"]["spec"]["containers"][0]["command"][0]
        .as_str()
        .expect("the Job's command");
    assert_eq!(command, "/usr/local/bin/mcs-admin");
    let job_args = pod_args(job, &[]);
    let job_args: Vec<&str> = job_args.iter().map(String::as_str).collect();
    let out = mcs_tests::run(&bins.admin, &job_args);
    assert!(
        out.status.success(),
        "mcs-admin {job_args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The registry with the Deployment's flags serves the table: ready.
    let args = pod_args(find_kind(&rendered, "Deployment"), LISTEN_FLAGS);
    let registry = mcs_tests::RegistryProcess::start(&bins.registry, &args).await;
    let ready = reqwest::get(format!("{}/readyz", registry.api_url())).await.expect("/readyz");
    assert_eq!(ready.status(), 200);
    // A second run of the hook (helm upgrade) finds nothing to do.
    let again = mcs_tests::run(&bins.admin, &job_args);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}

/// Creates Secret `name` in `namespace` with `files` (`kubernetes.io/tls`
/// when it holds `tls.crt`).
async fn create_secret(kube: &kube::Client, namespace: &str, name: &str, files: &[(&str, &str)]) {
    let mut secret = Secret::default();
    secret.metadata.name = Some(name.to_owned());
    if files.iter().any(|(k, _)| *k == "tls.crt") {
        secret.type_ = Some("kubernetes.io/tls".to_owned());
    }
    secret.string_data =
        Some(files.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
    Api::<Secret>::namespaced(kube.clone(), namespace)
        .create(&Default::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("Secret {namespace}/{name}: {e}"));
}

#[tokio::test]
async fn over_mtls_with_spiffe_authz_the_charts_controller_registers_with_the_charts_registry() {
    let Some(helm) = Helm::find() else { return };
    let Some(env) = K8sEnv::start("charts-mtls").await else { return };
    let bins = mcs_tests::controller_binaries!();
    let kubeconfig = env.kubeconfig();
    let kube = env.client().await;
    let files = mcs_testkit::pki::Dir::new("charts-mtls");

    // One CA: the registry's serving certificate (with ca.crt in its
    // Secret, as cert-manager writes it) and cluster east's client
    // certificate with its SPIFFE ID.
    let ca = mcs_testkit::pki::Ca::new("mcs-ca");
    let server = ca.server("mcs-registry");
    let client = ca.client(&["spiffe://example.org/cluster/east"], None);
    ensure_namespace(&kube, "mcs").await;
    ensure_namespace(&kube, "mcs-system").await;
    let ca_pem = ca.pem();
    create_secret(
        &kube,
        "mcs",
        "mcs-registry-tls",
        &[("tls.crt", &server.cert_pem), ("tls.key", &server.key_pem), ("ca.crt", &ca_pem)],
    )
    .await;
    create_secret(
        &kube,
        "mcs-system",
        "mcs-controller-east",
        &[("tls.crt", &client.cert_pem), ("tls.key", &client.key_pem)],
    )
    .await;
    let mut map = ConfigMap::default();
    map.metadata.name = Some("mcs-registry-ca".to_owned());
    map.data = Some([("ca.crt".to_owned(), ca_pem.clone())].into());
    Api::<ConfigMap>::namespaced(kube.clone(), "mcs-system")
        .create(&Default::default(), &map)
        .await
        .expect("ConfigMap");

    // The registry chart: TLS, client CA from the same Secret, spiffe.
    let dir = chart_dir("mcs-registry");
    helm.release(
        kubeconfig,
        &["install", "reg", dir.to_str().expect("utf-8"), "-n", "mcs"],
        &[
            "tls.secretName=mcs-registry-tls",
            "tls.clientCa.secretName=mcs-registry-tls",
            "authz.mode=spiffe",
            "authz.spiffeTrustDomain=example.org",
        ],
    );
    let deployment = installed_deployment(&kube, "mcs", "reg-mcs-registry").await;
    let mounts = materialize_mounts(&kube, "mcs", &deployment, &files.path("registry")).await;
    let args = substitute_mounts(&pod_args(&deployment, LISTEN_FLAGS), &mounts);
    assert!(
        args.iter()
            .any(|a| a.starts_with("--tls-client-ca-file=") && !a.contains("=/tls-client-ca/")),
        "{args:?}"
    );
    // Listening (its readiness is polled over plain HTTP, which its API port no longer speaks).
    let registry = mcs_tests::RegistryProcess::start_listening(&bins.registry, &args).await;
    let port = registry.api_url().rsplit(':').next().expect("a port").to_owned();
    let url = format!("https://localhost:{port}");

    // The controller chart: https, the CA from the ConfigMap, the client
    // certificate from the Secret.
    let dir = chart_dir("mcs-controller");
    helm.release(
        kubeconfig,
        &["install", "ctl", dir.to_str().expect("utf-8"), "-n", "mcs-system"],
        &[
            &format!("registryUrl={url}"),
            "registryTlsCa.configMapName=mcs-registry-ca",
            "registryClientCert.secretName=mcs-controller-east",
            "clusterId=east",
        ],
    );
    let deployment = installed_deployment(&kube, "mcs-system", "ctl-mcs-controller").await;
    let mounts =
        materialize_mounts(&kube, "mcs-system", &deployment, &files.path("controller")).await;
    let mut args = substitute_mounts(&pod_args(&deployment, &["--admin-listen="]), &mounts);
    args.push("--admin-listen=127.0.0.1:0".to_owned());
    let envs = pod_env(&deployment, "ctl-mcs-controller-0", "mcs-system");
    let sa_kubeconfig = env.service_account_kubeconfig("mcs-system", "ctl-mcs-controller").await;
    let controller =
        ControllerProcess::start_with_args(&bins.controller, &sa_kubeconfig, &args, &envs).await;

    // An admin caller lists the clusters over mTLS: east is registered.
    let admin = ca.client(&["spiffe://example.org/admin/test"], None);
    let mut config = mcs_client::ClientConfig::new(url);
    config.tls = Some(mcs_client::TlsFiles {
        ca_bundle: PathBuf::from(files.write("ca.crt", &ca_pem)),
        client_identity: Some((
            PathBuf::from(files.write("admin.crt", &admin.cert_pem)),
            PathBuf::from(files.write("admin.key", &admin.key_pem)),
        )),
    });
    let registry_client = mcs_client::Client::new(config).expect("a client");
    mcs_testkit::eventually(
        Duration::from_secs(30),
        "cluster east registered over mTLS",
        async || {
            registry_client
                .clusters()
                .await
                .is_ok_and(|l| l.clusters.iter().any(|c| c.cluster_id.as_str() == "east"))
        },
    )
    .await;
    drop(controller);
}
