//! A storage outage while the registry runs: the registry's own moto_server
//! is stopped (SIGSTOP: it accepts connections and answers nothing, like a
//! partitioned or hung endpoint). Writes answer 503 with `Retry-After`,
//! reads keep serving the last view with `complete: false`, and both recover
//! by themselves once it continues. And storage absent at startup: the
//! registry serves, not ready, until storage answers and the table is
//! migrated.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

mod support;

use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::RegistryProcess;

/// A moto_server of this test's own, so stopping it disturbs no other test.
struct PrivateMoto {
    child: Child,
    endpoint: String,
}

impl PrivateMoto {
    /// Starts one from the venv `scripts/with-moto.sh` made, or `None` when
    /// there is none (failing under `CI=true`).
    async fn start() -> Option<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port).await
    }

    /// The same, on `port`.
    async fn start_on(port: u16) -> Option<Self> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let python = root.join(".venv-moto/bin/python");
        if !python.exists() {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "no .venv-moto but CI=true: run the tests through scripts/with-moto.sh"
            );
            eprintln!("notice: no .venv-moto, skipping (run with scripts/with-moto.sh)");
            return None;
        }
        let mut child = Command::new(python)
            .arg(root.join("scripts/moto_server_serialized.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let endpoint = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        for _ in 0..150 {
            if http.get(format!("{endpoint}/moto-api/")).send().await.is_ok() {
                return Some(Self { child, endpoint });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("private moto_server did not answer within 15 s");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal}");
    }
}

impl Drop for PrivateMoto {
    fn drop(&mut self) {
        self.signal("-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pool(dgd: &str) -> Value {
    json!({
        "pool_key": {"cluster_id": "c1", "namespace": "llm", "dgd_name": dgd},
        "model": "m",
        "location": {"region": "us-east-1"},
        "capacity": {"workers": 1},
        "relay_address": "10.0.1.7:9000"
    })
}

async fn list(http: &reqwest::Client, api: &str) -> Value {
    http.get(format!("{api}/v1/pools")).send().await.unwrap().json().await.unwrap()
}

/// Polls `check` every 100 ms until it holds or `within` passes.
async fn eventually<F: AsyncFnMut() -> bool>(within: Duration, what: &str, mut check: F) {
    let started = Instant::now();
    while started.elapsed() < within {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not within {within:?}: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_fail_fast_reads_go_stale_and_both_recover() {
    // Runs where the other DynamoDB tests run (scripts/with-moto.sh).
    if support::dynamo_endpoint().is_none() {
        return;
    }
    let Some(moto) = PrivateMoto::start().await else { return };
    let table = support::fresh_table(&moto.endpoint, "outage").await;
    let mut args = support::dynamo_args(&moto.endpoint, &table);
    args.extend(
        ["--refresh-interval-ms", "200", "--stale-after-secs", "1", "--request-timeout-ms", "1500"]
            .map(str::to_owned),
    );
    let registry =
        RegistryProcess::start(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let api = registry.api_url().to_owned();

    let reply = http.post(format!("{api}/v1/pools")).json(&pool("a")).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(list(&http, &api).await["complete"], json!(true));

    moto.signal("-STOP");
    let started = Instant::now();
    let refused = http.post(format!("{api}/v1/pools")).json(&pool("b")).send().await.unwrap();
    assert_eq!(refused.status(), 503, "a write during the outage is refused, not hung");
    assert!(started.elapsed() < Duration::from_secs(5), "within the request timeout");
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], json!("unavailable"));

    eventually(Duration::from_secs(5), "lists turn incomplete", async || {
        list(&http, &api).await["complete"] == json!(false)
    })
    .await;
    let stale = list(&http, &api).await;
    assert_eq!(stale["pools"].as_array().unwrap().len(), 1, "the last view is still served");

    moto.signal("-CONT");
    eventually(Duration::from_secs(20), "lists complete again", async || {
        list(&http, &api).await["complete"] == json!(true)
    })
    .await;
    eventually(Duration::from_secs(10), "writes succeed again", async || {
        http.post(format!("{api}/v1/pools")).json(&pool("b")).send().await.unwrap().status() == 200
    })
    .await;
    assert_eq!(list(&http, &api).await["pools"].as_array().unwrap().len(), 2);
    assert_eq!(registry.terminate().await, Some(0));
}

/// Kubernetes starts pods before (or while) storage comes up: the registry
/// must serve its ports, not ready, and keep trying, not exit and crash-loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_started_before_storage_becomes_ready_once_it_answers() {
    if support::dynamo_endpoint().is_none() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let table = support::unique_table("late-storage");
    let mut args = support::dynamo_args(&endpoint, &table);
    args.extend(["--refresh-interval-ms", "200"].map(str::to_owned));
    let registry =
        RegistryProcess::start_listening(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let (api, admin) = (registry.api_url().to_owned(), registry.admin_url().to_owned());
    let status = async |url: String| http.get(url).send().await.unwrap().status().as_u16();
    let write = async || {
        http.post(format!("{api}/v1/pools")).json(&pool("a")).send().await.unwrap().status()
    };

    // No storage at all: alive, not ready, writes refused.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(format!("{admin}/healthz")).await, 200);
    assert_eq!(status(format!("{admin}/readyz")).await, 503);
    assert_eq!(write().await, 503);

    // Storage answers, but the table does not exist yet: still not ready.
    let Some(moto) = PrivateMoto::start_on(port).await else { return };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(format!("{admin}/readyz")).await, 503);

    // The migration job runs: ready, and writes go through.
    support::migrate_table(&moto.endpoint, &table).await;
    eventually(Duration::from_secs(30), "ready once the table is migrated", async || {
        status(format!("{admin}/readyz")).await == 200
    })
    .await;
    assert_eq!(write().await, 200);
    assert_eq!(list(&http, &api).await["pools"].as_array().unwrap().len(), 1);
    assert_eq!(registry.terminate().await, Some(0));
}
