//! The view as the HTTP layer sees it: the merged [`View`] behind a lock,
//! completeness, a change signal for long-polls, rendered list bodies
//! cached per section until its content or completeness changes. The
//! sections' event journals (`crate::events`) read it from the floor above.
//!
//! ```text
//!  Registrar ─apply─┐          ┌─► render(section) ─► GET lists (cached bytes)
//!  Reader ─replace/─┼─► View ──┤
//!         apply/    │          └─► changes (watch) ─► long-polls wake
//!         advance ──┘
//! ```

use crate::clock::Clock;
use crate::metrics as m;
use bytes::Bytes;
use mcs_core::section::ListBody;
use mcs_core::view::{Confirmed, DeltaStart, LeaseWindow, Resync};
use mcs_core::{
    ChangeStamp, ExpiryGuard, HoldPolicy, LeaseCounts, LeaseEnd, Record, SectionKind, Verdict, View,
};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::watch;

/// A list body ready to send, with its fingerprint.
#[derive(Debug)]
pub struct Rendered {
    /// The section's fingerprint, as the body carries it (regions compare it).
    pub fingerprint: String,
    /// The entity tag, unquoted: the fingerprint, suffixed `-incomplete`
    /// when the body says `complete: false`, so a validator taken from a
    /// complete list does not match an incomplete one (and back).
    pub etag: String,
    /// `{"<section>": [...], "complete": ..., "fingerprint": ...}`.
    pub body: Bytes,
    /// `body` gzip-compressed, on first demand: once per change of the
    /// list, whoever asks.
    gzip: OnceLock<Bytes>,
}

impl Rendered {
    /// `body` to send, with its entity tag for `complete`.
    fn new(body: ListBody, complete: bool) -> Self {
        let ListBody { fingerprint, body } = body;
        let etag = if complete { fingerprint.clone() } else { format!("{fingerprint}-incomplete") };
        Rendered { fingerprint, etag, body: Bytes::from(body), gzip: OnceLock::new() }
    }

    /// `body` gzip-compressed (computed once, then shared).
    pub fn gzip(&self) -> &Bytes {
        self.gzip.get_or_init(|| {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(self.body.len() / 4 + 64),
                flate2::Compression::default(),
            );
            // Writing to a Vec cannot fail.
            let _ = std::io::Write::write_all(&mut encoder, &self.body);
            Bytes::from(encoder.finish().unwrap_or_default())
        })
    }
}

/// A rendered body and the section version and completeness it was
/// rendered for.
type CachedBody = (u64, bool, Arc<Rendered>);

/// What one poll of storage came to, for [`LiveView::mark_poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollOutcome {
    /// The read failed: the view is served as it was.
    Failed,
    /// A delta read succeeded.
    DeltaRead,
    /// A full read succeeded: the view is ready.
    FullRead,
    /// The read failed because the table does not exist: not ready until
    /// a read succeeds again.
    TableMissing,
}

/// What the reader's polls came to, for the status document
/// (`crate::http::status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollFacts {
    /// When (by the view's clock) the last successful full read ended.
    pub last_full_read_ms: Option<u64>,
    /// What the last successful poll was.
    pub last_poll: Option<mcs_api::status::PollKind>,
    /// Polls failed since the last successful one.
    pub failed_in_a_row: u64,
    /// Failed polls since startup, by kind of storage error.
    pub errors: std::collections::BTreeMap<&'static str, u64>,
}

/// How many steps of a read of lease ends ([`LiveView::confirm_leases`])
/// are applied under one hold of the view's write lock: about 0.3 ms of
/// raises on the benchmarks' machine (docs/benchmarks.md §2).
pub const CONFIRM_PART: usize = 64;

/// The shared, served view of one registry process.
#[derive(Debug)]
pub struct LiveView {
    view: RwLock<View>,
    clock: Arc<dyn Clock>,
    stale_after_ms: u64,
    full_read_done: AtomicBool,
    table_missing: AtomicBool,
    /// `(found, known)` while the table's schema is past what this binary
    /// may use (a newer release migrated it): writes and readiness refuse.
    schema_too_new: Mutex<Option<(u32, u32)>>,
    last_poll_ok_ms: AtomicU64,
    changes: watch::Sender<u64>,
    cache: Mutex<HashMap<SectionKind, CachedBody>>,
    guard: Mutex<ExpiryGuard>,
    holding: AtomicBool,
    /// Completeness as long-polls were last told of it.
    published_complete: AtomicBool,
    /// Whether pool discovery (`crate::discovery`) has a complete list and
    /// no error streak; always true for registrations.
    discovery_complete: AtomicBool,
    polls: Mutex<PollFacts>,
    /// Each section's fingerprint as long-polls were last woken for it.
    fingerprints: Mutex<[String; SectionKind::ALL.len()]>,
    /// Each section's version and the view's next deadline (`u64::MAX`:
    /// none) as the last mutation left them: a GET of an unchanged list
    /// with nothing due reads these and the cache, not the view, so it
    /// never waits for the write lock (docs/design.md §6).
    versions: [AtomicU64; SectionKind::ALL.len()],
    next_deadline_ms: AtomicU64,
}

impl LiveView {
    /// An empty view: not ready and not complete until the first full read.
    pub fn new(skew_ms: u64, stale_after_ms: u64, hold: HoldPolicy, clock: Arc<dyn Clock>) -> Self {
        Self::of(View::new(skew_ms), stale_after_ms, hold, clock)
    }

    /// An empty view whose pools and routers are discovered from
    /// Kubernetes (`crate::discovery`): incomplete until discovery says
    /// otherwise ([`LiveView::set_discovery_complete`]).
    pub fn discovered(
        skew_ms: u64,
        stale_after_ms: u64,
        hold: HoldPolicy,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let view = Self::of(View::discovered(skew_ms), stale_after_ms, hold, clock);
        view.discovery_complete.store(false, Ordering::SeqCst);
        view
    }

    fn of(view: View, stale_after_ms: u64, hold: HoldPolicy, clock: Arc<dyn Clock>) -> Self {
        let published = fingerprints(&view);
        let versions = SectionKind::ALL.map(|section| AtomicU64::new(section.version(&view)));
        let next_deadline_ms = AtomicU64::new(view.next_deadline().unwrap_or(u64::MAX));
        Self {
            view: RwLock::new(view),
            clock,
            stale_after_ms,
            full_read_done: AtomicBool::new(false),
            table_missing: AtomicBool::new(false),
            schema_too_new: Mutex::new(None),
            last_poll_ok_ms: AtomicU64::new(0),
            changes: watch::channel(0).0,
            cache: Mutex::new(HashMap::new()),
            guard: Mutex::new(ExpiryGuard::new(hold)),
            holding: AtomicBool::new(false),
            published_complete: AtomicBool::new(false),
            discovery_complete: AtomicBool::new(true),
            polls: Mutex::new(PollFacts::default()),
            fingerprints: Mutex::new(published),
            versions,
            next_deadline_ms,
        }
    }

    /// The clock the view judges leases by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Read access to the merged view.
    pub fn read(&self) -> RwLockReadGuard<'_, View> {
        self.view.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, View> {
        self.view.write()
    }

    /// Merges one record (the registrar's own write: read-your-writes).
    pub fn apply(&self, record: Record) -> bool {
        self.mutate(|view, now| view.apply(record, now))
    }

    /// Merges records from a delta poll; returns how many changed the view.
    pub fn apply_all(&self, records: Vec<Record>) -> usize {
        self.mutate(|view, now| records.into_iter().filter(|r| view.apply(r.clone(), now)).count())
    }

    /// Where a delta poll reads changes from, given a read of change stamps
    /// ([`View::delta_start`]).
    pub fn delta_start(
        &self,
        stamps: &[ChangeStamp],
        reached_ms: u64,
        watermark_ms: u64,
    ) -> DeltaStart {
        self.write().delta_start(stamps, reached_ms, watermark_ms)
    }

    /// Forgets the writes offered at or before `reached_ms`
    /// ([`View::forget_offered`]).
    pub fn forget_offered(&self, reached_ms: u64) {
        self.write().forget_offered(reached_ms);
    }

    /// Brings leases in line with a read of stored lease ends
    /// ([`View::confirm_leases`]): planned under the read lock, applied
    /// [`CONFIRM_PART`] steps at a time under the write lock, so that GETs
    /// and watch wake-ups wait for one part at most, not for the whole
    /// (docs/design.md §6, "Renewals and the change feed").
    pub fn confirm_leases(&self, ends: &[LeaseEnd], window: LeaseWindow) -> Confirmed {
        self.confirm_leases_in_parts(ends, window, CONFIRM_PART)
    }

    /// [`LiveView::confirm_leases`] in parts of `part` steps (`usize::MAX`:
    /// planned and applied whole under one hold of the write lock, as
    /// before parts, for comparison in benchmarks).
    pub fn confirm_leases_in_parts(
        &self,
        ends: &[LeaseEnd],
        window: LeaseWindow,
        part: usize,
    ) -> Confirmed {
        if part == usize::MAX {
            return self.mutate(|view, now| view.confirm_leases(ends, window, now));
        }
        let mut plan = self.read().plan_leases(ends, window);
        while !self.mutate(|view, now| view.apply_leases(&mut plan, part, now)) {}
        plan.into_confirmed()
    }

    /// Replaces the state with a full read that began at `read_started_ms`.
    pub fn replace_all(&self, records: Vec<Record>, read_started_ms: u64) -> Resync {
        self.mutate(|view, now| view.replace_all(records, read_started_ms, now))
    }

    /// Serves `pools` and `routers` as discovered (a view of registrations
    /// ignores them); returns whether anything served changed, and wakes
    /// long-polls if so, as any other change does.
    pub fn replace_discovered(
        &self,
        pools: std::collections::BTreeMap<mcs_api::PoolId, mcs_api::Pool>,
        routers: std::collections::BTreeMap<mcs_api::RouterId, mcs_api::RouterReplica>,
    ) -> bool {
        self.mutate(|view, _| view.replace_discovered(pools, routers))
    }

    /// Records whether pool discovery is complete (a first complete list,
    /// no error streak); part of every list's `complete`.
    pub fn set_discovery_complete(&self, complete: bool) {
        self.discovery_complete.store(complete, Ordering::SeqCst);
        self.publish_completeness();
    }

    /// Expires what is due now, unless the expiry guard holds a suspicious
    /// wave back; returns how many leases expired.
    pub fn expire_due(&self) -> usize {
        let now = self.clock.now_ms();
        let leases = if self.next_deadline_ms.load(Ordering::SeqCst) > now {
            LeaseCounts::default()
        } else {
            let view = self.read();
            match view.next_deadline() {
                Some(deadline) if deadline <= now => {
                    let slack =
                        self.guard.lock().unwrap_or_else(|p| p.into_inner()).renewal_slack_ms();
                    LeaseCounts {
                        due: view.due_expiries(now),
                        at_risk: view.leases_at_risk(now, slack),
                        live: view.live_leases(),
                        holders: view.holders_at_risk(now, slack),
                    }
                }
                _ => LeaseCounts::default(),
            }
        };
        let LeaseCounts { due, at_risk, live, .. } = leases;
        let verdict = {
            let mut guard = self.guard.lock().unwrap_or_else(|p| p.into_inner());
            let verdict = guard.judge(now, leases);
            self.holding.store(guard.is_holding(), Ordering::SeqCst);
            verdict
        };
        self.publish_completeness();
        if due == 0 {
            metrics::gauge!(m::EXPIRIES_HELD).set(0.0);
            return 0;
        }
        if let Verdict::Hold { since_ms, started } = verdict {
            metrics::gauge!(m::EXPIRIES_HELD).set(due as f64);
            if started {
                metrics::counter!(m::EXPIRY_HOLDS).increment(1);
                tracing::warn!(
                    due,
                    at_risk,
                    live,
                    "mass expiry suspected (is this replica still receiving writes?): holding expiries"
                );
            } else {
                tracing::debug!(
                    due,
                    live,
                    held_ms = now.saturating_sub(since_ms),
                    "still holding expiries"
                );
            }
            return 0;
        }
        metrics::gauge!(m::EXPIRIES_HELD).set(0.0);
        tracing::debug!(due, at_risk, live, "leases due, not a wave: expiring");
        let expired = self.mutate(|view, now| {
            let expired = view.advance(now);
            for key in &expired {
                metrics::counter!(m::LEASE_EXPIRIES, "kind" => key.kind().as_str()).increment(1);
                tracing::debug!(%key, "lease expired");
            }
            expired.len()
        });
        self.guard.lock().unwrap_or_else(|p| p.into_inner()).expired(now, expired);
        self.publish_completeness();
        expired
    }

    /// The earliest lease deadline, to wake up for.
    pub fn next_deadline(&self) -> Option<u64> {
        self.read().next_deadline()
    }

    /// Records the outcome of a poll; a full read makes the view ready, a
    /// table found missing makes `/readyz` fail until a read succeeds.
    pub fn mark_poll(&self, outcome: PollOutcome) {
        // A failure of another kind says nothing of whether the table is back.
        if outcome != PollOutcome::Failed {
            self.table_missing.store(outcome == PollOutcome::TableMissing, Ordering::SeqCst);
        }
        {
            use mcs_api::status::PollKind;
            let mut polls = self.polls.lock().unwrap_or_else(|p| p.into_inner());
            match outcome {
                PollOutcome::Failed | PollOutcome::TableMissing => polls.failed_in_a_row += 1,
                PollOutcome::DeltaRead => {
                    polls.failed_in_a_row = 0;
                    polls.last_poll = Some(PollKind::Delta);
                }
                PollOutcome::FullRead => {
                    polls.failed_in_a_row = 0;
                    polls.last_poll = Some(PollKind::Full);
                    polls.last_full_read_ms = Some(self.clock.now_ms());
                }
            }
        }
        if !matches!(outcome, PollOutcome::Failed | PollOutcome::TableMissing) {
            let now = self.clock.now_ms();
            self.last_poll_ok_ms.store(now, Ordering::SeqCst);
            metrics::gauge!(m::LAST_POLL_OK).set(now as f64 / 1000.0);
            if outcome == PollOutcome::FullRead {
                self.full_read_done.store(true, Ordering::SeqCst);
            }
        }
        self.publish_completeness();
    }

    /// Counts a read of storage that failed with an error of `kind`
    /// (`unavailable`, `missing`, ...): the status document's storage
    /// errors by kind.
    pub fn note_storage_error(&self, kind: &'static str) {
        let mut polls = self.polls.lock().unwrap_or_else(|p| p.into_inner());
        *polls.errors.entry(kind).or_default() += 1;
    }

    /// What the reader's polls came to so far.
    pub fn poll_facts(&self) -> PollFacts {
        self.polls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// When the expiry hold in force began, and the hold policy.
    pub fn hold_facts(&self) -> (Option<u64>, HoldPolicy) {
        let guard = self.guard.lock().unwrap_or_else(|p| p.into_inner());
        (guard.held_since_ms(), *guard.policy())
    }

    /// Why lists are not complete: empty exactly when
    /// [`LiveView::is_complete`] holds.
    pub fn incomplete_because(&self) -> Vec<mcs_api::status::Incomplete> {
        use mcs_api::status::Incomplete;
        let last = self.last_poll_ok_ms.load(Ordering::SeqCst);
        let mut why = Vec::new();
        if !self.is_ready() {
            why.push(Incomplete::NotReady);
        } else if self.clock.now_ms().saturating_sub(last) > self.stale_after_ms {
            why.push(Incomplete::Stale);
        }
        if self.holding.load(Ordering::SeqCst) {
            why.push(Incomplete::Hold);
        }
        if !self.is_discovery_complete() {
            why.push(Incomplete::Discovery);
        }
        why
    }

    /// `--stale-after-secs`, in milliseconds.
    pub fn stale_after_ms(&self) -> u64 {
        self.stale_after_ms
    }

    /// Wakes long-polls when completeness flipped since it was last
    /// published: it is part of every list's `ETag`, and turns false by
    /// time alone (a stale view), so no mutation of the view announces it;
    /// the reader also calls it by timer while a poll is under way. Sets
    /// the completeness gauge too.
    pub fn publish_completeness(&self) {
        let complete = self.is_complete();
        metrics::gauge!(m::VIEW_COMPLETE).set(if complete { 1.0 } else { 0.0 });
        if self.published_complete.swap(complete, Ordering::SeqCst) != complete {
            self.changes.send_modify(|epoch| *epoch += 1);
        }
    }

    /// Records what the last re-read of the table's schema found: `Some((found,
    /// known))` when the table is at a schema version past what this binary
    /// may use, `None` when it may use it.
    pub fn set_schema_too_new(&self, versions: Option<(u32, u32)>) {
        *self.schema_too_new.lock().unwrap_or_else(|p| p.into_inner()) = versions;
    }

    /// `(found, known)` while the table's schema is past this binary's.
    pub fn schema_too_new(&self) -> Option<(u32, u32)> {
        *self.schema_too_new.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the last read that got an answer found the table missing.
    pub fn is_table_missing(&self) -> bool {
        self.table_missing.load(Ordering::SeqCst)
    }

    /// How long ago the last successful poll was; `None` before the first.
    pub fn last_poll_age_ms(&self) -> Option<u64> {
        let last = self.last_poll_ok_ms.load(Ordering::SeqCst);
        (last > 0).then(|| self.clock.now_ms().saturating_sub(last))
    }

    /// Whether expiries are being held back.
    pub fn is_holding(&self) -> bool {
        self.holding.load(Ordering::SeqCst)
    }

    /// Whether pool discovery is complete (always, for registrations).
    pub fn is_discovery_complete(&self) -> bool {
        self.discovery_complete.load(Ordering::SeqCst)
    }

    /// Whether the first full read has succeeded.
    pub fn is_ready(&self) -> bool {
        self.full_read_done.load(Ordering::SeqCst)
    }

    /// Whether lists are complete: ready, polled recently enough, no
    /// expiries held back, and pool discovery (if any) complete.
    pub fn is_complete(&self) -> bool {
        let last = self.last_poll_ok_ms.load(Ordering::SeqCst);
        self.is_ready()
            && self.clock.now_ms().saturating_sub(last) <= self.stale_after_ms
            && !self.holding.load(Ordering::SeqCst)
            && self.is_discovery_complete()
    }

    /// A receiver that sees a new value whenever any served section changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The current body and fingerprint of `section`, expiring due leases
    /// first so nothing past its lease is served.
    pub fn render(&self, section: SectionKind) -> Arc<Rendered> {
        self.expire_due();
        let complete = self.is_complete();
        let published = self.versions[section.index()].load(Ordering::SeqCst);
        if let Some((v, c, rendered)) =
            self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&section)
            && (*v, *c) == (published, complete)
        {
            return rendered.clone();
        }
        let view = self.read();
        let version = section.version(&view);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, c, rendered)) = cache.get(&section)
            && (*v, *c) == (version, complete)
        {
            return rendered.clone();
        }
        let rendered = Arc::new(Rendered::new(section.list_body(&view, complete), complete));
        cache.insert(section, (version, complete, rendered.clone()));
        rendered
    }

    /// Runs `f` on the view at the current time under the write lock, then
    /// publishes what changed: metrics, and a wake-up for long-polls if any
    /// fingerprint moved.
    fn mutate<R>(&self, f: impl FnOnce(&mut View, u64) -> R) -> R {
        let now = self.clock.now_ms();
        let mut view = self.write();
        let result = f(&mut view, now);
        let mut changed = false;
        // A section's fingerprint is computed only when its content was
        // touched (its version moved past the one published by the last
        // mutation), and compared with the one last published: content
        // changed and changed back is no change.
        let mut published = self.fingerprints.lock().unwrap_or_else(|p| p.into_inner());
        let sections = SectionKind::ALL.iter().zip(&self.versions).zip(published.iter_mut());
        for ((section, version), last) in sections {
            let current = section.version(&view);
            if version.swap(current, Ordering::SeqCst) == current {
                continue;
            }
            let new = section.fingerprint(&view);
            if new != *last {
                *last = new;
                changed = true;
                metrics::counter!(m::FINGERPRINT_CHANGES, "section" => section.name()).increment(1);
            }
        }
        drop(published);
        let deadline = view.next_deadline().unwrap_or(u64::MAX);
        self.next_deadline_ms.store(deadline, Ordering::SeqCst);
        publish_sizes(&view);
        // Fair: a reader waiting meanwhile gets the lock before this thread
        // can take it again (a plan applied in parts takes it once a part).
        RwLockWriteGuard::unlock_fair(view);
        if changed {
            self.changes.send_modify(|epoch| *epoch += 1);
        }
        result
    }
}

fn fingerprints(view: &View) -> [String; SectionKind::ALL.len()] {
    SectionKind::ALL.map(|section| section.fingerprint(view))
}

fn publish_sizes(view: &View) {
    for section in SectionKind::ALL {
        metrics::gauge!(m::VIEW_ITEMS, "section" => section.name()).set(section.len(view) as f64);
    }
    metrics::gauge!(m::VIEW_RECORDS).set(view.record_count() as f64);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use mcs_core::fixtures::{mk_pool, mk_tombstone};
    use mcs_core::{HoldPolicy, LeaseTerms};

    fn live() -> LiveView {
        live_at(Arc::new(ManualClock::new(1_000)))
    }

    /// No expiry hold (threshold 1), for tests of what is not about holds.
    pub(crate) const NO_HOLDS: HoldPolicy = HoldPolicy {
        threshold: 1.0,
        min_count: 2,
        window_ms: 0,
        renewal_slack_ms: 0,
        max_hold_ms: 0,
    };

    fn live_at(clock: Arc<ManualClock>) -> LiveView {
        LiveView::new(500, 30_000, NO_HOLDS, clock)
    }

    #[test]
    fn watchers_are_woken_by_a_change_of_content_only() {
        let view = live();
        let mut changes = view.subscribe();
        changes.borrow_and_update();
        assert!(view.apply(mk_pool("a", 1, "r", None, Some(60_000))));
        assert!(changes.has_changed().unwrap(), "a pool served");
        changes.borrow_and_update();
        // Served and withdrawn in one mutation: the sections' versions
        // moved, their content is what it was.
        view.mutate(|v, now| {
            v.apply(mk_pool("b", 1, "r", None, Some(60_000)), now);
            v.apply(mk_tombstone("b", 2, "r"), now);
        });
        assert!(!changes.has_changed().unwrap(), "nothing served changed");
        assert!(view.apply(mk_tombstone("a", 2, "r")));
        assert!(changes.has_changed().unwrap(), "a pool withdrawn");
    }

    #[test]
    fn a_get_of_an_unchanged_list_does_not_wait_for_the_write_lock() {
        let clock = Arc::new(ManualClock::new(1_000));
        let view = Arc::new(live_at(clock.clone()));
        assert!(view.apply(mk_pool("a", 1, "r", None, Some(60_000))));
        let first = view.render(SectionKind::Pools);
        let held = view.write();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let view = view.clone();
            std::thread::spawn(move || tx.send(view.render(SectionKind::Pools)).unwrap())
        };
        let again = rx.recv_timeout(std::time::Duration::from_secs(5));
        drop(held);
        reader.join().unwrap();
        let again = again.expect("rendered while the write lock was held");
        assert!(Arc::ptr_eq(&first, &again), "the cached body");
        // A change is rendered anew, and a lease past its end expires at
        // the GET that finds it due.
        assert!(view.apply(mk_pool("b", 1, "r", None, Some(90_000))));
        let both = view.render(SectionKind::Pools);
        assert!(!Arc::ptr_eq(&first, &both));
        assert_eq!(view.read().pools().len(), 2);
        clock.advance(60_000);
        let expired = view.render(SectionKind::Pools);
        assert!(!Arc::ptr_eq(&both, &expired), "a expired");
        assert_eq!(view.read().pools().len(), 1);
    }

    #[test]
    fn leases_confirmed_in_parts_end_where_the_whole_plan_does() {
        let terms = LeaseTerms { duration_ms: 30_000, heartbeat_ms: 10_000 };
        let records: Vec<Record> = (0..10)
            .map(|i| {
                let mut r = mk_pool(&format!("p{i}"), 1, "r", None, Some(30_000 + i * 100));
                r.terms = Some(terms);
                r
            })
            .collect();
        let (whole, parted) = (live(), live());
        whole.apply_all(records.clone());
        parted.apply_all(records.clone());
        let window = LeaseWindow {
            from_ms: 0,
            to_ms: 45_000,
            settled_ms: 16_000,
            polled_at_ms: 26_000,
            raise_by_ms: 31_000,
        };
        let expected = whole.confirm_leases_in_parts(&[], window, usize::MAX);
        assert_eq!(expected.extended, 10, "every lease raised");
        assert_eq!(parted.confirm_leases_in_parts(&[], window, 3), expected);
        for r in &records {
            let end = |v: &LiveView| v.read().record(&r.key).and_then(|r| r.lease_until_ms);
            assert_eq!(end(&parted), end(&whole), "{:?}", r.key);
            assert_eq!(end(&parted), Some(45_000));
        }
    }
}
