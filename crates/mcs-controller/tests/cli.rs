//! The binary's contract: what it prints, and the exit code and one-line
//! message of flags it refuses (before touching any cluster).

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcs-controller"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("MCS_REGISTRY_URL")
        .env_remove("MCS_REGISTRY_ALLOW_INSECURE_HTTP")
        .output()
        .expect("runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_http_registry_without_the_opt_in_exits_2_saying_why() {
    let (code, _, stderr) =
        run(&["--cluster-id", "east", "--registry-url", "http://registry:8080"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with("mcs-controller: "), "{stderr}");
    assert!(stderr.contains("--registry-allow-insecure-http"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_bad_selector_or_cluster_id_exits_2() {
    let base = ["--registry-url", "http://r", "--registry-allow-insecure-http"];
    for (extra, names) in [
        (["--cluster-id", "Not_A_Label"], "--cluster-id"),
        (["--auto-export-selector", "a,,b"], "--auto-export-selector"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let (code, _, stderr) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(names), "{stderr}");
    }
}

#[test]
fn crds_and_rbac_print_yaml_documents() {
    let (code, crds, _) = run(&["crds"]);
    assert_eq!(code, Some(0));
    assert_eq!(crds.matches("kind: CustomResourceDefinition").count(), 2, "{crds}");
    let (code, rbac, _) =
        run(&["rbac", "--namespace", "mcs", "--leader-election-lease", "mcs-east"]);
    assert_eq!(code, Some(0));
    assert!(rbac.contains("kind: ClusterRole") && rbac.contains("endpointslices"), "{rbac}");
    // The Lease only in its namespace, by name (issue 29 item 6).
    assert!(rbac.contains("kind: Role\n") && rbac.contains("- mcs-east"), "{rbac}");
    assert!(rbac.contains("namespace: mcs"), "{rbac}");
}

/// A kubeconfig (deleted on drop) whose only context points at an API
/// server that refuses connections: a port just bound and let go.
struct Unreachable {
    kubeconfig: std::path::PathBuf,
    server: String,
}

impl Unreachable {
    fn new(name: &str) -> Self {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("bound").port()
        };
        let server = format!("https://127.0.0.1:{port}");
        let kubeconfig = std::env::temp_dir().join(format!("mcs-cli-{name}-{port}.yaml"));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
                 clusters: [{{name: c, cluster: {{server: \"{server}\", insecure-skip-tls-verify: true}}}}]\n\
                 contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\n"
            ),
        )
        .expect("writes the kubeconfig");
        Self { kubeconfig, server }
    }
}

impl Drop for Unreachable {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Issue 23 item 5: an API server it cannot reach. Before, the controller
/// exited with `reading the ClusterProperty cluster.clusterset.k8s.io:
/// ServiceError: client error (Connect)`, after kube's own ERROR line
/// `failed with error client error (Connect)`: neither said which server,
/// nor why.
#[test]
fn an_unreachable_api_server_is_named_with_the_cause() {
    let api = Unreachable::new("controller");
    let out = Command::new(env!("CARGO_BIN_EXE_mcs-controller"))
        .args(["--cluster-id", "east", "--registry-url", "http://127.0.0.1:9"])
        .args(["--registry-allow-insecure-http", "--admin-listen", "127.0.0.1:0"])
        .env("KUBECONFIG", &api.kubeconfig)
        .env_remove("MCS_LOG")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("mcs-controller: reading the ClusterProperty"), "{stderr}");
    assert!(last.contains(&api.server), "the server's URL: {stderr}");
    assert!(last.contains("Connection refused"), "the cause: {stderr}");
    // Every error line says why: kube's own, without its cause, is left out.
    for line in stderr.lines().filter(|l| l.contains("ERROR") || l.contains("WARN")) {
        assert!(line.contains("Connection refused"), "{line}\nin\n{stderr}");
    }
}

/// The same for the kubectl plugin. Before: `kubectl-mcs: context c:
/// ServiceError: client error (Connect)`.
#[test]
fn the_plugin_names_the_unreachable_api_server_with_the_cause() {
    let api = Unreachable::new("plugin");
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-mcs"))
        .arg("status")
        .env("KUBECONFIG", &api.kubeconfig)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("kubectl-mcs: context c ("), "{stderr}");
    assert!(stderr.contains(&api.server), "the server's URL: {stderr}");
    assert!(stderr.contains("Connection refused"), "the cause: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// The plugin's help is its own. Before, `kubectl mcs --help` opened with
/// the controller's description ("The Kubernetes half of Multi-Cluster
/// Services: exports ServiceExports…") and its usage read `kubectl-mcs`.
#[test]
fn the_plugins_help_describes_the_plugin_as_kubectl_runs_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-mcs")).arg("--help").output().expect("runs");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    assert!(
        help.starts_with("kubectl-mcs: the Multi-Cluster Services objects of a cluster"),
        "{help}"
    );
    assert!(!help.contains("The Kubernetes half"), "the controller's description: {help}");
    assert!(
        help.contains("keeps them (`kubectl mcs status`)\n\nUsage: kubectl mcs <COMMAND>"),
        "{help}"
    );
}

/// A registry CA file that is not there stops the start at once, naming
/// it, before any cluster is touched. Before, the controller went on to
/// the API server and, with none configured, exited on that instead
/// (`finding the Kubernetes API server: failed to infer config…`); with
/// one, only after reading its ClusterProperty.
#[test]
fn a_missing_registry_ca_file_stops_the_start_naming_it() {
    let (code, _, stderr) = run(&[
        "--cluster-id",
        "east",
        "--registry-url",
        "https://registry:8443",
        "--registry-ca-file",
        "/nonexistent/mcs-ca.pem",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("mcs-controller: --registry-url and its --registry-*-file flags: "),
        "{stderr}"
    );
    assert!(last.contains("/nonexistent/mcs-ca.pem") && last.contains("No such file"), "{stderr}");
    assert!(!stderr.contains("Kubernetes"), "{stderr}");
}
