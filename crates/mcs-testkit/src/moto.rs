//! A moto_server of a test's own, for tests that stop or restart storage
//! (so doing that disturbs no other test). It runs from the venv
//! `scripts/with-moto.sh` creates, through the same launcher
//! (`scripts/moto_server_serialized.py`: one request at a time, so
//! conditional writes are atomic as in DynamoDB).
//!
//! ```text
//!  scripts/with-moto.sh ─► .venv-moto ─► moto_server_serialized.py   (the shared server)
//!  MotoServer::start   ─► .venv-moto ─► moto_server_serialized.py   (a private one)
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running moto_server, killed (after a SIGCONT) when dropped.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    endpoint: String,
}

/// The workspace's root (two levels above this crate).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl MotoServer {
    /// Starts one on a free port. `None`, after the notice of the endpoint
    /// rule ([`crate::dynamo::dynamodb_endpoint`]), when the DynamoDB tests
    /// do not run; panics when they run and there is no `.venv-moto`.
    pub async fn start() -> Option<Self> {
        crate::dynamo::dynamodb_endpoint()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Some(Self::start_on(port).await)
    }

    /// Starts one on `port` (a port the caller chose, say one a registry
    /// already points at).
    pub async fn start_on(port: u16) -> Self {
        let root = workspace_root();
        let python = root.join(".venv-moto/bin/python");
        assert!(
            python.exists(),
            "no {}: run the tests through scripts/with-moto.sh, which creates it",
            python.display()
        );
        let mut child = Command::new(python)
            .arg(root.join("scripts/moto_server_serialized.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let endpoint = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        for _ in 0..150 {
            if http.get(format!("{endpoint}/moto-api/")).send().await.is_ok() {
                return Self { child, endpoint };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("private moto_server on port {port} exited before answering ({status})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("private moto_server did not answer within 15 s");
    }

    /// Its endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends `signal` (`-STOP`, `-CONT`, ...) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal}");
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
