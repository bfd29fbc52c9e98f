//! The registrar's decisions on a write, pure: the steps of
//! `mcs-registry`'s `Registrar` around its one conditional write, shared
//! with the simulation (`mcs-sim`) so that what is simulated is what runs.
//!
//! ```text
//!  Intent ─► PlannedWrite::plan   (ready? changed_at after the held record;
//!                                  version: the client's (bounded), the held
//!                                  one for a heartbeat, or the HLC; the fence)
//!         ─► judge(view's record)  the write rule against the merged view
//!         ─► conditional write     (the caller's I/O)
//!              └ Stale ─► PlannedWrite::stale: observe, retry once with a
//!                          fresh HLC generation, or refuse
//! ```

use crate::hlc::ClockError;
use crate::rules::{export_write_owned, fenced_by_withdrawal, withdrawn_lease_end};
use crate::{Body, Hlc, Key, Record, Version, WriteDecision};

/// A write rule: what a write of `new` over `stored` does at `now_ms`
/// ([`crate::decide`], or a deliberately broken one in the simulation).
pub type WriteRule = fn(stored: Option<&Record>, new: &Record, now_ms: u64) -> WriteDecision;

/// What a client asked for, before a version is chosen.
#[derive(Debug, Clone)]
pub struct Intent {
    /// The record's key.
    pub key: Key,
    /// The payload (a tombstone to withdraw).
    pub body: Body,
    /// The client's incarnation, if it sent one.
    pub incarnation: Option<String>,
    /// The client's own generation, if it sent one (with an incarnation).
    pub generation: Option<u64>,
    /// The lease's end, for leased records.
    pub lease_until_ms: Option<u64>,
    /// The lease's terms, for leased records.
    pub terms: Option<crate::LeaseTerms>,
}

impl Intent {
    /// What a client asked for, the lease still to be set by the registrar
    /// that takes it (from its own clock and lease policy).
    pub fn new(key: Key, body: Body, incarnation: Option<String>, generation: Option<u64>) -> Self {
        Intent { key, body, incarnation, generation, lease_until_ms: None, terms: None }
    }
}

/// Why a write is refused before or instead of storing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The registry has not finished its first full read: its view cannot
    /// judge ownership, fences or generations yet.
    NotReady,
    /// The client's generation is beyond the allowance above the
    /// registry's clock.
    GenerationAhead {
        /// The generation sent.
        generation: u64,
        /// The highest acceptable now.
        bound: u64,
    },
    /// A newer version is held (or the write is fenced by a withdrawal).
    Stale {
        /// What is held.
        stored: Version,
    },
    /// Another incarnation holds the live lease.
    Owned {
        /// The holder.
        owner: String,
        /// Its lease's end.
        until_ms: u64,
    },
    /// The clock cannot issue a generation.
    Clock(ClockError),
}

impl From<ClockError> for Refusal {
    fn from(e: ClockError) -> Self {
        Refusal::Clock(e)
    }
}

/// A write on its way to the conditional write.
#[derive(Debug, Clone)]
pub struct PlannedWrite {
    record: Record,
    writer: String,
    client_ordered: bool,
    attempts: u32,
}

impl PlannedWrite {
    /// Builds the record of `intent` at `now_ms` for a registrar writing as
    /// `writer`, over `held`, the merged view's record of the key. For an
    /// export, `cluster` is the merged record of its cluster (`None` for
    /// other kinds).
    ///
    /// - Nothing is written until the first full read (`ready`).
    /// - While `cluster` holds a live lease, only its holder writes the
    ///   export ([`export_write_owned`]), as for a withdrawal.
    /// - `changed_at` is after the held record's, even when its writer's
    ///   clock ran ahead: replication and delta polls order an item's
    ///   writes by it.
    /// - A client's generation must be within the clock's bound.
    /// - A tombstone carries the lease end of what it withdraws
    ///   ([`withdrawn_lease_end`]) and no terms.
    /// - Without one: the incarnation that withdrew the record is fenced;
    ///   a heartbeat (same content) reuses the held version; anything else
    ///   gets a fresh HLC generation.
    pub fn plan(
        intent: Intent,
        held: Option<&Record>,
        cluster: Option<&Record>,
        ready: bool,
        now_ms: u64,
        writer: &str,
        hlc: &mut Hlc,
    ) -> Result<Self, Refusal> {
        if !ready {
            return Err(Refusal::NotReady);
        }
        fence_export(cluster, intent.incarnation.as_deref(), now_ms)?;
        let mut record = Record {
            key: intent.key,
            version: Version::new(0, writer),
            owner: intent.incarnation.clone(),
            lease_until_ms: intent.lease_until_ms,
            terms: intent.terms,
            changed_at_ms: now_ms,
            body: intent.body,
        };
        if let Some(held) = held {
            record.changed_at_ms = record.changed_at_ms.max(held.changed_at_ms.saturating_add(1));
        }
        if record.is_tombstone() {
            record.lease_until_ms = record.lease_until_ms.max(withdrawn_lease_end(held));
            record.terms = None;
        }
        let client_ordered = match (intent.generation, intent.incarnation) {
            (Some(generation), Some(incarnation)) => {
                let bound = hlc.bound(now_ms);
                if generation > bound {
                    return Err(Refusal::GenerationAhead { generation, bound });
                }
                record.version = Version::new(generation, incarnation);
                true
            }
            _ => {
                if let Some(stored) = fenced_by_withdrawal(held, &record) {
                    return Err(Refusal::Stale { stored: stored.clone() });
                }
                record.version = match unchanged_version(held, &record, now_ms) {
                    Some(version) => version,
                    None => Version::new(hlc.next(now_ms)?, writer),
                };
                false
            }
        };
        Ok(Self { record, writer: writer.to_owned(), client_ordered, attempts: 1 })
    }

    /// The record to write.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The record, once written.
    pub fn into_record(self) -> Record {
        self.record
    }

    /// Whether the client chose the generation.
    pub fn is_client_ordered(&self) -> bool {
        self.client_ordered
    }

    /// Judges the write with `rule` against `held`, the merged view's
    /// record: the view holds every region's items, the conditional write
    /// sees only this region's, so this fences owners and refuses stale
    /// generations across regions (up to replication lag).
    pub fn judge(
        &self,
        held: Option<&Record>,
        now_ms: u64,
        rule: WriteRule,
    ) -> Result<WriteDecision, Refusal> {
        match rule(held, &self.record, now_ms) {
            WriteDecision::Stale { stored } => Err(Refusal::Stale { stored }),
            WriteDecision::Owned { owner, until_ms } => Err(Refusal::Owned { owner, until_ms }),
            decision => Ok(decision),
        }
    }

    /// Whether the write, judged `decision` ([`PlannedWrite::judge`]),
    /// renews the held record: its version and content (owner and payload)
    /// with a lease, i.e. a heartbeat. A store may write it in place,
    /// keeping the stored `changed_at_ms` (`mcs_store::Store::renew`,
    /// docs/design.md §6).
    pub fn is_renewal(&self, decision: &WriteDecision) -> bool {
        *decision == WriteDecision::Renew
            && !self.record.is_tombstone()
            && self.record.lease_until_ms.is_some_and(|l| l > 0)
    }

    /// The conditional write refused the record as stale, `stored` being
    /// what it holds. The clock observes it; a registrar-assigned
    /// generation is retried once with a fresh one (another writer's clock
    /// ran ahead, and the HLC has now seen it); a client's generation, or a
    /// second refusal, is refused.
    pub fn stale(&mut self, stored: Version, now_ms: u64, hlc: &mut Hlc) -> Result<(), Refusal> {
        hlc.observe(stored.generation, now_ms);
        if self.client_ordered || self.attempts >= 2 {
            return Err(Refusal::Stale { stored });
        }
        self.attempts += 1;
        self.record.version = Version::new(hlc.next(now_ms)?, self.writer.as_str());
        Ok(())
    }
}

/// The held version, when `record` repeats what is held (a heartbeat).
///
/// Not when it asks for other lease terms and its lease ends before the
/// held one: stores and views keep the later lease end of one version (a
/// delayed retry must not shorten a lease, `rules::renewal_extends`,
/// `rules::supersedes`), so a shorter lease at the held version would be
/// answered and never stored (issue 22). It gets a new generation, and is
/// written and served as a change.
///
/// Nor when the held lease has lapsed by `now_ms`: the held record may be
/// one a tombstone superseded until TTL deleted the tombstone, and renewing
/// its version would store that older record live again (issue 22, seed
/// 2223 of mcs-sim). A lapsed record's heartbeat is a new registration.
fn unchanged_version(held: Option<&Record>, record: &Record, now_ms: u64) -> Option<Version> {
    let held = held?;
    if held.is_tombstone() || record.is_tombstone() {
        return None;
    }
    if held.lease_until_ms.is_some_and(|until| now_ms >= until) {
        return None;
    }
    let shortened = record.terms.is_some()
        && record.terms != held.terms
        && record.lease_until_ms < held.lease_until_ms;
    (held.content_digest() == record.content_digest() && !shortened).then(|| held.version.clone())
}

/// What a withdrawal does, given `held`, the key's record (from the view,
/// else from storage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WithdrawalPlan {
    /// Nothing to withdraw.
    NotFound,
    /// Already withdrawn, and the client orders no newer withdrawal: answer
    /// with the tombstone.
    Withdrawn(Box<Record>),
    /// Write a tombstone.
    Write,
}

/// Plans a withdrawal by `incarnation` of the key `held` describes;
/// `generation` is the client's own, if it sent one. For an export,
/// `cluster` is the merged record of its cluster (`None` for other kinds):
/// while that holds a live lease, only its holder may withdraw the export
/// ([`export_write_owned`], as for any write of it).
pub fn plan_withdrawal(
    held: Option<&Record>,
    cluster: Option<&Record>,
    incarnation: Option<&str>,
    generation: Option<u64>,
    ready: bool,
    now_ms: u64,
) -> Result<WithdrawalPlan, Refusal> {
    if !ready {
        return Err(Refusal::NotReady);
    }
    Ok(match held {
        None => WithdrawalPlan::NotFound,
        Some(record) if record.is_tombstone() && generation.is_none() => {
            WithdrawalPlan::Withdrawn(Box::new(record.clone()))
        }
        Some(_) => {
            fence_export(cluster, incarnation, now_ms)?;
            WithdrawalPlan::Write
        }
    })
}

/// [`export_write_owned`] as a refusal.
fn fence_export(
    cluster: Option<&Record>,
    incarnation: Option<&str>,
    now_ms: u64,
) -> Result<(), Refusal> {
    match export_write_owned(cluster, incarnation, now_ms) {
        Some(WriteDecision::Owned { owner, until_ms }) => Err(Refusal::Owned { owner, until_ms }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LeaseTerms;
    use crate::decide;
    use crate::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, mk_tombstone};
    use crate::hlc::generation_at;

    const NOW: u64 = 1_767_225_600_000;

    /// [`PlannedWrite::plan`] at `NOW` by the registrar `reg`, ready, of a
    /// key that is not an export.
    pub(super) fn plan_now(
        intent: Intent,
        held: Option<&Record>,
        hlc: &mut Hlc,
    ) -> Result<PlannedWrite, Refusal> {
        PlannedWrite::plan(intent, held, None, true, NOW, "reg", hlc)
    }

    fn intent_like(record: &Record, incarnation: Option<&str>, generation: Option<u64>) -> Intent {
        Intent {
            terms: None,
            key: record.key.clone(),
            body: record.body.clone(),
            incarnation: incarnation.map(str::to_owned),
            generation,
            lease_until_ms: Some(NOW + 30_000),
        }
    }

    #[test]
    fn nothing_is_written_before_the_first_full_read() {
        let pool = mk_pool("a", 1, "w", None, None);
        let refused = PlannedWrite::plan(
            intent_like(&pool, None, None),
            None,
            None,
            false,
            NOW,
            "reg",
            &mut Hlc::default(),
        );
        assert_eq!(refused.unwrap_err(), Refusal::NotReady);
        assert_eq!(
            plan_withdrawal(Some(&pool), None, None, None, false, NOW),
            Err(Refusal::NotReady)
        );
    }

    #[test]
    fn a_client_generation_beyond_the_allowance_is_refused_and_moves_no_clock() {
        let pool = mk_pool("a", 1, "w", None, None);
        let mut hlc = Hlc::new(60_000);
        for generation in [u64::MAX, generation_at(NOW + 61_000)] {
            let refused = plan_now(intent_like(&pool, Some("x"), Some(generation)), None, &mut hlc);
            assert!(matches!(refused, Err(Refusal::GenerationAhead { .. })), "{generation}");
        }
        let within = generation_at(NOW + 59_000);
        let ok = plan_now(intent_like(&pool, Some("x"), Some(within)), None, &mut hlc).unwrap();
        assert_eq!(ok.record().version, Version::new(within, "x"));
        assert!(ok.is_client_ordered());
        // The registrar's next own generation follows its wall clock.
        let own = plan_now(intent_like(&pool, None, None), None, &mut hlc).unwrap();
        assert_eq!(own.record().version, Version::new(generation_at(NOW), "reg"));
    }

    /// Issue 22, item 3: a renewal asking for a shorter lease kept the
    /// held version, so stores and views kept the longer lease end.
    #[test]
    fn a_renewal_with_a_shorter_lease_gets_a_new_generation() {
        let long = LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 };
        let short = LeaseTerms { duration_ms: 4_000, heartbeat_ms: 1_000 };
        let mut held = mk_pool("a", 7, "reg-0", Some("x"), Some(NOW + 30_000));
        held.terms = Some(long);
        let plan = |terms: Option<LeaseTerms>, until: u64| {
            let mut intent = intent_like(&held, Some("x"), None);
            intent.terms = terms;
            intent.lease_until_ms = Some(until);
            plan_now(intent, Some(&held), &mut Hlc::default()).unwrap().record().version.clone()
        };
        assert!(plan(Some(short), NOW + 4_000) > held.version, "shorter: a change");
        assert_eq!(plan(Some(long), NOW + 29_000), held.version, "same terms: a heartbeat");
        assert_eq!(plan(Some(short), NOW + 31_000), held.version, "other terms, later end");
        assert_eq!(plan(Some(short), NOW + 30_000), held.version, "other terms, the same end");
        assert_eq!(plan(None, NOW + 4_000), held.version, "no terms recorded");
        let mut planned = intent_like(&held, Some("x"), None);
        planned.terms = Some(short);
        planned.lease_until_ms = Some(NOW + 4_000);
        let written = plan_now(planned, Some(&held), &mut Hlc::default()).unwrap();
        assert_eq!(written.judge(Some(&held), NOW, decide), Ok(WriteDecision::Apply));
    }

    #[test]
    fn a_heartbeat_reuses_the_held_version_and_follows_its_write_time() {
        let mut held = mk_pool("a", 7, "reg-0", Some("x"), Some(NOW + 1_000));
        held.changed_at_ms = NOW + 500;
        let planned =
            plan_now(intent_like(&held, Some("x"), None), Some(&held), &mut Hlc::default())
                .unwrap();
        assert_eq!(planned.record().version, held.version, "same content: same version");
        assert_eq!(planned.record().changed_at_ms, NOW + 501, "after the held write");
        assert_eq!(planned.judge(Some(&held), NOW, decide), Ok(WriteDecision::Renew));
        assert!(planned.is_renewal(&WriteDecision::Renew), "a heartbeat of a leased record");
        assert!(!planned.is_renewal(&WriteDecision::Apply));
    }

    #[test]
    fn only_a_leased_heartbeat_is_a_renewal() {
        let held = mk_pool("a", 7, "reg-0", Some("x"), Some(NOW + 1_000));
        let plan = |intent: Intent, held: Option<&Record>| {
            plan_now(intent, held, &mut Hlc::default()).unwrap()
        };
        let mut changed = intent_like(&held, Some("x"), None);
        changed.body = mk_pool("b", 1, "w", None, None).body;
        let content_change = plan(changed, Some(&held));
        let decision = content_change.judge(Some(&held), NOW, decide).unwrap();
        assert!(!content_change.is_renewal(&decision), "a new generation: {decision:?}");
        let mut leaseless = intent_like(&held, Some("x"), None);
        leaseless.lease_until_ms = None;
        let unleased = plan(leaseless, Some(&held));
        assert!(!unleased.is_renewal(&WriteDecision::Renew), "no lease to renew");
        let tomb = mk_tombstone("a", 7, "reg-0");
        let retry = plan(intent_like(&tomb, None, Some(7)), Some(&tomb));
        assert!(!retry.is_renewal(&WriteDecision::Renew), "a tombstone is not renewed");
    }

    #[test]
    fn an_incarnation_that_withdrew_is_fenced_and_never_retried_past_its_tombstone() {
        let pool = mk_pool("a", 1, "w", None, None);
        let mut tomb = mk_tombstone("a", 9, "reg-1");
        tomb.owner = Some("x".into());
        let mut hlc = Hlc::default();
        let refused = plan_now(intent_like(&pool, Some("x"), None), Some(&tomb), &mut hlc);
        assert_eq!(refused.unwrap_err(), Refusal::Stale { stored: tomb.version.clone() });

        // The view of this process is behind: it still holds the live
        // record, so the heartbeat reuses its version; storage holds the
        // tombstone and refuses. The retry's fresh generation is refused
        // by the same fence in the write rule.
        let live = mk_pool("a", 5, "reg-1", Some("x"), Some(NOW + 1_000));
        let mut planned = PlannedWrite::plan(
            intent_like(&live, Some("x"), None),
            Some(&live),
            None,
            true,
            NOW,
            "reg-2",
            &mut hlc,
        )
        .unwrap();
        let stored = match decide(Some(&tomb), planned.record(), NOW) {
            WriteDecision::Stale { stored } => stored,
            other => panic!("storage must refuse: {other:?}"),
        };
        planned.stale(stored, NOW, &mut hlc).unwrap();
        assert!(planned.record().version > tomb.version, "a fresh generation");
        assert_eq!(
            decide(Some(&tomb), planned.record(), NOW),
            WriteDecision::Stale { stored: tomb.version.clone() },
            "still fenced"
        );
        assert!(planned.stale(tomb.version.clone(), NOW, &mut hlc).is_err(), "one retry only");
    }

    #[test]
    fn a_client_generation_is_never_retried() {
        let pool = mk_pool("a", 1, "w", None, None);
        let mut hlc = Hlc::default();
        let mut planned = plan_now(intent_like(&pool, Some("x"), Some(3)), None, &mut hlc).unwrap();
        let stored = Version::new(generation_at(NOW), "reg");
        assert_eq!(planned.stale(stored.clone(), NOW, &mut hlc), Err(Refusal::Stale { stored }));
    }

    #[test]
    fn withdrawal_plans() {
        let live = mk_pool("a", 1, "w", None, None);
        let tomb = mk_tombstone("a", 2, "w");
        let plan = |held, generation| plan_withdrawal(held, None, None, generation, true, NOW);
        assert_eq!(plan(None, None), Ok(WithdrawalPlan::NotFound));
        assert_eq!(plan(Some(&live), None), Ok(WithdrawalPlan::Write));
        assert_eq!(plan(Some(&tomb), None), Ok(WithdrawalPlan::Withdrawn(Box::new(tomb.clone()))));
        assert_eq!(plan(Some(&tomb), Some(3)), Ok(WithdrawalPlan::Write));
    }

    /// Issue 22, item 11: a `PUT` of an export was not fenced like its
    /// withdrawal, so a controller that had lost its leadership could
    /// rewrite its cluster's exports.
    #[test]
    fn an_export_is_written_only_by_the_holder_of_its_cluster_lease() {
        let export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
        let cluster = mk_cluster("c1", 3, "ctl-1", NOW + 1_000);
        let plan = |cluster: &Record, incarnation: Option<&str>, now| {
            let mut intent = intent_like(&export, incarnation, None);
            intent.lease_until_ms = None;
            PlannedWrite::plan(intent, None, Some(cluster), true, now, "reg", &mut Hlc::default())
                .map(|planned| planned.record().owner.clone())
        };
        let owned = Err(Refusal::Owned { owner: "ctl-1".into(), until_ms: NOW + 1_000 });
        assert_eq!(plan(&cluster, None, NOW), owned, "no incarnation while the lease is live");
        assert_eq!(plan(&cluster, Some("ctl-0"), NOW), owned, "an old leader");
        assert_eq!(plan(&cluster, Some("ctl-1"), NOW), Ok(Some("ctl-1".into())), "the holder");
        assert_eq!(plan(&cluster, None, NOW + 1_000), Ok(None), "after the lease");
        let mut withdrawn = mk_tombstone("c1", 4, "w");
        withdrawn.key = cluster.key.clone();
        assert_eq!(plan(&withdrawn, Some("ctl-0"), NOW), Ok(Some("ctl-0".into())), "withdrawn");
    }

    #[test]
    fn an_export_is_withdrawn_only_by_the_holder_of_its_cluster_lease() {
        let export = mk_export("c1", "web", 5, mk_export_spec(0, vec![]));
        let cluster = mk_cluster("c1", 3, "ctl-1", NOW + 1_000);
        let plan = |incarnation, now| {
            plan_withdrawal(Some(&export), Some(&cluster), incarnation, None, true, now)
        };
        let owned = Err(Refusal::Owned { owner: "ctl-1".into(), until_ms: NOW + 1_000 });
        assert_eq!(plan(None, NOW), owned, "no incarnation while the lease is live");
        assert_eq!(plan(Some("ctl-0"), NOW), owned, "another incarnation");
        assert_eq!(plan(Some("ctl-1"), NOW), Ok(WithdrawalPlan::Write), "the holder");
        assert_eq!(plan(None, NOW + 1_000), Ok(WithdrawalPlan::Write), "after the lease");
        let mut withdrawn = mk_tombstone("c1", 4, "w");
        withdrawn.key = cluster.key.clone();
        let after_withdrawal =
            plan_withdrawal(Some(&export), Some(&withdrawn), None, None, true, NOW);
        assert_eq!(after_withdrawal, Ok(WithdrawalPlan::Write), "the cluster withdrew");
        let mut gone = mk_tombstone("c1", 6, "w");
        gone.key = export.key.clone();
        assert_eq!(
            plan_withdrawal(Some(&gone), Some(&cluster), None, None, true, NOW),
            Ok(WithdrawalPlan::Withdrawn(Box::new(gone.clone()))),
            "a repeated withdrawal changes nothing and is answered"
        );
    }
}

#[cfg(test)]
mod rule_tests;
