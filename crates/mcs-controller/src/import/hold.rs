//! The removal hold: a complete list that would take away most of what
//! this cluster imports at once is suspected, not obeyed, for a bounded
//! window (docs/design.md §13, "A registry that forgot").
//!
//! A registry restarted on empty memory, a table recreated or restored, a
//! registry stalled past every cluster's lease: each serves a complete list
//! without services that still exist, until their exporters notice (their
//! next renewal reads `renewed: false`, or their lease is regained) and send
//! them again, within one lease. Deleting meanwhile would delete every
//! ServiceImport, derived Service and EndpointSlice, and give each service
//! a new clusterset IP when it comes back. So, as the registry holds a wave
//! of expiries, the importer holds a wave of removals: when one list would
//! remove `share` or more of the imported services (or once this cluster's
//! own lease was found lost or forgotten), nothing is removed
//! until `window` has passed; then whatever is still not listed goes. The
//! hold is bounded and never extended by the lists that arrive during it,
//! so a clusterset that really withdrew most of its services sees them go
//! one window late, never not at all.

use std::time::Duration;
use tokio::time::Instant;

/// When removals are held, and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldPolicy {
    /// The share of imported services (0–1) that one list must remove, at
    /// least, for a hold; above 1 never holds.
    pub share: f64,
    /// How long a hold lasts.
    pub window: Duration,
}

/// The hold's state.
#[derive(Debug)]
pub struct RemovalHold {
    policy: HoldPolicy,
    until: Option<Instant>,
}

/// What [`RemovalHold::judge`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// Removals may go ahead.
    Remove,
    /// A hold began with this list; it ends at the instant given.
    Began(Instant),
    /// A hold that began earlier still runs until the instant given.
    Holding(Instant),
}

impl RemovalHold {
    /// No hold yet.
    pub fn new(policy: HoldPolicy) -> Self {
        Self { policy, until: None }
    }

    /// The window of a hold.
    pub fn window(&self) -> Duration {
        self.policy.window
    }

    /// Sets the window of holds that begin from now on.
    pub fn set_window(&mut self, window: Duration) {
        self.policy.window = window;
    }

    /// Judges a complete list that would remove `removed` of the `imported`
    /// services this cluster holds, at `now`.
    pub fn judge(&mut self, imported: usize, removed: usize, now: Instant) -> Judged {
        if let Some(until) = self.until {
            if now < until {
                return Judged::Holding(until);
            }
            self.until = None;
        }
        let wave = (removed as f64) >= self.policy.share * imported as f64;
        if removed == 0 || !wave || self.policy.window.is_zero() {
            return Judged::Remove;
        }
        let until = now + self.policy.window;
        self.until = Some(until);
        Judged::Began(until)
    }

    /// Begins a hold at `now` whatever the lists say (this cluster's own
    /// lease was found forgotten or lost: lists are suspect until every
    /// exporter has had a lease to send again); one already running is
    /// kept. When the hold ends; `None` with a window of 0.
    pub fn begin(&mut self, now: Instant) -> Option<Instant> {
        if self.policy.window.is_zero() {
            return None;
        }
        let until = self.held_until(now).unwrap_or(now + self.policy.window);
        self.until = Some(until);
        Some(until)
    }

    /// When the hold that runs at `now` ends, if one does.
    pub fn held_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|until| now < *until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(30);

    fn hold() -> RemovalHold {
        RemovalHold::new(HoldPolicy { share: 0.5, window: WINDOW })
    }

    #[test]
    fn more_than_the_share_at_once_is_held_for_the_window() {
        let t0 = Instant::now();
        let mut h = hold();
        assert_eq!(h.judge(500, 500, t0), Judged::Began(t0 + WINDOW), "all at once");
        assert_eq!(h.held_until(t0), Some(t0 + WINDOW));
        assert!(h.held_until(t0 + WINDOW - Duration::from_millis(1)).is_some());
        assert_eq!(h.held_until(t0 + WINDOW), None, "bounded");
        // Lists during the hold do not extend it.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(h.judge(500, 500, later), Judged::Holding(t0 + WINDOW));
        assert_eq!(h.judge(500, 0, later), Judged::Holding(t0 + WINDOW));
        // Past the window, what is still missing goes.
        assert_eq!(h.judge(500, 1, t0 + WINDOW), Judged::Remove);
        assert_eq!(h.held_until(t0 + WINDOW), None);
    }

    #[test]
    fn half_or_more_is_a_wave_and_a_lone_service_counts() {
        let t0 = Instant::now();
        assert_eq!(hold().judge(4, 1, t0), Judged::Remove, "a quarter");
        // Half: one of two clusters sent its exports again before the list.
        assert_eq!(hold().judge(4, 2, t0), Judged::Began(t0 + WINDOW), "half");
        assert_eq!(hold().judge(4, 3, t0), Judged::Began(t0 + WINDOW));
        assert_eq!(hold().judge(1, 1, t0), Judged::Began(t0 + WINDOW), "the only import");
        assert_eq!(hold().judge(10, 1, t0), Judged::Remove, "one unexport of ten");
        assert_eq!(hold().judge(0, 0, t0), Judged::Remove, "nothing imported");
    }

    #[test]
    fn a_share_above_one_never_holds_and_a_new_hold_takes_the_new_window() {
        let t0 = Instant::now();
        let mut never = RemovalHold::new(HoldPolicy { share: 1.01, window: WINDOW });
        assert_eq!(never.judge(3, 3, t0), Judged::Remove);
        let mut no_window = RemovalHold::new(HoldPolicy { share: 0.5, window: Duration::ZERO });
        assert_eq!(no_window.judge(3, 3, t0), Judged::Remove, "a window of 0 never holds");
        let mut h = hold();
        h.set_window(Duration::from_secs(6));
        assert_eq!(h.window(), Duration::from_secs(6));
        assert_eq!(h.judge(2, 2, t0), Judged::Began(t0 + Duration::from_secs(6)));
    }

    #[test]
    fn a_forced_hold_begins_at_once_keeps_a_running_one_and_needs_a_window() {
        let t0 = Instant::now();
        let mut h = hold();
        assert_eq!(h.begin(t0), Some(t0 + WINDOW));
        assert_eq!(h.judge(10, 1, t0 + Duration::from_secs(1)), Judged::Holding(t0 + WINDOW));
        let later = t0 + Duration::from_secs(5);
        assert_eq!(h.begin(later), Some(t0 + WINDOW), "a running hold is kept, not extended");
        assert_eq!(h.begin(t0 + WINDOW), Some(t0 + WINDOW + WINDOW), "a new one after it ended");
        let mut none = RemovalHold::new(HoldPolicy { share: 0.5, window: Duration::ZERO });
        assert_eq!(none.begin(t0), None);
        assert_eq!(none.held_until(t0), None);
    }
}
