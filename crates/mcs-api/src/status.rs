//! `GET /v1/status`: one registry's answer to "is the clusterset healthy,
//! and if not, where?" (docs/api.md, Status). The registry fills in the
//! facts; [`findings`] derives from them, by a pure function, what is
//! wrong, how badly, and which runbook of docs/operations.md fixes it, so
//! that the JSON document, `mcs-admin status` and the `/status` page all
//! say the same.

use crate::Label;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The status document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    /// This registry process.
    pub process: ProcessStatus,
    /// The served view: completeness and a fingerprint per section.
    pub view: ViewStatus,
    /// The reader that keeps the view up to date from storage.
    pub reader: ReaderStatus,
    /// Clusters with a live lease, by id.
    pub clusters: Vec<ClusterStatus>,
    /// Served pools, and per cluster.
    pub pools: PoolsStatus,
    /// Served Global Router replicas.
    pub routers: LeasedStatus,
    /// The mass-expiry hold (docs/design.md §6).
    pub hold: HoldStatus,
    /// Exported services whose exports conflict, by namespace and name.
    pub conflicts: Vec<ConflictStatus>,
    /// What is wrong, the most severe first; empty when nothing is.
    pub findings: Vec<Finding>,
}

/// This registry process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProcessStatus {
    /// `--region`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// `memory` or `dynamodb`.
    pub storage: String,
    /// The registrar's writer id.
    pub writer_id: String,
    /// The binary's version and commit.
    pub version: String,
    /// The newest table schema version this binary knows.
    pub schema_version: u32,
    /// Seconds since the process started.
    pub uptime_secs: u64,
    /// Whether `/readyz` answers 200 (the first full read succeeded).
    pub ready: bool,
    /// When the document was made, epoch milliseconds: every age in it is
    /// counted back from here.
    pub now_ms: u64,
}

/// The served view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ViewStatus {
    /// Whether lists are served `complete: true`.
    pub complete: bool,
    /// Why not, when not; empty when complete.
    pub incomplete_because: Vec<Incomplete>,
    /// Every section, in the order of `SectionKind`.
    pub sections: Vec<SectionStatus>,
}

/// Why lists are `complete: false` (docs/design.md §6, Completeness).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Incomplete {
    /// The first full read of storage has not succeeded yet.
    NotReady,
    /// The last successful poll is older than `--stale-after-secs`.
    Stale,
    /// Expiries are held back (the mass-expiry hold).
    Hold,
    /// Pool discovery from Kubernetes has no complete list.
    Discovery,
}

impl Incomplete {
    /// The reason as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Incomplete::NotReady => "not_ready",
            Incomplete::Stale => "stale",
            Incomplete::Hold => "hold",
            Incomplete::Discovery => "discovery",
        }
    }
}

/// One section of the view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SectionStatus {
    /// `pools`, `routers`, `clusters`, `exports` or `imports`.
    pub section: String,
    /// Items served.
    pub items: u64,
    /// The section's fingerprint, as its list carries it.
    pub fingerprint: String,
}

/// The reader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReaderStatus {
    /// Milliseconds since the last successful poll; absent before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_age_ms: Option<u64>,
    /// Milliseconds since the last successful full read; absent before the
    /// first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_full_read_age_ms: Option<u64>,
    /// What the last successful poll was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll: Option<PollKind>,
    /// Polls failed since the last successful one.
    pub failed_polls_in_a_row: u64,
    /// Failed polls since the process started, by kind of storage error.
    pub storage_errors: Vec<ErrorCount>,
    /// `--stale-after-secs`, in milliseconds.
    pub stale_after_ms: u64,
    /// `--full-resync-interval-secs`, in milliseconds.
    pub full_resync_interval_ms: u64,
    /// Whether the last read that got an answer found the table missing.
    pub table_missing: bool,
    /// The table's schema version while it is past this binary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_schema_too_new: Option<u32>,
}

/// A kind of poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PollKind {
    /// A read of what changed since the last poll.
    Delta,
    /// A read of the whole table.
    Full,
}

/// How many polls failed with one kind of storage error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorCount {
    /// `unavailable`, `missing`, `schema`, `schema_too_new`, `corrupt`,
    /// `other`.
    pub kind: String,
    /// Polls that failed so.
    pub count: u64,
}

/// A cluster with a live lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ClusterStatus {
    /// The cluster's id.
    pub cluster_id: Label,
    /// The controller process holding its lease.
    pub incarnation: String,
    /// Milliseconds since the lease was last renewed, as far as the view
    /// knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed_ms_ago: Option<u64>,
    /// Milliseconds until the lease is no longer served (its end plus the
    /// skew allowance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// Whether the lease is past the renewal its holder promised.
    pub at_risk: bool,
    /// Its live exports.
    pub exports: u64,
    /// Those of them with `Conflict=True`.
    pub conflicts: u64,
    /// Its served pools.
    pub pools: u64,
}

/// The served pools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolsStatus {
    /// Pools served.
    pub count: u64,
    /// Leases past the renewal their holder promised, as the mass-expiry
    /// hold counts them: they expire soon unless a renewal arrives.
    pub expiring_soon: u64,
    /// The pools grouped by the cluster their key names (registered as a
    /// cluster or not), by cluster id.
    pub per_cluster: Vec<PoolGroup>,
}

/// The pools of one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PoolGroup {
    /// The cluster the pools' keys name.
    pub cluster_id: Label,
    /// Its pools served.
    pub pools: u64,
    /// Those past the renewal their holder promised.
    pub expiring_soon: u64,
}

/// A section of leased items (pools, routers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LeasedStatus {
    /// Items served.
    pub count: u64,
    /// Leases past the renewal their holder promised, as the mass-expiry
    /// hold counts them: they expire soon unless a renewal arrives.
    pub expiring_soon: u64,
}

/// The mass-expiry hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HoldStatus {
    /// Whether expiries are held back now.
    pub active: bool,
    /// Milliseconds since the hold began, while active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms_ago: Option<u64>,
    /// Leases past their end whose expiry is held back.
    pub held_leases: u64,
    /// `--expiry-hold-max-secs`, in milliseconds: the longest a hold lasts.
    pub max_hold_ms: u64,
}

/// An exported service whose exports conflict (KEP-1645: the oldest
/// export's definition is used, every export reports `Conflict=True`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConflictStatus {
    /// The service's namespace.
    pub namespace: Label,
    /// The service's name.
    pub name: Label,
    /// The clusters exporting it, by id.
    pub clusters: Vec<Label>,
    /// The `Conflict` condition's reasons, comma-separated.
    pub reason: String,
    /// The `Conflict` condition's message.
    pub message: String,
}

/// How bad a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Lists are incomplete or not served: clients keep what they had and
    /// delete nothing. `mcs-admin status` exits 1.
    Critical,
    /// Served lists are right, but something needs an operator.
    Warning,
}

impl Severity {
    /// The severity as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
        }
    }
}

/// One thing that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// What kind of finding (one of [`FindingCode`], snake_case); a string,
    /// so that an older reader takes a newer kind.
    pub code: String,
    /// One line: what is wrong, with the numbers.
    pub message: String,
    /// The runbook that fixes it: `docs/operations.md#<section>`.
    pub runbook: String,
}

/// The kinds of [`Finding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingCode {
    /// The first full read has not succeeded.
    NotReady,
    /// Storage answers that the table does not exist.
    TableMissing,
    /// The table's schema is past this binary's.
    SchemaTooNew,
    /// The last successful poll is older than `--stale-after-secs`.
    Stale,
    /// Polls fail, not for long enough yet to make lists stale.
    PollsFailing,
    /// No full read succeeded for two full-resync intervals.
    FullReadOverdue,
    /// Expiries are held back.
    ExpiryHold,
    /// Pool discovery has no complete list.
    DiscoveryIncomplete,
    /// Leases past the renewal their holders promised.
    LeasesAtRisk,
    /// An exported service's exports conflict.
    Conflict,
}

impl FindingCode {
    /// Every kind.
    pub const ALL: [FindingCode; 10] = [
        FindingCode::NotReady,
        FindingCode::TableMissing,
        FindingCode::SchemaTooNew,
        FindingCode::Stale,
        FindingCode::PollsFailing,
        FindingCode::FullReadOverdue,
        FindingCode::ExpiryHold,
        FindingCode::DiscoveryIncomplete,
        FindingCode::LeasesAtRisk,
        FindingCode::Conflict,
    ];

    /// The code as the document spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingCode::NotReady => "not_ready",
            FindingCode::TableMissing => "table_missing",
            FindingCode::SchemaTooNew => "schema_too_new",
            FindingCode::Stale => "stale",
            FindingCode::PollsFailing => "polls_failing",
            FindingCode::FullReadOverdue => "full_read_overdue",
            FindingCode::ExpiryHold => "expiry_hold",
            FindingCode::DiscoveryIncomplete => "discovery_incomplete",
            FindingCode::LeasesAtRisk => "leases_at_risk",
            FindingCode::Conflict => "conflict",
        }
    }

    /// The section of docs/operations.md that fixes it (its heading's
    /// anchor; a test checks every one exists).
    pub fn anchor(self) -> &'static str {
        match self {
            FindingCode::NotReady | FindingCode::TableMissing => "startup-and-storage-errors",
            FindingCode::SchemaTooNew => "rollout-and-rollback-n-1n",
            FindingCode::Stale | FindingCode::PollsFailing | FindingCode::FullReadOverdue => {
                "503s-from-storage"
            }
            FindingCode::ExpiryHold => "an-expiry-hold",
            FindingCode::DiscoveryIncomplete => "pool-discovery-fails",
            FindingCode::LeasesAtRisk => "leases-past-their-renewal",
            FindingCode::Conflict => "runbook-exports-not-ready",
        }
    }

    /// The finding's runbook link, `docs/operations.md#<anchor>`.
    pub fn runbook(self) -> String {
        format!("docs/operations.md#{}", self.anchor())
    }

    /// How bad a finding of this kind is: critical when lists are not
    /// served complete because of it, a warning otherwise.
    pub fn severity(self) -> Severity {
        match self {
            FindingCode::NotReady
            | FindingCode::TableMissing
            | FindingCode::SchemaTooNew
            | FindingCode::Stale
            | FindingCode::ExpiryHold
            | FindingCode::DiscoveryIncomplete => Severity::Critical,
            FindingCode::PollsFailing
            | FindingCode::FullReadOverdue
            | FindingCode::LeasesAtRisk
            | FindingCode::Conflict => Severity::Warning,
        }
    }

    fn finding(self, message: String) -> Finding {
        Finding {
            severity: self.severity(),
            code: self.as_str().to_owned(),
            message,
            runbook: self.runbook(),
        }
    }
}

/// What is wrong in `status` (its `findings` field aside), the critical
/// findings first, each kind in a fixed order. Pure: the registry fills in
/// the facts and calls it; a reader may call it again on a document.
pub fn findings(status: &Status) -> Vec<Finding> {
    let Status { process, view, reader, clusters, pools, routers, hold, conflicts, .. } = status;
    let mut found = Vec::new();
    let mut add = |code: FindingCode, message: String| found.push(code.finding(message));
    if !process.ready {
        add(
            FindingCode::NotReady,
            "the first full read of storage has not succeeded: nothing is served as complete"
                .to_owned(),
        );
    }
    if reader.table_missing {
        add(
            FindingCode::TableMissing,
            "storage answers that the table does not exist (the log names table, region and \
             endpoint)"
                .to_owned(),
        );
    }
    if let Some(found) = reader.table_schema_too_new {
        add(
            FindingCode::SchemaTooNew,
            format!(
                "the table is at schema version {found}, past this binary's ({}): writes are \
                 refused; run a registry release of schema version {found}",
                process.schema_version
            ),
        );
    }
    let stale = view.incomplete_because.contains(&Incomplete::Stale);
    if stale {
        let age = reader.last_poll_age_ms.map_or("never".to_owned(), |ms| format!("{ms} ms ago"));
        add(
            FindingCode::Stale,
            format!(
                "the last successful poll of storage was {age}, over --stale-after-secs ({} s): \
                 lists are incomplete",
                reader.stale_after_ms / 1000
            ),
        );
    }
    if hold.active {
        let since = hold.since_ms_ago.map_or(String::new(), |ms| format!(" for {} s", ms / 1000));
        add(
            FindingCode::ExpiryHold,
            format!(
                "expiries of {} leases held back{since} (at most {} s): this replica may have \
                 stopped receiving writes",
                hold.held_leases,
                hold.max_hold_ms / 1000
            ),
        );
    }
    if view.incomplete_because.contains(&Incomplete::Discovery) {
        add(
            FindingCode::DiscoveryIncomplete,
            "pool discovery from Kubernetes has no complete list: pools and routers are served \
             as last listed"
                .to_owned(),
        );
    }
    if reader.failed_polls_in_a_row > 0 && !stale && process.ready {
        add(
            FindingCode::PollsFailing,
            format!(
                "the last {} polls of storage failed; lists turn incomplete {} s after the last \
                 good one",
                reader.failed_polls_in_a_row,
                reader.stale_after_ms / 1000
            ),
        );
    }
    if let Some(age) = reader.last_full_read_age_ms
        && age > reader.full_resync_interval_ms.saturating_mul(2)
    {
        add(
            FindingCode::FullReadOverdue,
            format!(
                "no full read of storage succeeded for {} s (one is due every {} s): records the \
                 delta polls missed are not picked up",
                age / 1000,
                reader.full_resync_interval_ms / 1000
            ),
        );
    }
    let clusters_at_risk = clusters.iter().filter(|c| c.at_risk).count() as u64;
    let at_risk = pools.expiring_soon + routers.expiring_soon + clusters_at_risk;
    if at_risk > 0 && !hold.active {
        add(
            FindingCode::LeasesAtRisk,
            format!(
                "{at_risk} leases are past the renewal their holders promised ({} pools, {} \
                 routers, {clusters_at_risk} clusters): they expire unless renewed",
                pools.expiring_soon, routers.expiring_soon
            ),
        );
    }
    for conflict in conflicts {
        let clusters: Vec<&str> = conflict.clusters.iter().map(Label::as_str).collect();
        add(
            FindingCode::Conflict,
            format!(
                "service {}/{} is exported by {} with conflicting definitions ({}): {}",
                conflict.namespace,
                conflict.name,
                clusters.join(", "),
                conflict.reason,
                conflict.message
            ),
        );
    }
    // Stable: the kinds keep their order within a severity.
    found.sort_by_key(|finding| finding.severity);
    found
}

/// A duration for people, as every view of the document writes it: `850
/// ms`, `31 s`, `5 m`, `3 h`, `2 d` (the coarsest unit of at least two,
/// rounded down; seconds under two minutes).
pub fn human_ms(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms} ms"),
        1..=119 => format!("{secs} s"),
        120..=7_199 => format!("{} m", secs / 60),
        7_200..=172_799 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

impl Status {
    /// Whether any finding is critical.
    pub fn is_critical(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Critical)
    }
}

/// Documents for tests, here and in other crates (feature `fixtures`).
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures {
    use super::*;

    /// A healthy document: ready, complete, polled 500 ms ago, nothing held.
    pub fn healthy() -> Status {
        let label = |s: &str| Label::new(s).expect("a label");
        Status {
            process: ProcessStatus {
                region: Some("us-east-1".into()),
                storage: "memory".into(),
                writer_id: "reg-a".into(),
                version: "0.1.0 (commit abc)".into(),
                schema_version: 5,
                uptime_secs: 60,
                ready: true,
                now_ms: 1_800_000_000_000,
            },
            view: ViewStatus {
                complete: true,
                incomplete_because: vec![],
                sections: vec![SectionStatus {
                    section: "pools".into(),
                    items: 1,
                    fingerprint: "f".into(),
                }],
            },
            reader: ReaderStatus {
                last_poll_age_ms: Some(500),
                last_full_read_age_ms: Some(1_000),
                last_poll: Some(PollKind::Delta),
                failed_polls_in_a_row: 0,
                storage_errors: vec![],
                stale_after_ms: 30_000,
                full_resync_interval_ms: 300_000,
                table_missing: false,
                table_schema_too_new: None,
            },
            clusters: vec![ClusterStatus {
                cluster_id: label("east"),
                incarnation: "c1".into(),
                renewed_ms_ago: Some(2_000),
                expires_in_ms: Some(29_000),
                at_risk: false,
                exports: 1,
                conflicts: 0,
                pools: 1,
            }],
            pools: PoolsStatus {
                count: 1,
                expiring_soon: 0,
                per_cluster: vec![PoolGroup {
                    cluster_id: label("east"),
                    pools: 1,
                    expiring_soon: 0,
                }],
            },
            routers: LeasedStatus { count: 0, expiring_soon: 0 },
            hold: HoldStatus {
                active: false,
                since_ms_ago: None,
                held_leases: 0,
                max_hold_ms: 30_000,
            },
            conflicts: vec![],
            findings: vec![],
        }
    }

    /// Service `namespace/name` exported by east and west, in conflict for
    /// `reason`: "ports differ".
    pub fn conflict(namespace: &str, name: &str, reason: &str) -> ConflictStatus {
        let label = |s: &str| Label::new(s).expect("a label");
        ConflictStatus {
            namespace: label(namespace),
            name: label(name),
            clusters: vec![label("east"), label("west")],
            reason: reason.into(),
            message: "ports differ".into(),
        }
    }
}
#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
