//! One schedule: regions with their replicas, registrar processes, relays,
//! and the replication stream between replicas, driven by a seeded event
//! queue in simulated true time.
//!
//! ```text
//!  relay ── request (delay, late copies) ──► registrar ── write ──► its region's item
//!                                               ▲                        │ stream
//!                                   poll (delta/full)                    ▼ (delay, reorder,
//!                                               │                        │  loss, partitions)
//!                                            replica ◄── last-writer-wins per item
//! ```
//!
//! With TTL on ([`Options::ttl`]), each replica's TTL sweep deletes the
//! items whose `ttl` has passed there, and the delete replicates through
//! the same stream (`ttl`). Sweeps and replicated deletes draw from their
//! own generator and are not counted among the `steps`, so a schedule does
//! what it did without TTL until a sweep first deletes something. After
//! the `steps` events comes the TTL phase: the relays pause for longer than
//! the retention (every record written before lapses, and TTL deletes it),
//! then resume with what they held (a heartbeat, a registration again, a
//! new incarnation) while the registrars keep polling and chaos goes on.
//!
//! After that the world quiesces: partitions heal, every change
//! in flight is delivered, every registrar (restarted if down) reads its
//! whole replica, and [`crate::check`] compares them.
//!
//! This file holds the state and the event loop; `events` the registrars'
//! and relays' events, `replication` the writes and the stream between
//! replicas, `ttl` the sweeps and their deletes, `trace` the trace and the
//! one-line descriptions.

use crate::check::{self, Invariant, Violation};
use crate::params::{EPOCH_MS, Knobs, Params};
use crate::registrar::{Process, Reply, Site};
use crate::relay::{Mode, Op, Phase, Relay};
use crate::rng::Rng;
use crate::rules::Rules;
use crate::stats::Stats;
use crate::table::{Deletion, Item, Table};
use mcs_core::write::Intent;
use mcs_core::{Body, Key, Record, Version};
use std::collections::{BTreeMap, VecDeque};

mod events;
mod replication;
mod trace;
mod ttl;

pub(crate) use ttl::Ttl;

pub(crate) use trace::describe;
use trace::{body_kind, describe_request, describe_table_difference};

/// Every how many events every view's served sections are checked.
const ALL_VIEWS_EVERY: u64 = 8;

/// How many lines of the schedule a traced run keeps.
const TRACE_LINES: usize = 60;

/// How long the relays run again after the TTL phase's pause, before the
/// world quiesces: a few heartbeats.
const RESUMED_MS: u64 = 20_000;

/// Mixed into the seed for the generator of TTL sweeps and their deletes.
const TTL_STREAM: u64 = 0x5454_4c5f_5357_4545;

/// Settings shared by every schedule of a run.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Keep a trace of the schedule (a failing seed is replayed with it).
    pub trace: bool,
    /// Check during the run that no replica's item goes back to an older
    /// generation (docs/design.md §9), besides the four end-to-end invariants.
    pub check_replicas: bool,
    /// Also require the views to agree on every winner's lease, and to
    /// serve the same sections at every instant from T1 until every lease
    /// has ended (not only at T1 and T2).
    pub strict_leases: bool,
    /// Hold invariant `LeaseBound` also for a view whose delta polls missed
    /// a newer live version of the key (replication later than the
    /// lookback): off by default, since the design does not hold it there
    /// (see `tests/known_issues.rs`). A withdrawal is never let off.
    pub strict_lease_bound: bool,
    /// Hold invariant `RenewalServed` also where another item of the
    /// view's version masks a renewal beyond the lease ends window (a relay
    /// that failed over with its version): off by default, since the
    /// design does not hold it there (see `tests/known_issues.rs`).
    pub strict_renewals: bool,
    /// Model DynamoDB's TTL: sweeps that delete expired items in each
    /// replica, deletes replicated by last-writer-wins on time, and the TTL
    /// phase after the `steps` events (see the module docs). Off, a
    /// schedule is what it was before TTL was modelled.
    pub ttl: bool,
    /// Let a TTL sweep delete an expired image whose origin has written a
    /// newer one that has not reached the sweeping replica yet: the delete,
    /// replicated and settled by last-writer-wins on its time, erases the
    /// newer write in every replica. Off by default, counting such images
    /// in `ttl_deletes_of_stale_images` instead (`tests/known_issues.rs`).
    pub strict_ttl_sweeps: bool,
    /// Variations of the model.
    pub knobs: Knobs,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            trace: false,
            check_replicas: true,
            strict_leases: false,
            strict_lease_bound: false,
            strict_renewals: false,
            ttl: true,
            strict_ttl_sweeps: false,
            knobs: Knobs::default(),
        }
    }
}

/// A request on its way to a registrar.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    id: u64,
    relay: usize,
    incarnation_no: u32,
    slot: usize,
    /// False for a late copy (a client retry whose answer nobody awaits).
    original: bool,
    op: Op,
    key: Key,
    body: Body,
    incarnation: Option<String>,
    generation: Option<u64>,
    sent_at: u64,
}

#[derive(Debug)]
enum Event {
    RelayTick(usize),
    Arrive(Box<Request>),
    Deliver {
        from: usize,
        to: usize,
        item: Box<Item>,
    },
    /// A TTL sweep of a region's replica.
    Sweep(usize),
    /// A delete made by `from`'s sweep, replicated to `to`.
    DeliverDelete {
        from: usize,
        to: usize,
        key: Box<Key>,
        origin: usize,
        deletion: Deletion,
    },
    Poll {
        slot: usize,
        epoch: u32,
    },
    Chaos,
    Restart(usize),
    Heal,
}

/// A registrar slot: where one process after another runs.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) region: usize,
    lease_ms: u64,
    epoch: u32,
    writer_id: String,
    pub(crate) process: Option<Process>,
}

/// What was acknowledged, per key.
#[derive(Debug, Default)]
pub(crate) struct Acks {
    /// The highest acknowledged version of every key.
    pub(crate) max: BTreeMap<Key, Version>,
    /// The highest acknowledged tombstone of every key.
    pub(crate) max_tombstone: BTreeMap<Key, Version>,
}

/// The state of one schedule.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) params: Params,
    pub(crate) rules: Rules,
    pub(crate) options: Options,
    rng: Rng,
    pub(crate) t: u64,
    queue: BTreeMap<(u64, u64), Event>,
    seq: u64,
    commit: u64,
    next_request: u64,
    pub(crate) tables: Vec<Table>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) relays: Vec<Relay>,
    /// A bit per region: the regions cut off from the others, if any.
    cut: Option<u64>,
    pub(crate) acks: Acks,
    /// The latest lease end ever stored for each version of each key, in
    /// any replica: no view may hold a later one.
    pub(crate) stored_leases: BTreeMap<(Key, Version), u64>,
    /// When each version of each key was first stored (true time): a
    /// tombstone supersedes, for invariant `LeftBehind`, the older versions
    /// first stored before it.
    pub(crate) first_stored: BTreeMap<(Key, Version), u64>,
    /// TTL: the generator of sweeps and replicated deletes, what the
    /// sweeps retired and which tombstones they took from each replica.
    pub(crate) ttl: Ttl,
    /// The relays' next ticks wait until then (the TTL phase's pause).
    relays_resume_at: u64,
    pub(crate) stats: Stats,
    trace: VecDeque<String>,
}

impl World {
    /// The world of `seed` at true time [`EPOCH_MS`]: every registrar
    /// started (ready after its first full read), every relay down.
    pub(crate) fn new(seed: u64, rules: Rules, options: Options) -> Self {
        let mut rng = Rng::new(seed);
        let params = Params::draw(&mut rng, options.knobs);
        let mut world = Self {
            tables: vec![Table::default(); params.regions],
            ttl: Ttl::new(seed ^ TTL_STREAM, params.regions),
            slots: Vec::new(),
            relays: Vec::new(),
            params,
            rules,
            options,
            rng,
            t: EPOCH_MS,
            queue: BTreeMap::new(),
            seq: 0,
            commit: 0,
            next_request: 0,
            cut: None,
            acks: Acks::default(),
            stored_leases: BTreeMap::new(),
            first_stored: BTreeMap::new(),
            relays_resume_at: 0,
            stats: Stats { schedules: 1, ..Stats::default() },
            trace: VecDeque::new(),
        };
        for (slot, &region) in world.params.registrar_regions.clone().iter().enumerate() {
            world.slots.push(Slot {
                region,
                lease_ms: world.params.lease_ms[slot],
                epoch: 0,
                writer_id: String::new(),
                process: None,
            });
            world.start_process(slot);
            let (at, epoch) = (world.t + world.rng.range(0, 2_000), world.slots[slot].epoch);
            world.schedule(at, Event::Poll { slot, epoch });
        }
        for index in 0..world.params.pools {
            let home = world.rng.index(world.slots.len());
            world.relays.push(Relay::new(index, home));
            let at = world.t + world.rng.range(0, 2_000);
            world.schedule(at, Event::RelayTick(index));
        }
        let at = world.t + world.rng.range(1_000, 5_000);
        world.schedule(at, Event::Chaos);
        if options.ttl {
            for region in 0..world.params.regions {
                world.schedule_sweep(region);
            }
        }
        world
    }

    /// Runs `steps` events (and the TTL phase), then quiesces and checks.
    pub(crate) fn run(&mut self) -> Result<(), Violation> {
        let mut steps = 0;
        while steps < self.params.steps && self.step(None)? {
            steps += 1;
        }
        if self.options.ttl {
            let pause = self.params.retention_ms
                + self.params.lease_ms.iter().max().copied().unwrap_or_default()
                + 2 * self.params.skew_allowance_ms
                + crate::params::SWEEP_EVERY_MS;
            self.relays_resume_at = self.t + pause;
            let end = self.relays_resume_at + RESUMED_MS;
            self.note(|| format!("TTL phase: relays pause for {pause} ms"));
            while self.step(Some(end))? {}
        }
        self.quiesce()
    }

    /// Handles the next event (TTL events included, without counting
    /// them) and checks what must hold after it; false when there is none
    /// left (before `until`, if given).
    fn step(&mut self, until: Option<u64>) -> Result<bool, Violation> {
        loop {
            let Some(entry) = self.queue.first_entry() else { return Ok(false) };
            if until.is_some_and(|until| entry.key().0 >= until) {
                return Ok(false);
            }
            let ((t, _), event) = entry.remove_entry();
            self.t = t;
            if self.handle_ttl(event)? {
                return Ok(true);
            }
        }
    }

    /// Handles a TTL event and returns false, or any other event and
    /// returns true.
    fn handle_ttl(&mut self, event: Event) -> Result<bool, Violation> {
        match event {
            Event::Sweep(region) => self.sweep(region)?,
            Event::DeliverDelete { from, to, key, origin, deletion } => {
                self.deliver_delete(from, to, *key, origin, deletion)?
            }
            event => {
                self.counted(event)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Handles an event of the schedule (counted in `events`) and checks
    /// what the views serve.
    fn counted(&mut self, event: Event) -> Result<(), Violation> {
        self.stats.events += 1;
        // A view changes when it reads or writes; in between, only
        // expiry changes what it serves. So the view an event touched
        // is checked at once, and every view now and then.
        let touched = match &event {
            Event::Poll { slot, .. } => Some(*slot),
            Event::Arrive(request) => Some(request.slot),
            _ => None,
        };
        self.handle(event)?;
        if self.stats.events.is_multiple_of(ALL_VIEWS_EVERY) {
            check::serving(self, None)?;
        } else if touched.is_some() {
            check::serving(self, touched)?;
        }
        Ok(())
    }

    fn schedule(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.insert((at, self.seq), event);
    }

    fn handle(&mut self, event: Event) -> Result<(), Violation> {
        match event {
            Event::RelayTick(relay) => self.relay_tick(relay),
            Event::Arrive(request) => self.arrive(*request)?,
            Event::Deliver { from, to, item } => self.deliver(from, to, *item)?,
            Event::Poll { slot, epoch } => self.poll(slot, epoch),
            Event::Chaos => self.chaos(),
            Event::Restart(slot) => {
                self.start_process(slot);
                let epoch = self.slots[slot].epoch;
                let at = self.t + self.rng.range(0, 1_500);
                self.schedule(at, Event::Poll { slot, epoch });
            }
            Event::Heal => {
                self.cut = None;
                self.note(|| "partition healed".into());
            }
            Event::Sweep(_) | Event::DeliverDelete { .. } => {
                unreachable!("TTL events are handled by handle_ttl")
            }
        }
        Ok(())
    }

    // ---- quiescence ----

    fn quiesce(&mut self) -> Result<(), Violation> {
        self.note(|| "quiesce: heal, deliver everything, full reads".into());
        self.cut = None;
        let queue = std::mem::take(&mut self.queue);
        for (_, event) in queue {
            match event {
                Event::Deliver { from, to, item } => self.apply_delivery(from, to, *item)?,
                Event::DeliverDelete { from, to, key, origin, deletion } => {
                    self.apply_delete(from, to, &key, origin, deletion)?
                }
                _ => {}
            }
        }
        for region in 1..self.params.regions {
            if self.tables[region] != self.tables[0] {
                return Err(Violation {
                    invariant: Invariant::Converged,
                    detail: format!(
                        "replicas differ after every change was delivered:\n{}",
                        describe_table_difference(&self.tables[0], &self.tables[region], region)
                    ),
                });
            }
        }
        for slot in 0..self.slots.len() {
            if self.slots[slot].process.is_none() {
                self.start_process(slot);
            }
            let s = &mut self.slots[slot];
            if let Some(process) = s.process.as_mut() {
                process.full_read(&self.tables[s.region], self.t, &self.rules, &mut self.stats);
                self.stats.full_reads += 1;
            }
        }
        check::at_quiescence(self, self.options.strict_leases)
    }
}
