//! End-to-end: start the built `mcs-registry` binary on free ports, register
//! two pools with a short lease, watch, renew one and not the other, and see
//! only the renewed one remain after the lease plus the skew allowance.

#![allow(clippy::unwrap_used)] // a failed call should fail the test loudly

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::RegistryProcess;

fn pool(dgd: &str) -> Value {
    json!({
        "pool_key": {"cluster_id": "us-east-1a", "namespace": "llm", "dgd_name": dgd},
        "model": "meta-llama/Llama-3.1-8B",
        "location": {"region": "us-east-1"},
        "capacity": {"workers": 2},
        "relay_address": "10.0.1.7:9000",
        "incarnation": format!("relay-{dgd}")
    })
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
    let Some(endpoint) = support::dynamo_endpoint() else { return };
    let table = support::fresh_table(&endpoint, "expiry").await;
    let args = support::dynamo_args(&endpoint, &table);
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
    let registry = RegistryProcess::start(&args).await;
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
