//! `describe`: the table's schema version, its items counted by kind and
//! state, and what DynamoDB says of it (its indexes, TTL, the stream, the
//! replicas of a global table). An index the table's schema version needs
//! (its migrations declared it) and the table lacks is shown `missing`.

use super::DEFAULT_RETENTION;
use crate::Exit;
use crate::cli::GlobalArgs;
use crate::connect::Location;
use crate::liveness::{Reason, reason_of};
use crate::output::{self, Format, Table};
use crate::progress::Progress;
use crate::scan::{Scan, origin, scan};
use mcs_core::{Kind, View};
use mcs_store::DynamoStore;
use mcs_store::dynamo::{INDEX_MISSING, SCHEMA_VERSION, TableFacts, indexes_declared_up_to};
use serde::Serialize;
use std::collections::BTreeMap;

/// Records (keys, merged from their items) of one kind, by state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
struct KindCount {
    kind: Kind,
    /// Served.
    live: usize,
    /// Not served and not withdrawn: the lease passed (for exports, the
    /// cluster's).
    expired: usize,
    /// Withdrawn.
    tombstone: usize,
}

/// What `describe` prints.
#[derive(Debug, Serialize)]
struct Description {
    table: String,
    region: Option<String>,
    schema_version: Option<u32>,
    binary_schema_version: u32,
    #[serde(flatten)]
    facts: TableFacts,
    items: Vec<KindCount>,
    /// Items per region that wrote them (a key has one item per region).
    origins: BTreeMap<String, usize>,
    unreadable: usize,
}

/// What `describe` and `doctor` read of the table of the global flags,
/// opened without the schema check (both report the schema version).
pub(super) struct Inspected {
    pub location: Location,
    pub store: DynamoStore,
    pub facts: TableFacts,
    pub schema_version: Option<u32>,
    /// The indexes the table's schema version needs ([`needed_indexes`]).
    pub needed_indexes: Vec<String>,
    pub scanned: Scan,
    /// The view of `scanned` at `now`.
    pub view: View,
    pub now: u64,
}

/// Opens the table, asks DynamoDB about it, reads its schema version and
/// scans it (with a progress counter).
pub(super) async fn inspect(global: &GlobalArgs) -> anyhow::Result<Inspected> {
    let location = Location::of(global)?;
    let store = location.open(DEFAULT_RETENTION).await?;
    let facts = store.table_facts().await?;
    let schema_version = store.schema_version().await?;
    let needed_indexes = needed_indexes(schema_version)?;
    let now = crate::now_ms();
    let scanned = scan(&store, &Progress::counter("scanning")).await?;
    let view = scanned.view(global.store.skew_allowance_ms, now);
    Ok(Inspected { location, store, facts, schema_version, needed_indexes, scanned, view, now })
}

/// The indexes a table at `schema_version` needs, in the order its
/// migrations declared them. A table without a version needs what
/// `migrate` gives it (this binary's); a newer one every index this binary
/// knows.
pub(super) fn needed_indexes(schema_version: Option<u32>) -> anyhow::Result<Vec<String>> {
    Ok(indexes_declared_up_to(schema_version.unwrap_or(SCHEMA_VERSION))?)
}

pub(super) async fn run(global: &GlobalArgs) -> anyhow::Result<Exit> {
    let Inspected {
        location, mut facts, schema_version, needed_indexes, scanned, view, now, ..
    } = inspect(global).await?;
    mark_missing(&mut facts, needed_indexes);
    let description = Description {
        table: location.table.clone(),
        region: location.region.clone(),
        schema_version,
        binary_schema_version: SCHEMA_VERSION,
        facts,
        items: count_by_kind(&view, global.store.skew_allowance_ms, now),
        origins: origins(&scanned),
        unreadable: scanned.unreadable.len(),
    };
    output::print(&render(&description, global.output)?)?;
    Ok(Exit::Ok)
}

/// Adds each of the `needed` indexes that the table lacks to its indexes,
/// as `missing`.
fn mark_missing(facts: &mut TableFacts, needed: Vec<String>) {
    for name in needed {
        facts.indexes.entry(name).or_insert_with(|| INDEX_MISSING.to_owned());
    }
}

/// `entries` joined by `, `; `none` when there are none.
fn listed(none: &str, entries: impl Iterator<Item = String>) -> String {
    let entries: Vec<String> = entries.collect();
    if entries.is_empty() { none.to_owned() } else { entries.join(", ") }
}

fn origins(scanned: &Scan) -> BTreeMap<String, usize> {
    let mut origins = BTreeMap::new();
    for (_, item) in &scanned.records {
        *origins.entry(origin(item)).or_insert(0) += 1;
    }
    origins
}

fn count_by_kind(view: &View, skew_ms: u64, now_ms: u64) -> Vec<KindCount> {
    Kind::ALL
        .iter()
        .map(|&kind| {
            let mut c = KindCount { kind, live: 0, expired: 0, tombstone: 0 };
            for record in view.records().filter(|r| r.key.kind() == kind) {
                match reason_of(view, record, skew_ms, now_ms) {
                    Reason::Live => c.live += 1,
                    Reason::Withdrawn => c.tombstone += 1,
                    Reason::Expired | Reason::ClusterNotLive | Reason::NotServed => c.expired += 1,
                }
            }
            c
        })
        .collect()
}

fn render(d: &Description, format: Format) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, d)? {
        return Ok(text);
    }
    let f = &d.facts;
    let schema = match d.schema_version {
        Some(v) => format!("{v} (this binary: {})", d.binary_schema_version),
        None => format!("none: run mcs-admin migrate (this binary: {})", d.binary_schema_version),
    };
    let ttl = match &f.ttl_attribute {
        Some(attribute) => format!("{} on {attribute}", f.ttl_status),
        None => f.ttl_status.clone(),
    };
    let stream = match (f.stream_enabled, &f.stream_view_type) {
        (true, Some(view)) => view.clone(),
        (true, None) => "enabled".to_owned(),
        (false, _) => "disabled".to_owned(),
    };
    let replicas = listed(
        "none (not a global table)",
        f.replicas.iter().map(|r| format!("{} {}", r.region, r.status)),
    );
    let indexes = listed("none", f.indexes.iter().map(|(name, state)| format!("{name} {state}")));
    let origins_text = listed("none", d.origins.iter().map(|(o, n)| format!("{o} {n}")));
    let mut text = output::fields([
        ("table", d.table.clone()),
        ("region", d.region.clone().unwrap_or_else(|| "(AWS default chain)".to_owned())),
        ("status", f.status.clone()),
        ("schema version", schema),
        ("indexes", indexes),
        ("ttl", ttl),
        ("stream", stream),
        ("stream arn", f.stream_arn.clone().unwrap_or_else(|| "-".to_owned())),
        ("replicas", replicas),
        ("items by origin", origins_text),
        ("unreadable items", d.unreadable.to_string()),
    ]);
    let mut table = Table::new(["KIND", "LIVE", "EXPIRED", "TOMBSTONE"]);
    for c in &d.items {
        table.row([
            c.kind.to_string(),
            c.live.to_string(),
            c.expired.to_string(),
            c.tombstone.to_string(),
        ]);
    }
    text.push('\n');
    text.push_str(&table.render());
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::view_of;
    use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};

    #[test]
    fn counts_by_kind_and_state() {
        let now = 1_000_000;
        let records = vec![
            mk_pool("a", 1, "w", None, Some(now + 1_000)),
            mk_pool("b", 1, "w", None, Some(now - 5_000)),
            mk_tombstone("c", 1, "w"),
            mk_cluster("c1", 1, "inc", now - 5_000),
            mk_export("c1", "web", 1, mk_export_spec(0, vec![])),
        ];
        let view = view_of(records, 0, now);
        let counts = count_by_kind(&view, 0, now);
        let get = |kind| *counts.iter().find(|c| c.kind == kind).unwrap();
        assert_eq!(
            get(Kind::Pool),
            KindCount { kind: Kind::Pool, live: 1, expired: 1, tombstone: 1 }
        );
        assert_eq!(get(Kind::Cluster).expired, 1);
        assert_eq!(get(Kind::Export).expired, 1, "its cluster is not live");
        assert_eq!(
            get(Kind::Router),
            KindCount { kind: Kind::Router, live: 0, expired: 0, tombstone: 0 }
        );
    }

    #[test]
    fn every_index_is_shown_with_its_state_and_a_needed_one_lacking_as_missing() {
        let mut facts = TableFacts::default();
        facts.indexes.insert("changes".into(), "ACTIVE".into());
        facts.indexes.insert("change_stamps".into(), "CREATING (backfilling)".into());
        mark_missing(&mut facts, needed_indexes(Some(3)).unwrap());
        let d = Description {
            table: "t".into(),
            region: None,
            schema_version: Some(3),
            binary_schema_version: SCHEMA_VERSION,
            facts,
            items: vec![],
            origins: BTreeMap::new(),
            unreadable: 0,
        };
        let text = render(&d, Format::Table).unwrap();
        let want = "indexes           change_stamps CREATING (backfilling), changes ACTIVE, \
                    lease_ends missing";
        assert!(text.lines().any(|l| l == want), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&render(&d, Format::Json).unwrap()).unwrap();
        assert_eq!(
            json["indexes"],
            serde_json::json!({
                "change_stamps": "CREATING (backfilling)",
                "changes": "ACTIVE",
                "lease_ends": "missing"
            })
        );
    }
}
