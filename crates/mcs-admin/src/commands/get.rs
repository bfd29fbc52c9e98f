//! `get KIND KEY`: one record, as the registry reads it (the record merged
//! from the key's items, with whether it is served) and as DynamoDB holds it
//! (every item of the key, one per region that wrote it, attribute by
//! attribute). Exit 1 when an item cannot be read.

use super::{DEFAULT_RETENTION, open_checked};
use crate::cli::{GetArgs, GlobalArgs, RecordKind};
use crate::liveness::{Reason, reason_of};
use crate::output::{self, Format, Table, attribute_cell, attribute_json};
use crate::scan::{origin, view_of};
use crate::{Exit, UsageError};
use mcs_api::{ExportKey, Label, PoolId, PoolKey, RouterId};
use mcs_core::{Key, Record};
use mcs_store::Store;
use mcs_store::dynamo::raw::{self, Item};
use serde::Serialize;

/// Parses KEY for KIND: a pool id (or `cluster_id/namespace/dgd_name`), a
/// router id, a cluster id, or `cluster_id/namespace/name` for an export.
pub(crate) fn parse_key(kind: RecordKind, text: &str) -> Result<Key, UsageError> {
    let invalid =
        |detail: String| UsageError::invalid(format!("invalid {kind} key {text:?}: {detail}"));
    let three = || -> Result<(Label, Label, Label), String> {
        let parts: Vec<&str> = text.split('/').collect();
        let [a, b, c] = parts.as_slice() else {
            return Err("expected three parts separated by '/'".to_owned());
        };
        Ok((Label::new(*a)?, Label::new(*b)?, Label::new(*c)?))
    };
    match kind {
        RecordKind::Pool if text.contains('/') => {
            let (cluster_id, namespace, dgd_name) = three().map_err(invalid)?;
            Ok(Key::Pool { pool_id: PoolKey { cluster_id, namespace, dgd_name }.id() })
        }
        RecordKind::Pool => Ok(Key::Pool { pool_id: PoolId::parse(text).map_err(invalid)? }),
        RecordKind::Router => Ok(Key::Router { router_id: RouterId::new(text).map_err(invalid)? }),
        RecordKind::Cluster => Ok(Key::Cluster { cluster_id: Label::new(text).map_err(invalid)? }),
        RecordKind::Export => {
            let (cluster_id, namespace, name) = three().map_err(invalid)?;
            Ok(Key::Export(ExportKey { cluster_id, namespace, name }))
        }
    }
}

/// What `get -o json|yaml` prints.
#[derive(Debug, Serialize)]
struct Found {
    key: String,
    /// Whether it is served, and why not; `None` when no item can be read.
    reason: Option<Reason>,
    /// The record the registry merges from the items: the highest version.
    record: Option<Record>,
    /// Every item of the key, one per region that wrote it.
    items: Vec<StoredItem>,
}

/// One item of the key.
#[derive(Debug, Serialize)]
struct StoredItem {
    /// The region that wrote it.
    origin: String,
    /// It, decoded.
    record: Option<Record>,
    /// Why it cannot be read, if it cannot.
    error: Option<String>,
    /// Its attributes in DynamoDB JSON, sorted by name.
    attributes: serde_json::Map<String, serde_json::Value>,
    #[serde(skip)]
    raw: Item,
}

pub(super) async fn run(global: &GlobalArgs, args: &GetArgs) -> anyhow::Result<Exit> {
    let key = parse_key(args.kind, &args.key)?;
    let store = open_checked(global, DEFAULT_RETENTION).await?;
    let raw_items = store.items_of(&key).await?;
    if raw_items.is_empty() {
        anyhow::bail!("no {key} in table {}", store.table());
    }
    let items: Vec<StoredItem> = raw_items
        .into_iter()
        .map(|item| {
            let (record, error) = match raw::decode(item.clone()) {
                Ok(record) => (Some(record), None),
                Err(e) => (None, Some(e.to_string())),
            };
            StoredItem {
                origin: origin(&item),
                record,
                error,
                attributes: item_json(&item),
                raw: item,
            }
        })
        .collect();
    let mut winner: Option<&Record> = None;
    for record in items.iter().filter_map(|i| i.record.as_ref()) {
        if winner.is_none_or(|w| record.supersedes(w)) {
            winner = Some(record);
        }
    }
    let now = crate::now_ms();
    let skew = global.store.skew_allowance_ms;
    let reason = match winner {
        Some(record) => {
            let mut records = vec![record.clone()];
            // An export lives on its cluster's lease; an unreadable cluster
            // item counts as none, as for the registry.
            if let Key::Export(k) = &record.key
                && let Ok(Some(cluster)) =
                    store.get(&Key::Cluster { cluster_id: k.cluster_id.clone() }).await
            {
                records.push(cluster);
            }
            Some(reason_of(&view_of(records, skew, now), record, skew, now))
        }
        None => None,
    };
    let found = Found { key: key.to_string(), reason, record: winner.cloned(), items };
    output::print(&render(&found, global.output, now)?)?;
    let unreadable: Vec<&StoredItem> = found.items.iter().filter(|i| i.error.is_some()).collect();
    for item in &unreadable {
        tracing::warn!("mcs-admin: {}", item.error.as_deref().unwrap_or_default());
    }
    Ok(if unreadable.is_empty() { Exit::Ok } else { Exit::Problem })
}

fn item_json(item: &Item) -> serde_json::Map<String, serde_json::Value> {
    let mut names: Vec<&String> = item.keys().collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), attribute_json(&item[n]))).collect()
}

fn render(found: &Found, format: Format, now_ms: u64) -> anyhow::Result<String> {
    if let Some(text) = output::structured(format, found)? {
        return Ok(text);
    }
    let dash = || "-".to_owned();
    let mut pairs = vec![("key", found.key.clone())];
    if let Some(reason) = found.reason {
        pairs.push(("reason", reason.to_string()));
    }
    if let Some(r) = &found.record {
        pairs.extend([
            ("version", r.version.to_string()),
            ("owner", r.owner.clone().unwrap_or_else(dash)),
            (
                "lease until",
                r.lease_until_ms.map_or_else(dash, |until| output::time(until, now_ms)),
            ),
            ("changed at", output::time(r.changed_at_ms, now_ms)),
            ("payload", serde_json::to_string(&r.body)?),
        ]);
    }
    pairs.push((
        "items",
        found.items.iter().map(|i| i.origin.as_str()).collect::<Vec<_>>().join(", "),
    ));
    let mut text = output::fields(pairs);
    for item in &found.items {
        let version = item.record.as_ref().map_or_else(dash, |r| r.version.to_string());
        text.push_str(&format!("\nitem of {} at version {version}\n", item.origin));
        if let Some(error) = &item.error {
            text.push_str(&format!("unreadable: {error}\n"));
        }
        let mut table = Table::new(["ATTRIBUTE", "TYPE", "VALUE"]);
        let mut names: Vec<&String> = item.raw.keys().collect();
        names.sort();
        for name in names {
            let (tag, value) = attribute_cell(&item.raw[name]);
            table.row([name.clone(), tag.to_owned(), value]);
        }
        text.push_str(&table.render());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_per_kind() {
        let id = "3677f1ffda5a8ecb71747eca0d38615c";
        assert_eq!(parse_key(RecordKind::Pool, id).unwrap().to_string(), format!("pool/{id}"));
        assert_eq!(
            parse_key(RecordKind::Pool, "us-east-1a/llm/llama").unwrap().to_string(),
            format!("pool/{id}"),
            "a pool key names its id"
        );
        assert_eq!(
            parse_key(RecordKind::Export, "east/llm/web").unwrap().to_string(),
            "export/east/llm/web"
        );
        assert_eq!(
            parse_key(RecordKind::Router, "gr-0.us-east-1").unwrap().to_string(),
            "router/gr-0.us-east-1"
        );
        assert_eq!(parse_key(RecordKind::Cluster, "east").unwrap().to_string(), "cluster/east");
        for (kind, bad) in [
            (RecordKind::Pool, "XYZ"),
            (RecordKind::Export, "east/llm"),
            (RecordKind::Export, "east/llm/Web"),
            (RecordKind::Cluster, "a/b"),
            (RecordKind::Router, "a..b"),
        ] {
            let err = parse_key(kind, bad).unwrap_err();
            assert!(err.message.starts_with(&format!("invalid {kind} key")), "{err}");
        }
    }
}
