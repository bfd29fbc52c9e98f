//! `gc [--dry-run] [--retention-secs N]`: deletes what DynamoDB's TTL would
//! delete, for tables without TTL (DynamoDB Local, moto, or TTL turned off):
//! tombstones and expired records whose expiry (a tombstone's write, a
//! lease's end) is more than the retention ago. And what TTL never deletes:
//! exports of a cluster whose lease is gone. An export lives on its
//! cluster's lease and carries no `ttl` (the cluster renews its own item
//! only), so its expiry is derived from its cluster's merged record
//! ([`Record::expires_at_ms_on`]): the later of the cluster's lease end or
//! withdrawal and the export's own last write. Run gc on every table, TTL
//! or not, or orphaned exports stay for good.
//!
//! A record key has one item per region that wrote it (its origin), merged
//! by version. A key is past the retention when its merged record (the
//! newest item) is, and then gc deletes **only the item of the region it
//! runs in** (the store's [`origin`](mcs_store::DynamoStore::origin)). Each region
//! writes only its own items, so only there is a conditional delete checked
//! against every write the item will ever see: deleting another region's
//! item through this replica could race a re-registration made there, and
//! the global table's last-writer-wins would then erase that registration
//! everywhere. Other regions' items are counted, per origin, and left to gc
//! in their region (`doctor` reports them too).
//!
//! No older item may outlive the newer one that hides it, or it comes back
//! to life: when this region's item is the key's newest and an older item of
//! another region could still be served (a lease still running, an export
//! not withdrawn), this region's item is `held` until gc in that region has
//! deleted it. Each delete is conditional on the item being exactly what was
//! read (the same generation, writer, write time and lease), so an item
//! rewritten meanwhile (a new registration, a renewed lease) is `kept`, and
//! counted.

use super::{checked_retention, open_checked};
use crate::Exit;
use crate::cli::{GcArgs, GlobalArgs};
use crate::liveness::{Reason, reason_of};
use crate::output::{self, Format, Table};
use crate::progress::Progress;
use crate::scan::{Scan, origin, scan};
use anyhow::Context as _;
use mcs_core::{Key, Record, View};
use mcs_store::dynamo::raw::Item;
use serde::Serialize;
use std::collections::BTreeMap;

/// A record key whose merged record is past the retention, with every item
/// that stores it (one per origin), oldest version first.
#[derive(Debug, Clone)]
pub(crate) struct PastRetention<'a> {
    /// The record's key.
    pub key: &'a Key,
    /// `withdrawn`, `expired` or `cluster_not_live`.
    pub reason: Reason,
    /// When it stopped being of use: a tombstone's write, a lease's end,
    /// an export's cluster's end.
    pub expired_at_ms: u64,
    /// Its items, oldest version first, each with its origin.
    pub items: Vec<(&'a Record, &'a Item, String)>,
    /// For an export, the merged record of its cluster.
    pub cluster: Option<&'a Record>,
}

/// The merged record of the cluster `key` lives on, for an export.
pub(crate) fn cluster_of<'a>(view: &'a View, key: &Key) -> Option<&'a Record> {
    match key {
        Key::Export(export) => view.record(&Key::Cluster { cluster_id: export.cluster_id.clone() }),
        _ => None,
    }
}

/// Whether `record`, an item of a key, could still be served if the items
/// that hide it were gone: a lease still running, or an export not
/// withdrawn whose cluster (`cluster`) has not been gone for the retention
/// (the cluster may renew its lease, and the export would be served again).
fn could_be_served(
    record: &Record,
    cluster: Option<&Record>,
    skew_ms: u64,
    retention_ms: u64,
    now_ms: u64,
) -> bool {
    if record.key.kind() == mcs_core::Kind::Export && !record.is_tombstone() {
        return record
            .expires_at_ms_on(cluster)
            .is_none_or(|at| at.saturating_add(retention_ms) > now_ms);
    }
    record.is_live(now_ms, skew_ms)
}

/// The keys of `scan` whose merged record `view` does not serve (withdrawn,
/// expired, or an export whose cluster holds no live lease) and whose
/// expiry is at least `retention_ms` before `now_ms`, in key order, each
/// with all its items: what gc in some region collects.
pub(crate) fn past_retention<'a>(
    scan: &'a Scan,
    view: &'a View,
    skew_ms: u64,
    retention_ms: u64,
    now_ms: u64,
) -> Vec<PastRetention<'a>> {
    let mut by_key: BTreeMap<&Key, Vec<&(Record, Item)>> = BTreeMap::new();
    for entry in &scan.records {
        by_key.entry(&entry.0.key).or_default().push(entry);
    }
    by_key
        .into_iter()
        .filter_map(|(key, mut items)| {
            let merged = view.record(key)?;
            let reason = reason_of(view, merged, skew_ms, now_ms);
            if !matches!(reason, Reason::Withdrawn | Reason::Expired | Reason::ClusterNotLive) {
                return None;
            }
            let cluster = cluster_of(view, key);
            let expired_at_ms = merged.expires_at_ms_on(cluster)?;
            if expired_at_ms.saturating_add(retention_ms) > now_ms {
                return None;
            }
            items.sort_by(|a, b| {
                (&a.0.version, a.0.changed_at_ms).cmp(&(&b.0.version, b.0.changed_at_ms))
            });
            Some(PastRetention {
                key,
                reason,
                expired_at_ms,
                items: items.into_iter().map(|(r, i)| (r, i, origin(i))).collect(),
                cluster,
            })
        })
        .collect()
}

/// What gc does with one key past the retention that has an item of this
/// region.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Candidate {
    /// The record's key.
    pub key: String,
    /// `withdrawn`, `expired` or `cluster_not_live`.
    pub reason: Reason,
    /// When it stopped being of use: a tombstone's write, a lease's end,
    /// an export's cluster's end.
    pub expired_at_ms: u64,
    /// The regions whose items the key has, oldest version first.
    pub origins: Vec<String>,
    /// What gc did with this region's item: `would_delete`, `deleted`,
    /// `kept` (rewritten meanwhile) or `held` (it hides an older item of
    /// another region that could still be served).
    pub outcome: &'static str,
    /// This region's item.
    #[serde(skip)]
    item: (Record, Item),
}

/// What gc in region `origin` does: the keys with an item of `origin`, and
/// the items of other regions it leaves alone, counted per origin.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub candidates: Vec<Candidate>,
    pub foreign: BTreeMap<String, usize>,
}

/// The plan of gc in region `origin`, from the keys [`past_retention`].
pub(crate) fn plan(
    past: Vec<PastRetention<'_>>,
    origin: &str,
    skew_ms: u64,
    retention_ms: u64,
    now_ms: u64,
) -> Plan {
    let mut plan = Plan::default();
    for key in past {
        for (_, _, from) in key.items.iter().filter(|(_, _, from)| from != origin) {
            *plan.foreign.entry(from.clone()).or_default() += 1;
        }
        let Some(own) = key.items.iter().position(|(_, _, from)| from == origin) else {
            continue;
        };
        let newest = own + 1 == key.items.len();
        let hides_live = key.items[..own]
            .iter()
            .any(|(r, _, _)| could_be_served(r, key.cluster, skew_ms, retention_ms, now_ms));
        let (record, item, _) = &key.items[own];
        plan.candidates.push(Candidate {
            key: key.key.to_string(),
            reason: key.reason,
            expired_at_ms: key.expired_at_ms,
            origins: key.items.iter().map(|(_, _, from)| from.clone()).collect(),
            outcome: if newest && hides_live { "held" } else { "would_delete" },
            item: ((*record).clone(), (*item).clone()),
        });
    }
    plan
}

/// What `gc` prints.
#[derive(Debug, Serialize)]
struct Collected {
    table: String,
    /// The region whose items gc deletes.
    region: String,
    dry_run: bool,
    retention_secs: u64,
    /// Keys whose item of this region was deleted.
    deleted: usize,
    /// Keys kept because their item was rewritten meanwhile.
    kept: usize,
    /// Keys whose item hides an older item of another region that could
    /// still be served.
    held: usize,
    /// Items of other regions past the retention, left alone, per origin.
    foreign: BTreeMap<String, usize>,
    items: Vec<Candidate>,
}

pub(super) async fn run(global: &GlobalArgs, args: &GcArgs) -> anyhow::Result<Exit> {
    let retention =
        checked_retention(args.retention.retention_secs, global.store.skew_allowance_ms)?;
    let store = open_checked(global, retention).await?;
    let now = crate::now_ms();
    let scanned = scan(&store, &Progress::counter("scanning")).await?;
    let view = scanned.view(global.store.skew_allowance_ms, now);
    let retention_ms = args.retention.retention_secs.saturating_mul(1000);
    let past = past_retention(&scanned, &view, global.store.skew_allowance_ms, retention_ms, now);
    let Plan { candidates: mut items, foreign } =
        plan(past, store.origin(), global.store.skew_allowance_ms, retention_ms, now);
    let held = items.iter().filter(|c| c.outcome == "held").count();
    let mut collected = Collected {
        table: store.table().to_owned(),
        region: store.origin().to_owned(),
        dry_run: args.dry_run,
        retention_secs: args.retention.retention_secs,
        deleted: 0,
        kept: 0,
        held,
        foreign,
        items: vec![],
    };
    if !args.dry_run {
        let progress = Progress::bar("deleting", (items.len() - held) as u64);
        for candidate in items.iter_mut().filter(|c| c.outcome != "held") {
            let (record, item) = &candidate.item;
            let deleted = store
                .delete_if_unchanged(record, item)
                .await
                .with_context(|| format!("deleting {}", record.key))?;
            if deleted {
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
    let items = |n| output::count(n, "item", "items");
    if c.dry_run {
        text.push_str(&format!(
            "dry run: would delete {} of {} in {} past the retention ({retention}); deleted nothing",
            items(c.items.len() - c.held),
            c.region,
            c.table,
        ));
    } else {
        text.push_str(&format!(
            "deleted {} of {} in {} past the retention ({retention}); kept {} rewritten meanwhile",
            items(c.deleted),
            c.region,
            c.table,
            c.kept
        ));
    }
    if c.held > 0 {
        text.push_str(&format!(
            "; held {} hiding an older item of another region that could still be served",
            c.held
        ));
    }
    text.push('\n');
    let foreign: usize = c.foreign.values().sum();
    let per_origin: Vec<String> = c.foreign.iter().map(|(o, n)| format!("{o}: {n}")).collect();
    text.push_str(&format!("left {} of other regions alone", items(foreign)));
    if foreign > 0 {
        text.push_str(&format!(
            " ({}): run mcs-admin gc in {}",
            per_origin.join(", "),
            if c.foreign.len() == 1 { "that region" } else { "each of them" }
        ));
    }
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::view_of;
    use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};
    use mcs_store::dynamo::raw;

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
            // Its cluster's lease runs: kept, however old.
            mk_cluster("up", 1, "inc", NOW + 30_000),
            at(mk_export("up", "web", 1, mk_export_spec(0, vec![])), NOW - 30 * DAY),
            // Its cluster withdrawn within the retention: kept for now.
            at(mk_tombstone("x", 1, "w").with_key(cluster_key("recent")), NOW - 60_000),
            at(mk_export("recent", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
            // Its cluster withdrawn past the retention: collected.
            at(mk_tombstone("x", 1, "w").with_key(cluster_key("gone")), NOW - 2 * DAY),
            at(mk_export("gone", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY),
            // No cluster record: by its own write.
            at(mk_export("none", "old", 1, mk_export_spec(0, vec![])), NOW - 2 * DAY),
            at(mk_export("none", "new", 1, mk_export_spec(0, vec![])), NOW - 60_000),
        ];
        let scan = Scan {
            records: records.iter().map(|r| (r.clone(), Default::default())).collect(),
            ..Scan::default()
        };
        let view = view_of(records, 1_000, NOW);
        let mut found: Vec<(String, Reason)> = past_retention(&scan, &view, 1_000, DAY, NOW)
            .into_iter()
            .map(|c| (c.key.to_string(), c.reason))
            .collect();
        found.sort();
        let mut want = vec![
            (format!("pool/{}", mcs_core::fixtures::pool_key("old").id()), Reason::Expired),
            (format!("pool/{}", mcs_core::fixtures::pool_key("buried").id()), Reason::Withdrawn),
            ("cluster/c1".to_owned(), Reason::Expired),
            ("cluster/gone".to_owned(), Reason::Withdrawn),
            ("export/c1/llm/web".to_owned(), Reason::ClusterNotLive),
            ("export/gone/llm/web".to_owned(), Reason::ClusterNotLive),
            ("export/none/llm/old".to_owned(), Reason::ClusterNotLive),
        ];
        want.sort();
        assert_eq!(found, want, "an orphaned export expires with its cluster");
        assert!(past_retention(&scan, &view, 1_000, 4 * DAY, NOW).is_empty());
        // Without retention, a record within the skew allowance is still live.
        let skewed = vec![mk_pool("skewed", 1, "w", None, Some(NOW - 500))];
        let scan = Scan {
            records: skewed.iter().map(|r| (r.clone(), Default::default())).collect(),
            ..Scan::default()
        };
        assert!(past_retention(&scan, &view_of(skewed, 1_000, NOW), 1_000, 0, NOW).is_empty());
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
        assert!(!store.delete_if_unchanged(&read, &item).await.unwrap(), "rewritten: kept");
        assert_eq!(store.get(&read.key).await.unwrap(), Some(renewed.clone()));
        let item =
            crate::scan::scan(&store, &Progress::hidden()).await.unwrap().records[0].1.clone();
        assert!(store.delete_if_unchanged(&renewed, &item).await.unwrap());
        assert_eq!(store.get(&read.key).await.unwrap(), None);
    }

    /// `records`, each stored as an item of the origin beside it.
    fn scan_of(records: &[(&Record, &str)]) -> (Scan, View) {
        let scan = Scan {
            records: records
                .iter()
                .map(|(r, from)| ((*r).clone(), raw::primary_key(&r.key, from)))
                .collect(),
            ..Scan::default()
        };
        let view = view_of(records.iter().map(|(r, _)| (*r).clone()), 1_000, NOW);
        (scan, view)
    }

    fn plan_in(scan: &Scan, view: &View, origin: &str) -> Plan {
        plan(past_retention(scan, view, 1_000, DAY, NOW), origin, 1_000, DAY, NOW)
    }

    #[test]
    fn gc_deletes_only_the_items_of_its_own_region() {
        // Withdrawn in eu-west-1 two days ago over an expired item of
        // us-east-1; another key withdrawn in eu-west-1 only.
        let tomb = at(mk_tombstone("p", 5, "w"), NOW - 2 * DAY);
        let older = mk_pool("p", 3, "w", Some("relay"), Some(NOW - 3 * DAY));
        let theirs = at(mk_tombstone("q", 2, "w"), NOW - 2 * DAY);
        let (scan, view) =
            scan_of(&[(&tomb, "eu-west-1"), (&older, "us-east-1"), (&theirs, "eu-west-1")]);
        let here = plan_in(&scan, &view, "us-east-1");
        assert_eq!(here.candidates.len(), 1, "{:?}", here.candidates);
        let only = &here.candidates[0];
        assert_eq!((only.reason, only.outcome), (Reason::Withdrawn, "would_delete"));
        assert_eq!(only.origins, vec!["us-east-1", "eu-west-1"], "oldest first");
        assert_eq!(only.item.0, older, "this region's item, not the tombstone of eu-west-1");
        assert_eq!(here.foreign, BTreeMap::from([("eu-west-1".to_owned(), 2)]));
        // In eu-west-1 the same table plans the other two items.
        let there = plan_in(&scan, &view, "eu-west-1");
        let deleted: Vec<&Record> = there.candidates.iter().map(|c| &c.item.0).collect();
        assert_eq!(deleted.len(), 2);
        assert!(deleted.contains(&&tomb) && deleted.contains(&&theirs), "{deleted:?}");
        assert!(there.candidates.iter().all(|c| c.outcome == "would_delete"));
        assert_eq!(there.foreign, BTreeMap::from([("us-east-1".to_owned(), 1)]));
    }

    fn cluster_key(cluster: &str) -> Key {
        Key::Cluster { cluster_id: mcs_core::fixtures::label(cluster) }
    }

    trait WithKey {
        fn with_key(self, key: Key) -> Self;
    }

    impl WithKey for Record {
        fn with_key(mut self, key: Key) -> Self {
            self.key = key;
            self
        }
    }

    #[test]
    fn an_item_hiding_a_live_item_of_another_region_is_held() {
        // Withdrawn here two days ago; eu-west-1 still holds an older export
        // (of a cluster whose lease runs: it would be served) and an older
        // pool leased beyond the tombstone's retention.
        let cluster = mk_cluster("c1", 1, "inc", NOW + DAY);
        let tomb = at(mk_tombstone("p", 5, "w"), NOW - 2 * DAY);
        let leased = mk_pool("p", 3, "w", Some("relay"), Some(NOW + DAY));
        let export = at(mk_export("c1", "web", 1, mk_export_spec(0, vec![])), NOW - 3 * DAY);
        let mut withdrawn = at(mk_export("c1", "web", 2, mk_export_spec(0, vec![])), NOW - 2 * DAY);
        withdrawn.body = mcs_core::Body::Tombstone;
        let (scan, view) = scan_of(&[
            (&tomb, "us-east-1"),
            (&leased, "eu-west-1"),
            (&withdrawn, "us-east-1"),
            (&export, "eu-west-1"),
            (&cluster, "eu-west-1"),
        ]);
        let here = plan_in(&scan, &view, "us-east-1");
        let outcomes: Vec<&str> = here.candidates.iter().map(|c| c.outcome).collect();
        assert_eq!(outcomes, vec!["held", "held"], "{:?}", here.candidates);
        // gc in eu-west-1 deletes the hidden items first; then here goes.
        let there = plan_in(&scan, &view, "eu-west-1");
        assert!(there.candidates.iter().all(|c| c.outcome == "would_delete"));
        assert_eq!(there.candidates.len(), 2);
        // Had the cluster been gone for the retention, the older export
        // could never be served again: nothing to hold.
        let (scan, view) = scan_of(&[(&withdrawn, "us-east-1"), (&export, "eu-west-1")]);
        let orphan = plan_in(&scan, &view, "us-east-1");
        assert_eq!(orphan.candidates.len(), 1);
        assert_eq!(orphan.candidates[0].outcome, "would_delete", "{:?}", orphan.candidates);
        let (scan, view) = scan_of(&[(&tomb, "us-east-1"), (&withdrawn, "us-east-1")]);
        let after = plan_in(&scan, &view, "us-east-1");
        assert!(after.candidates.iter().all(|c| c.outcome == "would_delete"));
        assert_eq!(after.candidates.len(), 2);
    }

    #[test]
    fn the_summary_counts_what_other_regions_hold() {
        let c = Collected {
            table: "t".into(),
            region: "us-east-1".into(),
            dry_run: false,
            retention_secs: 172_800,
            deleted: 2,
            kept: 0,
            held: 1,
            foreign: BTreeMap::from([("ap-south-1".to_owned(), 1), ("eu-west-1".to_owned(), 3)]),
            items: vec![],
        };
        assert_eq!(
            render(&c, Format::Table, NOW).unwrap(),
            "deleted 2 items of us-east-1 in t past the retention (172800s); kept 0 rewritten \
             meanwhile; held 1 hiding an older item of another region that could still be \
             served\nleft 4 items of other regions alone (ap-south-1: 1, eu-west-1: 3): run \
             mcs-admin gc in each of them\n"
        );
    }
}
