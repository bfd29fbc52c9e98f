//! The events of a schedule: registrar processes starting, polling and
//! crashing, partitions, and the relays' requests arriving at registrars
//! and their replies.

use super::*;

impl World {
    /// Starts a new process in `slot`: new clock offset, empty HLC and view,
    /// not ready until its first full read; keeps its writer id (as with
    /// `--writer-id`) or draws a new one.
    pub(super) fn start_process(&mut self, slot: usize) {
        let max = self.params.max_offset_ms;
        let offset = self.rng.range(0, 2 * max) as i64 - max as i64;
        let keep_id = !self.slots[slot].writer_id.is_empty() && self.rng.per_mille(300);
        let s = &mut self.slots[slot];
        s.epoch += 1;
        if !keep_id {
            s.writer_id = format!("reg-{}{}-{}", s.region, slot, s.epoch);
        }
        s.process =
            Some(Process::new(s.writer_id.clone(), s.epoch, offset, s.lease_ms, &self.params));
        let (writer, epoch) = (s.writer_id.clone(), s.epoch);
        self.note(|| {
            format!("registrar {slot} starts as {writer} (epoch {epoch}, offset {offset} ms)")
        });
    }

    pub(super) fn poll(&mut self, slot: usize, epoch: u32) {
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
            let (knobs, strict) = (&self.options.knobs, self.options.strict_renewals);
            let confirmed =
                process.delta_poll(table, self.t, &self.rules, knobs, strict, &mut self.stats);
            if let Some((w, ends, c)) = confirmed.filter(|(_, _, c)| c.renewed + c.extended > 0) {
                let ms = |at: u64| at.saturating_sub(EPOCH_MS);
                self.note(|| {
                    format!(
                        "registrar {slot} lease ends {}..={} (settled {}): {ends} ends, \
                         {} renewed, {} raised by absence",
                        ms(w.from_ms),
                        ms(w.to_ms),
                        ms(w.settled_ms),
                        c.renewed,
                        c.extended
                    )
                });
            }
            self.stats.delta_polls += 1;
        }
        let at = self.t + self.rng.range(500, self.params.refresh_ms);
        self.schedule(at, Event::Poll { slot, epoch });
    }

    pub(super) fn chaos(&mut self) {
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

    // ---- relays ----

    pub(super) fn relay_tick(&mut self, index: usize) {
        if self.t < self.relays_resume_at {
            // The TTL phase's pause: the relay holds its state and ticks
            // again once the pause is over.
            let at = self.relays_resume_at + self.rng.range(0, self.params.heartbeat_ms);
            self.schedule(at, Event::RelayTick(index));
            return;
        }
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

    pub(super) fn send(&mut self, index: usize, op: Op) {
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

    pub(super) fn arrive(&mut self, request: Request) -> Result<(), Violation> {
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
                        Intent::new(
                            request.key.clone(),
                            request.body.clone(),
                            request.incarnation.clone(),
                            request.generation,
                        ),
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

    pub(super) fn acknowledge(&mut self, request: &Request, record: &Record) {
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

    pub(super) fn relay_reply(&mut self, request: &Request, reply: Reply) {
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
}
