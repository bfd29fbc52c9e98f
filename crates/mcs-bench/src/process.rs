//! Starting the real `mcs-registry` binary on free loopback ports (JSON logs
//! name the bound addresses), optionally pinned with `taskset`, and waiting
//! until it is ready. The process is killed when dropped.

use anyhow::{Context, bail};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running registry.
#[derive(Debug)]
pub struct RegistryProcess {
    child: Child,
    api: String,
    admin: String,
}

impl RegistryProcess {
    /// Starts `bin` with `extra` flags, pinned to `cpus` when given.
    pub async fn start(bin: &Path, cpus: Option<&str>, extra: &[String]) -> anyhow::Result<Self> {
        if !bin.exists() {
            bail!(
                "{} not found: build it (cargo build --release -p mcs-registry) or pass --registry-bin",
                bin.display()
            );
        }
        let mut command = match cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        command
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(["--log-format", "json", "--log", "warn,mcs_registry::server=info"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().with_context(|| format!("starting {}", bin.display()))?;
        let stderr = child.stderr.take().context("stderr is piped")?;
        let mut lines = BufReader::new(stderr).lines();
        let listening = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await? {
                let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                    eprintln!("mcs-registry: {line}");
                    continue;
                };
                let fields = &event["fields"];
                if fields["message"] == "mcs-registry listening" {
                    let api = fields["api"].as_str().context("api address")?.to_owned();
                    let admin = fields["admin"].as_str().context("admin address")?.to_owned();
                    return Ok((api, admin));
                }
                if event["level"] == "ERROR" || event["level"] == "WARN" {
                    eprintln!("mcs-registry: {line}");
                }
            }
            bail!("mcs-registry exited before listening")
        })
        .await
        .context("mcs-registry did not listen within 30 s")?;
        let (api, admin) = listening?;
        // Keep draining its log so it never blocks on a full pipe; show
        // warnings, which would explain odd figures.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("\"WARN\"") || line.contains("\"ERROR\"") {
                    eprintln!("mcs-registry: {line}");
                }
            }
        });
        let process =
            Self { child, api: format!("http://{api}"), admin: format!("http://{admin}") };
        process.wait_ready().await?;
        Ok(process)
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        for _ in 0..600 {
            if let Ok(reply) = http.get(format!("{}/readyz", self.api)).send().await
                && reply.status() == 200
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("mcs-registry not ready within 30 s")
    }

    /// Base URL of the API.
    pub fn api(&self) -> &str {
        &self.api
    }

    /// Base URL of the admin port.
    pub fn admin(&self) -> &str {
        &self.admin
    }

    /// The process id (of `taskset`'s exec: the registry itself).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the process (SIGKILL) and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Registry flags for `--storage dynamodb` on `table` at `endpoint`.
pub fn dynamo_args(endpoint: &str, table: &str) -> Vec<String> {
    ["--storage", "dynamodb", "--region", "us-east-1", "--table", table]
        .into_iter()
        .chain(["--dynamodb-endpoint", endpoint])
        .map(str::to_owned)
        .collect()
}

/// A name no earlier run on the same server used.
pub fn unique_name(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}
