//! Metric names of the controller, described once at startup. Every series
//! is listed in docs/configuration.md.

use metrics::{Unit, describe_counter, describe_gauge};

/// Reconciles, by controller (`export`, `auto_export`, `import`) and
/// outcome (`ok`, `error`, `requeue`).
pub const RECONCILES: &str = "mcs_controller_reconciles_total";
/// Registry calls, by call and outcome.
pub const REGISTRY_CALLS: &str = "mcs_controller_registry_calls_total";
/// ServiceExports of this cluster, by condition (`Valid`, `Ready`,
/// `Conflict`) and status (`True`, `False`, `Unknown`).
pub const EXPORTS: &str = "mcs_controller_exports";

/// Describes every metric (once, at startup).
pub fn describe() {
    describe_counter!(RECONCILES, Unit::Count, "Reconciles, by controller and outcome.");
    describe_counter!(REGISTRY_CALLS, Unit::Count, "Registry calls, by call and outcome.");
    describe_gauge!(EXPORTS, Unit::Count, "ServiceExports, by condition and status.");
}
