//! The read path (DESIGN §5): poll the local store for what changed, read
//! everything now and then, merge into the view, expire leases on time.
//!
//! The same loop runs on every backend: on the embedded store it polls memory
//! exactly as it polls DynamoDB.

use crate::live::LiveView;
use crate::metrics as m;
use crate::registrar::Registrar;
use mcs_store::Store;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Polling settings.
#[derive(Debug, Clone)]
pub struct ReaderConfig {
    /// Period of delta polls.
    pub refresh_interval: Duration,
    /// Period of full reads.
    pub full_resync_interval: Duration,
    /// How far behind the watermark a delta poll reaches.
    pub lookback_ms: u64,
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
    last_full: Option<Instant>,
}

impl Reader {
    /// A reader that has read nothing yet.
    pub fn new(
        store: Arc<dyn Store>,
        view: Arc<LiveView>,
        registrar: Arc<Registrar>,
        config: ReaderConfig,
    ) -> Self {
        Self { store, view, registrar, config, watermark_ms: 0, last_full: None }
    }

    /// Polls until `shutdown` turns true, waking early for lease deadlines so
    /// expiries are published (and long-polls woken) on time.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut next_poll = tokio::time::Instant::now();
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_poll {
                self.poll_once().await;
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

    /// One poll: a full read when none has succeeded yet or one is due,
    /// else a delta read from the watermark minus the lookback.
    pub async fn poll_once(&mut self) {
        let full = self.last_full.is_none_or(|t| t.elapsed() >= self.config.full_resync_interval);
        let mode = if full { "full" } else { "delta" };
        let started = Instant::now();
        let read_started_ms = self.view.clock().now_ms();
        let result = if full {
            self.store.read_all().await
        } else {
            self.store
                .read_changed_since(self.watermark_ms.saturating_sub(self.config.lookback_ms))
                .await
        };
        metrics::histogram!(m::READER_POLL_DURATION, "mode" => mode)
            .record(started.elapsed().as_secs_f64());
        let records = match result {
            Ok(records) => records,
            Err(error) => {
                metrics::counter!(m::READER_POLLS, "mode" => mode, "outcome" => "error")
                    .increment(1);
                tracing::warn!(%error, mode, "poll failed; serving the last view");
                self.view.mark_poll(false, full);
                return;
            }
        };
        metrics::counter!(m::READER_POLLS, "mode" => mode, "outcome" => "ok").increment(1);
        self.registrar.observe_all(&records);
        // Records older than what the last delta poll reached, and newer than
        // what the view holds, are ones the delta polls missed (they reached
        // this replica later than the lookback allows).
        let reached = self.watermark_ms.saturating_sub(self.config.lookback_ms);
        let missed = if full && self.last_full.is_some() {
            let view = self.view.read();
            records
                .iter()
                .filter(|r| r.changed_at_ms < reached)
                .filter(|r| view.record(&r.key).is_none_or(|held| r.supersedes(held)))
                .count()
        } else {
            0
        };
        // The watermark is this reader's clock at the start of the last
        // successful poll, not the newest changed_at it saw: a writer whose
        // clock runs ahead must not push it past writes still to come.
        self.watermark_ms = read_started_ms;
        if full {
            let resync = self.view.replace_all(records, read_started_ms);
            if missed > 0 {
                metrics::counter!(m::LATE_ARRIVALS).increment(missed as u64);
                tracing::warn!(
                    late = missed,
                    lookback_ms = self.config.lookback_ms,
                    "full read found records the delta polls missed; consider a longer --lookback-ms"
                );
            }
            if resync.dropped > 0 {
                tracing::debug!(dropped = resync.dropped, "records gone from storage");
            }
            self.last_full = Some(started);
        } else {
            self.view.apply_all(records);
        }
        self.view.mark_poll(true, full);
    }
}
