//! Storage and replication: a registrar's conditional write into its
//! region's item, the stream to the other replicas (delay, loss,
//! duplicates, partitions) and last-writer-wins on delivery.

use super::*;

impl World {
    pub(super) fn cut_between(&self, a: usize, b: usize) -> bool {
        self.cut.is_some_and(|m| (m >> a) & 1 != (m >> b) & 1)
    }

    // ---- storage and replication ----

    /// Stores an image in `region`'s own item and streams it to the others.
    pub(super) fn store(&mut self, region: usize, record: Record) -> Result<(), Violation> {
        self.commit += 1;
        let stored =
            self.stored_leases.entry((record.key.clone(), record.version.clone())).or_default();
        *stored = (*stored).max(record.lease_until_ms.unwrap_or(0));
        self.first_stored.entry((record.key.clone(), record.version.clone())).or_insert(self.t);
        let item = Item { record, commit: self.commit, stored_at: self.t };
        let lag = self.index_lag();
        let old = self.tables[region].put(region, item.clone(), self.t, lag);
        self.check_step(region, region, old.as_ref(), &item, "conditional write")?;
        if self.options.check_replicas {
            check::withdrawal_fence(old.as_ref().map(|i| &i.record), &item.record, region)?;
        }
        check::left_behind(self, region, &item.record.key)?;
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

    /// How long an image just stored takes to reach its replica's indexes:
    /// mostly a little, now and then up to the most the lookback allows.
    fn index_lag(&mut self) -> u64 {
        let max = self.params.max_index_lag_ms;
        if max == 0 {
            return 0;
        }
        let lag = if self.rng.per_mille(100) {
            self.rng.range(0, max)
        } else {
            self.rng.range(0, max / 10)
        };
        if lag > 0 {
            self.stats.index_lagged_images += 1;
        }
        lag
    }

    pub(super) fn deliver(&mut self, from: usize, to: usize, item: Item) -> Result<(), Violation> {
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

    pub(super) fn apply_delivery(
        &mut self,
        from: usize,
        to: usize,
        item: Item,
    ) -> Result<(), Violation> {
        if let Some(deletion) = self.tables[to].refused_by_delete(from, &item) {
            // Last-writer-wins by time: a TTL delete made after the origin
            // stored this image wins over it.
            self.stats.deliveries_refused_by_delete += 1;
            if self.erases(&item, deletion) {
                self.stats.ttl_deletes_erasing_newer += 1;
                self.note(|| {
                    format!(
                        "region {from}'s item is refused by region {to}'s later TTL delete: {}",
                        describe(&item.record)
                    )
                });
            }
            return Ok(());
        }
        let held = self.tables[to].get(&item.record.key, from);
        if held.is_some_and(|h| !(self.rules.replica)(&item, h)) {
            self.stats.deliveries_ignored += 1;
            return Ok(());
        }
        self.stats.deliveries += 1;
        let lag = self.index_lag();
        let old = self.tables[to].put(from, item.clone(), self.t, lag);
        if old.as_ref().is_none_or(|o| o.record.version != item.record.version) {
            self.note(|| {
                format!(
                    "region {from}'s item reaches region {to} (index lag {lag} ms): {}",
                    describe(&item.record)
                )
            });
        }
        self.check_step(to, from, old.as_ref(), &item, "replication")?;
        check::left_behind(self, to, &item.record.key)
    }

    /// docs/design.md §9: an older generation never replaces a newer one in a replica.
    pub(super) fn check_step(
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
}
