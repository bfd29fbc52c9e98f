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
