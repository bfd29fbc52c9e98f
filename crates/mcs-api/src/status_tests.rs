//! The findings of a status document, one rule at a time, pinned at their
//! boundaries; and every runbook anchor a finding names exists in
//! docs/operations.md.

use super::*;
use crate::testutil::{parse, round_trip};
use fixtures::healthy;

fn codes(status: &Status) -> Vec<&'static str> {
    let found = findings(status);
    FindingCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|code| found.iter().any(|f| f.code == *code))
        .collect()
}

fn only(status: &Status) -> Finding {
    let found = findings(status);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.into_iter().next().unwrap()
}

#[test]
fn a_healthy_registry_has_no_findings() {
    let status = healthy();
    assert_eq!(findings(&status), vec![]);
    assert!(!status.is_critical());
}

#[test]
fn a_registry_before_its_first_full_read_is_critical() {
    let mut status = healthy();
    status.process.ready = false;
    let finding = only(&status);
    assert_eq!(finding.code, "not_ready");
    assert_eq!(finding.severity, Severity::Critical);
    assert_eq!(finding.runbook, "docs/operations.md#startup-and-storage-errors");
}

#[test]
fn a_missing_table_and_a_newer_schema_are_critical() {
    let mut status = healthy();
    status.reader.table_missing = true;
    assert_eq!(only(&status).code, "table_missing");
    let mut status = healthy();
    status.reader.table_schema_too_new = Some(6);
    let finding = only(&status);
    assert_eq!(finding.code, "schema_too_new");
    assert!(finding.message.contains("schema version 6, past this binary's (5)"), "{finding:?}");
    assert_eq!(finding.severity, Severity::Critical);
}

#[test]
fn a_stale_view_is_critical_and_says_how_old() {
    let mut status = healthy();
    status.view.complete = false;
    status.view.incomplete_because = vec![Incomplete::Stale];
    status.reader.last_poll_age_ms = Some(31_000);
    status.reader.failed_polls_in_a_row = 20;
    let finding = only(&status);
    assert_eq!(finding.code, "stale", "failing polls are said once: as the stale view");
    assert_eq!(
        finding.message,
        "the last successful poll of storage was 31000 ms ago, over --stale-after-secs (30 s): \
         lists are incomplete"
    );
    assert_eq!(finding.runbook, "docs/operations.md#503s-from-storage");
    status.reader.last_poll_age_ms = None;
    assert!(only(&status).message.contains("was never,"));
}

#[test]
fn failing_polls_warn_before_the_view_is_stale() {
    let mut status = healthy();
    status.reader.failed_polls_in_a_row = 1;
    let finding = only(&status);
    assert_eq!(finding.code, "polls_failing");
    assert_eq!(finding.severity, Severity::Warning);
    assert!(finding.message.starts_with("the last 1 polls of storage failed"), "{finding:?}");
    status.process.ready = false;
    assert_eq!(codes(&status), ["not_ready"], "before the first read it is not-ready alone");
}

#[test]
fn a_full_read_is_overdue_past_two_intervals_not_at_them() {
    let mut status = healthy();
    status.reader.last_full_read_age_ms = Some(600_000);
    assert_eq!(findings(&status), vec![]);
    status.reader.last_full_read_age_ms = Some(600_001);
    let finding = only(&status);
    assert_eq!(finding.code, "full_read_overdue");
    assert_eq!(finding.severity, Severity::Warning);
    assert!(finding.message.contains("for 600 s (one is due every 300 s)"), "{finding:?}");
}

#[test]
fn a_hold_is_critical_and_hides_the_leases_it_holds() {
    let mut status = healthy();
    status.hold = HoldStatus {
        active: true,
        since_ms_ago: Some(4_000),
        held_leases: 12,
        max_hold_ms: 30_000,
    };
    status.pools.expiring_soon = 12;
    status.view.incomplete_because = vec![Incomplete::Hold];
    let finding = only(&status);
    assert_eq!(finding.code, "expiry_hold");
    assert_eq!(finding.severity, Severity::Critical);
    assert_eq!(
        finding.message,
        "expiries of 12 leases held back for 4 s (at most 30 s): this replica may have stopped \
         receiving writes"
    );
    assert_eq!(finding.runbook, "docs/operations.md#an-expiry-hold");
    status.hold.since_ms_ago = None;
    assert!(only(&status).message.starts_with("expiries of 12 leases held back (at most"));
}

#[test]
fn incomplete_discovery_is_critical() {
    let mut status = healthy();
    status.view.incomplete_because = vec![Incomplete::Discovery];
    let finding = only(&status);
    assert_eq!(finding.code, "discovery_incomplete");
    assert_eq!(finding.severity, Severity::Critical);
}

#[test]
fn leases_at_risk_are_counted_over_pools_routers_and_clusters() {
    let mut status = healthy();
    status.pools.expiring_soon = 2;
    status.routers.expiring_soon = 1;
    status.clusters[0].at_risk = true;
    let finding = only(&status);
    assert_eq!(finding.code, "leases_at_risk");
    assert_eq!(finding.severity, Severity::Warning);
    assert_eq!(
        finding.message,
        "4 leases are past the renewal their holders promised (2 pools, 1 routers, 1 clusters): \
         they expire unless renewed"
    );
    for one in 0..3 {
        let mut status = healthy();
        match one {
            0 => status.pools.expiring_soon = 1,
            1 => status.routers.expiring_soon = 1,
            _ => status.clusters[0].at_risk = true,
        }
        assert_eq!(codes(&status), ["leases_at_risk"], "{one}");
    }
}

#[test]
fn each_conflicting_service_is_a_warning_naming_its_clusters() {
    let mut status = healthy();
    status.conflicts = vec![fixtures::conflict("shop", "cart", "ConflictingPorts")];
    status.reader.table_missing = true;
    let found = findings(&status);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].code, "table_missing", "critical first");
    assert_eq!(found[1].severity, Severity::Warning);
    assert_eq!(
        found[1].message,
        "service shop/cart is exported by east, west with conflicting definitions \
         (ConflictingPorts): ports differ"
    );
    assert_eq!(found[1].runbook, "docs/operations.md#runbook-exports-not-ready");
    status.findings = vec![found[1].clone()];
    assert!(!status.is_critical(), "a warning alone is not critical");
    status.findings = found;
    assert!(status.is_critical());
}

#[test]
fn criticals_come_first_in_the_order_of_their_kinds() {
    let mut status = healthy();
    status.reader.failed_polls_in_a_row = 1;
    status.reader.table_missing = true;
    status.process.ready = true;
    status.view.incomplete_because = vec![Incomplete::Discovery];
    let found: Vec<String> = findings(&status).into_iter().map(|f| f.code).collect();
    assert_eq!(found, ["table_missing", "discovery_incomplete", "polls_failing"]);
}

#[test]
fn severity_orders_critical_first_and_kinds_are_closed() {
    assert!(Severity::Critical < Severity::Warning);
    assert_eq!(Severity::Critical.as_str(), "critical");
    assert_eq!(Severity::Warning.as_str(), "warning");
    let critical: Vec<&str> = FindingCode::ALL
        .iter()
        .filter(|c| c.severity() == Severity::Critical)
        .map(|c| c.as_str())
        .collect();
    assert_eq!(
        critical,
        [
            "not_ready",
            "table_missing",
            "schema_too_new",
            "stale",
            "expiry_hold",
            "discovery_incomplete"
        ]
    );
    for reason in [Incomplete::NotReady, Incomplete::Stale, Incomplete::Hold, Incomplete::Discovery]
    {
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
}

/// GitHub's anchor of a Markdown heading: lowercase, letters, digits,
/// spaces and hyphens kept, spaces turned to hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_runbook_a_finding_names_is_a_section_of_operations_md() {
    let doc = include_str!("../../../docs/operations.md");
    let anchors: Vec<String> = doc.lines().filter(|l| l.starts_with('#')).map(anchor_of).collect();
    assert_eq!(anchor_of("### Rollout and rollback (N-1/N)"), "rollout-and-rollback-n-1n");
    assert_eq!(anchor_of("### Lists say `complete: false`"), "lists-say-complete-false");
    for code in FindingCode::ALL {
        assert!(anchors.iter().any(|a| a == code.anchor()), "{code:?}: #{} missing", code.anchor());
        assert_eq!(code.runbook(), format!("docs/operations.md#{}", code.anchor()));
    }
}

#[test]
fn the_document_round_trips_and_takes_new_finding_kinds() {
    let mut status = healthy();
    status.findings = findings(&status);
    round_trip(&status);
    let finding: Finding = parse(
        r#"{"severity":"warning","code":"from_the_future","message":"m","runbook":"r","x":1}"#,
    )
    .unwrap();
    assert_eq!(finding.code, "from_the_future");
}

#[test]
fn durations_read_in_the_coarsest_unit_of_at_least_two() {
    let cases = [
        (0, "0 ms"),
        (999, "999 ms"),
        (1_000, "1 s"),
        (119_999, "119 s"),
        (120_000, "2 m"),
        (7_199_999, "119 m"),
        (7_200_000, "2 h"),
        (172_799_999, "47 h"),
        (172_800_000, "2 d"),
    ];
    for (ms, text) in cases {
        assert_eq!(human_ms(ms), text, "{ms}");
    }
}
