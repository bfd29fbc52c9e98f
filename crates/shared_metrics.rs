//! How the two servers (mcs-registry, mcs-controller) set up their
//! Prometheus recorder and process series: one file included by both
//! (`#[path]`, as `crates/shared_cli.rs`), since they share no crate that
//! knows `metrics`.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// The process series (`process_cpu_seconds_total`, a counter of whole
/// seconds, `process_resident_memory_bytes`, `process_open_fds`, ...),
/// read at each scrape ([`collect_process`]).
fn process() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// What kind of series a metric is, for [`describe`].
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A metric described at startup: its kind, name, unit (if any) and help.
pub type Described = (Kind, &'static str, Option<metrics::Unit>, &'static str);

/// Describes each of `described` to the recorder.
pub fn describe(described: &[Described]) {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    for &(kind, name, unit, help) in described {
        match (kind, unit) {
            (Kind::Counter, Some(unit)) => describe_counter!(name, unit, help),
            (Kind::Counter, None) => describe_counter!(name, help),
            (Kind::Gauge, Some(unit)) => describe_gauge!(name, unit, help),
            (Kind::Gauge, None) => describe_gauge!(name, help),
            (Kind::Histogram, Some(unit)) => describe_histogram!(name, unit, help),
            (Kind::Histogram, None) => describe_histogram!(name, help),
        }
    }
}

/// Reads the process series; call before each render.
pub fn collect_process() {
    process().collect();
}

/// Installs the process-wide Prometheus recorder (once): `buckets` for
/// every histogram whose name ends in `_seconds`, the binary's own series
/// described and registered by `describe`, the process series described,
/// and gauge `build_info` at 1 with labels `version` and `commit` (of
/// `crates/build_commit.rs`). Later calls return the same handle.
pub fn install(
    buckets: &[f64],
    build_info: &'static str,
    describe: impl FnOnce(),
) -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), buckets)
                .map(|b| b.build_recorder())
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            // Fails only if another recorder is installed (an embedding test
            // harness); the handle then renders nothing, which is harmless.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            process().describe();
            metrics::gauge!(
                build_info,
                "version" => env!("CARGO_PKG_VERSION"),
                "commit" => env!("MCS_GIT_COMMIT")
            )
            .set(1.0);
            handle
        })
        .clone()
}
