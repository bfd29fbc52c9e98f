//! `describe`: schema, counts by kind and state, indexes, TTL, stream, replicas.

use crate::support::{
    DAY, Fixture, MINUTE, cluster_record, expired_pool, export_record, live_pool, now_ms,
    withdrawn_pool,
};
use serde_json::json;

#[tokio::test]
async fn describe_counts_items_and_reports_the_table() {
    let Some(t) = Fixture::new("describe").await else { return };
    t.put(&[
        live_pool("a"),
        live_pool("b"),
        expired_pool("c", 5 * MINUTE),
        withdrawn_pool("d", DAY),
        cluster_record("east", now_ms() + 10 * MINUTE),
        export_record("east", "web", 80, 1_700_000_000),
        export_record("gone", "web", 80, 1_700_000_000),
    ])
    .await;

    let json = t.admin(&["describe", "-o", "json"]).expect(0).json();
    assert_eq!(json["table"], t.table.as_str());
    assert_eq!(json["schema_version"], mcs_store::dynamo::SCHEMA_VERSION);
    assert_eq!(json["binary_schema_version"], mcs_store::dynamo::SCHEMA_VERSION);
    assert_eq!(json["status"], "ACTIVE");
    assert_eq!(
        json["indexes"],
        json!({"changes": "ACTIVE", "lease_ends": "ACTIVE", "change_stamps": "ACTIVE"})
    );
    assert_eq!(json["ttl_status"], "ENABLED");
    assert_eq!(json["ttl_attribute"], "ttl");
    assert_eq!(json["stream_enabled"], true);
    assert_eq!(json["stream_view_type"], "NEW_AND_OLD_IMAGES");
    assert_eq!(json["replicas"], json!([]));
    assert_eq!(json["unreadable"], 0);
    assert_eq!(json["origins"], json!({"us-east-1": 7}));
    assert_eq!(
        json["items"],
        json!([
            {"kind": "cluster", "live": 1, "expired": 0, "tombstone": 0},
            {"kind": "export", "live": 1, "expired": 1, "tombstone": 0},
            {"kind": "pool", "live": 2, "expired": 1, "tombstone": 1},
            {"kind": "router", "live": 0, "expired": 0, "tombstone": 0},
        ])
    );

    let table = t.admin(&["describe"]).expect(0).stdout;
    let schema =
        format!("schema version    {0} (this binary: {0})", mcs_store::dynamo::SCHEMA_VERSION);
    for line in [
        schema.as_str(),
        "indexes           change_stamps ACTIVE, changes ACTIVE, lease_ends ACTIVE",
        "ttl               ENABLED on ttl",
        "stream            NEW_AND_OLD_IMAGES",
        "replicas          none (not a global table)",
        "KIND     LIVE  EXPIRED  TOMBSTONE",
        "pool     2     1        1",
    ] {
        assert!(table.lines().any(|l| l == line), "{line:?} in\n{table}");
    }
    let yaml = t.admin(&["describe", "-o", "yaml"]).expect(0).stdout;
    assert!(yaml.contains("indexes:\n  change_stamps: ACTIVE\n"), "{yaml}");
}
