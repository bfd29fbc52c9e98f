//! End-to-end: start the built `mcs-registry` binary on free ports, register
//! two pools with a short lease, watch, renew one and not the other, and see
//! only the renewed one remain after the lease plus the skew allowance.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

use mcs_testkit::{RegistryProcess, dynamo, eventually, fixtures};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The binary under test.
const REGISTRY: &str = env!("CARGO_BIN_EXE_mcs-registry");

fn pool(dgd: &str) -> Value {
    fixtures::with(
        fixtures::pool("us-east-1a", dgd, 2),
        json!({"incarnation": format!("relay-{dgd}")}),
    )
}

fn pool_names(list: &Value) -> Vec<&str> {
    list["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pool_key"]["dgd_name"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_expire_unless_renewed() {
    pools_expire_unless_renewed_on(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_expire_unless_renewed_on_dynamodb() {
    let Some(endpoint) = dynamo::dynamodb_endpoint() else { return };
    let table = dynamo::fresh_table(&endpoint, "expiry").await;
    let args = dynamo::registry_args(&endpoint, &table);
    pools_expire_unless_renewed_on(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

/// The scenario of both tests above, on the storage `storage_args` select.
async fn pools_expire_unless_renewed_on(storage_args: &[&str]) {
    let mut args = vec![
        "--lease-duration-secs",
        "2",
        "--heartbeat-interval-secs",
        "1",
        "--skew-allowance-ms",
        "200",
        "--refresh-interval-ms",
        "100",
    ];
    args.extend_from_slice(storage_args);
    let registry = RegistryProcess::start(REGISTRY, &args).await;
    let http = reqwest::Client::new();
    let api = registry.api_url();

    for dgd in ["kept", "dropped"] {
        let reply = http.post(format!("{api}/v1/pools")).json(&pool(dgd)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    let list: Value =
        http.get(format!("{api}/v1/pools")).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["pools"].as_array().unwrap().len(), 2);
    assert_eq!(list["complete"], json!(true));
    let fingerprint = list["fingerprint"].as_str().unwrap().to_owned();

    // A watcher waiting on the two-pool list.
    let watcher = {
        let http = http.clone();
        let url = format!("{api}/v1/pools?watch=true&timeout_secs=20");
        let etag = format!("\"{fingerprint}\"");
        tokio::spawn(async move {
            let started = Instant::now();
            let reply = http.get(url).header("if-none-match", etag).send().await.unwrap();
            let status = reply.status();
            let body: Value = reply.json().await.unwrap();
            (status, body, started.elapsed())
        })
    };

    // Renew "kept" every 500 ms for 3.5 s; never renew "dropped".
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(3_500) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let reply = http.post(format!("{api}/v1/pools")).json(&pool("kept")).send().await.unwrap();
        assert_eq!(reply.status(), 200);
    }

    let (status, body, waited) = watcher.await.unwrap();
    assert_eq!(status, 200, "the watcher is woken by the expiry");
    assert!(waited >= Duration::from_millis(1_500), "not before the lease ended: {waited:?}");
    assert_eq!(pool_names(&body), vec!["kept"]);

    let list: Value =
        http.get(format!("{api}/v1/pools")).send().await.unwrap().json().await.unwrap();
    assert_eq!(pool_names(&list), vec!["kept"], "only the renewed pool remains");

    let metrics = http
        .get(format!("{}/metrics", registry.admin_url()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("mcs_view_lease_expiries_total{kind=\"pool\"} 1"), "{metrics}");
    assert!(
        metrics.contains(
            "mcs_http_requests_total{route=\"/v1/pools\",method=\"POST\",status=\"200\"}"
        )
    );

    let code = registry.terminate().await;
    assert_eq!(code, Some(0), "SIGTERM shuts down cleanly");
}

#[tokio::test]
async fn inconsistent_flags_exit_with_code_2() {
    for args in [
        &["--lease-duration-secs", "90000"][..],
        &["--heartbeat-interval-secs", "30", "--lease-duration-secs", "30"][..],
        &["--table", "t"][..],
        // Issue 7, defect 8: a huge value used to start, then panic in a watch.
        &["--max-watch-secs", "18446744073709551615"][..],
        &["--max-connections", "4", "--max-watches", "5"][..],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcs-registry"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("mcs-registry: --"), "{args:?}: {stderr}");
    }
}

/// Issue 23, item 2: the environment operations.md has an operator export
/// for mcs-admin made the registry on memory storage exit 2 naming flags
/// never typed. From the environment they are ignored, each named in a
/// warning; typed, they are still an error (above).
#[tokio::test]
async fn dynamodb_settings_from_the_environment_do_not_stop_memory_storage() {
    let registry = mcs_testkit::process::Launch::new(REGISTRY)
        .env("MCS_TABLE", "mcs-registry")
        .env("MCS_REGION", "us-east-1")
        .env("MCS_DYNAMODB_ENDPOINT", "http://localhost:8000")
        .env("MCS_STORAGE_CONNECT_TIMEOUT_SECS", "30")
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let reply = reqwest::get(format!("{}/v1/pools", registry.api_url())).await.unwrap();
    assert_eq!(reply.status(), 200);
    let warnings = registry.warnings().join("\n");
    for env in
        ["MCS_TABLE", "MCS_REGION", "MCS_DYNAMODB_ENDPOINT", "MCS_STORAGE_CONNECT_TIMEOUT_SECS"]
    {
        assert!(
            warnings.contains(&format!("{env} is set in the environment")),
            "{env}: {warnings}"
        );
    }
}

fn registry_output(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mcs-registry"))
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(args)
        .env_clear()
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The one JSON log line at level ERROR of `stderr`, checked to be the
/// last line.
fn error_line(stderr: &str) -> Value {
    let last = stderr.lines().last().unwrap_or_default();
    let event: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(event["level"], "ERROR", "{stderr}");
    event
}

#[test]
fn an_invalid_log_filter_exits_2_in_either_format() {
    let text = registry_output(&["--log", "foo=["], &[]);
    assert_eq!(text.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.starts_with("mcs-registry: --log / MCS_LOG \"foo=[\" is not a valid filter"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let json = registry_output(&["--log", "foo=[", "--log-format", "json"], &[]);
    assert_eq!(json.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&json.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let event = error_line(&stderr);
    assert!(
        event["fields"]["message"].as_str().unwrap().contains("not a valid filter"),
        "{stderr}"
    );
}

#[test]
fn startup_errors_are_json_lines_under_log_format_json() {
    let flags = registry_output(&["--table", "t", "--log-format", "json"], &[]);
    assert_eq!(flags.status.code(), Some(2));
    let event = error_line(&String::from_utf8_lossy(&flags.stderr));
    assert_eq!(event["fields"]["message"], "mcs-registry: --table needs --storage dynamodb");

    // No region anywhere: the message names the flag, not only AWS_REGION.
    let creds = [("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")];
    let region =
        registry_output(&["--storage", "dynamodb", "--table", "t", "--log-format", "json"], &creds);
    assert_eq!(region.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&region.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let message = error_line(&stderr)["fields"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("pass --region (or MCS_REGION)"), "{message}");
}

/// Without credentials the registry serves, not ready, and says why once
/// per attempt; with a connect timeout it then exits 1, saying why in one
/// line: no credentials, not an instance-metadata token failure.
#[test]
fn missing_credentials_are_named_and_retried_within_the_timeout() {
    let refused = mcs_testkit::net::RefusedPort::new();
    let closed = refused.url();
    let out = registry_output(
        &[
            "--storage",
            "dynamodb",
            "--table",
            "t",
            "--region",
            "us-east-1",
            "--dynamodb-endpoint",
            &closed,
            "--storage-connect-timeout-secs",
            "1",
            "--log-format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let retries: Vec<Value> = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["fields"]["message"] == "table not usable; not ready, retrying")
        .collect();
    assert!(!retries.is_empty(), "{stderr}");
    assert_eq!(retries[0]["fields"]["attempt"], 1, "{stderr}");
    let want = format!(
        "get_schema on table t in us-east-1 at {closed}: no AWS credentials found (environment, \
         profile, web identity, instance metadata)"
    );
    assert!(retries[0]["fields"]["error"].as_str().unwrap().ends_with(&want), "{stderr}");
    let last = error_line(&stderr);
    let message = last["fields"]["message"].as_str().unwrap();
    assert!(
        message
            .starts_with("mcs-registry: no usable table within --storage-connect-timeout-secs 1: "),
        "{message}"
    );
    assert!(message.ends_with(&want), "{message}");
    assert!(!stderr.contains("DispatchFailure") && !stderr.contains("IMDS"), "{stderr}");
}

/// Writes the schema item of `table` as a newer migrate would have.
async fn stamp(endpoint: &str, table: &str, version: u32, compatible_from: Option<u32>) {
    use aws_sdk_dynamodb::types::AttributeValue;
    let mut put = dynamo::client(endpoint, dynamo::REGION)
        .put_item()
        .table_name(table)
        .item("pk", AttributeValue::S("META".into()))
        .item("sk", AttributeValue::S("SCHEMA".into()))
        .item("version", AttributeValue::N(version.to_string()));
    if let Some(from) = compatible_from {
        put = put.item("compatible_from", AttributeValue::N(from.to_string()));
    }
    put.send().await.unwrap();
}

/// N-1/N: a registry keeps serving a table one additive migration ahead of
/// it (old pods restart mid-rollout), and stays not ready on one that is
/// not additive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_one_additive_migration_ahead_is_served() {
    use mcs_store::dynamo::SCHEMA_VERSION;
    let Some(endpoint) = dynamo::dynamodb_endpoint() else { return };
    let additive = dynamo::fresh_table(&endpoint, "ahead-additive").await;
    stamp(&endpoint, &additive, SCHEMA_VERSION + 1, Some(SCHEMA_VERSION)).await;
    let args = dynamo::registry_args(&endpoint, &additive);
    let registry = RegistryProcess::start(REGISTRY, &args).await;
    let http = reqwest::Client::new();
    let reply = http
        .post(format!("{}/v1/pools", registry.api_url()))
        .json(&json!({
            "pool_key": {"cluster_id": "c1", "namespace": "llm", "dgd_name": "a"},
            "model": "m",
            "location": {"region": "us-east-1"},
            "capacity": {"workers": 1},
            "relay_address": "10.0.1.7:9000"
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(registry.terminate().await, Some(0));

    let breaking = dynamo::fresh_table(&endpoint, "ahead-breaking").await;
    stamp(&endpoint, &breaking, SCHEMA_VERSION + 1, Some(SCHEMA_VERSION + 1)).await;
    let args = dynamo::registry_args(&endpoint, &breaking);
    let registry = RegistryProcess::start_listening(REGISTRY, &args).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let readyz = http.get(format!("{}/readyz", registry.admin_url())).send().await.unwrap();
    assert_eq!(readyz.status(), 503, "not ready on a table it may misread");
    assert_eq!(registry.terminate().await, Some(0));
}

/// `GET {api}/v1/{section}`, answered 200.
async fn get_list(http: &reqwest::Client, api: &str, section: &str) -> Value {
    let reply = http.get(format!("{api}/v1/{section}")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "GET /v1/{section}");
    reply.json().await.unwrap()
}

/// `PUT /v1/clusters/c1` by controller `ctl-1` through `api`, answered 200.
async fn register_cluster(http: &reqwest::Client, api: &str) {
    let reply = http
        .put(format!("{api}/v1/clusters/c1"))
        .json(&fixtures::cluster("ctl-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
}

/// Issue 22, item 1, one region and two processes (docs/design.md §3,
/// "Invariant (issue 22)"): an export put through one registry process and
/// withdrawn through another stays withdrawn when TTL has run ten days on
/// (its tombstone carries no `ttl`). The cluster, whose record TTL deletes,
/// registers again, so that an export left live would be served; the two
/// running processes after a full read and a fresh third serve no export,
/// and agree. In one region the withdrawal replaces the export's own item,
/// so what could fail here is the tombstone's own survival (the store
/// check); across regions see the multiregion scenario
/// `an_export_withdrawn_in_another_region_stays_withdrawn_after_ttl`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_withdrawn_through_another_process_stays_withdrawn_after_ttl() {
    let Some(endpoint) = dynamo::dynamodb_endpoint() else { return };
    let table = dynamo::fresh_table(&endpoint, "ttl-export").await;
    let mut args = dynamo::registry_args(&endpoint, &table);
    args.extend(
        ["--refresh-interval-ms", "200", "--full-resync-interval-secs", "1"].map(str::to_owned),
    );
    let first = RegistryProcess::start(REGISTRY, &args).await;
    let second = RegistryProcess::start(REGISTRY, &args).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let (api1, api2) = (first.api_url().to_owned(), second.api_url().to_owned());
    let export_path = "/v1/clusters/c1/exports/llm/svc";

    register_cluster(&http, &api1).await;
    let export = fixtures::with(
        fixtures::export("ClusterSetIP", "2026-01-01T00:00:00Z", "10.1.0.1"),
        json!({"incarnation": "ctl-1"}),
    );
    let reply = http.put(format!("{api1}{export_path}")).json(&export).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    let exports = async |api: &str| get_list(&http, api, "exports").await;
    eventually(Duration::from_secs(10), "the second process serves the export", async || {
        exports(&api2).await["exports"].as_array().unwrap().len() == 1
    })
    .await;

    let reply = http.delete(format!("{api2}{export_path}?incarnation=ctl-1")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    eventually(Duration::from_secs(10), "neither process serves it", async || {
        exports(&api1).await["exports"].as_array().unwrap().is_empty()
            && exports(&api2).await["exports"].as_array().unwrap().is_empty()
    })
    .await;

    // Ten days on: past the retention of every lease and tombstone.
    // What TTL deleted is checked last, after what the processes serve.
    let deleted = dynamo::emulate_ttl(&endpoint, dynamo::REGION, &table, dynamo::TEN_DAYS).await;

    // Both running processes read everything again; the controller's next
    // heartbeat registers the cluster again.
    let full = r#"mcs_reader_polls_total{mode="full",outcome="ok"}"#;
    let before = [first.metric(&http, full).await, second.metric(&http, full).await];
    eventually(Duration::from_secs(10), "a full read in both processes", async || {
        first.metric(&http, full).await > before[0] && second.metric(&http, full).await > before[1]
    })
    .await;
    register_cluster(&http, &api1).await;
    let third = RegistryProcess::start(REGISTRY, &args).await;
    let apis = [api1, api2, third.api_url().to_owned()];
    eventually(Duration::from_secs(10), "every process serves the cluster", async || {
        for api in &apis {
            if get_list(&http, api, "clusters").await["clusters"].as_array().unwrap().len() != 1 {
                return false;
            }
        }
        true
    })
    .await;
    let mut prints = Vec::new();
    for api in &apis {
        let list = exports(api).await;
        assert_eq!(list["exports"], json!([]), "{api} serves the withdrawn export: {list}");
        assert_eq!(list["complete"], json!(true), "{api}");
        prints.push(list["fingerprint"].clone());
    }
    assert!(prints.iter().all(|p| *p == prints[0]), "the processes agree: {prints:?}");
    assert_eq!(deleted, 1, "TTL deleted the cluster's record, not the export's withdrawal");
    let store = dynamo::store_in(&endpoint, dynamo::REGION, &table).await;
    let spec = mcs_core::fixtures::mk_export_spec(0, vec![]);
    let key = mcs_core::fixtures::mk_export("c1", "svc", 1, spec).key;
    let stored = mcs_store::Store::get(&store, &key).await.unwrap();
    assert!(stored.as_ref().is_some_and(mcs_core::Record::is_tombstone), "stored: {stored:?}");
}

/// Issue 22 (found by mcs-sim: `Rules::BROKEN_KEEPS_RETIRED`): once TTL
/// has deleted every item of a pool, a process that still holds its last
/// record (lapsed, of a generation its relay sent ahead of the clocks)
/// serves a new incarnation's registration through another process, which
/// gets a generation of that process's clock, lower. Before
/// `View::replace_all` retired such records, the first process kept the
/// old one as the key's winner through every full read and served no pool,
/// while the second served it: they disagreed until a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_ttl_deleted_gives_way_to_a_new_registration_in_every_process() {
    let Some(endpoint) = dynamo::dynamodb_endpoint() else { return };
    let table = dynamo::fresh_table(&endpoint, "ttl-retired").await;
    let mut args = dynamo::registry_args(&endpoint, &table);
    args.extend(
        ["--refresh-interval-ms", "200", "--full-resync-interval-secs", "1"].map(str::to_owned),
    );
    let first = RegistryProcess::start(REGISTRY, &args).await;
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let api1 = first.api_url().to_owned();
    let pools = async |api: &str| get_list(&http, api, "pools").await;

    // The old relay's own generation, 100 s ahead of every clock here.
    let now_ms = u64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap();
    let ahead = (now_ms + 100_000) << 16;
    let old = fixtures::with(
        fixtures::pool("us-east-1a", "llama", 2),
        json!({"incarnation": "relay-old", "generation": ahead,
               "lease": {"duration_secs": 2, "heartbeat_interval_secs": 1}}),
    );
    let reply = http.post(format!("{api1}/v1/pools")).json(&old).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    assert_eq!(pools(&api1).await["pools"].as_array().unwrap().len(), 1);
    eventually(Duration::from_secs(10), "the old lease lapses", async || {
        pools(&api1).await["pools"].as_array().unwrap().is_empty()
    })
    .await;
    let deleted = dynamo::emulate_ttl(&endpoint, dynamo::REGION, &table, dynamo::TEN_DAYS).await;
    assert_eq!(deleted, 1, "TTL deleted the lapsed pool");

    // A fresh process holds nothing of the key: the new incarnation's
    // registration gets that process's own generation, below the old one.
    let second = RegistryProcess::start(REGISTRY, &args).await;
    let api2 = second.api_url().to_owned();
    let new = fixtures::with(
        fixtures::pool("us-east-1a", "llama", 3),
        json!({"incarnation": "relay-new"}),
    );
    let reply = http.post(format!("{api2}/v1/pools")).json(&new).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    let written: Value = reply.json().await.unwrap();
    assert!(written["generation"].as_u64().unwrap() < ahead, "{written}");

    let full = r#"mcs_reader_polls_total{mode="full",outcome="ok"}"#;
    let before = first.metric(&http, full).await;
    eventually(Duration::from_secs(10), "a full read of the first process", async || {
        first.metric(&http, full).await > before
    })
    .await;
    eventually(Duration::from_secs(10), "both processes serve the new registration", async || {
        let (one, two) = (pools(&api1).await, pools(&api2).await);
        one["pools"].as_array().unwrap().len() == 1 && one["fingerprint"] == two["fingerprint"]
    })
    .await;
    let served = pools(&api1).await;
    assert_eq!(served["pools"][0]["capacity"]["workers"], json!(3), "{served}");
}
