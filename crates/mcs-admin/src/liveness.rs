//! Why a record is or is not served: the reason `ls --all`, `describe`,
//! `doctor` and `gc` report, read off the registry's own [`View`].

use mcs_core::{Key, Record, View};
use serde::Serialize;
use std::fmt;

/// Whether a record is served, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Served.
    Live,
    /// Its lease (plus the skew allowance) has passed.
    Expired,
    /// A tombstone: withdrawn at its version.
    Withdrawn,
    /// An export whose cluster holds no live lease.
    ClusterNotLive,
    /// Live by its lease but not served (a cluster lease without an owner).
    NotServed,
}

impl Reason {
    /// The reason as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Live => "live",
            Reason::Expired => "expired",
            Reason::Withdrawn => "withdrawn",
            Reason::ClusterNotLive => "cluster_not_live",
            Reason::NotServed => "not_served",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `view` serves `record` (the record it holds for that key) at
/// `now_ms`, and why not.
pub fn reason_of(view: &View, record: &Record, skew_ms: u64, now_ms: u64) -> Reason {
    if record.is_tombstone() {
        return Reason::Withdrawn;
    }
    let served = match &record.key {
        Key::Pool { pool_id } => view.pools().contains(pool_id),
        Key::Router { router_id } => view.routers().contains(router_id),
        Key::Cluster { cluster_id } => view.clusters().contains(cluster_id),
        Key::Export(key) => view.exports().contains(key),
    };
    match (&record.key, served) {
        (_, true) => Reason::Live,
        (Key::Export(_), false) => Reason::ClusterNotLive,
        (_, false) if !record.is_live(now_ms, skew_ms) => Reason::Expired,
        (_, false) => Reason::NotServed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::view_of;
    use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone, port};

    #[test]
    fn every_reason() {
        let now = 1_000_000;
        let spec = || mk_export_spec(1_700_000_000, vec![port("http", 80)]);
        let records = vec![
            mk_pool("live", 1, "w", None, Some(now + 5_000)),
            mk_pool("old", 1, "w", None, Some(now - 5_000)),
            mk_tombstone("gone", 2, "w"),
            mk_cluster("up", 1, "inc", now + 5_000),
            mk_cluster("down", 1, "inc", now - 5_000),
            mk_export("up", "web", 1, spec()),
            mk_export("down", "web", 1, spec()),
            mk_export("missing", "web", 1, spec()),
        ];
        let mut leaderless = mk_cluster("leaderless", 1, "inc", now + 5_000);
        leaderless.owner = None;
        let mut all = records.clone();
        all.push(leaderless.clone());
        let view = view_of(all, 1_000, now);
        let reasons: Vec<Reason> =
            records.iter().map(|r| reason_of(&view, r, 1_000, now)).collect();
        use Reason::*;
        assert_eq!(
            reasons,
            vec![Live, Expired, Withdrawn, Live, Expired, Live, ClusterNotLive, ClusterNotLive]
        );
        assert_eq!(reason_of(&view, &leaderless, 1_000, now), NotServed);
        assert_eq!(serde_json::to_string(&ClusterNotLive).unwrap(), "\"cluster_not_live\"");
    }
}
