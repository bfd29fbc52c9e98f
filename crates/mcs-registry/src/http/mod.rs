//! The HTTP API of docs/design.md §7 (axum): routes, shared state and the
//! request-metrics layer. Handlers live in `lists` (reads and long-polls)
//! and `writes` (registrations, exports and withdrawals).

mod error;
mod events;
mod extract;
mod lists;
mod openapi;
pub mod status;
mod watching;
mod writes;

pub use error::ApiError;
pub(crate) use error::unavailable;

use crate::live::LiveView;
use crate::metrics as m;
use crate::registrar::Registrar;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The served view.
    pub view: Arc<LiveView>,
    /// The sections' changes as events, for event watches (`crate::events`).
    pub events: Arc<crate::events::Journals>,
    /// The write path.
    pub registrar: Arc<Registrar>,
    /// Longest long-poll.
    pub max_watch: Duration,
    /// One permit per long-poll that may wait at once (`--max-watches`).
    pub watch_slots: Arc<Semaphore>,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Largest accepted body of an export write.
    pub max_export_body_bytes: usize,
    /// Bound on reading a request body.
    pub request_timeout: Duration,
    /// Oldest last successful poll `/readyz` accepts (`None`: no bound).
    pub ready_max_staleness: Option<Duration>,
    /// Turns true when the process is shutting down; long-polls end early.
    pub shutdown: watch::Receiver<bool>,
    /// The trust domain of `--authz spiffe` (`crate::authz`); `None`: every
    /// caller may write anything.
    pub spiffe_trust_domain: Option<String>,
    /// Pools and routers are discovered (`crate::discovery`): their writes
    /// answer `501`.
    pub discovered: bool,
    /// What the status document says of this process (`status`).
    pub about: status::About,
}

/// The public API router.
pub fn router(state: Arc<AppState>) -> Router {
    let limit = state.max_body_bytes;
    let export_limit = DefaultBodyLimit::max(state.max_export_body_bytes);
    let authz = state.spiffe_trust_domain.is_some();
    // Discovered pools and routers take no writes: a registration stored
    // but never served would be acknowledged and lost.
    let discovered = state.discovered;
    let unless_discovered = |refused: MethodRouter<Arc<AppState>>, route| {
        if discovered { refused } else { route }
    };
    let (post_501, delete_501) = (post(not_implemented), delete(not_implemented));
    let routes = Router::new()
        .route(
            "/v1/pools",
            unless_discovered(post_501.clone(), post(writes::register_pool)).get(lists::pools),
        )
        .route(
            "/v1/pools/{pool_id}",
            unless_discovered(delete_501.clone(), delete(writes::withdraw_pool)),
        )
        .route(
            "/v1/routers",
            unless_discovered(post_501.clone(), post(writes::register_router)).get(lists::routers),
        )
        .route(
            "/v1/routers/{router_id}",
            unless_discovered(delete_501, delete(writes::withdraw_router)),
        )
        .route("/v1/clusters", get(lists::clusters))
        .route(
            "/v1/clusters/{cluster_id}",
            put(writes::register_cluster).delete(writes::withdraw_cluster),
        )
        .route(
            "/v1/clusters/{cluster_id}/exports/{namespace}/{name}",
            put(writes::put_export).layer(export_limit).delete(writes::withdraw_export),
        )
        .route("/v1/exports", get(lists::exports))
        .route("/v1/imports", get(lists::imports))
        .route("/v1/status", get(status::json))
        // Unversioned aliases of the Global Discovery Service's paths.
        .route("/pools", unless_discovered(post_501, post(writes::register_pool)).get(lists::pools))
        .route("/routers", get(lists::routers));
    // Under --authz spiffe, the lists and writes need an identity of the
    // trust domain (a route layer: it sees the matched route, for the
    // denials); the probes and the document added after it do not.
    let routes = if authz {
        routes.route_layer(middleware::from_fn_with_state(state.clone(), extract::authenticate))
    } else {
        routes
    };
    routes
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi::serve))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(track))
        .with_state(state)
}

/// The operators' router: `/metrics`, `/healthz`, `/readyz`, and the
/// status document and page (`status`).
pub fn admin_router(state: Arc<AppState>, metrics: PrometheusHandle) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    crate::metrics::collect_process();
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics.render())
                }
            }),
        )
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(status::admin_routes(&state))
        .fallback(not_found)
        .with_state(state)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// Readiness as docs/operations.md (Probes) defines it: ready once the first
/// full read succeeded, and stays ready while storage is unreachable (a
/// stale view, marked `complete: false`, is better than none) unless
/// `--ready-max-staleness-secs` bounds how old the last successful poll may
/// be, or storage answers that the table does not exist. The body reports
/// the staleness either way.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let view = &state.view;
    if let Some((found, known)) = view.schema_too_new() {
        let body = mcs_api::ErrorBody::new(
            mcs_api::ErrorCode::Unavailable,
            format!(
                "the storage table is at schema version {found}, past this binary's ({known}): \
                 run a registry release of schema version {found}"
            ),
        );
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    if view.is_table_missing() {
        let body = mcs_api::ErrorBody::new(
            mcs_api::ErrorCode::Unavailable,
            "storage answers that the table does not exist (the log names table, region and \
             endpoint)",
        );
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    let Some(age_ms) = view.last_poll_age_ms().filter(|_| view.is_ready()) else {
        let body = mcs_api::ErrorBody::new(
            mcs_api::ErrorCode::Unavailable,
            "the first full read of storage has not succeeded yet",
        );
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    };
    if let Some(bound) = state.ready_max_staleness
        && u128::from(age_ms) > bound.as_millis()
    {
        let body = mcs_api::ErrorBody::new(
            mcs_api::ErrorCode::Unavailable,
            format!(
                "the last successful poll of storage was {age_ms} ms ago, over \
                 --ready-max-staleness-secs ({} s)",
                bound.as_secs()
            ),
        );
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    Json(serde_json::json!({
        "status": "ready",
        "complete": view.is_complete(),
        "holding_expiries": view.is_holding(),
        "pool_discovery_complete": view.is_discovery_complete(),
        "last_poll_age_ms": age_ms,
    }))
    .into_response()
}

async fn not_found(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(no_such_route(&method, uri.path()))
}

/// The `404` of a path no route serves, naming it (cut at 200 characters):
/// a base URL given with a path of its own (`…/v1`) shows as `/v1/v1/…`.
fn no_such_route(method: &axum::http::Method, path: &str) -> String {
    let shown: String = path.chars().take(200).collect();
    let cut = if shown.len() < path.len() { "…" } else { "" };
    format!("no such route: {method} {shown}{cut} (see docs/api.md)")
}

async fn not_implemented() -> ApiError {
    ApiError::NotImplemented
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// The methods [`track`] names in its labels; any other is `other`.
static KNOWN_METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::OPTIONS,
    Method::CONNECT,
    Method::TRACE,
];

/// The `method` label of `method`: one of [`KNOWN_METHODS`] or `other`,
/// never what a client made up (each new label value is a new series,
/// held for the life of the process).
fn method_label(method: &Method) -> &'static str {
    KNOWN_METHODS.iter().find(|known| *known == method).map_or("other", Method::as_str)
}

/// Counts and times every request by route template (never the raw path,
/// whose ids would explode the label space) and [`method_label`]: every
/// label comes from a closed set, whatever clients send.
async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!(m::HTTP_REQUESTS, "route" => route.clone(), "method" => method, "status" => status)
        .increment(1);
    let elapsed = started.elapsed().as_secs_f64();
    // A watch waits by design, up to its timeout: timing it with the other
    // requests would make their latency meaningless.
    if response.extensions().get::<Watched>().is_some() {
        metrics::histogram!(m::WATCH_DURATION, "route" => route).record(elapsed);
    } else {
        metrics::histogram!(m::HTTP_DURATION, "route" => route, "method" => method).record(elapsed);
    }
    response
}

/// Marks the response of a long-poll watch, for [`track`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watched;

#[cfg(test)]
mod tests;
