//! Metric names of mcs-store, in one place, and the helpers that record
//! them. Call [`describe`] once at startup, after installing a recorder.
//!
//! Consumed capacity is fractional (an eventually consistent read costs half
//! a unit) and the `metrics` crate's counters are integers, so it is counted
//! in thousandths of a unit (`…_capacity_milliunits_total`): a counter that
//! sums across calls and replicas; `rate(…) / 1000` is units per second.

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};
use std::time::Duration;

/// Counter of storage requests, by `op` and `outcome` (`ok`, `refused` for a
/// conditional write the rule refused, `timeout` for a call past its
/// deadline, `error`).
pub const REQUESTS_TOTAL: &str = "mcs_store_requests_total";
/// Histogram of request latency in seconds (SDK retries included), by `op`.
pub const REQUEST_DURATION_SECONDS: &str = "mcs_store_request_duration_seconds";
/// Counter of read capacity consumed, in thousandths of a unit, by `op`.
pub const READ_CAPACITY_MILLIUNITS_TOTAL: &str = "mcs_store_read_capacity_milliunits_total";
/// Counter of write capacity consumed, in thousandths of a unit, by `op`.
pub const WRITE_CAPACITY_MILLIUNITS_TOTAL: &str = "mcs_store_write_capacity_milliunits_total";
/// Counter of stored items a read skipped, by `reason` (`payload_version`:
/// written by a newer binary; `undecodable`: malformed).
pub const ITEMS_SKIPPED_TOTAL: &str = "mcs_store_items_skipped_total";

/// Label: the storage operation (`put`, `renew`, `get`, `scan`,
/// `query_changes`, …).
pub const LABEL_OP: &str = "op";
/// Label: how a request ended.
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: why an item was skipped.
pub const LABEL_REASON: &str = "reason";

/// Describes every metric of this crate to the installed recorder.
pub fn describe() {
    describe_counter!(REQUESTS_TOTAL, Unit::Count, "storage requests by operation and outcome");
    describe_histogram!(
        REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "storage request latency including retries"
    );
    describe_counter!(
        READ_CAPACITY_MILLIUNITS_TOTAL,
        Unit::Count,
        "read capacity consumed, in thousandths of a capacity unit"
    );
    describe_counter!(
        WRITE_CAPACITY_MILLIUNITS_TOTAL,
        Unit::Count,
        "write capacity consumed, in thousandths of a capacity unit"
    );
    describe_counter!(
        ITEMS_SKIPPED_TOTAL,
        Unit::Count,
        "stored items skipped because this binary cannot read them"
    );
}

/// Records one request of `op` that ended with `outcome` after `elapsed`.
pub(crate) fn request(op: &'static str, outcome: &'static str, elapsed: Duration) {
    counter!(REQUESTS_TOTAL, LABEL_OP => op, LABEL_OUTCOME => outcome).increment(1);
    histogram!(REQUEST_DURATION_SECONDS, LABEL_OP => op).record(elapsed.as_secs_f64());
}

/// The operations that read, and those that write (conditionally: their
/// outcome may be `refused`), as the series label them.
pub const READ_OPS: [&str; 6] =
    ["get", "scan", "query_changes", "query_lease_ends", "query_change_stamps", "get_schema"];
/// See [`READ_OPS`].
pub const WRITE_OPS: [&str; 3] = ["put", "renew", "put_schema"];

/// Every reason of [`ITEMS_SKIPPED_TOTAL`].
pub const SKIP_REASONS: [&str; 2] = ["payload_version", "undecodable"];

/// Registers every counter of this crate at zero, so that `increase()`
/// sees the first error rather than a series appearing at 1.
pub fn register_zero() {
    for op in READ_OPS {
        for outcome in ["ok", "error", "timeout"] {
            counter!(REQUESTS_TOTAL, LABEL_OP => op, LABEL_OUTCOME => outcome).increment(0);
        }
        counter!(READ_CAPACITY_MILLIUNITS_TOTAL, LABEL_OP => op).increment(0);
    }
    for op in WRITE_OPS {
        for outcome in ["ok", "refused", "error", "timeout"] {
            counter!(REQUESTS_TOTAL, LABEL_OP => op, LABEL_OUTCOME => outcome).increment(0);
        }
        counter!(WRITE_CAPACITY_MILLIUNITS_TOTAL, LABEL_OP => op).increment(0);
    }
    for reason in SKIP_REASONS {
        counter!(ITEMS_SKIPPED_TOTAL, LABEL_REASON => reason).increment(0);
    }
}

/// Thousandths of a unit, rounded to the nearest.
fn milli(units: f64) -> u64 {
    (units * 1000.0).round().max(0.0) as u64
}

/// Counts the read capacity `units` consumed by one call of `op`.
pub(crate) fn read_units(op: &'static str, units: f64) {
    counter!(READ_CAPACITY_MILLIUNITS_TOTAL, LABEL_OP => op).increment(milli(units));
}

/// Counts the write capacity `units` consumed by one call of `op`.
pub(crate) fn write_units(op: &'static str, units: f64) {
    counter!(WRITE_CAPACITY_MILLIUNITS_TOTAL, LABEL_OP => op).increment(milli(units));
}

/// Counts one item skipped for `reason`.
pub(crate) fn skipped(reason: &'static str) {
    counter!(ITEMS_SKIPPED_TOTAL, LABEL_REASON => reason).increment(1);
}

#[cfg(test)]
mod tests {
    #[test]
    fn capacity_is_counted_in_thousandths() {
        assert_eq!(super::milli(0.5), 500);
        assert_eq!(super::milli(1.0), 1_000);
        assert_eq!(super::milli(12.75), 12_750);
        assert_eq!(super::milli(0.0), 0);
    }
}
