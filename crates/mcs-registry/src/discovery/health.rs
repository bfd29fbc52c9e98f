//! When discovered lists are complete (docs/design.md §14), as a pure
//! function of events and the time: not before every watcher's first
//! complete list; not while list/watch errors have spanned the error
//! window (one minute) without the recovery time (two minutes) passing
//! since the last of them.

use std::time::Duration;

/// The completeness of discovery, fed with what the watchers report.
#[derive(Debug, Clone)]
pub struct Health {
    error_window_ms: u64,
    recovery_ms: u64,
    /// Watchers that have not completed a list yet.
    unlisted: usize,
    /// `(first, last)` error of the current streak.
    streak: Option<(u64, u64)>,
}

impl Health {
    /// Health of `watchers` watchers, none listed yet.
    pub fn new(watchers: usize, error_window: Duration, recovery: Duration) -> Self {
        Self {
            error_window_ms: error_window.as_millis() as u64,
            recovery_ms: recovery.as_millis() as u64,
            unlisted: watchers,
            streak: None,
        }
    }

    /// A watcher completed its first list.
    pub fn listed(&mut self) {
        self.unlisted = self.unlisted.saturating_sub(1);
    }

    /// A list or watch failed at `now_ms`.
    pub fn error(&mut self, now_ms: u64) {
        self.recover(now_ms);
        self.streak = Some(match self.streak {
            Some((first, _)) => (first, now_ms),
            None => (now_ms, now_ms),
        });
    }

    /// Ends a streak whose last error is the recovery time old.
    fn recover(&mut self, now_ms: u64) {
        if let Some((_, last)) = self.streak
            && now_ms.saturating_sub(last) >= self.recovery_ms
        {
            self.streak = None;
        }
    }

    /// Whether lists are complete at `now_ms`.
    pub fn is_complete(&mut self, now_ms: u64) -> bool {
        self.recover(now_ms);
        let failing = self
            .streak
            .is_some_and(|(first, last)| last.saturating_sub(first) >= self.error_window_ms);
        self.unlisted == 0 && !failing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000;

    fn health() -> Health {
        Health::new(2, Duration::from_secs(60), Duration::from_secs(120))
    }

    #[test]
    fn incomplete_until_every_watcher_listed() {
        let mut h = health();
        assert!(!h.is_complete(0));
        h.listed();
        assert!(!h.is_complete(0));
        h.listed();
        assert!(h.is_complete(0));
    }

    #[test]
    fn errors_spanning_the_window_make_it_incomplete_until_the_recovery_time_passes() {
        let mut h = health();
        h.listed();
        h.listed();
        for t in [0, 10, 30, 59] {
            h.error(t * S);
            assert!(h.is_complete(t * S), "errors over {t} s only");
        }
        h.error(60 * S);
        assert!(!h.is_complete(60 * S), "a minute of errors");
        assert!(!h.is_complete(179 * S), "not yet two minutes without one");
        assert!(h.is_complete(180 * S), "two minutes without an error");
        // A new error starts a new streak.
        h.error(200 * S);
        assert!(h.is_complete(200 * S));
    }

    #[test]
    fn errors_a_recovery_apart_never_add_up() {
        let mut h = health();
        h.listed();
        h.listed();
        for t in (0..1_000).step_by(121) {
            h.error(t * S);
            assert!(h.is_complete(t * S), "{t}");
        }
    }
}
