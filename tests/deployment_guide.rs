//! docs/deployment.md, run: every ```` ```sh ```` block of the guide, in
//! order, with bash, against two real API servers (`east`, `west`) and
//! DynamoDB on moto, with the real charts of `charts/`.
//!
//! ```text
//!  docs/deployment.md ─parse─▶ [Run(block) | NotRun(block, reason) | Glue(step)]
//!     placeholders replaced (PLACEHOLDERS), each block: bash, one session
//!     (exported variables and the directory carry over), PATH: helm, kubectl,
//!     mcs-admin; KUBECONFIG: both clusters; MCS_DYNAMODB_ENDPOINT: moto
//!  <!-- test-glue: … --> comments of the guide: what a kubelet and AWS would
//!     do here (GLUE below, the only code between blocks)
//! ```
//!
//! A block that is neither run nor marked `<!-- not-run: reason -->` fails
//! the parse, as does a shell block fenced as `bash`, `console` or `shell`.
//! The not-run blocks are counted and printed. Run it under
//! `scripts/with-moto.sh`; without a Kubernetes environment (and not
//! required, see mcs-testkit's `k8s`) the run returns with a notice, the
//! parse tests below always run.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use mcs_testkit::k8s::K8sEnv;
use mcs_testkit::multiregion::Replicator;
use mcs_tests::controller::ControllerProcess;
use mcs_tests::deployment::{LocalPod, flag_value, without};
use mcs_tests::dns::CoreDns;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

const GUIDE: &str = "docs/deployment.md";

/// The guide's values that exist only in a real cloud, and what the test
/// puts in their place (the guide's "Placeholders" table lists each).
/// `{root}` is the workspace, `{table}` a table name of this run's own.
const PLACEHOLDERS: [(&str, &str); 4] = [
    ("~/src/mcs-registry", "{root}"),
    ("registry.us-east-1.mcs.example.com", "localhost"),
    ("registry.eu-west-1.mcs.example.com", "localhost"),
    ("TABLE=mcs-registry", "TABLE={table}"),
];

/// One piece of the guide, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// A shell block to run: its first line's number and its text.
    Run { line: usize, text: String },
    /// A shell block marked not to run, and why.
    NotRun { line: usize, reason: String },
    /// A `<!-- test-glue: … -->` step, split in words.
    Glue { line: usize, words: Vec<String> },
}

/// The steps of `guide`, or what is wrong with it.
fn parse(guide: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    let mut not_run: Option<(usize, String)> = None;
    let mut lines = guide.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((n, line)) = lines.next() {
        let trimmed = line.trim();
        if let Some(rest) = comment(trimmed, "not-run:") {
            if rest.is_empty() {
                return Err(format!("line {n}: a not-run mark needs a reason"));
            }
            if let Some((m, _)) = not_run {
                return Err(format!("line {m}: a not-run mark not followed by a sh block"));
            }
            not_run = Some((n, rest.to_owned()));
            continue;
        }
        if let Some(rest) = comment(trimmed, "test-glue:") {
            steps.push(Step::Glue {
                line: n,
                words: rest.split_whitespace().map(str::to_owned).collect(),
            });
            continue;
        }
        let Some(lang) = trimmed.strip_prefix("```") else {
            if !trimmed.is_empty()
                && let Some((m, _)) = not_run
            {
                return Err(format!("line {m}: a not-run mark not followed by a sh block"));
            }
            continue;
        };
        let fence = &line[..line.find("```").unwrap_or(0) + 3];
        let mut text = String::new();
        let mut closed = false;
        for (_, body) in lines.by_ref() {
            if body.trim_start().starts_with("```") && body.trim() == "```" {
                closed = true;
                break;
            }
            text.push_str(body.strip_prefix(&fence[..fence.len() - 3]).unwrap_or(body));
            text.push('\n');
        }
        if !closed {
            return Err(format!("line {n}: a block never closed"));
        }
        match lang.trim() {
            "sh" => match not_run.take() {
                Some((_, reason)) => steps.push(Step::NotRun { line: n, reason }),
                None => steps.push(Step::Run { line: n, text }),
            },
            "bash" | "console" | "shell" | "zsh" | "shell-session" => {
                return Err(format!(
                    "line {n}: a `{}` block: shell commands of the guide are `sh` blocks (it says so at the top)",
                    lang.trim()
                ));
            }
            _ if not_run.is_some() => {
                return Err(format!(
                    "line {n}: a not-run mark before a `{lang}` block, not a sh block"
                ));
            }
            _ => {}
        }
    }
    if let Some((m, _)) = not_run {
        return Err(format!("line {m}: a not-run mark not followed by a sh block"));
    }
    Ok(steps)
}

/// The text of `<!-- key rest -->`, trimmed.
fn comment<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.strip_prefix("<!--")?.strip_suffix("-->")?.trim().strip_prefix(key).map(str::trim)
}

#[test]
fn the_guide_parses_and_every_shell_block_runs_or_says_why_not() {
    let text = std::fs::read_to_string(mcs_tests::workspace_root().join(GUIDE)).expect(GUIDE);
    let steps = parse(&text).unwrap_or_else(|e| panic!("{GUIDE}: {e}"));
    let run = steps.iter().filter(|s| matches!(s, Step::Run { .. })).count();
    assert!(run >= 10, "{run} blocks run");
    for step in &steps {
        if let Step::Glue { line, words } = step {
            assert!(
                GLUE.contains(&words[0].as_str()),
                "{GUIDE}:{line}: unknown glue step {words:?} (known: {GLUE:?})"
            );
        }
    }
    for (placeholder, _) in PLACEHOLDERS {
        let table = text.split("## Placeholders").nth(1).and_then(|t| t.split("\n## ").next());
        assert!(
            table.is_some_and(|t| t.contains(&format!("`{placeholder}`"))),
            "the placeholder {placeholder} is not in the guide's Placeholders table"
        );
        assert!(text.contains(placeholder), "the placeholder {placeholder} is not in the guide");
    }
}

#[test]
fn a_block_neither_run_nor_marked_is_refused() {
    let ok = "a\n<!-- not-run: real AWS -->\n```sh\naws x\n```\n```sh\necho 1\n```\n<!-- test-glue: stop east -->\n```yaml\na: 1\n```\n";
    assert_eq!(
        parse(ok).unwrap(),
        vec![
            Step::NotRun { line: 3, reason: "real AWS".into() },
            Step::Run { line: 6, text: "echo 1\n".into() },
            Step::Glue { line: 9, words: vec!["stop".into(), "east".into()] },
        ]
    );
    for (bad, why) in [
        ("```bash\necho\n```\n", "`bash` block"),
        ("```console\n$ echo\n```\n", "`console` block"),
        ("<!-- not-run: x -->\n\ntext\n```sh\necho\n```\n", "not followed"),
        ("<!-- not-run: x -->\n```yaml\na: 1\n```\n", "not a sh block"),
        ("<!-- not-run: -->\n```sh\necho\n```\n", "needs a reason"),
        ("```sh\necho\n", "never closed"),
    ] {
        let error = parse(bad).expect_err(bad);
        assert!(error.contains(why), "{bad:?}: {error}");
    }
}

/// The glue steps the guide may name.
const GLUE: [&str; 8] = [
    "replicate",
    "start-registry",
    "start-controller",
    "endpoints",
    "coredns-configmap",
    "start-coredns",
    "resolve",
    "stop",
];

/// A cluster of the run: its API server and the processes playing its pods.
struct Cluster {
    env: K8sEnv,
    kube: kube::Client,
    registry: Option<(mcs_tests::RegistryProcess, String)>,
    controller: Option<ControllerProcess>,
    /// CoreDNS on the cluster's Corefile (glue `start-coredns`).
    coredns: Option<CoreDns>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deployment_guide_runs() {
    let Some(endpoint) = mcs_tests::dynamodb_endpoint() else { return };
    let (Some(east), Some(west)) = tokio::join!(K8sEnv::start("east"), K8sEnv::start("west"))
    else {
        return;
    };
    let root = mcs_tests::workspace_root();
    let bins = mcs_tests::controller_binaries!();
    let admin = mcs_tests::binaries!().admin;
    let tools = mcs_testkit::k8s::tools_dir().display().to_string();

    let work = tempdir("mcs-guide");
    let home = work.join("home");
    let shims = work.join("bin");
    for dir in [&home, &shims] {
        std::fs::create_dir_all(dir).expect("a directory");
    }
    std::os::unix::fs::symlink(&admin, shims.join("mcs-admin")).expect("mcs-admin on PATH");
    let table = mcs_testkit::dynamo::unique_name("guide");
    let mut text = std::fs::read_to_string(root.join(GUIDE)).expect(GUIDE);
    for (placeholder, value) in PLACEHOLDERS {
        let value = value.replace("{root}", &root.display().to_string()).replace("{table}", &table);
        text = text.replace(placeholder, &value);
    }
    let steps = parse(&text).unwrap_or_else(|e| panic!("{GUIDE}: {e}"));

    let kubeconfig = format!("{}:{}", east.kubeconfig().display(), west.kubeconfig().display());
    let path = format!("{}:{tools}:{}", shims.display(), std::env::var("PATH").unwrap_or_default());
    let session = Session {
        state: work.join("state"),
        env: vec![
            ("HOME".into(), home.display().to_string()),
            ("PATH".into(), path),
            ("KUBECONFIG".into(), kubeconfig),
            ("MCS_DYNAMODB_ENDPOINT".into(), endpoint.clone()),
            ("AWS_ACCESS_KEY_ID".into(), "test".into()),
            ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
            ("AWS_EC2_METADATA_DISABLED".into(), "true".into()),
        ],
    };
    session.init(&home);

    let mut clusters: BTreeMap<String, Cluster> = BTreeMap::new();
    for env in [east, west] {
        let kube = env.client().await;
        clusters.insert(
            env.name().to_owned(),
            Cluster { env, kube, registry: None, controller: None, coredns: None },
        );
    }
    let mut replicator = None;
    let mut resolved = 0;
    let mut not_run = Vec::new();
    let mut ran = 0;
    for step in &steps {
        match step {
            Step::Run { line, text } => {
                eprintln!("--- {GUIDE}:{line}: running");
                if let Err(output) = session.run(text).await {
                    let logs = controller_logs(&clusters);
                    panic!(
                        "{GUIDE}:{line}: the block failed:\n{text}\n--- its output:\n{output}\n{logs}"
                    );
                }
                ran += 1;
            }
            Step::NotRun { line, reason } => not_run.push(format!("{GUIDE}:{line}: {reason}")),
            Step::Glue { line, words } => {
                eprintln!("--- {GUIDE}:{line}: glue {words:?}");
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                match words.as_slice() {
                    // What `aws dynamodb update-table --replica-updates` does:
                    // the table in the second region, replicated both ways.
                    ["replicate"] => {
                        mcs_testkit::dynamo::migrate_table_in(&endpoint, "eu-west-1", &table).await;
                        replicator = Some(
                            Replicator::start(&endpoint, &table, &["us-east-1", "eu-west-1"], 12)
                                .await,
                        );
                    }
                    // The registry's pod: the rendered flags, on local ports, moto.
                    // (A third word: the guide's variable that holds the
                    // registry's URL through its load balancer, set to the
                    // process's.)
                    ["start-registry", context, namespace, rest @ ..] => {
                        let cluster = clusters.get_mut(*context).expect("a cluster");
                        let dir = work.join(format!("pod-registry-{context}-{namespace}"));
                        let pod =
                            LocalPod::read(&cluster.kube, namespace, "mcs-registry", &dir).await;
                        let (process, url) = start_registry(&bins.registry, &pod, &endpoint).await;
                        if let Some(variable) = rest.first() {
                            session.export(variable, &url);
                        }
                        cluster.registry = Some((process, url));
                    }
                    // The controller's pod: the rendered flags, its
                    // ServiceAccount's token, the registry of its cluster.
                    // (A third word: the registry of that cluster, the guide's
                    // load balancer.)
                    ["start-controller", context, namespace, rest @ ..] => {
                        let serving = rest.first().unwrap_or(context);
                        let url = clusters[*serving]
                            .registry
                            .as_ref()
                            .map(|(_, url)| url.clone())
                            .expect("the serving registry runs");
                        let cluster = clusters.get_mut(*context).expect("a cluster");
                        let dir = work.join(format!("pod-controller-{context}-{namespace}"));
                        let pod =
                            LocalPod::read(&cluster.kube, namespace, "mcs-controller", &dir).await;
                        let kubeconfig = cluster
                            .env
                            .service_account_kubeconfig(namespace, &pod.service_account)
                            .await;
                        cluster.controller =
                            Some(start_controller(&bins.controller, &pod, &url, &kubeconfig).await);
                    }
                    // What the endpointslice controller writes for a Service
                    // whose pod is ready (no kubelet here).
                    ["endpoints", context, namespace, service] => {
                        let cluster = clusters.get(*context).expect("a cluster");
                        let slice = mcs_tests::controller::endpoint_slice(
                            namespace,
                            service,
                            &format!("{service}-local"),
                            &["10.1.2.3"],
                            &[("", 80)],
                        );
                        Api::<EndpointSlice>::namespaced(cluster.kube.clone(), namespace)
                            .create(&PostParams::default(), &slice)
                            .await
                            .expect("the EndpointSlice");
                    }
                    // What kubeadm installs for the cluster DNS: the
                    // ConfigMap with its default Corefile and CoreDNS's
                    // ServiceAccount under its system:coredns role.
                    ["coredns-configmap", context] => {
                        let cluster = clusters.get(*context).expect("a cluster");
                        mcs_tests::dns::coredns_rbac(&cluster.kube, false).await;
                        let map: ConfigMap = serde_json::from_value(serde_json::json!({
                            "metadata": {"name": "coredns", "namespace": "kube-system"},
                            "data": {"Corefile": mcs_tests::dns::KUBEADM_COREFILE},
                        }))
                        .expect("a ConfigMap");
                        mcs_tests::controller::apply(
                            &Api::namespaced(cluster.kube.clone(), "kube-system"),
                            &map,
                        )
                        .await;
                    }
                    // The cluster's CoreDNS pod after the guide's edit: the
                    // `kubernetes` block of the ConfigMap's Corefile as the
                    // guide left it, served by CoreDNS outside the cluster.
                    ["start-coredns", context] => {
                        let cluster = clusters.get_mut(*context).expect("a cluster");
                        let maps: Api<ConfigMap> =
                            Api::namespaced(cluster.kube.clone(), "kube-system");
                        let corefile = maps
                            .get("coredns")
                            .await
                            .expect("ConfigMap kube-system/coredns")
                            .data
                            .and_then(|d| d.get("Corefile").cloned())
                            .expect("a Corefile");
                        let block = mcs_tests::dns::kubernetes_block(&corefile)
                            .unwrap_or_else(|| panic!("no kubernetes block in:\n{corefile}"));
                        assert!(
                            block.contains("multicluster clusterset.local")
                                && block.starts_with("kubernetes cluster.local clusterset.local "),
                            "the guide's edit left:\n{corefile}"
                        );
                        assert_eq!(
                            corefile.matches("multicluster").count(),
                            1,
                            "the edit, run twice, added the line twice:\n{corefile}"
                        );
                        cluster.coredns = Some(CoreDns::start(&cluster.env, &block).await);
                    }
                    // What the guide's pod would see: the name resolves to
                    // the ServiceImport's clusterset IPs.
                    ["resolve", context, name] => {
                        let cluster = clusters.get(*context).expect("a cluster");
                        let coredns = cluster.coredns.as_ref().expect("glue start-coredns first");
                        let imports = Api::<DynamicObject>::namespaced_with(
                            cluster.kube.clone(),
                            "demo",
                            &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
                                "multicluster.x-k8s.io",
                                "v1alpha1",
                                "ServiceImport",
                            )),
                        );
                        let import = imports.get("web").await.expect("ServiceImport demo/web");
                        let ips: Vec<String> = import.data["spec"]["ips"]
                            .as_array()
                            .map(|ips| {
                                ips.iter().filter_map(|ip| ip.as_str().map(str::to_owned)).collect()
                            })
                            .unwrap_or_default();
                        let v4: Vec<&str> =
                            ips.iter().map(String::as_str).filter(|ip| !ip.contains(':')).collect();
                        assert!(!v4.is_empty(), "demo/web has no IPv4 clusterset IP: {ips:?}");
                        coredns
                            .until(
                                &format!("{name}."),
                                hickory_proto::rr::RecordType::A,
                                Duration::from_secs(30),
                                "the clusterset IP",
                                |a| a.has(&v4),
                            )
                            .await;
                        resolved += 1;
                    }
                    ["stop", context] => {
                        let cluster = clusters.get_mut(*context).expect("a cluster");
                        cluster.controller = None;
                        cluster.registry = None;
                    }
                    other => panic!("{GUIDE}:{line}: unknown glue {other:?}"),
                }
            }
        }
    }
    drop(replicator);
    eprintln!("{GUIDE}: {ran} blocks run, {} not run:", not_run.len());
    for line in &not_run {
        eprintln!("  not run: {line}");
    }
    assert!(ran > 0 && !not_run.is_empty());
    assert!(resolved > 0, "the guide's DNS section resolved nothing");
    // What the guide claims, checked here too: the import arrived with
    // east's endpoint (the guide's own wait loops would have failed
    // otherwise; this names it), and went with the export.
    let seen = session.output_log();
    assert!(seen.contains("10.1.2.3"), "west's slices listed east's endpoint:\n{seen}");
    let imports = Api::<DynamicObject>::namespaced_with(
        clusters["west"].kube.clone(),
        "demo",
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "multicluster.x-k8s.io",
            "v1alpha1",
            "ServiceImport",
        )),
    );
    assert!(imports.get_opt("web").await.expect("ServiceImports").is_none(), "withdrawn");
    let _ = std::fs::remove_dir_all(&work);
}

/// One bash session across blocks: the exported variables and the working
/// directory of one block are the next one's.
struct Session {
    state: PathBuf,
    env: Vec<(String, String)>,
}

impl Session {
    fn init(&self, home: &Path) {
        std::fs::create_dir_all(&self.state).expect("state");
        std::fs::write(self.state.join("env"), "").expect("env");
        std::fs::write(self.state.join("pwd"), home.display().to_string()).expect("pwd");
        std::fs::write(self.state.join("output"), "").expect("output");
    }

    /// Runs `block`; its output on failure.
    async fn run(&self, block: &str) -> Result<(), String> {
        let script = self.state.join("block.sh");
        std::fs::write(&script, block).expect("the block");
        let state = self.state.display();
        let wrapper = format!(
            "set -euo pipefail\nsource {state}/env\ncd \"$(cat {state}/pwd)\"\nsource {state}/block.sh\n\
             export -p > {state}/env.next\nmv {state}/env.next {state}/env\npwd > {state}/pwd\n"
        );
        let mut command = Command::new("bash");
        command.arg("-c").arg(wrapper).env_clear().stdin(Stdio::null());
        for (k, v) in &self.env {
            command.env(k, v);
        }
        let output = tokio::time::timeout(Duration::from_secs(300), command.output())
            .await
            .map_err(|_| "the block ran for 300 s".to_owned())?
            .map_err(|e| format!("bash: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        eprint!("{text}");
        let mut log = std::fs::read_to_string(self.state.join("output")).unwrap_or_default();
        log.push_str(&text);
        std::fs::write(self.state.join("output"), log).expect("output");
        if output.status.success() { Ok(()) } else { Err(format!("{text}({})", output.status)) }
    }

    /// Sets `name` to `value` in the session, as a block's `export` would.
    fn export(&self, name: &str, value: &str) {
        let mut env = std::fs::read_to_string(self.state.join("env")).expect("env");
        env.push_str(&format!("export {name}='{value}'\n"));
        std::fs::write(self.state.join("env"), env).expect("env");
    }

    /// Everything the blocks printed.
    fn output_log(&self) -> String {
        std::fs::read_to_string(self.state.join("output")).unwrap_or_default()
    }
}

/// The registry of a pod: its flags without the listen and log flags (the
/// launcher's), with moto as the endpoint; its API URL (`https://localhost:…`
/// with TLS, which the guide's certificate names through a placeholder).
async fn start_registry(
    bin: &Path,
    pod: &LocalPod,
    endpoint: &str,
) -> (mcs_tests::RegistryProcess, String) {
    let flags = pod.flags();
    let tls = flag_value(&flags, "--tls-cert-file").is_some();
    let mut flags =
        without(&flags, &["--listen", "--admin-listen", "--log-format", "--dynamodb-endpoint"]);
    if flag_value(&flags, "--storage") == Some("dynamodb") {
        flags.push(format!("--dynamodb-endpoint={endpoint}"));
    }
    eprintln!("mcs-registry {}", flags.join(" "));
    let registry = mcs_testkit::process::Launch::new(bin)
        .args(&flags)
        .echo_warnings()
        .listening_only()
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    mcs_testkit::eventually(Duration::from_secs(60), "the registry ready", async || {
        reqwest::get(format!("{}/readyz", registry.admin_url()))
            .await
            .is_ok_and(|r| r.status() == 200)
    })
    .await;
    let port = registry.api_url().rsplit(':').next().expect("a port").to_owned();
    let url =
        if tls { format!("https://localhost:{port}") } else { format!("http://127.0.0.1:{port}") };
    (registry, url)
}

/// The controller of a pod, against `registry_url`, as its ServiceAccount.
async fn start_controller(
    bin: &Path,
    pod: &LocalPod,
    registry_url: &str,
    kubeconfig: &Path,
) -> ControllerProcess {
    let mut flags = without(&pod.flags(), &["--admin-listen", "--registry-url", "--log-format"]);
    flags.extend([
        "--admin-listen=127.0.0.1:0".into(),
        format!("--registry-url={registry_url}"),
        "--log-format=json".into(),
    ]);
    eprintln!("mcs-controller {}", flags.join(" "));
    let env: Vec<(String, String)> =
        pod.env.iter().filter(|(name, _)| !name.starts_with("MCS_")).cloned().collect();
    ControllerProcess::start_with_args(bin, kubeconfig, &flags, &env).await
}

fn controller_logs(clusters: &BTreeMap<String, Cluster>) -> String {
    let mut out = String::new();
    for (name, cluster) in clusters {
        if let Some(controller) = &cluster.controller {
            let log = controller.log();
            out.push_str(&format!("--- controller of {name}, last lines:\n"));
            for line in &log[log.len().saturating_sub(40)..] {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

fn tempdir(prefix: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(mcs_testkit::dynamo::unique_name(prefix));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}
