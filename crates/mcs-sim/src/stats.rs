//! What the schedules exercised, summed over a run, so a reader can see the
//! rules were actually put under load (and a test can refuse a vacuous run).

use std::fmt;
use std::ops::AddAssign;

macro_rules! stats {
    ($($(#[$doc:meta])* $field:ident,)*) => {
        /// Counters of one schedule or of a whole run.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Stats {
            $($(#[$doc])* pub $field: u64,)*
        }

        impl AddAssign<&Stats> for Stats {
            fn add_assign(&mut self, other: &Stats) {
                $(self.$field += other.$field;)*
            }
        }

        impl Stats {
            /// Every counter with its name, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field),)*]
            }
        }
    };
}

stats! {
    /// Schedules run.
    schedules,
    /// Events processed.
    events,
    /// Writes the registrar's conditional write accepted (Apply or Renew).
    writes_acked,
    /// Of those, renewals of the stored version (heartbeats).
    renewals_acked,
    /// Of those, tombstones.
    tombstones_acked,
    /// Writes refused as stale (after the registrar's own retry).
    refused_stale,
    /// Writes refused because another incarnation holds a live lease.
    refused_owned,
    /// Refusals that came from the judgement against the view.
    refused_by_view,
    /// Refusals that came from the conditional write on the local item.
    refused_by_item,
    /// HLC writes retried once with a fresh generation after `Stale`.
    hlc_retries,
    /// Owned refusals while the merged view held no live lease of that
    /// owner: a stale item of this region still fenced the key.
    owned_by_stale_item,
    /// Withdrawals answered `NotFound` while another region held the record live.
    withdraw_not_found_while_live,
    /// Requests refused because the registrar was down or not yet ready.
    unavailable,
    /// Relays that switched registrar to another region mid-lease.
    failovers_cross_region,
    /// Relays that switched registrar within their region.
    failovers_in_region,
    /// Relay incarnations started (the first one and every restart).
    incarnations,
    /// Relays that crashed without withdrawing.
    relay_crashes,
    /// Writes sent with the client's own generation.
    client_ordered_writes,
    /// Writes whose generation the registrar's HLC assigned.
    hlc_writes,
    /// Requests delivered a second time, late.
    late_requests,
    /// Late copies that were acknowledged with a version above an acknowledged
    /// withdrawal of the same incarnation, sent before that withdrawal
    /// (registrar-assigned generations cannot tell them from a new write).
    late_resurrections,
    /// Registrar processes crashed.
    registrar_crashes,
    /// Network partitions between regions.
    partitions,
    /// Replication deliveries applied.
    deliveries,
    /// Deliveries lost (or cut off) and retried later.
    redeliveries,
    /// Deliveries a replica ignored as older than what it held.
    deliveries_ignored,
    /// Delta polls.
    delta_polls,
    /// Full reads.
    full_reads,
    /// Renewals stored with the item's `changed_at` kept (out of the
    /// `changes` index).
    renewals_out_of_feed,
    /// Leases a view moved to a later end the lease ends read returned.
    leases_renewed_by_read,
    /// Leases a view raised because the lease ends read did not return
    /// them (stored beyond the window).
    leases_extended_by_absence,
    /// Keys a lease ends read could not settle, read whole from the replica
    /// (`View::leases_to_recheck`).
    leases_reread,
    /// Writes a delta poll's read of change stamps showed behind its window
    /// that the view lacked, read by reaching back to them.
    changes_reached_back,
    /// Images that reached their replica's indexes later than the item
    /// took them (index lag).
    index_lagged_images,
    /// Lease ends a view held above every stored one of their version
    /// after its delta polls missed a newer live version of the key (invariant
    /// `LeaseBound` lets them off unless strict; `tests/known_issues.rs`).
    raised_after_missed_change,
    /// Keys a delta poll promised nothing for because another item of the
    /// view's version had an end in the lease ends window while the latest
    /// lay beyond it (invariant `RenewalServed` lets them off unless
    /// strict; `tests/known_issues.rs`).
    renewals_masked,
    /// Promises (invariant `RenewalServed`) checked and kept: a view
    /// served a key because its last poll could read a lease of its
    /// version still running.
    renewals_served,
    /// Times a view had to be rebuilt because it disagreed with the merge
    /// rule (always 0 with the real rules).
    view_rebuilds,
    /// Records full reads dropped from a view (only after TTL deleted them).
    records_dropped,
    /// Winners a full read replaced by an older version it read, no item
    /// holding theirs any more (TTL deleted it: `View::replace_all`).
    records_retired,
    /// TTL sweeps of a replica.
    ttl_sweeps,
    /// Items TTL sweeps deleted (their `ttl` had passed in that replica).
    ttl_deletes,
    /// Tombstones TTL deletes took from a replica (sweeps and replicated
    /// deletes).
    ttl_tombstones_deleted,
    /// Replicated TTL deletes that deleted an item in another replica.
    ttl_deletes_replicated,
    /// Replicated TTL deletes that found an image stored after the delete,
    /// which stays (last-writer-wins by time).
    ttl_deletes_outlived,
    /// Expired images a sweep found older than their origin's latest (a
    /// newer image, written after the `ttl` passed, not yet replicated
    /// there): deleted only with `strict_ttl_sweeps`, since the replicated
    /// delete erases the newer image (`tests/known_issues.rs`).
    ttl_deletes_of_stale_images,
    /// Newer images a TTL delete erased: deleted in a replica by a delete
    /// made on an older image, or refused on delivery by such a delete
    /// (last-writer-wins by time). See `tests/known_issues.rs`.
    ttl_deletes_erasing_newer,
    /// Deliveries refused because the replica deleted the item after the
    /// origin stored the image.
    deliveries_refused_by_delete,
    /// Times a replica's winner of a key was an older leased item that a
    /// tombstone TTL took from it had superseded, lapsed as invariant
    /// `LeftBehind` requires.
    superseded_lapsed_after_ttl,
    /// Views compared at quiescence.
    views_compared,
    /// Keys whose winning records were compared across views at quiescence.
    keys_compared,
    /// Live pools served at the common instant of the live-lease comparison.
    live_pools_compared,
    /// Winners at quiescence that no replica holds as such: equal version,
    /// content and lease, but the write time of an acknowledged retry that
    /// the replica did not store (see `check::same_winner`).
    view_only_images,
    /// Keys that ended as tombstones.
    final_tombstones,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, value) in self.fields() {
            writeln!(f, "  {name:<32} {value}")?;
        }
        Ok(())
    }
}
