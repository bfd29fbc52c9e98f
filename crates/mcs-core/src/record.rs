//! The record: a typed payload plus the fields the merge rules need. The
//! rules themselves, and the methods of [`Record`] that apply them
//! (`is_live`, `supersedes`, ...), live in [`crate::rules`], a floor above.

use mcs_api::{ExportKey, ExportSpec, Label, Pool, PoolId, RouterId, RouterReplica};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// What a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A cluster's lease, held by its controller.
    Cluster,
    /// A cluster's export of one service; lives on its cluster's lease.
    Export,
    /// An inference pool, held by its relay.
    Pool,
    /// A Global Router replica.
    Router,
}

impl Kind {
    /// Every kind, in a fixed order.
    pub const ALL: [Kind; 4] = [Kind::Cluster, Kind::Export, Kind::Pool, Kind::Router];

    /// The kind's name as used in paths and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Cluster => "cluster",
            Kind::Export => "export",
            Kind::Pool => "pool",
            Kind::Router => "router",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity of a record; one stored item per key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Key {
    /// `CLUSTER#{cluster_id}`.
    Cluster {
        /// The cluster.
        cluster_id: Label,
    },
    /// `SVC#{namespace}/{name}`, `EXPORT#{cluster_id}`.
    Export(ExportKey),
    /// `POOL#{pool_id}`.
    Pool {
        /// The pool.
        pool_id: PoolId,
    },
    /// `ROUTER#{router_id}`.
    Router {
        /// The router replica.
        router_id: RouterId,
    },
}

impl Key {
    /// The kind of record this key names.
    pub fn kind(&self) -> Kind {
        match self {
            Key::Cluster { .. } => Kind::Cluster,
            Key::Export(_) => Kind::Export,
            Key::Pool { .. } => Kind::Pool,
            Key::Router { .. } => Kind::Router,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Cluster { cluster_id } => write!(f, "cluster/{cluster_id}"),
            Key::Export(k) => write!(f, "export/{}/{}/{}", k.cluster_id, k.namespace, k.name),
            Key::Pool { pool_id } => write!(f, "pool/{pool_id}"),
            Key::Router { router_id } => write!(f, "router/{router_id}"),
        }
    }
}

/// Who wrote what: larger `generation` is newer; `writer` breaks ties.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Version {
    /// The writer's generation.
    pub generation: u64,
    /// The registrar instance or client incarnation that produced `generation`.
    pub writer: String,
}

impl Version {
    /// A version.
    pub fn new(generation: u64, writer: impl Into<String>) -> Self {
        Self { generation, writer: writer.into() }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.generation, self.writer)
    }
}

/// The payload of a record; a withdrawn record is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "spec", rename_all = "snake_case")]
pub enum Body {
    /// Withdrawn at the record's version; refuses older writes.
    Tombstone,
    /// A cluster's lease; the owner is its controller's incarnation.
    Cluster,
    /// A cluster's export.
    Export(ExportSpec),
    /// A pool as served.
    Pool(Pool),
    /// A router replica as served.
    Router(RouterReplica),
}

/// A lease's length and the heartbeat interval its holder was asked to
/// renew at, as granted: what lets a reader that no longer sees every
/// renewal bound when the lease was last renewed (`lease_until_ms -
/// duration_ms`) and when the next is due (docs/design.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseTerms {
    /// Lifetime of the lease from each renewal.
    pub duration_ms: u64,
    /// How often the holder renews.
    pub heartbeat_ms: u64,
}

/// One stored lease end, as the `lease_ends` index of DynamoDB holds it
/// (docs/design.md §3): which record, at which version, leased until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseEnd {
    /// The record's key.
    pub key: Key,
    /// The version whose lease this is.
    pub version: Version,
    /// When the lease ends, epoch milliseconds.
    pub lease_until_ms: u64,
}

/// Which write an item holds, as the `change_stamps` index of DynamoDB
/// holds it (docs/design.md §3, §6 "Reaching back for late changes"): its
/// key, its `changed_at_ms` and a hash of its version, without the content.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ChangeStamp {
    /// The record's key.
    pub key: Key,
    /// The item's `changed_at_ms`.
    pub changed_at_ms: u64,
    /// [`ChangeStamp::version_hash`] of the item's version.
    pub version_hash: u32,
}

impl ChangeStamp {
    /// The stamp of `record`'s item.
    pub fn of(record: &Record) -> Self {
        Self {
            key: record.key.clone(),
            changed_at_ms: record.changed_at_ms,
            version_hash: Self::version_hash(&record.version),
        }
    }

    /// A 32-bit hash of `version`: the first four bytes, big-endian, of the
    /// SHA-256 of its generation (eight bytes, big-endian) and writer id.
    /// Stable across builds: it is stored.
    pub fn version_hash(version: &Version) -> u32 {
        let mut hasher = Sha256::new();
        hasher.update(version.generation.to_be_bytes());
        hasher.update(version.writer.as_bytes());
        let digest = hasher.finalize();
        u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
    }

    /// The stamp as one number, the item attribute `c` that the index sorts
    /// by: `changed_at_ms · 2³² + version_hash`, so that a range of write
    /// times is a range of `c`.
    pub fn sort_value(&self) -> u128 {
        (u128::from(self.changed_at_ms) << 32) | u128::from(self.version_hash)
    }

    /// The least sort value of a write at `changed_at_ms`.
    pub fn first_sort_value(changed_at_ms: u64) -> u128 {
        u128::from(changed_at_ms) << 32
    }

    /// The stamp of `key` whose sort value is `n`; `None` when `n` is out
    /// of range.
    pub fn from_sort_value(key: Key, n: u128) -> Option<Self> {
        let changed_at_ms = u64::try_from(n >> 32).ok()?;
        Some(Self { key, changed_at_ms, version_hash: (n & 0xffff_ffff) as u32 })
    }
}

/// One stored item, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Which record.
    pub key: Key,
    /// Its version.
    pub version: Version,
    /// The incarnation holding its lease, if any.
    pub owner: Option<String>,
    /// Absolute lease expiry (clusters, pools, routers; not exports or tombstones).
    pub lease_until_ms: Option<u64>,
    /// The registrar's clock when it wrote the item's content (a renewal
    /// keeps it, docs/design.md §6); drives delta polling.
    pub changed_at_ms: u64,
    /// The lease's terms as granted by the write that set `lease_until_ms`,
    /// when that writer recorded them (schema 2 on; absent on items written
    /// before, and on unleased records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<LeaseTerms>,
    /// The payload.
    pub body: Body,
}

impl Record {
    /// Whether this record withdraws its key.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.body, Body::Tombstone)
    }

    /// Digest of what a renewal must not change: the payload and the owner.
    /// Equal `(version, content_digest)` means an idempotent retry or a
    /// heartbeat.
    pub fn content_digest(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(serde_json::to_vec(&(&self.owner, &self.body)).unwrap_or_default());
        let digest = hasher.finalize();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// When the record was last written, renewals included: its content's
    /// write (`changed_at_ms`), or its last renewal (the lease end less the
    /// lease's duration) when its terms say so, whichever is later. A
    /// renewal in place keeps `changed_at_ms` (docs/design.md §6).
    pub fn last_written_ms(&self) -> u64 {
        let renewed = match (self.lease_until_ms, self.terms) {
            (Some(until), Some(terms)) => until.saturating_sub(terms.duration_ms),
            _ => 0,
        };
        self.changed_at_ms.max(renewed)
    }
}

#[cfg(test)]
mod tests;
