//! `watch SECTION --registry URL`: tails a section of a registry through
//! its long-poll list watch (mcs-client's `watch`: nothing before the first
//! complete list, then every list whose `ETag` moved). The first list is
//! printed as `present` lines, then each change as an `added`, `changed`
//! (naming the fields that changed) or `removed` line with the time and
//! the item's owner, and a flip of `complete` as its own line; until
//! interrupted (exit 0). `-o json|yaml`: one JSON object a line, with the
//! item.

use crate::Exit;
use crate::cli::{GlobalArgs, WatchArgs};
use crate::output::{self, Format};
use mcs_api::{ClusterList, ExportList, ImportList, PoolList, RouterList};
use mcs_client::{CancellationToken, Client, Section};
use mcs_core::SectionKind;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// An item of a list: its owner and the item as served.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    /// Who holds it, as the list tells: a pool's or export's cluster, a
    /// cluster's incarnation, a router replica itself, an import's
    /// exporting clusters.
    owner: String,
    value: Value,
}

/// A list's items by a readable key.
pub(crate) type Items = BTreeMap<String, Item>;

/// The lists `watch` follows.
pub(crate) trait Listed: Section {
    /// Its items by key.
    fn items(&self) -> Items;
}

fn item<T: Serialize>(owner: impl Into<String>, value: &T) -> Item {
    Item { owner: owner.into(), value: serde_json::to_value(value).unwrap_or(Value::Null) }
}

impl Listed for PoolList {
    fn items(&self) -> Items {
        let key = |p: &mcs_api::Pool| {
            let k = &p.pool_key;
            format!("{}/{}/{}", k.cluster_id, k.namespace, k.dgd_name)
        };
        self.pools.iter().map(|p| (key(p), item(p.pool_key.cluster_id.as_str(), p))).collect()
    }
}

impl Listed for RouterList {
    fn items(&self) -> Items {
        self.routers
            .iter()
            .map(|r| (r.router_id.to_string(), item(r.router_id.to_string(), r)))
            .collect()
    }
}

impl Listed for ClusterList {
    fn items(&self) -> Items {
        self.clusters
            .iter()
            .map(|c| (c.cluster_id.to_string(), item(c.incarnation.as_str(), c)))
            .collect()
    }
}

impl Listed for ExportList {
    fn items(&self) -> Items {
        self.exports
            .iter()
            .map(|e| {
                (
                    format!("{}/{}/{}", e.cluster_id, e.namespace, e.name),
                    item(e.cluster_id.as_str(), e),
                )
            })
            .collect()
    }
}

impl Listed for ImportList {
    fn items(&self) -> Items {
        self.imports
            .iter()
            .map(|i| {
                let clusters: Vec<&str> =
                    i.clusters.iter().map(|c| c.cluster_id.as_str()).collect();
                (format!("{}/{}", i.namespace, i.name), item(clusters.join(","), i))
            })
            .collect()
    }
}

/// What happened to one item between two lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum What {
    /// In the first list.
    Present,
    /// New.
    Added,
    /// Served with other content: the top-level fields that differ.
    Changed(Vec<String>),
    /// No longer served.
    Removed,
}

/// One line of `watch`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub what: What,
    pub key: String,
    pub owner: String,
    /// The item as served now (as last served, when removed).
    pub item: Value,
}

/// The changes from `before` to `after`, by key; every item of `after` is
/// `present` when `first`.
pub(crate) fn changes(before: &Items, after: &Items, first: bool) -> Vec<Change> {
    let change = |what, key: &str, item: &Item| Change {
        what,
        key: key.to_owned(),
        owner: item.owner.clone(),
        item: item.value.clone(),
    };
    if first {
        return after.iter().map(|(k, i)| change(What::Present, k, i)).collect();
    }
    let mut found = Vec::new();
    for (key, now) in after {
        match before.get(key) {
            None => found.push(change(What::Added, key, now)),
            Some(was) if was.value != now.value => {
                found.push(change(What::Changed(fields_changed(&was.value, &now.value)), key, now));
            }
            Some(_) => {}
        }
    }
    for (key, was) in before {
        if !after.contains_key(key) {
            found.push(change(What::Removed, key, was));
        }
    }
    found
}

/// The top-level fields of two objects that differ, in order.
fn fields_changed(was: &Value, now: &Value) -> Vec<String> {
    let empty = serde_json::Map::new();
    let (was, now) = (was.as_object().unwrap_or(&empty), now.as_object().unwrap_or(&empty));
    let mut names: Vec<&String> = was.keys().chain(now.keys()).collect();
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| was.get(*n) != now.get(*n)).cloned().collect()
}

/// One change as a line: `TIME  WHAT  SECTION  KEY  owner=OWNER`, or, in
/// JSON, `{time, change, section, key, owner, item}`.
pub(crate) fn line(format: Format, time: &str, section: &str, c: &Change) -> String {
    if matches!(format, Format::Json | Format::Yaml) {
        let (what, fields) = match &c.what {
            What::Present => ("present", None),
            What::Added => ("added", None),
            What::Changed(fields) => ("changed", Some(fields)),
            What::Removed => ("removed", None),
        };
        let mut object = serde_json::json!({
            "time": time, "change": what, "section": section, "key": c.key, "owner": c.owner,
            "item": c.item,
        });
        if let Some(fields) = fields {
            object["fields"] = serde_json::json!(fields);
        }
        return format!("{object}\n");
    }
    let what = match &c.what {
        What::Present => "present".to_owned(),
        What::Added => "added".to_owned(),
        What::Changed(fields) => format!("changed ({})", fields.join(", ")),
        What::Removed => "removed".to_owned(),
    };
    format!("{time}  {what:<8}  {section}  {}  owner={}\n", c.key, c.owner)
}

pub(super) async fn run(global: &GlobalArgs, args: &WatchArgs) -> anyhow::Result<Exit> {
    let client = super::status::client(&args.registry)?;
    let format = global.output;
    match args.section {
        SectionKind::Pools => follow::<PoolList>(client, args.section, format).await,
        SectionKind::Routers => follow::<RouterList>(client, args.section, format).await,
        SectionKind::Clusters => follow::<ClusterList>(client, args.section, format).await,
        SectionKind::Exports => follow::<ExportList>(client, args.section, format).await,
        SectionKind::Imports => follow::<ImportList>(client, args.section, format).await,
    }
}

/// The time of a line: now, RFC 3339 to the millisecond.
fn now() -> String {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Millisecond).unwrap_or(now).to_string()
}

async fn follow<L: Listed>(
    client: Client,
    section: SectionKind,
    format: Format,
) -> anyhow::Result<Exit> {
    let stop = CancellationToken::new();
    let mut lists = client.watch::<L>(stop.clone());
    let mut held: Option<(Items, bool)> = None;
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let list = tokio::select! {
            _ = &mut interrupted => break,
            list = lists.next() => list,
        };
        let Some(list) = list else { break };
        let list = list?;
        let items = list.items();
        let first = held.is_none();
        let (before, was_complete) = held.take().unwrap_or_default();
        let time = now();
        let mut text: String = changes(&before, &items, first)
            .iter()
            .map(|c| line(format, &time, section.name(), c))
            .collect();
        if first || was_complete != list.complete() {
            text.push_str(&if matches!(format, Format::Json | Format::Yaml) {
                format!(
                    "{}\n",
                    serde_json::json!({"time": time, "section": section.name(), "complete": list.complete()})
                )
            } else {
                format!("{time}  complete={}  {}  ({} items)\n", list.complete(), section.name(), items.len())
            });
        }
        output::print(&text)?;
        held = Some((items, list.complete()));
    }
    stop.cancel();
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(entries: &[(&str, &str, Value)]) -> Items {
        entries
            .iter()
            .map(|(k, o, v)| ((*k).to_owned(), Item { owner: (*o).to_owned(), value: v.clone() }))
            .collect()
    }

    #[test]
    fn the_first_list_is_present_then_changes_are_added_changed_removed() {
        let one =
            items(&[("a", "east", json!({"w": 1, "m": "x"})), ("b", "west", json!({"w": 2}))]);
        let first = changes(&Items::new(), &one, true);
        assert_eq!(
            first.iter().map(|c| &c.what).collect::<Vec<_>>(),
            [&What::Present, &What::Present]
        );
        let two =
            items(&[("a", "east", json!({"w": 4, "m": "x"})), ("c", "east", json!({"w": 3}))]);
        let found = changes(&one, &two, false);
        let seen: Vec<(&What, &str, &str)> =
            found.iter().map(|c| (&c.what, c.key.as_str(), c.owner.as_str())).collect();
        assert_eq!(
            seen,
            [
                (&What::Changed(vec!["w".into()]), "a", "east"),
                (&What::Added, "c", "east"),
                (&What::Removed, "b", "west"),
            ]
        );
        assert_eq!(found[2].item, json!({"w": 2}), "a removed item as last served");
        assert!(changes(&two, &two, false).is_empty(), "nothing changed, nothing said");
    }

    #[test]
    fn changed_fields_include_those_added_and_dropped() {
        assert_eq!(
            fields_changed(&json!({"a": 1, "b": 2, "c": 3}), &json!({"a": 1, "b": 5, "d": 4})),
            ["b", "c", "d"]
        );
    }

    #[test]
    fn lines_carry_time_change_section_key_and_owner() {
        let change = Change {
            what: What::Changed(vec!["capacity".into()]),
            key: "east/llm/a".into(),
            owner: "east".into(),
            item: json!({"x": 1}),
        };
        assert_eq!(
            line(Format::Table, "T", "pools", &change),
            "T  changed (capacity)  pools  east/llm/a  owner=east\n"
        );
        let removed = Change { what: What::Removed, ..change.clone() };
        assert_eq!(
            line(Format::Table, "T", "pools", &removed),
            "T  removed   pools  east/llm/a  owner=east\n"
        );
        let json: Value = serde_json::from_str(&line(Format::Json, "T", "pools", &change)).unwrap();
        assert_eq!(
            json,
            json!({"time": "T", "change": "changed", "section": "pools", "key": "east/llm/a",
                   "owner": "east", "item": {"x": 1}, "fields": ["capacity"]})
        );
    }
}
