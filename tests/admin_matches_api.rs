//! `mcs-admin ls` prints what the registry serves: start the real
//! `mcs-registry` on a DynamoDB table (moto_server) that `mcs-admin migrate`
//! created, register through the HTTP API, and compare every list, byte for
//! byte, with `mcs-admin ls <section> -o json` reading the table directly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a failed call should fail the test loudly

use mcs_api::PoolList;
use mcs_tests::{RegistryProcess, binaries, dynamodb_endpoint, run, unique_table};
use serde_json::{Value, json};

const REGION: &str = "us-east-1";

fn pool(cluster: &str, dgd: &str, workers: u32) -> Value {
    json!({
        "pool_key": {"cluster_id": cluster, "namespace": "llm", "dgd_name": dgd},
        "model": "meta-llama/Llama-3.1-8B",
        "location": {"region": REGION, "zone": "us-east-1a"},
        "capacity": {"workers": workers},
        "relay_address": "10.0.1.7:9000",
        "relay_identities": ["10.0.1.7"],
        "incarnation": format!("relay-{dgd}")
    })
}

/// The bytes of the `section` array of a list body `{"<section>":[…],…}`.
fn array_of<'a>(body: &'a str, section: &str) -> &'a str {
    let rest = body.strip_prefix(&format!("{{\"{section}\":")).expect("the list comes first");
    let end = rest.rfind(",\"complete\":").expect("then complete and fingerprint");
    &rest[..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_ls_prints_what_the_registry_serves() {
    let Some(endpoint) = dynamodb_endpoint() else { return };
    let binaries = binaries!();
    let table = unique_table("matches");
    let location = ["--table", &table, "--region", REGION, "--dynamodb-endpoint", &endpoint];
    let admin = |args: &[&str]| {
        let out = run(&binaries.admin, &[args, &location[..]].concat());
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "mcs-admin {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    assert!(admin(&["migrate", "--create"]).contains("created table"));

    let registry = RegistryProcess::start(
        &binaries.registry,
        &[&["--storage", "dynamodb"][..], &location[..]].concat(),
    )
    .await;
    let http = reqwest::Client::new();
    let api = registry.api_url();
    for (cluster, dgd, workers) in
        [("us-east-1a", "llama", 4), ("us-east-1b", "mistral", 2), ("us-east-1a", "qwen", 8)]
    {
        let reply = http
            .post(format!("{api}/v1/pools"))
            .json(&pool(cluster, dgd, workers))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }
    let reply = http
        .post(format!("{api}/v1/routers"))
        .json(&json!({"router_id": "gr-0.us-east-1", "address": "10.0.0.9:8080", "incarnation": "gr-0"}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    for cluster in ["east", "west"] {
        let reply = http
            .put(format!("{api}/v1/clusters/{cluster}"))
            .json(&json!({"incarnation": format!("ctl-{cluster}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
        let reply = http
            .put(format!("{api}/v1/clusters/{cluster}/exports/llm/web"))
            .json(&json!({
                "type": "ClusterSetIP",
                "ports": [{"name": "http", "protocol": "TCP", "port": 80, "app_protocol": null}],
                "session_affinity": "None",
                "exported_at": if cluster == "east" { "2026-12-02T08:00:00Z" } else { "2026-12-02T09:00:00Z" },
                "endpoints": [{"addresses": ["10.1.0.5"], "ready": true, "hostname": null, "zone": null}],
                "incarnation": format!("ctl-{cluster}")
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    }

    // Pools: the same items, in the same order, as the same bytes.
    let body = http.get(format!("{api}/v1/pools")).send().await.unwrap().text().await.unwrap();
    let served: PoolList = serde_json::from_str(&body).unwrap();
    assert_eq!(served.pools.len(), 3);
    assert!(served.complete);
    let listed = admin(&["ls", "pools", "-o", "json"]);
    let listed_pools: Vec<mcs_api::Pool> = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed_pools, served.pools);
    assert_eq!(listed, format!("{}\n", array_of(&body, "pools")));

    // Every other list too.
    for section in ["routers", "clusters", "exports", "imports"] {
        let body =
            http.get(format!("{api}/v1/{section}")).send().await.unwrap().text().await.unwrap();
        let listed = admin(&["ls", section, "-o", "json"]);
        assert_eq!(listed, format!("{}\n", array_of(&body, section)), "{section}");
        let items: Vec<Value> = serde_json::from_str(&listed).unwrap();
        let want = if matches!(section, "imports" | "routers") { 1 } else { 2 };
        assert_eq!(items.len(), want, "{section}: {listed}");
    }

    // A withdrawal is a tombstone: gone from both, and `ls --all` says why.
    let pool_id = served.pools[0].pool_id.to_string();
    let owner = format!("relay-{}", served.pools[0].pool_key.dgd_name);
    let reply =
        http.delete(format!("{api}/v1/pools/{pool_id}?incarnation={owner}")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "{}", reply.text().await.unwrap());
    let body = http.get(format!("{api}/v1/pools")).send().await.unwrap().text().await.unwrap();
    assert_eq!(admin(&["ls", "pools", "-o", "json"]), format!("{}\n", array_of(&body, "pools")));
    let all: Vec<Value> =
        serde_json::from_str(&admin(&["ls", "pools", "--all", "-o", "json"])).unwrap();
    let withdrawn: Vec<&Value> = all.iter().filter(|e| e["reason"] == "withdrawn").collect();
    assert_eq!(withdrawn.len(), 1);
    assert_eq!(withdrawn[0]["key"], format!("pool/{pool_id}"));
}
