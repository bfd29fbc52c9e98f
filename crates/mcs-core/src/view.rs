//! The merged, fingerprinted view a registry serves (docs/design.md §6).
//!
//! The view holds the winning record of every key it has read (tombstones
//! and expired records included, so an older write arriving late cannot
//! replace them) and, derived from those, the served sections. Every change
//! touches only what it affects: a pool or router change is O(log n); an
//! export or cluster change re-merges only the services concerned. Leases are
//! expired by [`View::advance`] from a deadline index, so expiry costs
//! O(expired · log n) however large the view is.

use crate::fingerprint::{Fingerprint, Section};
use crate::imports;
use crate::record::{Body, ChangeStamp, Key, LeaseEnd, Record};
use crate::section::{ListBody, SectionKind, SectionVisitor, Served};
use mcs_api::{
    Cluster, Condition, Export, ExportKey, Incarnation, Label, Pool, PoolId, RouterId,
    RouterReplica, ServiceImport, ServiceName,
};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

/// The shortest heartbeat interval a lease can ask for.
const MIN_HEARTBEAT_MS: u64 = 1_000;

/// What a full read changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Resync {
    /// Records the full read held that the view did not have (or had older).
    pub applied: usize,
    /// Records the view held that the full read no longer has (deleted from
    /// storage by TTL or gc).
    pub dropped: usize,
    /// Records the view held that no item holds any more while the read
    /// holds an older version of their key, replaced by it (the newer
    /// items deleted by TTL).
    pub retired: usize,
}

/// What one read of stored lease ends covered ([`View::confirm_leases`],
/// docs/design.md §6 "Renewals and the change feed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseWindow {
    /// The lowest lease end asked for: the reader's watermark less its
    /// lookback.
    pub from_ms: u64,
    /// The highest lease end asked for: the poll's start plus the horizon.
    pub to_ms: u64,
    /// Writes from this time on (the poll's start less the lookback) may
    /// not have reached the index yet.
    pub settled_ms: u64,
    /// The poll's start, by the reader's clock.
    pub polled_at_ms: u64,
    /// Leases absent from the read that end after this are left for a
    /// later poll to raise (at most `to_ms`): a raise lasts until the
    /// horizon, so a served lease is raised once every few polls rather
    /// than at each. At least the next poll's start, so nothing lapses
    /// before it.
    pub raise_by_ms: u64,
}

/// What [`View::confirm_leases`] changed, and what it could not settle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confirmed {
    /// Leases moved to a later end the read returned (a renewal).
    pub renewed: usize,
    /// Leases absent from the read, so stored beyond its window, whose end
    /// the view raised to the lower bound that implies.
    pub extended: usize,
    /// Keys the read cannot settle, for the reader to read whole (every
    /// origin's item, merged) and apply, soonest-ending first: see
    /// [`View::leases_to_recheck`].
    pub recheck: Vec<Key>,
}

/// What a read of lease ends changes in a view ([`View::plan_leases`]),
/// applied a part at a time by [`View::apply_leases`].
#[derive(Debug, Clone)]
pub struct LeasePlan {
    window: LeaseWindow,
    /// The keys the read returned at the view's version.
    answered: HashSet<Key>,
    /// Later ends of the view's version (taken from the back).
    renewals: Vec<Step>,
    /// Lower bounds of leases absent from the read, soonest-ending first.
    raises: Vec<Step>,
    next_raise: usize,
    /// Whether a first part was applied.
    started: bool,
    confirmed: Confirmed,
}

impl LeasePlan {
    /// Steps planned and not yet applied.
    pub fn pending(&self) -> usize {
        self.renewals.len() + self.raises.len() - self.next_raise
    }

    /// What the plan changed so far, and the keys it cannot settle.
    pub fn into_confirmed(self) -> Confirmed {
        self.confirmed
    }
}

/// One lease end a plan moves: `key`, held at `version`, to `until`.
#[derive(Debug, Clone)]
struct Step {
    key: Key,
    version: crate::record::Version,
    until: u64,
}

/// A read of lease ends against the view: the latest end of each key at the
/// view's version, and the keys it holds at a newer version.
struct Read<'a> {
    latest: HashMap<&'a Key, u64>,
    replaced: HashSet<&'a Key>,
}

impl<'a> Read<'a> {
    fn of(view: &View, ends: &'a [LeaseEnd]) -> Self {
        let mut read = Read { latest: HashMap::new(), replaced: HashSet::new() };
        for end in ends {
            let Some(held) = view.records.get(&end.key) else { continue };
            if held.version == end.version {
                let until = read.latest.entry(&end.key).or_insert(end.lease_until_ms);
                *until = (*until).max(end.lease_until_ms);
            } else if end.version > held.version {
                read.replaced.insert(&end.key);
            }
        }
        read
    }
}

/// Makes `section` serve exactly `items`; returns whether it changed.
fn replace_section<K: Ord + Clone, V: serde::Serialize + PartialEq>(
    section: &mut Section<K, V>,
    items: BTreeMap<K, V>,
) -> bool {
    let gone: Vec<K> =
        section.digests().map(|(k, _)| k).filter(|k| !items.contains_key(*k)).cloned().collect();
    let mut changed = false;
    for key in gone {
        changed |= section.remove(&key);
    }
    for (key, value) in items {
        changed |= section.upsert(key, value);
    }
    changed
}

/// Where a delta poll reads changes from ([`View::delta_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaStart {
    /// Read the changes after this (epoch milliseconds); `None`: nothing
    /// to read.
    pub since_ms: Option<u64>,
    /// How many stamps showed writes the view has not seen.
    pub unseen: usize,
    /// Of those, how many were written at or before the watermark: writes
    /// that reached this replica after the poll that covered their time.
    pub late: usize,
}

/// The merged state of one reader and what it serves.
#[derive(Debug)]
pub struct View {
    skew_ms: u64,
    records: HashMap<Key, Record>,
    /// When (by the reader's clock) the view took each record it holds.
    learned_at: HashMap<Key, u64>,
    /// The last two intervals between renewals of each leased record, as
    /// the view saw them (by its writers' clocks): how often its holder
    /// renews, to tell a renewal that did not arrive.
    renewals: HashMap<Key, [u64; 2]>,
    /// `(renewal due + skew, key)` of every served leased record: when the
    /// next renewal its holder promises is late ([`View::leases_at_risk`]).
    renewals_due: BTreeSet<(u64, Key)>,
    /// The first element of each key's entry in `renewals_due`.
    renewal_due_of: HashMap<Key, u64>,
    /// `(lease_until + skew, key)` of every served leased record.
    deadlines: BTreeSet<(u64, Key)>,
    /// `(lease_until, key)` of every leased record held but not served
    /// (its lease ran out here), so that a renewal that reached storage
    /// late is still found by [`View::confirm_leases`].
    lapsed: BTreeSet<(u64, Key)>,
    /// Served records whose lease end the view holds is the lower bound
    /// [`View::confirm_leases`] raised it to, not a stored value: their
    /// holder's next renewal is not known, only that every poll confirms
    /// them again. Not in `renewals_due`: they are at risk together, once
    /// `confirmed_poll_ms` is a poll late.
    raised: HashSet<Key>,
    /// The start of the poll of the last [`View::confirm_leases`].
    confirmed_poll_ms: u64,
    /// Keys whose version the last read of lease ends returned: a lease
    /// ending within the window (a holder late or stopped, or a short
    /// lease). One of them absent from the next read moved beyond the
    /// window or lost its lease end (a tombstone over its item): it is read
    /// whole rather than raised.
    answered: HashSet<Key>,
    /// The stamps of the writes offered to [`View::apply`] (read by delta
    /// polls and rereads, or written by the registrar), winners or not,
    /// down to the last delta poll's reach: what [`View::unseen`] counts
    /// as seen beside the records the view holds.
    offered: HashSet<ChangeStamp>,
    /// Non-withdrawn export records by service, whatever their cluster's state.
    exports_by_service: BTreeMap<ServiceName, BTreeSet<Label>>,
    /// Services each cluster exports (non-withdrawn).
    services_by_cluster: HashMap<Label, BTreeSet<ServiceName>>,
    pools: Section<PoolId, Pool>,
    routers: Section<RouterId, RouterReplica>,
    clusters: Section<Label, Cluster>,
    exports: Section<ExportKey, Export>,
    imports: Section<ServiceName, ServiceImport>,
    /// Pools and routers are discovered from Kubernetes (docs/design.md
    /// §14) and set by [`View::replace_discovered`]; their records, if
    /// storage holds any, are not served.
    discovered: bool,
}

impl View {
    /// An empty view that keeps a lease live for `skew_ms` past its expiry,
    /// to allow for clock differences between writers and readers.
    pub fn new(skew_ms: u64) -> Self {
        Self {
            skew_ms,
            records: HashMap::new(),
            learned_at: HashMap::new(),
            renewals: HashMap::new(),
            renewals_due: BTreeSet::new(),
            renewal_due_of: HashMap::new(),
            deadlines: BTreeSet::new(),
            lapsed: BTreeSet::new(),
            raised: HashSet::new(),
            confirmed_poll_ms: 0,
            answered: HashSet::new(),
            offered: HashSet::new(),
            exports_by_service: BTreeMap::new(),
            services_by_cluster: HashMap::new(),
            pools: Section::new(SectionKind::Pools.name()),
            routers: Section::new(SectionKind::Routers.name()),
            clusters: Section::new(SectionKind::Clusters.name()),
            exports: Section::new(SectionKind::Exports.name()),
            imports: Section::new(SectionKind::Imports.name()),
            discovered: false,
        }
    }

    /// An empty view whose `pools` and `routers` are discovered from
    /// Kubernetes (docs/design.md §14): set by [`View::replace_discovered`],
    /// never from records.
    pub fn discovered(skew_ms: u64) -> Self {
        Self { discovered: true, ..Self::new(skew_ms) }
    }

    /// Whether `pools` and `routers` are discovered rather than registered.
    pub fn is_discovered(&self) -> bool {
        self.discovered
    }

    /// Replaces the served pools and routers of a discovered view with
    /// `pools` and `routers` (an item equal to the served one changes
    /// nothing, so fingerprints move only with content). Returns whether
    /// anything served changed; a view of registrations is left alone.
    pub fn replace_discovered(
        &mut self,
        pools: BTreeMap<PoolId, Pool>,
        routers: BTreeMap<RouterId, RouterReplica>,
    ) -> bool {
        if !self.discovered {
            return false;
        }
        replace_section(&mut self.pools, pools) | replace_section(&mut self.routers, routers)
    }

    /// Merges one record read or written at `now_ms`. Returns whether it
    /// replaced what the view held (a newer version or a renewal); an older
    /// record changes nothing.
    pub fn apply(&mut self, record: Record, now_ms: u64) -> bool {
        self.offered.insert(ChangeStamp::of(&record));
        if let Some(held) = self.records.get(&record.key)
            && !record.supersedes(held)
        {
            return false;
        }
        self.take(record, now_ms);
        true
    }

    /// Makes `record` the winner of its key, learned at `now_ms`, whatever
    /// the view held.
    fn take(&mut self, record: Record, now_ms: u64) {
        let key = record.key.clone();
        self.learned_at.insert(key.clone(), now_ms);
        self.raised.remove(&key);
        self.note_renewal(&record);
        if let Some(old) = self.records.insert(key.clone(), record) {
            self.forget_deadline(&old);
        }
        self.refresh(&key, now_ms);
    }

    /// Expires every lease whose deadline (expiry plus skew allowance) is at
    /// or before `now_ms`. Returns the keys that stopped being served.
    ///
    /// Bounded by the deadlines due on entry: a refresh never puts a due
    /// deadline back (a record past it is not live), but if a broken rule
    /// did, the reader would spin here forever instead of failing.
    pub fn advance(&mut self, now_ms: u64) -> Vec<Key> {
        let due = self.due_expiries(now_ms);
        let mut expired = Vec::with_capacity(due);
        for _ in 0..due {
            let Some((_, key)) = self.deadlines.pop_first() else {
                break;
            };
            self.forget_renewal_due(&key);
            self.raised.remove(&key);
            self.refresh(&key, now_ms);
            expired.push(key);
        }
        expired
    }

    /// The earliest deadline (lease expiry plus skew allowance) of a served
    /// lease.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// How many served leases [`View::advance`] would expire at `now_ms`.
    pub fn due_expiries(&self, now_ms: u64) -> usize {
        self.deadlines.iter().take_while(|(d, _)| *d <= now_ms).count()
    }

    /// How many served leases are at risk at `now_ms`: due, or past the
    /// renewal their holder's heartbeat promises. A lease is overdue once
    /// `now_ms` is past its last renewal (`changed_at`) plus the interval
    /// its holder has been renewing at, plus the skew allowance and
    /// `slack_ms` (how late a renewal may reach this view: one poll). The
    /// interval is the longer of the last two the view saw; while it has
    /// seen none, it is the lease's whole duration, so such a lease is at
    /// risk only once it is due. A healthy holder's lease is therefore never
    /// at risk, whatever its length. O(leases at risk).
    ///
    /// Leases the view raised from reads of lease ends (`confirm_leases`)
    /// are at risk together once the last such read is `slack_ms` plus the
    /// skew allowance old: a poll is late.
    pub fn leases_at_risk(&self, now_ms: u64, slack_ms: u64) -> usize {
        self.at_risk(now_ms, slack_ms).count()
    }

    /// How many holders the leases at risk at `now_ms` belong to
    /// ([`View::leases_at_risk`]): a pool's cluster, a cluster itself, and
    /// every router replica together (one authorization scope writes them
    /// all, docs/design.md §12), so that one writer's leases are one holder
    /// whatever incarnations it names. O(leases at risk).
    pub fn holders_at_risk(&self, now_ms: u64, slack_ms: u64) -> usize {
        let holders: HashSet<Option<&str>> = self
            .at_risk(now_ms, slack_ms)
            .map(|key| match (key, self.records.get(key).map(|r| &r.body)) {
                (_, Some(Body::Pool(pool))) => Some(pool.pool_key.cluster_id.as_str()),
                (Key::Cluster { cluster_id }, _) => Some(cluster_id.as_str()),
                _ => None,
            })
            .collect();
        holders.len()
    }

    /// The keys of the leases at risk at `now_ms`, each once
    /// ([`View::leases_at_risk`] counts them), for reports of which.
    pub fn keys_at_risk(&self, now_ms: u64, slack_ms: u64) -> impl Iterator<Item = &Key> {
        self.at_risk(now_ms, slack_ms)
    }

    /// The keys of the leases at risk at `now_ms`, each once.
    fn at_risk(&self, now_ms: u64, slack_ms: u64) -> impl Iterator<Item = &Key> {
        let late = move |due: u64| due.saturating_add(slack_ms) < now_ms;
        let raised_late = late(self.confirmed_poll_ms.saturating_add(self.skew_ms));
        let overdue = self.renewals_due.iter().take_while(move |(due, _)| late(*due));
        let due_in_time = self
            .deadlines
            .iter()
            .take_while(move |(deadline, _)| *deadline <= now_ms)
            .filter(move |(_, key)| !(raised_late && self.raised.contains(key)))
            .filter(move |(_, key)| !self.renewal_due_of.get(key).is_some_and(|due| late(*due)));
        let raised = self.raised.iter().filter(move |_| raised_late);
        overdue.chain(due_in_time).map(|(_, key)| key).chain(raised)
    }

    /// When `record`'s next renewal is due (before the skew allowance): its
    /// last one plus how often its holder renews, as far as the view can
    /// tell.
    fn renewal_due(&self, record: &Record) -> u64 {
        if let (Some(terms), Some(until)) = (record.terms, record.lease_until_ms) {
            return until.saturating_sub(terms.duration_ms).saturating_add(terms.heartbeat_ms);
        }
        let every = match self.renewals.get(&record.key) {
            Some([a, b]) => (*a).max(*b),
            None => record.lease_until_ms.unwrap_or(0).saturating_sub(record.changed_at_ms),
        };
        record.changed_at_ms.saturating_add(every)
    }

    fn forget_renewal_due(&mut self, key: &Key) {
        if let Some(due) = self.renewal_due_of.remove(key) {
            self.renewals_due.remove(&(due, key.clone()));
        }
    }

    /// Remembers the interval since the held record if `record` renews it
    /// (same version and owner, later write); anything else starts over.
    /// Intervals under the shortest heartbeat a lease can ask for (1 s) are
    /// retries, or writes whose `changed_at` was moved just past the held
    /// one's, not heartbeats: they change nothing.
    fn note_renewal(&mut self, record: &Record) {
        let renewed = self.records.get(&record.key).and_then(|held| {
            (held.version == record.version
                && held.owner == record.owner
                && held.lease_until_ms.is_some()
                && record.lease_until_ms.is_some()
                && record.changed_at_ms > held.changed_at_ms)
                .then(|| record.changed_at_ms - held.changed_at_ms)
        });
        match renewed {
            Some(interval) if interval < MIN_HEARTBEAT_MS => {}
            Some(interval) => {
                let seen = self.renewals.entry(record.key.clone()).or_insert([interval; 2]);
                *seen = [seen[1], interval];
            }
            None => {
                self.renewals.remove(&record.key);
            }
        }
    }

    /// Replaces the view's state with a full read that started at
    /// `read_started_ms`: newer records are merged, and records the read no
    /// longer holds are dropped unless they changed, or the view took them,
    /// after the read began. A write acknowledged while the read was under
    /// way may have landed behind the scan although its `changed_at` (the
    /// registrar's clock before the write) is earlier: it is kept.
    ///
    /// A held record no item holds any more (TTL deleted it) while the read
    /// holds older versions of its key gives way to the read's winner, under
    /// the same condition: it is *retired* (docs/design.md §6, "Full
    /// reads"). Kept, it would go on superseding what every other process,
    /// which no longer holds it, serves.
    pub fn replace_all(
        &mut self,
        records: impl IntoIterator<Item = Record>,
        read_started_ms: u64,
        now_ms: u64,
    ) -> Resync {
        // Per key read: whether an item holds the held version or a newer one.
        let mut seen: HashMap<Key, bool> = HashMap::new();
        // Per key read: the best record below the held version.
        let mut below: HashMap<Key, Record> = HashMap::new();
        let mut result = Resync::default();
        for record in records {
            let reaches = self.records.get(&record.key).is_none_or(|h| record.version >= h.version);
            *seen.entry(record.key.clone()).or_default() |= reaches;
            if !reaches {
                self.offered.insert(ChangeStamp::of(&record));
                match below.get(&record.key) {
                    Some(best) if !record.supersedes(best) => {}
                    _ => {
                        below.insert(record.key.clone(), record);
                    }
                }
                continue;
            }
            if self.apply(record, now_ms) {
                result.applied += 1;
            }
        }
        let settled = |view: &Self, key: &Key, held: &Record| {
            held.changed_at_ms < read_started_ms
                && view.learned_at.get(key).is_none_or(|t| *t < read_started_ms)
        };
        let gone: Vec<Key> = self
            .records
            .iter()
            .filter(|(k, r)| !seen.contains_key(*k) && settled(self, k, r))
            .map(|(k, _)| k.clone())
            .collect();
        for (key, record) in below {
            if seen[&key] || !settled(self, &key, &self.records[&key]) {
                continue;
            }
            self.take(record, now_ms);
            result.retired += 1;
        }
        for key in gone {
            self.learned_at.remove(&key);
            self.renewals.remove(&key);
            self.raised.remove(&key);
            if let Some(old) = self.records.remove(&key) {
                self.forget_deadline(&old);
            }
            self.refresh(&key, now_ms);
            result.dropped += 1;
        }
        result
    }

    /// The winning record of `key`, live or not.
    pub fn record(&self, key: &Key) -> Option<&Record> {
        self.records.get(key)
    }

    /// Every record held, live or not, in no particular order.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.values()
    }

    /// How many records are held, live or not.
    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// How many leases are served (and could expire).
    pub fn live_leases(&self) -> usize {
        self.deadlines.len()
    }

    /// Served pools.
    pub fn pools(&self) -> &Section<PoolId, Pool> {
        &self.pools
    }

    /// Served router replicas.
    pub fn routers(&self) -> &Section<RouterId, RouterReplica> {
        &self.routers
    }

    /// Clusters with a live lease.
    pub fn clusters(&self) -> &Section<Label, Cluster> {
        &self.clusters
    }

    /// Live exports with their conditions.
    pub fn exports(&self) -> &Section<ExportKey, Export> {
        &self.exports
    }

    /// Merged ServiceImports.
    pub fn imports(&self) -> &Section<ServiceName, ServiceImport> {
        &self.imports
    }

    /// The conditions of a live export.
    pub fn export_conditions(&self, key: &ExportKey) -> Option<&[Condition]> {
        self.exports.get(key).map(|e| e.conditions.as_slice())
    }

    fn forget_deadline(&mut self, old: &Record) {
        if let Some(until) = old.lease_until_ms {
            self.deadlines.remove(&(until.saturating_add(self.skew_ms), old.key.clone()));
            self.lapsed.remove(&(until, old.key.clone()));
        }
        self.forget_renewal_due(&old.key);
    }

    /// Enters the served lease of `key`, ending at `until`, in the deadline
    /// index and its next renewal in the renewal index.
    fn schedule(&mut self, key: &Key, until: u64) {
        self.deadlines.insert((until.saturating_add(self.skew_ms), key.clone()));
        if self.raised.contains(key) {
            self.forget_renewal_due(key);
            return;
        }
        let Some(record) = self.records.get(key) else { return };
        let due = self.renewal_due(record).saturating_add(self.skew_ms);
        if let Some(was) = self.renewal_due_of.insert(key.clone(), due) {
            self.renewals_due.remove(&(was, key.clone()));
        }
        self.renewals_due.insert((due, key.clone()));
    }

    /// Moves the lease end of the record held for `key` to `until` (a later
    /// end: a renewal read from the lease ends, or the lower bound their
    /// absence implies). A served lease is rescheduled in place, without
    /// touching what is served; a lapsed one is served again if `until`
    /// makes it live.
    fn extend_lease(&mut self, key: &Key, until: u64, now_ms: u64) {
        let Some(old_until) = self.lease_end(key) else {
            return;
        };
        let old_deadline = (old_until.saturating_add(self.skew_ms), key.clone());
        let was_served = self.deadlines.remove(&old_deadline);
        self.lapsed.remove(&(old_until, old_deadline.1));
        self.forget_renewal_due(key);
        if let Some(record) = self.records.get_mut(key) {
            record.lease_until_ms = Some(until);
        }
        if was_served {
            self.schedule(key, until);
        } else {
            self.refresh(key, now_ms);
        }
    }

    /// Brings the view's leases in line with a read of the stored lease
    /// ends in `window` (docs/design.md §6 "Renewals and the change feed"),
    /// made after the delta poll whose records the view already holds.
    ///
    /// - An end of the view's version later than the view's: a renewal;
    ///   the view takes it.
    /// - A record of the view whose lease end lies in the window but that
    ///   the read did not return at its version: every item of that version
    ///   ends beyond the window (ends only move later), so its lease is
    ///   raised to `min(to, settled + duration)`: the window's end, or, for
    ///   a lease short enough that a write too recent for the index could
    ///   be missing from the read, the earliest end such a write can have.
    ///   Never above what is stored. Records without lease terms (written
    ///   before schema 2, whose renewals move `changed_at`) are left to the
    ///   change feed.
    ///
    /// Lapsed records in the window are found the same way, so a renewal
    /// that reached this replica late serves the record again.
    ///
    /// The same as [`View::plan_leases`] then [`View::apply_leases`] of the
    /// whole plan.
    pub fn confirm_leases(
        &mut self,
        ends: &[LeaseEnd],
        window: LeaseWindow,
        now_ms: u64,
    ) -> Confirmed {
        let mut plan = self.plan_leases(ends, window);
        let steps = plan.pending();
        self.apply_leases(&mut plan, steps, now_ms);
        plan.into_confirmed()
    }

    /// What [`View::confirm_leases`] would change, read from a shared view
    /// (a reader plans under a read lock, then applies the plan a part at
    /// a time under the write lock: docs/design.md §6). Each step names the
    /// version it was planned for.
    pub fn plan_leases(&self, ends: &[LeaseEnd], window: LeaseWindow) -> LeasePlan {
        let read = Read::of(self, ends);
        let recheck = self.unsettled_by(&read, window);
        let version_of = |key: &Key| self.records.get(key).map(|r| r.version.clone());
        let renewals: Vec<Step> = read
            .latest
            .iter()
            .filter_map(|(key, until)| {
                Some(Step { key: (*key).clone(), version: version_of(key)?, until: *until })
            })
            .collect();
        let unsettled: HashSet<&Key> = recheck.iter().collect();
        // Soonest-ending first: `absent_from` walks the deadline index.
        let raises: Vec<Step> = self
            .absent_from(&read, window)
            .filter(|(_, key, _)| !unsettled.contains(key))
            .filter_map(|(_, key, _)| {
                let record = self.records.get(key)?;
                let terms = record.terms?;
                let until = window.to_ms.min(window.settled_ms.saturating_add(terms.duration_ms));
                Some(Step { key: key.clone(), version: record.version.clone(), until })
            })
            .collect();
        drop(unsettled);
        LeasePlan {
            window,
            answered: read.latest.keys().map(|key| (*key).clone()).collect(),
            renewals,
            raises,
            next_raise: 0,
            started: false,
            confirmed: Confirmed { recheck, ..Confirmed::default() },
        }
    }

    /// Applies up to `max` steps of `plan` (renewals, then raises,
    /// soonest-ending first); returns whether the plan is done. A step whose
    /// record changed version since the plan was made is skipped: the write
    /// that changed it carries its own lease end, and the next poll reads
    /// the ends of the new version.
    pub fn apply_leases(&mut self, plan: &mut LeasePlan, max: usize, now_ms: u64) -> bool {
        let window = plan.window;
        if !plan.started {
            plan.started = true;
            self.confirmed_poll_ms = self.confirmed_poll_ms.max(window.polled_at_ms);
            self.answered = std::mem::take(&mut plan.answered);
        }
        let mut budget = max.min(plan.pending());
        // Stored ends read back: the view's end is a stored one again.
        while budget > 0
            && let Some(step) = plan.renewals.pop()
        {
            budget -= 1;
            if !self.holds(&step) {
                continue;
            }
            let was_raised = self.raised.remove(&step.key);
            let held = self.lease_end(&step.key);
            if held < Some(step.until) {
                self.extend_lease(&step.key, step.until, now_ms);
                plan.confirmed.renewed += 1;
            } else if was_raised && let Some(held) = held {
                // Stored exactly at the bound: due by its terms again.
                self.extend_lease(&step.key, held, now_ms);
            }
        }
        while budget > 0
            && let Some(step) = plan.raises.get(plan.next_raise)
        {
            plan.next_raise += 1;
            budget -= 1;
            if !self.holds(step) {
                continue;
            }
            let (key, bound) = (&step.key, step.until);
            if self.lease_end(key).is_some_and(|until| bound > until) {
                self.raised.insert(key.clone());
                self.extend_lease(key, bound, now_ms);
                if !self.deadlines.contains(&(bound.saturating_add(self.skew_ms), key.clone())) {
                    self.raised.remove(key);
                }
                plan.confirmed.extended += 1;
            }
        }
        let done = plan.renewals.is_empty() && plan.next_raise == plan.raises.len();
        if done {
            // Lapsed leases below the window are past any renewal a later
            // read could find (the lookback's bound, as for the change feed).
            while self.lapsed.first().is_some_and(|(until, _)| *until < window.from_ms) {
                self.lapsed.pop_first();
            }
        }
        done
    }

    /// Whether the view still holds the version `step` was planned for.
    fn holds(&self, step: &Step) -> bool {
        self.records.get(&step.key).is_some_and(|r| r.version == step.version)
    }

    /// The keys a read of lease ends in `window` cannot settle, for the
    /// reader to read whole (every origin's item, merged) and apply after
    /// [`View::confirm_leases`] (which returns them and raises none of
    /// them), soonest-ending first:
    ///
    /// - the read holds a newer version of the key than the view: a change
    ///   the delta poll missed (it reached this replica later than the
    ///   lookback), never to be taken for a renewal beyond the window;
    /// - the read holds the view's version, but no end of it later than
    ///   the view's, for a lease with terms due by `raise_by_ms`: another
    ///   origin's item of that version (a relay that failed over keeping
    ///   its version) may have been renewed beyond the window, or the
    ///   holder stopped (found by mcs-sim, `tests/known_issues.rs`);
    /// - a lease with terms the read does not return whose absence cannot
    ///   mean "renewed on time": a lapsed one, or one the previous read
    ///   returned. Either was renewed late, or its item lost its lease end
    ///   (a withdrawal that reached this replica later than the lookback).
    pub fn leases_to_recheck(&self, ends: &[LeaseEnd], window: LeaseWindow) -> Vec<Key> {
        self.unsettled_by(&Read::of(self, ends), window)
    }

    /// Where a delta poll reads changes from, given a read of the change
    /// stamps written after `reached_ms` (the watermark less the lookback):
    /// just before the earliest write there the view has not seen
    /// ([`View::unseen`]), never before `reached_ms`; `None` when it has
    /// seen them all, and the poll reads no changes (docs/design.md §6
    /// "Reaching back for late changes"). Forgets the stamps of offered
    /// writes at or before `reached_ms`: no later poll asks about them.
    pub fn delta_start(
        &mut self,
        stamps: &[ChangeStamp],
        reached_ms: u64,
        watermark_ms: u64,
    ) -> DeltaStart {
        self.forget_offered(reached_ms);
        let mut start = DeltaStart { since_ms: None, unseen: 0, late: 0 };
        for stamp in self.unseen(stamps) {
            start.unseen += 1;
            start.late += usize::from(stamp.changed_at_ms <= watermark_ms);
            let since = stamp.changed_at_ms.saturating_sub(1).max(reached_ms);
            start.since_ms = Some(start.since_ms.map_or(since, |s| s.min(since)));
        }
        start
    }

    /// Forgets the stamps of the writes offered to [`View::apply`] at or
    /// before `reached_ms` (the watermark less the lookback): no poll asks
    /// about them any more. The reader calls it at every delta poll, with
    /// change stamps ([`View::delta_start`]) or without, so that they stay
    /// within a lookback's writes.
    pub fn forget_offered(&mut self, reached_ms: u64) {
        self.offered.retain(|s| s.changed_at_ms > reached_ms);
    }

    /// The writes among `stamps` this view has not seen: neither the
    /// record it holds of the key (the same `changed_at_ms` and version)
    /// nor a write offered to [`View::apply`] since the last
    /// [`View::delta_start`]'s reach. A write the view has not seen may
    /// change it (a later version, or an equal one renewed by a put) or not
    /// (another origin's item that loses the merge); either is read once.
    pub fn unseen<'a>(
        &'a self,
        stamps: &'a [ChangeStamp],
    ) -> impl Iterator<Item = &'a ChangeStamp> + 'a {
        // Offered first: most stamps of a lookback are, and the check
        // against the held record hashes its version.
        stamps.iter().filter(|stamp| {
            !self.offered.contains(*stamp)
                && !self.records.get(&stamp.key).is_some_and(|held| {
                    held.changed_at_ms == stamp.changed_at_ms
                        && ChangeStamp::version_hash(&held.version) == stamp.version_hash
                })
        })
    }

    /// [`View::leases_to_recheck`] of a read already sorted against the view.
    fn unsettled_by(&self, read: &Read<'_>, window: LeaseWindow) -> Vec<Key> {
        let raise_by = window.to_ms.min(window.raise_by_ms);
        let unsettled = read.latest.iter().filter_map(|(key, until)| {
            let held = self.records.get(*key)?;
            let due = held.lease_until_ms.filter(|u| *u <= raise_by && Some(*until) <= Some(*u))?;
            held.terms.is_some().then_some((due, *key))
        });
        let gone = self
            .absent_from(read, window)
            .filter(|(_, key, lapsed)| *lapsed || self.answered.contains(*key))
            .map(|(until, key, _)| (until, key));
        let mut keys: Vec<(u64, &Key)> = read
            .replaced
            .iter()
            .map(|k| (self.lease_end(k).unwrap_or(0), *k))
            .chain(unsettled)
            .chain(gone)
            .collect();
        keys.sort();
        keys.dedup();
        keys.into_iter().map(|(_, key)| key.clone()).collect()
    }

    /// The lease end the view holds for `key`, if any.
    fn lease_end(&self, key: &Key) -> Option<u64> {
        self.records.get(key).and_then(|r| r.lease_until_ms)
    }

    /// `(lease end, key, lapsed)` of the leases with terms the view holds
    /// that `read` lacks although their end lies in `window`: served ones
    /// ending by `raise_by_ms`, lapsed ones anywhere in it.
    fn absent_from<'a>(
        &'a self,
        read: &'a Read<'a>,
        window: LeaseWindow,
    ) -> impl Iterator<Item = (u64, &'a Key, bool)> + 'a {
        let raise_by = window.to_ms.min(window.raise_by_ms);
        let skew = self.skew_ms;
        let served = self
            .deadlines
            .iter()
            .map(move |(deadline, key)| (deadline.saturating_sub(skew), key, false))
            .skip_while(move |(until, _, _)| *until < window.from_ms)
            .take_while(move |(until, _, _)| *until <= raise_by);
        let lapsed = self
            .lapsed
            .iter()
            .skip_while(move |(until, _)| *until < window.from_ms)
            .take_while(move |(until, _)| *until <= window.to_ms)
            .map(|(until, key)| (*until, key, true));
        served.chain(lapsed).filter(move |(until, key, _)| {
            (window.from_ms..=window.to_ms).contains(until)
                && !read.latest.contains_key(key)
                && !read.replaced.contains(key)
                && self.records.get(*key).is_some_and(|r| r.terms.is_some())
        })
    }

    /// Brings the served sections in line with the record held for `key`.
    fn refresh(&mut self, key: &Key, now_ms: u64) {
        let record = self.records.get(key);
        // A discovered view keeps pool and router records (to refuse older
        // writes) but neither serves nor expires them.
        let ignored = self.discovered && matches!(key, Key::Pool { .. } | Key::Router { .. });
        let live = !ignored && record.is_some_and(|r| r.is_live(now_ms, self.skew_ms));
        let lease = record.filter(|r| !ignored && !r.is_tombstone()).and_then(|r| r.lease_until_ms);
        if let Some(until) = lease {
            if live {
                self.schedule(key, until);
            } else {
                self.lapsed.insert((until, key.clone()));
            }
        }
        let record = self.records.get(key);
        let body = record.filter(|_| live).map(|r| (&r.body, r.owner.as_deref()));
        match key {
            // Discovered: served from Kubernetes only (`replace_discovered`).
            Key::Pool { .. } | Key::Router { .. } if self.discovered => {}
            Key::Pool { pool_id } => match body {
                Some((Body::Pool(pool), _)) => {
                    self.pools.upsert(pool_id.clone(), pool.clone());
                }
                _ => {
                    self.pools.remove(pool_id);
                }
            },
            Key::Router { router_id } => match body {
                Some((Body::Router(router), _)) => {
                    self.routers.upsert(router_id.clone(), router.clone());
                }
                _ => {
                    self.routers.remove(router_id);
                }
            },
            Key::Cluster { cluster_id } => {
                let incarnation = match body {
                    Some((Body::Cluster, Some(owner))) => Incarnation::new(owner).ok(),
                    _ => None,
                };
                let changed = match incarnation {
                    Some(incarnation) => self.clusters.upsert(
                        cluster_id.clone(),
                        Cluster { cluster_id: cluster_id.clone(), incarnation },
                    ),
                    None => self.clusters.remove(cluster_id),
                };
                if changed {
                    let services: Vec<ServiceName> = self
                        .services_by_cluster
                        .get(cluster_id)
                        .map(|s| s.iter().cloned().collect())
                        .unwrap_or_default();
                    for service in services {
                        self.refresh_service(&service);
                    }
                }
            }
            Key::Export(export_key) => {
                let service = export_key.service();
                let cluster = &export_key.cluster_id;
                if matches!(body, Some((Body::Export(_), _))) {
                    self.exports_by_service
                        .entry(service.clone())
                        .or_default()
                        .insert(cluster.clone());
                    self.services_by_cluster
                        .entry(cluster.clone())
                        .or_default()
                        .insert(service.clone());
                } else {
                    if let Some(set) = self.exports_by_service.get_mut(&service) {
                        set.remove(cluster);
                        if set.is_empty() {
                            self.exports_by_service.remove(&service);
                        }
                    }
                    if let Some(set) = self.services_by_cluster.get_mut(cluster) {
                        set.remove(&service);
                        if set.is_empty() {
                            self.services_by_cluster.remove(cluster);
                        }
                    }
                    self.exports.remove(export_key);
                }
                self.refresh_service(&service);
            }
        }
    }

    /// Re-merges one service from its live exports.
    fn refresh_service(&mut self, service: &ServiceName) {
        let clusters: Vec<Label> = self
            .exports_by_service
            .get(service)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut live: Vec<(ExportKey, &Record)> = Vec::new();
        for cluster in &clusters {
            let key = ExportKey {
                cluster_id: cluster.clone(),
                namespace: service.namespace.clone(),
                name: service.name.clone(),
            };
            if !self.clusters.contains(cluster) {
                continue;
            }
            if let Some(record) = self.records.get(&Key::Export(key.clone())) {
                live.push((key, record));
            }
        }
        let specs: Vec<(&Label, &mcs_api::ExportSpec)> = live
            .iter()
            .filter_map(|(k, r)| match &r.body {
                Body::Export(spec) => Some((&k.cluster_id, spec)),
                _ => None,
            })
            .collect();
        let merged = imports::merge(service, &specs);
        let served: Vec<(ExportKey, Export)> = match &merged {
            Some(m) => live
                .iter()
                .filter_map(|(k, r)| match (&r.body, m.export_conditions.get(&k.cluster_id)) {
                    (Body::Export(spec), Some(conditions)) => Some((
                        k.clone(),
                        Export {
                            cluster_id: k.cluster_id.clone(),
                            namespace: k.namespace.clone(),
                            name: k.name.clone(),
                            spec: spec.clone(),
                            conditions: conditions.clone(),
                        },
                    )),
                    _ => None,
                })
                .collect(),
            None => Vec::new(),
        };
        let served_keys: HashSet<ExportKey> = served.iter().map(|(k, _)| k.clone()).collect();
        for cluster in clusters {
            let key = ExportKey {
                cluster_id: cluster,
                namespace: service.namespace.clone(),
                name: service.name.clone(),
            };
            if !served_keys.contains(&key) {
                self.exports.remove(&key);
            }
        }
        for (key, export) in served {
            self.exports.upsert(key, export);
        }
        match merged {
            Some(m) => {
                self.imports.upsert(service.clone(), m.import);
            }
            None => {
                self.imports.remove(service);
            }
        }
    }
}

/// The view's side of [`SectionKind`]: which typed section of a [`View`]
/// each kind is, and what is read through it.
impl SectionKind {
    /// Runs `visitor` on this section of `view`, typed.
    pub fn visit<'v, T: SectionVisitor<'v>>(self, view: &'v View, visitor: T) -> T::Output {
        match self {
            SectionKind::Pools => visitor.visit(view.pools()),
            SectionKind::Routers => visitor.visit(view.routers()),
            SectionKind::Clusters => visitor.visit(view.clusters()),
            SectionKind::Exports => visitor.visit(view.exports()),
            SectionKind::Imports => visitor.visit(view.imports()),
        }
    }

    /// This section of `view`, untyped.
    pub fn of(self, view: &View) -> &dyn Served {
        struct Untyped;
        impl<'v> SectionVisitor<'v> for Untyped {
            type Output = &'v dyn Served;
            fn visit<K, V>(self, section: &'v Section<K, V>) -> Self::Output
            where
                K: Ord + fmt::Display,
                V: Serialize + PartialEq,
            {
                section
            }
        }
        self.visit(view, Untyped)
    }

    /// Its fingerprint in `view`.
    pub fn fingerprint(self, view: &View) -> Fingerprint {
        self.of(view).fingerprint()
    }

    /// How many items `view` serves in it.
    pub fn len(self, view: &View) -> usize {
        self.of(view).len()
    }

    /// Its version in `view` (bumped on every change of its content).
    pub fn version(self, view: &View) -> u64 {
        self.of(view).version()
    }

    /// The body of `GET /v1/<name>`:
    /// `{"<name>":[...],"complete":...,"fingerprint":"..."}`.
    pub fn list_body(self, view: &View, complete: bool) -> ListBody {
        #[derive(Serialize)]
        struct Tail<'a> {
            complete: bool,
            fingerprint: &'a str,
        }
        let section = self.of(view);
        let fingerprint = section.fingerprint();
        let mut body = Vec::with_capacity(64 + 256 * section.len());
        body.extend_from_slice(b"{\"");
        body.extend_from_slice(self.name().as_bytes());
        body.extend_from_slice(b"\":");
        section.write_items(&mut body);
        body.push(b',');
        // Serializing plain data types into a Vec cannot fail.
        let tail =
            serde_json::to_vec(&Tail { complete, fingerprint: &fingerprint }).unwrap_or_default();
        body.extend_from_slice(&tail[1..]);
        ListBody { fingerprint, body }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod rule_tests;

#[cfg(test)]
mod confirm_tests;

#[cfg(test)]
mod stamp_tests;
