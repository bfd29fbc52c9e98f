//! `gc [--dry-run] [--retention-secs N]`: deletes what DynamoDB's TTL would
//! delete, for tables without TTL (DynamoDB Local, moto, or TTL turned off):
//! tombstones and expired records whose expiry (a tombstone's write, a
//! lease's end) is more than the retention ago. Exports live on their
//! cluster's lease and carry no expiry of their own: only their tombstones
//! go.
//!
//! A record key has one item per region that wrote it, merged by version. A
//! key goes when its merged record (the newest item) is past the retention,
//! and then all its items go, the older ones first and the newest last: an
//! older item never outlives the newer one that hides it, so nothing comes
//! back to life. Each delete is conditional on the item being exactly what
//! was read (the same generation, writer, write time and lease), so an item
//! rewritten meanwhile (a new registration, a renewed lease) is kept, with
//! what its key still has, and counted.
//!
//! Run it in one region at a time: deletes replicate to the other replicas
//! like any write.

use super::open_checked;
use crate::Exit;
use crate::cli::{GcArgs, GlobalArgs};
use crate::output::{self, Format, Table};
use crate::progress::Progress;
use crate::scan::{Scan, origin, scan};
use crate::state::{Reason, reason_of};
use anyhow::Context as _;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_core::{Key, Record, View};
use mcs_store::DynamoStore;
use mcs_store::dynamo::raw::{self, CHANGED_AT_MS, GEN, Item, LEASE_UNTIL_MS, WRITER};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// One record key past the retention.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Candidate {
    /// The record's key.
    pub key: String,
    /// `withdrawn` or `expired`.
    pub reason: Reason,
    /// When it stopped being of use: a tombstone's write, a lease's end.
    pub expired_at_ms: u64,
    /// The regions whose items the key has.
    pub origins: Vec<String>,
    /// What gc did: `would_delete`, `deleted`, or `kept` (rewritten
    /// meanwhile).
    pub outcome: &'static str,
    /// Its items, oldest version first.
    #[serde(skip)]
    items: Vec<(Record, Item)>,
}

/// What `gc` prints.
#[derive(Debug, Serialize)]
struct Collected {
    table: String,
    dry_run: bool,
    retention_secs: u64,
    /// Keys whose items were all deleted.
    deleted: usize,
    /// Keys kept because an item was rewritten meanwhile.
    kept: usize,
    items: Vec<Candidate>,
}

pub(super) async fn run(global: &GlobalArgs, args: &GcArgs) -> anyhow::Result<Exit> {
    let store = open_checked(global, Duration::from_secs(args.retention_secs)).await?;
    let now = crate::now_ms();
    let scanned = scan(&store, &Progress::counter("scanning")).await?;
    let view = scanned.view(global.skew_allowance_ms, now);
    let retention_ms = args.retention_secs.saturating_mul(1000);
    let mut items = candidates(&scanned, &view, global.skew_allowance_ms, retention_ms, now);
    let mut collected = Collected {
        table: store.table().to_owned(),
        dry_run: args.dry_run,
        retention_secs: args.retention_secs,
        deleted: 0,
        kept: 0,
        items: vec![],
    };
    if !args.dry_run {
        let progress = Progress::bar("deleting", items.len() as u64);
        for candidate in &mut items {
            let mut all = true;
            for (record, item) in &candidate.items {
                if !delete_if_unchanged(&store, record, item).await? {
                    all = false;
                    break;
                }
            }
            if all {
                candidate.outcome = "deleted";
                collected.deleted += 1;
            } else {
                candidate.outcome = "kept";
                collected.kept += 1;
            }
            progress.inc(1);
        }
        progress.finish();
    }
    collected.items = items;
    output::print(&render(&collected, global.output, now)?)?;
    Ok(Exit::Ok)
}

/// The keys of `scan` whose merged record `view` does not serve (withdrawn
/// or expired) and whose expiry is at least `retention_ms` before `now_ms`,
/// in key order, each with all its items.
pub(crate) fn candidates(
    scan: &Scan,
    view: &View,
    skew_ms: u64,
    retention_ms: u64,
    now_ms: u64,
) -> Vec<Candidate> {
    let mut by_key: BTreeMap<&Key, Vec<&(Record, Item)>> = BTreeMap::new();
    for entry in &scan.records {
        by_key.entry(&entry.0.key).or_default().push(entry);
    }
    by_key
        .into_iter()
        .filter_map(|(key, mut items)| {
            let merged = view.record(key)?;
            let reason = reason_of(view, merged, skew_ms, now_ms);
            if !matches!(reason, Reason::Withdrawn | Reason::Expired) {
                return None;
            }
            let expired_at_ms = merged.expires_at_ms()?;
            if expired_at_ms.saturating_add(retention_ms) > now_ms {
                return None;
            }
            // Oldest first: the newest item, which hides the others, goes last.
            items.sort_by(|a, b| {
                (&a.0.version, a.0.changed_at_ms).cmp(&(&b.0.version, b.0.changed_at_ms))
            });
            Some(Candidate {
                key: key.to_string(),
                reason,
                expired_at_ms,
                origins: items.iter().map(|(_, item)| origin(item)).collect(),
                outcome: "would_delete",
                items: items.into_iter().cloned().collect(),
            })
        })
        .collect()
}

/// Deletes `item` (which stores `record`) if it is still the one read; says
/// whether it did.
async fn delete_if_unchanged(
    store: &DynamoStore,
    record: &Record,
    item: &Item,
) -> anyhow::Result<bool> {
    let key: Item = [raw::PK, raw::SK]
        .into_iter()
        .filter_map(|name| item.get(name).map(|v| (name.to_owned(), v.clone())))
        .collect();
    let mut condition = "#gen = :gen AND #writer = :writer AND #changed = :changed".to_owned();
    let mut request = store
        .client()
        .delete_item()
        .table_name(store.table())
        .set_key(Some(key))
        .expression_attribute_names("#gen", GEN)
        .expression_attribute_names("#writer", WRITER)
        .expression_attribute_names("#changed", CHANGED_AT_MS)
        .expression_attribute_names("#lease", LEASE_UNTIL_MS)
        .expression_attribute_values(
            ":gen",
            AttributeValue::N(record.version.generation.to_string()),
        )
        .expression_attribute_values(":writer", AttributeValue::S(record.version.writer.clone()))
        .expression_attribute_values(
            ":changed",
            AttributeValue::N(record.changed_at_ms.to_string()),
        );
    // A renewal keeps generation and writer but moves the lease: it must
    // keep the item too.
    match record.lease_until_ms {
        Some(until) => {
            condition.push_str(" AND #lease = :lease");
            request =
                request.expression_attribute_values(":lease", AttributeValue::N(until.to_string()));
        }
        None => condition.push_str(" AND attribute_not_exists(#lease)"),
    }
    match request.condition_expression(condition).send().await {
        Ok(_) => Ok(true),
        Err(e)
            if matches!(
                e.as_service_error(),
                Some(DeleteItemError::ConditionalCheckFailedException(_))
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(crate::connect::sdk_error("delete_item", store.table(), e))
            .with_context(|| format!("deleting {}", record.key)),
    }
}

fn render(c: &Collected, format: Format, now_ms: u64) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, c)? {
        return Ok(text);
    }
    let mut text = String::new();
    if !c.items.is_empty() {
        let mut table = Table::new(["KEY", "REASON", "EXPIRED", "ITEMS", "OUTCOME"]);
        for i in &c.items {
            table.row([
                i.key.clone(),
                i.reason.to_string(),
                output::time(i.expired_at_ms, now_ms),
                i.origins.join(","),
                i.outcome.replace('_', " "),
            ]);
        }
        text.push_str(&table.render());
        text.push('\n');
    }
    let retention = format!("{}s", c.retention_secs);
    if c.dry_run {
        text.push_str(&format!(
            "dry run: would delete {} of {} past the retention ({retention}); deleted nothing\n",
            output::count(c.items.len(), "key", "keys"),
            c.table
        ));
    } else {
        text.push_str(&format!(
            "deleted {} of {} past the retention ({retention}); kept {} rewritten meanwhile\n",
            output::count(c.deleted, "key", "keys"),
            c.table,
            c.kept
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::view_of;
    use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};

    const NOW: u64 = 1_764_662_400_000;
    const DAY: u64 = 86_400_000;

    fn at(mut record: Record, changed_at_ms: u64) -> Record {
        record.changed_at_ms = changed_at_ms;
        record
    }

    #[test]
    fn only_what_is_past_the_retention_goes() {
        let records = vec![
            mk_pool("live", 1, "w", None, Some(NOW + 30_000)),
            mk_pool("recent", 1, "w", None, Some(NOW - 60_000)),
            mk_pool("old", 1, "w", None, Some(NOW - 2 * DAY)),
            at(mk_tombstone("buried", 1, "w"), NOW - 2 * DAY),
            at(mk_tombstone("fresh", 1, "w"), NOW - 60_000),
            mk_cluster("c1", 1, "inc", NOW - 3 * DAY),
            at(mk_export("c1", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
        ];
        let scan = Scan {
            records: records.iter().map(|r| (r.clone(), Default::default())).collect(),
            ..Scan::default()
        };
        let view = view_of(records, 1_000, NOW);
        let mut found: Vec<(String, Reason)> = candidates(&scan, &view, 1_000, DAY, NOW)
            .into_iter()
            .map(|c| (c.key, c.reason))
            .collect();
        found.sort();
        let mut want = vec![
            (format!("pool/{}", mcs_core::fixtures::pool_key("old").id()), Reason::Expired),
            (format!("pool/{}", mcs_core::fixtures::pool_key("buried").id()), Reason::Withdrawn),
            ("cluster/c1".to_owned(), Reason::Expired),
        ];
        want.sort();
        assert_eq!(found, want, "an orphaned export has no expiry of its own");
        assert!(candidates(&scan, &view, 1_000, 4 * DAY, NOW).is_empty());
        // Without retention, a record within the skew allowance is still live.
        let skewed = vec![mk_pool("skewed", 1, "w", None, Some(NOW - 500))];
        let scan = Scan {
            records: skewed.iter().map(|r| (r.clone(), Default::default())).collect(),
            ..Scan::default()
        };
        assert!(candidates(&scan, &view_of(skewed, 1_000, NOW), 1_000, 0, NOW).is_empty());
    }

    #[tokio::test]
    async fn an_item_rewritten_since_it_was_read_is_kept() {
        use mcs_store::Store;
        let Some(store) = crate::testing::fresh_store("gc-kept").await else { return };
        let now = crate::now_ms();
        let read = mk_pool("p", 5, "w", Some("relay"), Some(now - 2 * DAY));
        store.put(&read, now).await.unwrap();
        let item =
            crate::scan::scan(&store, &Progress::hidden()).await.unwrap().records[0].1.clone();
        // A heartbeat at the same version moves the lease and the write time.
        let mut renewed = mk_pool("p", 5, "w", Some("relay"), Some(now + DAY));
        renewed.changed_at_ms = now;
        store.put(&renewed, now).await.unwrap();
        assert!(!delete_if_unchanged(&store, &read, &item).await.unwrap(), "rewritten: kept");
        assert_eq!(store.get(&read.key).await.unwrap(), Some(renewed.clone()));
        let item =
            crate::scan::scan(&store, &Progress::hidden()).await.unwrap().records[0].1.clone();
        assert!(delete_if_unchanged(&store, &renewed, &item).await.unwrap());
        assert_eq!(store.get(&read.key).await.unwrap(), None);
    }

    #[test]
    fn a_key_goes_with_all_its_items_the_newest_last() {
        // Withdrawn in eu-west-1 two days ago; an older item written in
        // us-east-1 still holds a lease, hidden by the tombstone.
        let tomb = at(mk_tombstone("p", 5, "w"), NOW - 2 * DAY);
        let older = mk_pool("p", 3, "w", Some("relay"), Some(NOW + DAY));
        let scan = Scan {
            records: vec![
                (tomb.clone(), raw::primary_key(&tomb.key, "eu-west-1")),
                (older.clone(), raw::primary_key(&older.key, "us-east-1")),
            ],
            ..Scan::default()
        };
        let view = view_of(vec![tomb, older], 1_000, NOW);
        let found = candidates(&scan, &view, 1_000, DAY, NOW);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].reason, Reason::Withdrawn);
        assert_eq!(found[0].origins, vec!["us-east-1", "eu-west-1"], "oldest first");
        let versions: Vec<u64> = found[0].items.iter().map(|(r, _)| r.version.generation).collect();
        assert_eq!(versions, vec![3, 5]);
    }
}
