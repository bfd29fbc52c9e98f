//! `migrate`: creates (only with --create), then has nothing to do; repairs
//! drift; a newer table is left alone.

use crate::support::Fixture;
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_store::dynamo::SCHEMA_VERSION;

#[tokio::test]
async fn migrate_twice_then_nothing_to_do() {
    let Some(t) = Fixture::unmigrated("migrate").await else { return };
    let first = t.admin(&["migrate", "--create"]).expect(0);
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

/// A rolling upgrade (docs/operations.md): `--to 2` stops there, a second
/// run too; then `migrate` finishes; a version this binary does not know
/// is refused.
#[tokio::test]
async fn migrate_to_stops_at_the_version_asked() {
    let Some(t) = Fixture::unmigrated("migrate-to").await else { return };
    let two = t.admin(&["migrate", "--create", "--to", "2"]).expect(0);
    assert!(two.stdout.contains("schema version none -> 2"), "{}", two.stdout);
    assert!(!two.stdout.contains("0003"), "{}", two.stdout);
    assert_eq!(t.store.schema_version().await.unwrap(), Some(2));
    let again = t.admin(&["migrate", "--to", "2"]).expect(0);
    assert!(again.stdout.ends_with("at schema version 2: nothing to do\n"), "{}", again.stdout);
    let unknown = t.admin(&["migrate", "--to", &(SCHEMA_VERSION + 1).to_string()]).expect(1);
    assert!(
        unknown.stderr.contains(&format!("this binary knows versions 1 to {SCHEMA_VERSION}")),
        "{}",
        unknown.stderr
    );
    t.admin(&["migrate", "--to", "0"]).expect(2);
    let rest = t.admin(&["migrate"]).expect(0);
    assert!(
        rest.stdout.contains(&format!("schema version 2 -> {SCHEMA_VERSION}")),
        "{}",
        rest.stdout
    );
    assert!(rest.stdout.contains("0003 renewals keep changed_at_ms"), "{}", rest.stdout);
    assert_eq!(t.store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
}

#[tokio::test]
async fn an_absent_table_is_created_only_with_create() {
    let Some(t) = Fixture::unmigrated("absent").await else { return };
    // As if --region named a region where the table has no replica.
    let run = t.admin(&["migrate"]).expect(1);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(
        run.stderr,
        format!(
            "mcs-admin: table {} is absent in region us-east-1 at endpoint {}: pass --create if \
             creating it there is intended (else check --table, --region and \
             --dynamodb-endpoint)\n",
            t.table, t.endpoint
        )
    );
    assert!(!t.store.table_exists().await.unwrap(), "nothing created");
    // What the registry and the reading commands say of it names where they looked.
    let ls = t.admin(&["ls", "pools"]).expect(1);
    assert!(
        ls.stderr.contains(&format!("table {} in us-east-1 at {}", t.table, t.endpoint)),
        "{}",
        ls.stderr
    );
    t.admin(&["migrate", "--create"]).expect(0);
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

/// Storage that starts answering only after mcs-admin started (a DynamoDB
/// Local container still starting): migrate retries within
/// --storage-connect-timeout-secs instead of exiting at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_waits_for_storage_to_answer() {
    let Some(t) = Fixture::unmigrated("late").await else { return };
    let port = mcs_testkit::net::RefusedPort::new();
    let late = port.url();
    let (table, region) = (t.table.clone(), t.region.clone());
    let run = tokio::task::spawn_blocking(move || {
        crate::support::admin(
            &[
                "migrate",
                "--create",
                "--table",
                &table,
                "--region",
                &region,
                "--dynamodb-endpoint",
                &late,
                "--storage-connect-timeout-secs",
                "30",
            ],
            None,
        )
    });
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // Now "storage starts": the address forwards to moto.
    let listener = port.listen();
    let upstream = t.endpoint.trim_start_matches("http://").to_owned();
    let forwarder = tokio::spawn(async move {
        loop {
            let (mut inbound, _) = listener.accept().await.unwrap();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let mut outbound = tokio::net::TcpStream::connect(upstream).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    let run = run.await.unwrap().expect(0);
    forwarder.abort();
    assert!(
        run.stderr.contains("Connection refused") && run.stderr.contains("retrying in"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.contains("created table"), "{}", run.stdout);
    assert_eq!(t.store.schema_version().await.unwrap(), Some(SCHEMA_VERSION));
}
