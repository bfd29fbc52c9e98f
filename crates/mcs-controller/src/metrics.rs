//! Metric names of the controller, described once at startup, and the
//! Prometheus recorder behind `/metrics`. docs/configuration.md lists every
//! series.

use crate::shared_metrics::Described;
use crate::shared_metrics::Kind::{Counter, Gauge, Histogram};
use metrics::Unit;
use metrics_exporter_prometheus::PrometheusHandle;

/// Reconciles, by controller (`export`, `auto_export`, `import`) and
/// outcome (`ok`, `error`, `requeue`).
pub const RECONCILES: &str = "mcs_controller_reconciles_total";
/// Registry calls, by call and outcome.
pub const REGISTRY_CALLS: &str = "mcs_controller_registry_calls_total";
/// 1 while this replica is the leader.
pub const LEADER: &str = "mcs_controller_leader";
/// Seconds since the cluster's registry lease was last granted or renewed
/// (NaN-free: 0 before the first registration).
pub const CLUSTER_LEASE_AGE: &str = "mcs_controller_cluster_lease_age_seconds";
/// Cluster leases lost (the keeper keeps trying).
pub const CLUSTER_LEASE_LOSSES: &str = "mcs_controller_cluster_lease_losses_total";
/// Cluster registrations (the first and each after a loss).
pub const CLUSTER_REGISTRATIONS: &str = "mcs_controller_cluster_registrations_total";
/// Objects a watch skipped because they do not decode, by `kind`
/// (each is logged at WARN with its namespace and name).
pub const UNDECODABLE_OBJECTS: &str = "mcs_controller_undecodable_objects_total";
/// Always 1; label `version` names the build.
pub const BUILD_INFO: &str = "mcs_controller_build_info";

/// Buckets of the latency histograms, in seconds.
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// ServiceExports of this cluster, by condition (`Valid`, `Ready`,
/// `Conflict`) and status (`True`, `False`, `Unknown`).
pub const EXPORTS: &str = "mcs_controller_exports";

/// Objects the importer wrote (server-side applies that changed something),
/// by `kind` (`ServiceImport`, `ServiceImportStatus`, `Service`, `EndpointSlice`).
pub const IMPORT_OBJECTS_WRITTEN: &str = "mcs_controller_import_objects_written_total";
/// Objects the importer wrote or deleted because someone else had changed
/// or deleted an object of its own (drift), not because the registry's
/// list changed.
pub const IMPORT_DRIFT_REPAIRS: &str = "mcs_controller_import_drift_repairs_total";
/// Objects the importer deleted, by `kind`.
pub const IMPORT_OBJECTS_DELETED: &str = "mcs_controller_import_objects_deleted_total";
/// EndpointSlices of an import, by `namespace` and `name` (0 once it is gone).
pub const IMPORT_SLICES: &str = "mcs_controller_import_slices";
/// Endpoints across an import's slices, by `namespace` and `name`.
pub const IMPORT_ENDPOINTS: &str = "mcs_controller_import_endpoints";
/// Imports by the status of their `Ready` condition (`True`, `False`, `Unknown`).
pub const IMPORTS: &str = "mcs_controller_imports";
/// Seconds from a changed list of imports arriving from the registry to its
/// objects written (only lists that led to writes).
pub const IMPORT_SYNC_SECONDS: &str = "mcs_controller_import_sync_seconds";
/// Imports skipped because their namespace does not exist here or is
/// being deleted (per reconcile).
pub const IMPORT_NAMESPACE_MISSING: &str = "mcs_controller_import_namespace_missing_total";
/// 1 while the importer sees the registry reachable and its list complete.
pub const IMPORT_REGISTRY_AVAILABLE: &str = "mcs_controller_import_registry_available";
/// Removal holds begun: a complete list dropped more than half of the
/// imports at once (docs/design.md §13).
pub const IMPORT_REMOVALS_HELD: &str = "mcs_controller_import_removals_held_total";
/// 1 while the importer holds removals back.
pub const IMPORT_REMOVAL_HOLD: &str = "mcs_controller_import_removal_hold";

/// Every metric of this binary, described at startup.
const DESCRIBED: &[Described] = &[
    (Counter, RECONCILES, Some(Unit::Count), "Reconciles, by controller and outcome."),
    (Counter, REGISTRY_CALLS, Some(Unit::Count), "Registry calls, by call and outcome."),
    (Gauge, LEADER, None, "1 while this replica is the leader."),
    (
        Gauge,
        CLUSTER_LEASE_AGE,
        Some(Unit::Seconds),
        "Seconds since the cluster's registry lease was last granted or renewed.",
    ),
    (Counter, CLUSTER_LEASE_LOSSES, Some(Unit::Count), "Cluster leases lost."),
    (Counter, CLUSTER_REGISTRATIONS, Some(Unit::Count), "Cluster registrations."),
    (
        Counter,
        UNDECODABLE_OBJECTS,
        Some(Unit::Count),
        "Objects a watch skipped because they do not decode, by kind.",
    ),
    (Gauge, BUILD_INFO, None, "Always 1; labels version and commit name the build."),
    (Gauge, EXPORTS, Some(Unit::Count), "ServiceExports, by condition and status."),
    (Counter, IMPORT_OBJECTS_WRITTEN, Some(Unit::Count), "Objects the importer wrote, by kind."),
    (Counter, IMPORT_OBJECTS_DELETED, Some(Unit::Count), "Objects the importer deleted, by kind."),
    (
        Counter,
        IMPORT_DRIFT_REPAIRS,
        Some(Unit::Count),
        "Objects the importer rewrote or deleted because someone else had changed its own.",
    ),
    (Gauge, IMPORT_SLICES, Some(Unit::Count), "EndpointSlices of an import."),
    (Gauge, IMPORT_ENDPOINTS, Some(Unit::Count), "Endpoints across an import's slices."),
    (Gauge, IMPORTS, Some(Unit::Count), "Imports by the status of their Ready condition."),
    (
        Histogram,
        IMPORT_SYNC_SECONDS,
        Some(Unit::Seconds),
        "From a changed list of imports arriving to its objects written.",
    ),
    (
        Counter,
        IMPORT_NAMESPACE_MISSING,
        Some(Unit::Count),
        "Imports skipped because their namespace does not exist or is being deleted.",
    ),
    (
        Gauge,
        IMPORT_REGISTRY_AVAILABLE,
        None,
        "1 while the importer sees the registry reachable and its list complete.",
    ),
    (
        Counter,
        IMPORT_REMOVALS_HELD,
        Some(Unit::Count),
        "Removal holds begun: a complete list dropped half or more of the imports at once.",
    ),
    (Gauge, IMPORT_REMOVAL_HOLD, None, "1 while the importer holds removals back."),
];

/// Describes every metric (once, at startup).
pub fn describe() {
    crate::shared_metrics::describe(DESCRIBED);
}

pub use crate::shared_metrics::collect_process;

/// Installs the Prometheus recorder (once) and returns its handle.
pub fn install() -> PrometheusHandle {
    crate::shared_metrics::install(LATENCY_BUCKETS, BUILD_INFO, || {
        describe();
        metrics::gauge!(LEADER).set(0.0);
    })
}
