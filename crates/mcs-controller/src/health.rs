//! `/metrics`, `/healthz` and `/readyz` on `--admin-listen`.
//!
//! - `/healthz`: 200 while the process serves (its runtime answers).
//! - `/readyz`: 200 when the API server answered within the last minute
//!   (leader election talks to it every few seconds, leader or not) and, on
//!   the leader, the cluster is registered and every watch lists (one that
//!   cannot, e.g. its kind not served or not allowed, names itself); else
//!   503 with the reason.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

static API_SERVER_SEEN: AtomicU64 = AtomicU64::new(0);
static LEADING: AtomicBool = AtomicBool::new(false);
static REGISTERED: AtomicBool = AtomicBool::new(false);
/// The watches that failed and have not listed since: name → error.
static FAILING_WATCHES: Mutex<BTreeMap<&'static str, String>> = Mutex::new(BTreeMap::new());

fn failing_watches() -> std::sync::MutexGuard<'static, BTreeMap<&'static str, String>> {
    FAILING_WATCHES.lock().unwrap_or_else(|e| e.into_inner())
}

/// How long without an answer from the API server makes the pod unready.
const API_SERVER_STALE_SECS: u64 = 60;

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Notes that the API server answered.
pub fn saw_api_server() {
    API_SERVER_SEEN.store(now_secs(), Ordering::Relaxed);
}

/// Notes whether this replica leads, and whether its cluster is registered.
/// The end of a term forgets its watches.
pub fn set_leading(leading: bool, registered: bool) {
    LEADING.store(leading, Ordering::Relaxed);
    REGISTERED.store(registered, Ordering::Relaxed);
    if !leading {
        failing_watches().clear();
    }
}

/// Notes that watch `name` failed (it cannot list or watch): WARN once
/// when it begins, unready until [`watch_listed`].
pub fn watch_failed(name: &'static str, error: &str) {
    if failing_watches().insert(name, error.to_owned()).is_none() {
        tracing::warn!(watch = name, %error, "watch failing: not ready until it lists again");
    }
}

/// Notes that watch `name` yields objects (again).
pub fn watch_listed(name: &'static str) {
    if failing_watches().remove(name).is_some() {
        tracing::info!(watch = name, "watch lists again");
    }
}

/// Why the controller is not ready, if it is not.
pub fn unready_reason() -> Option<String> {
    let seen = API_SERVER_SEEN.load(Ordering::Relaxed);
    if now_secs().saturating_sub(seen) > API_SERVER_STALE_SECS {
        return Some("the Kubernetes API server has not answered for a minute".into());
    }
    if LEADING.load(Ordering::Relaxed) && !REGISTERED.load(Ordering::Relaxed) {
        return Some("leading, but the cluster is not registered with the registry".into());
    }
    if let Some((name, error)) = failing_watches().iter().next() {
        return Some(format!("the {name} watch cannot list: {error}"));
    }
    None
}

/// Serves the three endpoints on `listener` until `cancel`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    handle: PrometheusHandle,
    cancel: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                crate::metrics::collect_process();
                std::future::ready(handle.render())
            }),
        )
        .route("/healthz", get(|| std::future::ready("ok")))
        .route(
            "/readyz",
            get(|| {
                std::future::ready(match unready_reason() {
                    None => (StatusCode::OK, "ok".to_owned()),
                    Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
                })
            }),
        );
    axum::serve(listener, app).with_graceful_shutdown(cancel.cancelled_owned()).await
}

/// Binds `addr`, naming it in the error.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("binding --admin-listen {addr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 27 item 6 (before: ready while no ServiceExport could be listed).
    #[test]
    fn a_failing_watch_makes_the_leader_unready_until_it_lists() {
        saw_api_server();
        set_leading(true, true);
        assert_eq!(unready_reason(), None);
        watch_failed("ServiceExport", "404 not found");
        watch_failed("ServiceExport", "404 not found");
        assert_eq!(
            unready_reason().as_deref(),
            Some("the ServiceExport watch cannot list: 404 not found")
        );
        watch_listed("ServiceExport");
        assert_eq!(unready_reason(), None);
        watch_failed("Service", "403 forbidden");
        set_leading(false, false);
        assert_eq!(unready_reason(), None, "a term's watches end with it");
    }
}
