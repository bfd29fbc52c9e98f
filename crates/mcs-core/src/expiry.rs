//! Self-preservation against mass expiry (docs/design.md §6).
//!
//! When a registry's replica stops receiving writes (a replication stall, a
//! stuck stream), every lease it serves runs out within one heartbeat
//! interval, although the writers are fine. A wave of expiries that large is
//! more likely the reader's fault than the writers', so the guard holds it
//! back for a bounded time; lists say `complete: false` meanwhile.
//!
//! A wave is counted in leases *at risk*: due now, or past the renewal their
//! own heartbeat interval promises ([`crate::View::leases_at_risk`]). In a
//! stall every lease misses its renewals within one heartbeat interval, long
//! before most of them run out; when one holder dies, the others keep
//! renewing and only its lease is at risk, so a lone expiry is never held
//! whatever the leases' lengths. A lease merely ending soon is not at risk:
//! counting those made healthy short leases look like a wave. Renewals
//! arriving during a hold shrink the wave until it no longer qualifies.

use std::collections::VecDeque;

/// The fewest holders (clusters; router replicas count as one) whose
/// leases a wave must span ([`crate::View::holders_at_risk`]). A replica
/// that stopped receiving writes loses every holder's renewals at once; one
/// writer that lets a dozen short leases of its own lapse together is one
/// holder, and its leases expire as they should.
pub const MIN_HOLDERS: usize = 2;

/// When expiries count as a suspicious wave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldPolicy {
    /// Share of served leases (0–1) that must be at risk (with the leases
    /// expired within `window_ms`) for a hold; 1 or more disables holds.
    pub threshold: f64,
    /// Fewest leases at risk that can be held (at least 2, so a lone expiry
    /// is never held).
    pub min_count: usize,
    /// How long applied expiries still count toward a wave, and how long
    /// after a release no new hold begins.
    pub window_ms: u64,
    /// How late past its holder's heartbeat interval (and the skew
    /// allowance) a renewal may reach the view before its lease counts as
    /// at risk: one poll of storage.
    pub renewal_slack_ms: u64,
    /// Longest hold; then everything due expires.
    pub max_hold_ms: u64,
}

/// What to do with the expiries due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let them expire.
    Expire,
    /// Hold them back; the hold began at `since_ms`.
    Hold {
        /// When the hold began.
        since_ms: u64,
        /// Whether it begins with this verdict.
        started: bool,
    },
}

/// The leases a verdict weighs, counted at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseCounts {
    /// Leases whose deadline has come: the expiries to judge.
    pub due: usize,
    /// Leases due, or past a renewal their holder should have made (the due
    /// ones included).
    pub at_risk: usize,
    /// Leases served (the due ones included).
    pub live: usize,
    /// The holders the leases at risk belong to
    /// ([`crate::View::holders_at_risk`]): a wave needs at least two.
    pub holders: usize,
}

/// Tracks recent expiries and the current hold.
#[derive(Debug, Clone)]
pub struct ExpiryGuard {
    policy: HoldPolicy,
    recent: VecDeque<u64>,
    held_since: Option<u64>,
    released_at: Option<u64>,
}

impl ExpiryGuard {
    /// A guard with nothing seen.
    pub fn new(policy: HoldPolicy) -> Self {
        let policy = HoldPolicy { min_count: policy.min_count.max(2), ..policy };
        Self { policy, recent: VecDeque::new(), held_since: None, released_at: None }
    }

    /// Whether a hold is in force.
    pub fn is_holding(&self) -> bool {
        self.held_since.is_some()
    }

    /// When the hold in force began.
    pub fn held_since_ms(&self) -> Option<u64> {
        self.held_since
    }

    /// The policy it judges by (its `min_count` at least 2).
    pub fn policy(&self) -> &HoldPolicy {
        &self.policy
    }

    /// How late a renewal may arrive before its lease is at risk.
    pub fn renewal_slack_ms(&self) -> u64 {
        self.policy.renewal_slack_ms
    }

    /// Judges the expiries due at `now_ms` among `leases`. Leases end one by
    /// one even in a stall, so the wave counts those that missed their
    /// renewals as well as those that just expired.
    pub fn judge(&mut self, now_ms: u64, leases: LeaseCounts) -> Verdict {
        let LeaseCounts { due, at_risk, live, holders } = leases;
        let horizon = now_ms.saturating_sub(self.policy.window_ms);
        while self.recent.front().is_some_and(|t| *t < horizon) {
            self.recent.pop_front();
        }
        if due == 0 {
            self.held_since = None;
            return Verdict::Expire;
        }
        if let Some(since_ms) = self.held_since {
            if now_ms.saturating_sub(since_ms) >= self.policy.max_hold_ms {
                self.held_since = None;
                self.released_at = Some(now_ms);
                return Verdict::Expire;
            }
            if self.is_wave(at_risk.max(due), live, holders) {
                return Verdict::Hold { since_ms, started: false };
            }
            self.held_since = None;
            return Verdict::Expire;
        }
        let cooling =
            self.released_at.is_some_and(|t| now_ms.saturating_sub(t) < self.policy.window_ms);
        if !cooling && self.is_wave(at_risk.max(due), live, holders) {
            self.held_since = Some(now_ms);
            return Verdict::Hold { since_ms: now_ms, started: true };
        }
        Verdict::Expire
    }

    /// Records `count` expiries applied at `now_ms`.
    pub fn expired(&mut self, now_ms: u64, count: usize) {
        self.recent.extend(std::iter::repeat_n(now_ms, count));
    }

    /// A wave: at least `min_count` leases ending, more than `threshold`
    /// of those served, held by at least [`MIN_HOLDERS`]: one writer's own
    /// leases, however many and however short, never hold expiries for
    /// everyone (issue 22).
    fn is_wave(&self, ending: usize, live: usize, holders: usize) -> bool {
        let wave = self.recent.len() + ending;
        let base = live + self.recent.len();
        holders >= MIN_HOLDERS
            && wave >= self.policy.min_count
            && (wave as f64) > self.policy.threshold * base as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> ExpiryGuard {
        ExpiryGuard::new(HoldPolicy {
            threshold: 0.5,
            min_count: 3,
            window_ms: 10_000,
            renewal_slack_ms: 2_000,
            max_hold_ms: 30_000,
        })
    }

    #[test]
    fn a_lone_expiry_is_never_held() {
        let mut g = guard();
        assert_eq!(
            g.judge(0, LeaseCounts { due: 1, at_risk: 1, live: 1, holders: 2 }),
            Verdict::Expire
        );
        let mut strict = ExpiryGuard::new(HoldPolicy {
            threshold: 0.0,
            min_count: 0,
            window_ms: 10_000,
            renewal_slack_ms: 2_000,
            max_hold_ms: 1,
        });
        assert_eq!(
            strict.judge(0, LeaseCounts { due: 1, at_risk: 1, live: 1, holders: 2 }),
            Verdict::Expire,
            "min_count is at least 2"
        );
    }

    #[test]
    fn a_wave_is_held_then_released_at_the_maximum() {
        let mut g = guard();
        assert_eq!(
            g.judge(1_000, LeaseCounts { due: 6, at_risk: 6, live: 10, holders: 2 }),
            Verdict::Hold { since_ms: 1_000, started: true }
        );
        assert!(g.is_holding());
        assert_eq!(g.held_since_ms(), Some(1_000));
        assert_eq!(g.policy().max_hold_ms, 30_000);
        assert_eq!(
            g.judge(20_000, LeaseCounts { due: 8, at_risk: 8, live: 10, holders: 2 }),
            Verdict::Hold { since_ms: 1_000, started: false }
        );
        assert_eq!(
            g.judge(31_000, LeaseCounts { due: 8, at_risk: 8, live: 10, holders: 2 }),
            Verdict::Expire,
            "released after the maximum"
        );
        g.expired(31_000, 8);
        assert!(!g.is_holding());
        assert_eq!(g.held_since_ms(), None);
        assert_eq!(
            g.judge(32_000, LeaseCounts { due: 2, at_risk: 2, live: 2, holders: 2 }),
            Verdict::Expire,
            "no new hold right after a release"
        );
    }

    #[test]
    fn a_wave_spread_over_the_window_is_counted() {
        let mut g = guard();
        for t in 0..2u64 {
            assert_eq!(
                g.judge(
                    t * 1_000,
                    LeaseCounts { due: 1, at_risk: 1, live: 10 - t as usize, holders: 2 }
                ),
                Verdict::Expire,
                "small so far"
            );
            g.expired(t * 1_000, 1);
        }
        // 2 recent + 4 due = 6 of (8 live + 2 recent): over half.
        assert!(matches!(
            g.judge(2_000, LeaseCounts { due: 4, at_risk: 4, live: 8, holders: 2 }),
            Verdict::Hold { .. }
        ));
    }

    #[test]
    fn leases_that_missed_their_renewals_count_toward_the_wave() {
        let mut g = guard();
        // One lease due now, but 5 more of 10 missed their renewals: a stall.
        assert!(matches!(
            g.judge(0, LeaseCounts { due: 1, at_risk: 6, live: 10, holders: 2 }),
            Verdict::Hold { started: true, .. }
        ));
        let mut g = guard();
        assert_eq!(
            g.judge(0, LeaseCounts { due: 1, at_risk: 1, live: 10, holders: 2 }),
            Verdict::Expire,
            "every other holder renews"
        );
    }

    #[test]
    fn renewals_during_a_hold_end_it() {
        let mut g = guard();
        assert!(matches!(
            g.judge(0, LeaseCounts { due: 6, at_risk: 6, live: 10, holders: 2 }),
            Verdict::Hold { .. }
        ));
        assert_eq!(
            g.judge(1_000, LeaseCounts { due: 1, at_risk: 1, live: 10, holders: 2 }),
            Verdict::Expire,
            "most leases were renewed"
        );
        assert!(!g.is_holding());
    }

    #[test]
    fn threshold_one_disables_holds() {
        let mut g = ExpiryGuard::new(HoldPolicy {
            threshold: 1.0,
            min_count: 3,
            window_ms: 10_000,
            renewal_slack_ms: 2_000,
            max_hold_ms: 30_000,
        });
        assert_eq!(
            g.judge(0, LeaseCounts { due: 10, at_risk: 10, live: 10, holders: 2 }),
            Verdict::Expire
        );
    }
}

#[cfg(test)]
mod rule_tests;
