//! `doctor`: exit 0 on a healthy table; 1 naming what is wrong.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, export_record, live_pool, now_ms, pool_record,
};
use mcs_core::{Body, Key, Record, Version};
use std::time::Duration;

/// Doctor's checks of a table at this binary's version, in order.
const CHECKS: [&str; 12] = [
    "schema",
    "ttl",
    "stream",
    "changes index",
    "lease_ends index",
    "change_stamps index",
    "unreadable items",
    "orphaned exports",
    "conflicts",
    "clock skew",
    "ttl backlog",
    "foreign garbage",
];

#[tokio::test]
async fn a_healthy_table_exits_0() {
    let Some(t) = Fixture::new("doctor-ok").await else { return };
    t.put(&[
        live_pool("alpha"),
        cluster_record("east", now_ms() + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
    ])
    .await;
    let run = t.admin(&["doctor"]).expect(0);
    assert!(run.stdout.ends_with("\nhealthy\n"), "{}", run.stdout);
    assert!(!run.stdout.contains("problem"), "{}", run.stdout);
    let json = t.admin(&["doctor", "-o", "json"]).expect(0).json();
    assert_eq!(json["healthy"], true);
    let names: Vec<&str> =
        json["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, CHECKS);
}

/// Drops the index `name` of the table of `t`, as an operator might.
async fn drop_index(t: &Fixture, name: &str) {
    use aws_sdk_dynamodb::types::{DeleteGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate};
    t.store
        .client()
        .update_table()
        .table_name(&t.table)
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder()
                .delete(
                    DeleteGlobalSecondaryIndexAction::builder().index_name(name).build().unwrap(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// The problems of a `doctor -o json`, (name, detail) each.
fn problems_of(json: &serde_json::Value) -> Vec<(String, String)> {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "problem")
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["detail"].as_str().unwrap().to_owned()))
        .collect()
}

/// Doctor's advice for a table of the current version that drifted (TTL
/// off, the `changes` and `change_stamps` indexes dropped) is `run
/// mcs-admin migrate`, and following it mends the table. (moto cannot turn
/// a stream back on once it was on; the stream's repair is tested in
/// mcs-store's tests/dynamo.rs.)
#[tokio::test]
async fn doctor_advises_migrate_and_migrate_repairs_drift() {
    use aws_sdk_dynamodb::types::TimeToLiveSpecification;
    let Some(t) = Fixture::new("doctor-drift").await else { return };
    let client = t.store.client();
    client
        .update_time_to_live()
        .table_name(&t.table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name("ttl")
                .enabled(false)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    drop_index(&t, "changes").await;
    drop_index(&t, "change_stamps").await;
    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    let problems = problems_of(&json);
    let names: Vec<&str> = problems.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["ttl", "changes index", "change_stamps index"], "{problems:?}");
    for (name, detail) in &problems {
        assert!(detail.ends_with("run mcs-admin migrate"), "{name}: {detail}");
    }
    let described = t.admin(&["describe", "-o", "json"]).expect(0).json();
    assert_eq!(
        described["indexes"],
        serde_json::json!({"changes": "missing", "lease_ends": "ACTIVE", "change_stamps": "missing"})
    );

    let run = t.admin(&["migrate"]).expect(0);
    assert_eq!(
        run.stdout,
        format!(
            "table {} is at schema version {}: repaired what had drifted from it\n  \
             repaired: creating index changes (DynamoDB backfills it; doctor reports it ACTIVE \
             when done)\n  repaired: creating index change_stamps (DynamoDB backfills it; doctor \
             reports it ACTIVE when done)\n  repaired: enabled ttl on ttl\n",
            t.table,
            mcs_store::dynamo::SCHEMA_VERSION
        )
    );
    t.admin(&["doctor"]).expect(0);
    let again = t.admin(&["migrate", "-o", "json"]).expect(0).json();
    assert_eq!(again["up_to_date"], true);
    assert_eq!(again["repaired"], serde_json::json!([]));
}

/// A table mid-rollout at 2 needs `changes` and `lease_ends`, not yet
/// `change_stamps` (migration 0004 declares it); one without `lease_ends`
/// is named, and `migrate --to 2` creates it again.
#[tokio::test]
async fn a_table_at_2_needs_the_indexes_declared_up_to_2() {
    let Some(t) = Fixture::unmigrated("doctor-at-2").await else { return };
    t.admin(&["migrate", "--create", "--to", "2"]).expect(0);
    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    let names: Vec<&str> =
        json["checks"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names[3..5], ["changes index", "lease_ends index"]);
    assert!(!names.contains(&"change_stamps index"), "{names:?}");
    let problems = problems_of(&json);
    assert_eq!(problems.len(), 1, "only the schema, in compatibility mode: {problems:?}");
    assert_eq!(problems[0].0, "schema");
    let described = t.admin(&["describe"]).expect(0).stdout;
    assert!(
        described.lines().any(|l| l == "indexes           changes ACTIVE, lease_ends ACTIVE"),
        "{described}"
    );

    drop_index(&t, "lease_ends").await;
    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    assert_eq!(
        problems_of(&json)[1..],
        [("lease_ends index".to_owned(), "missing: run mcs-admin migrate".to_owned())]
    );
    let described = t.admin(&["describe"]).expect(0).stdout;
    assert!(
        described.lines().any(|l| l == "indexes           changes ACTIVE, lease_ends missing"),
        "{described}"
    );
    t.admin(&["migrate", "--to", "2"]).expect(0);
    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    assert_eq!(problems_of(&json).len(), 1, "{json}");
}

#[tokio::test]
async fn an_export_without_a_live_cluster_is_named() {
    let Some(t) = Fixture::new("doctor-orphan").await else { return };
    t.put(&[
        cluster_record("east", now_ms() + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        cluster_record("west", now_ms() - 5 * MINUTE),
        export_record("west", "api", 80, 1_700_000_000),
        export_record("nowhere", "db", 5432, 1_700_000_000),
    ])
    .await;
    let run = t.admin(&["doctor"]).expect(1);
    assert!(
        run.stdout.contains(
            "orphaned exports     problem  2 exports whose cluster holds no live lease: "
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "\norphaned exports:\n  export/nowhere/llm/db: no cluster record; mcs-admin gc collects it in 47h\n  export/west/llm/api: cluster lease ended 5m ago; mcs-admin gc collects it in 47h\n"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.ends_with("problems found\n"), "{}", run.stdout);
    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    assert_eq!(json["healthy"], false);
    // Issue 14, defect 9: table and region were one string.
    assert_eq!(json["table"], t.table.as_str());
    assert_eq!(json["region"], "us-east-1");
    assert_eq!(json["endpoint"], t.endpoint.as_str());
    let problems: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "problem")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(problems, vec!["orphaned exports"]);
}

/// Issue 14, defect 5: a withdrawn cluster left its exports, which no TTL
/// and no gc collected, and doctor failed for good.
#[tokio::test]
async fn gc_collects_what_a_withdrawn_cluster_left_and_doctor_recovers() {
    let Some(t) = Fixture::new("doctor-left").await else { return };
    let then = now_ms() - 3 * DAY;
    let withdrawn = Record {
        terms: None,
        key: Key::Cluster { cluster_id: mcs_core::fixtures::label("gone") },
        version: Version::new(then << 16, "reg-test"),
        owner: Some("inc-gone".into()),
        lease_until_ms: None,
        changed_at_ms: then,
        body: Body::Tombstone,
    };
    let mut export = export_record("gone", "web", 80, 1_700_000_000);
    export.changed_at_ms = then - DAY;
    t.put(&[export, withdrawn]).await;
    let grace = ["--ttl-grace-secs", "3600"];
    let run = t.admin(&[&["doctor"][..], &grace].concat()).expect(1);
    assert!(
        run.stdout.contains(
            "export/gone/llm/web: cluster withdrawn 3d ago; past the retention 24h ago: \
             mcs-admin gc collects it"
        ),
        "{}",
        run.stdout
    );
    let gc = t.admin(&["gc", "-o", "json"]).expect(0).json();
    assert_eq!(gc["deleted"], 2, "the export and the cluster's tombstone: {gc}");
    let run = t.admin(&[&["doctor"][..], &grace].concat()).expect(0);
    assert!(run.stdout.ends_with("healthy\n"), "{}", run.stdout);
}

#[tokio::test]
async fn conflicts_skew_and_ttl_backlog_are_named() {
    let Some(t) = Fixture::new("doctor-more").await else { return };
    let now = now_ms();
    t.put(&[
        cluster_record("east", now + 10 * MINUTE),
        cluster_record("west", now + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        export_record("west", "web", 8080, 1_700_000_100),
        // Written by a registrar whose clock runs ten minutes ahead.
        pool_record("ahead", 7, now + 20 * MINUTE, now + 10 * MINUTE),
    ])
    .await;
    // Expired ten days ago and kept no retention: its ttl passed long ago,
    // and nothing deleted it (moto, like DynamoDB Local, never expires items).
    let stale = pool_record("stale", 5, now - 10 * DAY, now - 10 * DAY - MINUTE);
    t.with_retention(Duration::ZERO).await.put(&[stale]).await;

    let json = t.admin(&["doctor", "-o", "json"]).expect(1).json();
    let check = |name: &str| {
        json["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone()
    };
    let conflicts = check("conflicts");
    assert_eq!(conflicts["status"], "problem");
    let named: Vec<&str> =
        conflicts["items"].as_array().unwrap().iter().map(|i| i.as_str().unwrap()).collect();
    assert_eq!(named.len(), 2, "{named:?}");
    assert!(named[0].starts_with("export/east/llm/web: PortConflict"), "{named:?}");
    assert!(named[1].starts_with("export/west/llm/web: PortConflict"), "{named:?}");
    let skew = check("clock skew");
    assert_eq!(skew["status"], "problem");
    assert_eq!(skew["items"].as_array().unwrap().len(), 1, "{skew}");
    let ahead = skew["items"][0].as_str().unwrap();
    assert!(ahead.contains(&crate::support::pool_id("ahead")), "{ahead}");
    assert!(
        ahead.contains("written by reg-test 9m ahead of this clock")
            || ahead.contains("written by reg-test 10m ahead of this clock"),
        "{ahead}"
    );
    let backlog = check("ttl backlog");
    assert_eq!(backlog["status"], "problem");
    let named = backlog["items"][0].as_str().unwrap();
    assert!(
        named.starts_with(&format!(
            "pool/{} (item of us-east-1): ttl passed 10d ago",
            crate::support::pool_id("stale")
        )),
        "{named}"
    );
    for ok in &CHECKS[..8] {
        assert_eq!(check(ok)["status"], "ok", "{ok}");
    }
}
