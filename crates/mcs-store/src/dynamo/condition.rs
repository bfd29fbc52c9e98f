//! The write rule [`mcs_core::decide`] (with
//! [`mcs_core::rules::renewal_extends`]) as one DynamoDB condition
//! expression, so that a single conditional PutItem applies it atomically.
//!
//! ```text
//! attribute_not_exists(pk)
//! OR ( ownership ok AND ( newer OR extending renewal ) [AND fence] )
//!
//! ownership ok = deleted = true OR attribute_not_exists(owner)
//!                OR attribute_not_exists(lease_until_ms) OR lease_until_ms <= :now
//!                [OR owner = :owner]                       (only when the write has an owner)
//! newer        = gen < :gen OR (gen = :gen AND writer < :writer)
//! renewal      = gen = :gen AND writer = :writer AND digest = :digest
//!                AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :lease)
//!                                                          (only when the write has a lease > 0)
//! fence        = NOT (deleted = true AND owner = :owner)   (only for a registrar-assigned
//!                                                           generation of an owned record)
//! ```
//!
//! A renewal in place ([`for_renew`], an UpdateItem of the lease end only,
//! docs/design.md §6) is the `renewal` branch with the lease terms
//! unchanged ([`mcs_core::rules::renews_in_place`]): the item exists at the
//! same version and content (the digest covers the owner and the payload,
//! so ownership and the withdrawal fence hold by construction) and terms,
//! with an earlier lease end:
//!
//! ```text
//! renewal AND lease_ms = :lease_ms AND heartbeat_ms = :heartbeat_ms
//! ```
//!
//! gc's delete of an item it read ([`for_delete`]) is conditional on the
//! item being exactly what was read:
//!
//! ```text
//! gen = :gen AND writer = :writer AND changed_at_ms = :changed
//! AND ( lease_until_ms = :lease | attribute_not_exists(lease_until_ms) )
//! ```
//!
//! A write the condition refuses is explained by calling `decide` on the
//! stored item (`ALL_OLD`): a non-extending renewal is refused here but is
//! `Renew`, hence applied, for the caller.

use super::item::{
    CHANGED_AT_MS, DELETED, DIGEST, GEN, HEARTBEAT_MS, LEASE_MS, LEASE_UNTIL_MS, OWNER, PK, WRITER,
};
use aws_sdk_dynamodb::types::AttributeValue;
use mcs_core::Record;
use std::collections::HashMap;

/// A condition expression with its placeholders.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    pub(crate) expression: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

/// Sets `condition` (a [`Condition`]) on an SDK request builder: PutItem,
/// DeleteItem and UpdateItem take it alike but share no trait.
macro_rules! conditioned {
    ($request:expr, $condition:expr) => {{
        let $crate::dynamo::condition::Condition { expression, names, values } = $condition;
        $request
            .condition_expression(expression)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
    }};
}
pub(crate) use conditioned;

/// The condition under which `new` may overwrite what is stored, judged at
/// `now_ms`. Every placeholder it declares is used (DynamoDB refuses unused
/// ones).
pub(crate) fn for_write(new: &Record, now_ms: u64) -> Condition {
    let mut names: HashMap<String, String> = [PK, GEN, WRITER, OWNER, LEASE_UNTIL_MS, DELETED]
        .into_iter()
        .map(|a| (format!("#{a}"), a.to_owned()))
        .collect();
    let mut values = HashMap::from([
        (":true".to_owned(), AttributeValue::Bool(true)),
        (":now".to_owned(), AttributeValue::N(now_ms.to_string())),
        (":gen".to_owned(), AttributeValue::N(new.version.generation.to_string())),
        (":writer".to_owned(), AttributeValue::S(new.version.writer.clone())),
    ]);

    let mut ownership = "#deleted = :true OR attribute_not_exists(#owner) \
         OR attribute_not_exists(#lease_until_ms) OR #lease_until_ms <= :now"
        .to_owned();
    if let Some(owner) = &new.owner {
        ownership.push_str(" OR #owner = :owner");
        values.insert(":owner".to_owned(), AttributeValue::S(owner.clone()));
    }

    let mut progress = "#gen < :gen OR (#gen = :gen AND #writer < :writer)".to_owned();
    if let Some(renewal) = renewal(new, &mut names, &mut values) {
        progress.push_str(&format!(" OR ({renewal})"));
    }

    // `fenced_by_withdrawal`: an incarnation does not write over its own
    // withdrawal with a generation it did not choose.
    let fence =
        if new.owner.is_some() && !new.is_tombstone() && !mcs_core::rules::is_client_ordered(new) {
            " AND NOT (#deleted = :true AND #owner = :owner)"
        } else {
            ""
        };

    Condition {
        expression: format!("attribute_not_exists(#pk) OR (({ownership}) AND ({progress}){fence})"),
        names,
        values,
    }
}

/// The renewal branch of the write rule for `new`, its placeholders added
/// to `names` and `values`: the same version and content, and a stored
/// lease end absent or below `new`'s. `None` when `new` has no lease
/// (`renewal_extends`: only a lease above the stored one, absent counting
/// as 0, is worth writing; without a lease a renewal never writes).
fn renewal(
    new: &Record,
    names: &mut HashMap<String, String>,
    values: &mut HashMap<String, AttributeValue>,
) -> Option<&'static str> {
    let lease = new.lease_until_ms.filter(|l| *l > 0)?;
    for a in [GEN, WRITER, DIGEST, LEASE_UNTIL_MS] {
        names.insert(format!("#{a}"), a.to_owned());
    }
    values.insert(":gen".to_owned(), AttributeValue::N(new.version.generation.to_string()));
    values.insert(":writer".to_owned(), AttributeValue::S(new.version.writer.clone()));
    values.insert(":digest".to_owned(), AttributeValue::S(new.content_digest()));
    values.insert(":lease".to_owned(), AttributeValue::N(lease.to_string()));
    Some(
        "#gen = :gen AND #writer = :writer AND #digest = :digest \
         AND (attribute_not_exists(#lease_until_ms) OR #lease_until_ms < :lease)",
    )
}

/// The condition under which `new` renews the stored item in place (only
/// its lease end, terms and TTL written): the renewal branch of
/// [`for_write`] alone. `None` when `new` has no lease to renew.
pub(crate) fn for_renew(new: &Record) -> Option<Condition> {
    let terms = new.terms?;
    let (mut names, mut values) = (HashMap::new(), HashMap::new());
    let renewal = renewal(new, &mut names, &mut values)?;
    // The terms unchanged ([`mcs_core::rules::renews_in_place`]); an item
    // without them fails the comparison.
    for a in [LEASE_MS, HEARTBEAT_MS] {
        names.insert(format!("#{a}"), a.to_owned());
    }
    values.insert(":lease_ms".to_owned(), AttributeValue::N(terms.duration_ms.to_string()));
    values.insert(":heartbeat_ms".to_owned(), AttributeValue::N(terms.heartbeat_ms.to_string()));
    let expression =
        format!("{renewal} AND #{LEASE_MS} = :lease_ms AND #{HEARTBEAT_MS} = :heartbeat_ms");
    Some(Condition { expression, names, values })
}

/// The condition under which the item that stores `read` may be deleted:
/// it is still that item (same generation, writer and write time), and no
/// renewal moved its lease meanwhile (a renewal keeps generation and writer
/// but moves the lease: it must keep the item too).
pub(crate) fn for_delete(read: &Record) -> Condition {
    let names = HashMap::from([
        ("#gen".to_owned(), GEN.to_owned()),
        ("#writer".to_owned(), WRITER.to_owned()),
        ("#changed".to_owned(), CHANGED_AT_MS.to_owned()),
        ("#lease".to_owned(), LEASE_UNTIL_MS.to_owned()),
    ]);
    let mut values = HashMap::from([
        (":gen".to_owned(), AttributeValue::N(read.version.generation.to_string())),
        (":writer".to_owned(), AttributeValue::S(read.version.writer.clone())),
        (":changed".to_owned(), AttributeValue::N(read.changed_at_ms.to_string())),
    ]);
    let mut expression = "#gen = :gen AND #writer = :writer AND #changed = :changed".to_owned();
    match read.lease_until_ms {
        Some(until) => {
            expression.push_str(" AND #lease = :lease");
            values.insert(":lease".to_owned(), AttributeValue::N(until.to_string()));
        }
        None => expression.push_str(" AND attribute_not_exists(#lease)"),
    }
    Condition { expression, names, values }
}

/// The condition under which DynamoDB's TTL deletes an item it found
/// expired: its `ttl` is still at or before `now_s` (a write since may have
/// moved it). For [`crate::EmulatesTtl`].
#[cfg(feature = "testsuite")]
pub(crate) fn for_expired(now_s: u64) -> Condition {
    Condition {
        expression: "#ttl <= :now".to_owned(),
        names: HashMap::from([("#ttl".to_owned(), super::item::TTL.to_owned())]),
        values: HashMap::from([(":now".to_owned(), AttributeValue::N(now_s.to_string()))]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_core::fixtures::mk_pool;

    fn placeholders(expression: &str, sigil: char) -> Vec<String> {
        let mut found: Vec<String> = expression
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == sigil))
            .filter(|t| t.starts_with(sigil))
            .map(str::to_owned)
            .collect();
        found.sort();
        found.dedup();
        found
    }

    fn check_placeholders(c: &Condition) {
        let mut names: Vec<String> = c.names.keys().cloned().collect();
        names.sort();
        let mut values: Vec<String> = c.values.keys().cloned().collect();
        values.sort();
        assert_eq!(placeholders(&c.expression, '#'), names);
        assert_eq!(placeholders(&c.expression, ':'), values);
    }

    #[test]
    fn full_condition_text() {
        let c = for_write(&mk_pool("a", 5, "w", Some("x"), Some(10_000)), 7);
        assert_eq!(
            c.expression,
            "attribute_not_exists(#pk) OR ((#deleted = :true OR attribute_not_exists(#owner) \
             OR attribute_not_exists(#lease_until_ms) OR #lease_until_ms <= :now \
             OR #owner = :owner) AND (#gen < :gen OR (#gen = :gen AND #writer < :writer) \
             OR (#gen = :gen AND #writer = :writer AND #digest = :digest \
             AND (attribute_not_exists(#lease_until_ms) OR #lease_until_ms < :lease))) \
             AND NOT (#deleted = :true AND #owner = :owner))"
        );
        assert_eq!(c.values[":now"], AttributeValue::N("7".into()));
        assert_eq!(c.values[":lease"], AttributeValue::N("10000".into()));
        check_placeholders(&c);
        let ordered = for_write(&mk_pool("a", 5, "x", Some("x"), Some(10_000)), 7);
        assert!(!ordered.expression.contains("NOT"), "a client-ordered write is not fenced");
        check_placeholders(&ordered);
    }

    #[test]
    fn anonymous_and_leaseless_writes_drop_their_branches() {
        let c = for_write(&mk_pool("a", 5, "w", None, None), 7);
        assert!(!c.expression.contains(":owner"));
        assert!(!c.expression.contains(":digest"));
        check_placeholders(&c);
        let zero = for_write(&mk_pool("a", 5, "w", None, Some(0)), 7);
        assert!(!zero.expression.contains(":lease"));
        check_placeholders(&zero);
    }

    #[test]
    fn a_renewal_in_place_is_the_renewal_branch_with_the_terms_unchanged() {
        let mut new = mk_pool("a", 5, "w", Some("x"), Some(10_000));
        assert!(for_renew(&new).is_none(), "no terms: not renewed in place");
        new.terms = Some(mcs_core::LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
        let c = for_renew(&new).unwrap();
        let branch = "#gen = :gen AND #writer = :writer AND #digest = :digest \
             AND (attribute_not_exists(#lease_until_ms) OR #lease_until_ms < :lease)";
        assert_eq!(
            c.expression,
            format!("{branch} AND #lease_ms = :lease_ms AND #heartbeat_ms = :heartbeat_ms")
        );
        assert!(for_write(&new, 7).expression.contains(&format!("OR ({branch})")));
        assert_eq!(c.values[":digest"], AttributeValue::S(new.content_digest()));
        assert_eq!(c.values[":lease_ms"], AttributeValue::N("30000".into()));
        assert_eq!(c.values[":heartbeat_ms"], AttributeValue::N("10000".into()));
        check_placeholders(&c);
        let unleased = |lease| Record { lease_until_ms: lease, ..new.clone() };
        assert!(for_renew(&unleased(None)).is_none(), "no lease");
        assert!(for_renew(&unleased(Some(0))).is_none(), "lease 0");
    }

    #[test]
    fn a_delete_requires_the_item_as_read() {
        let leased = for_delete(&mk_pool("a", 5, "w", Some("x"), Some(10_000)));
        assert_eq!(
            leased.expression,
            "#gen = :gen AND #writer = :writer AND #changed = :changed AND #lease = :lease"
        );
        assert_eq!(leased.values[":lease"], AttributeValue::N("10000".into()));
        check_placeholders(&leased);
        let leaseless = for_delete(&mk_pool("a", 5, "w", None, None));
        assert!(leaseless.expression.ends_with(" AND attribute_not_exists(#lease)"));
        check_placeholders(&leaseless);
    }
}
