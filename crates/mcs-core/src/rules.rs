//! The rules over records (docs/design.md §2, §4, §6), in one place: the
//! write rule every store applies, the merge order of views, liveness and
//! expiry.
//!
//! - [`decide`]: what a conditional write does. The memory store calls it
//!   directly; the DynamoDB store expresses the same rule as a condition
//!   expression and calls [`decide`] on the `ALL_OLD` image of a refused
//!   write to explain the refusal.
//! - [`supersedes`]: which of two records of a key a merged view keeps.
//! - [`is_live`]: whether a record's lease is live at a time.
//! - [`expires_at_ms`], [`expires_at_ms_on`]: when a record has no more use.
//! - [`ttl_expires_at_ms`]: what the stored `ttl` says (never for exports).
//! - [`withdrawn_lease_end`]: the lease end a tombstone carries, so that a
//!   late withdrawal shows in the `lease_ends` index.
//!
//! [`Record`]'s methods of the same names delegate here.

use crate::{Kind, Record, Version};

/// What a conditional write does to the stored record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDecision {
    /// Nothing stored, or the write is newer: store it.
    Apply,
    /// Same version and content: a heartbeat or an idempotent retry. Store it
    /// only if it extends the lease; succeed either way.
    Renew,
    /// The stored version is newer (or equal with other content): refuse.
    Stale {
        /// What is stored.
        stored: Version,
    },
    /// Another incarnation holds the record's live lease: refuse.
    Owned {
        /// That incarnation.
        owner: String,
        /// When its lease ends.
        until_ms: u64,
    },
}

/// Decides a write of `new` over `stored` at `now_ms`.
///
/// - A live lease held by another incarnation refuses the write (`Owned`);
///   once it has expired (or the record is a tombstone), anyone may write.
/// - A withdrawal fences its own incarnation ([`fenced_by_withdrawal`]):
///   `Stale` with the tombstone's version.
/// - Otherwise the higher `(generation, writer)` wins; equal version with equal
///   content is a renewal; anything else is `Stale`.
pub fn decide(stored: Option<&Record>, new: &Record, now_ms: u64) -> WriteDecision {
    let Some(stored) = stored else {
        return WriteDecision::Apply;
    };
    if let Some(owned) = owned_by_another(stored, new.owner.as_deref(), now_ms) {
        return owned;
    }
    if let Some(tombstone) = fenced_by_withdrawal(Some(stored), new) {
        return WriteDecision::Stale { stored: tombstone.clone() };
    }
    match new.version.cmp(&stored.version) {
        std::cmp::Ordering::Greater => WriteDecision::Apply,
        std::cmp::Ordering::Equal if new.content_digest() == stored.content_digest() => {
            WriteDecision::Renew
        }
        _ => WriteDecision::Stale { stored: stored.version.clone() },
    }
}

/// `Owned` when `held` is a live lease (not a tombstone, its end after
/// `now_ms`) held by an incarnation other than `incarnation` (or when none
/// is sent): only its holder may write over it before it ends.
fn owned_by_another(
    held: &Record,
    incarnation: Option<&str>,
    now_ms: u64,
) -> Option<WriteDecision> {
    let (Some(owner), Some(until_ms)) = (&held.owner, held.lease_until_ms) else {
        return None;
    };
    (!held.is_tombstone() && until_ms > now_ms && incarnation != Some(owner.as_str()))
        .then(|| WriteDecision::Owned { owner: owner.clone(), until_ms })
}

/// `Owned` when a write of an export by `incarnation` (`None` when the
/// request named none), a `PUT` or a withdrawal alike, must be refused: an
/// export lives on its cluster's lease, so while `cluster` (the merged
/// record of the export's cluster) holds a live lease, only the incarnation
/// holding it may write the cluster's exports (a controller that lost its
/// leadership may neither rewrite nor withdraw them). Once the lease has
/// ended or the cluster was withdrawn, anyone may (to clean up what a
/// removed cluster left).
///
/// Exports carry no lease of their own, so [`decide`] on the export's key
/// alone never refuses one as owned; the registrar applies this against its
/// merged view before the conditional write (`write::PlannedWrite::plan`,
/// `write::plan_withdrawal`).
pub fn export_write_owned(
    cluster: Option<&Record>,
    incarnation: Option<&str>,
    now_ms: u64,
) -> Option<WriteDecision> {
    owned_by_another(cluster?, incarnation, now_ms)
}

/// Whether `record`'s generation was chosen by its owner, a client that
/// orders its own intents: its writer is its incarnation. Generations the
/// registrar assigns name the registrar as writer.
pub fn is_client_ordered(record: &Record) -> bool {
    record.owner.as_deref() == Some(record.version.writer.as_str())
}

/// The tombstone that fences `new`, if `held` is a withdrawal by the same
/// incarnation that now writes without ordering its own intents.
///
/// A registrar-assigned generation is always above the tombstone's, so
/// without this a request the incarnation sent before withdrawing, arriving
/// late, would bring the record back for a whole lease. An incarnation that
/// withdrew comes back with a generation of its own above the tombstone's,
/// or as a new incarnation. [`decide`] applies it, so the fence holds in
/// storage (the conditional write) and not only in a registrar's view.
pub fn fenced_by_withdrawal<'a>(held: Option<&'a Record>, new: &Record) -> Option<&'a Version> {
    let held = held?;
    let same_incarnation = held.owner.is_some() && held.owner == new.owner;
    (held.is_tombstone() && !new.is_tombstone() && same_incarnation && !is_client_ordered(new))
        .then_some(&held.version)
}

/// Whether a registration by `incarnation` continues what `held` (the
/// stored record of its key) already holds for it: a record of its own,
/// not withdrawn, expired or not (what lived on the lease, a cluster's
/// exports, is still stored). `false` when nothing is held, it was
/// withdrawn, or another incarnation wrote it: the lease begins anew, and
/// a holder that had registered before learns that the registry lost its
/// records (docs/design.md §13, "A registry that forgot").
pub fn continues_registration(held: Option<&Record>, incarnation: &str) -> bool {
    held.is_some_and(|r| !r.is_tombstone() && r.owner.as_deref() == Some(incarnation))
}

/// Whether a renewal should overwrite what is stored: only when it extends
/// the lease (a delayed retry must not shorten it).
pub fn renewal_extends(stored: &Record, new: &Record) -> bool {
    new.lease_until_ms.unwrap_or(0) > stored.lease_until_ms.unwrap_or(0)
}

/// Whether `new` may renew `stored` in place, keeping its `changed_at_ms`
/// (docs/design.md §6, "Renewals and the change feed"): the same version,
/// content (payload and owner) and lease terms, with a later lease end.
/// The terms must be recorded and unchanged because a reader that does not
/// see the renewal bounds its lease end by the terms it holds; anything
/// else is written as a change.
pub fn renews_in_place(stored: &Record, new: &Record) -> bool {
    new.lease_until_ms.is_some_and(|l| l > 0)
        && new.terms.is_some()
        && stored.terms == new.terms
        && !stored.is_tombstone()
        && stored.version == new.version
        && stored.content_digest() == new.content_digest()
        && renewal_extends(stored, new)
}

/// Whether `incoming` should replace `held` in a merged view: a higher
/// version, or the same version with a later lease end, then a later write
/// time (a renewal). Equal versions are ordered by lease end first because
/// that is the order stores keep renewals in ([`renewal_extends`]); ordering
/// them by write time alone let views holding the same items disagree on
/// when a lease ends.
pub fn supersedes(incoming: &Record, held: &Record) -> bool {
    match incoming.version.cmp(&held.version) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => {
            (incoming.lease_until_ms, incoming.changed_at_ms)
                > (held.lease_until_ms, held.changed_at_ms)
        }
        std::cmp::Ordering::Less => false,
    }
}

/// Whether `record`'s lease is live at `now_ms`, given `skew_ms` of
/// allowance for clock differences between writer and reader. Exports have
/// no lease of their own: they are live when not withdrawn, and the view
/// adds their cluster's liveness.
pub fn is_live(record: &Record, now_ms: u64, skew_ms: u64) -> bool {
    if record.is_tombstone() {
        return false;
    }
    match record.lease_until_ms {
        Some(until) => now_ms < until.saturating_add(skew_ms),
        None => record.key.kind() == Kind::Export,
    }
}

/// The `lease_until_ms` a tombstone withdrawing `held` (the merged record
/// of its key as the withdrawing registrar holds it) carries: the lease end
/// of the record it withdraws, or of the tombstone it follows; `None` when
/// that has none (an export, nothing held).
///
/// Not a lease: a tombstone is never live ([`is_live`] asks first), owns
/// nothing ([`decide`]) and is never renewed ([`renews_in_place`]). It puts
/// the withdrawal in the sparse `lease_ends` index (docs/design.md §3)
/// exactly where a reader looks for the withdrawn lease, so that a view
/// whose delta polls missed the tombstone (it reached the replica later
/// than the lookback) sees the key at a newer version there and reads it
/// whole, rather than taking the withdrawn lease's absence for a renewal
/// beyond the window and raising it until the next full read
/// (docs/design.md §6, "Renewals and the change feed").
pub fn withdrawn_lease_end(held: Option<&Record>) -> Option<u64> {
    held?.lease_until_ms
}

/// When `record` has no more use and storage may drop it (before a
/// retention is added): a lease's end; a tombstone's write time, or the end
/// of the lease it withdrew if later ([`withdrawn_lease_end`]: it must stay
/// in the `lease_ends` index until then); `None` for exports, which live on
/// their cluster.
pub fn expires_at_ms(record: &Record) -> Option<u64> {
    if record.is_tombstone() {
        return Some(record.changed_at_ms.max(record.lease_until_ms.unwrap_or(0)));
    }
    record.lease_until_ms
}

/// When DynamoDB's TTL may delete `record`'s item, before the retention is
/// added (its `ttl` attribute): [`expires_at_ms`], except for exports,
/// withdrawn or not, whose items TTL never deletes (issue 22, item 1).
///
/// A live export item carries no `ttl` (it lives on its cluster's lease),
/// so no time bounds how long an export written through one region may
/// stay live under a withdrawal written through another: if TTL deleted the
/// withdrawal's tombstone, the older export would be served again by every
/// full read. So an export's tombstone is deleted only by gc, which holds a
/// tombstone while an older item of another origin could still be served
/// and deletes only its own region's items (docs/design.md §3). Leased
/// records are safe with TTL: a tombstone's `ttl` is at least a retention
/// (over a day) after its write and after the withdrawn lease's end, and
/// every older lease of its key ends before that.
pub fn ttl_expires_at_ms(record: &Record) -> Option<u64> {
    if record.key.kind() == Kind::Export {
        return None;
    }
    expires_at_ms(record)
}

/// When `record` has no more use, as [`expires_at_ms`], but for an export
/// (not withdrawn) derived from `cluster`, the merged record of its cluster:
/// an export lives on its cluster's lease, so it is of no use once that
/// lease has ended or the cluster was withdrawn. It is the later of the
/// cluster's expiry (its lease's end, or its withdrawal) and the export's
/// own last write (an export may be written while its cluster holds no
/// lease); with no cluster record at all, the export's last write. `None`
/// while the cluster's record has no expiry.
///
/// No stored `ttl` can say this: a cluster renews its lease by writing its
/// own item only, never its exports'. So gc computes it.
pub fn expires_at_ms_on(record: &Record, cluster: Option<&Record>) -> Option<u64> {
    if record.key.kind() != Kind::Export || record.is_tombstone() {
        return expires_at_ms(record);
    }
    match cluster {
        None => Some(record.changed_at_ms),
        Some(cluster) => expires_at_ms(cluster).map(|at| at.max(record.changed_at_ms)),
    }
}

/// The rules as methods of the record they judge.
impl Record {
    /// Whether the record's lease is live at `now_ms`, given `skew_ms` of
    /// allowance for clock differences ([`is_live`]).
    pub fn is_live(&self, now_ms: u64, skew_ms: u64) -> bool {
        is_live(self, now_ms, skew_ms)
    }

    /// When the item has no more use and storage may drop it, before a
    /// retention is added ([`expires_at_ms`]).
    pub fn expires_at_ms(&self) -> Option<u64> {
        expires_at_ms(self)
    }

    /// When the record has no more use, an export's derived from `cluster`,
    /// the merged record of its cluster ([`expires_at_ms_on`]).
    pub fn expires_at_ms_on(&self, cluster: Option<&Record>) -> Option<u64> {
        expires_at_ms_on(self, cluster)
    }

    /// Whether `self` should replace `stored` in a merged view
    /// ([`supersedes`]).
    pub fn supersedes(&self, stored: &Record) -> bool {
        supersedes(self, stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_pool, mk_tombstone};
    use crate::record::LeaseTerms;

    /// Issue 24: `renews_in_place` was pinned only by the store suite.
    /// Each condition alone turns an in-place renewal into a change.
    #[test]
    fn a_renewal_in_place_needs_the_same_version_content_and_terms_and_a_later_lease() {
        let terms = Some(LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 });
        let with = |lease: Option<u64>, terms: Option<LeaseTerms>| {
            let mut r = mk_pool("p", 5, "r1", Some("x"), lease);
            r.terms = terms;
            r
        };
        let stored = with(Some(40_000), terms);
        let renewal = with(Some(50_000), terms);
        assert!(renews_in_place(&stored, &renewal));
        let other = |r: &Record, what: &str| {
            assert!(!renews_in_place(&stored, r), "{what}");
        };
        other(&with(Some(40_000), terms), "the same lease end");
        other(&with(Some(30_000), terms), "an earlier lease end");
        other(&with(None, terms), "no lease");
        other(&with(Some(0), terms), "a zero lease");
        other(&with(Some(50_000), None), "no terms");
        let longer = Some(LeaseTerms { duration_ms: 60_000, heartbeat_ms: 10_000 });
        other(&with(Some(50_000), longer), "other terms");
        let mut newer = renewal.clone();
        newer.version = Version::new(6, "r1");
        other(&newer, "another version");
        let mut moved = renewal.clone();
        moved.owner = Some("y".into());
        other(&moved, "another owner");
        let mut tomb = mk_tombstone("p", 5, "r1");
        tomb.terms = terms;
        tomb.lease_until_ms = Some(40_000);
        assert!(!renews_in_place(&tomb, &renewal), "a tombstone is never renewed");
        let unrecorded = with(Some(40_000), None);
        assert!(!renews_in_place(&unrecorded, &with(Some(50_000), None)), "terms not recorded");
    }

    #[test]
    fn write_rule_table() {
        let now = 10_000;
        let held = mk_pool("p", 5, "r1", Some("x"), Some(now + 1));
        let expired = mk_pool("p", 5, "r1", Some("x"), Some(now));
        let anonymous = mk_pool("p", 5, "r1", None, Some(now + 1));
        let tomb = mk_tombstone("p", 5, "r1");
        let own_tomb = mk_tombstone_by("p", 6, "r1", "x");
        let cases: Vec<(&str, Option<&Record>, Record, WriteDecision)> = vec![
            ("nothing stored", None, mk_pool("p", 1, "r", None, None), WriteDecision::Apply),
            (
                "newer generation",
                Some(&held),
                mk_pool("p", 6, "r1", Some("x"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "same generation, higher writer",
                Some(&held),
                mk_pool("p", 5, "r2", Some("x"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "same generation, lower writer",
                Some(&held),
                mk_pool("p", 5, "r0", Some("x"), Some(now)),
                WriteDecision::Stale { stored: held.version.clone() },
            ),
            (
                "older generation",
                Some(&held),
                mk_pool("p", 4, "r9", Some("x"), Some(now)),
                WriteDecision::Stale { stored: held.version.clone() },
            ),
            (
                "renewal",
                Some(&held),
                mk_pool("p", 5, "r1", Some("x"), Some(now + 99)),
                WriteDecision::Renew,
            ),
            (
                "same version, other content",
                Some(&held),
                {
                    let mut r = mk_pool("p", 5, "r1", Some("x"), Some(now));
                    r.body = mk_pool("q", 1, "r", None, None).body;
                    r
                },
                WriteDecision::Stale { stored: held.version.clone() },
            ),
            (
                "other incarnation while live",
                Some(&held),
                mk_pool("p", 9, "r1", Some("y"), Some(now)),
                WriteDecision::Owned { owner: "x".into(), until_ms: now + 1 },
            ),
            (
                "anonymous while owned",
                Some(&held),
                mk_pool("p", 9, "r1", None, Some(now)),
                WriteDecision::Owned { owner: "x".into(), until_ms: now + 1 },
            ),
            (
                "other incarnation after expiry",
                Some(&expired),
                mk_pool("p", 9, "r1", Some("y"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "owner over anonymous",
                Some(&anonymous),
                mk_pool("p", 9, "r1", Some("y"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "newer over tombstone",
                Some(&tomb),
                mk_pool("p", 6, "r1", Some("y"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "older over tombstone",
                Some(&tomb),
                mk_pool("p", 4, "r1", Some("y"), Some(now)),
                WriteDecision::Stale { stored: tomb.version.clone() },
            ),
            ("tombstone retry", Some(&tomb), mk_tombstone("p", 5, "r1"), WriteDecision::Renew),
            (
                "withdrawal by the owner",
                Some(&held),
                mk_tombstone_by("p", 6, "r1", "x"),
                WriteDecision::Apply,
            ),
            (
                "its own incarnation over its withdrawal, registrar-assigned",
                Some(&own_tomb),
                mk_pool("p", 9, "r1", Some("x"), Some(now)),
                WriteDecision::Stale { stored: own_tomb.version.clone() },
            ),
            (
                "its own incarnation over its withdrawal, client-ordered",
                Some(&own_tomb),
                mk_pool("p", 9, "x", Some("x"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "another incarnation over a withdrawal",
                Some(&own_tomb),
                mk_pool("p", 9, "r1", Some("y"), Some(now)),
                WriteDecision::Apply,
            ),
            (
                "withdrawal by another",
                Some(&held),
                mk_tombstone_by("p", 6, "r1", "y"),
                WriteDecision::Owned { owner: "x".into(), until_ms: now + 1 },
            ),
        ];
        for (name, stored, new, want) in cases {
            assert_eq!(decide(stored, &new, now), want, "{name}");
        }
    }

    fn mk_tombstone_by(id: &str, generation: u64, writer: &str, owner: &str) -> Record {
        let mut t = mk_tombstone(id, generation, writer);
        t.owner = Some(owner.into());
        t
    }

    #[test]
    fn only_the_holder_of_the_cluster_lease_writes_its_exports() {
        use crate::fixtures::mk_cluster;
        let now = 10_000;
        let live = mk_cluster("c1", 5, "ctl-1", now + 1);
        let owned = Some(WriteDecision::Owned { owner: "ctl-1".into(), until_ms: now + 1 });
        assert_eq!(export_write_owned(Some(&live), None, now), owned, "no incarnation");
        assert_eq!(export_write_owned(Some(&live), Some("ctl-2"), now), owned, "another");
        assert_eq!(export_write_owned(Some(&live), Some("ctl-1"), now), None, "the holder");
        let ended = mk_cluster("c1", 5, "ctl-1", now);
        assert_eq!(export_write_owned(Some(&ended), None, now), None, "lease ended");
        let mut withdrawn = mk_tombstone("c1", 6, "r1");
        withdrawn.key = live.key.clone();
        withdrawn.owner = Some("ctl-1".into());
        withdrawn.lease_until_ms = Some(now + 1);
        assert_eq!(export_write_owned(Some(&withdrawn), None, now), None, "withdrawn");
        assert_eq!(export_write_owned(None, None, now), None, "no cluster record");
        let mut leaderless = live.clone();
        leaderless.owner = None;
        assert_eq!(export_write_owned(Some(&leaderless), None, now), None);
    }

    #[test]
    fn a_withdrawal_fences_its_own_incarnation() {
        let tomb = mk_tombstone_by("p", 6, "r1", "x");
        let by_x = mk_pool("p", 9, "r1", Some("x"), Some(100));
        assert_eq!(fenced_by_withdrawal(Some(&tomb), &by_x), Some(&tomb.version));
        let by_y = mk_pool("p", 9, "r1", Some("y"), Some(100));
        assert_eq!(fenced_by_withdrawal(Some(&tomb), &by_y), None, "a new incarnation may");
        let anonymous_tomb = mk_tombstone("p", 6, "r1");
        assert_eq!(fenced_by_withdrawal(Some(&anonymous_tomb), &by_x), None);
        assert_eq!(fenced_by_withdrawal(None, &by_x), None);
        assert_eq!(fenced_by_withdrawal(Some(&tomb), &mk_tombstone_by("p", 7, "r1", "x")), None);
        let ordered_by_x = mk_pool("p", 9, "x", Some("x"), Some(100));
        assert_eq!(
            fenced_by_withdrawal(Some(&tomb), &ordered_by_x),
            None,
            "its own generation may"
        );
    }

    #[test]
    fn renewal_only_extends() {
        let stored = mk_pool("p", 5, "r1", Some("x"), Some(100));
        assert!(renewal_extends(&stored, &mk_pool("p", 5, "r1", Some("x"), Some(101))));
        assert!(!renewal_extends(&stored, &mk_pool("p", 5, "r1", Some("x"), Some(99))));
    }

    #[test]
    fn equal_versions_are_ordered_by_lease_end_then_write_time() {
        let a = mk_pool("p", 5, "r1", None, Some(100));
        let mut later_but_shorter = a.clone();
        later_but_shorter.changed_at_ms += 10;
        later_but_shorter.lease_until_ms = Some(99);
        assert!(!supersedes(&later_but_shorter, &a), "a renewal that ends sooner is not newer");
        assert!(supersedes(&a, &later_but_shorter));
    }

    #[test]
    fn supersedes_by_version_then_write_time() {
        let a = mk_pool("p", 5, "r1", None, Some(100));
        let mut renewed = a.clone();
        renewed.changed_at_ms += 1;
        assert!(supersedes(&renewed, &a));
        assert!(!supersedes(&a, &renewed));
        assert!(!supersedes(&a, &a));
        assert!(supersedes(&mk_pool("p", 6, "a", None, None), &a));
        assert!(!supersedes(&mk_pool("p", 4, "z", None, None), &a));
    }

    #[test]
    fn an_export_expires_with_its_cluster() {
        use crate::fixtures::{mk_cluster, mk_export, mk_export_spec};
        let mut export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
        export.changed_at_ms = 100;
        let leased = mk_cluster("c1", 1, "ctl", 500);
        assert_eq!(expires_at_ms(&export), None, "no expiry of its own");
        assert_eq!(expires_at_ms_on(&export, Some(&leased)), Some(500), "the lease's end");
        assert_eq!(expires_at_ms_on(&export, None), Some(100), "no cluster: its own write");
        let mut withdrawn = mk_tombstone("c1", 2, "w");
        withdrawn.key = leased.key.clone();
        withdrawn.changed_at_ms = 50;
        assert_eq!(expires_at_ms_on(&export, Some(&withdrawn)), Some(100), "written after it");
        withdrawn.changed_at_ms = 300;
        assert_eq!(expires_at_ms_on(&export, Some(&withdrawn)), Some(300), "the withdrawal");
        let mut gone = export.clone();
        gone.body = crate::Body::Tombstone;
        assert_eq!(expires_at_ms_on(&gone, Some(&leased)), Some(100), "a tombstone's own write");
        let pool = mk_pool("p", 1, "w", None, Some(700));
        assert_eq!(expires_at_ms_on(&pool, Some(&leased)), Some(700), "others: their own");
    }

    #[test]
    fn a_lease_is_live_until_its_end_plus_the_skew_allowance() {
        use crate::fixtures::{mk_export, mk_export_spec};
        let pool = mk_pool("p", 1, "w", None, Some(1_000));
        assert!(is_live(&pool, 999, 0));
        assert!(!is_live(&pool, 1_000, 0), "ended");
        assert!(is_live(&pool, 1_099, 100), "within the allowance");
        assert!(!is_live(&pool, 1_100, 100));
        assert!(!is_live(&mk_pool("p", 1, "w", None, None), 0, 0), "no lease, not an export");
        let export = mk_export("c1", "web", 1, mk_export_spec(0, vec![]));
        assert!(is_live(&export, u64::MAX, 0), "an export has no lease of its own");
        assert!(!is_live(&mk_tombstone("p", 2, "w"), 0, 0), "withdrawn");
    }
}

#[cfg(test)]
mod rule_tests;
