//! Running a chart's Deployment as a local process, for the tests where no
//! kubelet runs pods (`scripts/k8s-env`): the container's command line and
//! environment as the API server stores them, with the Secrets and
//! ConfigMaps it mounts written to a local directory and every argument
//! naming a mount path pointed there.
//!
//! ```text
//!  Deployment (label app.kubernetes.io/name=N) ─▶ LocalPod::read
//!    args, env, mounts of Secrets/ConfigMaps ─▶ DIR/<volume>/… (charts::pod_args,
//!    pod_env, materialize_mounts, substitute_mounts: one reading of a pod)
//!  LocalPod::flags()  args, then MCS_* env as their flags (a twin is its flag's name)
//!  without(&["--listen", …])  drops flags the test sets itself
//! ```

use crate::charts;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use std::path::Path;

/// A Deployment's first container, ready to run here.
#[derive(Debug, Clone)]
pub struct LocalPod {
    /// The Deployment's name.
    pub deployment: String,
    /// The pod's ServiceAccount.
    pub service_account: String,
    /// The container's args (the image's entrypoint is the binary), mount
    /// paths pointed at their local directories.
    pub args: Vec<String>,
    /// The container's environment: values, and the downward API's
    /// `metadata.namespace` and `metadata.name` (`<name>-local`).
    pub env: Vec<(String, String)>,
}

impl LocalPod {
    /// Reads the Deployment labelled `app.kubernetes.io/name=<name>` in
    /// `namespace`, and writes what its container mounts from Secrets and
    /// ConfigMaps under `dir` (tests/src/charts.rs reads the container and
    /// its mounts; the downward API is resolved for a pod `<name>-local`).
    pub async fn read(kube: &kube::Client, namespace: &str, name: &str, dir: &Path) -> Self {
        let deployments: Api<Deployment> = Api::namespaced(kube.clone(), namespace);
        let list = deployments
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={name}")))
            .await
            .unwrap_or_else(|e| panic!("listing Deployments {name} in {namespace}: {e}"));
        let deployment = list.items.into_iter().next().unwrap_or_else(|| {
            panic!("no Deployment app.kubernetes.io/name={name} in {namespace}")
        });
        let object = serde_json::to_value(&deployment).expect("the Deployment as JSON");
        let mounts = charts::materialize_mounts(kube, namespace, &object, dir).await;
        LocalPod {
            deployment: deployment.metadata.name.clone().unwrap_or_default(),
            service_account: object["spec"]["template"]["spec"]["serviceAccountName"]
                .as_str()
                .unwrap_or("default")
                .to_owned(),
            args: charts::substitute_mounts(&charts::pod_args(&object, &[]), &mounts),
            env: charts::pod_env(&object, &format!("{name}-local"), namespace),
        }
    }

    /// The command line: the arguments, then each `MCS_*` variable as its
    /// flag (`MCS_FOO_BAR=v` is `--foo-bar=v`; `true` a bare switch,
    /// `false` nothing), so one list carries the whole configuration.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = self.args.clone();
        for (name, value) in &self.env {
            let Some(twin) = name.strip_prefix("MCS_") else { continue };
            let flag = format!("--{}", twin.to_lowercase().replace('_', "-"));
            match value.as_str() {
                "true" => flags.push(flag),
                "false" => {}
                v => flags.push(format!("{flag}={v}")),
            }
        }
        flags
    }

    /// The variable `name` of the environment.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// `flags` without each of `drop` (as `--x=v`, or `--x v` when the next
/// word is not a flag).
pub fn without(flags: &[String], drop: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = flags.iter().peekable();
    while let Some(flag) = it.next() {
        let name = flag.split('=').next().unwrap_or(flag);
        if drop.contains(&name) {
            if !flag.contains('=') && it.peek().is_some_and(|next| !next.starts_with("--")) {
                it.next();
            }
            continue;
        }
        out.push(flag.clone());
    }
    out
}

/// The value of `--name` in `flags` (`--name=v` or `--name v`).
pub fn flag_value<'a>(flags: &'a [String], name: &str) -> Option<&'a str> {
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        if let Some(v) = flag.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            return Some(v);
        }
        if flag == name {
            return it.next().map(String::as_str);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn flags_are_dropped_in_both_forms_and_values_found() {
        let flags =
            strings(&["--listen", "0.0.0.0:1", "--admin-tls", "--log-format=json", "--x=1"]);
        assert_eq!(
            without(&flags, &["--listen", "--log-format"]),
            strings(&["--admin-tls", "--x=1"])
        );
        assert_eq!(
            without(&flags, &["--admin-tls"]),
            strings(&["--listen", "0.0.0.0:1", "--log-format=json", "--x=1"])
        );
        assert_eq!(flag_value(&flags, "--listen"), Some("0.0.0.0:1"));
        assert_eq!(flag_value(&flags, "--log-format"), Some("json"));
        assert_eq!(flag_value(&flags, "--log"), None);
    }

    #[test]
    fn environment_twins_become_flags() {
        let pod = LocalPod {
            deployment: "d".into(),
            service_account: "s".into(),
            args: strings(&["--a=1"]),
            env: vec![
                ("MCS_STORAGE_CONNECT_TIMEOUT_SECS".into(), "3".into()),
                ("MCS_ADMIN_TLS".into(), "true".into()),
                ("MCS_REGISTRY_ALLOW_INSECURE_HTTP".into(), "false".into()),
                ("POD_NAMESPACE".into(), "ns".into()),
            ],
        };
        assert_eq!(
            pod.flags(),
            strings(&["--a=1", "--storage-connect-timeout-secs=3", "--admin-tls"])
        );
        assert_eq!(pod.env_var("POD_NAMESPACE"), Some("ns"));
    }
}
