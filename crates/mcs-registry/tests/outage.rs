//! A storage outage while the registry runs: the registry's own moto_server
//! is stopped (SIGSTOP: it accepts connections and answers nothing, like a
//! partitioned or hung endpoint). Writes answer 503 with `Retry-After`,
//! reads keep serving the last view with `complete: false`, and both recover
//! by themselves once it continues. And storage absent at startup: the
//! registry serves, not ready, until storage answers and the table is
//! migrated.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

use mcs_testkit::moto::MotoServer;
use mcs_testkit::{RegistryProcess, dynamo, eventually, fixtures};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The binary under test.
const REGISTRY: &str = env!("CARGO_BIN_EXE_mcs-registry");

fn pool(dgd: &str) -> Value {
    fixtures::pool("c1", dgd, 1)
}

async fn list(http: &reqwest::Client, api: &str) -> Value {
    http.get(format!("{api}/v1/pools")).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_fail_fast_reads_go_stale_and_both_recover() {
    // Runs where the other DynamoDB tests run (scripts/with-moto.sh).
    let Some(moto) = MotoServer::start().await else { return };
    let table = dynamo::fresh_table(moto.endpoint(), "outage").await;
    let mut args = dynamo::registry_args(moto.endpoint(), &table);
    args.extend(
        ["--refresh-interval-ms", "200", "--stale-after-secs", "1", "--request-timeout-ms", "1500"]
            .map(str::to_owned),
    );
    let registry = RegistryProcess::start(REGISTRY, &args).await;
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
    if dynamo::dynamodb_endpoint().is_none() {
        return;
    }
    // Held (refusing) until moto is started on it, so no parallel test's
    // bind takes it meanwhile.
    let refused = mcs_testkit::net::RefusedPort::new();
    let endpoint = refused.url();
    let table = dynamo::unique_table("late-storage");
    let mut args = dynamo::registry_args(&endpoint, &table);
    args.extend(["--refresh-interval-ms", "200"].map(str::to_owned));
    let registry = RegistryProcess::start_listening(REGISTRY, &args).await;
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
    let port = refused.addr().port();
    drop(refused);
    let moto = MotoServer::start_on(port).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(status(format!("{admin}/readyz")).await, 503);

    // The migration job runs: ready, and writes go through.
    dynamo::migrate_table(moto.endpoint(), &table).await;
    eventually(Duration::from_secs(30), "ready once the table is migrated", async || {
        status(format!("{admin}/readyz")).await == 200
    })
    .await;
    assert_eq!(write().await, 200);
    assert_eq!(list(&http, &api).await["pools"].as_array().unwrap().len(), 1);
    assert_eq!(registry.terminate().await, Some(0));
}

/// Issue 22, item 12: the table deleted under a running registry made
/// writes answer 500, which clients do not retry. It is a 503 with
/// `Retry-After`, the registry turns not ready, and a log line names the
/// table, its region and endpoint; once the table is created again, it is
/// ready and writes go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_deleted_under_a_running_registry_is_503_and_not_ready_until_it_is_back() {
    let Some(moto) = MotoServer::start().await else { return };
    let table = dynamo::fresh_table(moto.endpoint(), "deleted").await;
    let mut args = dynamo::registry_args(moto.endpoint(), &table);
    args.extend(["--refresh-interval-ms", "200"].map(str::to_owned));
    let registry = RegistryProcess::start(REGISTRY, &args).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let (api, admin) = (registry.api_url().to_owned(), registry.admin_url().to_owned());
    let write = async |dgd: &str| {
        http.post(format!("{api}/v1/pools")).json(&pool(dgd)).send().await.unwrap()
    };
    let ready = async || http.get(format!("{admin}/readyz")).send().await.unwrap().status() == 200;
    assert_eq!(write("a").await.status(), 200);

    dynamo::client(moto.endpoint(), "us-east-1")
        .delete_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let refused = write("b").await;
    assert_eq!(refused.status(), 503, "a missing table is worth retrying");
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], json!("unavailable"), "{body}");
    eventually(Duration::from_secs(10), "not ready", async || !ready().await).await;
    let named = format!("table {table} in us-east-1 at {}", moto.endpoint());
    let logged = registry.warnings();
    assert!(
        logged.iter().any(|l| l.contains("\"ERROR\"")
            && l.contains("storage table missing")
            && l.contains(&named)),
        "a log line naming {named}:\n{}",
        logged.join("\n")
    );

    dynamo::migrate_table(moto.endpoint(), &table).await;
    eventually(Duration::from_secs(30), "ready once the table is back", ready).await;
    assert_eq!(write("b").await.status(), 200);
    assert_eq!(registry.terminate().await, Some(0));
}
