//! The read path (docs/design.md §6): poll the local store for what changed, read
//! everything now and then, merge into the view, expire leases on time.
//!
//! The same loop runs on every backend: on the embedded store it polls memory
//! exactly as it polls DynamoDB.

use crate::live::{LiveView, PollOutcome};
use crate::metrics as m;
use crate::registrar::Registrar;
use mcs_core::view::LeaseWindow;
use mcs_core::{ChangeStamp, Record};
use mcs_store::{Store, StoreError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The most keys a poll reads whole when its read of lease ends cannot
/// settle them ([`mcs_core::View::leases_to_recheck`]).
const MAX_RECHECKS: usize = 128;

/// Polling settings.
#[derive(Debug, Clone)]
pub struct ReaderConfig {
    /// Period of delta polls.
    pub refresh_interval: Duration,
    /// Period of full reads.
    pub full_resync_interval: Duration,
    /// How far behind the watermark a delta poll reaches.
    pub lookback_ms: u64,
    /// How far past a poll's start it asks for lease ends
    /// ([`mcs_core::LeasePolicy::horizon_ms`]).
    pub lease_horizon_ms: u64,
}

/// The regional reader of one registry process.
#[derive(Debug)]
pub struct Reader {
    store: Arc<dyn Store>,
    view: Arc<LiveView>,
    registrar: Arc<Registrar>,
    config: ReaderConfig,
    /// Start (by this reader's clock) of the last successful poll.
    watermark_ms: u64,
    /// Start of the last successful full read.
    last_full_ms: Option<u64>,
    /// Full reads failed in a row, and when the next may be tried.
    full_failures: u32,
    full_retry_at_ms: u64,
}

impl Reader {
    /// A reader that has read nothing yet.
    pub fn new(
        store: Arc<dyn Store>,
        view: Arc<LiveView>,
        registrar: Arc<Registrar>,
        config: ReaderConfig,
    ) -> Self {
        Self {
            store,
            view,
            registrar,
            config,
            watermark_ms: 0,
            last_full_ms: None,
            full_failures: 0,
            full_retry_at_ms: 0,
        }
    }

    /// Polls until `shutdown` turns true, waking early for lease deadlines so
    /// expiries are published (and long-polls woken) on time.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut next_poll = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_poll {
                self.poll_with_completeness().await;
                next_poll = now + self.config.refresh_interval;
            }
            self.view.expire_due();
            let mut wake = next_poll;
            // While expiries are held, their deadlines are past: wake for
            // the next poll, not in a busy loop.
            if let Some(deadline) = self.view.next_deadline().filter(|_| !self.view.is_holding()) {
                let wall = self.view.clock().now_ms();
                let until = Duration::from_millis(deadline.saturating_sub(wall));
                wake = wake.min(tokio::time::Instant::now() + until);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// One poll, while completeness is published every refresh interval by
    /// timer: a poll that hangs (storage that accepts the call and never
    /// answers) must not keep lists `complete: true` past
    /// `--stale-after-secs`, nor keep watchers from learning it (issue 22:
    /// they learned it after about 80 s against a stale-after of 30 s).
    async fn poll_with_completeness(&mut self) {
        let view = self.view.clone();
        let every = self.config.refresh_interval;
        let poll = self.poll_once();
        tokio::pin!(poll);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut poll => return,
                _ = tick.tick() => view.publish_completeness(),
            }
        }
    }

    /// Whether this poll is a full read: none has succeeded yet, or one is
    /// due, and no failed one is backing off. After a failed full read the
    /// next is tried after a backoff that doubles up to the full-resync
    /// interval; delta polls go on meanwhile, so a throttled scan of a
    /// large table does not freeze a view that cheap queries keep fresh.
    /// Before the first full read there is nothing to poll a delta from.
    fn full_due(&self, now_ms: u64) -> Option<bool> {
        let due = self.last_full_ms.is_none_or(|t| {
            now_ms.saturating_sub(t) >= self.config.full_resync_interval.as_millis() as u64
        });
        match (due && now_ms >= self.full_retry_at_ms, self.last_full_ms.is_some()) {
            (true, _) => Some(true),
            (false, true) => Some(false),
            (false, false) => None,
        }
    }

    fn full_failed(&mut self, now_ms: u64) {
        self.full_failures = self.full_failures.saturating_add(1);
        let refresh = self.config.refresh_interval.as_millis() as u64;
        let cap = (self.config.full_resync_interval.as_millis() as u64).max(refresh);
        let backoff = refresh.saturating_mul(1 << self.full_failures.min(20)).min(cap);
        self.full_retry_at_ms = now_ms.saturating_add(backoff);
    }

    /// One poll: a full read when none has succeeded yet or one is due
    /// (unless a failed one is backing off), else a delta read from the
    /// watermark minus the lookback.
    pub async fn poll_once(&mut self) {
        let read_started_ms = self.view.clock().now_ms();
        let Some(full) = self.full_due(read_started_ms) else {
            tracing::debug!(retry_at_ms = self.full_retry_at_ms, "first full read backing off");
            return;
        };
        let (mode, read) =
            if full { ("full", PollOutcome::FullRead) } else { ("delta", PollOutcome::DeltaRead) };
        let result = if full {
            measured(mode, self.store.read_all()).await
        } else {
            measured(mode, self.read_delta()).await
        };
        let records = match result {
            Ok(records) => records,
            Err(error) => {
                let outcome = if let StoreError::Missing(_) = error {
                    // The message names the table, its region and endpoint.
                    tracing::error!(%error, mode, "storage table missing; not ready");
                    PollOutcome::TableMissing
                } else {
                    tracing::warn!(%error, mode, "poll failed; serving the last view");
                    PollOutcome::Failed
                };
                if full {
                    self.full_failed(read_started_ms);
                }
                self.view.note_storage_error(error_kind(&error));
                self.view.mark_poll(outcome);
                return;
            }
        };
        self.registrar.observe_all(&records);
        // Records older than what the last delta poll reached, and newer than
        // what the view holds, are ones the delta polls missed (they reached
        // this replica later than the lookback allows).
        let reached = self.watermark_ms.saturating_sub(self.config.lookback_ms);
        // A renewal is not one of them: renewals keep `changed_at` and reach
        // the view through lease ends, as a lower bound a full read raises.
        let missed = if full && self.last_full_ms.is_some() {
            let view = self.view.read();
            records
                .iter()
                .filter(|r| r.changed_at_ms < reached)
                .filter(|r| {
                    view.record(&r.key)
                        .is_none_or(|held| r.supersedes(held) && r.version != held.version)
                })
                .count()
        } else {
            0
        };
        // The watermark is this reader's clock at the start of the last
        // successful poll, not the newest changed_at it saw: a writer whose
        // clock runs ahead must not push it past writes still to come.
        let previous_watermark = std::mem::replace(&mut self.watermark_ms, read_started_ms);
        if full {
            match self.store.refresh_schema().await {
                Ok(()) => self.view.set_schema_too_new(None),
                Err(StoreError::SchemaTooNew { found, known }) => {
                    // Issue 22: a schema-3 registry went on serving and
                    // writing a table migrated to 5.
                    tracing::error!(
                        schema_version = found,
                        binary_schema_version = known,
                        "the table is at a schema version past this binary's: writes refused and \
                         not ready; run a registry release of schema version {found}"
                    );
                    self.view.set_schema_too_new(Some((found, known)));
                }
                Err(error) => tracing::warn!(%error, "could not re-read the table's schema"),
            }
            let resync = self.view.replace_all(records, read_started_ms);
            if missed > 0 {
                metrics::counter!(m::LATE_ARRIVALS).increment(missed as u64);
                tracing::warn!(
                    late = missed,
                    lookback_ms = self.config.lookback_ms,
                    "full read found records the delta polls missed; consider a longer --lookback-ms"
                );
            }
            if resync.dropped > 0 || resync.retired > 0 {
                tracing::debug!(
                    dropped = resync.dropped,
                    retired = resync.retired,
                    "records gone from storage (retired: an older version of the key read instead)"
                );
            }
            self.last_full_ms = Some(read_started_ms);
            self.full_failures = 0;
            self.full_retry_at_ms = 0;
        } else {
            self.view.apply_all(records);
            if let Err(error) = self.confirm_leases(reached, read_started_ms).await {
                if self.store.renewals_keep_changed_at() {
                    // Renewals reach this view only through lease ends: the
                    // poll failed, and the next one asks the same window.
                    tracing::warn!(%error, "lease ends read failed; serving the last view");
                    self.view.note_storage_error(error_kind(&error));
                    self.watermark_ms = previous_watermark;
                    self.view.mark_poll(PollOutcome::Failed);
                    return;
                }
                // Renewals still move changed_at (a table at schema 2 whose
                // lease_ends index may still be backfilling): the change
                // feed has them.
                tracing::debug!(%error, "lease ends read failed; renewals are in the change feed");
            }
        }
        self.view.mark_poll(read);
    }

    /// A delta poll's read of what changed (docs/design.md §6 "Reaching
    /// back for late changes"). On a store with change stamps, the stamps
    /// written after the watermark less the lookback first, a fraction of
    /// the items' size; then the changes themselves only from just before
    /// the earliest write there the view has not seen (a new one, or one
    /// that reached this replica after the poll that covered its time), and
    /// none when it has seen them all. Without stamps (a table before
    /// schema 5), or when reading them fails, the changes since the
    /// watermark less the lookback, as before.
    async fn read_delta(&self) -> Result<Vec<Record>, StoreError> {
        let reached = self.watermark_ms.saturating_sub(self.config.lookback_ms);
        let since = match self.read_change_stamps(reached).await {
            Some(stamps) => self.delta_start(&stamps, reached),
            None => {
                self.view.forget_offered(reached);
                Some(reached)
            }
        };
        match since {
            Some(since) => self.store.read_changed_since(since).await,
            None => Ok(Vec::new()),
        }
    }

    /// The change stamps of the writes after `reached`; `None` when the
    /// store has none (a table before schema 5) or reading them failed.
    async fn read_change_stamps(&self, reached: u64) -> Option<Vec<ChangeStamp>> {
        if !self.store.reads_change_stamps() {
            return None;
        }
        let read = self.store.read_change_stamps(reached.saturating_add(1), u64::MAX);
        measured("change_stamps", read)
            .await
            .inspect_err(|error| {
                tracing::warn!(%error, "change stamps read failed; reading the whole lookback");
            })
            .ok()
    }

    /// Where [`Reader::read_delta`] reads changes from, given the stamps of
    /// the writes after `reached`; `None` when there is nothing to read.
    fn delta_start(&self, stamps: &[ChangeStamp], reached: u64) -> Option<u64> {
        let start = self.view.delta_start(stamps, reached, self.watermark_ms);
        if start.late > 0 {
            metrics::counter!(m::LATE_CHANGES).increment(start.late as u64);
            tracing::debug!(
                late = start.late,
                since_ms = start.since_ms,
                watermark_ms = self.watermark_ms,
                "reaching back for writes that arrived late"
            );
        }
        start.since_ms
    }

    /// Reads the stored lease ends from `from_ms` (the last watermark less
    /// the lookback) to the horizon past `started_ms`, and confirms the
    /// view's leases with them (docs/design.md §6 "Renewals and the change
    /// feed").
    async fn confirm_leases(&self, from_ms: u64, started_ms: u64) -> Result<(), StoreError> {
        let window = LeaseWindow {
            from_ms,
            to_ms: started_ms.saturating_add(self.config.lease_horizon_ms),
            settled_ms: started_ms.saturating_sub(self.config.lookback_ms),
            polled_at_ms: started_ms,
            // Raised when due within two polls: the next, and one more in
            // case that one fails.
            raise_by_ms: started_ms
                .saturating_add(2 * self.config.refresh_interval.as_millis() as u64),
        };
        let read = self.store.read_lease_ends(window.from_ms, window.to_ms);
        let ends = measured("lease_ends", read).await?;
        let confirmed = self.view.confirm_leases(&ends, window);
        metrics::counter!(m::LEASES_CONFIRMED, "how" => "renewed")
            .increment(confirmed.renewed as u64);
        metrics::counter!(m::LEASES_CONFIRMED, "how" => "extended")
            .increment(confirmed.extended as u64);
        // What the read cannot settle is read whole: a few keys a poll
        // (holders that stopped, relays that failed over, changes the
        // delta poll missed), at once; more wait for the next poll.
        let reads = confirmed.recheck.iter().take(MAX_RECHECKS).map(|key| self.store.get(key));
        let reread: Vec<_> =
            futures::future::try_join_all(reads).await?.into_iter().flatten().collect();
        metrics::counter!(m::LEASES_CONFIRMED, "how" => "reread").increment(reread.len() as u64);
        self.registrar.observe_all(&reread);
        self.view.apply_all(reread);
        Ok(())
    }
}

/// `read`, its latency recorded in the poll duration histogram and its
/// outcome counted in the polls counter, both under `mode`.
async fn measured<T>(
    mode: &'static str,
    read: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = read.await;
    metrics::histogram!(m::READER_POLL_DURATION, "mode" => mode)
        .record(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "ok" } else { "error" };
    metrics::counter!(m::READER_POLLS, "mode" => mode, "outcome" => outcome).increment(1);
    result
}

/// The kind of a storage error, as the status document counts it.
fn error_kind(error: &StoreError) -> &'static str {
    match error {
        StoreError::Unavailable(_) => "unavailable",
        StoreError::Schema(_) => "schema",
        StoreError::Missing(_) => "missing",
        StoreError::SchemaTooNew { .. } => "schema_too_new",
        StoreError::TooLarge { .. } => "too_large",
        StoreError::Corrupt(_) => "corrupt",
        StoreError::Other(_) => "other",
    }
}
