//! The backoff between attempts to reach storage at startup, shared by
//! mcs-admin (which gives up after `--storage-connect-timeout-secs`) and the
//! registry (which serves, not ready, while it retries).

use std::time::Duration;

/// Delays doubling from an initial one up to a cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    /// Starts at `initial`, never above `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self { next: initial.min(max), max }
    }

    /// The delay before the next attempt; each call doubles the next one.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(3));
        let delays: Vec<u128> = (0..5).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, vec![500, 1000, 2000, 3000, 3000]);
    }
}
