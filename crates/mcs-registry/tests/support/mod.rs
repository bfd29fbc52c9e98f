//! Starting the real `mcs-registry` binary for end-to-end tests.

// Each test crate uses part of this module.
#![allow(dead_code, unused_imports)]

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running registry process, killed when dropped.
pub struct RegistryProcess {
    child: Child,
    api: String,
    admin: String,
}

impl RegistryProcess {
    /// Starts the binary on free loopback ports with `extra` flags and waits
    /// until it is ready.
    pub async fn start(extra: &[&str]) -> Self {
        let process = Self::start_listening(extra).await;
        process.wait_ready().await;
        process
    }

    /// Starts the binary on free loopback ports with `extra` flags and waits
    /// until it listens, not until it is ready.
    pub async fn start_listening(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcs-registry"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the mcs-registry binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let (api, admin) = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.expect("reading stderr") {
                let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                let fields = &event["fields"];
                if fields["message"] == "mcs-registry listening" {
                    return (
                        fields["api"].as_str().expect("api address").to_owned(),
                        fields["admin"].as_str().expect("admin address").to_owned(),
                    );
                }
            }
            panic!("mcs-registry exited before listening");
        })
        .await
        .expect("mcs-registry listens within 20 s");
        // Keep draining its log so the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, api: format!("http://{api}"), admin: format!("http://{admin}") }
    }

    async fn wait_ready(&self) {
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(reply) = http.get(format!("{}/readyz", self.api)).send().await
                && reply.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("mcs-registry not ready within 10 s");
    }

    /// Base URL of the API.
    pub fn api_url(&self) -> &str {
        &self.api
    }

    /// Base URL of the admin port.
    pub fn admin_url(&self) -> &str {
        &self.admin
    }

    /// Sends SIGTERM and waits for the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().expect("still running");
        let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        let exit = tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("exits within 15 s of SIGTERM")
            .expect("wait");
        exit.code()
    }
}

pub use mcs_store::testsuite::dynamodb_endpoint as dynamo_endpoint;

/// Creates a table of its own on `endpoint` (region us-east-1) with the
/// migrations, and returns its name.
pub async fn fresh_table(endpoint: &str, name: &str) -> String {
    let table = unique_table(name);
    migrate_table(endpoint, &table).await;
    table
}

/// A table name of its own, for a table not created yet.
pub fn unique_table(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!("mcs-e2e-{name}-{}-{nanos}", std::process::id())
}

/// Creates `table` on `endpoint` (region us-east-1) with the migrations.
pub async fn migrate_table(endpoint: &str, table: &str) {
    let mut config = mcs_store::DynamoConfig::new(table);
    config.region = Some("us-east-1".into());
    config.endpoint = Some(endpoint.to_owned());
    let store = mcs_store::DynamoStore::connect(config).await.expect("a DynamoDB client");
    store.migrate().await.expect("migrating the test table");
}

/// Registry flags for `--storage dynamodb` on `table` at `endpoint`.
pub fn dynamo_args(endpoint: &str, table: &str) -> Vec<String> {
    [
        "--storage",
        "dynamodb",
        "--region",
        "us-east-1",
        "--table",
        table,
        "--dynamodb-endpoint",
        endpoint,
    ]
    .map(str::to_owned)
    .to_vec()
}

impl RegistryProcess {
    /// Kills the process with SIGKILL (no shutdown, no draining) and reaps
    /// it.
    pub async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL and reap");
    }
}
