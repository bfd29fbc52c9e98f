//! The rules under test, pluggable so that a deliberately broken variant can
//! be injected without touching mcs-core.
//!
//! ```text
//!  registrar ── write rule ──► its region's item (key, origin)   (Rules::write)
//!  replicator ─ replica rule ─► the same item in other regions  (Rules::replica)
//!  reader ───── merge rule ───► one winner per key in the view   (Rules::merge)
//!  TTL sweep ── ttl rule ─────► which items a replica deletes    (Rules::ttl)
//!  full read ── retire rule ──► a held winner no item holds      (Rules::retire)
//! ```
//!
//! [`Rules::REAL`] is what the system runs: [`mcs_core::decide`] (with
//! [`mcs_core::rules::renewal_extends`] for renewals), [`Record::supersedes`],
//! replicas that apply each item's images in its origin's commit order, and
//! the `ttl` the DynamoDB store writes ([`mcs_core::rules::ttl_expires_at_ms`]
//! plus the retention).

use crate::table::Item;
use mcs_core::{Record, WriteDecision};

/// The conditional write rule: what a write of `new` over `stored` does at
/// the writer's `now_ms`.
pub type WriteRule = fn(stored: Option<&Record>, new: &Record, now_ms: u64) -> WriteDecision;

/// The view's merge rule: whether `incoming` replaces `held` as the key's
/// winner.
pub type MergeRule = fn(incoming: &Record, held: &Record) -> bool;

/// The replication rule: whether a delivered `incoming` image of an item
/// replaces the replica's `held` image of the same item.
pub type ReplicaRule = fn(incoming: &Item, held: &Item) -> bool;

/// The `ttl` stored with `record` (ms, by its writer's clock), given the
/// table's retention: DynamoDB's TTL deletes the item once it has passed.
/// `None`: never deleted by TTL.
pub type TtlRule = fn(record: &Record, retention_ms: u64) -> Option<u64>;

/// One set of rules a schedule runs with.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Shown in failures and reports.
    pub name: &'static str,
    /// The conditional write (also the registrar's judgement against its view).
    pub write: WriteRule,
    /// The view's merge.
    pub merge: MergeRule,
    /// The replica's last-writer-wins.
    pub replica: ReplicaRule,
    /// The stored `ttl`.
    pub ttl: TtlRule,
    /// Whether a full read replaces a held winner that no item of its key
    /// holds any more by the older version it reads
    /// ([`mcs_core::View::replace_all`]).
    pub retire: bool,
}

impl Rules {
    /// The rules of mcs-core: [`mcs_core::decide`] for writes,
    /// [`Record::supersedes`] for the view, and replicas that apply an
    /// item's images in the order its origin committed them — what DynamoDB
    /// global tables do for an item only one region writes.
    pub const REAL: Rules = Rules {
        name: "mcs-core",
        write: mcs_core::decide,
        merge: supersedes,
        replica: lww_by_commit,
        ttl: stored_ttl,
        retire: true,
    };

    /// The rules of mcs-core with replicas that settle an item by
    /// last-writer-wins on `(changed_at_ms, generation, writer)`, as the
    /// multi-region test's replicator does. NOT sound: two registrars of one region write the
    /// same item with their own skewed clocks, so `changed_at_ms` is not
    /// monotone per item, and a newer image can lose to an older one.
    pub const CHANGED_AT_REPLICATION: Rules = Rules {
        name: "mcs-core, replicas by changed_at",
        replica: lww_by_changed_at,
        ..Rules::REAL
    };

    /// The rules of mcs-core with replicas that take an image when it
    /// supersedes the held one (`(generation, writer)`, then write time).
    pub const SUPERSEDES_REPLICATION: Rules = Rules {
        name: "mcs-core, replicas by supersedes",
        replica: lww_by_supersedes,
        ..Rules::REAL
    };

    /// BROKEN on purpose: a write rule that orders by generation alone and
    /// ignores tombstones, so a write at an equal or lower generation can
    /// replace a tombstone (and an equal generation of another writer wins).
    pub const BROKEN_TOMBSTONE_WRITE: Rules = Rules {
        name: "broken: generation-only write ignoring tombstones",
        write: generation_only_write,
        ..Rules::REAL
    };

    /// BROKEN on purpose: the write rule without the withdrawal fence
    /// (defect 2 of the hardening review): the fence held only in one
    /// registrar's view, so a heartbeat through another process of the
    /// region, whose view lagged, was retried past the tombstone.
    pub const BROKEN_UNFENCED_WRITE: Rules = Rules {
        name: "broken: the withdrawal fence only in the view",
        write: unfenced_write,
        ..Rules::REAL
    };

    /// BROKEN on purpose: a tombstone's `ttl` is the end of the lease it
    /// withdrew, without the retention ("the tombstone is of no use once
    /// the lease it withdrew has ended"): but that is the end the
    /// withdrawing registrar's view held, and an older item of the key in
    /// another region, renewed since (or before its region has the
    /// tombstone), lives on past it, left behind when TTL deletes the
    /// tombstone (invariant `LeftBehind`).
    pub const BROKEN_TTL_AT_WITHDRAWN_LEASE_END: Rules = Rules {
        name: "broken: a tombstone's ttl is the withdrawn lease's end, without retention",
        ttl: ttl_at_withdrawn_lease_end,
        ..Rules::REAL
    };

    /// BROKEN on purpose: a full read that keeps a held winner TTL deleted
    /// from the replica, as the view did before issue 22: a new incarnation
    /// registering with its own lower generation is then not served by the
    /// processes that held the old record, while the others serve it.
    pub const BROKEN_KEEPS_RETIRED: Rules = Rules {
        name: "broken: a full read keeps a winner no item holds",
        retire: false,
        ..Rules::REAL
    };

    /// BROKEN on purpose: a merge that lets any record replace a held
    /// tombstone, whatever its version.
    pub const BROKEN_TOMBSTONE_MERGE: Rules = Rules {
        name: "broken: merge blind to tombstones",
        merge: tombstone_blind_merge,
        ..Rules::REAL
    };
}

/// The `ttl` the DynamoDB store writes: [`mcs_core::rules::ttl_expires_at_ms`]
/// plus the retention (`mcs-store`'s `dynamo/item.rs`, in whole seconds
/// there).
pub fn stored_ttl(record: &Record, retention_ms: u64) -> Option<u64> {
    mcs_core::rules::ttl_expires_at_ms(record).map(|at| at.saturating_add(retention_ms))
}

/// The broken `ttl`: a tombstone's is the withdrawn lease's end (its write
/// if it withdrew none), with no retention; other records keep theirs.
pub fn ttl_at_withdrawn_lease_end(record: &Record, retention_ms: u64) -> Option<u64> {
    if record.is_tombstone() {
        return Some(record.lease_until_ms.unwrap_or(record.changed_at_ms));
    }
    stored_ttl(record, retention_ms)
}

/// [`Record::supersedes`] as a merge rule.
pub fn supersedes(incoming: &Record, held: &Record) -> bool {
    incoming.supersedes(held)
}

/// Last-writer-wins on the item's write time, then generation, then writer
/// (the order of the multi-region test's replicator).
pub fn lww_by_changed_at(incoming: &Item, held: &Item) -> bool {
    let key = |i: &Item| {
        (i.record.changed_at_ms, i.record.version.generation, i.record.version.writer.clone())
    };
    key(incoming) > key(held)
}

/// A replica takes an image when it supersedes the held one: the order of
/// [`Record::supersedes`], which a region's conditional writes only ever
/// move forward in.
pub fn lww_by_supersedes(incoming: &Item, held: &Item) -> bool {
    incoming.record.supersedes(&held.record)
}

/// Last-writer-wins on the origin's commit order.
pub fn lww_by_commit(incoming: &Item, held: &Item) -> bool {
    incoming.commit > held.commit
}

/// The broken write rule: ownership as in mcs-core, then generation alone;
/// a stored tombstone never refuses anything.
pub fn generation_only_write(stored: Option<&Record>, new: &Record, now_ms: u64) -> WriteDecision {
    let Some(stored) = stored else {
        return WriteDecision::Apply;
    };
    if stored.is_tombstone() {
        return WriteDecision::Apply;
    }
    match mcs_core::decide(Some(stored), new, now_ms) {
        WriteDecision::Owned { owner, until_ms } => WriteDecision::Owned { owner, until_ms },
        decided => match new.version.generation.cmp(&stored.version.generation) {
            std::cmp::Ordering::Greater => WriteDecision::Apply,
            std::cmp::Ordering::Equal if decided == WriteDecision::Renew => WriteDecision::Renew,
            std::cmp::Ordering::Equal => WriteDecision::Apply,
            std::cmp::Ordering::Less => WriteDecision::Stale { stored: stored.version.clone() },
        },
    }
}

/// The broken merge rule: a held tombstone is replaced by anything.
pub fn tombstone_blind_merge(incoming: &Record, held: &Record) -> bool {
    held.is_tombstone() || incoming.supersedes(held)
}

/// The broken write rule: [`mcs_core::decide`] except that a tombstone of
/// the writing incarnation refuses only by version, as before the fence was
/// part of the rule.
pub fn unfenced_write(stored: Option<&Record>, new: &Record, now_ms: u64) -> WriteDecision {
    if let Some(held) = stored
        && mcs_core::rules::fenced_by_withdrawal(Some(held), new).is_some()
    {
        return match new.version.cmp(&held.version) {
            std::cmp::Ordering::Greater => WriteDecision::Apply,
            _ => WriteDecision::Stale { stored: held.version.clone() },
        };
    }
    mcs_core::decide(stored, new, now_ms)
}
