//! Raw item access for tools that need more than the [`Store`](crate::Store)
//! offers (mcs-admin's `get`, `dump`, `doctor`, `gc`): the primary key of a
//! record, the attribute names a check refers to, and the decoding of a
//! scanned item. The layout itself stays in `item`; the calls that read and
//! delete raw items are [`DynamoStore`](super::DynamoStore)'s own
//! (`scan_items`, `items_of`, `delete_if_unchanged`).

use super::item;
use crate::StoreError;
use mcs_core::{Key, Record};
use std::collections::HashMap;

/// An attribute's value as the SDK carries it.
pub use aws_sdk_dynamodb::types::AttributeValue;

/// A raw item as the SDK carries it.
pub type Item = HashMap<String, AttributeValue>;

/// Partition key attribute.
pub const PK: &str = item::PK;
/// Sort key attribute.
pub const SK: &str = item::SK;
/// The writer's generation (`N`).
pub const GEN: &str = item::GEN;
/// Who produced the generation (`S`).
pub const WRITER: &str = item::WRITER;
/// The registrar's clock at the write, epoch ms (`N`).
pub const CHANGED_AT_MS: &str = item::CHANGED_AT_MS;
/// The lease's end, epoch ms (`N`, absent without a lease).
pub const LEASE_UNTIL_MS: &str = item::LEASE_UNTIL_MS;
/// When DynamoDB may delete the item, epoch seconds (`N`, absent for exports).
pub const TTL: &str = item::TTL;
/// The global secondary index the reader's delta polls query.
pub const CHANGES_INDEX: &str = item::CHANGES_INDEX;

/// The primary key (`pk`, `sk`) of the item of `key` written in `origin`
/// (a region), as GetItem and DeleteItem take it. A key has one item per
/// region that wrote it.
pub fn primary_key(key: &Key, origin: &str) -> Item {
    item::key_item(key, origin)
}

/// The partition key of `key` and the prefix every sort key of its items
/// starts with (one item per origin): a Query with
/// `pk = :pk AND begins_with(sk, :prefix)` finds them all.
pub fn item_prefix(key: &Key) -> (String, String) {
    let (pk, base) = item::key_base(key);
    (pk, format!("{base}@"))
}

/// The region that wrote `item`, from its sort key.
pub fn origin_of(item: &Item) -> Option<String> {
    match item.get(SK) {
        Some(AttributeValue::S(sk)) => item::origin_of_sort_key(sk).map(str::to_owned),
        _ => None,
    }
}

/// Whether `item` is the schema (`META`) item rather than a record.
pub fn is_meta(item: &Item) -> bool {
    item::is_meta(item)
}

/// Decodes a record item exactly as the store's reads do; an item this
/// binary cannot read (another payload version, malformed) is
/// [`StoreError::Corrupt`] naming it.
pub fn decode(item: Item) -> Result<Record, StoreError> {
    Ok(item::decode(item)?)
}

/// The item that stores `record` as written in `origin`, without a
/// retention: for the fuzz targets' round trip (`fuzz/`), not for writing,
/// which goes through the [`Store`](crate::Store).
#[doc(hidden)]
pub fn encode_for_fuzzing(record: &Record, origin: &str) -> Result<Item, StoreError> {
    item::encode(record, origin, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_core::fixtures::mk_pool;

    #[test]
    fn primary_key_and_decode_match_the_layout() {
        let record = mk_pool("a", 1, "w", Some("x"), Some(10_000));
        let encoded = item::encode(&record, "us-east-1", 0).unwrap();
        let key = primary_key(&record.key, "us-east-1");
        assert_eq!(origin_of(&encoded).as_deref(), Some("us-east-1"));
        assert_eq!(key[PK], encoded[PK]);
        assert_eq!(key[SK], encoded[SK]);
        assert!(!is_meta(&encoded));
        assert!(is_meta(&item::meta_key()));
        assert_eq!(decode(encoded).unwrap(), record);
        let again = encode_for_fuzzing(&record, "eu-west-1").unwrap();
        assert_eq!(origin_of(&again).as_deref(), Some("eu-west-1"));
        assert_eq!(decode(again).unwrap(), record);
        assert!(matches!(decode(key).unwrap_err(), StoreError::Corrupt(_)));
    }

    #[test]
    fn every_item_of_a_key_starts_with_its_prefix() {
        let record = mk_pool("a", 1, "w", None, None);
        let (pk, prefix) = item_prefix(&record.key);
        assert!(prefix.ends_with('@'), "{prefix}");
        for origin in ["us-east-1", "eu-west-1"] {
            let encoded = item::encode(&record, origin, 0).unwrap();
            assert_eq!(encoded[PK], AttributeValue::S(pk.clone()));
            assert_eq!(encoded[SK], AttributeValue::S(format!("{prefix}{origin}")));
        }
    }
}
