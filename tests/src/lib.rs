//! Support for the cross-crate tests of mcs-registry (this crate's tests
//! are `compose.rs`, `admin_matches_api.rs` and `docs_links.rs` beside its
//! manifest): the workspace binaries, the DynamoDB endpoint of the tests,
//! and a running `mcs-registry` process.
//!
//! ```text
//!  binaries!() ─► CARGO_BIN_EXE_mcs-{registry,admin}-for-tests: both binaries,
//!                 built by the same cargo test as the test itself
//!  RegistryProcess::start ─► the registry on free loopback ports, ready
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The workspace binaries, as this crate builds them (its `[[bin]]`
/// targets compile `mcs-registry`'s and `mcs-admin`'s own `main.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// `mcs-registry`.
    pub registry: PathBuf,
    /// `mcs-admin`.
    pub admin: PathBuf,
}

/// The [`Binaries`] that cargo built for the calling test, from the
/// `CARGO_BIN_EXE_*` variables it sets when compiling this crate's tests
/// (only there, hence a macro): no second `cargo build`, and the same
/// features as the test build.
#[macro_export]
macro_rules! binaries {
    () => {
        $crate::Binaries {
            registry: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-registry-for-tests")),
            admin: ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_mcs-admin-for-tests")),
        }
    };
}

/// The workspace's root: the parent of this crate.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map_or_else(|| manifest.to_path_buf(), Path::to_path_buf)
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
