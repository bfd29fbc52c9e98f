//! The invariants, checked after every event (what a view serves) and at
//! quiescence (what every view converged to).
//!
//! What a view "could know": every image a registrar process has read
//! (delta poll, full read) or written is an acknowledged write, since only
//! an accepted conditional write stores an image. So the newest version it
//! has read of a key is the newest acknowledged write it knows of.
//!
//! The fair comparison at quiescence: the views did their full reads at
//! their own skewed clocks, so each is first advanced to one common instant
//! `T1` = quiescence + the largest clock offset, at or after every view's
//! own now. Liveness only decays with time, so after `advance(T1)` every
//! view serves exactly the records live at `T1` — a moment at which the
//! leases of relays heartbeating until quiescence are still live. Then all
//! are advanced to `T2`, past every lease, where only tombstones and expired
//! records remain and the winning records themselves are compared.
//!
//! At `T1` the winners' leases must be equal too: every view has just read
//! its whole replica, so it holds the stored lease of every winner. With
//! `strict_leases`, the views are also compared at every instant between
//! `T1` and `T2` (sections only change at lease deadlines, so after each
//! deadline): the guarantee that replicas holding the same items serve the
//! same fingerprint (docs/design.md §9), at every moment rather than at two.
//!
//! ## Leases while renewals are out of the change feed (issue 13)
//!
//! A renewal keeps the stored `changed_at`, so delta polls no longer carry
//! it: a view learns it from the `lease_ends` index after each delta poll
//! (`View::confirm_leases`), either as a later end of its version or, for a
//! lease stored beyond the window, as a raise to a lower bound
//! (`min(window end, settled + duration)`). So during the run two views
//! holding the same items hold different lease ends, each a lower bound
//! that depends on when it polled, and "views agree on leases" can only be
//! asked after a full read (at `T1`, and with `strict_leases` from `T1` on,
//! as before). What must hold at every instant instead, checked after every
//! event beside invariant 4:
//!
//! - [`Invariant::LeaseBound`], safety: no view holds a lease end later
//!   than the latest ever stored for that version of the key in any
//!   replica. With invariant 4 (a view serves exactly its live winners),
//!   a relay that stopped renewing is served by no view past its stored
//!   lease plus the skew allowance (replication lag only delays what is
//!   stored, never raises it). A raise without the `settled + duration`
//!   cap breaks it (`tests/broken_rules.rs`).
//! - [`Invariant::RenewalServed`], liveness: once a poll could read a lease
//!   of the version the view holds (its replica's winner, as the indexes
//!   showed it to a delta poll or the base table to a full read), the view
//!   serves the key until that lease ends by its own clock. A relay that
//!   heartbeats on time renews before its lease ends, so it is served
//!   without a gap by every live registry whose replica its renewals reach
//!   (a partitioned replica gets them late, and its views are promised
//!   only what reached it). A reader that never confirms breaks it
//!   (`tests/broken_rules.rs`). Before issue 13 nothing checked liveness
//!   during the run: the change feed carried every renewal.
//!
//! Each is let off in one case the design does not cover, counted, and
//! kept as a finding in `tests/known_issues.rs` (`strict_lease_bound` and
//! `strict_renewals` hold them there too): a replacement the delta polls
//! missed (later than the lookback) by a newer *live* version makes the
//! replaced version's lease be raised past anything stored (never a
//! withdrawal: a tombstone carries the withdrawn lease's end into the lease
//! ends read, issue 22, so a view that raises a withdrawn lease past what
//! was stored fails by default); and a relay that failed over with its
//! version leaves an item whose in-window end masks the renewals of the
//! new region's item beyond the window.

//!
//! ## TTL (issue 22)
//!
//! [`Invariant::LeftBehind`] is checked in the replicas, after every TTL
//! delete, write and delivery: what a full read of a replica serves is its
//! winner, so a live record a deleted tombstone superseded is caught where
//! it would be served again, whichever process reads it. The end-to-end
//! invariants no longer expect what TTL retired (a sweep deleted it as its
//! origin's latest image): a key whose newest acknowledged write, or
//! withdrawal, was retired may end with an older, dead record, or none.
//! Invariant 1 holds for every view: a full read replaces a held winner no
//! item holds any more by the older version it reads (`Rules::retire`;
//! without it, a view kept a retired record over a new incarnation's live
//! one of a lower version: 66 of 10,000 schedules).

use crate::params::EPOCH_MS;
use crate::registrar::Process;
use crate::relay::Relay;
use crate::world::{Acks, Ttl, World, describe};
use mcs_core::{Body, Key, Record, SectionKind, Version, View};
use std::collections::BTreeMap;
use std::fmt;

/// An invariant of the registry's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// 1. Replicas converge, and after quiescence every view has the same
    ///    fingerprint for every section and the same winner for every key.
    Converged,
    /// 2. No acknowledged write is lost: the final winner of a key is at
    ///    least as new as every acknowledged write of it.
    NoLostWrite,
    /// 3. No withdrawn record is resurrected: after an acknowledged
    ///    tombstone, the final winner is a tombstone or a newer version.
    NoResurrection,
    /// 4. No view serves a record older than an acknowledged write it has
    ///    read; the served pools are exactly the live winners; at
    ///    quiescence the winner is the newest acknowledged write.
    NoStaleServe,
    /// docs/design.md §9: an older generation never replaces a newer one in a
    ///    replica (checked on every write and every delivery).
    ReplicaMonotone,
    /// No view holds a lease end later than the latest ever stored, in any
    ///    replica, for that version of the key (checked after every event,
    ///    lapsed records included): a lease end a view raised from what the
    ///    lease ends read left out is a lower bound of what is stored. With
    ///    invariant 4 (a view serves exactly its live winners), a record
    ///    whose holder stopped renewing is served by no view past its stored
    ///    lease plus the skew allowance.
    LeaseBound,
    /// A renewal reaches every view whose replica holds it: once a poll
    ///    could read a lease of the version a view holds (its replica's
    ///    winner, as the indexes showed it to a delta poll or the table to a
    ///    full read), the view serves the key until that lease ends, by its
    ///    own clock (checked after every event). A delta poll promises this
    ///    for a lease the view served at the poll's start, or whose stored
    ///    end lies in the lease ends window (see `Process::promise`).
    RenewalServed,
    /// A withdrawal fences its incarnation in storage: a write of that
    ///    incarnation with a generation it did not choose never replaces
    ///    its tombstone in a region's item (checked on every write).
    WithdrawalFence,
    /// A delta poll misses nothing its lookback covers: after it, the view
    ///    holds every image the replica's indexes showed written (by its
    ///    writer's clock) after the poll's watermark less the lookback, or
    ///    a newer version of its key (checked after every delta poll). The
    ///    poll reads that lookback as change stamps and reads whole only
    ///    from the earliest write the view lacks (docs/design.md §6,
    ///    "Reaching back for late changes"); a poll that never reaches back
    ///    breaks it (`tests/broken_rules.rs`).
    DeltaComplete,
    /// docs/design.md §3, "Invariant (issue 22)": a live item is never
    ///    left behind by a tombstone that supersedes it, whatever TTL does.
    ///    Precisely: once a TTL delete (a sweep of the replica, or one
    ///    replicated to it) has taken from a region's replica a tombstone
    ///    `T` of a key, that replica's winner of the key is never a leased
    ///    record of a version below `T`'s and first stored before `T` (a
    ///    record `T` superseded) whose lease some reader could still serve
    ///    (its end plus the skew allowance and the largest clock offset
    ///    not yet past). Checked after every TTL delete, write and delivery
    ///    into the replica, so a renewal of a superseded version stored
    ///    after the delete is caught too. A later version, or one first
    ///    written after the tombstone (a new registration), is not
    ///    superseded by it.
    LeftBehind,
    /// The simulation itself panicked.
    Panicked,
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invariant::Converged => "1 (views and replicas converge)",
            Invariant::NoLostWrite => "2 (no acknowledged write lost)",
            Invariant::NoResurrection => "3 (no withdrawn record resurrected)",
            Invariant::NoStaleServe => {
                "4 (nothing served older than an acknowledged write it read)"
            }
            Invariant::ReplicaMonotone => {
                "replica monotone (no older generation replaces a newer one)"
            }
            Invariant::LeaseBound => {
                "lease bound (no view holds a lease end later than any stored of its version)"
            }
            Invariant::RenewalServed => {
                "renewal served (a view serves a key while a lease its last poll could read runs)"
            }
            Invariant::WithdrawalFence => {
                "withdrawal fence (no registrar-assigned write over its incarnation's tombstone)"
            }
            Invariant::DeltaComplete => {
                "delta complete (a delta poll holds every write its lookback covers)"
            }
            Invariant::LeftBehind => {
                "left behind (no live item a tombstone superseded wins once TTL took the tombstone)"
            }
            Invariant::Panicked => "the simulation panicked",
        })
    }
}

/// A broken invariant and what broke it.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Which invariant.
    pub invariant: Invariant,
    /// What was seen.
    pub detail: String,
}

/// [`Invariant::WithdrawalFence`] for a conditional write of `new` over
/// `old` in `region`'s own item.
pub(crate) fn withdrawal_fence(
    old: Option<&Record>,
    new: &Record,
    region: usize,
) -> Result<(), Violation> {
    let Some(old) = old else { return Ok(()) };
    let fenced = old.is_tombstone()
        && old.owner.is_some()
        && old.owner == new.owner
        && !new.is_tombstone()
        && !mcs_core::rules::is_client_ordered(new);
    if !fenced {
        return Ok(());
    }
    violation(
        Invariant::WithdrawalFence,
        format!(
            "region {region}'s item of {}: tombstone {} of incarnation {:?} replaced by {} \
             with a registrar-assigned generation",
            old.key,
            old.version,
            old.owner.as_deref().unwrap_or_default(),
            new.version
        ),
    )
}

fn violation(invariant: Invariant, detail: String) -> Result<(), Violation> {
    Err(Violation { invariant, detail })
}

/// [`Invariant::LeftBehind`] for `key` in `region`'s replica, at the
/// world's true time.
pub(crate) fn left_behind(world: &mut World, region: usize, key: &Key) -> Result<(), Violation> {
    let Some(taken) = world.ttl.taken[region].get(key) else { return Ok(()) };
    let Some(winner) = world.tables[region].merged(key, world.rules.merge) else {
        return Ok(());
    };
    let Some(until) = winner.lease_until_ms.filter(|_| !winner.is_tombstone()) else {
        return Ok(());
    };
    let id = (key.clone(), winner.version.clone());
    let first = world.first_stored.get(&id).copied().unwrap_or(world.t);
    let Some((tombstone, _)) = taken.iter().find(|(v, at)| winner.version < *v && first < *at)
    else {
        return Ok(());
    };
    let slack = world.params.skew_allowance_ms + world.params.max_offset_ms;
    if until.saturating_add(slack) <= world.t {
        world.stats.superseded_lapsed_after_ttl += 1;
        return Ok(());
    }
    violation(
        Invariant::LeftBehind,
        format!(
            "region {region}'s replica serves {} for {key}, which the tombstone {tombstone} \
             superseded, after TTL took that tombstone; its lease runs {} ms more",
            describe(&winner),
            (until + slack).saturating_sub(world.t),
        ),
    )
}

/// Invariant 4 on the ready views of `slots` (all when `None`), each at its
/// own clock.
pub(crate) fn serving(world: &mut World, slots: Option<usize>) -> Result<(), Violation> {
    let skew = world.params.skew_allowance_ms;
    for (slot, s) in world.slots.iter_mut().enumerate() {
        if slots.is_some_and(|only| only != slot) {
            continue;
        }
        let Some(process) = s.process.as_mut().filter(|p| p.ready) else {
            continue;
        };
        let now = process.now(world.t);
        process.view.advance(now);
        if let Some(missed) = &process.incomplete {
            return violation(
                Invariant::DeltaComplete,
                format!("registrar {slot}'s last delta poll missed {missed}"),
            );
        }
        check_served(process, &world.relays, &world.ttl, now, skew, slot)?;
        let strict = world.options.strict_lease_bound;
        world.stats.raised_after_missed_change +=
            lease_bound(process, &world.stored_leases, slot, strict)?;
        world.stats.renewals_served += renewal_served(process, &world.relays, now, slot)?;
    }
    Ok(())
}

/// [`Invariant::LeaseBound`] for the view of `slot`. Unless `strict`, a
/// key whose newer live version the view's delta polls missed (it reached
/// the replica's indexes later than the lookback allows; see
/// `Process::missed`, which never holds a key its replica withdrew) is let
/// off: its lease ends read returns no end of the
/// view's version, so the view raises that version's lease although no
/// item holds it any more (a finding: `tests/known_issues.rs`). Returns how
/// many were let off.
fn lease_bound(
    p: &Process,
    stored: &BTreeMap<(Key, Version), u64>,
    slot: usize,
    strict: bool,
) -> Result<u64, Violation> {
    let mut let_off = 0;
    for record in p.view.records() {
        let Some(until) = record.lease_until_ms.filter(|_| !record.is_tombstone()) else {
            continue;
        };
        let latest = stored.get(&(record.key.clone(), record.version.clone())).copied();
        if latest.is_some_and(|latest| until <= latest) {
            continue;
        }
        if !strict && p.missed.get(&record.key) == Some(&record.version) {
            let_off += 1;
            continue;
        }
        return violation(
            Invariant::LeaseBound,
            format!(
                "registrar {slot} holds {} for {} but the latest lease end stored for \
                 that version is {:?}",
                describe(record),
                record.key,
                latest.map(|l| l.saturating_sub(EPOCH_MS))
            ),
        )
        .map(|()| 0);
    }
    Ok(let_off)
}

/// [`Invariant::RenewalServed`] for the view of `slot` at its clock's
/// `now`; how many promises it checked.
fn renewal_served(p: &Process, relays: &[Relay], now: u64, slot: usize) -> Result<u64, Violation> {
    let mut kept = 0;
    for relay in relays {
        let Some((version, until)) = p.promised.get(&relay.key) else { continue };
        let held = p.merged.get(&relay.key);
        if held.is_none_or(|r| r.version != *version) || now >= *until {
            continue;
        }
        if p.view.pools().get(relay.pool_id()).is_none() {
            return Err(Violation {
                invariant: Invariant::RenewalServed,
                detail: format!(
                    "registrar {slot} does not serve {} at {} although its last poll could read \
                     {version} leased until {}; it holds {}",
                    relay.key,
                    now.saturating_sub(EPOCH_MS),
                    until.saturating_sub(EPOCH_MS),
                    held.map_or("none".into(), describe),
                ),
            });
        }
        kept += 1;
    }
    Ok(kept)
}

/// The served pools are exactly the live winners, and no served winner is
/// older than what the process has read.
fn check_served(
    p: &Process,
    relays: &[Relay],
    ttl: &Ttl,
    now: u64,
    skew: u64,
    slot: usize,
) -> Result<(), Violation> {
    for relay in relays {
        let served = p.view.pools().get(relay.pool_id());
        let winner = p.merged.get(&relay.key);
        let expected = winner.filter(|r| r.is_live(now, skew)).and_then(|r| match &r.body {
            Body::Pool(pool) => Some(pool),
            _ => None,
        });
        if served != expected {
            return violation(
                Invariant::NoStaleServe,
                format!(
                    "registrar {slot} serves {} for {} but its winner is {}",
                    if served.is_some() { "a pool" } else { "nothing" },
                    relay.key,
                    winner.map_or("none".into(), describe),
                ),
            );
        }
        let Some(winner) = winner.filter(|_| served.is_some()) else {
            continue;
        };
        // What TTL retired is no longer newer than a new registration
        // (`LeftBehind` holds what a retired tombstone superseded). A
        // withdrawal read also hides its own version.
        let read = [
            (p.known.get(&relay.key), false, "the acknowledged"),
            (p.known_tombstone.get(&relay.key), true, "its withdrawal at"),
        ];
        for (read, hides_its_own, what) in read {
            if let Some(read) = read
                && (winner.version < *read || hides_its_own && winner.version == *read)
                && !ttl.retired(&relay.key, read)
            {
                return violation(
                    Invariant::NoStaleServe,
                    format!(
                        "registrar {slot} serves {} at {} although it has read {what} {read}",
                        relay.key, winner.version
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Whether two winners are the same write: same version and content, and
/// with `strict_leases` the same lease. They may differ in `changed_at_ms`
/// (and, unless strict, in the lease): a registrar applies an acknowledged
/// renewal to its own view even when its conditional write did not store
/// it (a renewal that extends nothing), so its view can hold an image no
/// replica has. Counted in `view_only_images`.
fn same_winner(a: Option<&Record>, b: Option<&Record>, strict_leases: bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            (&a.version, &a.owner, &a.body) == (&b.version, &b.owner, &b.body)
                && (!strict_leases || a.lease_until_ms == b.lease_until_ms)
        }
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn same_sections(
    reference: &Fingerprints,
    first_slot: usize,
    view: &View,
    slot: usize,
    at: &str,
) -> Result<(), Violation> {
    for ((section, fingerprint), (_, theirs)) in reference.iter().zip(fingerprints(view)) {
        if *fingerprint != theirs {
            return violation(
                Invariant::Converged,
                format!(
                    "at {at}, section {section}: registrar {first_slot} serves {fingerprint}, \
                     registrar {slot} serves {theirs} (its pools: {:?})",
                    view.pools().values().map(|p| p.pool_key.dgd_name.as_str()).collect::<Vec<_>>()
                ),
            );
        }
    }
    Ok(())
}

/// Every section's name and fingerprint, in [`SectionKind::ALL`]'s order.
type Fingerprints = [(&'static str, String); SectionKind::ALL.len()];

fn fingerprints(view: &View) -> Fingerprints {
    SectionKind::ALL.map(|section| (section.name(), section.fingerprint(view)))
}

/// What every view is compared with at quiescence: the keys, the replicas'
/// winners, and the instants `T1` (leases live) and `T2` (past every lease;
/// see the module docs).
struct Quiescence {
    keys: Vec<Key>,
    expected: BTreeMap<Key, Record>,
    t1: u64,
    t2: u64,
}

impl Quiescence {
    fn of(world: &World) -> Self {
        let skew = world.params.skew_allowance_ms;
        let t1 = world.t + world.params.max_offset_ms;
        let keys: Vec<Key> = world.relays.iter().map(|r| r.key.clone()).collect();
        let expected = keys
            .iter()
            .filter_map(|k| world.tables[0].merged(k, world.rules.merge).map(|r| (k.clone(), r)))
            .collect();
        let t2 = world.tables[0]
            .items()
            .filter_map(|(_, item)| item.record.lease_until_ms)
            .map(|until| until + skew + 1)
            .max()
            .unwrap_or(t1)
            .max(t1);
        Self { keys, expected, t1, t2 }
    }
}

/// Invariants 1–4 once everything is delivered and every view has read
/// its whole replica (the replicas are already known to be equal). Each
/// invariant is one function below; the order of the checks is the order
/// of the violations reported.
pub(crate) fn at_quiescence(world: &mut World, strict_leases: bool) -> Result<(), Violation> {
    let skew = world.params.skew_allowance_ms;
    let q = Quiescence::of(world);
    let (acks, relays, stored_leases) = (&world.acks, &world.relays, &world.stored_leases);
    let ttl = &world.ttl;
    let strict_bound = world.options.strict_lease_bound;
    let mut processes: Vec<(usize, &mut Process)> = world
        .slots
        .iter_mut()
        .enumerate()
        .filter_map(|(i, s)| s.process.as_mut().map(|p| (i, p)))
        .collect();

    for (slot, p) in processes.iter_mut() {
        p.view.advance(q.t1);
        let ended = |key| Ended { slot: *slot, p, key, acks, ttl };
        for key in &q.keys {
            ended(key).no_lost_write()?;
            ended(key).no_resurrection()?;
        }
        check_served(p, relays, ttl, q.t1, skew, *slot)?;
        lease_bound(p, stored_leases, *slot, strict_bound)?;
        for key in &q.keys {
            ended(key).newest_acknowledged_wins()?;
        }
    }
    // Every view has just read the whole replica, so each holds the stored
    // lease of every winner: during the run a view holds lower bounds that
    // depend on when it polled, but a full read takes the stored ends.
    converged(&processes, &q, "T1 (leases live)", true, true, strict_bound)?;
    if strict_leases {
        same_sections_at_every_deadline(&mut processes, q.t1)?;
    }
    let view_only_images = processes
        .iter()
        .flat_map(|(_, p)| q.keys.iter().filter(|k| p.merged.get(*k) != q.expected.get(*k)))
        .count();
    let live_pools = processes.first().map_or(0, |(_, p)| p.view.pools().len());
    for (slot, p) in processes.iter_mut() {
        p.view.advance(q.t2);
        nothing_served_past_every_lease(*slot, p)?;
    }
    // Every view serves nothing at T2 (checked just above), so equal section
    // fingerprints there would prove nothing: T2 compares the winners, which
    // are now only tombstones and expired records.
    converged(&processes, &q, "T2 (past every lease)", strict_leases, false, strict_bound)?;

    let views = processes.len() as u64;
    world.stats.views_compared += views;
    world.stats.view_only_images += view_only_images as u64;
    world.stats.keys_compared += q.expected.len() as u64;
    world.stats.live_pools_compared += live_pools as u64;
    world.stats.final_tombstones += q.expected.values().filter(|r| r.is_tombstone()).count() as u64;
    Ok(())
}

/// One key of one view at quiescence, with what was acknowledged and what
/// TTL retired: invariants 2, 3 and 4 on it.
struct Ended<'a> {
    slot: usize,
    p: &'a Process,
    key: &'a Key,
    acks: &'a Acks,
    ttl: &'a Ttl,
}

impl Ended<'_> {
    /// Invariant 2: the view holds the key at least as new as its newest
    /// acknowledged write (not retired).
    fn no_lost_write(&self) -> Result<(), Violation> {
        let (slot, key) = (self.slot, self.key);
        let max = self.acks.max.get(key).filter(|max| !self.ttl.retired(key, max));
        let Some(max) = max else { return Ok(()) };
        match self.p.merged.get(key) {
            None => violation(
                Invariant::NoLostWrite,
                format!("registrar {slot} holds nothing for {key}; {max} was acknowledged"),
            ),
            Some(r) if r.version < *max => violation(
                Invariant::NoLostWrite,
                format!(
                    "registrar {slot} ends with {} for {key}; the acknowledged {max} is lost",
                    describe(r)
                ),
            ),
            Some(_) => Ok(()),
        }
    }

    /// Invariant 3: after an acknowledged withdrawal of the key, the view
    /// ends with a tombstone or a newer version, unless TTL retired the
    /// withdrawal (then `LeftBehind` holds what it superseded).
    fn no_resurrection(&self) -> Result<(), Violation> {
        let (slot, key) = (self.slot, self.key);
        if let (Some(tombstone), Some(r)) =
            (self.acks.max_tombstone.get(key), self.p.merged.get(key))
            && !r.is_tombstone()
            && r.version <= *tombstone
            && !self.ttl.retired(key, tombstone)
        {
            return violation(
                Invariant::NoResurrection,
                format!(
                    "registrar {slot} ends with {} for {key}, withdrawn at the acknowledged {tombstone}",
                    describe(r)
                ),
            );
        }
        Ok(())
    }

    /// Invariant 4: the view's winner of the key is exactly the newest
    /// acknowledged write (not retired).
    fn newest_acknowledged_wins(&self) -> Result<(), Violation> {
        let (slot, key) = (self.slot, self.key);
        let held = self.p.merged.get(key).map(|r| &r.version);
        let max = self.acks.max.get(key);
        if held == max || max.is_some_and(|max| self.ttl.retired(key, max)) {
            return Ok(());
        }
        violation(
            Invariant::NoStaleServe,
            format!(
                "registrar {slot} ends with {held:?} for {key} but the newest acknowledged write is {max:?}"
            ),
        )
    }
}

/// Invariant 4 past every lease: the view of `slot` serves no pool.
fn nothing_served_past_every_lease(slot: usize, p: &Process) -> Result<(), Violation> {
    if p.view.pools().is_empty() {
        return Ok(());
    }
    violation(
        Invariant::NoStaleServe,
        format!("registrar {slot} still serves {} pools past every lease", p.view.pools().len()),
    )
}

/// Invariant 1 at `at`: every view's winners are the replicas' (with
/// `leases`, lease included), and (with `sections`) every view serves the
/// first view's section fingerprints, its incremental pools fingerprint
/// equal to one computed from its items.
fn converged(
    processes: &[(usize, &mut Process)],
    q: &Quiescence,
    at: &str,
    leases: bool,
    sections: bool,
    strict_bound: bool,
) -> Result<(), Violation> {
    let first = processes.first();
    let reference = first.filter(|_| sections).map(|(slot, p)| (*slot, fingerprints(&p.view)));
    for (slot, p) in processes {
        for key in &q.keys {
            let held = p.merged.get(key);
            // A lease raised past a missed change is let off as by
            // `lease_bound` (a full read does not lower a lease end).
            let let_off = held.is_some_and(|r| p.missed.get(key) == Some(&r.version));
            let leases = leases && (strict_bound || !let_off);
            let same = same_winner(held, q.expected.get(key), leases);
            if !same || p.view.record(key) != held {
                return violation(
                    Invariant::Converged,
                    format!(
                        "at {at}, registrar {slot} holds {} for {key} (its view: {}); the replicas' winner is {}",
                        held.map_or("none".into(), describe),
                        p.view.record(key).map_or("none".into(), describe),
                        q.expected.get(key).map_or("none".into(), describe),
                    ),
                );
            }
        }
        let Some((first_slot, reference)) = reference.as_ref() else {
            continue;
        };
        same_sections(reference, *first_slot, &p.view, *slot, at)?;
        if p.view.pools().fingerprint() != p.view.pools().fingerprint_from_scratch() {
            return violation(
                Invariant::Converged,
                format!(
                    "at {at}, registrar {slot}'s incremental pools fingerprint differs from its items'"
                ),
            );
        }
    }
    Ok(())
}

/// Invariant 1 with `strict_leases`, between `T1` and `T2`: sections change
/// only at lease deadlines, so comparing them after each deadline compares
/// what every view serves at every instant.
fn same_sections_at_every_deadline(
    processes: &mut [(usize, &mut Process)],
    t1: u64,
) -> Result<(), Violation> {
    while let Some(next) = processes.iter().filter_map(|(_, p)| p.view.next_deadline()).min() {
        for (_, p) in processes.iter_mut() {
            p.view.advance(next);
        }
        if let Some((first_slot, first)) = processes.first() {
            let reference = fingerprints(&first.view);
            let at = format!("{} ms past T1", next - t1);
            for (slot, p) in processes.iter() {
                same_sections(&reference, *first_slot, &p.view, *slot, &at)?;
            }
        }
    }
    Ok(())
}
