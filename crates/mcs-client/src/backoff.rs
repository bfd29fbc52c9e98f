//! Jittered exponential backoff, shared by retries, watches and keepers.

use std::time::Duration;

/// Delays between attempts: `initial`, doubling up to `max`, each drawn
/// uniformly from its upper half so that callers started together spread
/// out; never shorter than a `Retry-After` the registry asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay (before honouring `Retry-After`).
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_millis(100), max: Duration::from_secs(5) }
    }
}

/// The state of one run of attempts (`Attempts::new(policy)`).
#[derive(Debug)]
pub struct Attempts {
    policy: Backoff,
    next: Duration,
}

impl Attempts {
    /// The first attempt's state.
    pub fn new(policy: Backoff) -> Self {
        Self { policy, next: policy.initial }
    }

    /// The delay before the next attempt, at least `retry_after`.
    pub fn delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let ceiling = self.next.min(self.policy.max);
        self.next = (self.next * 2).min(self.policy.max);
        jitter(ceiling, 0.5).max(retry_after.unwrap_or_default())
    }

    /// Back to the first delay after a success.
    pub fn reset(&mut self) {
        self.next = self.policy.initial;
    }
}

/// A duration drawn uniformly from `[d × low, d]`.
pub(crate) fn jitter(d: Duration, low: f64) -> Duration {
    d.mul_f64(low + (1.0 - low) * fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_max_and_honour_retry_after() {
        let mut a = Attempts::new(Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(400),
        });
        let ceilings = [100, 200, 400, 400];
        for ceiling in ceilings {
            let d = a.delay(None);
            assert!(d <= Duration::from_millis(ceiling), "{d:?} above {ceiling}");
            assert!(d >= Duration::from_millis(ceiling / 2), "{d:?} below half of {ceiling}");
        }
        assert_eq!(a.delay(Some(Duration::from_secs(3))), Duration::from_secs(3));
        a.reset();
        assert!(a.delay(None) <= Duration::from_millis(100));
    }
}
