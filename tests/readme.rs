//! The README's commands, run as a new user types them (issue 23, item 1):
//! the registry's run command and the controller's two commands, side by
//! side on one host, each on its default ports, against a real API server.
//!
//! ```text
//!  README.md ─▶ the ``` block under "The two commands" (the registry)
//!            └▶ the ``` block under "In a cluster: mcs-controller"
//!  bash, PATH: a `cargo` shim (`cargo run [--release] -p NAME [-- ARGS]`
//!  execs the binary `cargo test` built), kubectl; KUBECONFIG: one cluster
//! ```
//!
//! The defaults are the point, so the ports are the fixed ones the README
//! names (8080, 9090, and the controller's 9091): the test fails, naming
//! the port, when something else holds one.

use mcs_testkit::k8s::K8sEnv;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// The defaults the README relies on: registry API, registry admin,
/// controller metrics.
const PORTS: [u16; 3] = [8080, 9090, 9091];

/// The first ``` block after the line `heading` of `readme`, its
/// backslash-continued lines joined: one command per entry.
fn commands_under(readme: &str, heading: &str) -> Vec<String> {
    let after = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no heading {heading:?}"))
        .1;
    let block = after
        .split_once("```\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .unwrap_or_else(|| panic!("no ``` block under {heading:?}"))
        .0;
    block
        .replace("\\\n", " ")
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// A `cargo` that runs what `cargo test` built instead of building again.
fn cargo_shim(dir: &Path) {
    let bins = mcs_tests::controller_binaries!();
    let admin = mcs_tests::binaries!().admin;
    let script = format!(
        "#!/bin/bash\n\
         # cargo run [--release] -p NAME [-- ARGS]: the binary cargo test built\n\
         [ \"$1\" = run ] || {{ echo \"cargo shim: only cargo run: $*\" >&2; exit 97; }}\n\
         shift; [ \"$1\" = --release ] && shift\n\
         [ \"$1\" = -p ] || {{ echo \"cargo shim: -p NAME expected: $*\" >&2; exit 97; }}\n\
         name=$2; shift 2; [ \"$1\" = -- ] && shift\n\
         case $name in\n\
           mcs-registry) exec {} \"$@\";;\n\
           mcs-controller) exec {} \"$@\";;\n\
           mcs-admin) exec {} \"$@\";;\n\
           *) echo \"cargo shim: unknown package $name\" >&2; exit 97;;\n\
         esac\n",
        bins.registry.display(),
        bins.controller.display(),
        admin.display(),
    );
    let path = dir.join("cargo");
    std::fs::write(&path, script).expect("the cargo shim");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn bash(command: &str, path: &str, kubeconfig: &Path) -> Command {
    let mut bash = Command::new("bash");
    bash.args(["-c", &format!("exec {command}")])
        .env("PATH", path)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("MCS_CLUSTER_ID")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    bash
}

async fn answers(url: &str) -> bool {
    reqwest::get(url).await.is_ok_and(|r| r.status().is_success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_commands_run_side_by_side() {
    let readme =
        std::fs::read_to_string(mcs_tests::workspace_root().join("README.md")).expect("README.md");
    let registry = commands_under(&readme, "## The two commands");
    assert_eq!(registry, ["cargo run -p mcs-registry"], "the registry's run command");
    let controller = commands_under(&readme, "## In a cluster: mcs-controller");
    assert_eq!(controller.len(), 2, "crds, then the controller: {controller:?}");

    let Some(east) = K8sEnv::start("readme").await else { return };
    for port in PORTS {
        assert!(
            std::net::TcpListener::bind(("0.0.0.0", port)).is_ok(),
            "port {port}, a default of the README's commands, is taken on this machine"
        );
    }
    let shims = std::env::temp_dir().join(format!("mcs-readme-{}", std::process::id()));
    std::fs::create_dir_all(&shims).expect("shim dir");
    cargo_shim(&shims);
    let tools = mcs_testkit::k8s::tools_dir();
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let registry_log = shims.join("registry.log");
    let mut registry: Child = bash(&registry[0], &path, east.kubeconfig())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&registry_log).expect("log file"))
        .spawn()
        .expect("the registry");
    let crds = bash(&controller[0], &path, east.kubeconfig()).output().await.expect("crds");
    assert!(crds.status.success(), "{}: {}", controller[0], String::from_utf8_lossy(&crds.stderr));
    let log = shims.join("controller.log");
    let mut controller: Child = bash(&controller[1], &path, east.kubeconfig())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("the controller");

    let clusters = "http://127.0.0.1:8080/v1/clusters";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let up = answers("http://127.0.0.1:9090/healthz").await
            && answers("http://127.0.0.1:9091/healthz").await
            && match reqwest::get(clusters).await {
                Ok(reply) => reply.text().await.is_ok_and(|t| t.contains("\"east\"")),
                Err(_) => false,
            };
        let exited = [("registry", &mut registry), ("controller", &mut controller)]
            .into_iter()
            .find_map(|(name, child)| child.try_wait().expect("status").map(|s| (name, s)));
        if up && exited.is_none() {
            break;
        }
        assert!(
            exited.is_none() && tokio::time::Instant::now() < deadline,
            "not within 30 s: both answering on their default ports, east registered \
             (exited: {exited:?}); the controller's log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Issue 23, item 5: no colour codes in a log that is not a terminal.
    for log in [&log, &registry_log] {
        let text = std::fs::read_to_string(log).expect("log");
        assert!(text.lines().count() >= 1, "{} is empty", log.display());
        assert!(!text.contains('\x1b'), "ANSI escapes in {}:\n{text}", log.display());
    }
    let _ = std::fs::remove_dir_all(&shims);
}

/// Issue 23, item 13: `--version` names the commit (before: the package
/// version alone), for each of the three binaries.
#[test]
fn every_binary_names_its_commit() {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(mcs_tests::workspace_root())
        .output()
        .expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    assert_eq!(head.len(), 12, "a git checkout: {head:?}");
    let bins = mcs_tests::controller_binaries!();
    for (name, bin) in [
        ("mcs-registry", bins.registry),
        ("mcs-controller", bins.controller),
        ("mcs-admin", mcs_tests::binaries!().admin),
    ] {
        let out = std::process::Command::new(&bin).arg("--version").output().expect("--version");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.trim(),
            format!("{name} {} (commit {head})", env!("CARGO_PKG_VERSION")),
            "{}",
            bin.display()
        );
    }
}

/// Issue 23, item 2: an error caused by the environment names the
/// variable. Before, a value refused from `MCS_…` named only the flag the
/// user never typed: `invalid value 'abc' for '--storage-connect-timeout-secs
/// <STORAGE_CONNECT_TIMEOUT_SECS>'`. Typed on the command line, the flag
/// is named as before.
#[test]
fn a_value_refused_from_the_environment_names_its_variable() {
    let bins = mcs_tests::controller_binaries!();
    let admin = mcs_tests::binaries!().admin;
    for (bin, args, variable, flag) in [
        (&bins.registry, vec![], "MCS_REFRESH_INTERVAL_MS", "--refresh-interval-ms"),
        (&bins.controller, vec!["--cluster-id", "a"], "MCS_LOG_FORMAT", "--log-format"),
        (
            &admin,
            vec!["ls", "pools", "--table", "t"],
            "MCS_STORAGE_CONNECT_TIMEOUT_SECS",
            "--storage-connect-timeout-secs",
        ),
    ] {
        let run = |typed: bool| {
            let mut command = std::process::Command::new(bin);
            command.args(&args).env(variable, "bogus");
            if typed {
                command.args([flag, "bogus"]);
            }
            let out = command.output().expect("runs");
            (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
        };
        let (code, stderr) = run(false);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error: invalid value 'bogus' for {variable} (set in the environment; the flag {flag})"
            )),
            "{}: {stderr}",
            bin.display()
        );
        let (code, stderr) = run(true);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&format!("for '{flag} <")), "{}: {stderr}", bin.display());
        assert!(!stderr.contains(variable), "{stderr}");
    }
}

/// What a new user mistypes: a host name where an address is expected
/// (before: `invalid socket address syntax`, no form), and a file that is
/// not there (before: its cause twice, `…: No such file or directory (os
/// error 2): No such file or directory (os error 2)`).
#[test]
fn a_listen_host_name_and_a_missing_file_are_told_once_with_the_form() {
    let bins = mcs_tests::controller_binaries!();
    let run = |bin: &std::path::Path, args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(args)
            .env_remove("MCS_LISTEN")
            .env_remove("MCS_ADMIN_LISTEN")
            .output()
            .expect("runs");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    for (bin, flag) in [
        (&bins.registry, "--listen"),
        (&bins.registry, "--admin-listen"),
        (&bins.controller, "--admin-listen"),
    ] {
        let (code, stderr) = run(bin, &[flag, "localhost:8080"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(&format!("'localhost:8080' for '{flag} <")), "{stderr}");
        assert!(stderr.contains("expected IP:PORT, e.g. 0.0.0.0:8080"), "{stderr}");
    }
    let missing = "/nonexistent/mcs-readme-test.crt";
    let (code, stderr) = run(
        &bins.registry,
        &[
            "--tls-cert-file",
            missing,
            "--tls-key-file",
            missing,
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(code, Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "mcs-registry: reading --tls-cert-file {missing}: No such file or directory (os error 2)"
        ),
        "{stderr}"
    );
}
