//! `DynamoStore` against a real DynamoDB API (moto_server): the store
//! conformance suite, then what only this backend has: TTL and layout
//! attributes, migrations, unreadable items, error kinds and throttling
//! retries.
//!
//! The endpoint comes from `MCS_TEST_DYNAMODB_ENDPOINT`, which
//! `scripts/with-moto.sh` sets. Unset, each test skips after a notice,
//! except where the DynamoDB tests are required (`scripts/test`, CI), where
//! it fails (`mcs_store::testsuite::dynamodb_endpoint`). Every test
//! migrates a table of its own, so tests are isolated on one server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "dynamo/migrations.rs"]
mod migrations;
#[path = "dynamo/throttle_proxy.rs"]
mod throttle_proxy;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_core::fixtures::{mk_export, mk_export_spec, mk_pool, mk_tombstone, pool_key, port};
use mcs_core::{Key, Record};
use mcs_store::dynamo::migrate;
use mcs_store::testsuite::EmulatesTtl;
use mcs_store::{DynamoConfig, DynamoStore, PutOutcome, Store, StoreError};
use mcs_testkit::dynamo::{REGION, dynamodb_endpoint as endpoint, unique_table};
use mcs_testkit::metrics::MemoryRecorder;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;
use throttle_proxy::ThrottleProxy;

async fn sdk_config(endpoint: Option<&str>) -> aws_config::SdkConfig {
    mcs_testkit::dynamo::sdk_config(endpoint, REGION).await
}

/// A store on a freshly migrated table of its own, with test-speed retries.
async fn new_store(name: &str) -> Option<DynamoStore> {
    let endpoint = endpoint()?;
    let sdk = sdk_config(Some(&endpoint)).await;
    let table = unique_table(name);
    migrate(&Client::new(&sdk), &table).await.unwrap();
    let store = DynamoStore::from_sdk_config(&sdk, quick(DynamoConfig::new(table))).unwrap();
    // As the registry does at startup: the store writes by the version read.
    store.ensure_schema().await.unwrap();
    Some(store)
}

fn quick(mut config: DynamoConfig) -> DynamoConfig {
    config.initial_backoff = Duration::from_millis(5);
    // moto_server handles one request at a time and takes seconds over an
    // item near the 400 KB limit on a loaded machine; the production 10 s
    // would turn that wait into a spurious timeout.
    config.attempt_timeout = Duration::from_secs(60);
    config.operation_timeout = Duration::from_secs(300);
    config
}

mcs_store::store_conformance_suite!(optional: new_store("suite").await);

fn at(mut record: Record, changed_at_ms: u64) -> Record {
    record.changed_at_ms = changed_at_ms;
    record
}

fn pool_pk(name: &str) -> String {
    format!("POOL#{}", pool_key(name).id())
}

async fn raw_item(store: &DynamoStore, pk: &str, sk: &str) -> HashMap<String, AttributeValue> {
    store
        .client()
        .get_item()
        .table_name(store.table())
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S(sk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .expect("item stored")
}

async fn put_raw(store: &DynamoStore, item: HashMap<String, AttributeValue>) {
    store.client().put_item().table_name(store.table()).set_item(Some(item)).send().await.unwrap();
}

fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Each region writes only items of its own origin; reads merge a key's
/// items of every origin by version, as the View does.
#[tokio::test]
async fn items_of_every_origin_are_merged_by_version() {
    let Some(store) = new_store("origins").await else { return };
    assert_eq!(store.origin(), "us-east-1");
    let local = mk_pool("a", 5, "w", None, Some(1 << 40));
    assert_eq!(store.put(&local, 0).await.unwrap(), PutOutcome::Applied);
    // The same key written in eu-west-1 at a newer version, as replication
    // would deliver it.
    let mut remote = raw_item(&store, &pool_pk("a"), "#@us-east-1").await;
    remote.insert("sk".into(), AttributeValue::S("#@eu-west-1".into()));
    remote.insert("gen".into(), AttributeValue::N("9".into()));
    store
        .client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(remote))
        .send()
        .await
        .unwrap();
    let merged = store.get(&local.key).await.unwrap().unwrap();
    assert_eq!(merged.version, mcs_core::Version::new(9, "w"), "the newer origin wins");
    assert_eq!(store.read_all().await.unwrap().len(), 2, "one record per origin");
    // A local write older than the remote one is still accepted into the
    // local item: the conditional write sees only this region's item (the
    // registrar judges it against its merged view first).
    let older = mk_pool("a", 6, "w", None, Some(1 << 40));
    assert_eq!(store.put(&older, 0).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&local.key).await.unwrap().unwrap().version.generation, 9);
}

/// Issue 22, item 1: an export written through one region (its item has
/// no `ttl`: it lives on its cluster's lease) and withdrawn through another
/// (a tombstone of the other origin). When TTL deleted the tombstone, every
/// read served the export again. Invariant (docs/design.md §3, §9): a live
/// item is never left behind by a tombstone that supersedes it, whatever
/// TTL does; an export's tombstone has no `ttl`, so only gc, which holds it
/// while an older item of another origin could be served, deletes it. With
/// a pool (leased) the tombstone's `ttl` outlives the older lease.
#[tokio::test]
async fn ttl_never_leaves_a_live_item_behind_a_tombstone_of_another_origin() {
    let Some(here) = new_store("ttl-origins").await else { return };
    let endpoint = endpoint().unwrap();
    let there_sdk = mcs_testkit::dynamo::sdk_config(Some(&endpoint), "eu-west-1").await;
    migrate(&Client::new(&there_sdk), here.table()).await.unwrap();
    let there =
        DynamoStore::from_sdk_config(&there_sdk, quick(DynamoConfig::new(here.table()))).unwrap();
    there.ensure_schema().await.unwrap();
    assert_ne!(here.origin(), there.origin());
    let spec = mk_export_spec(1_700_000_000, vec![port("http", 80)]);
    let export = at(mk_export("c1", "svc", 5, spec), 1_000);
    let pool = at(mk_pool("p", 5, "w", Some("x"), Some(30_000)), 1_000);
    for live in [&export, &pool] {
        assert_eq!(here.put(live, 1_000).await.unwrap(), PutOutcome::Applied);
        let mut withdrawal = at(mk_tombstone("p", 6, "w"), 2_000);
        withdrawal.key = live.key.clone();
        withdrawal.lease_until_ms = live.lease_until_ms;
        assert_eq!(there.put(&withdrawal, 2_000).await.unwrap(), PutOutcome::Applied);
        // Replication: the other region's tombstone reaches this replica.
        let (pk, sk) = mcs_store::dynamo::raw::item_prefix(&live.key);
        let sk = format!("{sk}{}", there.origin());
        put_raw(&here, raw_item(&there, &pk, &sk).await).await;
        assert!(here.get(&live.key).await.unwrap().unwrap().is_tombstone());
    }
    // Ten days on: far past the retention of every tombstone and lease.
    let deleted = here.emulate_ttl(1_000 + 10 * 86_400_000).await.unwrap();
    assert_eq!(deleted, 2, "the pool's two items; neither export item");
    let merged = here.get(&export.key).await.unwrap();
    assert!(merged.as_ref().is_some_and(Record::is_tombstone), "export came back: {merged:?}");
    // A full read merges what is left: the tombstone still hides the
    // export item of this region (gc deletes that, then the tombstone).
    let mut view = mcs_core::View::new(0);
    view.replace_all(here.read_all().await.unwrap(), 0, 0);
    assert!(view.record(&export.key).is_some_and(Record::is_tombstone), "a full read");
}

#[tokio::test]
async fn ttl_and_layout_attributes_are_written() {
    let Some(store) = new_store("ttl").await else {
        return;
    };
    let retention_ms = 24 * 60 * 60 * 1000;
    let leased = at(mk_pool("a", 1, "w", Some("x"), Some(10_000)), 1_000);
    let tomb = at(mk_tombstone("b", 2, "w"), 5_000);
    let export = mk_export("c1", "svc", 1, mk_export_spec(1_700_000_000, vec![port("http", 80)]));
    for record in [&leased, &tomb, &export] {
        assert_eq!(store.put(record, 1_000).await.unwrap(), PutOutcome::Applied);
    }

    let item = raw_item(&store, &pool_pk("a"), "#@us-east-1").await;
    assert_eq!(item["ttl"], n((10_000 + retention_ms) / 1000));
    assert_eq!(item["kind"], AttributeValue::S("pool".into()));
    assert_eq!(item["gen"], n(1));
    assert_eq!(item["writer"], AttributeValue::S("w".into()));
    assert_eq!(item["owner"], AttributeValue::S("x".into()));
    assert_eq!(item["lease_until_ms"], n(10_000));
    assert_eq!(item["deleted"], AttributeValue::Bool(false));
    assert_eq!(item["changed_at_ms"], n(1_000));
    assert_eq!(item["digest"], AttributeValue::S(leased.content_digest()));
    assert_eq!(item["payload_version"], n(1));
    assert!(matches!(item["payload"], AttributeValue::M(_)));
    let shard: u32 = item["shard"].as_n().unwrap().parse().unwrap();
    assert!(shard < mcs_store::dynamo::SHARDS);

    let item = raw_item(&store, &pool_pk("b"), "#@us-east-1").await;
    assert_eq!(item["ttl"], n((5_000 + retention_ms) / 1000), "tombstone ttl");
    assert_eq!(item["deleted"], AttributeValue::Bool(true));
    assert!(!item.contains_key("owner"));
    assert!(!item.contains_key("lease_until_ms"));

    let item = raw_item(&store, "SVC#llm/svc", "EXPORT#c1@us-east-1").await;
    assert!(!item.contains_key("ttl"), "exports live on their cluster");
}

#[tokio::test]
async fn unreadable_items_are_skipped_by_reads() {
    let recorder = MemoryRecorder::global();
    let Some(store) = new_store("skip").await else {
        return;
    };
    let good = at(mk_pool("good", 1, "w", None, Some(1 << 40)), 1_000);
    store.put(&good, 1_000).await.unwrap();
    let mut template = raw_item(&store, &pool_pk("good"), "#@us-east-1").await;

    let mut from_the_future = template.clone();
    from_the_future.insert("pk".into(), AttributeValue::S(pool_pk("future")));
    from_the_future.insert("payload_version".into(), n(99));
    from_the_future.insert("payload".into(), AttributeValue::S("v99 format".into()));
    put_raw(&store, from_the_future).await;

    template.insert("pk".into(), AttributeValue::S(pool_pk("garbage")));
    template.insert(
        "payload".into(),
        AttributeValue::M(HashMap::from([(
            "type".to_owned(),
            AttributeValue::S("spaceship".into()),
        )])),
    );
    put_raw(&store, template).await;

    assert_eq!(store.read_all().await.unwrap(), vec![good.clone()]);
    assert_eq!(store.read_changed_since(0).await.unwrap(), vec![good]);
    for reason in ["payload_version", "undecodable"] {
        let skipped =
            recorder.counter(&format!("mcs_store_items_skipped_total{{reason={reason}}}"));
        assert!(skipped >= 2, "{reason}: skipped by both reads, counted {skipped}");
    }
    let future_key = Key::Pool { pool_id: pool_key("future").id() };
    assert!(matches!(store.get(&future_key).await.unwrap_err(), StoreError::Corrupt(_)));
}

/// Calls on a missing table (never created, or deleted under a running
/// process) are `Missing`, naming where they looked, so the registry can
/// answer 503 rather than 500 (issue 22, item 12: they were `Schema`).
#[tokio::test]
async fn a_missing_table_is_missing_and_names_where_it_looked() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let sdk = sdk_config(Some(&endpoint)).await;
    let store =
        DynamoStore::from_sdk_config(&sdk, DynamoConfig::new(unique_table("absent"))).unwrap();
    let record = mk_pool("a", 1, "w", None, None);
    let target = format!("table {} in us-east-1 at {endpoint}", store.table());
    for (call, error) in [
        ("get", store.get(&record.key).await.unwrap_err()),
        ("read_all", store.read_all().await.unwrap_err()),
        ("put", store.put(&record, 1).await.unwrap_err()),
    ] {
        assert!(matches!(error, StoreError::Missing(_)), "{call}: {error:?}");
        assert!(error.to_string().contains(&target), "{call}: {error}");
    }
    let missing = store.ensure_schema().await.unwrap_err();
    assert!(matches!(missing, StoreError::Missing(_)), "{missing:?}");
    // Where it looked: a wrong region or endpoint shows in the message.
    let text = missing.to_string();
    assert!(
        text.contains(&format!("table {} in us-east-1 at {endpoint}", store.table())),
        "{text}"
    );
    assert!(text.contains("--region") && text.contains("migrate --create"), "{text}");
    assert!(!store.table_exists().await.unwrap());
}

#[tokio::test]
async fn an_unreachable_endpoint_is_unavailable() {
    // Needs no server: a port nobody listens on refuses the connection.
    let refused = mcs_testkit::net::RefusedPort::new();
    let closed = refused.url();
    let mut config = quick(DynamoConfig::new("any"));
    config.endpoint = Some(closed);
    config.max_attempts = 2;
    let store = DynamoStore::from_sdk_config(&sdk_config(None).await, config).unwrap();
    let err = store.put(&mk_pool("a", 1, "w", None, None), 0).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    // One line: the call, the table, region and endpoint, the root cause;
    // not the SDK's debug dump.
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "storage unavailable: put on table any in us-east-1 at {}",
            store.target().endpoint
        )),
        "{text}"
    );
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
    assert!(!text.contains('\n') && !text.contains("DispatchFailure"), "{text}");
}

/// A store on a migrated table whose requests go through `proxy`.
async fn store_behind(proxy: &ThrottleProxy, endpoint: &str, max_attempts: u32) -> DynamoStore {
    let sdk = sdk_config(Some(endpoint)).await;
    let table = unique_table("throttle");
    migrate(&Client::new(&sdk), &table).await.unwrap();
    let mut config = quick(DynamoConfig::new(table));
    config.endpoint = Some(proxy.url.clone());
    config.max_attempts = max_attempts;
    DynamoStore::from_sdk_config(&sdk, config).unwrap()
}

#[tokio::test]
async fn throttling_is_retried_with_backoff() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let proxy = ThrottleProxy::start(&endpoint, 2).await;
    let store = store_behind(&proxy, &endpoint, 4).await;
    let record = at(mk_pool("a", 5, "w", None, Some(1 << 40)), 1_000);
    assert_eq!(store.put(&record, 1_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(proxy.throttled(), 2, "two throttled attempts");
    assert_eq!(proxy.forwarded(), 1, "then the write went through");
    assert_eq!(store.get(&record.key).await.unwrap(), Some(record.clone()));

    // A refused condition is an answer, not a failure: never retried.
    let before = proxy.forwarded();
    let stale = at(mk_pool("a", 4, "w", None, Some(1 << 40)), 2_000);
    assert_eq!(
        store.put(&stale, 2_000).await.unwrap(),
        PutOutcome::Stale { stored: record.version.clone() }
    );
    assert_eq!(proxy.forwarded(), before + 1);
}

#[tokio::test]
async fn throttling_past_the_attempts_is_unavailable() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let proxy = ThrottleProxy::start(&endpoint, usize::MAX).await;
    let store = store_behind(&proxy, &endpoint, 3).await;
    let err = store.put(&mk_pool("a", 1, "w", None, None), 0).await.unwrap_err();
    assert!(err.is_unavailable(), "{err:?}");
    assert_eq!(proxy.throttled(), 3, "every attempt was made");
    assert_eq!(proxy.forwarded(), 0);
}

/// Issue 23, item 6: a storage that accepts connections and never answers
/// was silent for the SDK's five attempts of 10 s. Every call now has a
/// deadline: past it the call fails as unavailable, counted as a `timeout`
/// and naming the call, the table, region and endpoint.
#[tokio::test]
async fn a_hung_storage_times_out_within_the_call_deadline_and_says_so() {
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", hang.local_addr().unwrap());
    let _accepted = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = hang.accept().await {
            held.push(socket);
        }
    });
    let recorder = mcs_testkit::metrics::MemoryRecorder::global();
    let mut config = quick(DynamoConfig::new("hung"));
    config.endpoint = Some(url.clone());
    config.attempt_timeout = Duration::from_millis(400);
    config.operation_timeout = Duration::from_secs(1);
    let store = DynamoStore::from_sdk_config(&sdk_config(None).await, config).unwrap();
    let before = recorder.counter("mcs_store_requests_total{op=query_changes,outcome=timeout}");
    let started = std::time::Instant::now();
    let err = store.read_changed_since(0).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(err.is_unavailable(), "{err:?}");
    assert!(elapsed < Duration::from_secs(5), "the deadline held: {elapsed:?}");
    let text = err.to_string();
    assert!(text.contains(&format!("query_changes on table hung in us-east-1 at {url}")), "{text}");
    assert!(text.to_lowercase().contains("timeout") || text.contains("timed out"), "{text}");
    assert!(
        recorder.counter("mcs_store_requests_total{op=query_changes,outcome=timeout}") > before,
        "counted as a timeout"
    );
}

/// A role without `UpdateItem` (a rollout that missed the policy change):
/// each renewal in place fails, is answered `None`, and the put that
/// follows writes the renewal as before.
/// `record` with the default lease's terms, as the registrar writes it.
fn with_terms(record: Record) -> Record {
    Record {
        terms: Some(mcs_core::LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 }),
        ..record
    }
}

#[tokio::test]
async fn a_renewal_in_place_denied_falls_back_to_a_put() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let proxy = ThrottleProxy::denying(&endpoint, "UpdateItem").await;
    let store = store_behind(&proxy, &endpoint, 2).await;
    assert_eq!(store.ensure_schema().await.unwrap(), mcs_store::dynamo::SCHEMA_VERSION);
    let first = with_terms(at(mk_pool("a", 5, "w", Some("x"), Some(10_000)), 1_000));
    assert_eq!(store.put(&first, 1_000).await.unwrap(), PutOutcome::Applied);
    let beat = with_terms(at(mk_pool("a", 5, "w", Some("x"), Some(20_000)), 2_000));
    assert_eq!(store.renew(&beat, 2_000).await.unwrap(), None);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(first.clone()), "nothing renewed");
    assert_eq!(store.put(&beat, 2_000).await.unwrap(), PutOutcome::Applied);
    assert_eq!(store.get(&first.key).await.unwrap(), Some(beat));
}

#[tokio::test]
async fn requests_and_consumed_capacity_are_recorded() {
    let recorder = MemoryRecorder::global();
    let Some(store) = new_store("metrics").await else {
        return;
    };
    let record = with_terms(at(mk_pool("a", 1, "w", None, Some(1 << 40)), 1_000));
    store.put(&record, 1_000).await.unwrap();
    store.put(&at(mk_pool("a", 0, "w", None, None), 1_000), 1_000).await.unwrap();
    store.get(&record.key).await.unwrap();
    store.read_all().await.unwrap();
    store.read_changed_since(0).await.unwrap();
    let renewal = with_terms(at(mk_pool("a", 1, "w", None, Some(1 << 41)), 1_000));
    assert!(store.renew(&renewal, 1_000).await.unwrap().is_some());
    assert!(store.renew(&renewal, 1_000).await.unwrap().is_none(), "not later: refused");

    // Other tests of this binary record too: counts are lower bounds.
    assert!(recorder.counter("mcs_store_requests_total{op=renew,outcome=ok}") >= 1);
    assert!(recorder.counter("mcs_store_requests_total{op=renew,outcome=refused}") >= 1);
    assert!(recorder.counter("mcs_store_requests_total{op=put,outcome=ok}") >= 1);
    assert!(recorder.counter("mcs_store_requests_total{op=put,outcome=refused}") >= 1);
    assert!(recorder.counter("mcs_store_requests_total{op=scan,outcome=ok}") >= 4, "4 segments");
    assert!(
        recorder.counter("mcs_store_requests_total{op=query_changes,outcome=ok}") >= 8,
        "one query per shard"
    );
    assert!(!recorder.samples("mcs_store_request_duration_seconds{op=get}").is_empty());
    for id in [
        "mcs_store_write_capacity_milliunits_total{op=put}",
        "mcs_store_write_capacity_milliunits_total{op=renew}",
        "mcs_store_read_capacity_milliunits_total{op=get}",
        "mcs_store_read_capacity_milliunits_total{op=scan}",
        "mcs_store_read_capacity_milliunits_total{op=query_changes}",
    ] {
        assert!(recorder.counter(id) > 0, "{id}");
    }
}

/// The raw reads of tools (mcs-admin) are the store's own scan and query:
/// every item as stored (the schema item and unreadable items included),
/// each page counted by the observer; and gc's delete removes only the item
/// as it was read.
#[tokio::test]
async fn tools_read_and_delete_raw_items_through_the_store() {
    let Some(store) = new_store("raw-items").await else { return };
    let now = 1_764_662_400_000;
    let read = mk_pool("a", 5, "w", Some("x"), Some(now + 1_000));
    store.put(&read, now).await.unwrap();
    store.put(&mk_tombstone("b", 2, "w"), now).await.unwrap();
    put_raw(
        &store,
        HashMap::from([
            ("pk".to_owned(), AttributeValue::S(pool_pk("c"))),
            ("sk".to_owned(), AttributeValue::S("#@us-east-1".into())),
        ]),
    )
    .await;
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let observer = counted.clone();
    let items = store
        .scan_items(Some(std::sync::Arc::new(move |n| {
            observer.fetch_add(n, Ordering::Relaxed);
        })))
        .await
        .unwrap();
    assert_eq!(items.len(), 4, "two records, an unreadable item and META: {items:?}");
    assert_eq!(counted.load(Ordering::Relaxed), 4, "every page counted");
    assert_eq!(items.iter().filter(|i| mcs_store::dynamo::raw::is_meta(i)).count(), 1);
    assert_eq!(store.read_all().await.unwrap().len(), 2, "read_all keeps what it can read");

    let of_a = store.items_of(&read.key).await.unwrap();
    assert_eq!(of_a.len(), 1);
    assert_eq!(mcs_store::dynamo::raw::decode(of_a[0].clone()).unwrap(), read);

    // Renewed since it was read: kept; as read now: deleted.
    let mut renewed = mk_pool("a", 5, "w", Some("x"), Some(now + 60_000));
    renewed.changed_at_ms = read.changed_at_ms;
    store.put(&renewed, now).await.unwrap();
    assert!(!store.delete_if_unchanged(&read, &of_a[0]).await.unwrap(), "rewritten: kept");
    assert_eq!(store.get(&read.key).await.unwrap(), Some(renewed.clone()));
    assert!(store.delete_if_unchanged(&renewed, &of_a[0]).await.unwrap());
    assert_eq!(store.items_of(&read.key).await.unwrap(), vec![]);
}
