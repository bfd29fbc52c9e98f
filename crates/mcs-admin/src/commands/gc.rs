//! `gc [--dry-run] [--retention-secs N]`: deletes what DynamoDB's TTL would
//! delete, for tables without TTL (DynamoDB Local, moto, or TTL turned off):
//! tombstones and expired records whose expiry (a tombstone's write, a
//! lease's end) is more than the retention ago. And what TTL never deletes:
//! exports of a cluster whose lease is gone. An export lives on its
//! cluster's lease and carries no `ttl` (the cluster renews its own item
//! only), so its expiry is derived from its cluster's merged record
//! ([`Record::expires_at_ms_on`]): the later of the cluster's lease end or
//! withdrawal and the export's own last write. Nor does TTL delete an
//! export's tombstone (`mcs_core::rules::ttl_expires_at_ms`, issue 22):
//! only gc's hold below keeps it while an older export item of another
//! region could be served. Run gc on every table, TTL or not, or orphaned
//! exports and withdrawn ones stay for good.
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
mod tests;
