//! DynamoDB's TTL (docs/design.md §3): each replica's sweep deletes the
//! items whose stored `ttl` ([`crate::Rules::ttl`]) has passed in that
//! replica, checking each item's current image; the delete replicates to
//! the other replicas through the same stream (delay, loss, partitions)
//! and is settled there by last-writer-wins on the time of the delete
//! ([`Table::apply_delete`]).
//!
//! Sweeps and replicated deletes draw from their own generator, so that a
//! schedule's other draws stay what they were until TTL deletes something.

use super::*;
use crate::params::SWEEP_EVERY_MS;
use crate::table::DeleteOutcome;

/// The TTL state of a schedule.
#[derive(Debug)]
pub(crate) struct Ttl {
    rng: Rng,
    /// The highest version of every key a sweep deleted while it was its
    /// origin's latest image: acknowledged writes that TTL retired, which
    /// the end-to-end invariants no longer expect to find.
    pub(crate) retired: BTreeMap<Key, Version>,
    /// Per region: the tombstones TTL deletes (sweeps, or deletes
    /// replicated there) took from that replica, per key, with the true
    /// time each was first stored (invariant `LeftBehind`).
    pub(crate) taken: Vec<BTreeMap<Key, Vec<(Version, u64)>>>,
}

impl Ttl {
    pub(super) fn new(seed: u64, regions: usize) -> Self {
        Self {
            rng: Rng::new(seed),
            retired: BTreeMap::new(),
            taken: vec![BTreeMap::new(); regions],
        }
    }

    /// Whether TTL retired `version` of `key` (or a newer one).
    pub(crate) fn retired(&self, key: &Key, version: &Version) -> bool {
        self.retired.get(key).is_some_and(|retired| version <= retired)
    }
}

impl World {
    pub(super) fn schedule_sweep(&mut self, region: usize) {
        let at = self.t + self.ttl.rng.range(1_000, SWEEP_EVERY_MS);
        self.schedule(at, Event::Sweep(region));
    }

    /// A sweep of `region`'s replica: deletes every item whose `ttl` has
    /// passed, and streams each delete to the other replicas.
    pub(super) fn sweep(&mut self, region: usize) -> Result<(), Violation> {
        self.stats.ttl_sweeps += 1;
        let (rule, retention) = (self.rules.ttl, self.params.retention_ms);
        let expired = self.tables[region].expired(self.t, |r| rule(r, retention));
        for (key, origin) in expired {
            let Some(commit) = self.tables[region].get(&key, origin).map(|i| i.commit) else {
                continue;
            };
            let latest = self.tables[origin].get(&key, origin).is_none_or(|i| i.commit <= commit);
            if !latest {
                // The origin wrote a newer image after the `ttl` passed;
                // deleting this one would erase it (a finding).
                self.stats.ttl_deletes_of_stale_images += 1;
                if !self.options.strict_ttl_sweeps {
                    continue;
                }
            }
            let Some(item) = self.tables[region].delete(&key, origin, self.t) else { continue };
            self.stats.ttl_deletes += 1;
            if latest {
                let version = &item.record.version;
                let retired =
                    self.ttl.retired.entry(key.clone()).or_insert_with(|| version.clone());
                if version > retired {
                    *retired = version.clone();
                }
            }
            self.note(|| {
                format!(
                    "TTL deletes region {origin}'s item in region {region}: {}",
                    describe(&item.record)
                )
            });
            let deletion = Deletion { at: self.t, commit: item.commit };
            for to in (0..self.params.regions).filter(|&to| to != region) {
                let delay = self.ttl.rng.range(20, 1_500);
                let key = Box::new(key.clone());
                let event = Event::DeliverDelete { from: region, to, key, origin, deletion };
                self.schedule(self.t + delay, event);
            }
            self.took(region, &item.record)?;
        }
        self.schedule_sweep(region);
        Ok(())
    }

    /// A replicated delete reaching `to`, or lost (cut off) and retried.
    pub(super) fn deliver_delete(
        &mut self,
        from: usize,
        to: usize,
        key: Key,
        origin: usize,
        deletion: Deletion,
    ) -> Result<(), Violation> {
        if self.cut_between(from, to) || self.ttl.rng.per_mille(self.params.loss_per_mille) {
            let at = self.t + self.ttl.rng.range(300, 4_000);
            let key = Box::new(key);
            self.schedule(at, Event::DeliverDelete { from, to, key, origin, deletion });
            return Ok(());
        }
        self.apply_delete(from, to, &key, origin, deletion)
    }

    /// Settles a delete made in `from` against `to`'s item.
    pub(super) fn apply_delete(
        &mut self,
        from: usize,
        to: usize,
        key: &Key,
        origin: usize,
        deletion: Deletion,
    ) -> Result<(), Violation> {
        match self.tables[to].apply_delete(key, origin, deletion) {
            DeleteOutcome::Kept => self.stats.ttl_deletes_outlived += 1,
            DeleteOutcome::Absent => {}
            DeleteOutcome::Deleted(item) => {
                self.stats.ttl_deletes_replicated += 1;
                let erases = self.erases(&item, deletion);
                self.stats.ttl_deletes_erasing_newer += u64::from(erases);
                self.note(|| {
                    format!(
                        "region {from}'s TTL delete of region {origin}'s item reaches region {to}: \
                         {}{}",
                        if erases { "ERASES newer " } else { "" },
                        describe(&item.record)
                    )
                });
                self.took(to, &item.record)?;
            }
        }
        Ok(())
    }

    /// Whether `deletion`, made on an older image of `item`'s item, erases
    /// `item`: a newer image whose `ttl` had not passed when the delete was
    /// made.
    pub(super) fn erases(&self, item: &Item, deletion: Deletion) -> bool {
        let ttl = (self.rules.ttl)(&item.record, self.params.retention_ms);
        item.commit > deletion.commit && ttl.is_none_or(|ttl| ttl > deletion.at)
    }

    /// After a TTL delete took `record` from `region`'s replica: remembers
    /// a tombstone, and checks invariant `LeftBehind` on its key.
    fn took(&mut self, region: usize, record: &Record) -> Result<(), Violation> {
        if record.is_tombstone() {
            self.stats.ttl_tombstones_deleted += 1;
            let id = (record.key.clone(), record.version.clone());
            let first = self.first_stored.get(&id).copied().unwrap_or(self.t);
            let taken = self.ttl.taken[region].entry(record.key.clone()).or_default();
            taken.push((record.version.clone(), first));
        }
        check::left_behind(self, region, &record.key)
    }
}
