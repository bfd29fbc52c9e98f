use super::*;

#[test]
fn embedded_migrations_parse_and_end_at_schema_version() {
    let all = migrations().unwrap();
    assert_eq!(all.last().unwrap().version, SCHEMA_VERSION);
    let Step::CreateTable { global_secondary_indexes, stream_specification, billing_mode, .. } =
        &all[0].steps[0]
    else {
        panic!("the first step creates the table");
    };
    assert_eq!(global_secondary_indexes[0].index_name(), item::CHANGES_INDEX);
    assert_eq!(*billing_mode, BillingMode::PayPerRequest);
    assert_eq!(
        stream_specification.as_ref().unwrap().stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    assert!(
        matches!(&all[0].steps[1], Step::UpdateTimeToLive(t) if t.attribute_name() == item::TTL)
    );
    // 0002: the lease_ends index, additive (binaries of 0001 never query it).
    assert!(all[1].additive);
    let Step::CreateIndexes { indexes, attribute_definitions } = &all[1].steps[0] else {
        panic!("0002 creates an index");
    };
    assert_eq!(indexes[0].index_name(), item::LEASE_ENDS_INDEX);
    let keys: Vec<&str> =
        indexes[0].key_schema().iter().map(KeySchemaElement::attribute_name).collect();
    assert_eq!(keys, [item::SHARD, item::LEASE_UNTIL_MS]);
    let projected = indexes[0].projection().unwrap().non_key_attributes();
    assert_eq!(projected, [item::GEN, item::WRITER]);
    assert!(attribute_definitions.iter().any(|a| a.attribute_name() == item::LEASE_UNTIL_MS));
}

/// The embedded migrations, then synthetic ones: `(additive, ttl on?)`
/// each, an UpdateTimeToLive step on `ttl`.
fn with_synthetic(extra: &[bool]) -> Vec<Migration> {
    let texts: Vec<(String, String)> = extra
        .iter()
        .enumerate()
        .map(|(i, additive)| {
            let version = FILES.len() + 1 + i;
            let text = format!(
                r#"{{"version":{version},"description":"synthetic","additive":{additive},
                "steps":[{{"UpdateTimeToLive":{{"TimeToLiveSpecification":
                {{"AttributeName":"ttl","Enabled":true}}}}}}]}}"#
            );
            (format!("{version:04}_synthetic.json"), text)
        })
        .collect();
    let mut files: Vec<(&str, &str)> = FILES.to_vec();
    files.extend(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    parse(&files).unwrap()
}

fn target() -> Target {
    Target::new("t", "us-east-1", Some("http://localhost:8000"))
}

#[test]
fn every_migration_declares_whether_it_is_additive() {
    let missing = r#"{"version":1,"description":"x","steps":[]}"#;
    let err = serde_json::from_str::<file::Migration>(missing).unwrap_err();
    assert!(err.to_string().contains("additive"), "{err}");
    assert!(!migrations().unwrap()[0].additive, "creating the table is not additive");
}

#[test]
fn a_binary_accepts_a_table_one_additive_migration_ahead() {
    // N = SCHEMA_VERSION; N+1 additive, N+2 not, N+3 additive.
    let all = with_synthetic(&[true, false, true]);
    let n = SCHEMA_VERSION;
    assert_eq!(compatible_from(&all, n + 1), n, "additive: N binaries may use it");
    assert_eq!(compatible_from(&all, n + 2), n + 2, "not additive");
    assert_eq!(compatible_from(&all, n + 3), n + 2, "one step back, never further");
    assert_eq!(compatible_from(&all, 1), 1, "creating the table");
    let stamp =
        |version| Some(SchemaStamp { version, compatible_from: compatible_from(&all, version) });
    // What a binary of version N says of each table.
    assert_eq!(check_schema(stamp(n), n, &target()).unwrap(), n);
    assert_eq!(check_schema(stamp(n + 1), n, &target()).unwrap(), n + 1);
    for ahead in [n + 2, n + 3] {
        let refused = check_schema(stamp(ahead), n, &target()).unwrap_err();
        assert!(
            matches!(refused, StoreError::SchemaTooNew { found, known } if found == ahead && known == n),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("upgrade this binary"), "{refused}");
    }
    // A binary of N+2 on a table at N+3 (additive over N+2): accepted.
    assert_eq!(check_schema(stamp(n + 3), n + 2, &target()).unwrap(), n + 3);
    // Behind, or never migrated: run migrate, naming where.
    let behind = check_schema(stamp(n), n + 1, &target()).unwrap_err().to_string();
    assert!(behind.contains("table t in us-east-1 at http://localhost:8000"), "{behind}");
    assert!(behind.contains("run mcs-admin migrate"), "{behind}");
    let none = check_schema(None, n, &target()).unwrap_err().to_string();
    assert!(none.contains("no schema version"), "{none}");
    // A stamp from before compatible_from existed: its own version only.
    let old = Some(SchemaStamp { version: n + 1, compatible_from: n + 1 });
    assert!(matches!(check_schema(old, n, &target()), Err(StoreError::SchemaTooNew { .. })));
}

#[test]
fn the_declared_state_is_what_the_migrations_leave() {
    let declared = Declared::of(&migrations().unwrap());
    let names: Vec<&str> = declared.indexes.iter().map(GlobalSecondaryIndex::index_name).collect();
    assert_eq!(names, [item::CHANGES_INDEX, item::LEASE_ENDS_INDEX]);
    let attributes: Vec<&str> =
        declared.attribute_definitions.iter().map(AttributeDefinition::attribute_name).collect();
    assert_eq!(attributes, ["pk", "sk", "shard", "changed_at_ms", "lease_until_ms"]);
    assert_eq!(
        declared.stream.as_ref().unwrap().stream_view_type(),
        Some(&StreamViewType::NewAndOldImages)
    );
    assert_eq!(declared.ttl.as_ref().unwrap().attribute_name(), item::TTL);
    assert!(declared.attribute_definitions.iter().any(|a| a.attribute_name() == "shard"));
}

/// Against moto (skipped without one, failing where required): a
/// synthetic additive migration N+1 applied by a binary that knows it
/// leaves a table that a binary of N still accepts.
#[tokio::test]
async fn an_additive_migration_leaves_the_table_usable_by_the_version_before() {
    use mcs_testkit::dynamo;
    let Some(endpoint) = crate::testsuite::dynamodb_endpoint() else { return };
    let client = dynamo::client(&endpoint, dynamo::REGION);
    let table = dynamo::unique_table("unit-additive");
    let target = Target::new(&table, dynamo::REGION, Some(&endpoint));
    let n = SCHEMA_VERSION;
    run(&client, &target, &migrations().unwrap()).await.unwrap();
    let next = run(&client, &target, &with_synthetic(&[true])).await.unwrap();
    assert_eq!(next.to_version, n + 1);
    assert_eq!(next.applied[0].actions, vec!["ttl already enabled on ttl".to_owned()]);
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: n + 1, compatible_from: n }));
    assert_eq!(check_schema(stamp, n, &target).unwrap(), n + 1, "N accepts N+1");
    // The binary of N leaves it alone (it cannot migrate what it does
    // not know), and a non-additive N+2 shuts N out.
    let old = run(&client, &target, &migrations().unwrap()).await.unwrap_err();
    assert!(matches!(old, StoreError::SchemaTooNew { .. }), "{old:?}");
    run(&client, &target, &with_synthetic(&[true, false])).await.unwrap();
    let stamp = read_schema(&client, &target).await.unwrap();
    for old in [n, n + 1] {
        let refused = check_schema(stamp, old, &target);
        assert!(matches!(refused, Err(StoreError::SchemaTooNew { .. })), "{old}: {refused:?}");
    }
    assert_eq!(check_schema(stamp, n + 2, &target).unwrap(), n + 2);
}

/// Against moto: a table of version 1 holding items written by a binary
/// of version 1 is brought to version 2 by `migrate`; the new index holds
/// the old items (backfilled), a binary of version 1 still accepts the
/// table and its writes (renewals) keep the index current, and a second
/// run has nothing to do (docs/operations.md, N-1/N).
#[tokio::test]
async fn migration_0002_upgrades_a_table_in_use_by_the_version_before() {
    use crate::{DynamoConfig, DynamoStore, PutOutcome, Store};
    use mcs_core::fixtures::mk_pool;
    use mcs_testkit::dynamo;
    let Some(endpoint) = crate::testsuite::dynamodb_endpoint() else { return };
    let client = dynamo::client(&endpoint, dynamo::REGION);
    let table = dynamo::unique_table("unit-0002");
    let target = Target::new(&table, dynamo::REGION, Some(&endpoint));
    let all = migrations().unwrap();
    let v1 = run(&client, &target, &all[..1]).await.unwrap();
    assert_eq!(v1.to_version, 1);
    let sdk = dynamo::sdk_config(Some(&endpoint), dynamo::REGION).await;
    let store = DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(&table)).unwrap();
    let old = mk_pool("old", 5, "w", Some("w"), Some(50_000));
    assert_eq!(store.put(&old, 1_000).await.unwrap(), PutOutcome::Applied);

    let up = run(&client, &target, &all).await.unwrap();
    assert_eq!(up.from_version, Some(1));
    assert_eq!(up.to_version, 2);
    assert_eq!(up.applied.len(), 1, "{up}");
    assert_eq!(up.applied[0].actions, vec!["created index lease_ends".to_owned()]);
    assert!(up.repaired.is_empty(), "{up}");
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: 2, compatible_from: 1 }));
    assert_eq!(check_schema(stamp, 1, &target).unwrap(), 2, "a binary of 1 serves it");
    assert_eq!(check_schema(stamp, 2, &target).unwrap(), 2);

    let ends = store.read_lease_ends(0, u64::MAX).await.unwrap();
    assert_eq!(ends.len(), 1, "the item written before the index was backfilled");
    assert_eq!((ends[0].key.clone(), ends[0].lease_until_ms), (old.key.clone(), 50_000));
    // What a binary of 1 writes (a renewal) keeps the index current.
    let renewed = mk_pool("old", 5, "w", Some("w"), Some(90_000));
    assert_eq!(store.put(&renewed, 2_000).await.unwrap(), PutOutcome::Applied);
    assert!(store.read_lease_ends(0, 60_000).await.unwrap().is_empty());
    assert_eq!(store.read_lease_ends(60_000, 90_000).await.unwrap().len(), 1);
    assert_eq!(store.read_changed_since(0).await.unwrap(), vec![renewed]);

    let again = run(&client, &target, &all).await.unwrap();
    assert!(again.is_up_to_date(), "{again}");
}

#[test]
fn every_migration_file_is_embedded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    on_disk.sort();
    let embedded: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
    assert_eq!(on_disk, embedded);
}

#[test]
fn unknown_fields_and_values_are_refused() {
    let typo = r#"{"version":1,"description":"x","additive":true,"steps":[{"UpdateTimeToLive":
        {"TimeToLiveSpecification":{"AttributeName":"ttl","Enabled":true,"Extra":1}}}]}"#;
    assert!(serde_json::from_str::<file::Migration>(typo).is_err());
    let bad_type = r#"{"version":1,"description":"x","additive":false,"steps":[{"CreateTable":
        {"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"Q"}],
         "KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}}]}"#;
    let parsed: file::Migration = serde_json::from_str(bad_type).unwrap();
    let err = parsed
        .steps
        .into_iter()
        .map(file::Step::into_sdk)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err();
    assert!(err.contains("AttributeType"), "{err}");
}
