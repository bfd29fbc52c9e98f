//! Metric names of the registry, described once at startup, and the
//! Prometheus recorder behind `/metrics`. docs/configuration.md lists every
//! series; a test scrapes a started registry and checks the two agree.

use crate::shared_metrics::Described;
use crate::shared_metrics::Kind::{Counter, Gauge, Histogram};
use metrics::Unit;
use metrics_exporter_prometheus::PrometheusHandle;

/// Requests answered, by route template, method and status.
pub const HTTP_REQUESTS: &str = "mcs_http_requests_total";
/// Request latency, by route template and method; long-poll watches are
/// not in it (see [`WATCH_DURATION`]).
pub const HTTP_DURATION: &str = "mcs_http_request_duration_seconds";
/// How long long-poll watches (`?watch=true`) waited, by route template.
pub const WATCH_DURATION: &str = "mcs_http_watch_duration_seconds";
/// Registrar writes, by kind and outcome (applied, stale, owned, not_found,
/// invalid, not_ready, error).
pub const REGISTRAR_WRITES: &str = "mcs_registrar_writes_total";
/// Served items, by section.
pub const VIEW_ITEMS: &str = "mcs_view_items";
/// Records held by the view (live or not).
pub const VIEW_RECORDS: &str = "mcs_view_records";
/// Changes of a section's fingerprint, by section.
pub const FINGERPRINT_CHANGES: &str = "mcs_view_fingerprint_changes_total";
/// Leases that expired in the view, by kind.
pub const LEASE_EXPIRIES: &str = "mcs_view_lease_expiries_total";
/// 1 while lists are complete, 0 otherwise.
pub const VIEW_COMPLETE: &str = "mcs_view_complete";
/// Reader polls, by mode (delta, full) and outcome (ok, error).
pub const READER_POLLS: &str = "mcs_reader_polls_total";
/// Reader poll latency, by mode.
pub const READER_POLL_DURATION: &str = "mcs_reader_poll_duration_seconds";
/// Leases a read of stored lease ends confirmed, by how (renewed: a later
/// stored end was read; extended: absent from the read, so stored beyond
/// it; reread: a key the read could not settle, read whole).
pub const LEASES_CONFIRMED: &str = "mcs_reader_leases_confirmed_total";
/// Records a full read found that delta polls had missed.
pub const LATE_ARRIVALS: &str = "mcs_reader_late_arrivals_total";
/// Writes a read of change stamps found behind a delta poll's window that
/// the view lacked (they reached this replica after the poll that covered
/// their `changed_at`), and which the poll read whole by reaching back.
pub const LATE_CHANGES: &str = "mcs_reader_late_changes_total";
/// Mass-expiry holds begun.
pub const EXPIRY_HOLDS: &str = "mcs_view_expiry_holds_total";
/// Expiries held back right now.
pub const EXPIRIES_HELD: &str = "mcs_view_expiries_held";
/// Watches open right now: long-polls waiting and event streams.
pub const WATCHERS: &str = "mcs_http_watchers";
/// Event streams ended because their watcher fell too far behind.
pub const WATCH_LAGGED: &str = "mcs_http_watch_lagged_total";
/// Connections served right now (lingering closes included), by listener.
pub const HTTP_CONNECTIONS: &str = "mcs_http_connections";
/// Requests answered `503` past a cap, by reason (`connections`, `watches`).
pub const HTTP_REFUSED: &str = "mcs_http_refused_total";
/// Connections closed by a time bound, by listener and reason
/// ([`CONNECTION_TIMEOUT_REASONS`]).
pub const HTTP_CONNECTION_TIMEOUTS: &str = "mcs_http_connection_timeouts_total";
/// Unix time of the last successful poll of storage, in seconds.
pub const LAST_POLL_OK: &str = "mcs_reader_last_success_timestamp_seconds";
/// TLS handshakes, by listener and outcome ([`TLS_OUTCOMES`]).
pub const TLS_HANDSHAKES: &str = "mcs_tls_handshakes_total";
/// `notAfter` of each loaded certificate, Unix seconds, by certificate
/// (`server`, `client_ca`) and index in its file.
pub const TLS_CERT_EXPIRY: &str = "mcs_tls_certificate_expiry_timestamp_seconds";
/// Changed certificate files that did not load (the old ones stay).
pub const TLS_RELOAD_FAILURES: &str = "mcs_tls_reload_failures_total";
/// Requests refused `403` by `--authz spiffe`, by identity kind and route.
pub const AUTHZ_DENIALS: &str = "mcs_authz_denials_total";
/// Pool discovery's failed lists and watches of Kubernetes, by resource
/// (`endpointslices`, `serviceimports`).
pub const DISCOVERY_ERRORS: &str = "mcs_pool_discovery_errors_total";
/// Imported pools and router slices pool discovery leaves out now (each
/// logged with why when it first appears).
pub const DISCOVERY_SKIPPED: &str = "mcs_pool_discovery_skipped";
/// Always 1; labels `version` and `commit` name the build.
pub const BUILD_INFO: &str = "mcs_build_info";

/// Every `outcome` of [`REGISTRAR_WRITES`].
const WRITE_OUTCOMES: [&str; 8] =
    ["applied", "stale", "owned", "not_found", "invalid", "not_ready", "too_large", "error"];

/// Every `outcome` of [`TLS_HANDSHAKES`]: done; not done within
/// `--tls-handshake-timeout-secs`; the client certificate refused (none,
/// unknown CA, expired); anything else.
pub const TLS_OUTCOMES: [&str; 4] = ["ok", "timeout", "client_certificate", "error"];

/// Every `reason` of [`HTTP_CONNECTION_TIMEOUTS`]: no HTTP/2 connection
/// preface within the TLS handshake timeout; no request (HTTP/1.1: no
/// request head) within `--idle-timeout-secs`; an HTTP/2 keep-alive ping
/// unanswered; no write progress within `--write-timeout-secs`.
pub const CONNECTION_TIMEOUT_REASONS: [&str; 4] = ["preface", "idle", "keepalive", "write"];

const LATENCY_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

pub use crate::shared_metrics::collect_process;

/// Installs the process-wide Prometheus recorder (once) and describes every
/// metric. Later calls return the same handle.
pub fn install() -> PrometheusHandle {
    crate::shared_metrics::install(LATENCY_BUCKETS, BUILD_INFO, || {
        describe();
        mcs_store::metrics::describe();
        register_zero();
        mcs_store::metrics::register_zero();
    })
}

/// Every metric of this binary, described at startup.
const DESCRIBED: &[Described] = &[
    (Counter, HTTP_REQUESTS, None, "HTTP requests answered, by route template, method and status"),
    (Histogram, HTTP_DURATION, Some(Unit::Seconds), "HTTP request latency by route template"),
    (Counter, REGISTRAR_WRITES, None, "registrar writes by kind and outcome"),
    (Gauge, VIEW_ITEMS, None, "served items by section"),
    (Gauge, VIEW_RECORDS, None, "records held by the view, live or not"),
    (Counter, FINGERPRINT_CHANGES, None, "fingerprint changes by section"),
    (Counter, LEASE_EXPIRIES, None, "leases expired in the view by kind"),
    (Gauge, VIEW_COMPLETE, None, "1 while lists are complete"),
    (Counter, READER_POLLS, None, "reader polls by mode and outcome"),
    (Histogram, READER_POLL_DURATION, Some(Unit::Seconds), "reader poll latency by mode"),
    (Counter, LATE_ARRIVALS, None, "records a full read found that delta polls missed"),
    (
        Counter,
        LATE_CHANGES,
        None,
        "writes behind a delta poll's window found by their change stamps and read by reaching back",
    ),
    (Counter, LEASES_CONFIRMED, None, "leases confirmed by a read of lease ends, by how"),
    (Gauge, WATCHERS, None, "watches open: long-polls waiting and event streams"),
    (Counter, WATCH_LAGGED, None, "event streams ended because their watcher fell behind"),
    (Gauge, HTTP_CONNECTIONS, None, "connections served now, by listener"),
    (Counter, HTTP_REFUSED, None, "requests answered 503 past a cap, by reason"),
    (
        Counter,
        HTTP_CONNECTION_TIMEOUTS,
        None,
        "connections closed by a time bound, by listener and reason",
    ),
    (Counter, EXPIRY_HOLDS, None, "mass-expiry holds begun"),
    (Gauge, EXPIRIES_HELD, None, "expiries held back now"),
    (Histogram, WATCH_DURATION, Some(Unit::Seconds), "how long long-poll watches waited"),
    (Gauge, LAST_POLL_OK, Some(Unit::Seconds), "unix time of the last successful poll"),
    (Counter, TLS_HANDSHAKES, None, "tls handshakes by listener and outcome"),
    (Gauge, TLS_CERT_EXPIRY, Some(Unit::Seconds), "notAfter of each loaded certificate, unix time"),
    (Counter, TLS_RELOAD_FAILURES, None, "changed certificate files that did not load"),
    (Counter, AUTHZ_DENIALS, None, "requests refused 403 by identity kind and route"),
    (Counter, DISCOVERY_ERRORS, None, "pool discovery's failed lists and watches by resource"),
    (Gauge, DISCOVERY_SKIPPED, None, "imported pools and router slices left out now"),
    (Gauge, BUILD_INFO, None, "1; labels name the version and git commit of the build"),
];

fn describe() {
    crate::shared_metrics::describe(DESCRIBED);
}

/// Registers every counter whose labels are known in advance at zero, so
/// that `increase()` sees the first event (a series that appears at 1 has
/// no increase), and the gauges that must be there before their first
/// change.
fn register_zero() {
    for kind in mcs_core::Kind::ALL.map(mcs_core::Kind::as_str) {
        for outcome in WRITE_OUTCOMES {
            metrics::counter!(REGISTRAR_WRITES, "kind" => kind, "outcome" => outcome).increment(0);
        }
        metrics::counter!(LEASE_EXPIRIES, "kind" => kind).increment(0);
    }
    for section in mcs_core::SectionKind::ALL.map(mcs_core::SectionKind::name) {
        metrics::counter!(FINGERPRINT_CHANGES, "section" => section).increment(0);
        metrics::gauge!(VIEW_ITEMS, "section" => section).set(0.0);
    }
    for how in ["renewed", "extended", "reread"] {
        metrics::counter!(LEASES_CONFIRMED, "how" => how).increment(0);
    }
    for mode in ["delta", "full", "lease_ends", "change_stamps"] {
        for outcome in ["ok", "error"] {
            metrics::counter!(READER_POLLS, "mode" => mode, "outcome" => outcome).increment(0);
        }
    }
    metrics::counter!(LATE_ARRIVALS).increment(0);
    metrics::counter!(LATE_CHANGES).increment(0);
    metrics::counter!(EXPIRY_HOLDS).increment(0);
    metrics::gauge!(EXPIRIES_HELD).set(0.0);
    metrics::gauge!(WATCHERS).set(0.0);
    metrics::counter!(WATCH_LAGGED).increment(0);
    for listener in ["api", "admin"] {
        metrics::gauge!(HTTP_CONNECTIONS, "listener" => listener).set(0.0);
    }
    for listener in ["api", "admin"] {
        for reason in CONNECTION_TIMEOUT_REASONS {
            metrics::counter!(HTTP_CONNECTION_TIMEOUTS, "listener" => listener, "reason" => reason)
                .increment(0);
        }
    }
    for reason in ["connections", "watches"] {
        metrics::counter!(HTTP_REFUSED, "reason" => reason).increment(0);
    }
    for listener in ["api", "admin"] {
        for outcome in TLS_OUTCOMES {
            metrics::counter!(TLS_HANDSHAKES, "listener" => listener, "outcome" => outcome)
                .increment(0);
        }
    }
    metrics::counter!(TLS_RELOAD_FAILURES).increment(0);
    for resource in ["endpointslices", "serviceimports"] {
        metrics::counter!(DISCOVERY_ERRORS, "resource" => resource).increment(0);
    }
    metrics::gauge!(DISCOVERY_SKIPPED).set(0.0);
    metrics::gauge!(VIEW_COMPLETE).set(0.0);
    metrics::gauge!(VIEW_RECORDS).set(0.0);
    metrics::gauge!(LAST_POLL_OK).set(0.0);
}
