//! Metric names of the controller, described once at startup, and the
//! Prometheus recorder behind `/metrics`. docs/configuration.md lists every
//! series.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
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

/// Describes every metric (once, at startup).
pub fn describe() {
    describe_counter!(RECONCILES, Unit::Count, "Reconciles, by controller and outcome.");
    describe_counter!(REGISTRY_CALLS, Unit::Count, "Registry calls, by call and outcome.");
    describe_gauge!(LEADER, "1 while this replica is the leader.");
    describe_gauge!(
        CLUSTER_LEASE_AGE,
        Unit::Seconds,
        "Seconds since the cluster's registry lease was last granted or renewed."
    );
    describe_counter!(CLUSTER_LEASE_LOSSES, Unit::Count, "Cluster leases lost.");
    describe_counter!(CLUSTER_REGISTRATIONS, Unit::Count, "Cluster registrations.");
    describe_counter!(
        UNDECODABLE_OBJECTS,
        Unit::Count,
        "Objects a watch skipped because they do not decode, by kind."
    );
    describe_gauge!(BUILD_INFO, "Always 1; labels version and commit name the build.");
    describe_gauge!(EXPORTS, Unit::Count, "ServiceExports, by condition and status.");
    describe_counter!(IMPORT_OBJECTS_WRITTEN, Unit::Count, "Objects the importer wrote, by kind.");
    describe_counter!(
        IMPORT_OBJECTS_DELETED,
        Unit::Count,
        "Objects the importer deleted, by kind."
    );
    describe_counter!(
        IMPORT_DRIFT_REPAIRS,
        Unit::Count,
        "Objects the importer rewrote or deleted because someone else had changed its own."
    );
    describe_gauge!(IMPORT_SLICES, Unit::Count, "EndpointSlices of an import.");
    describe_gauge!(IMPORT_ENDPOINTS, Unit::Count, "Endpoints across an import's slices.");
    describe_gauge!(IMPORTS, Unit::Count, "Imports by the status of their Ready condition.");
    describe_histogram!(
        IMPORT_SYNC_SECONDS,
        Unit::Seconds,
        "From a changed list of imports arriving to its objects written."
    );
    describe_counter!(
        IMPORT_NAMESPACE_MISSING,
        Unit::Count,
        "Imports skipped because their namespace does not exist or is being deleted."
    );
    describe_gauge!(
        IMPORT_REGISTRY_AVAILABLE,
        "1 while the importer sees the registry reachable and its list complete."
    );
    describe_counter!(
        IMPORT_REMOVALS_HELD,
        Unit::Count,
        "Removal holds begun: a complete list dropped half or more of the imports at once."
    );
    describe_gauge!(IMPORT_REMOVAL_HOLD, "1 while the importer holds removals back.");
}

pub use crate::shared_metrics::collect_process;

/// Installs the Prometheus recorder (once) and returns its handle.
pub fn install() -> PrometheusHandle {
    crate::shared_metrics::install(LATENCY_BUCKETS, BUILD_INFO, || {
        describe();
        metrics::gauge!(LEADER).set(0.0);
    })
}
