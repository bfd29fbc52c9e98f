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
    // 0003: a marker (no step: renewals keep changed_at_ms), additive so
    // that binaries of 2 go on and binaries of 1 are refused.
    assert!(all[2].steps.is_empty());
    assert!(all[2].additive);
    assert_eq!(compatible_from(&all, 3), 2);
    // 0004: the change_stamps index, keys only, sorted by the change stamp,
    // additive (binaries of 3 never query it).
    assert!(all[3].additive);
    let Step::CreateIndexes { indexes, .. } = &all[3].steps[0] else {
        panic!("0004 creates an index");
    };
    assert_eq!(indexes[0].index_name(), item::CHANGE_STAMPS_INDEX);
    let keys: Vec<&str> =
        indexes[0].key_schema().iter().map(KeySchemaElement::attribute_name).collect();
    assert_eq!(keys, [item::SHARD, item::CHANGE_STAMP]);
    assert_eq!(indexes[0].projection().unwrap().projection_type(), Some(&ProjectionType::KeysOnly));
    // 0005: a marker (readers reach back by stamps), recorded once
    // change_stamps is ACTIVE; binaries of 4 go on, of 3 are refused.
    assert!(all[4].steps.is_empty());
    assert!(all[4].additive);
    assert_eq!(compatible_from(&all, 5), 4);
    assert_eq!(compatible_from(&all, 4), 3);
}

#[test]
fn a_marker_migration_has_no_steps() {
    let marker = r#"{"version":1,"description":"x","additive":true,"steps":[]}"#;
    let parsed = parse(&[("0001_marker.json", marker)]).unwrap();
    assert!(parsed[0].steps.is_empty());
    let missing = r#"{"version":1,"description":"x","additive":true}"#;
    assert!(parse(&[("0001_marker.json", missing)]).is_err(), "steps stays required");
}

#[test]
fn this_binary_runs_on_tables_from_2_and_tells_1_to_migrate() {
    let stamp = |version, compatible_from| Some(SchemaStamp { version, compatible_from });
    let runs = Runs::THIS_BINARY;
    assert_eq!((runs.oldest, runs.known), (2, 5));
    assert_eq!(check_schema(stamp(2, 1), runs, &target()).unwrap(), 2, "compatibility mode");
    assert_eq!(check_schema(stamp(3, 2), runs, &target()).unwrap(), 3);
    assert_eq!(check_schema(stamp(4, 3), runs, &target()).unwrap(), 4);
    assert_eq!(check_schema(stamp(5, 4), runs, &target()).unwrap(), 5);
    assert_eq!(check_schema(stamp(6, 5), runs, &target()).unwrap(), 6, "N-1/N");
    let one = check_schema(stamp(1, 1), runs, &target()).unwrap_err();
    assert!(matches!(one, StoreError::Schema(_)), "{one:?}");
    let one = one.to_string();
    assert!(one.contains("schema version 1, this binary needs 2 to 5"), "{one}");
    assert!(one.contains("run mcs-admin migrate"), "{one}");
    // A binary of schema 1 (today's releases) is refused by a table at 3.
    let refused = check_schema(stamp(3, 2), Runs::only(1), &target()).unwrap_err();
    assert!(matches!(refused, StoreError::SchemaTooNew { found: 3, known: 1 }), "{refused:?}");
    // A binary of schema 3 (the previous release) runs on a table at 4
    // (change_stamps built) and is refused at 5.
    let release_3 = Runs { oldest: 2, known: 3 };
    assert_eq!(check_schema(stamp(4, 3), release_3, &target()).unwrap(), 4);
    let refused = check_schema(stamp(5, 4), release_3, &target()).unwrap_err();
    assert!(matches!(refused, StoreError::SchemaTooNew { found: 5, known: 3 }), "{refused:?}");
}

#[test]
fn only_active_indexes_done_backfilling_are_ready() {
    use aws_sdk_dynamodb::types::{GlobalSecondaryIndexDescription, IndexStatus};
    let index = |name: &str, status: IndexStatus, backfilling: Option<bool>| {
        GlobalSecondaryIndexDescription::builder()
            .index_name(name)
            .index_status(status)
            .set_backfilling(backfilling)
            .build()
    };
    let table = |indexes: Vec<GlobalSecondaryIndexDescription>| {
        TableDescription::builder().set_global_secondary_indexes(Some(indexes)).build()
    };
    let names = [item::CHANGES_INDEX, item::LEASE_ENDS_INDEX];
    let ready = table(vec![
        index("changes", IndexStatus::Active, None),
        index("lease_ends", IndexStatus::Active, Some(false)),
    ]);
    assert!(pending_indexes(&ready, &names).is_empty());
    let building = table(vec![
        index("changes", IndexStatus::Active, None),
        index("lease_ends", IndexStatus::Creating, Some(true)),
    ]);
    assert_eq!(
        pending_indexes(&building, &names),
        vec![("lease_ends".to_owned(), "CREATING (backfilling)".to_owned())]
    );
    let creating = table(vec![
        index("changes", IndexStatus::Active, None),
        index("lease_ends", IndexStatus::Creating, None),
    ]);
    assert_eq!(pending_indexes(&creating, &names)[0].1, "CREATING");
    let missing = table(vec![index("changes", IndexStatus::Active, None)]);
    assert_eq!(
        pending_indexes(&missing, &names),
        vec![("lease_ends".to_owned(), "missing".to_owned())]
    );
}

#[test]
fn a_table_needs_the_indexes_its_migrations_declared() {
    let up_to = |v| indexes_declared_up_to(v).unwrap();
    assert_eq!(up_to(0), Vec::<String>::new());
    assert_eq!(up_to(1), [item::CHANGES_INDEX]);
    assert_eq!(up_to(2), [item::CHANGES_INDEX, item::LEASE_ENDS_INDEX]);
    assert_eq!(up_to(3), up_to(2), "0003 declares no index");
    let all = [item::CHANGES_INDEX, item::LEASE_ENDS_INDEX, item::CHANGE_STAMPS_INDEX];
    assert_eq!(up_to(4), all);
    assert_eq!(up_to(SCHEMA_VERSION), all);
    assert_eq!(up_to(SCHEMA_VERSION + 1), all, "a newer table: every index this binary knows");
}

#[test]
fn an_index_state_says_its_status_and_whether_it_backfills() {
    use aws_sdk_dynamodb::types::IndexStatus;
    let index = |status: Option<IndexStatus>, backfilling: Option<bool>| {
        index_state(
            &GlobalSecondaryIndexDescription::builder()
                .index_name("x")
                .set_index_status(status)
                .set_backfilling(backfilling)
                .build(),
        )
    };
    assert_eq!(index(Some(IndexStatus::Active), None), INDEX_ACTIVE);
    assert_eq!(index(Some(IndexStatus::Active), Some(false)), INDEX_ACTIVE);
    assert_eq!(index(Some(IndexStatus::Creating), Some(true)), "CREATING (backfilling)");
    assert_eq!(index(Some(IndexStatus::Deleting), None), "DELETING");
    assert_eq!(index(None, None), "of unknown status");
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
    assert_eq!(check_schema(stamp(n), Runs::only(n), &target()).unwrap(), n);
    assert_eq!(check_schema(stamp(n + 1), Runs::only(n), &target()).unwrap(), n + 1);
    for ahead in [n + 2, n + 3] {
        let refused = check_schema(stamp(ahead), Runs::only(n), &target()).unwrap_err();
        assert!(
            matches!(refused, StoreError::SchemaTooNew { found, known } if found == ahead && known == n),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("upgrade this binary"), "{refused}");
    }
    // A binary of N+2 on a table at N+3 (additive over N+2): accepted.
    assert_eq!(check_schema(stamp(n + 3), Runs::only(n + 2), &target()).unwrap(), n + 3);
    // Behind, or never migrated: run migrate, naming where.
    let behind = check_schema(stamp(n), Runs::only(n + 1), &target()).unwrap_err().to_string();
    assert!(behind.contains("table t in us-east-1 at http://localhost:8000"), "{behind}");
    assert!(behind.contains("run mcs-admin migrate"), "{behind}");
    let none = check_schema(None, Runs::only(n), &target()).unwrap_err().to_string();
    assert!(none.contains("no schema version"), "{none}");
    // A stamp from before compatible_from existed: its own version only.
    let old = Some(SchemaStamp { version: n + 1, compatible_from: n + 1 });
    assert!(matches!(
        check_schema(old, Runs::only(n), &target()),
        Err(StoreError::SchemaTooNew { .. })
    ));
}

#[test]
fn the_declared_state_is_what_the_migrations_leave() {
    let declared = Declared::of(&migrations().unwrap());
    let names: Vec<&str> = declared.indexes.iter().map(GlobalSecondaryIndex::index_name).collect();
    assert_eq!(names, [item::CHANGES_INDEX, item::LEASE_ENDS_INDEX, item::CHANGE_STAMPS_INDEX]);
    let attributes: Vec<&str> =
        declared.attribute_definitions.iter().map(AttributeDefinition::attribute_name).collect();
    assert_eq!(attributes, ["pk", "sk", "shard", "changed_at_ms", "lease_until_ms", "c"]);
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
    run(&client, &target, &migrations().unwrap(), None).await.unwrap();
    let next = run(&client, &target, &with_synthetic(&[true]), None).await.unwrap();
    assert_eq!(next.to_version, n + 1);
    assert_eq!(next.applied[0].actions, vec!["ttl already enabled on ttl".to_owned()]);
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: n + 1, compatible_from: n }));
    assert_eq!(check_schema(stamp, Runs::only(n), &target).unwrap(), n + 1, "N accepts N+1");
    // The binary of N leaves it alone (it cannot migrate what it does
    // not know), and a non-additive N+2 shuts N out.
    let old = run(&client, &target, &migrations().unwrap(), None).await.unwrap_err();
    assert!(matches!(old, StoreError::SchemaTooNew { .. }), "{old:?}");
    run(&client, &target, &with_synthetic(&[true, false]), None).await.unwrap();
    let stamp = read_schema(&client, &target).await.unwrap();
    for old in [n, n + 1] {
        let refused = check_schema(stamp, Runs::only(old), &target);
        assert!(matches!(refused, Err(StoreError::SchemaTooNew { .. })), "{old}: {refused:?}");
    }
    assert_eq!(check_schema(stamp, Runs::only(n + 2), &target).unwrap(), n + 2);
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
    let v1 = run(&client, &target, &all[..1], None).await.unwrap();
    assert_eq!(v1.to_version, 1);
    let sdk = dynamo::sdk_config(Some(&endpoint), dynamo::REGION).await;
    let store = DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(&table)).unwrap();
    let old = mk_pool("old", 5, "w", Some("w"), Some(50_000));
    assert_eq!(store.put(&old, 1_000).await.unwrap(), PutOutcome::Applied);

    let up = run(&client, &target, &all, Some(2)).await.unwrap();
    assert_eq!(up.from_version, Some(1));
    assert_eq!(up.to_version, 2);
    assert_eq!(up.applied.len(), 1, "{up}");
    assert_eq!(up.applied[0].actions, vec!["created index lease_ends".to_owned()]);
    assert!(up.repaired.is_empty(), "{up}");
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: 2, compatible_from: 1 }));
    assert_eq!(check_schema(stamp, Runs::only(1), &target).unwrap(), 2, "a binary of 1 serves it");
    assert_eq!(check_schema(stamp, Runs::only(2), &target).unwrap(), 2);

    let ends = store.read_lease_ends(0, u64::MAX).await.unwrap();
    assert_eq!(ends.len(), 1, "the item written before the index was backfilled");
    assert_eq!((ends[0].key.clone(), ends[0].lease_until_ms), (old.key.clone(), 50_000));
    // What a binary of 1 writes (a renewal) keeps the index current.
    let renewed = mk_pool("old", 5, "w", Some("w"), Some(90_000));
    assert_eq!(store.put(&renewed, 2_000).await.unwrap(), PutOutcome::Applied);
    assert!(store.read_lease_ends(0, 60_000).await.unwrap().is_empty());
    assert_eq!(store.read_lease_ends(60_000, 90_000).await.unwrap().len(), 1);
    assert_eq!(store.read_changed_since(0).await.unwrap(), vec![renewed.clone()]);

    let again = run(&client, &target, &all, Some(2)).await.unwrap();
    assert!(again.is_up_to_date(), "{again}");

    // 2 -> 3 (docs/operations.md, rolling upgrade): a binary of 3 on the
    // table at 2 runs in compatibility mode, its renewals moving
    // changed_at_ms as the binaries of 1 beside it need ...
    assert_eq!(store.ensure_schema().await.unwrap(), 2);
    assert!(!store.renewals_keep_changed_at());
    let terms = Some(mcs_core::LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
    let mut later = mk_pool("old", 5, "w", Some("w"), Some(120_000));
    later.changed_at_ms = 3_000;
    later.terms = terms;
    assert_eq!(store.renew(&later, 3_000).await.unwrap(), None, "no renewal in place at 2");
    assert_eq!(store.put(&later, 3_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.read_changed_since(2_999).await.unwrap(), vec![later.clone()], "a change");
    let three = run(&client, &target, &all, Some(3)).await.unwrap();
    assert_eq!((three.from_version, three.to_version), (Some(2), 3));
    assert_eq!(three.applied.len(), 1, "{three}");
    assert!(three.applied[0].actions.is_empty(), "a marker: {three}");
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: 3, compatible_from: 2 }));
    let old = check_schema(stamp, Runs::only(1), &target).unwrap_err();
    assert!(matches!(old, StoreError::SchemaTooNew { found: 3, known: 1 }), "{old:?}");
    assert_eq!(check_schema(stamp, Runs::only(2), &target).unwrap(), 3, "a binary of 2 serves it");
    // ... and once the store reads the new version, renewals keep it.
    assert!(!store.renewals_keep_changed_at(), "until the store reads the table again");
    store.refresh_schema().await.unwrap();
    assert!(store.renewals_keep_changed_at());
    let mut beat = mk_pool("old", 5, "w", Some("w"), Some(150_000));
    beat.changed_at_ms = 4_000;
    beat.terms = terms;
    assert_eq!(store.renew(&beat, 4_000).await.unwrap(), Some(3_000), "changed_at kept");
    assert!(store.read_changed_since(3_000).await.unwrap().is_empty());
    assert_eq!(store.read_lease_ends(130_000, 160_000).await.unwrap()[0].lease_until_ms, 150_000);
    let done = run(&client, &target, &all, Some(3)).await.unwrap();
    assert!(done.is_up_to_date(), "{done}");
    let below = run(&client, &target, &all, Some(2)).await.unwrap();
    assert!(below.is_up_to_date() && below.to_version == 3, "never lowered: {below}");

    // 3 -> 4: the change_stamps index, backfilled with the items written
    // before; binaries of 3 serve the table, and a store at 4 does not
    // read it yet (it may still be building on a table in use) ...
    let four = run(&client, &target, &all, Some(4)).await.unwrap();
    assert_eq!(four.applied[0].actions, vec!["created index change_stamps".to_owned()]);
    let stamp = read_schema(&client, &target).await.unwrap();
    assert_eq!(stamp, Some(SchemaStamp { version: 4, compatible_from: 3 }));
    let release_3 = Runs { oldest: 2, known: 3 };
    assert_eq!(check_schema(stamp, release_3, &target).unwrap(), 4, "a binary of 3 serves it");
    store.refresh_schema().await.unwrap();
    assert!(store.renewals_keep_changed_at() && !store.reads_change_stamps());
    let stamps = store.read_change_stamps(0, u64::MAX).await.unwrap();
    assert_eq!(stamps, vec![crate::ChangeStamp::of(&at(beat.clone(), 3_000))], "backfilled");
    // ... 4 -> 5, recorded with change_stamps ACTIVE: readers use it, and
    // binaries of 3 are refused.
    let five = run(&client, &target, &all, None).await.unwrap();
    assert_eq!((five.from_version, five.to_version), (Some(4), 5));
    assert!(five.applied[0].actions.is_empty(), "a marker: {five}");
    let stamp = read_schema(&client, &target).await.unwrap();
    let refused = check_schema(stamp, release_3, &target).unwrap_err();
    assert!(matches!(refused, StoreError::SchemaTooNew { found: 5, known: 3 }), "{refused:?}");
    store.refresh_schema().await.unwrap();
    assert!(store.reads_change_stamps());
    let last = run(&client, &target, &all, None).await.unwrap();
    assert!(last.is_up_to_date(), "{last}");
}

fn at(mut record: mcs_core::Record, changed_at_ms: u64) -> mcs_core::Record {
    record.changed_at_ms = changed_at_ms;
    record
}

/// Against moto: `to` stops at a version; a version this binary does not
/// know is refused before anything is done.
#[tokio::test]
async fn migrate_stops_at_the_version_asked() {
    use mcs_testkit::dynamo;
    let Some(endpoint) = crate::testsuite::dynamodb_endpoint() else { return };
    let client = dynamo::client(&endpoint, dynamo::REGION);
    let table = dynamo::unique_table("unit-to");
    let target = Target::new(&table, dynamo::REGION, Some(&endpoint));
    let all = migrations().unwrap();
    for to in [0, SCHEMA_VERSION + 1] {
        let refused = run(&client, &target, &all, Some(to)).await.unwrap_err().to_string();
        assert!(refused.contains(&format!("knows versions 1 to {SCHEMA_VERSION}")), "{refused}");
    }
    assert!(describe(&client, &target).await.unwrap().is_none(), "nothing created");
    let two = run(&client, &target, &all, Some(2)).await.unwrap();
    assert_eq!((two.from_version, two.to_version, two.applied.len()), (None, 2, 2));
    assert_eq!(read_schema(&client, &target).await.unwrap().unwrap().version, 2);
    let rest = run(&client, &target, &all, None).await.unwrap();
    assert_eq!((rest.from_version, rest.to_version), (Some(2), SCHEMA_VERSION));
}

/// An index a version needs that is still building stops `migrate` before
/// recording it, naming the index and what to do (moto's indexes are ACTIVE
/// at once, so the message is checked here).
#[test]
fn a_version_is_not_recorded_while_an_index_its_readers_query_builds() {
    let refused = index_not_ready(&target(), "change_stamps", "CREATING (backfilling)", 5);
    assert!(matches!(refused, StoreError::Schema(_)), "{refused:?}");
    let refused = refused.to_string();
    assert!(refused.contains("index change_stamps is CREATING (backfilling)"), "{refused}");
    assert!(refused.contains("schema version 5 needs it ACTIVE"), "{refused}");
    assert!(refused.contains("version 4 is recorded: run mcs-admin migrate again"), "{refused}");
}

/// Against moto: a table at 2 whose `lease_ends` was dropped, and one at 4
/// whose `change_stamps` was, get the index back before the next migration
/// (which needs it: readers of 3 and 5 query them), and reach this
/// binary's version. Before, the next migration refused for good, and the
/// repair that would have created the index came after it.
#[tokio::test]
async fn a_dropped_index_of_an_applied_version_is_put_back_before_the_next_migration() {
    use mcs_testkit::dynamo;
    let Some(endpoint) = crate::testsuite::dynamodb_endpoint() else { return };
    let client = dynamo::client(&endpoint, dynamo::REGION);
    let all = migrations().unwrap();
    for (version, index) in [(3, "lease_ends"), (5, "change_stamps")] {
        let table = dynamo::unique_table(&format!("unit-index-{version}"));
        let target = Target::new(&table, dynamo::REGION, Some(&endpoint));
        // The versions before the index's, then its own recorded without it.
        run(&client, &target, &all, Some(version - 2)).await.unwrap();
        let without = SchemaStamp { version: version - 1, compatible_from: version - 2 };
        record_version(&client, &target, without).await.unwrap();
        let report = run(&client, &target, &all, None).await.unwrap();
        assert_eq!(report.from_version, Some(version - 1));
        assert_eq!(report.to_version, SCHEMA_VERSION);
        let created = format!("creating index {index} (DynamoDB backfills it");
        assert!(report.repaired.iter().any(|r| r.starts_with(&created)), "{report}");
        let table = describe(&client, &target).await.unwrap().unwrap();
        assert!(pending_indexes(&table, &[index]).is_empty(), "{index} is there");
    }
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
