//! Metric names of the controller, described once at startup. Every series
//! is listed in docs/configuration.md.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Reconciles, by controller (`export`, `auto_export`, `import`) and
/// outcome (`ok`, `error`, `requeue`).
pub const RECONCILES: &str = "mcs_controller_reconciles_total";
/// Registry calls, by call and outcome.
pub const REGISTRY_CALLS: &str = "mcs_controller_registry_calls_total";

/// Objects the importer wrote (server-side applies that changed something),
/// by `kind` (`ServiceImport`, `ServiceImportStatus`, `Service`, `EndpointSlice`).
pub const IMPORT_OBJECTS_WRITTEN: &str = "mcs_controller_import_objects_written_total";
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
/// Imports skipped because their namespace does not exist here (per reconcile).
pub const IMPORT_NAMESPACE_MISSING: &str = "mcs_controller_import_namespace_missing_total";
/// 1 while the importer sees the registry reachable and its list complete.
pub const IMPORT_REGISTRY_AVAILABLE: &str = "mcs_controller_import_registry_available";

/// Describes every metric (once, at startup).
pub fn describe() {
    describe_counter!(RECONCILES, Unit::Count, "Reconciles, by controller and outcome.");
    describe_counter!(REGISTRY_CALLS, Unit::Count, "Registry calls, by call and outcome.");
    describe_counter!(IMPORT_OBJECTS_WRITTEN, Unit::Count, "Objects the importer wrote, by kind.");
    describe_counter!(
        IMPORT_OBJECTS_DELETED,
        Unit::Count,
        "Objects the importer deleted, by kind."
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
        "Imports skipped because their namespace does not exist."
    );
    describe_gauge!(
        IMPORT_REGISTRY_AVAILABLE,
        "1 while the importer sees the registry reachable and its list complete."
    );
}
