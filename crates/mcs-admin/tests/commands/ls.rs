//! `ls`: live records exactly as the registry serves them; `--all` adds the
//! rest with reasons.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, expired_pool, export_record, live_pool, now_ms, pool_id,
    router_record, withdrawn_pool,
};
use mcs_api::Pool;
use mcs_core::Body;
use std::collections::BTreeMap;

#[tokio::test]
async fn ls_pools_prints_the_served_array() {
    let Some(t) = Fixture::new("ls-pools").await else { return };
    let (a, b) = (live_pool("alpha"), live_pool("beta"));
    t.put(&[
        b.clone(),
        expired_pool("gamma", 5 * MINUTE),
        withdrawn_pool("delta", MINUTE),
        a.clone(),
    ])
    .await;

    // What GET /v1/pools serves: live pools in pool_id order, as compact JSON.
    let mut served: Vec<Pool> = [a, b]
        .into_iter()
        .map(|r| match r.body {
            Body::Pool(p) => p,
            other => panic!("{other:?}"),
        })
        .collect();
    served.sort_by(|x, y| x.pool_id.cmp(&y.pool_id));
    let run = t.admin(&["ls", "pools", "-o", "json"]).expect(0);
    assert_eq!(run.stdout, format!("{}\n", serde_json::to_string(&served).unwrap()));

    let table = t.admin(&["ls", "pools"]).expect(0).stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].starts_with("POOL_ID"), "{table}");
    for (line, pool) in lines[1..].iter().zip(&served) {
        assert!(line.starts_with(pool.pool_id.as_str()), "{table}");
        assert!(line.contains("meta-llama/Llama-3.1-8B"), "{table}");
    }
    let yaml = t.admin(&["ls", "pools", "-o", "yaml"]).expect(0).stdout;
    assert_eq!(yaml.matches("- pool_id: ").count(), 2, "{yaml}");

    // Issue 14, defect 9: `ls pools` but `get pool`; both spellings work
    // for both commands.
    assert_eq!(t.admin(&["ls", "pool", "-o", "json"]).expect(0).stdout, run.stdout);
    let id = pool_id("alpha");
    let one = t.admin(&["get", "pools", &id, "-o", "json"]).expect(0).json();
    assert_eq!(one["key"], format!("pool/{id}"));
}

#[tokio::test]
async fn ls_all_gives_every_record_a_reason() {
    let Some(t) = Fixture::new("ls-all").await else { return };
    let now = now_ms();
    t.put(&[
        live_pool("alpha"),
        expired_pool("gamma", 5 * MINUTE),
        withdrawn_pool("delta", DAY),
        cluster_record("east", now + 10 * MINUTE),
        cluster_record("west", now - MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        export_record("west", "web", 80, 1_700_000_000),
    ])
    .await;

    let pools = t.admin(&["ls", "pools", "--all", "-o", "json"]).expect(0).json();
    let reasons: BTreeMap<String, String> = pools
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["key"].as_str().unwrap().to_owned(), e["reason"].as_str().unwrap().to_owned()))
        .collect();
    let want: BTreeMap<String, String> =
        [("alpha", "live"), ("gamma", "expired"), ("delta", "withdrawn")]
            .into_iter()
            .map(|(dgd, reason)| (format!("pool/{}", pool_id(dgd)), reason.to_owned()))
            .collect();
    assert_eq!(reasons, want);
    let withdrawn = pools.as_array().unwrap().iter().find(|e| e["reason"] == "withdrawn").unwrap();
    assert!(withdrawn["item"].is_null(), "a tombstone has no item");
    let expired = pools.as_array().unwrap().iter().find(|e| e["reason"] == "expired").unwrap();
    assert_eq!(expired["item"]["pool_key"]["dgd_name"], "gamma");

    // Issue 14, defect 9: `--all` switched to rows of some 170 columns.
    // The versions (56 columns each) come only with `-o wide`.
    let table = t.admin(&["ls", "pools", "--all"]).expect(0).stdout;
    assert!(table.starts_with("REASON     KEY                               OWNER"), "{table}");
    let widest = table.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 120, "{widest} columns:\n{table}");
    let wide = t.admin(&["ls", "pools", "--all", "-o", "wide"]).expect(0).stdout;
    assert!(wide.contains("  VERSION  "), "{wide}");
    assert!(wide.contains("@reg-test  relay-alpha"), "{wide}");
    let served_wide = t.admin(&["ls", "pools", "-o", "wide"]).expect(0).stdout;
    assert_eq!(served_wide, t.admin(&["ls", "pools"]).expect(0).stdout, "same as table");

    let exports = t.admin(&["ls", "exports", "--all"]).expect(0).stdout;
    let lines: Vec<&str> = exports.lines().collect();
    assert!(lines[0].starts_with("REASON"), "{exports}");
    assert!(lines[1].starts_with("live              east/llm/web"), "{exports}");
    assert!(lines[2].starts_with("cluster_not_live  west/llm/web"), "{exports}");
    let clusters = t.admin(&["ls", "clusters", "--all", "-o", "json"]).expect(0).json();
    assert_eq!(clusters[0]["reason"], "live");
    assert_eq!(clusters[1]["reason"], "expired");
    assert_eq!(clusters[1]["item"]["incarnation"], "inc-west");

    // Without --all, the served lists only.
    let served = t.admin(&["ls", "exports", "-o", "json"]).expect(0).json();
    assert_eq!(served.as_array().unwrap().len(), 1);
    assert_eq!(served[0]["cluster_id"], "east");
    assert_eq!(served[0]["conditions"][0]["type"], "Valid");
}

#[tokio::test]
async fn ls_routers_clusters_and_imports() {
    let Some(t) = Fixture::new("ls-more").await else { return };
    let now = now_ms();
    t.put(&[
        router_record("gr-0.us-east-1"),
        cluster_record("east", now + 10 * MINUTE),
        cluster_record("west", now + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        export_record("west", "web", 80, 1_700_000_100),
    ])
    .await;
    let routers = t.admin(&["ls", "routers"]).expect(0).stdout;
    assert!(
        routers.lines().nth(1).unwrap().starts_with("gr-0.us-east-1  10.0.0.9:8080"),
        "{routers}"
    );
    let clusters = t.admin(&["ls", "clusters", "-o", "json"]).expect(0).json();
    assert_eq!(
        clusters,
        serde_json::json!([
            {"cluster_id": "east", "incarnation": "inc-east"},
            {"cluster_id": "west", "incarnation": "inc-west"}
        ])
    );
    let imports = t.admin(&["ls", "imports", "-o", "json"]).expect(0).json();
    assert_eq!(imports.as_array().unwrap().len(), 1, "one service from two clusters");
    assert_eq!(imports[0]["name"], "web");
    let clusters: Vec<&str> = imports[0]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster_id"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, vec!["east", "west"]);
    let table = t.admin(&["ls", "imports"]).expect(0).stdout;
    assert!(
        table.contains("llm        web   ClusterSetIP  http:80/TCP  east,west  2/2"),
        "{table}"
    );
}
