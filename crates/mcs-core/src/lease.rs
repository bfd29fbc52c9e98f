//! The lease policy: what the registry grants.

use mcs_api::Lease;

/// The longest lease the registry grants.
pub const MAX_LEASE_SECS: u64 = Lease::MAX_DURATION_SECS;

/// The default retention of dead items: two days.
pub const DEFAULT_RETENTION_SECS: u64 = 2 * 86_400;

/// Checks that a retention keeps a tombstone longer than any older record
/// of its key can stay live: that record's lease (at most
/// [`MAX_LEASE_SECS`]) began at most one skew allowance before the
/// tombstone was written, and is served one skew allowance past its end.
/// Storage deletes the tombstone `retention` after its write.
pub fn check_retention(retention_secs: u64, skew_allowance_ms: u64) -> Result<(), String> {
    let min_ms = MAX_LEASE_SECS * 1000 + 2 * skew_allowance_ms;
    if retention_secs.saturating_mul(1000) < min_ms {
        return Err(format!(
            "{retention_secs}s is below the minimum of {}s: one day (the longest lease) plus \
             twice the skew allowance, so that a tombstone outlives every older record of its key",
            min_ms.div_ceil(1000)
        ));
    }
    Ok(())
}

/// Lease duration and heartbeat interval the registry grants, checked once:
/// `0 < heartbeat < duration <= 1 day`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasePolicy {
    lease: Lease,
}

impl LeasePolicy {
    /// A policy, or why these values are refused.
    pub fn new(duration_secs: u64, heartbeat_interval_secs: u64) -> Result<Self, String> {
        if duration_secs > MAX_LEASE_SECS {
            return Err(format!(
                "lease duration {duration_secs}s is over the maximum of {MAX_LEASE_SECS}s (one day)"
            ));
        }
        Ok(Self { lease: Lease::new(duration_secs, heartbeat_interval_secs)? })
    }

    /// The policy of a lease a writer asked for (already checked while
    /// parsing, so only the one-day bound is checked again here).
    pub fn from_lease(lease: Lease) -> Result<Self, String> {
        Self::new(lease.duration_secs, lease.heartbeat_interval_secs)
    }

    /// The lease as granted on the wire.
    pub fn lease(&self) -> Lease {
        self.lease
    }

    /// The terms a record leased under this policy carries.
    pub fn terms(&self) -> crate::record::LeaseTerms {
        crate::record::LeaseTerms {
            duration_ms: self.lease.duration_secs.saturating_mul(1000),
            heartbeat_ms: self.lease.heartbeat_interval_secs.saturating_mul(1000),
        }
    }

    /// How far past a poll's start a reader asks for lease ends
    /// (docs/design.md §6 "Renewals and the change feed"): far enough that
    /// a lease of this policy renewed on time is never in the answer
    /// (`duration - heartbeat - skew - refresh`), and never less than the
    /// lookback plus two polls, so that any lease either is in the answer
    /// while live or is raised past the next poll by its absence.
    pub fn horizon_ms(&self, skew_ms: u64, refresh_ms: u64, lookback_ms: u64) -> u64 {
        let terms = self.terms();
        let on_time = terms
            .duration_ms
            .saturating_sub(terms.heartbeat_ms)
            .saturating_sub(skew_ms)
            .saturating_sub(refresh_ms);
        on_time.max(lookback_ms.saturating_add(refresh_ms.saturating_mul(2)))
    }

    /// When a lease granted at `now_ms` expires.
    pub fn until(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.lease.duration_secs.saturating_mul(1000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_shorter_than_the_longest_lease_plus_skew_is_refused() {
        assert!(check_retention(0, 1_000).is_err());
        assert!(check_retention(MAX_LEASE_SECS, 1_000).is_err(), "a lease may outlive it");
        assert!(check_retention(MAX_LEASE_SECS + 2, 1_000).is_ok());
        assert!(check_retention(MAX_LEASE_SECS, 0).is_ok());
        assert!(check_retention(DEFAULT_RETENTION_SECS, 1_000).is_ok());
    }

    #[test]
    fn policy_bounds() {
        let cases = [
            (30, 10, true),
            (MAX_LEASE_SECS, 60, true),
            (MAX_LEASE_SECS + 1, 60, false),
            (30, 30, false),
            (30, 0, false),
            (0, 0, false),
        ];
        for (duration, interval, ok) in cases {
            assert_eq!(LeasePolicy::new(duration, interval).is_ok(), ok, "{duration}/{interval}");
        }
        let policy = LeasePolicy::new(30, 10).unwrap();
        assert_eq!(policy.until(1_000), 31_000);
        assert_eq!(policy.lease().heartbeat_interval_secs, 10);
    }
}

#[cfg(test)]
mod rule_tests;
