//! The item layout of docs/design.md §3: how a [`Record`] becomes a DynamoDB item
//! and back. The only file that knows attribute names and key prefixes.
//!
//! ```text
//!  pk                      sk                           kind    gen writer owner lease_until_ms
//!  CLUSTER#{cluster_id}    #@{origin}                   cluster  N    S     S?    N?
//!  SVC#{namespace}/{name}  EXPORT#{cluster_id}@{origin} export   …
//!  POOL#{pool_id}          #@{origin}                   pool     …
//!  ROUTER#{router_id}      #@{origin}                   router   …
//!  META                    SCHEMA                       (version N: the table's schema version)
//!
//!  + deleted BOOL, changed_at_ms N, digest S, shard N, ttl N?,
//!    lease_ms N?, heartbeat_ms N? (the lease's terms, schema 2 on),
//!    payload M (the Body, serde_dynamo), payload_version N (1)
//!    or, for a record whose item would be over the size limit,
//!    payload B (the Body's JSON, zlib), payload_version N (2)
//! ```
//!
//! `{origin}` is the region whose registrars wrote the item: each region
//! writes only items of its own origin, so a global table never has two
//! regions writing one item, and its last-writer-wins replication never
//! settles a conflict between them. A record key has one item per region
//! that wrote it; readers merge them by version (`Record::supersedes`), so a
//! newer version or a tombstone written in one region is never lost to a
//! concurrent older write in another, whatever the clocks say.

use super::size::{MAX_ITEM_BYTES, item_size, value_size};
use crate::StoreError;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use mcs_api::{ExportKey, Label, PoolId, RouterId};
use mcs_core::{Body, ChangeStamp, Key, LeaseTerms, Record, Version};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};

/// A raw item as the SDK carries it.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// Partition key attribute.
pub(crate) const PK: &str = "pk";
/// Sort key attribute.
pub(crate) const SK: &str = "sk";
pub(crate) const KIND: &str = "kind";
pub(crate) const GEN: &str = "gen";
/// The write's change stamp as one number
/// ([`mcs_core::ChangeStamp::sort_value`]: `changed_at_ms` and a hash of
/// the version), the sort key of `change_stamps`. One letter: every poll
/// reads it, and names count in read units.
pub(crate) const CHANGE_STAMP: &str = "c";
pub(crate) const WRITER: &str = "writer";
pub(crate) const OWNER: &str = "owner";
pub(crate) const LEASE_UNTIL_MS: &str = "lease_until_ms";
/// The lease's terms ([`mcs_core::LeaseTerms`]), written from schema 2 on.
pub(crate) const LEASE_MS: &str = "lease_ms";
pub(crate) const HEARTBEAT_MS: &str = "heartbeat_ms";
pub(crate) const DELETED: &str = "deleted";
pub(crate) const CHANGED_AT_MS: &str = "changed_at_ms";
pub(crate) const DIGEST: &str = "digest";
pub(crate) const SHARD: &str = "shard";
pub(crate) const TTL: &str = "ttl";
pub(crate) const PAYLOAD: &str = "payload";
pub(crate) const PAYLOAD_VERSION_ATTR: &str = "payload_version";

/// The global secondary index of changes: partition `shard`, sort
/// `changed_at_ms`.
pub(crate) const CHANGES_INDEX: &str = "changes";
/// The sparse index of lease ends: partition `shard`, sort `lease_until_ms`,
/// projecting the keys, `gen` and `writer` (migration 0002).
pub(crate) const LEASE_ENDS_INDEX: &str = "lease_ends";
/// The index of change stamps: partition `shard`, sort `c`, keys only
/// (migration 0004): what a reader
/// checks its window's lookback with, at a fraction of `changes`' size.
pub(crate) const CHANGE_STAMPS_INDEX: &str = "change_stamps";

/// The schema item's partition and sort key, and its version attribute.
pub(crate) const META_PK: &str = "META";
pub(crate) const META_SK: &str = "SCHEMA";
pub(crate) const META_VERSION: &str = "version";
/// The lowest schema version whose binaries may still use the table: the
/// version before the last migration when that migration was additive
/// (N-1/N), else the version itself. Absent on tables migrated before it
/// existed: the version itself.
pub(crate) const META_COMPATIBLE_FROM: &str = "compatible_from";

/// How many values `shard` takes; one `changes` query per shard. Part of the
/// layout: changing it means rewriting every item.
pub const SHARDS: u32 = 8;

/// The payload encoding this binary writes and reads: the body as a map
/// (serde_dynamo).
pub const PAYLOAD_VERSION: u32 = 1;

/// The packed payload encoding, which this binary also reads: the body's
/// JSON compressed with zlib, as binary. Written only for a record whose
/// item in the plain encoding would be over [`MAX_ITEM_BYTES`] (an export
/// of thousands of endpoints), so binaries that know only version 1 read
/// every record they could store themselves (docs/design.md §3, "Packed
/// payloads").
pub const PACKED_PAYLOAD_VERSION: u32 = 2;

/// The most a packed payload may inflate to: far more than any record a
/// registry accepts (an export's body is 2 MiB by default), so that a
/// forged item costs a reader at most this much memory.
const MAX_UNPACKED_BYTES: u64 = 64 << 20;

/// The longest origin [`check_origin`] allows: the sizes of this module are
/// those of the item in that region with the longest `ttl`, so they do not
/// depend on the region or the retention.
const LONGEST_ORIGIN: &str = "o123456789o123456789o123456789o123456789o123456789o123456789oooo";

/// The partition key of `key` and the sort key of its items without the
/// origin: every item of `key` has a sort key starting with `{base}@`.
pub(crate) fn key_base(key: &Key) -> (String, String) {
    match key {
        Key::Cluster { cluster_id } => (format!("CLUSTER#{cluster_id}"), "#".to_owned()),
        Key::Export(k) => {
            (format!("SVC#{}/{}", k.namespace, k.name), format!("EXPORT#{}", k.cluster_id))
        }
        Key::Pool { pool_id } => (format!("POOL#{pool_id}"), "#".to_owned()),
        Key::Router { router_id } => (format!("ROUTER#{router_id}"), "#".to_owned()),
    }
}

/// The partition and sort key of the item of `key` written in `origin`.
pub(crate) fn key_attributes(key: &Key, origin: &str) -> (String, String) {
    let (pk, base) = key_base(key);
    (pk, format!("{base}@{origin}"))
}

/// The primary key of the item of `key` written in `origin`.
pub(crate) fn key_item(key: &Key, origin: &str) -> Item {
    let (pk, sk) = key_attributes(key, origin);
    HashMap::from([(PK.to_owned(), AttributeValue::S(pk)), (SK.to_owned(), AttributeValue::S(sk))])
}

/// Checks an origin (a region name): 1–64 lowercase alphanumerics or '-'.
pub fn check_origin(origin: &str) -> Result<(), String> {
    let ok = !origin.is_empty()
        && origin.len() <= 64
        && origin.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok { Ok(()) } else { Err(format!("origin {origin:?} must be 1 to 64 of a-z, 0-9 and '-'")) }
}

/// The origin (writing region) of an item's sort key.
pub(crate) fn origin_of_sort_key(sk: &str) -> Option<&str> {
    sk.rsplit_once('@').map(|(_, origin)| origin).filter(|o| check_origin(o).is_ok())
}

/// The primary key of the schema item.
pub(crate) fn meta_key() -> Item {
    HashMap::from([
        (PK.to_owned(), AttributeValue::S(META_PK.to_owned())),
        (SK.to_owned(), AttributeValue::S(META_SK.to_owned())),
    ])
}

/// Parses a partition and sort key back into a [`Key`], validating every
/// part with the mcs-api constructors.
pub(crate) fn parse_key(pk: &str, sk: &str) -> Result<Key, String> {
    let (sk, origin) =
        sk.rsplit_once('@').ok_or_else(|| format!("sort key {sk:?} names no origin"))?;
    check_origin(origin)?;
    let (prefix, rest) =
        pk.split_once('#').ok_or_else(|| format!("partition key {pk:?} has no prefix"))?;
    let single = |what: &str| {
        if sk == "#" { Ok(()) } else { Err(format!("{what} item has sort key {sk:?}, want \"#\"")) }
    };
    match prefix {
        "CLUSTER" => {
            single("cluster")?;
            Ok(Key::Cluster { cluster_id: Label::new(rest)? })
        }
        "SVC" => {
            let (namespace, name) = rest
                .split_once('/')
                .ok_or_else(|| format!("export partition key {pk:?} has no '/'"))?;
            let cluster_id = sk
                .strip_prefix("EXPORT#")
                .ok_or_else(|| format!("export sort key {sk:?} lacks EXPORT#"))?;
            Ok(Key::Export(ExportKey {
                cluster_id: Label::new(cluster_id)?,
                namespace: Label::new(namespace)?,
                name: Label::new(name)?,
            }))
        }
        "POOL" => {
            single("pool")?;
            Ok(Key::Pool { pool_id: PoolId::parse(rest)? })
        }
        "ROUTER" => {
            single("router")?;
            Ok(Key::Router { router_id: RouterId::new(rest)? })
        }
        other => Err(format!("unknown key prefix {other:?}")),
    }
}

/// The shard of a partition key: the first two bytes of its SHA-256, modulo
/// [`SHARDS`]. Stable across processes, builds and languages.
pub(crate) fn shard_of(pk: &str) -> u32 {
    let digest = Sha256::digest(pk.as_bytes());
    u32::from(u16::from_be_bytes([digest[0], digest[1]])) % SHARDS
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The item that stores `record`; `ttl` is its expiry plus `retention_ms`.
/// Its payload is packed ([`PACKED_PAYLOAD_VERSION`]) when the plain item
/// would be over [`MAX_ITEM_BYTES`] in the worst case (longest origin and
/// `ttl`), so every region packs exactly the same records.
pub(crate) fn encode(record: &Record, origin: &str, retention_ms: u64) -> Result<Item, StoreError> {
    let item = encode_plain(record, origin, retention_ms)?;
    // The worst case is at most one origin and one `ttl` larger than this
    // item; only an item that close to the limit is encoded again for it.
    let slack = LONGEST_ORIGIN.len() + value_size(&n(u64::MAX));
    if item_size(&item) + slack <= MAX_ITEM_BYTES
        || worst_case_plain_size(record)? <= MAX_ITEM_BYTES
    {
        return Ok(item);
    }
    pack(item, record)
}

/// The size of the plain item of `record` in the worst case.
fn worst_case_plain_size(record: &Record) -> Result<usize, StoreError> {
    Ok(item_size(&encode_plain(record, LONGEST_ORIGIN, u64::MAX)?))
}

/// `item` (the plain item of `record`) with its payload packed.
fn pack(mut item: Item, record: &Record) -> Result<Item, StoreError> {
    let failed =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("packing {}: {e}", record.key));
    let json = serde_json::to_vec(&record.body).map_err(|e| failed(&e))?;
    let mut zlib = ZlibEncoder::new(Vec::with_capacity(json.len() / 4), Compression::default());
    zlib.write_all(&json).map_err(|e| failed(&e))?;
    let packed = zlib.finish().map_err(|e| failed(&e))?;
    item.insert(PAYLOAD.to_owned(), AttributeValue::B(Blob::new(packed)));
    item.insert(PAYLOAD_VERSION_ATTR.to_owned(), n(PACKED_PAYLOAD_VERSION));
    Ok(item)
}

/// The body of a packed payload.
fn unpack(packed: &[u8]) -> Result<Body, String> {
    let mut json = Vec::new();
    ZlibDecoder::new(packed)
        .take(MAX_UNPACKED_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| format!("packed payload: {e}"))?;
    if json.len() as u64 > MAX_UNPACKED_BYTES {
        return Err(format!("packed payload inflates past {MAX_UNPACKED_BYTES} bytes"));
    }
    serde_json::from_slice(&json).map_err(|e| format!("packed payload: {e}"))
}

/// The size in bytes of the DynamoDB item of `record` as stored (packed
/// or not), by DynamoDB's size rules (docs/design.md §4), independent of region and
/// retention.
pub fn record_item_size(record: &Record) -> Result<usize, StoreError> {
    Ok(item_size(&encode(record, LONGEST_ORIGIN, u64::MAX)?))
}

/// Refuses `record` with [`StoreError::TooLarge`] if its item, packed, is
/// over [`MAX_ITEM_BYTES`], naming the largest field of its plain payload;
/// every store calls it before writing.
pub(crate) fn check_record_size(record: &Record) -> Result<(), StoreError> {
    let plain = encode_plain(record, LONGEST_ORIGIN, u64::MAX)?;
    if item_size(&plain) <= MAX_ITEM_BYTES {
        return Ok(());
    }
    let field = largest_field(&plain);
    let size = item_size(&pack(plain, record)?);
    if size <= MAX_ITEM_BYTES {
        return Ok(());
    }
    Err(StoreError::TooLarge { size, limit: MAX_ITEM_BYTES, field })
}

/// The largest field of the payload's `spec` (the request's top-level
/// field of the same name: `endpoints`, `annotations`, ...), if it has one.
fn largest_field(item: &Item) -> Option<String> {
    let Some(AttributeValue::M(payload)) = item.get(PAYLOAD) else { return None };
    let Some(AttributeValue::M(spec)) = payload.get("spec") else { return None };
    spec.iter().max_by_key(|(name, v)| name.len() + value_size(v)).map(|(name, _)| name.clone())
}

/// The item of `record` with its payload as a map ([`PAYLOAD_VERSION`]).
fn encode_plain(record: &Record, origin: &str, retention_ms: u64) -> Result<Item, StoreError> {
    let (pk, sk) = key_attributes(&record.key, origin);
    let payload = serde_dynamo::aws_sdk_dynamodb_1::to_attribute_value(&record.body)
        .map_err(|e| StoreError::Corrupt(format!("encoding {}: {e}", record.key)))?;
    let mut item = HashMap::from([
        (SHARD.to_owned(), n(shard_of(&pk))),
        (PK.to_owned(), AttributeValue::S(pk)),
        (SK.to_owned(), AttributeValue::S(sk)),
        (KIND.to_owned(), AttributeValue::S(record.key.kind().as_str().to_owned())),
        (GEN.to_owned(), n(record.version.generation)),
        (CHANGE_STAMP.to_owned(), n(ChangeStamp::of(record).sort_value())),
        (WRITER.to_owned(), AttributeValue::S(record.version.writer.clone())),
        (DELETED.to_owned(), AttributeValue::Bool(record.is_tombstone())),
        (CHANGED_AT_MS.to_owned(), n(record.changed_at_ms)),
        (DIGEST.to_owned(), AttributeValue::S(record.content_digest())),
        (PAYLOAD.to_owned(), payload),
        (PAYLOAD_VERSION_ATTR.to_owned(), n(PAYLOAD_VERSION)),
    ]);
    if let Some(owner) = &record.owner {
        item.insert(OWNER.to_owned(), AttributeValue::S(owner.clone()));
    }
    if let Some(until) = record.lease_until_ms {
        item.insert(LEASE_UNTIL_MS.to_owned(), n(until));
    }
    if let Some(terms) = record.terms {
        item.insert(LEASE_MS.to_owned(), n(terms.duration_ms));
        item.insert(HEARTBEAT_MS.to_owned(), n(terms.heartbeat_ms));
    }
    if let Some(ttl) = ttl_of(record, retention_ms) {
        item.insert(TTL.to_owned(), n(ttl));
    }
    Ok(item)
}

/// The `ttl` of the item that stores `record`, epoch seconds: its
/// [`mcs_core::rules::ttl_expires_at_ms`] plus `retention_ms`; `None` for
/// what TTL never deletes (exports, withdrawn or not).
pub(crate) fn ttl_of(record: &Record, retention_ms: u64) -> Option<u64> {
    mcs_core::rules::ttl_expires_at_ms(record)
        .map(|expires| expires.saturating_add(retention_ms) / 1000)
}

/// Whether DynamoDB's TTL may have deleted an item whose `ttl` is `ttl_s`
/// (epoch seconds) by `now_ms`: once the time has reached it.
#[cfg(feature = "testsuite")]
pub(crate) fn expired_by_ttl(ttl_s: u64, now_ms: u64) -> bool {
    ttl_s <= now_ms / 1000
}

/// The `ttl` stored in `item`, epoch seconds, if any.
#[cfg(feature = "testsuite")]
pub(crate) fn stored_ttl(item: &Item) -> Option<u64> {
    u64_of(item, TTL).ok()
}

/// What a renewal in place writes of the item of `record`: each attribute
/// of the lease ([`LEASE_UNTIL_MS`], [`TTL`], [`LEASE_MS`],
/// [`HEARTBEAT_MS`]) with its value as [`encode`] computes it, or `None`
/// when `encode` leaves it out (to be removed).
pub(crate) fn lease_attributes(
    record: &Record,
    origin: &str,
    retention_ms: u64,
) -> Result<Vec<(&'static str, Option<AttributeValue>)>, StoreError> {
    let mut item = encode(record, origin, retention_ms)?;
    Ok([LEASE_UNTIL_MS, TTL, LEASE_MS, HEARTBEAT_MS]
        .into_iter()
        .map(|a| (a, item.remove(a)))
        .collect())
}

/// The `changed_at_ms` of a stored item.
pub(crate) fn changed_at_of(item: &Item) -> Result<u64, String> {
    u64_of(item, CHANGED_AT_MS)
}

/// Why an item could not be read as a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undecodable {
    /// Written with a payload encoding this binary does not know (a newer
    /// binary, most likely).
    UnknownPayloadVersion { pk: String, version: String },
    /// Missing or malformed attributes.
    Invalid { pk: String, detail: String },
}

impl Undecodable {
    /// A short label for metrics.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Undecodable::UnknownPayloadVersion { .. } => "payload_version",
            Undecodable::Invalid { .. } => "undecodable",
        }
    }

    /// The partition key of the item.
    pub(crate) fn pk(&self) -> &str {
        match self {
            Undecodable::UnknownPayloadVersion { pk, .. } | Undecodable::Invalid { pk, .. } => pk,
        }
    }
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecodable::UnknownPayloadVersion { pk, version } => {
                write!(f, "item {pk}: unknown payload_version {version}")
            }
            Undecodable::Invalid { pk, detail } => write!(f, "item {pk}: {detail}"),
        }
    }
}

impl From<Undecodable> for StoreError {
    fn from(e: Undecodable) -> Self {
        StoreError::Corrupt(e.to_string())
    }
}

/// Whether `item` is the schema item rather than a record.
pub(crate) fn is_meta(item: &Item) -> bool {
    matches!(item.get(PK), Some(AttributeValue::S(pk)) if pk == META_PK)
}

fn s<'a>(item: &'a Item, name: &str) -> Result<&'a str, String> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        Some(_) => Err(format!("{name} is not a string")),
        None => Err(format!("{name} is missing")),
    }
}

fn opt_s(item: &Item, name: &str) -> Result<Option<String>, String> {
    item.get(name).map(|_| s(item, name).map(str::to_owned)).transpose()
}

fn u64_of(item: &Item, name: &str) -> Result<u64, String> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| format!("{name} {v:?} is not a u64")),
        Some(_) => Err(format!("{name} is not a number")),
        None => Err(format!("{name} is missing")),
    }
}

fn opt_u64(item: &Item, name: &str) -> Result<Option<u64>, String> {
    item.get(name).map(|_| u64_of(item, name)).transpose()
}

/// The `version` of the schema item.
pub(crate) fn meta_version(item: &Item) -> Result<u32, String> {
    let v = u64_of(item, META_VERSION)?;
    u32::try_from(v).map_err(|_| format!("schema version {v} out of range"))
}

/// The `compatible_from` of the schema item, if recorded.
pub(crate) fn meta_compatible_from(item: &Item) -> Result<Option<u32>, String> {
    opt_u64(item, META_COMPATIBLE_FROM)?
        .map(|v| u32::try_from(v).map_err(|_| format!("compatible_from {v} out of range")))
        .transpose()
}

/// Reads an item of the `lease_ends` index (keys, `gen`, `writer`,
/// `lease_until_ms`) back into the lease end it projects.
pub(crate) fn decode_lease_end(item: &Item) -> Result<crate::LeaseEnd, String> {
    let key = parse_key(s(item, PK)?, s(item, SK)?)?;
    Ok(crate::LeaseEnd {
        key,
        version: Version::new(u64_of(item, GEN)?, s(item, WRITER)?),
        lease_until_ms: u64_of(item, LEASE_UNTIL_MS)?,
    })
}

/// The change stamp of an entry of the `change_stamps` index.
pub(crate) fn decode_change_stamp(item: &Item) -> Result<ChangeStamp, String> {
    let key = parse_key(s(item, PK)?, s(item, SK)?)?;
    let value = match item.get(CHANGE_STAMP) {
        Some(AttributeValue::N(v)) => v.parse::<u128>().ok(),
        _ => None,
    };
    value
        .and_then(|v| ChangeStamp::from_sort_value(key, v))
        .ok_or_else(|| format!("{CHANGE_STAMP} is missing or not a change stamp"))
}

/// Reads `item` back into the record it stores.
pub(crate) fn decode(mut item: Item) -> Result<Record, Undecodable> {
    let pk = match item.get(PK) {
        Some(AttributeValue::S(pk)) => pk.clone(),
        _ => "(no pk)".to_owned(),
    };
    let invalid = |detail: String| Undecodable::Invalid { pk: pk.clone(), detail };
    let packed = match item.get(PAYLOAD_VERSION_ATTR) {
        Some(AttributeValue::N(v)) if v.parse::<u32>() == Ok(PAYLOAD_VERSION) => false,
        Some(AttributeValue::N(v)) if v.parse::<u32>() == Ok(PACKED_PAYLOAD_VERSION) => true,
        Some(AttributeValue::N(v)) => {
            return Err(Undecodable::UnknownPayloadVersion { pk: pk.clone(), version: v.clone() });
        }
        _ => return Err(invalid("payload_version is missing or not a number".into())),
    };
    let key = parse_key(&pk, s(&item, SK).map_err(&invalid)?).map_err(&invalid)?;
    let header = (|| {
        let kind = s(&item, KIND)?;
        if kind != key.kind().as_str() {
            return Err(format!("kind {kind:?} does not match the key"));
        }
        Ok((
            Version::new(u64_of(&item, GEN)?, s(&item, WRITER)?),
            opt_s(&item, OWNER)?,
            opt_u64(&item, LEASE_UNTIL_MS)?,
            u64_of(&item, CHANGED_AT_MS)?,
            matches!(item.get(DELETED), Some(AttributeValue::Bool(true))),
            match (opt_u64(&item, LEASE_MS)?, opt_u64(&item, HEARTBEAT_MS)?) {
                (Some(duration_ms), Some(heartbeat_ms)) => {
                    Some(LeaseTerms { duration_ms, heartbeat_ms })
                }
                _ => None,
            },
        ))
    })();
    let (version, owner, lease_until_ms, changed_at_ms, deleted, terms) =
        header.map_err(&invalid)?;
    let payload = item.remove(PAYLOAD).ok_or_else(|| invalid("payload is missing".into()))?;
    let body: Body = match (packed, payload) {
        (true, AttributeValue::B(blob)) => unpack(blob.as_ref()).map_err(&invalid)?,
        (true, _) => return Err(invalid("a packed payload is not binary".into())),
        (false, payload) => serde_dynamo::aws_sdk_dynamodb_1::from_attribute_value(payload)
            .map_err(|e| invalid(format!("payload: {e}")))?,
    };
    if !body_fits(&key, &body) {
        return Err(invalid("payload does not match the key's kind".into()));
    }
    if deleted != matches!(body, Body::Tombstone) {
        return Err(invalid("deleted does not match the payload".into()));
    }
    Ok(Record { key, version, owner, lease_until_ms, changed_at_ms, terms, body })
}

fn body_fits(key: &Key, body: &Body) -> bool {
    matches!(
        (key, body),
        (_, Body::Tombstone)
            | (Key::Cluster { .. }, Body::Cluster)
            | (Key::Export(_), Body::Export(_))
            | (Key::Pool { .. }, Body::Pool(_))
            | (Key::Router { .. }, Body::Router(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_api::{HostPort, RouterReplica};
    use mcs_core::fixtures::{
        mk_cluster, mk_endpoints, mk_export, mk_export_spec, mk_incompressible_endpoints, mk_pool,
        mk_tombstone, port,
    };

    fn mk_router() -> Record {
        let router_id = RouterId::new("gr-0.us-east-1").unwrap();
        Record {
            key: Key::Router { router_id: router_id.clone() },
            version: Version::new(3, "w"),
            owner: Some("inc-1".into()),
            lease_until_ms: Some(5_000),
            changed_at_ms: 4_000,
            terms: Some(LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 }),
            body: Body::Router(RouterReplica {
                router_id,
                address: HostPort::new("10.0.0.1:8080").unwrap(),
                location: None,
            }),
        }
    }

    fn samples() -> Vec<Record> {
        vec![
            mk_pool("a", 1, "w", Some("x"), Some(10_000)),
            mk_pool("b", 2, "w", None, None),
            mk_tombstone("a", 3, "w"),
            mk_cluster("c1", 4, "inc", 9_000),
            mk_export("c1", "svc", 5, mk_export_spec(1_700_000_000, vec![port("http", 80)])),
            mk_router(),
        ]
    }

    #[test]
    fn records_round_trip_through_items() {
        for record in samples() {
            let item = encode(&record, "us-east-1", 0).unwrap();
            assert_eq!(decode(item).unwrap(), record, "{}", record.key);
        }
    }

    #[test]
    fn keys_follow_the_layout() {
        let keys: Vec<(String, String)> =
            samples().iter().map(|r| key_attributes(&r.key, "eu-west-1")).collect();
        assert_eq!(keys[0].0, format!("POOL#{}", mcs_core::fixtures::pool_key("a").id()));
        assert_eq!(keys[0].1, "#@eu-west-1");
        assert_eq!(keys[3], ("CLUSTER#c1".to_owned(), "#@eu-west-1".to_owned()));
        assert_eq!(keys[4], ("SVC#llm/svc".to_owned(), "EXPORT#c1@eu-west-1".to_owned()));
        assert_eq!(keys[5], ("ROUTER#gr-0.us-east-1".to_owned(), "#@eu-west-1".to_owned()));
        for r in samples() {
            let (pk, sk) = key_attributes(&r.key, "eu-west-1");
            assert_eq!(parse_key(&pk, &sk).unwrap(), r.key);
            assert_eq!(origin_of_sort_key(&sk), Some("eu-west-1"));
        }
    }

    #[test]
    fn malformed_keys_are_refused() {
        for (pk, sk) in [
            ("CLUSTER#Bad", "#@r"),
            ("CLUSTER#c1", "x@r"),
            ("CLUSTER#c1", "#"),
            ("CLUSTER#c1", "#@"),
            ("CLUSTER#c1", "#@Bad_Region"),
            ("SVC#llm", "EXPORT#c1@r"),
            ("SVC#llm/svc", "c1@r"),
            ("POOL#nothex", "#@r"),
            ("ROUTER#a..b", "#@r"),
            ("THING#x", "#@r"),
            ("META", "SCHEMA"),
        ] {
            assert!(parse_key(pk, sk).is_err(), "{pk} {sk}");
        }
    }

    #[test]
    fn shards_are_stable_and_spread() {
        // Part of the stored layout: a change here strands every item's
        // shard. Golden values from `sha256(pk)[0..2]` big-endian mod 8.
        let golden: Vec<u32> = ["CLUSTER#c1", "POOL#x", "SVC#llm/svc", "ROUTER#r"]
            .iter()
            .map(|pk| shard_of(pk))
            .collect();
        assert_eq!(golden, vec![2, 7, 1, 7]);
        let used: std::collections::BTreeSet<u32> =
            (0..200).map(|i| shard_of(&format!("POOL#{i}"))).collect();
        assert_eq!(used.len(), SHARDS as usize, "every shard is used");
    }

    #[test]
    fn ttl_is_expiry_plus_retention_in_seconds() {
        let leased = mk_pool("a", 1, "w", None, Some(10_000));
        let item = encode(&leased, "us-east-1", 86_400_000).unwrap();
        assert_eq!(item[TTL], AttributeValue::N("86410".into()));
        let mut tomb = mk_tombstone("a", 2, "w");
        tomb.changed_at_ms = 2_500;
        let item = encode(&tomb, "us-east-1", 1_000).unwrap();
        assert_eq!(item[TTL], AttributeValue::N("3".into()));
        let export = mk_export("c1", "svc", 1, mk_export_spec(0, vec![]));
        assert!(!encode(&export, "us-east-1", 1_000).unwrap().contains_key(TTL));
        let withdrawn = Record { body: Body::Tombstone, ..export };
        assert!(!encode(&withdrawn, "us-east-1", 1_000).unwrap().contains_key(TTL), "issue 22");
        assert!(!item.contains_key(OWNER));
        assert!(!item.contains_key(LEASE_UNTIL_MS));
    }

    #[test]
    fn unknown_payload_versions_and_garbage_are_told_apart() {
        let record = mk_pool("a", 1, "w", None, None);
        let mut newer = encode(&record, "us-east-1", 0).unwrap();
        newer.insert(PAYLOAD_VERSION_ATTR.into(), AttributeValue::N("3".into()));
        assert_eq!(decode(newer).unwrap_err().reason(), "payload_version");
        let mut garbage = encode(&record, "us-east-1", 0).unwrap();
        garbage.insert(PAYLOAD.into(), AttributeValue::S("?".into()));
        assert_eq!(decode(garbage).unwrap_err().reason(), "undecodable");
        let mut lying = encode(&record, "us-east-1", 0).unwrap();
        lying.insert(DELETED.into(), AttributeValue::Bool(true));
        assert_eq!(decode(lying).unwrap_err().reason(), "undecodable");
        let mut wrong_kind = encode(&record, "us-east-1", 0).unwrap();
        wrong_kind.insert(KIND.into(), AttributeValue::S("router".into()));
        assert_eq!(decode(wrong_kind).unwrap_err().reason(), "undecodable");
    }

    #[test]
    fn the_size_does_not_depend_on_region_or_retention() {
        let record = mk_pool("a", 1, "w", Some("x"), Some(10_000));
        let size = record_item_size(&record).unwrap();
        for (origin, retention) in [("a", 0), ("us-east-1", 86_400_000), (LONGEST_ORIGIN, 1)] {
            let real = item_size(&encode(&record, origin, retention).unwrap());
            assert!(real <= size, "{origin}: {real} > {size}");
        }
        assert!(check_origin(LONGEST_ORIGIN).is_ok());
        assert_eq!(LONGEST_ORIGIN.len(), 64);
    }

    /// An export of `endpoints` whose plain item is `size` bytes in the
    /// worst case: the first endpoint's hostname pads it to the byte.
    fn export_of_worst_plain_size(endpoints: usize, size: usize) -> Record {
        let mut spec = mk_export_spec(0, vec![]);
        spec.endpoints = mk_endpoints(endpoints);
        spec.endpoints[0].hostname = Some(String::new());
        let mut record = mk_export("c1", "big", 1, spec);
        let base = worst_case_plain_size(&record).unwrap();
        let Body::Export(spec) = &mut record.body else { unreachable!() };
        spec.endpoints[0].hostname = Some("h".repeat(size - base));
        assert_eq!(worst_case_plain_size(&record).unwrap(), size);
        record
    }

    fn is_packed(item: &Item) -> bool {
        item[PAYLOAD_VERSION_ATTR] == n(PACKED_PAYLOAD_VERSION)
            && matches!(item[PAYLOAD], AttributeValue::B(_))
    }

    #[test]
    fn a_record_over_the_plain_limit_is_packed_in_every_region_and_reads_back() {
        // At the limit in the worst case: plain everywhere.
        let fits = export_of_worst_plain_size(5_000, MAX_ITEM_BYTES);
        // One byte more: packed everywhere, even where its plain item (short
        // origin, no retention) would have fit.
        let over = export_of_worst_plain_size(5_000, MAX_ITEM_BYTES + 1);
        for (origin, retention) in [("a", 0), ("us-east-1", 86_400_000), (LONGEST_ORIGIN, 1)] {
            let plain = encode(&fits, origin, retention).unwrap();
            assert!(!is_packed(&plain), "{origin}");
            assert_eq!(decode(plain).unwrap(), fits);
            let packed = encode(&over, origin, retention).unwrap();
            assert!(is_packed(&packed), "{origin}");
            assert!(item_size(&packed) < MAX_ITEM_BYTES / 4, "{}", item_size(&packed));
            assert_eq!(decode(packed).unwrap(), over);
        }
        assert!(item_size(&encode_plain(&over, "a", 0).unwrap()) < MAX_ITEM_BYTES);
        assert!(check_record_size(&over).is_ok());
        let stored = |origin| item_size(&encode(&over, origin, 0).unwrap());
        assert_eq!(record_item_size(&over).unwrap(), stored(LONGEST_ORIGIN));
        assert_eq!(stored(LONGEST_ORIGIN), stored("x") + LONGEST_ORIGIN.len() - 1);
        assert_eq!(record_item_size(&fits).unwrap(), MAX_ITEM_BYTES);
    }

    #[test]
    fn an_export_of_20000_endpoints_is_stored_packed() {
        let mut spec = mk_export_spec(0, vec![port("http", 80)]);
        spec.endpoints = mk_endpoints(20_000);
        let record = mk_export("c1", "svc", 1, spec);
        assert!(worst_case_plain_size(&record).unwrap() > 2 * MAX_ITEM_BYTES);
        assert!(check_record_size(&record).is_ok());
        let item = encode(&record, "us-east-1", 0).unwrap();
        assert!(is_packed(&item));
        assert_eq!(decode(item).unwrap(), record);
    }

    #[test]
    fn an_export_too_large_even_packed_names_its_largest_field() {
        let mut spec = mk_export_spec(0, vec![]);
        spec.endpoints = mk_incompressible_endpoints(12_000);
        let record = mk_export("c1", "svc", 1, spec);
        let Err(StoreError::TooLarge { size, limit, field }) = check_record_size(&record) else {
            panic!("not refused");
        };
        // The size is the packed item's, smaller than the plain one.
        assert!(size > limit && size < worst_case_plain_size(&record).unwrap(), "{size}");
        assert_eq!(size, item_size(&encode(&record, LONGEST_ORIGIN, u64::MAX).unwrap()));
        assert_eq!(field.as_deref(), Some("endpoints"));
        assert!(check_record_size(&mk_pool("a", 1, "w", None, None)).is_ok());
    }

    #[test]
    fn packed_payloads_that_lie_or_inflate_without_bound_are_undecodable() {
        let mut spec = mk_export_spec(0, vec![]);
        spec.endpoints = mk_endpoints(20_000);
        let record = mk_export("c1", "svc", 1, spec);
        let packed = encode(&record, "us-east-1", 0).unwrap();
        let with_payload = |payload: AttributeValue| {
            let mut item = packed.clone();
            item.insert(PAYLOAD.into(), payload);
            decode(item).unwrap_err()
        };
        let deflate = |bytes: &[u8]| {
            let mut zlib = ZlibEncoder::new(Vec::new(), Compression::fast());
            zlib.write_all(bytes).unwrap();
            AttributeValue::B(Blob::new(zlib.finish().unwrap()))
        };
        let plain = encode_plain(&record, "us-east-1", 0).unwrap().remove(PAYLOAD).unwrap();
        for (payload, says) in [
            (plain, "not binary"),
            (AttributeValue::B(Blob::new(b"not zlib".to_vec())), "packed payload"),
            (deflate(b"{\"type\":\"pool\"}"), "packed payload"),
            (deflate(&vec![b' '; MAX_UNPACKED_BYTES as usize + 1]), "inflates past"),
        ] {
            let e = with_payload(payload);
            assert_eq!(e.reason(), "undecodable");
            assert!(e.to_string().contains(says), "{e}");
        }
        // A packed tombstone whose item says it is live is caught as any other.
        let mut lying = packed;
        lying.insert(PAYLOAD.into(), deflate(b"{\"type\":\"tombstone\"}"));
        assert!(decode(lying).unwrap_err().to_string().contains("deleted does not match"));
    }
}
