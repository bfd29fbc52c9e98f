//! The record: a typed payload plus the fields the merge rules need.

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
    /// The registrar's clock when it wrote the item; drives delta polling.
    pub changed_at_ms: u64,
    /// The payload.
    pub body: Body,
}

impl Record {
    /// Whether this record withdraws its key.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.body, Body::Tombstone)
    }

    /// Whether the record's lease is live at `now_ms`, given `skew_ms` of
    /// allowance for clock differences between writer and reader. Exports
    /// have no lease of their own: they are live when not withdrawn, and the
    /// view adds their cluster's liveness.
    pub fn is_live(&self, now_ms: u64, skew_ms: u64) -> bool {
        if self.is_tombstone() {
            return false;
        }
        match self.lease_until_ms {
            Some(until) => now_ms < until.saturating_add(skew_ms),
            None => self.key.kind() == Kind::Export,
        }
    }

    /// When the item has no more use and storage may drop it (before a
    /// retention is added): a lease's end, a tombstone's write time; `None`
    /// for exports, which live on their cluster.
    pub fn expires_at_ms(&self) -> Option<u64> {
        if self.is_tombstone() {
            return Some(self.changed_at_ms);
        }
        self.lease_until_ms
    }

    /// When the record has no more use, as [`expires_at_ms`](Self::expires_at_ms),
    /// but for an export (not withdrawn) derived from `cluster`, the merged
    /// record of its cluster: an export lives on its cluster's lease, so it
    /// is of no use once that lease has ended or the cluster was withdrawn.
    /// It is the later of the cluster's expiry (its lease's end, or its
    /// withdrawal) and the export's own last write (an export may be written
    /// while its cluster holds no lease); with no cluster record at all,
    /// the export's last write. `None` while the cluster's record has no
    /// expiry.
    ///
    /// No stored `ttl` can say this: a cluster renews its lease by writing
    /// its own item only, never its exports'. So gc computes it.
    pub fn expires_at_ms_on(&self, cluster: Option<&Record>) -> Option<u64> {
        if self.key.kind() != Kind::Export || self.is_tombstone() {
            return self.expires_at_ms();
        }
        match cluster {
            None => Some(self.changed_at_ms),
            Some(cluster) => cluster.expires_at_ms().map(|at| at.max(self.changed_at_ms)),
        }
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

    /// Whether `self` should replace `stored` in a merged view: a higher
    /// version, or the same version with a later lease end, then a later
    /// write time (a renewal). Equal versions are ordered by lease end first
    /// because that is the order stores keep renewals in
    /// ([`crate::rules::renewal_extends`]); ordering them by write time
    /// alone let views holding the same items disagree on when a lease ends.
    pub fn supersedes(&self, stored: &Record) -> bool {
        match self.version.cmp(&stored.version) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => {
                (self.lease_until_ms, self.changed_at_ms)
                    > (stored.lease_until_ms, stored.changed_at_ms)
            }
            std::cmp::Ordering::Less => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};

    #[test]
    fn an_export_expires_with_its_cluster() {
        let mut export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
        export.changed_at_ms = 100;
        let leased = mk_cluster("c1", 1, "ctl", 500);
        assert_eq!(export.expires_at_ms(), None, "no expiry of its own");
        assert_eq!(export.expires_at_ms_on(Some(&leased)), Some(500), "the lease's end");
        assert_eq!(export.expires_at_ms_on(None), Some(100), "no cluster: its own write");
        let mut withdrawn = mk_tombstone("c1", 2, "w");
        withdrawn.key = leased.key.clone();
        withdrawn.changed_at_ms = 50;
        assert_eq!(export.expires_at_ms_on(Some(&withdrawn)), Some(100), "written after it");
        withdrawn.changed_at_ms = 300;
        assert_eq!(export.expires_at_ms_on(Some(&withdrawn)), Some(300), "the withdrawal");
        let mut gone = export.clone();
        gone.body = crate::Body::Tombstone;
        assert_eq!(gone.expires_at_ms_on(Some(&leased)), Some(100), "a tombstone's own write");
        let pool = mk_pool("p", 1, "w", None, Some(700));
        assert_eq!(pool.expires_at_ms_on(Some(&leased)), Some(700), "others: their own");
    }
}
