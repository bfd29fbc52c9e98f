//! The registrar's hybrid logical clock (DESIGN §3).

/// Generations for writers that do not order their own intents:
/// `max(now_ms << 16, last + 1, seen + 1)`. Everything the process reads or
/// is refused with is folded in by [`Hlc::observe`], so a restarted writer
/// never goes below what it has seen and wall-clock order holds in practice.
#[derive(Debug, Clone, Default)]
pub struct Hlc {
    last: u64,
}

impl Hlc {
    /// A clock that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next generation, strictly above every one issued or observed.
    pub fn next(&mut self, now_ms: u64) -> u64 {
        let generation = (now_ms << 16).max(self.last.saturating_add(1));
        self.last = generation;
        generation
    }

    /// Folds in a generation read from storage or named by a refusal.
    pub fn observe(&mut self, generation: u64) {
        self.last = self.last.max(generation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_wall_clock_and_never_repeats() {
        let mut hlc = Hlc::new();
        let a = hlc.next(1_000);
        assert_eq!(a, 1_000 << 16);
        let b = hlc.next(1_000);
        assert_eq!(b, a + 1, "same millisecond: last + 1");
        let c = hlc.next(999);
        assert_eq!(c, b + 1, "clock went back: still increasing");
        let d = hlc.next(2_000);
        assert_eq!(d, 2_000 << 16);
    }

    #[test]
    fn observed_generations_are_passed() {
        let mut hlc = Hlc::new();
        hlc.observe(5_000 << 16);
        assert_eq!(hlc.next(1_000), (5_000 << 16) + 1, "seen + 1");
        hlc.observe(3);
        assert_eq!(hlc.next(1_000), (5_000 << 16) + 2, "older observations change nothing");
    }
}
