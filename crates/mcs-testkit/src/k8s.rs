//! A real Kubernetes control plane for tests (feature `k8s`): etcd,
//! kube-apiserver and kube-controller-manager started by `scripts/k8s-env`
//! in a directory of the test's own, stopped and removed when dropped.
//!
//! ```text
//!  K8sEnv::start("east")  ─▶ scripts/k8s-env up DIR --name east  (watchdog on this pid)
//!    .kubeconfig()         cluster-admin kubeconfig with the CA
//!    .client()             a kube::Client from it
//!    .service_account_kubeconfig(ns, sa)  a kubeconfig with that ServiceAccount's token
//!    .audit_log()          every request of a ServiceAccount (metadata)
//!  drop                   ─▶ scripts/k8s-env down DIR
//! ```
//!
//! The Kubernetes tests are required when `MCS_TEST_REQUIRE_K8S=true` or
//! `CI=true` (`scripts/test` sets the first): a cluster that does not start
//! then fails the test. Otherwise [`K8sEnv::start`] returns `None` with a
//! notice, and the test returns early.

use anyhow::{Context, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::{Path, PathBuf};

/// The variable that makes the Kubernetes tests required.
pub const REQUIRE_ENV: &str = "MCS_TEST_REQUIRE_K8S";

/// `scripts/k8s-env` of this checkout.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/k8s-env")
}

/// The directory of the built tools (kube-apiserver, etcd, kubectl,
/// helm), as `scripts/k8s-env bin` prints it (building them if needed).
pub fn tools_dir() -> PathBuf {
    let output = std::process::Command::new(script())
        .arg("bin")
        .output()
        .unwrap_or_else(|e| panic!("{} bin: {e}", script().display()));
    assert!(output.status.success(), "k8s-env bin: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// One running cluster, taken down when dropped.
#[derive(Debug)]
pub struct K8sEnv {
    dir: PathBuf,
    name: String,
    kubeconfig: PathBuf,
}

impl K8sEnv {
    /// Starts cluster `name`; `None` (with a notice) when it cannot start
    /// and the Kubernetes tests are not required; panics when they are.
    pub async fn start(name: &str) -> Option<Self> {
        Self::start_with(name, &[]).await
    }

    /// [`K8sEnv::start`], with `env` set for `scripts/k8s-env up`.
    pub async fn start_with(name: &str, env: &[(&str, &str)]) -> Option<Self> {
        match Self::try_start(name, env).await {
            Ok(env) => Some(env),
            Err(e) if required() => panic!(
                "the Kubernetes test environment did not start but is required \
                 ({REQUIRE_ENV}=true or CI=true): {e:#}"
            ),
            Err(e) => {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "notice: no Kubernetes test environment ({e:#}): this test SKIPS \
                     (scripts/test builds and requires it)"
                );
                None
            }
        }
    }

    /// Starts cluster `name` (`env` set for `scripts/k8s-env up`), or says
    /// why it could not.
    pub async fn try_start(name: &str, env: &[(&str, &str)]) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(crate::dynamo::unique_name(&format!("mcs-k8s-{name}")));
        std::fs::create_dir_all(&dir)?;
        let out = tokio::process::Command::new(script())
            .arg("up")
            .arg(&dir)
            .args(["--name", name])
            .env("MCS_K8S_ENV_PARENT", std::process::id().to_string())
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .context("running scripts/k8s-env")?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&dir);
            bail!(
                "scripts/k8s-env up failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(20)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        let kubeconfig = dir.join("kubeconfig");
        Ok(Self { dir, name: name.to_owned(), kubeconfig })
    }

    /// The cluster's name (its kubeconfig context).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The directory of the cluster's files and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The audit log: one JSON line per request of a ServiceAccount.
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// A cluster-admin client.
    pub async fn client(&self) -> kube::Client {
        client_of(&self.kubeconfig).await.expect("a client of the test cluster")
    }

    /// Creates (if needed) namespace `namespace` and ServiceAccount `name`
    /// in it, and writes a kubeconfig authenticating as that account with
    /// a token from the TokenRequest API (valid an hour).
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let client = self.client().await;
        ensure_namespace(&client, namespace).await;
        let accounts: Api<ServiceAccount> = Api::namespaced(client, namespace);
        let mut account = ServiceAccount::default();
        account.metadata.name = Some(name.to_owned());
        match accounts.create(&PostParams::default(), &account).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => panic!("creating ServiceAccount {namespace}/{name}: {e}"),
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
            ..Default::default()
        };
        let token = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"))
            .status
            .expect("token request status")
            .token
            .expect("a token");
        let mut config = Kubeconfig::read_from(&self.kubeconfig).expect("the admin kubeconfig");
        for auth in &mut config.auth_infos {
            if let Some(info) = auth.auth_info.as_mut() {
                *info = Default::default();
                info.token = Some(token.as_str().into());
            }
        }
        let path = self.dir.join(format!("kubeconfig-{namespace}-{name}"));
        let yaml = serde_norway::to_string(&config).expect("kubeconfig yaml");
        std::fs::write(&path, yaml).expect("writing the kubeconfig");
        path
    }
}

impl Drop for K8sEnv {
    fn drop(&mut self) {
        let _ = std::process::Command::new(script())
            .arg("down")
            .arg(&self.dir)
            .stdout(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client from a kubeconfig file.
pub async fn client_of(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let config = Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(config, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Creates namespace `name` unless it exists.
pub async fn ensure_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_owned());
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("creating namespace {name}: {e}"),
    }
}

/// Whether the Kubernetes tests are required (`MCS_TEST_REQUIRE_K8S=true` or `CI=true`).
pub fn required() -> bool {
    [REQUIRE_ENV, "CI"].iter().any(|v| std::env::var(v).is_ok_and(|v| v == "true"))
}
