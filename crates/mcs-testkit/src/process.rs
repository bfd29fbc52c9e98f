//! Starting the real `mcs-registry` binary on free loopback ports (its JSON
//! log names the bound addresses) and waiting until it is ready. The
//! process is killed when dropped.
//!
//! ```text
//!  RegistryProcess::start(bin, flags)       tests: panics on failure
//!  Launch::new(bin).cpus(..).args(..).start()  anyhow errors (mcs-bench)
//!        └─► bin --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --log-format json …
//!            └─► "mcs-registry listening" {api, admin} ─► GET /readyz == 200
//! ```

use anyhow::{Context, bail};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long the process may take to listen, and then to be ready.
const STARTUP: Duration = Duration::from_secs(30);

/// How to start a registry: the binary, its flags, and the options of the
/// start itself.
#[derive(Debug, Clone)]
pub struct Launch {
    bin: PathBuf,
    listen: String,
    args: Vec<OsString>,
    cpus: Option<String>,
    echo_warnings: bool,
    wait_ready: bool,
    envs: Vec<(OsString, OsString)>,
}

impl Launch {
    /// The binary at `bin`, on free loopback ports, with JSON logs, static
    /// test credentials for the AWS SDK and no instance metadata lookups.
    pub fn new(bin: impl AsRef<Path>) -> Self {
        Self {
            bin: bin.as_ref().to_path_buf(),
            listen: "127.0.0.1:0".into(),
            args: Vec::new(),
            cpus: None,
            echo_warnings: false,
            wait_ready: true,
            envs: Vec::new(),
        }
    }

    /// Adds flags (after the listen and log flags, so they may override them).
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable of the process (`KUBECONFIG` for pool
    /// discovery, an `MCS_*` twin of a flag).
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// The API's address (default `127.0.0.1:0`, a free port): a fixed one
    /// restarts a registry where its clients expect it.
    #[must_use]
    pub fn listen(mut self, addr: &str) -> Self {
        addr.clone_into(&mut self.listen);
        self
    }

    /// Pins the process to `cpus` (a `taskset -c` list).
    #[must_use]
    pub fn cpus(mut self, cpus: Option<&str>) -> Self {
        self.cpus = cpus.map(str::to_owned);
        self
    }

    /// Copies the registry's warnings and errors (and lines that are not
    /// JSON) to this process's stderr.
    #[must_use]
    pub fn echo_warnings(mut self) -> Self {
        self.echo_warnings = true;
        self
    }

    /// Returns once the process listens, without waiting for `/readyz`.
    #[must_use]
    pub fn listening_only(mut self) -> Self {
        self.wait_ready = false;
        self
    }

    /// Starts the process and waits until it listens (and, unless
    /// [`Launch::listening_only`], until it is ready). The error carries
    /// the log lines seen so far.
    pub async fn start(self) -> anyhow::Result<RegistryProcess> {
        if !self.bin.exists() {
            bail!(
                "{} not found: build it (cargo build -p mcs-registry) or pass its path",
                self.bin.display()
            );
        }
        let mut command = match &self.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        command
            .args(["--listen", &self.listen, "--admin-listen", "127.0.0.1:0"])
            .args(["--log-format", "json"])
            .args(&self.args)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child =
            command.spawn().with_context(|| format!("starting {}", self.bin.display()))?;
        let stderr = child.stderr.take().context("stderr is piped")?;
        let mut lines = BufReader::new(stderr).lines();
        let echo = self.echo_warnings;
        let mut seen = Vec::new();
        let listening = tokio::time::timeout(STARTUP, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str::<serde_json::Value>(&line).ok();
                if echo && event.as_ref().is_none_or(is_warning) {
                    eprintln!("mcs-registry: {line}");
                }
                seen.push(line);
                let Some(event) = event else { continue };
                let fields = &event["fields"];
                if fields["message"] == "mcs-registry listening"
                    && let (Some(api), Some(admin)) =
                        (fields["api"].as_str(), fields["admin"].as_str())
                {
                    return Some((api.to_owned(), admin.to_owned()));
                }
            }
            None
        })
        .await;
        let (api, admin) = match listening {
            Ok(Some(addresses)) => addresses,
            Ok(None) => bail!("mcs-registry exited before listening:\n{}", seen.join("\n")),
            Err(_) => bail!("mcs-registry did not listen within {STARTUP:?}:\n{}", seen.join("\n")),
        };
        // Keep draining its log so the process never blocks on a full pipe;
        // its warnings and errors are kept for RegistryProcess::warnings.
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let kept = warnings.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("\"WARN\"") || line.contains("\"ERROR\"") {
                    if echo {
                        eprintln!("mcs-registry: {line}");
                    }
                    kept.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            }
        });
        let process = RegistryProcess {
            child,
            api: format!("http://{api}"),
            admin: format!("http://{admin}"),
            warnings,
        };
        if self.wait_ready {
            process.wait_ready().await?;
        }
        Ok(process)
    }
}

fn is_warning(event: &serde_json::Value) -> bool {
    event["level"] == "WARN" || event["level"] == "ERROR"
}

/// A running registry, killed when dropped.
#[derive(Debug)]
pub struct RegistryProcess {
    child: Child,
    api: String,
    admin: String,
    warnings: Arc<Mutex<Vec<String>>>,
}

impl RegistryProcess {
    /// Starts `bin` with `extra` flags and waits until it is ready; panics
    /// (with its log) when it does not get there.
    pub async fn start<S: AsRef<str>>(bin: impl AsRef<Path>, extra: &[S]) -> Self {
        Launch::new(bin)
            .args(extra.iter().map(AsRef::as_ref))
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    /// Starts `bin` with `extra` flags and waits until it listens, not until
    /// it is ready.
    pub async fn start_listening<S: AsRef<str>>(bin: impl AsRef<Path>, extra: &[S]) -> Self {
        Launch::new(bin)
            .args(extra.iter().map(AsRef::as_ref))
            .listening_only()
            .start()
            .await
            .unwrap_or_else(|e| panic!("{e:#}"))
    }

    async fn wait_ready(&self) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let started = tokio::time::Instant::now();
        while started.elapsed() < STARTUP {
            if let Ok(reply) = http.get(format!("{}/readyz", self.api)).send().await
                && reply.status() == 200
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("mcs-registry not ready within {STARTUP:?}")
    }

    /// The log lines at WARN or ERROR level since it listened (JSON).
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Base URL of the API.
    pub fn api_url(&self) -> &str {
        &self.api
    }

    /// Base URL of the admin port.
    pub fn admin_url(&self) -> &str {
        &self.admin
    }

    /// The value of the metric sample `sample` (name and labels exactly as
    /// rendered) on its `/metrics`, summed over the lines that carry it; 0
    /// when absent.
    pub async fn metric(&self, http: &reqwest::Client, sample: &str) -> f64 {
        let url = format!("{}/metrics", self.admin);
        let text = http.get(&url).send().await.unwrap_or_else(|e| panic!("{url}: {e}"));
        let text = text.text().await.unwrap_or_else(|e| panic!("{url}: {e}"));
        text.lines()
            .filter_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
            .map(|v| v.trim().parse::<f64>().unwrap_or_else(|e| panic!("{sample} {v:?}: {e}")))
            .sum()
    }

    /// The process id (under `taskset`, of its exec: the registry itself).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits (up to 15 s) for the exit code.
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

    /// Kills the process with SIGKILL (no shutdown, no draining) and reaps
    /// it.
    pub async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL and reap");
    }
}
