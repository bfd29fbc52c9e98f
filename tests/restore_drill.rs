//! The restore drill of docs/operations.md ("Backup"), as a test: register
//! through a real `mcs-registry` on a DynamoDB table (moto_server), dump it
//! with `mcs-admin dump`, lose it (a new, empty table), restore the dump
//! there with `mcs-admin restore`, start a registry on the restored table
//! and check that it serves every list with the same fingerprint as the
//! original.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_tests::{RegistryProcess, binaries, dynamodb_endpoint, run, unique_table};
use serde_json::{Value, json};
use std::path::Path;

const REGION: &str = "us-east-1";
const SECTIONS: [&str; 5] = ["pools", "routers", "clusters", "exports", "imports"];

/// A lease that outlasts the drill, so that what was live stays live.
fn lease() -> Value {
    json!({"duration_secs": 600, "heartbeat_interval_secs": 60})
}

/// Runs `mcs-admin args… --table table …`, expecting exit 0; its stdout.
fn admin(binary: &Path, table: &str, endpoint: &str, args: &[&str]) -> String {
    let location = ["--table", table, "--region", REGION, "--dynamodb-endpoint", endpoint];
    let out = run(binary, &[args, &location[..]].concat());
    assert!(
        out.status.success(),
        "mcs-admin {args:?} on {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

async fn start_registry(binary: &Path, table: &str, endpoint: &str) -> RegistryProcess {
    let args = [
        "--storage",
        "dynamodb",
        "--table",
        table,
        "--region",
        REGION,
        "--dynamodb-endpoint",
        endpoint,
    ];
    RegistryProcess::start(binary, &args).await
}

/// Every list of the registry at `api`: its fingerprint and its body.
async fn lists(http: &reqwest::Client, api: &str) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for section in SECTIONS {
        let body: Value =
            http.get(format!("{api}/v1/{section}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(body["complete"], true, "{section}: {body}");
        all.push((body["fingerprint"].as_str().unwrap().to_owned(), body));
    }
    all
}

async fn send(request: reqwest::RequestBuilder) {
    let reply = request.send().await.unwrap();
    let status = reply.status();
    assert_eq!(status, 200, "{}", reply.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_restored_into_a_new_table_serves_the_same_fingerprints() {
    let Some(endpoint) = dynamodb_endpoint() else { return };
    let binaries = binaries!();
    let original = unique_table("drill");
    admin(&binaries.admin, &original, &endpoint, &["migrate", "--create"]);
    let registry = start_registry(&binaries.registry, &original, &endpoint).await;
    let http = reqwest::Client::new();
    let api = registry.api_url().to_owned();

    // Pools (one withdrawn afterwards: a tombstone), a router, two clusters
    // with an export each (one of a cluster withdrawn since: not served).
    for dgd in ["llama", "mistral", "qwen"] {
        send(http.post(format!("{api}/v1/pools")).json(&json!({
            "pool_key": {"cluster_id": "us-east-1a", "namespace": "llm", "dgd_name": dgd},
            "model": "meta-llama/Llama-3.1-8B",
            "location": {"region": REGION, "zone": "us-east-1a"},
            "capacity": {"workers": 4},
            "relay_address": "10.0.1.7:9000",
            "incarnation": format!("relay-{dgd}"),
            "lease": lease(),
        })))
        .await;
    }
    send(http.post(format!("{api}/v1/routers")).json(&json!({
        "router_id": "gr-0.us-east-1", "address": "10.0.0.9:8080", "incarnation": "gr-0",
        "lease": lease(),
    })))
    .await;
    for cluster in ["east", "west", "gone"] {
        send(
            http.put(format!("{api}/v1/clusters/{cluster}"))
                .json(&json!({"incarnation": format!("ctl-{cluster}"), "lease": lease()})),
        )
        .await;
        send(http.put(format!("{api}/v1/clusters/{cluster}/exports/llm/web")).json(&json!({
            "type": "ClusterSetIP",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80, "app_protocol": null}],
            "session_affinity": "None",
            "exported_at": "2026-12-02T08:00:00Z",
            "endpoints": [{"addresses": ["10.1.0.5"], "ready": true, "hostname": null, "zone": null}],
            "incarnation": format!("ctl-{cluster}"),
        })))
        .await;
    }
    let pools = lists(&http, &api).await.remove(0).1;
    let withdrawn = pools["pools"][0]["pool_id"].as_str().unwrap().to_owned();
    let owner = format!("relay-{}", pools["pools"][0]["pool_key"]["dgd_name"].as_str().unwrap());
    send(http.delete(format!("{api}/v1/pools/{withdrawn}?incarnation={owner}"))).await;
    send(http.delete(format!("{api}/v1/clusters/gone?incarnation=ctl-gone"))).await;
    let before = lists(&http, &api).await;
    assert_eq!(before[0].1["pools"].as_array().unwrap().len(), 2, "{}", before[0].1);
    assert_eq!(before[3].1["exports"].as_array().unwrap().len(), 2, "{}", before[3].1);

    // Back up.
    let dump = admin(&binaries.admin, &original, &endpoint, &["dump"]);
    let lines: Vec<&str> = dump.lines().collect();
    let trailer: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(trailer["records"], 3 + 1 + 3 + 3, "every record, tombstones included: {dump}");
    drop(registry);

    // Lose the table: a new, empty one in its place.
    let restored = unique_table("drill-restored");
    admin(&binaries.admin, &restored, &endpoint, &["migrate", "--create"]);
    let file = std::env::temp_dir().join(format!("{restored}.jsonl"));
    std::fs::write(&file, &dump).unwrap();
    let summary =
        admin(&binaries.admin, &restored, &endpoint, &["restore", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();
    assert!(
        summary.contains(&format!(
            "restored 10 records into {restored}: 10 applied, 0 unchanged, 0 stale, 0 owned, 0 \
             too old"
        )),
        "{summary}"
    );

    // A registry on the restored table serves the same lists.
    let registry = start_registry(&binaries.registry, &restored, &endpoint).await;
    let after = lists(&http, registry.api_url()).await;
    for ((section, (want, want_body)), (got, got_body)) in SECTIONS.iter().zip(&before).zip(&after)
    {
        assert_eq!(got, want, "{section}: {got_body} vs {want_body}");
    }
    // And ownership came back with the records: the withdrawn pool's
    // tombstone still fences, a live pool is still its relay's.
    let pool = &after[0].1["pools"][0];
    let reply = http
        .delete(format!("{}/v1/pools/{}", registry.api_url(), pool["pool_id"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 409, "owned by its relay: {}", reply.text().await.unwrap());
}
