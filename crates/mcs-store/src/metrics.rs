//! Metric names of mcs-store, in one place, and the helpers that record
//! them. Call [`describe`] once at startup, after installing a recorder.
//!
//! Consumed capacity is fractional (an eventually consistent read costs half
//! a unit), which the `metrics` crate's integer counters cannot add up; it is
//! recorded as histograms of units per call, whose `_sum` is the total.

use metrics::{Unit, counter, describe_counter, describe_histogram, histogram};
use std::time::Duration;

/// Counter of storage requests, by `op` and `outcome` (`ok`, `refused` for a
/// conditional write the rule refused, `error`).
pub const REQUESTS_TOTAL: &str = "mcs_store_requests_total";
/// Histogram of request latency in seconds (SDK retries included), by `op`.
pub const REQUEST_DURATION_SECONDS: &str = "mcs_store_request_duration_seconds";
/// Histogram of read capacity units consumed per call, by `op`.
pub const READ_CAPACITY_UNITS: &str = "mcs_store_read_capacity_units";
/// Histogram of write capacity units consumed per call, by `op`.
pub const WRITE_CAPACITY_UNITS: &str = "mcs_store_write_capacity_units";
/// Counter of stored items a read skipped, by `reason` (`payload_version`:
/// written by a newer binary; `undecodable`: malformed).
pub const ITEMS_SKIPPED_TOTAL: &str = "mcs_store_items_skipped_total";

/// Label: the storage operation (`put`, `get`, `scan`, `query_changes`, …).
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
    describe_histogram!(READ_CAPACITY_UNITS, Unit::Count, "read capacity units consumed per call");
    describe_histogram!(
        WRITE_CAPACITY_UNITS,
        Unit::Count,
        "write capacity units consumed per call"
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

/// Records the read capacity `units` consumed by one call of `op`.
pub(crate) fn read_units(op: &'static str, units: f64) {
    histogram!(READ_CAPACITY_UNITS, LABEL_OP => op).record(units);
}

/// Records the write capacity `units` consumed by one call of `op`.
pub(crate) fn write_units(op: &'static str, units: f64) {
    histogram!(WRITE_CAPACITY_UNITS, LABEL_OP => op).record(units);
}

/// Counts one item skipped for `reason`.
pub(crate) fn skipped(reason: &'static str) {
    counter!(ITEMS_SKIPPED_TOTAL, LABEL_REASON => reason).increment(1);
}
