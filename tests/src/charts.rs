//! The Helm charts of `charts/` for the tests of `tests/charts.rs`: helm
//! and helm-unittest from `scripts/k8s-env bin`, rendering, a server-side
//! dry run of everything a release would create, and the README values
//! table generated from the `# --` comments of each chart's values.yaml.
//!
//! ```text
//!  Helm::find()            ─▶ scripts/k8s-env bin: helm, untt, kubectl (None: skipped unless required)
//!  helm.template(chart, values)        rendered manifests (no cluster)
//!  helm.dry_run_server(env, …)         helm install --dry-run=server, then every object
//!                                      (hooks too) kubectl apply --server-side --dry-run=server
//!  values_table(values.yaml)           the README's table; UPDATE_CHART_READMES=1 rewrites
//! ```

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The line of a chart README below which the values table is generated.
pub const README_MARKER: &str = "<!-- The table below is generated from values.yaml by tests/charts.rs: UPDATE_CHART_READMES=1 cargo test -p mcs-tests --test charts -->";

/// `charts/<name>` of this checkout.
pub fn chart_dir(name: &str) -> PathBuf {
    crate::workspace_root().join("charts").join(name)
}

/// helm, helm-unittest (`untt`) and kubectl, with helm's own files kept
/// in a directory of the test (no repositories, no user config).
#[derive(Debug)]
pub struct Helm {
    bin: PathBuf,
    home: PathBuf,
}

impl Helm {
    /// The tools of `scripts/k8s-env bin`; `None` (with a notice) when it
    /// cannot provide them and the Kubernetes tests are not required.
    pub fn find() -> Option<Self> {
        let out = Command::new(mcs_testkit::k8s::script()).arg("bin").stdin(Stdio::null()).output();
        let bin = match out {
            Ok(o) if o.status.success() => {
                PathBuf::from(String::from_utf8_lossy(&o.stdout).trim().to_owned())
            }
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    !mcs_testkit::k8s::required(),
                    "scripts/k8s-env bin failed but the Kubernetes tests are required: {why}"
                );
                eprintln!("notice: no helm ({why}): this test SKIPS (scripts/test builds it)");
                return None;
            }
        };
        let home = std::env::temp_dir().join(mcs_testkit::dynamo::unique_name("mcs-helm"));
        std::fs::create_dir_all(&home).expect("helm home");
        Some(Self { bin, home })
    }

    /// The path of tool `name` (`helm`, `untt`, `kubectl`).
    pub fn tool(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// Runs tool `name` with `args` (and `KUBECONFIG` when given).
    pub fn run(
        &self,
        name: &str,
        args: &[&str],
        kubeconfig: Option<&Path>,
        stdin: Option<&str>,
    ) -> Output {
        let mut command = Command::new(self.tool(name));
        command
            .args(args)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .env_remove("KUBECONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        if let Some(k) = kubeconfig {
            command.env("KUBECONFIG", k);
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("starting {name}: {e}"));
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("stdin");
        }
        child.wait_with_output().unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// Runs tool `name`, panicking with its output unless it succeeds; its stdout.
    pub fn ok(
        &self,
        name: &str,
        args: &[&str],
        kubeconfig: Option<&Path>,
        stdin: Option<&str>,
    ) -> String {
        let out = self.run(name, args, kubeconfig, stdin);
        assert!(
            out.status.success(),
            "{name} {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `helm ARGS --set VALUE...` (an install or upgrade) on `kubeconfig`,
    /// panicking with its output unless it succeeds; its stdout.
    pub fn release(&self, kubeconfig: &Path, args: &[&str], values: &[&str]) -> String {
        let mut all = args.to_vec();
        for value in values {
            all.extend(["--set", value]);
        }
        self.ok("helm", &all, Some(kubeconfig), None)
    }

    /// `helm template` of chart `chart` with `--set`-style `values`
    /// (`key=value`, `--set-json` when the value starts with `{` or `[`).
    pub fn template(&self, chart: &str, namespace: &str, values: &[&str]) -> Vec<Value> {
        let args = self.template_args(chart, namespace, values, &[]);
        documents(&self.ok(
            "helm",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            None,
            None,
        ))
    }

    /// The arguments of [`Helm::template`], with `extra` ones of helm's
    /// (`--api-versions`, `--kube-version`).
    pub fn template_args(
        &self,
        chart: &str,
        namespace: &str,
        values: &[&str],
        extra: &[&str],
    ) -> Vec<String> {
        let dir = chart_dir(chart);
        let mut args: Vec<String> =
            ["template", "t", dir.to_str().expect("utf-8"), "-n", namespace]
                .into_iter()
                .chain(extra.iter().copied())
                .map(str::to_owned)
                .collect();
        args.extend(set_flags(values));
        args
    }

    /// `helm install --dry-run=server` of `chart` against the cluster of
    /// `kubeconfig` (so `.Capabilities` are the server's), then a
    /// server-side dry run of every object it would create, hooks
    /// included: fields Kubernetes does not know fail, and so does any
    /// warning of the server. The kinds applied.
    pub fn dry_run_server(
        &self,
        kubeconfig: &Path,
        chart: &str,
        namespace: &str,
        values: &[&str],
    ) -> Vec<String> {
        let dir = chart_dir(chart);
        let mut args = vec![
            "install",
            "dry",
            dir.to_str().expect("utf-8"),
            "-n",
            namespace,
            "--dry-run=server",
            "-o",
            "json",
        ];
        let flags = set_flags(values);
        args.extend(flags.iter().map(String::as_str));
        let release: Value = serde_json::from_str(&self.ok("helm", &args, Some(kubeconfig), None))
            .expect("helm install -o json");
        let mut manifest = release["manifest"].as_str().unwrap_or_default().to_owned();
        for hook in release["hooks"].as_array().into_iter().flatten() {
            manifest.push_str("\n---\n");
            manifest.push_str(hook["manifest"].as_str().unwrap_or_default());
        }
        let kinds = documents(&manifest)
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_owned())
            .collect();
        let out = self.run(
            "kubectl",
            &["apply", "--server-side", "--dry-run=server", "-n", namespace, "-f", "-"],
            Some(kubeconfig),
            Some(&manifest),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "the server refused {chart} with {values:?}:\n{stderr}");
        // Warnings fail too: a Pod Security Standard the namespace asks for
        // (its `warn` label covers the pod templates of Deployments and
        // Jobs), a deprecated API, an unknown field.
        assert!(!stderr.contains("Warning"), "{chart} with {values:?}:\n{stderr}");
        kinds
    }
}

impl Drop for Helm {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

fn set_flags(values: &[&str]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| {
            let json =
                v.split_once('=').is_some_and(|(_, x)| x.starts_with('{') || x.starts_with('['));
            [if json { "--set-json" } else { "--set" }.to_owned(), (*v).to_owned()]
        })
        .collect()
}

/// The YAML documents of `text` that are objects, as JSON.
pub fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|doc| serde_norway::from_str::<Value>(doc).ok())
        .filter(|v| v.get("kind").is_some())
        .collect()
}

/// The first document of kind `kind`.
pub fn find_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| {
        panic!("no {kind} among {:?}", docs.iter().map(|d| &d["kind"]).collect::<Vec<_>>())
    })
}

/// The helm-docs style table of `values_yaml`: one row per key documented
/// with a `# --` comment (its type and default from the parsed values),
/// or an error listing the keys with no documentation of their own or of
/// an enclosing key.
pub fn values_table(values_yaml: &str) -> Result<String, String> {
    let values: Value = serde_norway::from_str(values_yaml).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut undocumented = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut documented: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    for line in values_yaml.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(desc) = trimmed.strip_prefix("# -- ") {
            pending = Some(desc.to_owned());
            continue;
        }
        if trimmed.starts_with('#') || trimmed.is_empty() || trimmed.starts_with('-') {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else { continue };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let path: Vec<String> =
            stack.iter().map(|(_, k)| k.clone()).chain(std::iter::once(key.to_owned())).collect();
        let dotted = path.join(".");
        stack.push((indent, key.to_owned()));
        let value = path.iter().fold(&values, |v, k| &v[k.as_str()]);
        let inside_documented = documented.iter().any(|d| dotted.starts_with(&format!("{d}.")));
        match pending.take() {
            Some(desc) => {
                documented.push(dotted.clone());
                let kind = match value {
                    Value::String(_) => "string",
                    Value::Number(n) if n.is_i64() || n.is_u64() => "int",
                    Value::Number(_) => "float",
                    Value::Bool(_) => "bool",
                    Value::Array(_) => "list",
                    Value::Object(_) => "object",
                    Value::Null => "string",
                };
                let default = serde_json::to_string(value).map_err(|e| e.to_string())?;
                rows.push(format!(
                    "| {dotted} | {kind} | `{}` | {} |",
                    default.replace('|', "\\|"),
                    desc.replace('|', "\\|")
                ));
            }
            None if inside_documented => {}
            None if value.as_object().is_some_and(|m| !m.is_empty()) => {}
            None => undocumented.push(dotted),
        }
    }
    if !undocumented.is_empty() {
        return Err(format!("keys without a `# --` comment: {}", undocumented.join(", ")));
    }
    let mut table = String::from(
        "| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n",
    );
    for row in rows {
        table.push_str(&row);
        table.push('\n');
    }
    Ok(table)
}

/// The README of `chart` as it should be: its text down to
/// [`README_MARKER`], then the values table.
pub fn expected_readme(chart: &str) -> Result<String, String> {
    let dir = chart_dir(chart);
    let readme = std::fs::read_to_string(dir.join("README.md")).map_err(|e| e.to_string())?;
    let head = readme
        .split_once(README_MARKER)
        .map(|(h, _)| h)
        .ok_or_else(|| format!("charts/{chart}/README.md lacks the marker line {README_MARKER}"))?;
    let values = std::fs::read_to_string(dir.join("values.yaml")).map_err(|e| e.to_string())?;
    Ok(format!("{head}{README_MARKER}\n\n{}", values_table(&values)?))
}

/// The first container of the pod template of `object` (a Deployment or
/// a Job, rendered or read from the API server as JSON).
fn first_container(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]["containers"][0]
}

/// The args of that container, leaving out those that start with one of
/// `drop` (the ones a test must set itself, such as listen addresses).
pub fn pod_args(object: &Value, drop: &[&str]) -> Vec<String> {
    first_container(object)["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|a| !drop.iter().any(|d| a.starts_with(d)))
        .map(str::to_owned)
        .collect()
}

/// The environment of that container as the kubelet would give it to a
/// pod named `pod` in `namespace` (the downward API's `metadata.name` and
/// `metadata.namespace` resolved; any other `valueFrom` panics).
pub fn pod_env(object: &Value, pod: &str, namespace: &str) -> Vec<(String, String)> {
    first_container(object)["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_owned();
            let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.name") => pod.to_owned(),
                Some("metadata.namespace") => namespace.to_owned(),
                Some(other) => panic!("{name}: fieldRef {other} is not resolved here"),
                None if e.get("valueFrom").is_some() => {
                    panic!("{name}: valueFrom is not resolved here")
                }
                None => e["value"].as_str().unwrap_or_default().to_owned(),
            };
            (name, value)
        })
        .collect()
}

/// Writes the Secret and ConfigMap volumes that the first container of
/// `object` mounts (read from the API server in `namespace`, as the
/// kubelet would) under `dir`, one file per key, and returns each mount
/// path with its local directory: what [`substitute_mounts`] needs to run
/// the container's command on this machine.
pub async fn materialize_mounts(
    kube: &kube::Client,
    namespace: &str,
    object: &Value,
    dir: &Path,
) -> Vec<(String, PathBuf)> {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let pod = &object["spec"]["template"]["spec"];
    let mut mounts = Vec::new();
    for mount in first_container(object)["volumeMounts"].as_array().into_iter().flatten() {
        let name = mount["name"].as_str().expect("a mount's volume");
        let path = mount["mountPath"].as_str().expect("a mount path");
        let volume = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("volume {name} of mount {path}"));
        let files: Vec<(String, Vec<u8>)> = if let Some(secret) =
            volume["secret"]["secretName"].as_str()
        {
            let secret = kube::Api::<Secret>::namespaced(kube.clone(), namespace)
                .get(secret)
                .await
                .unwrap_or_else(|e| panic!("Secret {namespace}/{secret}: {e}"));
            secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect()
        } else if let Some(map) = volume["configMap"]["name"].as_str() {
            let map = kube::Api::<ConfigMap>::namespaced(kube.clone(), namespace)
                .get(map)
                .await
                .unwrap_or_else(|e| panic!("ConfigMap {namespace}/{map}: {e}"));
            map.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect()
        } else {
            panic!("volume {name}: only Secret and ConfigMap volumes are materialized: {volume}");
        };
        let local = dir.join(name);
        std::fs::create_dir_all(&local).expect("a mount directory");
        for (key, bytes) in files {
            std::fs::write(local.join(key), bytes).expect("a mounted file");
        }
        mounts.push((path.to_owned(), local));
    }
    mounts
}

/// `args` with every path under a mount path of `mounts` moved to its
/// local directory.
pub fn substitute_mounts(args: &[String], mounts: &[(String, PathBuf)]) -> Vec<String> {
    args.iter()
        .map(|arg| {
            mounts.iter().fold(arg.clone(), |arg, (path, local)| {
                arg.replace(&format!("={path}/"), &format!("={}/", local.display()))
            })
        })
        .collect()
}
