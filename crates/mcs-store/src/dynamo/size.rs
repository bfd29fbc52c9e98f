//! The size of a record's DynamoDB item, and the limit every store enforces
//! with it: DynamoDB refuses items above 400 KB, so a record that validates
//! but encodes larger must be refused the same way by every backend, before
//! anything is written, naming the part that makes it large.
//!
//! The rule (DynamoDB's "Item sizes and formats", rounded up where the
//! service rounds or approximates):
//!
//! ```text
//!  item      = Σ over attributes: name bytes (UTF-8) + value
//!  S         = UTF-8 bytes            B    = raw bytes
//!  N         = ceil(chars / 2) + 1    (every character counted as significant)
//!  BOOL/NULL = 1
//!  M / L     = 3 + Σ (1 + entry)      (a map entry also counts its name)
//!  SS/NS/BS  = Σ element sizes
//! ```
//!
//! The size is that of the item [`encode`](super::item::encode) writes, with
//! the longest origin (64 bytes) and the longest `ttl`, so it does not
//! depend on the region or the retention: the memory store and the DynamoDB
//! store of any region accept and refuse exactly the same records.

use super::item::{self, Item, PAYLOAD};
use crate::StoreError;
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_core::Record;

/// DynamoDB's item size limit (400 KB).
pub const DYNAMODB_ITEM_LIMIT: usize = 400 * 1024;

/// The largest item size a store accepts: DynamoDB's limit less 1 KiB of
/// headroom for the attributes a global table adds to replicated items.
pub const MAX_ITEM_BYTES: usize = DYNAMODB_ITEM_LIMIT - 1024;

/// The longest origin [`item::check_origin`] allows.
const LONGEST_ORIGIN: &str = "o123456789o123456789o123456789o123456789o123456789o123456789oooo";

/// The size of `value` as DynamoDB counts it (without an attribute name).
fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::M(map) => {
            3 + map.iter().map(|(name, v)| 1 + name.len() + value_size(v)).sum::<usize>()
        }
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        // A type this SDK learned after this code was written: count it as
        // large as its debug form, which is never smaller than its content.
        other => format!("{other:?}").len(),
    }
}

fn number_size(n: &str) -> usize {
    n.len().div_ceil(2) + 1
}

/// The size of `item` as DynamoDB counts it.
pub(crate) fn item_size(item: &Item) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

/// The size in bytes of the DynamoDB item of `record`, by the rule of this
/// module, independent of region and retention.
pub fn record_item_size(record: &Record) -> Result<usize, StoreError> {
    Ok(item_size(&item::encode(record, LONGEST_ORIGIN, u64::MAX)?))
}

/// Refuses `record` with [`StoreError::TooLarge`] if its item is over
/// [`MAX_ITEM_BYTES`]; every store calls it before writing.
pub(crate) fn check_record_size(record: &Record) -> Result<(), StoreError> {
    let item = item::encode(record, LONGEST_ORIGIN, u64::MAX)?;
    let size = item_size(&item);
    if size <= MAX_ITEM_BYTES {
        return Ok(());
    }
    Err(StoreError::TooLarge { size, limit: MAX_ITEM_BYTES, field: largest_field(&item) })
}

/// The largest field of the payload's `spec` (the request's top-level
/// field of the same name: `endpoints`, `annotations`, ...), if it has one.
fn largest_field(item: &Item) -> Option<String> {
    let Some(AttributeValue::M(payload)) = item.get(PAYLOAD) else { return None };
    let Some(AttributeValue::M(spec)) = payload.get("spec") else { return None };
    spec.iter().max_by_key(|(name, v)| name.len() + value_size(v)).map(|(name, _)| name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;
    use mcs_core::fixtures::{mk_export, mk_export_spec, mk_pool};
    use std::collections::HashMap;

    #[test]
    fn sizes_follow_the_documented_rule() {
        let s = |v: &str| AttributeValue::S(v.into());
        let item: Item = HashMap::from([
            ("a".into(), s("héllo")),                           // 1 + 6
            ("n".into(), AttributeValue::N("12345".into())),    // 1 + 3 + 1
            ("b".into(), AttributeValue::Bool(true)),           // 1 + 1
            ("z".into(), AttributeValue::Null(true)),           // 1 + 1
            ("x".into(), AttributeValue::B(Blob::new([0; 4]))), // 1 + 4
            // 1 + 3 + (1 + 1) + (1 + 2)
            ("l".into(), AttributeValue::L(vec![s("x"), s("yz")])),
            // 1 + 3 + (1 + 2 + 1)
            ("m".into(), AttributeValue::M(HashMap::from([("kk".into(), s("v"))]))),
        ]);
        assert_eq!(item_size(&item), 7 + 5 + 2 + 2 + 5 + 9 + 8);
    }

    #[test]
    fn the_size_does_not_depend_on_region_or_retention() {
        let record = mk_pool("a", 1, "w", Some("x"), Some(10_000));
        let size = record_item_size(&record).unwrap();
        for (origin, retention) in [("a", 0), ("us-east-1", 86_400_000), (LONGEST_ORIGIN, 1)] {
            let real = item_size(&item::encode(&record, origin, retention).unwrap());
            assert!(real <= size, "{origin}: {real} > {size}");
        }
        assert!(item::check_origin(LONGEST_ORIGIN).is_ok());
        assert_eq!(LONGEST_ORIGIN.len(), 64);
    }

    #[test]
    fn an_oversized_export_names_its_largest_field() {
        let mut spec = mk_export_spec(0, vec![]);
        spec.endpoints = vec![spec.endpoints[0].clone(); 20_000];
        let record = mk_export("c1", "svc", 1, spec);
        let Err(StoreError::TooLarge { size, limit, field }) = check_record_size(&record) else {
            panic!("not refused");
        };
        assert!(size > limit);
        assert_eq!(field.as_deref(), Some("endpoints"));
        assert!(check_record_size(&mk_pool("a", 1, "w", None, None)).is_ok());
    }
}
