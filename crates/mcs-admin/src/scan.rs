//! Reading the whole table: the raw items (for the attributes a record does
//! not carry, such as `ttl`), decoded exactly as the store decodes them, and
//! the [`View`] built from them as the registry builds its own.

use crate::progress::Progress;
use mcs_core::{Record, View};
use mcs_store::DynamoStore;
use mcs_store::dynamo::raw::{self, AttributeValue, Item};
use std::sync::Arc;

/// An item this binary cannot read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    /// Its partition key.
    pub pk: String,
    /// Its sort key.
    pub sk: String,
    /// Why it cannot be read.
    pub reason: String,
}

/// Every item of a table, sorted by key, then origin. A record key has one
/// item per region that wrote it (its origin); the view merges them.
#[derive(Debug, Default)]
pub struct Scan {
    /// The records with the items that store them, one per item.
    pub records: Vec<(Record, Item)>,
    /// Items that are neither a record nor the schema item.
    pub unreadable: Vec<Unreadable>,
    /// The schema (`META`) item, if any.
    pub meta: Option<Item>,
}

impl Scan {
    /// Sorts raw items into records, unreadable items and the schema item.
    pub fn from_items(items: Vec<Item>) -> Self {
        let mut scan = Scan::default();
        for item in items {
            if raw::is_meta(&item) {
                scan.meta = Some(item);
                continue;
            }
            match raw::decode(item.clone()) {
                Ok(record) => scan.records.push((record, item)),
                Err(e) => scan.unreadable.push(Unreadable {
                    pk: string_attribute(&item, raw::PK),
                    sk: string_attribute(&item, raw::SK),
                    reason: e.to_string(),
                }),
            }
        }
        scan.records.sort_by(|a, b| {
            (&a.0.key, string_attribute(&a.1, raw::SK))
                .cmp(&(&b.0.key, string_attribute(&b.1, raw::SK)))
        });
        scan.unreadable.sort_by(|a, b| (&a.pk, &a.sk).cmp(&(&b.pk, &b.sk)));
        scan
    }

    /// The view of these records at `now_ms`.
    pub fn view(&self, skew_ms: u64, now_ms: u64) -> View {
        view_of(self.records.iter().map(|(r, _)| r.clone()), skew_ms, now_ms)
    }
}

/// The region that wrote `item` (its origin), or `?`.
pub fn origin(item: &Item) -> String {
    raw::origin_of(item).unwrap_or_else(|| "?".to_owned())
}

/// A string attribute of `item`, or empty.
pub fn string_attribute(item: &Item, name: &str) -> String {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        _ => String::new(),
    }
}

/// A numeric attribute of `item` as u64, if present and one.
pub fn number_attribute(item: &Item, name: &str) -> Option<u64> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

/// The view a registry would serve at `now_ms` after a full read of
/// `records`: the same merge, the same liveness.
pub fn view_of(records: impl IntoIterator<Item = Record>, skew_ms: u64, now_ms: u64) -> View {
    let mut view = View::new(skew_ms);
    view.replace_all(records, now_ms, now_ms);
    view
}

/// Every item of the store's table: the store's own consistent, paginated,
/// parallel scan, counted on `progress`.
pub async fn scan(store: &DynamoStore, progress: &Progress) -> anyhow::Result<Scan> {
    let counter = progress.clone();
    let items = store.scan_items(Some(Arc::new(move |n| counter.inc(n)))).await?;
    progress.finish();
    Ok(Scan::from_items(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_core::fixtures::{mk_pool, mk_tombstone};
    use std::collections::HashMap;

    /// An item with a record's key and none of its other attributes.
    fn keys_only(record: &Record) -> Item {
        raw::primary_key(&record.key, "us-east-1")
    }

    #[test]
    fn items_are_sorted_into_records_unreadable_and_meta() {
        let meta = HashMap::from([
            (raw::PK.to_owned(), AttributeValue::S("META".into())),
            (raw::SK.to_owned(), AttributeValue::S("SCHEMA".into())),
        ]);
        let garbage = keys_only(&mk_pool("a", 1, "w", None, None));
        let scan = Scan::from_items(vec![garbage, meta.clone()]);
        assert_eq!(scan.meta, Some(meta));
        assert!(scan.records.is_empty());
        assert_eq!(scan.unreadable.len(), 1);
        assert!(scan.unreadable[0].pk.starts_with("POOL#"), "{:?}", scan.unreadable);
        assert_eq!(scan.unreadable[0].sk, "#@us-east-1");
    }

    #[test]
    fn the_view_is_the_registry_view() {
        let now = 10_000;
        let records = vec![
            mk_pool("live", 1, "w", None, Some(now + 1)),
            mk_pool("skewed", 1, "w", None, Some(now - 500)),
            mk_pool("gone", 1, "w", None, Some(now - 1_000)),
            mk_tombstone("dead", 1, "w"),
        ];
        let view = view_of(records, 1_000, now);
        let names: Vec<&str> =
            view.pools().values().map(|p| p.pool_key.dgd_name.as_str()).collect();
        let mut want = vec!["live", "skewed"];
        want.sort_by_key(|n| mcs_core::fixtures::pool_key(n).id());
        assert_eq!(names, want);
        assert_eq!(view.record_count(), 4);
    }
}
