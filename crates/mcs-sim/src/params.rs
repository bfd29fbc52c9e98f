//! The shape of one schedule, drawn from its seed.

use crate::rng::Rng;

/// True time when a schedule starts: 2026-01-01T00:00:00Z in epoch
/// milliseconds, so HLC generations (`now_ms << 16`) have realistic size.
pub const EPOCH_MS: u64 = 1_767_225_600_000;

/// The table's retention of dead items (the `ttl` is a record's expiry
/// plus this; docs/design.md §3): the simulation's day. At least the
/// longest lease (15 s with lease drift) plus twice the skew allowance, as
/// `mcs_core::lease::check_retention` requires, and twice the longest
/// partition (30 s): against the replication lag and partitions the
/// schedules draw, it stands where two days stand against seconds.
pub const RETENTION_MS: u64 = 60_000;

/// The longest interval between two TTL sweeps of a replica: how late
/// after its `ttl` an item is deleted (DynamoDB: within days).
pub const SWEEP_EVERY_MS: u64 = 10_000;

/// Everything fixed for one schedule.
#[derive(Debug, Clone)]
pub struct Params {
    /// Number of regions (2–3).
    pub regions: usize,
    /// The region of each registrar slot (1–2 per region).
    pub registrar_regions: Vec<usize>,
    /// Number of pool keys the relays contend on.
    pub pools: usize,
    /// Lease each registrar grants, per slot (equal unless drift is on).
    pub lease_ms: Vec<u64>,
    /// Relays heartbeat this often (3–5 s against 10 s leases: the longer,
    /// the closer a late heartbeat comes to expiry).
    pub heartbeat_ms: u64,
    /// The views' skew allowance.
    pub skew_allowance_ms: u64,
    /// Registrar clocks are off true time by at most this much.
    pub max_offset_ms: u64,
    /// How far behind its watermark a delta poll reaches.
    pub lookback_ms: u64,
    /// The longest interval between two polls of a registrar (the
    /// registry's refresh interval; polls come every 0.5 s to this).
    pub refresh_ms: u64,
    /// The longest time an image takes to reach a replica's indexes
    /// (`changes`, `lease_ends`) after the item took it: what the lookback
    /// leaves once two clocks' offsets are allowed for (the design's
    /// assumption that a write older than the lookback is in the index).
    pub max_index_lag_ms: u64,
    /// Events processed before quiescing.
    pub steps: usize,
    /// Chance (‰) a replication delivery is lost and retried later.
    pub loss_per_mille: u32,
    /// Chance (‰) a delivered change is delivered again later.
    pub duplicate_per_mille: u32,
    /// Chance (‰) a request is also sent again, arriving late.
    pub late_request_per_mille: u32,
    /// Chance (‰) a poll is a full read.
    pub full_read_per_mille: u32,
    /// The table's retention ([`Knobs::retention_ms`]).
    pub retention_ms: u64,
}

/// Knobs the caller sets for all schedules of a run: variations of the
/// registrar's model, to try a suspected problem or a proposed fix.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    /// Let registrars grant different lease durations (a rolling deploy
    /// that changes `--lease-duration`).
    pub lease_drift: bool,
    /// Apply to the registrar's own view only what its conditional write
    /// stored, instead of every acknowledged record (the registrar applies
    /// a renewal that extended nothing, and so was not stored, too).
    pub view_applies_stored_only: bool,
    /// How a reader confirms its leases from the stored lease ends after a
    /// delta poll.
    pub confirm: Confirm,
    /// Where a delta poll's read of changes starts.
    pub reach: Reach,
    /// The table's retention ([`RETENTION_MS`] unless set lower, to try
    /// the shortest `mcs_core::lease::check_retention` accepts).
    pub retention_ms: u64,
}

/// Where a delta poll's read of changes starts (docs/design.md §6,
/// "Reaching back for late changes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The window's change stamps first, then the changes from just before
    /// the earliest write there the view has not seen, or none
    /// ([`mcs_core::View::delta_start`]), as the registry's reader does.
    Stamps,
    /// At the watermark less the lookback, reading it all again: the
    /// reader before schema 5, and on a store without change stamps.
    Lookback,
    /// BROKEN on purpose: at the watermark, never reaching back, so a
    /// write that reaches the replica's indexes after the poll that covered
    /// its `changed_at` is missed until a full read.
    Watermark,
}

/// How a reader confirms its leases after a delta poll (docs/design.md §6,
/// "Renewals and the change feed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// [`mcs_core::View::confirm_leases`] over the reader's window, then
    /// the keys [`mcs_core::View::leases_to_recheck`] names read whole
    /// from the replica, as the registry's reader does.
    Real,
    /// [`mcs_core::View::confirm_leases`] alone, without reading whole the
    /// keys the read cannot settle: what the findings of
    /// `tests/known_issues.rs` were found with.
    NoRecheck,
    /// BROKEN on purpose: never reads lease ends, so renewals (which keep
    /// `changed_at`) reach the view only through full reads.
    Never,
    /// BROKEN on purpose: raises a lease absent from the read to the
    /// window's end, without the `settled + duration` cap that allows for
    /// a write too recent to be in the index yet.
    Uncapped,
}

impl Default for Knobs {
    /// The registrar as it is.
    fn default() -> Self {
        Self {
            lease_drift: false,
            view_applies_stored_only: false,
            confirm: Confirm::Real,
            reach: Reach::Stamps,
            retention_ms: RETENTION_MS,
        }
    }
}

impl Params {
    /// Draws a schedule's shape.
    pub fn draw(rng: &mut Rng, knobs: Knobs) -> Self {
        let regions = rng.range(2, 3) as usize;
        let mut registrar_regions = Vec::new();
        for region in 0..regions {
            for _ in 0..rng.range(1, 2) {
                registrar_regions.push(region);
            }
        }
        let base_lease = 10_000;
        let lease_ms = registrar_regions
            .iter()
            .map(|_| {
                if knobs.lease_drift && rng.per_mille(500) {
                    base_lease + 5_000
                } else {
                    base_lease
                }
            })
            .collect();
        let max_offset_ms = 500;
        // Drawn in the order they always were, so seeds keep their shape.
        let pools = rng.range(1, 3) as usize;
        let heartbeat_ms = [3_000, 3_000, 4_000, 5_000][rng.index(4)];
        let lookback_ms = if rng.per_mille(300) { 1_000 } else { 10_000 };
        Self {
            regions,
            registrar_regions,
            pools,
            lease_ms,
            heartbeat_ms,
            skew_allowance_ms: 1_000,
            max_offset_ms,
            lookback_ms,
            refresh_ms: 3_000,
            max_index_lag_ms: lookback_ms.saturating_sub(2 * max_offset_ms).min(2_000),
            steps: rng.range(40, 260) as usize,
            loss_per_mille: rng.range(0, 200) as u32,
            duplicate_per_mille: rng.range(0, 50) as u32,
            late_request_per_mille: rng.range(0, 120) as u32,
            full_read_per_mille: rng.range(30, 200) as u32,
            retention_ms: knobs.retention_ms,
        }
    }
}
