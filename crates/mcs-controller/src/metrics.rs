//! Metric names of the controller, described once at startup, and the
//! Prometheus recorder behind `/metrics`. docs/configuration.md lists every
//! series.

use metrics::{Unit, describe_counter, describe_gauge};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

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
/// Always 1; label `version` names the build.
pub const BUILD_INFO: &str = "mcs_controller_build_info";

/// Buckets of the latency histograms, in seconds.
const LATENCY_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// ServiceExports of this cluster, by condition (`Valid`, `Ready`,
/// `Conflict`) and status (`True`, `False`, `Unknown`).
pub const EXPORTS: &str = "mcs_controller_exports";

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
    describe_gauge!(BUILD_INFO, "Always 1; label version names the build.");
    describe_gauge!(EXPORTS, Unit::Count, "ServiceExports, by condition and status.");
}

/// Installs the Prometheus recorder (once) and returns its handle.
pub fn install() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            let _ = metrics::set_global_recorder(recorder);
            describe();
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            metrics::gauge!(LEADER).set(0.0);
            handle
        })
        .clone()
}
