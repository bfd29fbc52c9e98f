//! Migrations against moto_server: creating, repairing drift, refusing a
//! newer schema.

use super::*;
use aws_sdk_dynamodb::types::{StreamViewType, TimeToLiveStatus};
use mcs_store::dynamo::SCHEMA_VERSION;

#[tokio::test]
async fn migrate_creates_once_then_has_nothing_to_do() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let sdk = sdk_config(Some(&endpoint)).await;
    let client = Client::new(&sdk);
    let table = unique_table("migrate");

    let first = migrate(&client, &table).await.unwrap();
    assert_eq!(first.from_version, None);
    assert_eq!(first.to_version, SCHEMA_VERSION);
    assert_eq!(first.applied.len(), 5);
    assert_eq!(
        first.applied[0].actions,
        vec!["created table".to_owned(), "enabled ttl on ttl".to_owned()]
    );
    assert_eq!(first.applied[1].actions, vec!["created index lease_ends".to_owned()]);
    assert!(first.applied[2].actions.is_empty(), "0003 is a marker");
    assert_eq!(first.applied[3].actions, vec!["created index change_stamps".to_owned()]);
    assert!(first.applied[4].actions.is_empty(), "0005 is a marker");

    let second = migrate(&client, &table).await.unwrap();
    assert!(second.is_up_to_date(), "{second}");
    assert_eq!(second.from_version, Some(SCHEMA_VERSION));
    assert_eq!(second.to_version, SCHEMA_VERSION);

    let described = client.describe_table().table_name(&table).send().await.unwrap();
    let t = described.table().unwrap();
    assert_eq!(t.global_secondary_indexes()[0].index_name(), Some("changes"));
    assert_eq!(
        t.stream_specification().unwrap().stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    let ttl = client.describe_time_to_live().table_name(&table).send().await.unwrap();
    let ttl = ttl.time_to_live_description().unwrap();
    assert_eq!(ttl.attribute_name(), Some("ttl"));
    assert_eq!(ttl.time_to_live_status(), Some(&TimeToLiveStatus::Enabled));

    let store = DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(&table)).unwrap();
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
    assert_eq!(store.ensure_schema().await.unwrap(), SCHEMA_VERSION);

    // A table without its META item (made by hand, or a migrate cut short)
    // is brought up to date by steps that find their work done.
    client
        .delete_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("META".into()))
        .key("sk", AttributeValue::S("SCHEMA".into()))
        .send()
        .await
        .unwrap();
    assert!(store.ensure_schema().await.unwrap_err().to_string().contains("no schema version"));
    let repaired = migrate(&client, &table).await.unwrap();
    assert_eq!(repaired.from_version, None);
    assert_eq!(
        repaired.applied[0].actions,
        vec!["table already existed".to_owned(), "ttl already enabled on ttl".to_owned()]
    );
    assert_eq!(store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
}

/// A table at the current schema version made without the stream, the
/// `changes` index and TTL (by hand, or by another tool; moto cannot turn a
/// stream back on once it was on, so the drift is made at creation).
async fn drifted_table(name: &str) -> Option<DynamoStore> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType,
    };
    let endpoint = endpoint()?;
    let sdk = sdk_config(Some(&endpoint)).await;
    let client = Client::new(&sdk);
    let table = unique_table(name);
    let attribute = |name: &str, t| {
        AttributeDefinition::builder().attribute_name(name).attribute_type(t).build().unwrap()
    };
    let key = |name: &str, t| {
        KeySchemaElement::builder().attribute_name(name).key_type(t).build().unwrap()
    };
    client
        .create_table()
        .table_name(&table)
        .attribute_definitions(attribute("pk", ScalarAttributeType::S))
        .attribute_definitions(attribute("sk", ScalarAttributeType::S))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .unwrap();
    client
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("META".into()))
        .item("sk", AttributeValue::S("SCHEMA".into()))
        .item("version", n(u64::from(SCHEMA_VERSION)))
        .send()
        .await
        .unwrap();
    Some(DynamoStore::from_sdk_config(&sdk, quick(DynamoConfig::new(table))).unwrap())
}

#[tokio::test]
async fn migrate_repairs_ttl_stream_and_index_drift() {
    let Some(store) = drifted_table("drift").await else {
        return;
    };
    let client = store.client();
    let table = store.table();
    assert_eq!(store.ensure_schema().await.unwrap(), SCHEMA_VERSION, "the version is current");
    let repaired = store.migrate().await.unwrap();
    assert!(repaired.applied.is_empty(), "{repaired}");
    assert!(!repaired.is_up_to_date());
    assert_eq!(
        repaired.repaired,
        vec![
            "enabled stream with NEW_AND_OLD_IMAGES".to_owned(),
            "creating index changes (DynamoDB backfills it; doctor reports it ACTIVE when done)"
                .to_owned(),
            "creating index lease_ends (DynamoDB backfills it; doctor reports it ACTIVE when done)"
                .to_owned(),
            "creating index change_stamps (DynamoDB backfills it; doctor reports it ACTIVE when \
             done)"
                .to_owned(),
            "enabled ttl on ttl".to_owned(),
        ]
    );
    let described = client.describe_table().table_name(table).send().await.unwrap();
    let t = described.table().unwrap();
    assert_eq!(t.global_secondary_indexes()[0].index_name(), Some("changes"));
    assert_eq!(
        t.stream_specification().unwrap().stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    store.read_changed_since(0).await.unwrap();
    store.read_lease_ends(0, u64::MAX).await.unwrap();
    store.read_change_stamps(0, u64::MAX).await.unwrap();
    let again = store.migrate().await.unwrap();
    assert!(again.is_up_to_date(), "{again}");
}

#[tokio::test]
async fn a_table_at_a_newer_schema_is_left_alone() {
    let Some(store) = new_store("newer").await else {
        return;
    };
    let newer = SCHEMA_VERSION + 98;
    put_raw(
        &store,
        HashMap::from([
            ("pk".to_owned(), AttributeValue::S("META".into())),
            ("sk".to_owned(), AttributeValue::S("SCHEMA".into())),
            ("version".to_owned(), n(u64::from(newer))),
        ]),
    )
    .await;
    let refused = migrate(store.client(), store.table()).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::SchemaTooNew { found, known } if found == newer && known == SCHEMA_VERSION),
        "{refused:?}"
    );
    assert_eq!(store.schema_version().await.unwrap(), Some(newer), "left alone");
    assert!(matches!(store.ensure_schema().await.unwrap_err(), StoreError::SchemaTooNew { .. }));
}
