//! A clusterset for the controller's tests: real API servers (one per
//! cluster, `scripts/k8s-env`), one registry on DynamoDB (moto) that can
//! be stopped and restarted on the same port with its data, and an
//! `mcs-controller` process per cluster running under the ClusterRole and
//! Lease Role that `mcs-controller rbac` generates (never cluster-admin).
//!
//! ```text
//!  World::start(&["east", "west"]) ─▶ K8sEnv × n, CRDs (ours, or the mcs-api's: Crds),
//!                                    ClusterRole, Lease Role, ServiceAccount
//!                                    registry (dynamodb, short leases)
//!                                    ControllerProcess per cluster (its SA's kubeconfig)
//!  world.cluster("east").kube        a cluster-admin client for the test's own objects
//! ```

use crate::RegistryProcess;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use mcs_controller::MANAGED_BY;
use mcs_controller::crd::{ServiceExport, ServiceImport};
use mcs_controller::import::plan::{SERVICE_NAME_LABEL, SLICE_MANAGED_BY_LABEL};
use mcs_testkit::k8s::{K8sEnv, ensure_namespace};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The namespace of the controller's ServiceAccount and Lease.
pub const SYSTEM_NAMESPACE: &str = "mcs-system";
/// The registry's lease for clusters in these tests (heartbeats every 2 s).
pub const LEASE_SECS: u64 = 6;

/// The binaries the controller's tests run.
#[derive(Debug, Clone)]
pub struct ControllerBinaries {
    /// `mcs-registry`.
    pub registry: PathBuf,
    /// `mcs-controller`.
    pub controller: PathBuf,
}

/// Which CRDs a [`World`]'s clusters get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crds {
    /// As `mcs-controller crds` prints them (`spec` defaults to `{}`).
    Ours,
    /// As kubernetes-sigs/mcs-api ships them (`scripts/mcs-api-crds`):
    /// a ServiceExport may have no `spec` at all.
    Upstream,
}

/// The variable choosing the CRDs of [`World::start`]: `ours` (the
/// default) or `upstream`.
pub const CRDS_ENV: &str = "MCS_TEST_CRDS";

impl Crds {
    /// The set [`CRDS_ENV`] names.
    pub fn from_env() -> Self {
        match std::env::var(CRDS_ENV).as_deref() {
            Ok("upstream") => Self::Upstream,
            Ok("ours") | Err(_) => Self::Ours,
            Ok(other) => panic!("{CRDS_ENV}={other:?}: expected ours or upstream"),
        }
    }

    /// The CRDs of this set.
    pub fn definitions(self) -> Vec<CustomResourceDefinition> {
        match self {
            Self::Ours => mcs_controller::crd::crds(),
            Self::Upstream => upstream_crds(),
        }
    }
}

/// The mcs-api's CRDs, downloaded (once) by `scripts/mcs-api-crds`.
pub fn upstream_crds() -> Vec<CustomResourceDefinition> {
    let script = crate::workspace_root().join("scripts/mcs-api-crds");
    let out = std::process::Command::new(&script)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "scripts/mcs-api-crds failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    ["serviceexports", "serviceimports"]
        .iter()
        .map(|plural| {
            let path = dir.join(format!("multicluster.x-k8s.io_{plural}.yaml"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            serde_norway::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()))
        })
        .collect()
}

/// One cluster of a [`World`].
pub struct Cluster {
    /// Its name, also its cluster id.
    pub name: String,
    /// Its controller replicas (before the API server: dropped first).
    pub controllers: Vec<ControllerProcess>,
    /// The API server.
    pub env: K8sEnv,
    /// A cluster-admin client, for the test's own objects.
    pub kube: kube::Client,
    /// The controller's kubeconfig (its ServiceAccount under the generated ClusterRole).
    pub controller_kubeconfig: PathBuf,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

/// Clusters, a registry, a controller per cluster.
#[derive(Debug)]
pub struct World {
    /// The binaries.
    pub bins: ControllerBinaries,
    /// The clusters, in the order given.
    pub clusters: Vec<Cluster>,
    /// The registry (None while stopped).
    pub registry: Option<RegistryProcess>,
    registry_port: u16,
    table: String,
    endpoint: String,
    /// Extra flags of every controller.
    pub controller_flags: Vec<String>,
    /// Extra flags of the registry, from its next start on.
    pub registry_flags: Vec<String>,
}

impl World {
    /// Starts `names` clusters with a controller each, with the CRDs
    /// [`CRDS_ENV`] names; `None` when the test environment is absent and
    /// not required (the test then returns).
    pub async fn start(
        bins: ControllerBinaries,
        names: &[&str],
        controller_flags: &[&str],
    ) -> Option<Self> {
        Self::start_with(bins, names, controller_flags, Crds::from_env()).await
    }

    /// [`World::start`] with the CRDs `crds`.
    pub async fn start_with(
        bins: ControllerBinaries,
        names: &[&str],
        controller_flags: &[&str],
        crds: Crds,
    ) -> Option<Self> {
        let endpoint = crate::dynamodb_endpoint()?;
        let envs = futures::future::join_all(names.iter().map(|n| K8sEnv::start(n))).await;
        let envs: Option<Vec<K8sEnv>> = envs.into_iter().collect();
        let envs = envs?;
        let table = crate::unique_table("controller");
        mcs_testkit::dynamo::migrate_table(&endpoint, &table).await;
        let mut world = World {
            bins,
            clusters: Vec::new(),
            registry: None,
            registry_port: 0,
            table,
            endpoint,
            controller_flags: controller_flags.iter().map(|s| (*s).to_owned()).collect(),
            registry_flags: Vec::new(),
        };
        world.start_registry().await;
        for (name, env) in names.iter().zip(envs) {
            let kube = env.client().await;
            install_crds_of(&kube, crds).await;
            let controller_kubeconfig = install_rbac(&env, &kube).await;
            world.clusters.push(Cluster {
                name: (*name).to_owned(),
                env,
                kube,
                controller_kubeconfig,
                controllers: Vec::new(),
            });
        }
        for i in 0..world.clusters.len() {
            world.start_controller(i).await;
        }
        Some(world)
    }

    /// For a benchmark: clusters `east` and `west` with namespace
    /// `namespace` in each; panics, naming what it needs, when it cannot
    /// start.
    pub async fn for_bench(bins: ControllerBinaries, namespace: &str) -> Self {
        let world = Self::start(bins, &["east", "west"], &[]).await.expect(
            "the benchmark needs scripts/k8s-env and a DynamoDB endpoint (scripts/with-moto.sh)",
        );
        for c in &world.clusters {
            ensure_namespace(&c.kube, namespace).await;
        }
        world
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> &Cluster {
        self.clusters.iter().find(|c| c.name == name).expect("a cluster of the world")
    }

    /// Stops (SIGKILL) every controller replica of cluster `name`.
    pub async fn kill_controllers(&mut self, name: &str) {
        let cluster = self.clusters.iter_mut().find(|c| c.name == name).expect("a cluster");
        for controller in cluster.controllers.drain(..) {
            controller.kill().await;
        }
    }

    fn cluster_mut(&mut self, i: usize) -> &mut Cluster {
        &mut self.clusters[i]
    }

    /// The registry's API URL.
    pub fn registry_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.registry_port)
    }

    /// Starts the registry (again, on the same port and table).
    pub async fn start_registry(&mut self) {
        let listen = format!("127.0.0.1:{}", self.registry_port);
        let lease = LEASE_SECS.to_string();
        let args = [
            "--storage",
            "dynamodb",
            "--table",
            &self.table,
            "--region",
            mcs_testkit::dynamo::REGION,
            "--dynamodb-endpoint",
            &self.endpoint,
            "--lease-duration-secs",
            &lease,
            "--heartbeat-interval-secs",
            "2",
            "--refresh-interval-ms",
            "200",
            // Moto handles one request at a time and is slow with large
            // items (an export of thousands of endpoints): not an outage.
            "--request-timeout-ms",
            "30000",
        ];
        let registry = mcs_testkit::process::Launch::new(&self.bins.registry)
            .listen(&listen)
            .args(args)
            .args(&self.registry_flags)
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        let port =
            registry.api_url().rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
        self.registry_port = port;
        self.registry = Some(registry);
    }

    /// Restarts the registry on empty storage (a new, empty table; the
    /// same port): a registry that lost every record, as a memory-storage
    /// registry does when it restarts.
    pub async fn restart_registry_empty(&mut self) {
        self.stop_registry().await;
        self.table = crate::unique_table("controller");
        mcs_testkit::dynamo::migrate_table(&self.endpoint, &self.table).await;
        self.start_registry().await;
    }

    /// A client of the registry (plain http).
    pub fn registry_client(&self) -> mcs_client::Client {
        let mut config = mcs_client::ClientConfig::new(self.registry_url());
        config.allow_insecure_http = true;
        mcs_client::Client::new(config).expect("a client of the registry")
    }

    /// Stops the registry (SIGKILL: an outage).
    /// Restarts the registry (same port and table) with `flags` added.
    pub async fn restart_registry_with(&mut self, flags: &[&str]) {
        self.stop_registry().await;
        self.registry_flags = flags.iter().map(|s| (*s).to_owned()).collect();
        self.start_registry().await;
    }

    pub async fn stop_registry(&mut self) {
        if let Some(registry) = self.registry.take() {
            registry.kill().await;
        }
    }

    /// Starts one more controller replica in cluster `i`.
    pub async fn start_controller(&mut self, i: usize) {
        let kubeconfig = self.clusters[i].controller_kubeconfig.clone();
        self.start_controller_with(i, &kubeconfig).await;
    }

    /// Starts one more controller replica in cluster `i` as ServiceAccount
    /// `account` (under RBAC of its own, as `mcs-controller rbac` prints
    /// it), so the audit log tells its requests from the others'.
    pub async fn start_controller_as(&mut self, i: usize, account: &str) {
        let cluster = &self.clusters[i];
        let kubeconfig = install_rbac_as(&cluster.env, &cluster.kube, account).await;
        self.start_controller_with(i, &kubeconfig).await;
    }

    async fn start_controller_with(&mut self, i: usize, kubeconfig: &Path) {
        let url = self.registry_url();
        let flags = self.controller_flags.clone();
        let bin = self.bins.controller.clone();
        let cluster = self.cluster_mut(i);
        let process =
            ControllerProcess::start(&bin, kubeconfig, Some(&cluster.name), &url, &flags).await;
        cluster.controllers.push(process);
    }
}

/// A failed test shows what the controllers logged last.
impl Drop for World {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for c in &self.clusters {
            for (i, p) in c.controllers.iter().enumerate() {
                let log = p.log();
                let tail = &log[log.len().saturating_sub(80)..];
                eprintln!("--- controller {i} of {}: last {} log lines ---", c.name, tail.len());
                for line in tail {
                    eprintln!("{}", line.chars().take(600).collect::<String>());
                }
            }
        }
    }
}

/// Installs the CRDs as `mcs-controller crds` prints them, and waits until
/// they are served.
pub async fn install_crds(kube: &kube::Client) {
    install_crds_of(kube, Crds::Ours).await;
}

/// Installs the CRDs `crds`, and waits until they are served.
pub async fn install_crds_of(kube: &kube::Client, crds: Crds) {
    let api: Api<CustomResourceDefinition> = Api::all(kube.clone());
    let definitions = crds.definitions();
    for crd in &definitions {
        let name = crd.metadata.name.clone().expect("name");
        api.patch(&name, &PatchParams::apply("mcs-tests").force(), &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("installing CRD {name}: {e}"));
    }
    for crd in &definitions {
        let name = crd.metadata.name.clone().expect("name");
        mcs_testkit::eventually(
            Duration::from_secs(30),
            &format!("CRD {name} established"),
            async || {
                api.get(&name)
                    .await
                    .ok()
                    .and_then(|c| c.status)
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| {
                        cs.iter().any(|c| c.type_ == "Established" && c.status == "True")
                    })
            },
        )
        .await;
    }
}

/// The controller's ServiceAccount (in [`SYSTEM_NAMESPACE`]).
pub const CONTROLLER_ACCOUNT: &str = "mcs-controller";

/// What `mcs-controller rbac` prints for ServiceAccount
/// `mcs-system/<account>` and the default Lease: the ClusterRole, the
/// Lease Role in [`SYSTEM_NAMESPACE`], their bindings, the admission
/// policy and its binding (all named after the account).
pub fn controller_rbac(account: &str) -> mcs_controller::rbac::Install {
    mcs_controller::rbac::Install {
        name: account.into(),
        namespace: SYSTEM_NAMESPACE.into(),
        service_account: account.into(),
        lease: "mcs-controller".into(),
    }
}

/// [`controller_rbac`]'s objects for [`CONTROLLER_ACCOUNT`], and the
/// account's kubeconfig.
pub async fn install_rbac(env: &K8sEnv, kube: &kube::Client) -> PathBuf {
    install_rbac_as(env, kube, CONTROLLER_ACCOUNT).await
}

/// [`controller_rbac`]'s objects for `account`, and its kubeconfig.
pub async fn install_rbac_as(env: &K8sEnv, kube: &kube::Client, account: &str) -> PathBuf {
    ensure_namespace(kube, SYSTEM_NAMESPACE).await;
    let install = controller_rbac(account);
    let objects = install.objects();
    apply(&Api::<ClusterRole>::all(kube.clone()), &objects.cluster_role).await;
    apply(&Api::<Role>::namespaced(kube.clone(), SYSTEM_NAMESPACE), &objects.role).await;
    let kubeconfig =
        env.service_account_kubeconfig(SYSTEM_NAMESPACE, &install.service_account).await;
    apply(&Api::<ClusterRoleBinding>::all(kube.clone()), &objects.cluster_role_binding).await;
    apply(&Api::<RoleBinding>::namespaced(kube.clone(), SYSTEM_NAMESPACE), &objects.role_binding)
        .await;
    apply(&Api::<ValidatingAdmissionPolicy>::all(kube.clone()), &objects.policy).await;
    apply(&Api::<ValidatingAdmissionPolicyBinding>::all(kube.clone()), &objects.policy_binding)
        .await;
    kubeconfig
}

/// Binds ClusterRole `role` to ServiceAccount `account` of
/// [`SYSTEM_NAMESPACE`] (a binding named after the role).
pub async fn bind_cluster_role(kube: &kube::Client, role: &str, account: &str) {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": SYSTEM_NAMESPACE}],
    }))
    .expect("a ClusterRoleBinding");
    apply(&Api::<ClusterRoleBinding>::all(kube.clone()), &binding).await;
}

/// A running `mcs-controller`, killed when dropped.
#[derive(Debug)]
pub struct ControllerProcess {
    child: Child,
    /// `http://host:port` of `/metrics`, `/healthz`, `/readyz`.
    pub metrics_url: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl ControllerProcess {
    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Starts the controller of cluster `cluster_id` against the registry at
    /// `registry_url`, with the kubeconfig given, and waits until it listens.
    /// It logs at `info,mcs_controller=debug` unless `extra` has a `--log`.
    pub async fn start(
        bin: &Path,
        kubeconfig: &Path,
        cluster_id: Option<&str>,
        registry_url: &str,
        extra: &[String],
    ) -> Self {
        let mut args: Vec<String> = cluster_id
            .map(|id| ["--cluster-id", id])
            .into_iter()
            .flatten()
            .chain([
                "--registry-url",
                registry_url,
                "--registry-allow-insecure-http",
                "--admin-listen",
                "127.0.0.1:0",
                "--leader-election-namespace",
                SYSTEM_NAMESPACE,
                "--leader-election-lease-secs",
                "4",
                "--log-format",
                "json",
            ])
            .map(str::to_owned)
            .collect();
        if !extra.iter().any(|a| a == "--log" || a.starts_with("--log=")) {
            args.extend(["--log", "info,mcs_controller=debug"].map(str::to_owned));
        }
        args.extend(extra.iter().cloned());
        Self::start_with_args(bin, kubeconfig, &args, &[]).await
    }

    /// Starts the controller with exactly `args` and `env` (besides
    /// `KUBECONFIG`), e.g. as a chart's Deployment renders them, and waits
    /// until it listens; it must log JSON (`--log-format json`).
    pub async fn start_with_args(
        bin: &Path,
        kubeconfig: &Path,
        args: &[String],
        env: &[(String, String)],
    ) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("KUBECONFIG", kubeconfig)
            .env_remove("MCS_CLUSTER_ID")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event["fields"]["message"] == "mcs-controller listening"
                    && let Some(addr) = event["fields"]["metrics"].as_str()
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.to_owned());
                }
                if line.contains("\"ERROR\"") {
                    eprintln!("mcs-controller: {line}");
                }
                sink.lock().expect("log").push(line);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_else(|| {
                panic!("mcs-controller did not listen:\n{}", log.lock().expect("log").join("\n"))
            });
        Self { child, metrics_url: format!("http://{addr}"), log }
    }

    /// The log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    /// `/metrics` as text.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.metrics_url))
            .await
            .and_then(|r| r.error_for_status())
            .expect("/metrics")
            .text()
            .await
            .expect("metrics text")
    }

    /// The sum of the samples of `name` whose labels contain every `labels` pair.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        sum_samples(&self.metrics().await, name, labels)
    }

    /// Sends `signal` (`TERM`, `STOP`, `CONT`, …).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("running");
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Waits (up to 30 s) for it to exit on its own; its exit code. Ended
    /// by a signal (no code), it says which, with its last log lines.
    pub async fn exited(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exits within 30 s")
            .expect("wait");
        if let Some(signal) = status.signal() {
            // The log's reader reads what the process wrote last meanwhile.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let log = self.log();
            eprintln!(
                "mcs-controller ended by signal {signal} (core dumped: {}); its last log lines:\n{}",
                status.core_dumped(),
                log[log.len().saturating_sub(20)..].join("\n")
            );
        }
        status.code()
    }

    /// Sends SIGTERM and waits (up to 20 s) for the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        self.signal("TERM");
        tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("exits within 20 s of SIGTERM")
            .expect("wait")
            .code()
    }

    /// Kills it (SIGKILL: a crash).
    pub async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }

    /// Whether it still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// The sum of the samples of `name` in Prometheus text whose labels
/// contain every `labels` pair.
pub fn sum_samples(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// A Service `name` in `namespace` with named TCP ports `(name, port, target)`;
/// `headless` sets `clusterIP: None`.
pub fn service(namespace: &str, name: &str, ports: &[(&str, u16, u16)], headless: bool) -> Service {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, t)| json!({"name": n, "port": p, "targetPort": t, "protocol": "TCP"}))
        .collect();
    let mut spec = json!({"ports": ports, "selector": {"app": name}});
    if headless {
        spec["clusterIP"] = json!("None");
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .expect("a Service")
}

/// A ServiceExport of `namespace/name` (no spec: the Service of the same
/// name is exported as it is).
pub fn service_export(namespace: &str, name: &str) -> ServiceExport {
    ServiceExport {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    }
}

/// An EndpointSlice of Service `service` as the endpointslice controller
/// would write it (its own managed-by label), with `addresses` ready and
/// the ports named as given.
pub fn endpoint_slice(
    namespace: &str,
    service: &str,
    slice: &str,
    addresses: &[&str],
    ports: &[(&str, u16)],
) -> EndpointSlice {
    let endpoints: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"addresses": [a], "conditions": {"ready": true}, "zone": "zone-a"}))
        .collect();
    let ports: Vec<Value> =
        ports.iter().map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP"})).collect();
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice, "namespace": namespace, "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "mcs-tests",
        }},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    }))
    .expect("an EndpointSlice")
}

/// Creates or replaces `object` by server-side apply as the test.
pub async fn apply<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
{
    let name = object.meta().name.clone().expect("a name");
    api.patch(&name, &PatchParams::apply("mcs-tests").force(), &Patch::Apply(object))
        .await
        .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

/// Creates `object`, panicking with the error.
pub async fn create<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
{
    api.create(&PostParams::default(), object).await.unwrap_or_else(|e| panic!("creating: {e}"));
}

/// Requests of `username` (e.g. `system:serviceaccount:mcs-system:mcs-controller`)
/// in `env`'s audit log: `(verb, group, resource[/subresource], status code)`.
pub fn audited(env: &K8sEnv, username: &str) -> Vec<(String, String, String, u16)> {
    let log = std::fs::read_to_string(env.audit_log()).unwrap_or_default();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == username)
        .filter_map(|e| {
            let r = &e["objectRef"];
            let resource = r["resource"].as_str()?;
            let resource = match r["subresource"].as_str() {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_owned(),
            };
            Some((
                e["verb"].as_str()?.to_owned(),
                r["apiGroup"].as_str().unwrap_or("").to_owned(),
                resource,
                u16::try_from(e["responseStatus"]["code"].as_u64().unwrap_or(0)).unwrap_or(0),
            ))
        })
        .collect()
}

// Pool discovery (tests/pool_discovery.rs): a registry reading a cluster's
// imported EndpointSlices under the read-only role of its RBAC_RULES.

/// The ServiceAccount (in [`SYSTEM_NAMESPACE`]), ClusterRole and binding
/// of a discovering registry.
pub const REGISTRY_ACCOUNT: &str = "mcs-registry";

/// The audit log's user name of [`REGISTRY_ACCOUNT`].
pub fn registry_username() -> String {
    format!("system:serviceaccount:{SYSTEM_NAMESPACE}:{REGISTRY_ACCOUNT}")
}

/// The ClusterRole of `mcs_registry::discovery::RBAC_RULES`.
pub fn registry_cluster_role() -> ClusterRole {
    mcs_controller::rbac::cluster_role_of(REGISTRY_ACCOUNT, &mcs_registry::discovery::RBAC_RULES)
}

/// Binds the registry's ServiceAccount to its ClusterRole (again).
pub async fn bind_registry_role(kube: &kube::Client) {
    bind_cluster_role(kube, REGISTRY_ACCOUNT, REGISTRY_ACCOUNT).await;
}

/// Revokes the registry's role (deletes its binding).
pub async fn unbind_registry_role(kube: &kube::Client) {
    Api::<ClusterRoleBinding>::all(kube.clone())
        .delete(REGISTRY_ACCOUNT, &Default::default())
        .await
        .expect("deleting the registry's ClusterRoleBinding");
}

/// The registry's read-only role, bound to its ServiceAccount, and that
/// account's kubeconfig.
pub async fn install_registry_rbac(env: &K8sEnv, kube: &kube::Client) -> PathBuf {
    apply(&Api::<ClusterRole>::all(kube.clone()), &registry_cluster_role()).await;
    let kubeconfig = env.service_account_kubeconfig(SYSTEM_NAMESPACE, REGISTRY_ACCOUNT).await;
    bind_registry_role(kube).await;
    kubeconfig
}

/// A registry (embedded storage) discovering pools in `mode` from the
/// cluster of `kubeconfig` (router Service `gr/global-router`, port
/// `http`), with `extra` flags.
pub async fn start_discovering_registry(
    bin: &Path,
    kubeconfig: &Path,
    mode: &str,
    extra: &[&str],
) -> RegistryProcess {
    mcs_testkit::process::Launch::new(bin)
        .env("KUBECONFIG", kubeconfig)
        .args(["--pool-discovery", mode])
        .args(["--router-namespace", "gr", "--router-service", "global-router"])
        .args(["--router-port-name", "http"])
        .args(extra)
        .echo_warnings()
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// How far the exports of some services in a namespace have come in a
/// cluster: each count is of the services asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportProgress {
    /// ServiceExports with `Ready=True`.
    pub ready: usize,
    /// ServiceImports with their IPs and their exporting clusters.
    pub imported: usize,
    /// EndpointSlices this controller imported.
    pub sliced: usize,
}

impl ExportProgress {
    /// The services of it exported and imported: the fewest of the three.
    pub fn done(&self) -> usize {
        self.ready.min(self.imported).min(self.sliced)
    }
}

/// The exports of namespace `ns` in `c`, of the services `wanted` names.
pub async fn export_progress(
    c: &Cluster,
    ns: &str,
    wanted: impl Fn(&str) -> bool,
) -> ExportProgress {
    let all = ListParams::default();
    let exports: Api<ServiceExport> = Api::namespaced(c.kube.clone(), ns);
    let ready = exports.list(&all).await.expect("list ServiceExports").items;
    let ready = ready.iter().filter(|e| {
        wanted(&e.name_any())
            && e.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
            })
    });
    let imports: Api<ServiceImport> = Api::namespaced(c.kube.clone(), ns);
    let imported = imports.list(&all).await.expect("list ServiceImports").items;
    let imported = imported.iter().filter(|i| {
        wanted(&i.name_any())
            && !i.spec.ips.is_empty()
            && i.status.as_ref().is_some_and(|s| !s.clusters.is_empty())
    });
    let slices: Api<EndpointSlice> = Api::namespaced(c.kube.clone(), ns);
    let ours = all.clone().labels(&format!("{SLICE_MANAGED_BY_LABEL}={MANAGED_BY}"));
    let sliced = slices.list(&ours).await.expect("list EndpointSlices").items;
    let sliced = sliced
        .iter()
        .filter(|s| s.labels().get(SERVICE_NAME_LABEL).is_some_and(|name| wanted(name)));
    ExportProgress { ready: ready.count(), imported: imported.count(), sliced: sliced.count() }
}
