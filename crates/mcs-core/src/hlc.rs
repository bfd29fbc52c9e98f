//! The registrar's hybrid logical clock (docs/design.md, "Records and
//! versions").
//!
//! Generations are in HLC units: Unix milliseconds shifted left by 16 bits
//! (`now_ms << 16`, i.e. milliseconds × 65,536), the low 16 bits a counter.
//! Clients that order their own intents send generations in the same units
//! (docs/api.md). Everything a process reads is folded in, but never past
//! [`Hlc::bound`]: a generation far in the future (a client's bug, a clock
//! gone wild, `u64::MAX`) must not drag the clock of every key with it.

use std::fmt;

/// Bits of a generation below the millisecond.
pub const COUNTER_BITS: u32 = 16;

/// The default allowance of a generation ahead of the registry's clock.
pub const DEFAULT_MAX_AHEAD_MS: u64 = 5 * 60 * 1000;

/// A generation in HLC units at `ms` Unix milliseconds (its counter zero),
/// saturating at `u64::MAX` (past the year 10889).
pub fn generation_at(ms: u64) -> u64 {
    ms.checked_shl(COUNTER_BITS).filter(|g| g >> COUNTER_BITS == ms).unwrap_or(u64::MAX)
}

/// The clock cannot issue a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockError {
    /// The wall clock is beyond what 48 bits of milliseconds hold.
    WallClockOutOfRange {
        /// The wall clock.
        now_ms: u64,
    },
    /// Every generation up to `u64::MAX` has been issued.
    Exhausted,
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::WallClockOutOfRange { now_ms } => {
                write!(f, "wall clock {now_ms} ms is beyond the range of generations")
            }
            ClockError::Exhausted => f.write_str("the hybrid logical clock is exhausted"),
        }
    }
}

impl std::error::Error for ClockError {}

/// Generations for writers that do not order their own intents:
/// `max(now_ms << 16, last + 1, seen + 1)`. What the process reads or is
/// refused with is folded in by [`Hlc::observe`], capped at
/// [`Hlc::bound`], so a restarted writer never goes below what it has seen,
/// wall-clock order holds in practice, and no single item can push the
/// clock out of reach.
#[derive(Debug, Clone)]
pub struct Hlc {
    last: u64,
    max_ahead_ms: u64,
}

impl Default for Hlc {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_AHEAD_MS)
    }
}

impl Hlc {
    /// A clock that has seen nothing and folds in generations at most
    /// `max_ahead_ms` ahead of the wall clock.
    pub fn new(max_ahead_ms: u64) -> Self {
        Self { last: 0, max_ahead_ms }
    }

    /// The allowance of a generation ahead of the wall clock.
    pub fn max_ahead_ms(&self) -> u64 {
        self.max_ahead_ms
    }

    /// The highest generation acceptable at `now_ms`: the wall clock plus
    /// the allowance, in HLC units (with a full counter).
    pub fn bound(&self, now_ms: u64) -> u64 {
        generation_at(now_ms.saturating_add(self.max_ahead_ms)) | ((1 << COUNTER_BITS) - 1)
    }

    /// The next generation, strictly above every one issued or observed.
    pub fn next(&mut self, now_ms: u64) -> Result<u64, ClockError> {
        let wall = now_ms
            .checked_shl(COUNTER_BITS)
            .filter(|g| g >> COUNTER_BITS == now_ms)
            .ok_or(ClockError::WallClockOutOfRange { now_ms })?;
        let next = self.last.checked_add(1).ok_or(ClockError::Exhausted)?;
        let generation = wall.max(next);
        self.last = generation;
        Ok(generation)
    }

    /// Folds in a generation read from storage or named by a refusal at
    /// `now_ms`, capped at [`Hlc::bound`].
    pub fn observe(&mut self, generation: u64, now_ms: u64) {
        self.last = self.last.max(generation.min(self.bound(now_ms)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_wall_clock_and_never_repeats() {
        let mut hlc = Hlc::default();
        let a = hlc.next(1_000).unwrap();
        assert_eq!(a, 1_000 << 16);
        let b = hlc.next(1_000).unwrap();
        assert_eq!(b, a + 1, "same millisecond: last + 1");
        let c = hlc.next(999).unwrap();
        assert_eq!(c, b + 1, "clock went back: still increasing");
        let d = hlc.next(2_000).unwrap();
        assert_eq!(d, 2_000 << 16);
    }

    #[test]
    fn observed_generations_are_passed() {
        let mut hlc = Hlc::default();
        hlc.observe(5_000 << 16, 1_000);
        assert_eq!(hlc.next(1_000).unwrap(), (5_000 << 16) + 1, "seen + 1");
        hlc.observe(3, 1_000);
        assert_eq!(
            hlc.next(1_000).unwrap(),
            (5_000 << 16) + 2,
            "older observations change nothing"
        );
    }

    #[test]
    fn a_generation_far_ahead_moves_the_clock_no_further_than_the_bound() {
        let now = 1_767_225_600_000;
        let mut hlc = Hlc::new(60_000);
        hlc.observe(u64::MAX, now);
        let next = hlc.next(now).unwrap();
        assert_eq!(next, hlc.bound(now) + 1, "capped at the bound");
        assert!(next <= generation_at(now + 60_001), "within the allowance");
        // The clock keeps issuing distinct, increasing generations.
        let after = hlc.next(now).unwrap();
        assert!(after > next);
        // Once the wall clock passes the bound, it leads again.
        assert_eq!(hlc.next(now + 120_000).unwrap(), generation_at(now + 120_000));
    }

    #[test]
    fn exhaustion_and_an_impossible_wall_clock_are_errors_not_a_stuck_clock() {
        let mut hlc = Hlc { last: u64::MAX - 1, max_ahead_ms: 0 };
        assert_eq!(hlc.next(1).unwrap(), u64::MAX);
        assert_eq!(hlc.next(1), Err(ClockError::Exhausted));
        let mut fresh = Hlc::default();
        assert_eq!(fresh.next(1 << 48), Err(ClockError::WallClockOutOfRange { now_ms: 1 << 48 }));
        assert_eq!(generation_at(1 << 48), u64::MAX, "saturates");
    }
}

#[cfg(test)]
mod rule_tests;
