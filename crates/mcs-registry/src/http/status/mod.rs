//! One look at the clusterset (issue 26): `GET /v1/status`, the status
//! document of `mcs_api::status`, on the API and admin ports, and `GET
//! /status`, the same document as a server-rendered page (`page`) on the
//! admin port. Both go through the authorization of `--authz spiffe` like
//! any other read.
//!
//! ```text
//!  LiveView (view, completeness, hold, poll facts) ─► document() ─► Status
//!        facts gathered here; findings derived by mcs_api::status::findings
//!  Status ─► JSON (GET /v1/status) │ HTML (GET /status) │ mcs-admin status
//! ```

pub(crate) mod page;

use super::AppState;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router, middleware};
use mcs_api::status::{
    ClusterStatus, ConflictStatus, ErrorCount, HoldStatus, LeasedStatus, PoolGroup, PoolsStatus,
    ProcessStatus, ReaderStatus, SectionStatus, Status, ViewStatus,
};
use mcs_api::{ConditionStatus, Label, ServiceName};
use mcs_core::{Key, Kind, SectionKind, View};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

/// What the status document says of the process that the view does not
/// know; set once at startup.
#[derive(Debug, Clone)]
pub struct About {
    /// `--region`, when given.
    pub region: Option<String>,
    /// `--storage`.
    pub storage: &'static str,
    /// The registrar's writer id.
    pub writer_id: String,
    /// When the process started.
    pub started: Instant,
    /// `--full-resync-interval-secs`, in milliseconds.
    pub full_resync_interval_ms: u64,
    /// `--skew-allowance-ms`.
    pub skew_ms: u64,
}

impl About {
    /// The facts of `settings`, started now.
    pub fn of(settings: &crate::config::Settings) -> Self {
        Self {
            region: settings.region.clone(),
            storage: settings.storage.as_str(),
            writer_id: settings.writer_id.clone(),
            started: Instant::now(),
            full_resync_interval_ms: settings.full_resync_interval.as_millis() as u64,
            skew_ms: settings.skew_allowance_ms,
        }
    }
}

/// The admin port's status routes, `/status` and `/v1/status`, under the
/// authorization of `--authz spiffe` when it is on.
pub(super) fn admin_routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let routes = Router::new().route("/status", get(page)).route("/v1/status", get(json));
    if state.spiffe_trust_domain.is_some() {
        routes.route_layer(middleware::from_fn_with_state(
            state.clone(),
            super::extract::authenticate,
        ))
    } else {
        routes
    }
}

/// `GET /v1/status`.
pub(super) async fn json(State(state): State<Arc<AppState>>) -> Response {
    ([(axum::http::header::CACHE_CONTROL, "no-cache")], Json(document(&state))).into_response()
}

/// How long `GET /status?after=N` waits for a change of the view.
const PAGE_WAIT: std::time::Duration = std::time::Duration::from_secs(25);

/// `GET /status`: the page, with the clusters of `?page=N` (1-based; a
/// query it cannot read shows the first page, one past the end the last).
/// With `?after=EPOCH` (the page's `data-epoch`), it first waits, up to
/// [`PAGE_WAIT`], until the view changes past that epoch (the signal that
/// wakes the lists' long-polls: content or completeness), so the page's
/// script follows the view live; a wait takes a slot of `--max-watches`
/// (none free: `503`, and the script tries again later).
async fn page(State(state): State<Arc<AppState>>, uri: Uri) -> Response {
    let query: Vec<(String, String)> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let number =
        |name: &str| query.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.parse::<u64>().ok());
    let page = number("page").map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let mut changes = state.view.subscribe();
    if let Some(after) = number("after")
        && *changes.borrow_and_update() == after
    {
        let Ok(_slot) = state.watch_slots.clone().try_acquire_owned() else {
            return super::unavailable("too many watches are waiting; retry later");
        };
        let mut shutdown = state.shutdown.clone();
        tokio::select! {
            _ = changes.changed() => {}
            _ = tokio::time::sleep(PAGE_WAIT) => {}
            _ = crate::shutdown::stopped(&mut shutdown) => {}
        }
    }
    let epoch = *state.view.subscribe().borrow();
    let html = page::render(&document(&state), page, epoch);
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (axum::http::header::CACHE_CONTROL, "no-cache"),
        ],
        html.into_string(),
    )
        .into_response()
}

/// The status document of this process, now.
pub fn document(state: &AppState) -> Status {
    let live = &state.view;
    // As a list request does: nothing past its lease is reported.
    live.expire_due();
    let about = &state.about;
    let now = live.clock().now_ms();
    let (held_since, hold_policy) = live.hold_facts();
    let incomplete_because = live.incomplete_because();
    let polls = live.poll_facts();
    let view = live.read();
    let at_risk: HashSet<&Key> = view.keys_at_risk(now, hold_policy.renewal_slack_ms).collect();
    let risky = |kind: Kind| at_risk.iter().filter(|key| key.kind() == kind).count() as u64;
    let holding = live.is_holding();
    let mut status = Status {
        process: ProcessStatus {
            region: about.region.clone(),
            storage: about.storage.to_owned(),
            writer_id: about.writer_id.clone(),
            version: crate::config::VERSION.to_owned(),
            schema_version: mcs_store::dynamo::SCHEMA_VERSION,
            uptime_secs: about.started.elapsed().as_secs(),
            ready: live.is_ready(),
            now_ms: now,
        },
        view: ViewStatus {
            complete: incomplete_because.is_empty(),
            incomplete_because,
            sections: SectionKind::ALL
                .iter()
                .map(|section| SectionStatus {
                    section: section.name().to_owned(),
                    items: section.len(&view) as u64,
                    fingerprint: section.fingerprint(&view),
                })
                .collect(),
        },
        reader: ReaderStatus {
            last_poll_age_ms: live.last_poll_age_ms(),
            last_full_read_age_ms: polls.last_full_read_ms.map(|t| now.saturating_sub(t)),
            last_poll: polls.last_poll,
            failed_polls_in_a_row: polls.failed_in_a_row,
            storage_errors: polls
                .errors
                .iter()
                .map(|(kind, count)| ErrorCount { kind: (*kind).to_owned(), count: *count })
                .collect(),
            stale_after_ms: live.stale_after_ms(),
            full_resync_interval_ms: about.full_resync_interval_ms,
            table_missing: live.is_table_missing(),
            table_schema_too_new: live.schema_too_new().map(|(found, _)| found),
        },
        clusters: clusters(&view, now, about.skew_ms, &at_risk),
        pools: PoolsStatus {
            count: view.pools().len() as u64,
            expiring_soon: risky(Kind::Pool),
            per_cluster: pool_groups(&view, &at_risk),
        },
        routers: LeasedStatus {
            count: view.routers().len() as u64,
            expiring_soon: risky(Kind::Router),
        },
        hold: HoldStatus {
            active: holding,
            since_ms_ago: held_since.filter(|_| holding).map(|t| now.saturating_sub(t)),
            held_leases: if holding { view.due_expiries(now) as u64 } else { 0 },
            max_hold_ms: hold_policy.max_hold_ms,
        },
        conflicts: conflicts(&view),
        findings: Vec::new(),
    };
    drop(view);
    status.findings = mcs_api::status::findings(&status);
    status
}

/// Every served cluster with its lease, exports, conflicts and pools.
fn clusters(view: &View, now: u64, skew_ms: u64, at_risk: &HashSet<&Key>) -> Vec<ClusterStatus> {
    let mut exports: BTreeMap<&Label, (u64, u64)> = BTreeMap::new();
    for export in view.exports().values() {
        let counts = exports.entry(&export.cluster_id).or_default();
        counts.0 += 1;
        counts.1 += u64::from(in_conflict(export));
    }
    let mut pools: BTreeMap<&Label, u64> = BTreeMap::new();
    for pool in view.pools().values() {
        *pools.entry(&pool.pool_key.cluster_id).or_default() += 1;
    }
    let mut clusters: Vec<ClusterStatus> = view
        .clusters()
        .values()
        .map(|cluster| {
            let key = Key::Cluster { cluster_id: cluster.cluster_id.clone() };
            let record = view.record(&key);
            let until = record.and_then(|r| r.lease_until_ms);
            // Renewals in place keep `changed_at`: a lease with terms was
            // last renewed a lease's length before its end.
            let renewed = record.map(|r| match (r.terms, r.lease_until_ms) {
                (Some(terms), Some(until)) => until.saturating_sub(terms.duration_ms),
                _ => r.changed_at_ms,
            });
            let (exports, conflicts) =
                exports.get(&cluster.cluster_id).copied().unwrap_or_default();
            ClusterStatus {
                cluster_id: cluster.cluster_id.clone(),
                incarnation: cluster.incarnation.as_str().to_owned(),
                renewed_ms_ago: renewed.map(|t| now.saturating_sub(t)),
                expires_in_ms: until.map(|t| t.saturating_add(skew_ms).saturating_sub(now)),
                at_risk: at_risk.contains(&key),
                exports,
                conflicts,
                pools: pools.get(&cluster.cluster_id).copied().unwrap_or_default(),
            }
        })
        .collect();
    clusters.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    clusters
}

/// The served pools by the cluster their keys name, with those at risk.
fn pool_groups(view: &View, at_risk: &HashSet<&Key>) -> Vec<PoolGroup> {
    let mut groups: BTreeMap<&Label, (u64, u64)> = BTreeMap::new();
    for pool in view.pools().values() {
        let group = groups.entry(&pool.pool_key.cluster_id).or_default();
        group.0 += 1;
        group.1 += u64::from(at_risk.contains(&Key::Pool { pool_id: pool.pool_id.clone() }));
    }
    groups
        .into_iter()
        .map(|(cluster_id, (pools, expiring_soon))| PoolGroup {
            cluster_id: cluster_id.clone(),
            pools,
            expiring_soon,
        })
        .collect()
}

/// Whether an export reports `Conflict=True`.
fn in_conflict(export: &mcs_api::Export) -> bool {
    export
        .conditions
        .iter()
        .any(|c| c.condition_type == "Conflict" && c.status == ConditionStatus::True)
}

/// The services whose exports conflict, each with its exporting clusters
/// and the condition's reasons and message (every export of the service
/// reports the same).
fn conflicts(view: &View) -> Vec<ConflictStatus> {
    let mut services: BTreeMap<ServiceName, (BTreeSet<Label>, String, String)> = BTreeMap::new();
    for export in view.exports().values() {
        let Some(condition) = export
            .conditions
            .iter()
            .find(|c| c.condition_type == "Conflict" && c.status == ConditionStatus::True)
        else {
            continue;
        };
        let service =
            ServiceName { namespace: export.namespace.clone(), name: export.name.clone() };
        let entry = services.entry(service).or_insert_with(|| {
            (BTreeSet::new(), condition.reason.clone(), condition.message.clone())
        });
        entry.0.insert(export.cluster_id.clone());
    }
    services
        .into_iter()
        .map(|(service, (clusters, reason, message))| ConflictStatus {
            namespace: service.namespace,
            name: service.name,
            clusters: clusters.into_iter().collect(),
            reason,
            message,
        })
        .collect()
}
