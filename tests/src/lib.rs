//! Support for the cross-crate tests of mcs-registry (this crate's tests
//! are `compose.rs` and `admin_matches_api.rs` beside its manifest): the
//! workspace binaries, built once per test process and located, the
//! DynamoDB endpoint of the tests, and a running `mcs-registry` process.
//!
//! ```text
//!  binaries() ─► $CARGO build --bins -p mcs-registry -p mcs-admin (once)
//!            └─► paths of target/debug/{mcs-registry,mcs-admin}
//!  RegistryProcess::start ─► the registry on free loopback ports, ready
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The workspace binaries, built by this test process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `mcs-registry`.
    pub registry: PathBuf,
    /// `mcs-admin`.
    pub admin: PathBuf,
}

/// The workspace's root: the parent of this crate.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
}

/// The target directory the tests were built in: `CARGO_TARGET_DIR` (a
/// relative one taken from the workspace root) or `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() { dir } else { workspace_root().join(dir) }
        }
        _ => workspace_root().join("target"),
    }
}

/// Builds `mcs-registry` and `mcs-admin` (debug profile, in
/// [`target_dir`]) the first time it is called in this process, with the
/// cargo that runs the tests (`CARGO`), and returns their paths. Panics
/// with cargo's output when the build fails.
pub fn binaries() -> &'static Binaries {
    static BUILT: OnceLock<Binaries> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = target_dir();
        let output = Command::new(cargo)
            .current_dir(workspace_root())
            .args(["build", "--bins", "-p", "mcs-registry", "-p", "mcs-admin", "--target-dir"])
            .arg(&target)
            .stdin(Stdio::null())
            .output()
            .expect("cargo starts");
        assert!(
            output.status.success(),
            "cargo build of the binaries failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let debug = target.join("debug");
        let binaries = Binaries {
            registry: debug.join(format!("mcs-registry{}", std::env::consts::EXE_SUFFIX)),
            admin: debug.join(format!("mcs-admin{}", std::env::consts::EXE_SUFFIX)),
        };
        for path in [&binaries.registry, &binaries.admin] {
            assert!(path.is_file(), "{} was not built", path.display());
        }
        binaries
    })
}

/// Runs `binary args…` to its end, with static test credentials for the
/// AWS SDK and no instance metadata lookups.
pub fn run(binary: &Path, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{} starts: {e}", binary.display()))
}

pub use mcs_store::testsuite::dynamodb_endpoint;

/// A table name no other test (or earlier run on the same server) uses.
pub fn unique_table(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("mcs-tests-{name}-{}-{nanos}", std::process::id())
}

/// A running `mcs-registry`, killed when dropped.
#[derive(Debug)]
pub struct RegistryProcess {
    child: tokio::process::Child,
    api: String,
}

impl RegistryProcess {
    /// Starts the registry binary on free loopback ports with `extra` flags
    /// and waits until it listens and is ready.
    pub async fn start(binary: &Path, extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(binary)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .args(extra)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the mcs-registry binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        let api = tokio::time::timeout(Duration::from_secs(30), async {
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str::<serde_json::Value>(&line).ok();
                seen.push(line);
                let Some(event) = event else { continue };
                let fields = &event["fields"];
                if fields["message"] == "mcs-registry listening"
                    && let Some(api) = fields["api"].as_str()
                {
                    return Some(api.to_owned());
                }
            }
            None
        })
        .await;
        let api = match api {
            Ok(Some(api)) => api,
            Ok(None) => panic!("mcs-registry exited before listening:\n{}", seen.join("\n")),
            Err(_) => panic!("mcs-registry did not listen within 30 s:\n{}", seen.join("\n")),
        };
        // Keep draining its log so the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let process = Self { child, api: format!("http://{api}") };
        process.wait_ready().await;
        process
    }

    async fn wait_ready(&self) {
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(reply) = http.get(format!("{}/readyz", self.api)).send().await
                && reply.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("mcs-registry not ready within 15 s");
    }

    /// Base URL of the API.
    pub fn api_url(&self) -> &str {
        &self.api
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}
