//! `migrate`: creates, then has nothing to do; a newer table is left alone.

use crate::support::Fixture;
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_store::dynamo::SCHEMA_VERSION;

#[tokio::test]
async fn migrate_twice_then_nothing_to_do() {
    let Some(t) = Fixture::unmigrated("migrate").await else { return };
    let first = t.admin(&["migrate"]).expect(0);
    assert!(
        first.stdout.contains(&format!("schema version none -> {SCHEMA_VERSION}")),
        "{}",
        first.stdout
    );
    assert!(first.stdout.contains("created table; enabled ttl on ttl"), "{}", first.stdout);

    let second = t.admin(&["migrate"]).expect(0);
    assert_eq!(
        second.stdout,
        format!("table {} is at schema version {SCHEMA_VERSION}: nothing to do\n", t.table)
    );
    let json = t.admin(&["migrate", "-o", "json"]).expect(0).json();
    assert_eq!(json["up_to_date"], true);
    assert_eq!(json["from_version"], SCHEMA_VERSION);
    assert_eq!(json["applied"], serde_json::json!([]));
    assert_eq!(t.store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
}

#[tokio::test]
async fn a_newer_table_is_reported_and_left_alone() {
    let Some(t) = Fixture::new("newer").await else { return };
    let newer = SCHEMA_VERSION + 7;
    t.store
        .client()
        .put_item()
        .table_name(&t.table)
        .item("pk", AttributeValue::S("META".into()))
        .item("sk", AttributeValue::S("SCHEMA".into()))
        .item("version", AttributeValue::N(newer.to_string()))
        .send()
        .await
        .unwrap();
    let run = t.admin(&["migrate"]).expect(1);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.starts_with(&format!("mcs-admin: table {} (us-east-1) is at schema version {newer}, newer than this mcs-admin knows ({SCHEMA_VERSION}): left alone", t.table)),
        "{}",
        run.stderr
    );
    assert_eq!(t.store.schema_version().await.unwrap(), Some(newer), "left alone");
    // Reading commands refuse it too: they could misread it.
    let ls = t.admin(&["ls", "pools"]).expect(1);
    assert!(ls.stderr.contains("newer than this mcs-admin knows"), "{}", ls.stderr);
}
