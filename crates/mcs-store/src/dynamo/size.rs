//! The size of a DynamoDB item, and the limit every store enforces with it:
//! DynamoDB refuses items above 400 KB, so a record that validates but
//! encodes larger must be refused the same way by every backend, before
//! anything is written, naming the part that makes it large
//! ([`check_record_size`](super::item::check_record_size)).
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
//! A record's size is that of the item [`encode`](super::item::encode)
//! writes (its payload packed when the plain one is too large), with the
//! longest origin (64 bytes) and the longest `ttl`, so it does not depend on
//! the region or the retention: the memory store and the DynamoDB store of
//! any region accept and refuse exactly the same records.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// DynamoDB's item size limit (400 KB).
pub const DYNAMODB_ITEM_LIMIT: usize = 400 * 1024;

/// The largest item size a store accepts: DynamoDB's limit less 1 KiB of
/// headroom for the attributes a global table adds to replicated items.
pub const MAX_ITEM_BYTES: usize = DYNAMODB_ITEM_LIMIT - 1024;

/// The size of `value` as DynamoDB counts it (without an attribute name).
pub(crate) fn value_size(value: &AttributeValue) -> usize {
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
pub(crate) fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;

    #[test]
    fn sizes_follow_the_documented_rule() {
        let s = |v: &str| AttributeValue::S(v.into());
        let item: HashMap<String, AttributeValue> = HashMap::from([
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
}
