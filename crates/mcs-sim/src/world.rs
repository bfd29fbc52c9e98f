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
//! After `steps` events the world quiesces: partitions heal, every change
//! in flight is delivered, every registrar (restarted if down) reads its
//! whole replica, and [`crate::check`] compares them.

use crate::check::{self, Invariant, Violation};
use crate::params::{EPOCH_MS, Knobs, Params};
use crate::registrar::{Intent, Process, Reply, Site};
use crate::relay::{Mode, Op, Phase, Relay};
use crate::rng::Rng;
use crate::rules::Rules;
use crate::stats::Stats;
use crate::table::{Item, Table};
use mcs_core::{Body, Key, Record, Version};
use std::collections::{BTreeMap, VecDeque};

/// Every how many events every view's served sections are checked.
const ALL_VIEWS_EVERY: u64 = 8;

/// How many lines of the schedule a traced run keeps.
const TRACE_LINES: usize = 60;

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
    /// Variations of the model.
    pub knobs: Knobs,
}

impl Default for Options {
    fn default() -> Self {
        Self { trace: false, check_replicas: true, strict_leases: false, knobs: Knobs::default() }
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
    Deliver { from: usize, to: usize, item: Box<Item> },
    Poll { slot: usize, epoch: u32 },
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
    options: Options,
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
        world
    }

    /// Runs `steps` events, then quiesces and checks.
    pub(crate) fn run(&mut self) -> Result<(), Violation> {
        for _ in 0..self.params.steps {
            let Some(((t, _), event)) = self.queue.pop_first() else {
                break;
            };
            self.t = t;
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
        }
        self.quiesce()
    }

    /// The trace kept so far, oldest first.
    pub(crate) fn trace(&self) -> Vec<String> {
        self.trace.iter().cloned().collect()
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if !self.options.trace {
            return;
        }
        if self.trace.len() == TRACE_LINES {
            self.trace.pop_front();
        }
        let elapsed = self.t - EPOCH_MS;
        self.trace.push_back(format!("{:>6}.{:03}s {}", elapsed / 1000, elapsed % 1000, line()));
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
        }
        Ok(())
    }

    /// Starts a new process in `slot`: new clock offset, empty HLC and view,
    /// not ready until its first full read; keeps its writer id (as with
    /// `--writer-id`) or draws a new one.
    fn start_process(&mut self, slot: usize) {
        let max = self.params.max_offset_ms;
        let offset = self.rng.range(0, 2 * max) as i64 - max as i64;
        let keep_id = !self.slots[slot].writer_id.is_empty() && self.rng.per_mille(300);
        let s = &mut self.slots[slot];
        s.epoch += 1;
        if !keep_id {
            s.writer_id = format!("reg-{}{}-{}", s.region, slot, s.epoch);
        }
        s.process = Some(Process::new(
            s.writer_id.clone(),
            s.epoch,
            offset,
            s.lease_ms,
            self.params.skew_allowance_ms,
        ));
        let (writer, epoch) = (s.writer_id.clone(), s.epoch);
        self.note(|| {
            format!("registrar {slot} starts as {writer} (epoch {epoch}, offset {offset} ms)")
        });
    }

    fn poll(&mut self, slot: usize, epoch: u32) {
        let full_chance = self.params.full_read_per_mille;
        let full = self.rng.per_mille(full_chance);
        let s = &mut self.slots[slot];
        let Some(process) = s.process.as_mut().filter(|p| p.epoch == epoch) else {
            return;
        };
        let table = &self.tables[s.region];
        if full || !process.ready {
            process.full_read(table, self.t, &self.rules, &mut self.stats);
            self.stats.full_reads += 1;
        } else {
            process.delta_poll(
                table,
                self.params.lookback_ms,
                self.t,
                &self.rules,
                &mut self.stats,
            );
            self.stats.delta_polls += 1;
        }
        let at = self.t + self.rng.range(500, 3_000);
        self.schedule(at, Event::Poll { slot, epoch });
    }

    fn chaos(&mut self) {
        let roll = self.rng.below(1000);
        if roll < 120 {
            let up: Vec<usize> =
                (0..self.slots.len()).filter(|&s| self.slots[s].process.is_some()).collect();
            if up.len() >= 2 {
                let slot = up[self.rng.index(up.len())];
                let s = &mut self.slots[slot];
                s.process = None;
                self.stats.registrar_crashes += 1;
                self.note(|| format!("registrar {slot} crashes"));
                let at = self.t + self.rng.range(1_000, 8_000);
                self.schedule(at, Event::Restart(slot));
            }
        } else if roll < 240 && self.cut.is_none() {
            let all = (1u64 << self.params.regions) - 1;
            let cut = self.rng.range(1, all - 1);
            self.cut = Some(cut);
            self.stats.partitions += 1;
            self.note(|| format!("partition: regions {cut:b} cut off"));
            let at = self.t + self.rng.range(2_000, 30_000);
            self.schedule(at, Event::Heal);
        }
        let at = self.t + self.rng.range(1_000, 5_000);
        self.schedule(at, Event::Chaos);
    }

    fn cut_between(&self, a: usize, b: usize) -> bool {
        self.cut.is_some_and(|m| (m >> a) & 1 != (m >> b) & 1)
    }

    // ---- relays ----

    fn relay_tick(&mut self, index: usize) {
        let slots = self.slots.len();
        let rng = &mut self.rng;
        let relay = &mut self.relays[index];
        if relay.pending.is_some() {
            return;
        }
        let op = match relay.phase {
            Phase::Down => {
                relay.incarnation_no += 1;
                relay.mode = match rng.below(100) {
                    0..40 => Mode::ClientOrdered,
                    40..85 => Mode::Hlc,
                    _ => Mode::Anonymous,
                };
                relay.generation = 1;
                relay.workers = rng.range(1, 8) as u32;
                relay.redo = None;
                relay.phase = Phase::Up;
                relay.home = rng.index(slots);
                self.stats.incarnations += 1;
                Op::Register
            }
            Phase::Withdrawn => match relay.redo.take() {
                Some(op) => op,
                None if rng.per_mille(400) => {
                    relay.generation += 1;
                    relay.phase = Phase::Up;
                    Op::Register
                }
                None => {
                    let at = self.t + rng.range(1_000, 6_000);
                    self.schedule(at, Event::RelayTick(index));
                    return;
                }
            },
            Phase::Up => match relay.redo.take() {
                Some(op) => op,
                None => match rng.below(1000) {
                    0..30 => {
                        relay.phase = Phase::Down;
                        self.stats.relay_crashes += 1;
                        let at = self.t + rng.range(500, 14_000);
                        self.note(|| format!("relay {index} crashes"));
                        self.schedule(at, Event::RelayTick(index));
                        return;
                    }
                    30..80 => {
                        relay.generation += 1;
                        Op::Withdraw
                    }
                    80..160 => {
                        relay.workers += 1;
                        relay.generation += 1;
                        Op::Register
                    }
                    160..230 => {
                        let next = rng.index(slots);
                        if next != relay.home {
                            if self.slots[next].region == self.slots[relay.home].region {
                                self.stats.failovers_in_region += 1;
                            } else {
                                self.stats.failovers_cross_region += 1;
                            }
                            relay.home = next;
                        }
                        Op::Register
                    }
                    _ => Op::Register,
                },
            },
        };
        self.send(index, op);
    }

    fn send(&mut self, index: usize, op: Op) {
        self.next_request += 1;
        let relay = &mut self.relays[index];
        relay.pending = Some(self.next_request);
        let request = Request {
            id: self.next_request,
            relay: index,
            incarnation_no: relay.incarnation_no,
            slot: relay.home,
            original: true,
            op,
            key: relay.key.clone(),
            body: match op {
                Op::Register => Body::Pool(relay.pool()),
                Op::Withdraw => Body::Tombstone,
            },
            incarnation: relay.incarnation(),
            generation: relay.client_generation(),
            sent_at: self.t,
        };
        if self.rng.per_mille(self.params.late_request_per_mille) {
            let mut late = request.clone();
            late.original = false;
            late.slot = self.rng.index(self.slots.len());
            self.stats.late_requests += 1;
            let at = self.t + self.rng.range(800, 6_000);
            self.schedule(at, Event::Arrive(Box::new(late)));
        }
        let at = self.t + self.rng.range(1, 150);
        self.schedule(at, Event::Arrive(Box::new(request)));
    }

    fn arrive(&mut self, request: Request) -> Result<(), Violation> {
        let slot = &mut self.slots[request.slot];
        let region = slot.region;
        // A process that has not finished its first full read is asked
        // too: it refuses (503) by the registrar's own rule.
        let reply = match slot.process.as_mut() {
            None => {
                self.stats.unavailable += 1;
                Reply::Unavailable
            }
            Some(process) => {
                let site = Site {
                    table: &self.tables[region],
                    region,
                    t: self.t,
                    rules: &self.rules,
                    knobs: self.options.knobs,
                };
                let written = match request.op {
                    Op::Register => process.write(
                        Intent {
                            key: request.key.clone(),
                            body: request.body.clone(),
                            incarnation: request.incarnation.clone(),
                            generation: request.generation,
                        },
                        site,
                        &mut self.stats,
                    ),
                    Op::Withdraw => process.withdraw(
                        request.key.clone(),
                        request.incarnation.clone(),
                        request.generation,
                        site,
                        &mut self.stats,
                    ),
                };
                if let (true, Reply::Ok(record)) = (written.acked, &written.reply) {
                    self.acknowledge(&request, record);
                }
                self.note(|| describe_request(&request, &written.reply));
                if let Some(stored) = written.stored {
                    self.store(region, stored)?;
                }
                if written.reply == Reply::NotFound {
                    let live_elsewhere = self.tables.iter().any(|t| {
                        t.merged(&request.key, self.rules.merge)
                            .is_some_and(|r| r.is_live(self.t, 0))
                    });
                    if live_elsewhere {
                        self.stats.withdraw_not_found_while_live += 1;
                    }
                }
                written.reply
            }
        };
        if reply == Reply::Unavailable {
            self.note(|| describe_request(&request, &reply));
        }
        if request.original {
            self.relay_reply(&request, reply);
        }
        Ok(())
    }

    fn acknowledge(&mut self, request: &Request, record: &Record) {
        let max = self.acks.max.entry(record.key.clone()).or_insert_with(|| record.version.clone());
        if record.version > *max {
            *max = record.version.clone();
        }
        if record.is_tombstone() {
            let max = self
                .acks
                .max_tombstone
                .entry(record.key.clone())
                .or_insert_with(|| record.version.clone());
            if record.version > *max {
                *max = record.version.clone();
            }
        }
        if !request.original && request.op == Op::Register {
            let relay = &self.relays[request.relay];
            if let Some((incarnation_no, acked_at, tombstone)) = &relay.withdrawn
                && *incarnation_no == request.incarnation_no
                && request.sent_at < *acked_at
                && record.version > *tombstone
            {
                self.stats.late_resurrections += 1;
            }
        }
    }

    fn relay_reply(&mut self, request: &Request, reply: Reply) {
        let heartbeat = self.params.heartbeat_ms;
        let slots = self.slots.len();
        let relay = &mut self.relays[request.relay];
        if relay.pending != Some(request.id) {
            return;
        }
        relay.pending = None;
        let delay = match reply {
            Reply::Ok(record) => match request.op {
                Op::Withdraw => {
                    relay.phase = Phase::Withdrawn;
                    relay.withdrawn = Some((relay.incarnation_no, self.t, record.version));
                    self.rng.range(1_000, 6_000)
                }
                Op::Register => self.rng.range(heartbeat - 600, heartbeat + 200),
            },
            Reply::Stale(stored) => {
                if relay.mode == Mode::ClientOrdered {
                    relay.generation = relay.generation.max(stored.generation) + 1;
                }
                relay.redo = Some(request.op);
                self.rng.range(50, 600)
            }
            Reply::Owned { until_ms, now_ms } => {
                relay.redo = Some(request.op);
                until_ms.saturating_sub(now_ms) + self.rng.range(100, 1_500)
            }
            Reply::NotFound => {
                relay.phase = Phase::Withdrawn;
                self.rng.range(1_000, 6_000)
            }
            Reply::Unavailable => {
                relay.home = self.rng.index(slots);
                relay.redo = Some(request.op);
                self.rng.range(50, 500)
            }
        };
        let at = self.t + delay;
        self.schedule(at, Event::RelayTick(request.relay));
    }

    // ---- storage and replication ----

    /// Stores an image in `region`'s own item and streams it to the others.
    fn store(&mut self, region: usize, record: Record) -> Result<(), Violation> {
        self.commit += 1;
        let item = Item { record, commit: self.commit };
        let old = self.tables[region].put(region, item.clone());
        self.check_step(region, region, old.as_ref(), &item, "conditional write")?;
        if self.options.check_replicas {
            check::withdrawal_fence(old.as_ref().map(|i| &i.record), &item.record, region)?;
        }
        for to in 0..self.params.regions {
            if to == region {
                continue;
            }
            let delay = if self.rng.per_mille(50) {
                self.rng.range(2_000, 8_000)
            } else {
                self.rng.range(20, 1_500)
            };
            let at = self.t + delay;
            self.schedule(at, Event::Deliver { from: region, to, item: Box::new(item.clone()) });
        }
        Ok(())
    }

    fn deliver(&mut self, from: usize, to: usize, item: Item) -> Result<(), Violation> {
        if self.cut_between(from, to) || self.rng.per_mille(self.params.loss_per_mille) {
            self.stats.redeliveries += 1;
            let at = self.t + self.rng.range(300, 4_000);
            self.schedule(at, Event::Deliver { from, to, item: Box::new(item) });
            return Ok(());
        }
        if self.rng.per_mille(self.params.duplicate_per_mille) {
            let at = self.t + self.rng.range(500, 5_000);
            self.schedule(at, Event::Deliver { from, to, item: Box::new(item.clone()) });
        }
        self.apply_delivery(from, to, item)
    }

    fn apply_delivery(&mut self, from: usize, to: usize, item: Item) -> Result<(), Violation> {
        let held = self.tables[to].get(&item.record.key, from);
        if held.is_some_and(|h| !(self.rules.replica)(&item, h)) {
            self.stats.deliveries_ignored += 1;
            return Ok(());
        }
        self.stats.deliveries += 1;
        let old = self.tables[to].put(from, item.clone());
        self.check_step(to, from, old.as_ref(), &item, "replication")
    }

    /// docs/design.md §9: an older generation never replaces a newer one in a replica.
    fn check_step(
        &self,
        region: usize,
        origin: usize,
        old: Option<&Item>,
        new: &Item,
        how: &str,
    ) -> Result<(), Violation> {
        let Some(old) = old.filter(|_| self.options.check_replicas) else {
            return Ok(());
        };
        if new.record.version >= old.record.version {
            return Ok(());
        }
        Err(Violation {
            invariant: Invariant::ReplicaMonotone,
            detail: format!(
                "{how} replaced {} ({}) by older {} ({}) in region {region}'s item of {} from origin {origin}",
                old.record.version,
                body_kind(&old.record),
                new.record.version,
                body_kind(&new.record),
                old.record.key,
            ),
        })
    }

    // ---- quiescence ----

    fn quiesce(&mut self) -> Result<(), Violation> {
        self.note(|| "quiesce: heal, deliver everything, full reads".into());
        self.cut = None;
        let queue = std::mem::take(&mut self.queue);
        for (_, event) in queue {
            if let Event::Deliver { from, to, item } = event {
                self.apply_delivery(from, to, *item)?;
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

fn body_kind(record: &Record) -> &'static str {
    match record.body {
        Body::Tombstone => "tombstone",
        Body::Pool(_) => "pool",
        _ => "other",
    }
}

/// A record in one line.
pub(crate) fn describe(record: &Record) -> String {
    format!(
        "{} {} owner {:?} lease_until {:?} changed_at {}",
        body_kind(record),
        record.version,
        record.owner,
        record.lease_until_ms.map(|l| l.saturating_sub(EPOCH_MS)),
        record.changed_at_ms.saturating_sub(EPOCH_MS),
    )
}

fn describe_request(request: &Request, reply: &Reply) -> String {
    format!(
        "{} {:?} of relay {} inc {} {:?} gen {:?} at registrar {}: {}",
        if request.original { "request" } else { "LATE copy" },
        request.op,
        request.relay,
        request.incarnation_no,
        request.incarnation,
        request.generation,
        request.slot,
        describe_reply(reply),
    )
}

fn describe_reply(reply: &Reply) -> String {
    match reply {
        Reply::Ok(record) => format!("ok {}", describe(record)),
        Reply::Stale(stored) => format!("stale, stored {stored}"),
        Reply::Owned { until_ms, now_ms } => {
            format!("owned for {} ms more", until_ms.saturating_sub(*now_ms))
        }
        Reply::NotFound => "not found".into(),
        Reply::Unavailable => "unavailable".into(),
    }
}

fn describe_table_difference(a: &Table, b: &Table, region: usize) -> String {
    let mut lines = Vec::new();
    let left: BTreeMap<_, _> = a.items().collect();
    let right: BTreeMap<_, _> = b.items().collect();
    for (id, item) in &left {
        if right.get(id) != Some(item) {
            lines.push(format!(
                "  item ({}, origin {}): region 0 {} / region {region} {}",
                id.0,
                id.1,
                describe(&item.record),
                right.get(id).map_or("none".into(), |i| describe(&i.record))
            ));
        }
    }
    for (id, item) in &right {
        if !left.contains_key(id) {
            lines.push(format!(
                "  item ({}, origin {}): only region {region}: {}",
                id.0,
                id.1,
                describe(&item.record)
            ));
        }
    }
    lines.join("\n")
}
