//! A registry process as the simulation runs it: its clock, its HLC, its
//! [`View`] fed by polls of its region's replica, and the write path of
//! `mcs-registry`'s registrar (judge against the view, then one conditional
//! write of this region's item).
//!
//! ```text
//!  request ─► changed_at = max(now, view's changed_at + 1)
//!          ─► version (client's, reused on a heartbeat, or HLC)
//!          ─► rules.write(view's winner) ─► rules.write(local item (key, region))
//!          ─► Apply/Renew: store, apply to the view, acknowledge
//!          ─► Stale: observe; an HLC write retries once with a fresh generation
//! ```
//!
//! Its reader polls as `mcs-registry`'s does: the watermark is the reader's
//! clock at the start of its last poll; a delta poll reads the `changes`
//! index from the watermark less the lookback, then the `lease_ends` index
//! over [`LeaseWindow`] (from what the delta poll reached to the poll's
//! start plus the horizon of its lease policy) and confirms the view's
//! leases with it ([`View::confirm_leases`]; docs/design.md §6 "Renewals
//! and the change feed"). A renewal keeps `changed_at` in storage, so it
//! reaches a view only that way, or by a full read.
//!
//! Beside the real `View` the process keeps `merged`, the winner of every
//! key by the schedule's merge rule. With the real rule the two always agree
//! (counted in `view_rebuilds`, which stays 0); with a broken merge rule the
//! view is rebuilt from `merged`, so the fingerprints come from a real `View`
//! that holds what the broken rule chose. A confirmation moves only lease
//! ends of records the view holds, never which version wins, so `merged`
//! takes the view's later lease end wherever both hold the same write
//! (same version, owner and content): the merge rule would have taken
//! that end too, had it been read as a record.

use crate::params::{Confirm, Knobs, Params, Reach};
use crate::rules::Rules;
use crate::stats::Stats;
use crate::table::Table;
use mcs_core::rules::renewal_extends;
use mcs_core::view::{Confirmed, LeaseWindow};
use mcs_core::write::{Intent, PlannedWrite, Refusal, WithdrawalPlan, plan_withdrawal};
use mcs_core::{
    Body, Hlc, Key, LeaseEnd, LeasePolicy, LeaseTerms, Record, Version, View, WriteDecision,
};
use std::collections::BTreeMap;

/// A registrar's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Acknowledged: the conditional write accepted this record (stored
    /// unless it renews the stored version without extending its lease).
    Ok(Box<Record>),
    /// Refused: a newer version is held.
    Stale(Version),
    /// Refused: another incarnation holds the live lease until `until_ms`,
    /// judged at the registrar's `now_ms`.
    Owned {
        /// When the lease ends, by the lease's writer's clock.
        until_ms: u64,
        /// The registrar's clock when it refused.
        now_ms: u64,
    },
    /// Nothing to withdraw.
    NotFound,
    /// The registrar is down or has not finished its first full read.
    Unavailable,
}

/// What a write did.
#[derive(Debug, Clone)]
pub struct Written {
    /// The answer to the client.
    pub reply: Reply,
    /// Whether the conditional write accepted it (Apply or Renew).
    pub acked: bool,
    /// The image the conditional write stored in this region's item, if any.
    pub stored: Option<Record>,
}

impl Written {
    /// An answer without a write.
    fn answer(reply: Reply) -> Self {
        Self { reply, acked: false, stored: None }
    }
}

/// Where and when a write happens.
#[derive(Debug, Clone, Copy)]
pub struct Site<'a> {
    /// The replica of the registrar's region.
    pub table: &'a Table,
    /// The registrar's region: the origin of the items it writes.
    pub region: usize,
    /// True time.
    pub t: u64,
    /// The rules of the schedule.
    pub rules: &'a Rules,
    /// The variations of the registrar's model in force.
    pub knobs: Knobs,
}

/// One running registry process.
#[derive(Debug)]
pub struct Process {
    /// Breaks generation ties; random per process unless configured.
    pub writer_id: String,
    /// Which process of its slot this is.
    pub epoch: u32,
    /// Its clock minus true time.
    pub offset_ms: i64,
    /// Whether the first full read is done (it serves only then).
    pub ready: bool,
    /// The lease this process grants.
    pub lease_ms: u64,
    /// How often the relays heartbeat: the interval the leases it grants ask for.
    heartbeat_ms: u64,
    skew_ms: u64,
    lookback_ms: u64,
    /// How far past a poll's start it asks for lease ends
    /// ([`LeasePolicy::horizon_ms`] of its lease policy).
    horizon_ms: u64,
    /// Its refresh interval: absent leases are raised when due within two.
    refresh_ms: u64,
    hlc: Hlc,
    /// The served view.
    pub view: View,
    /// The winner of every key by the schedule's merge rule.
    pub merged: BTreeMap<Key, Record>,
    /// Its clock at the start of its last poll.
    watermark_ms: u64,
    /// What its last poll promises, per key: while the view's winner is of
    /// this version, it serves the key until this lease end, by its own
    /// clock ([`crate::check`], invariant `RenewalServed`).
    pub promised: BTreeMap<Key, (Version, u64)>,
    /// Keys for which a delta poll's indexes broke the lookback's promise
    /// (replication later than the lookback): they showed a newer version
    /// than the view's, which the change feed had missed, or lacked an image
    /// written before the poll's settled time. The version the view held
    /// then, while it holds it. Never a key whose replica's winner is a
    /// tombstone newer than the view's: a late withdrawal is not let off
    /// (issue 22; its tombstone is in the lease ends read).
    pub missed: BTreeMap<Key, Version>,
    /// What its last delta poll missed of what its lookback covers (an
    /// image its indexes showed, written after the watermark less the
    /// lookback, newer than the view's), if anything (invariant
    /// `DeltaComplete`).
    pub incomplete: Option<String>,
    /// The highest version of every key this process has read or written:
    /// every stored image is an acknowledged write, so this is the newest
    /// acknowledged write it could know of.
    pub known: BTreeMap<Key, Version>,
    /// The highest tombstone version of every key it has read or written.
    pub known_tombstone: BTreeMap<Key, Version>,
}

fn raise(map: &mut BTreeMap<Key, Version>, key: &Key, version: &Version) {
    match map.get_mut(key) {
        Some(held) if *held >= *version => {}
        Some(held) => *held = version.clone(),
        None => {
            map.insert(key.clone(), version.clone());
        }
    }
}

impl Process {
    /// A fresh process granting leases of `lease_ms`: empty HLC and view,
    /// not ready.
    pub fn new(
        writer_id: String,
        epoch: u32,
        offset_ms: i64,
        lease_ms: u64,
        params: &Params,
    ) -> Self {
        let skew_ms = params.skew_allowance_ms;
        let policy = LeasePolicy::new(lease_ms / 1000, params.heartbeat_ms / 1000)
            .expect("the simulation's leases are whole seconds, heartbeat under duration");
        Self {
            writer_id,
            epoch,
            offset_ms,
            ready: false,
            lease_ms,
            heartbeat_ms: params.heartbeat_ms,
            skew_ms,
            lookback_ms: params.lookback_ms,
            horizon_ms: policy.horizon_ms(skew_ms, params.refresh_ms, params.lookback_ms),
            refresh_ms: params.refresh_ms,
            hlc: Hlc::default(),
            view: View::new(skew_ms),
            merged: BTreeMap::new(),
            watermark_ms: 0,
            promised: BTreeMap::new(),
            missed: BTreeMap::new(),
            known: BTreeMap::new(),
            known_tombstone: BTreeMap::new(),
            incomplete: None,
        }
    }

    /// The process's clock at true time `t`.
    pub fn now(&self, t: u64) -> u64 {
        t.saturating_add_signed(self.offset_ms)
    }

    /// Merges one record read or written at `now`.
    pub fn ingest(&mut self, record: Record, now: u64, rules: &Rules, stats: &mut Stats) {
        let key = record.key.clone();
        raise(&mut self.known, &key, &record.version);
        if record.is_tombstone() {
            raise(&mut self.known_tombstone, &key, &record.version);
        }
        let replace = self.merged.get(&key).is_none_or(|held| (rules.merge)(&record, held));
        if replace {
            self.view.apply(record.clone(), now);
            self.merged.insert(key.clone(), record);
        } else {
            self.view.apply(record, now);
        }
        self.sync(std::iter::once(&key), now, stats);
    }

    /// A delta poll of `table` at true time `t`: the changes since the
    /// watermark less the lookback that the view lacks, reached as
    /// `knobs.reach` says, then the lease ends read and confirmed as
    /// `knobs.confirm` says. Returns the lease ends window, how many ends
    /// it held and what the view made of them.
    pub fn delta_poll(
        &mut self,
        table: &Table,
        t: u64,
        rules: &Rules,
        knobs: &Knobs,
        strict_renewals: bool,
        stats: &mut Stats,
    ) -> Option<(LeaseWindow, usize, Confirmed)> {
        let Knobs { confirm, reach, .. } = *knobs;
        let now = self.now(t);
        let reached = self.watermark_ms.saturating_sub(self.lookback_ms);
        // The window read as change stamps: changes are read whole only
        // from the earliest write there the view has not seen, and not at
        // all when it has seen them all (docs/design.md §6).
        let since = match reach {
            Reach::Lookback => {
                self.view.forget_offered(reached);
                Some(reached)
            }
            Reach::Watermark => {
                self.view.forget_offered(reached);
                Some(self.watermark_ms)
            }
            Reach::Stamps => {
                let stamps = table.read_change_stamps(reached.saturating_add(1), u64::MAX, t);
                let start = self.view.delta_start(&stamps, reached, self.watermark_ms);
                stats.changes_reached_back += start.late as u64;
                start.since_ms
            }
        };
        let records = since.map_or_else(Vec::new, |since| table.read_changed_since(since, t));
        self.observe_all(&records, now);
        for record in records {
            self.ingest(record, now, rules, stats);
        }
        // What the lookback promises: every image the indexes show written
        // after the watermark less the lookback is held, or a newer one.
        self.incomplete = table.read_changed_since(reached, t).into_iter().find_map(|image| {
            let held = self.view.record(&image.key);
            held.is_none_or(|h| image.version > h.version).then(|| {
                format!(
                    "{} written at {}, holding {}",
                    image.version,
                    image.changed_at_ms,
                    held.map_or("none".into(), |h| h.version.to_string())
                )
            })
        });
        self.watermark_ms = now;
        let window = LeaseWindow {
            from_ms: reached,
            to_ms: now.saturating_add(self.horizon_ms),
            settled_ms: now.saturating_sub(self.lookback_ms),
            polled_at_ms: now,
            raise_by_ms: now.saturating_add(2 * self.refresh_ms),
        };
        let ends = table.read_lease_ends(window.from_ms, window.to_ms, t);
        self.promise(table, t, Some((window, &ends)), strict_renewals, stats);
        for (key, held) in &self.merged {
            let newer = table.stored_lease(key, t, true).filter(|(r, _)| r.version > held.version);
            // A withdrawal is never let off: its tombstone carries the
            // withdrawn lease's end into the lease ends read.
            let withdrawn = table
                .stored_lease(key, t, false)
                .is_some_and(|(r, _)| r.is_tombstone() && r.version > held.version);
            let late = newer.is_some() || table.index_misses_settled(key, t, window.settled_ms);
            if late && !withdrawn {
                self.missed.insert(key.clone(), held.version.clone());
            }
        }
        let window = match confirm {
            Confirm::Real | Confirm::NoRecheck => window,
            Confirm::Never => return None,
            Confirm::Uncapped => LeaseWindow { settled_ms: window.to_ms, ..window },
        };
        let mut confirmed = self.view.confirm_leases(&ends, window, now);
        stats.leases_renewed_by_read += confirmed.renewed as u64;
        stats.leases_extended_by_absence += confirmed.extended as u64;
        let recheck = std::mem::take(&mut confirmed.recheck);
        for key in recheck.into_iter().filter(|_| confirm != Confirm::NoRecheck) {
            stats.leases_reread += 1;
            if let Some(record) = table.merged(&key, rules.merge) {
                self.ingest(record, now, rules, stats);
            }
        }
        let keys: Vec<Key> = self.merged.keys().cloned().collect();
        for key in &keys {
            let (Some(held), Some(merged)) = (self.view.record(key), self.merged.get_mut(key))
            else {
                continue;
            };
            let same_write = (&held.version, &held.owner, &held.body)
                == (&merged.version, &merged.owner, &merged.body);
            if same_write && held.lease_until_ms > merged.lease_until_ms {
                merged.lease_until_ms = held.lease_until_ms;
            }
        }
        self.sync(keys.iter(), now, stats);
        Some((window, ends.len(), confirmed))
    }

    /// Records what the poll at true time `t` promises (see `promised`):
    /// for each key the view holds, the winner of `table` as the poll could
    /// read it (the indexes for a delta poll, given with its lease ends
    /// window and what the read returned; the base table for a full read) and the latest lease end of its version. A delta
    /// poll promises a lease the view served at the poll's start (its end
    /// lies in the window, so the read either returns a later end or, by
    /// its absence, raises it past the next poll) or one whose stored end
    /// lies in the window (the read returns it).
    ///
    /// Unless `strict`, it promises nothing for a key whose latest end lies
    /// beyond the window while another item of the same version has an end
    /// inside it (a relay that failed over to another region with its
    /// version): that end masks the absence of the renewed one, and the
    /// view lets the lease lapse (a finding: `tests/known_issues.rs`).
    fn promise(
        &mut self,
        table: &Table,
        t: u64,
        read: Option<(LeaseWindow, &[LeaseEnd])>,
        strict: bool,
        stats: &mut Stats,
    ) {
        let now = self.now(t);
        self.promised.clear();
        for (key, held) in &self.merged {
            let Some((winner, Some(until))) = table.stored_lease(key, t, read.is_some()) else {
                continue;
            };
            if winner.version != held.version || held.is_tombstone() {
                continue;
            }
            if let Some((w, ends)) = read {
                if !held.is_live(now, self.skew_ms) && until > w.to_ms {
                    continue;
                }
                let masked = until > w.to_ms
                    && ends.iter().any(|e| e.key == *key && e.version == held.version);
                if masked {
                    stats.renewals_masked += 1;
                    if !strict {
                        continue;
                    }
                }
            }
            self.promised.insert(key.clone(), (winner.version, until));
        }
    }

    /// A full read of `table`, replacing the view's state; makes the process ready.
    pub fn full_read(&mut self, table: &Table, t: u64, rules: &Rules, stats: &mut Stats) {
        let now = self.now(t);
        let records = table.read_all();
        self.observe_all(&records, now);
        self.watermark_ms = now;
        let resync = self.view.replace_all(records.clone(), now, now);
        stats.records_dropped += resync.dropped as u64;
        stats.records_retired += resync.retired as u64;
        // The read's winner of each key, by the merge rule.
        let mut read: BTreeMap<Key, Record> = BTreeMap::new();
        for record in records {
            if read.get(&record.key).is_none_or(|best| (rules.merge)(&record, best)) {
                read.insert(record.key.clone(), record.clone());
            }
            raise(&mut self.known, &record.key, &record.version);
            if record.is_tombstone() {
                raise(&mut self.known_tombstone, &record.key, &record.version);
            }
            let replace =
                self.merged.get(&record.key).is_none_or(|held| (rules.merge)(&record, held));
            if replace {
                self.merged.insert(record.key.clone(), record);
            }
        }
        self.merged.retain(|k, r| read.contains_key(k) || r.changed_at_ms >= now);
        if rules.retire {
            for (key, best) in &read {
                if let Some(held) = self.merged.get_mut(key)
                    && held.version > best.version
                    && held.changed_at_ms < now
                {
                    *held = best.clone();
                }
            }
        }
        let keys: Vec<Key> = self.merged.keys().chain(read.keys()).cloned().collect();
        self.sync(keys.iter(), now, stats);
        let merged = &self.merged;
        self.missed.retain(|k, v| merged.get(k).is_some_and(|r| r.version == *v));
        self.promise(table, t, None, true, stats);
        self.ready = true;
    }

    /// Folds the generations read into the HLC. The watermark is not moved
    /// by what was read: a writer whose clock runs ahead must not push it
    /// past writes still to come (the reader's rule).
    fn observe_all(&mut self, records: &[Record], now: u64) {
        for record in records {
            self.hlc.observe(record.version.generation, now);
        }
    }

    /// Rebuilds the view from `merged` if it disagrees on any of `keys`.
    fn sync<'a>(&mut self, keys: impl Iterator<Item = &'a Key>, now: u64, stats: &mut Stats) {
        let mut differs = false;
        for key in keys {
            differs |= self.view.record(key) != self.merged.get(key);
        }
        if !differs {
            return;
        }
        stats.view_rebuilds += 1;
        let mut view = View::new(self.skew_ms);
        for record in self.merged.values() {
            view.apply(record.clone(), now);
        }
        self.view = view;
    }

    /// Writes `intent` at true time `t` into this region's item of `table`,
    /// through the registrar's own steps ([`mcs_core::write`]): plan against
    /// the merged winner, judge against it, then the conditional write of
    /// this region's item, retried as the registrar retries.
    /// The lease of a live record is the process's own (`intent`'s lease
    /// fields are set here).
    pub fn write(&mut self, intent: Intent, site: Site<'_>, stats: &mut Stats) -> Written {
        let Site { table, region, t, rules, .. } = site;
        let now = self.now(t);
        let leased = !matches!(intent.body, Body::Tombstone);
        let key = intent.key.clone();
        let planned = PlannedWrite::plan(
            Intent {
                terms: leased.then_some(LeaseTerms {
                    duration_ms: self.lease_ms,
                    heartbeat_ms: self.heartbeat_ms,
                }),
                lease_until_ms: leased.then(|| now + self.lease_ms),
                ..intent
            },
            self.merged.get(&key),
            None,
            self.ready,
            now,
            &self.writer_id,
            &mut self.hlc,
        );
        let mut planned = match planned {
            Ok(planned) => planned,
            Err(refusal) => return self.refused(refusal, &key, now, true, stats),
        };
        if planned.is_client_ordered() {
            stats.client_ordered_writes += 1;
        } else {
            stats.hlc_writes += 1;
        }
        loop {
            if let Err(refusal) = planned.judge(self.merged.get(&key), now, rules.write) {
                return self.refused(refusal, &key, now, true, stats);
            }
            let local = table.get(&key, region).map(|i| &i.record);
            let decision = (rules.write)(local, planned.record(), now);
            match decision {
                WriteDecision::Apply | WriteDecision::Renew => {
                    let record = planned.into_record();
                    let store = match (&decision, local) {
                        (WriteDecision::Renew, Some(stored)) => renewal_extends(stored, &record),
                        _ => true,
                    };
                    // A renewal keeps the stored changed_at; the view
                    // takes what storage holds, as the registrar does.
                    let image = table.image_of(region, &record);
                    if store && image.changed_at_ms != record.changed_at_ms {
                        stats.renewals_out_of_feed += 1;
                    }
                    stats.writes_acked += 1;
                    if decision == WriteDecision::Renew {
                        stats.renewals_acked += 1;
                    }
                    if record.is_tombstone() {
                        stats.tombstones_acked += 1;
                    }
                    if store {
                        self.ingest(image.clone(), now, rules, stats);
                    } else if !site.knobs.view_applies_stored_only {
                        self.ingest(record.clone(), now, rules, stats);
                    }
                    return Written {
                        stored: store.then_some(image),
                        acked: true,
                        reply: Reply::Ok(Box::new(record)),
                    };
                }
                WriteDecision::Stale { stored } => {
                    if let Err(refusal) = planned.stale(stored, now, &mut self.hlc) {
                        return self.refused(refusal, &key, now, false, stats);
                    }
                    stats.hlc_retries += 1;
                }
                WriteDecision::Owned { owner, until_ms } => {
                    let refusal = Refusal::Owned { owner, until_ms };
                    return self.refused(refusal, &key, now, false, stats);
                }
            }
        }
    }

    /// The answer to a refused write, counted.
    fn refused(
        &self,
        refusal: Refusal,
        key: &Key,
        now: u64,
        by_view: bool,
        stats: &mut Stats,
    ) -> Written {
        Written::answer(match refusal {
            Refusal::NotReady => {
                stats.unavailable += 1;
                Reply::Unavailable
            }
            Refusal::Stale { stored } => {
                stats.refused_stale += 1;
                count_refusal(stats, by_view);
                Reply::Stale(stored)
            }
            Refusal::Owned { owner, until_ms } => {
                stats.refused_owned += 1;
                count_refusal(stats, by_view);
                let fenced_by_view = self.merged.get(key).is_some_and(|held| {
                    held.owner.as_deref() == Some(owner.as_str()) && held.is_live(now, 0)
                });
                if !fenced_by_view {
                    stats.owned_by_stale_item += 1;
                }
                Reply::Owned { until_ms, now_ms: now }
            }
            // Simulated clients send no generation ahead of the clock, and
            // the simulated clock never runs out.
            Refusal::GenerationAhead { .. } | Refusal::Clock(_) => Reply::Unavailable,
        })
    }

    /// Withdraws `key` (a tombstone), as `Registrar::withdraw` does: unknown
    /// keys are `NotFound`; an already withdrawn key answers with its
    /// tombstone unless the client orders a newer withdrawal.
    pub fn withdraw(
        &mut self,
        key: Key,
        incarnation: Option<String>,
        generation: Option<u64>,
        site: Site<'_>,
        stats: &mut Stats,
    ) -> Written {
        let held =
            self.merged.get(&key).cloned().or_else(|| site.table.merged(&key, site.rules.merge));
        // The simulation has no exports: no cluster lease to check.
        let now = self.now(site.t);
        match plan_withdrawal(
            held.as_ref(),
            None,
            incarnation.as_deref(),
            generation,
            self.ready,
            now,
        ) {
            Ok(WithdrawalPlan::Write) => {}
            Ok(WithdrawalPlan::NotFound) => return Written::answer(Reply::NotFound),
            Ok(WithdrawalPlan::Withdrawn(record)) => {
                return Written::answer(Reply::Ok(record));
            }
            Err(refusal) => return self.refused(refusal, &key, self.now(site.t), true, stats),
        }
        self.write(Intent::new(key, Body::Tombstone, incarnation, generation), site, stats)
    }
}

fn count_refusal(stats: &mut Stats, by_view: bool) {
    if by_view {
        stats.refused_by_view += 1;
    } else {
        stats.refused_by_item += 1;
    }
}
