use super::*;
use crate::commands::describe::needed_indexes;
use crate::scan::view_of;
use mcs_core::fixtures::{mk_cluster, mk_export, mk_export_spec, mk_pool, port};
use mcs_store::dynamo::raw::{AttributeValue, Item};

const NOW: u64 = 1_764_662_400_000;

fn healthy_facts() -> TableFacts {
    TableFacts {
        status: "ACTIVE".into(),
        indexes: ["changes", "lease_ends", "change_stamps"]
            .map(|name| (name.to_owned(), "ACTIVE".to_owned()))
            .into(),
        ttl_status: "ENABLED".into(),
        ttl_attribute: Some("ttl".into()),
        stream_enabled: true,
        stream_view_type: Some("NEW_AND_OLD_IMAGES".into()),
        ..TableFacts::default()
    }
}

fn with_ttl(record: Record, ttl_secs: Option<u64>) -> (Record, Item) {
    let mut item = Item::new();
    if let Some(t) = ttl_secs {
        item.insert(TTL.to_owned(), AttributeValue::N(t.to_string()));
    }
    (record, item)
}

fn diagnose(records: Vec<(Record, Item)>, facts: &TableFacts, schema: Option<u32>) -> Vec<Check> {
    let scan = Scan { records, ..Scan::default() };
    let view = view_of(scan.records.iter().map(|(r, _)| r.clone()), 1_000, NOW);
    checks(&Findings {
        schema_version: schema,
        facts,
        needed_indexes: &needed_indexes(schema).unwrap(),
        scan: &scan,
        view: &view,
        skew_ms: 1_000,
        ttl_grace_ms: 3_600_000,
        retention_ms: 2 * 86_400_000,
        origin: "us-east-1",
        now_ms: NOW,
    })
}

fn problems(checks: &[Check]) -> Vec<&str> {
    checks.iter().filter(|c| c.status == Status::Problem).map(|c| c.name.as_str()).collect()
}

fn check<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no {name} in {checks:#?}"))
}

fn at(mut record: Record, changed_at_ms: u64) -> Record {
    record.changed_at_ms = changed_at_ms;
    record
}

#[test]
fn a_healthy_table_has_no_problem() {
    let records = vec![
        with_ttl(
            at(mk_pool("a", 1, "w", None, Some(NOW + 30_000)), NOW - 5),
            Some(NOW / 1000 + 90_000),
        ),
        with_ttl(at(mk_cluster("c1", 1, "inc", NOW + 30_000), NOW - 5), None),
        with_ttl(
            at(mk_export("c1", "web", 1, mk_export_spec(0, vec![port("http", 80)])), NOW),
            None,
        ),
    ];
    let checks = diagnose(records, &healthy_facts(), Some(SCHEMA_VERSION));
    assert_eq!(problems(&checks), Vec::<&str>::new(), "{checks:#?}");
    assert_eq!(checks.len(), 12);
    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names[3..6], ["changes index", "lease_ends index", "change_stamps index"]);
}

#[test]
fn table_settings_are_checked() {
    let mut facts = healthy_facts();
    facts.ttl_status = "DISABLED".into();
    facts.stream_view_type = Some("KEYS_ONLY".into());
    facts.indexes.insert("changes".into(), "CREATING".into());
    let checks = diagnose(vec![], &facts, Some(SCHEMA_VERSION + 1));
    assert_eq!(problems(&checks), vec!["schema", "ttl", "stream", "changes index"]);
    assert!(checks[0].detail.contains("newer"), "{:?}", checks[0]);
    assert!(
        check(&checks, "changes index").detail.starts_with("CREATING: registries at this schema"),
        "{checks:#?}"
    );
    // No version recorded: it needs what migrate gives it.
    let checks = diagnose(vec![], &TableFacts::default(), None);
    assert_eq!(
        problems(&checks),
        vec!["schema", "ttl", "stream", "changes index", "lease_ends index", "change_stamps index"]
    );
    for name in ["changes index", "lease_ends index", "change_stamps index"] {
        assert_eq!(check(&checks, name).detail, "missing: run mcs-admin migrate");
    }
}

#[test]
fn a_table_at_3_without_lease_ends_is_told_to_migrate() {
    let mut facts = healthy_facts();
    facts.indexes.remove("lease_ends");
    facts.indexes.remove("change_stamps");
    let checks = diagnose(vec![], &facts, Some(3));
    assert_eq!(problems(&checks), vec!["schema", "lease_ends index"], "{checks:#?}");
    assert_eq!(check(&checks, "lease_ends index").detail, "missing: run mcs-admin migrate");
    assert!(
        !checks.iter().any(|c| c.name == "change_stamps index"),
        "a table at 3 does not need change_stamps: {checks:#?}"
    );
}

#[test]
fn a_table_at_5_waits_for_change_stamps_to_backfill() {
    let mut facts = healthy_facts();
    facts.indexes.insert("change_stamps".into(), "CREATING (backfilling)".into());
    let checks = diagnose(vec![], &facts, Some(5));
    assert_eq!(problems(&checks), vec!["change_stamps index"], "{checks:#?}");
    let detail = &check(&checks, "change_stamps index").detail;
    assert!(detail.starts_with("CREATING (backfilling): "), "{detail}");
    assert!(detail.contains("wait for the backfill"), "{detail}");
    facts.indexes.insert("change_stamps".into(), "DELETING".into());
    let checks = diagnose(vec![], &facts, Some(5));
    let detail = &check(&checks, "change_stamps index").detail;
    assert!(detail.ends_with("run mcs-admin migrate once it is deleted (it creates it again)"));
}

#[test]
fn a_table_at_2_needs_lease_ends_but_not_change_stamps() {
    let mut facts = healthy_facts();
    facts.indexes.remove("change_stamps");
    let checks = diagnose(vec![], &facts, Some(2));
    assert_eq!(problems(&checks), vec!["schema"], "{checks:#?}");
    assert_eq!(check(&checks, "lease_ends index").status, Status::Ok);
    assert!(!checks.iter().any(|c| c.name == "change_stamps index"), "{checks:#?}");
    // A change_stamps index a migrate to 4 is building is no problem yet.
    facts.indexes.insert("change_stamps".into(), "CREATING (backfilling)".into());
    assert_eq!(problems(&diagnose(vec![], &facts, Some(3))), vec!["schema"]);
    facts.indexes.insert("lease_ends".into(), "CREATING".into());
    let checks = diagnose(vec![], &facts, Some(2));
    assert_eq!(problems(&checks), vec!["schema", "lease_ends index"], "{checks:#?}");
}

#[test]
fn a_table_mid_rollout_is_told_apart_from_one_to_migrate() {
    let compat = diagnose(vec![], &healthy_facts(), Some(SCHEMA_VERSION - 1));
    assert_eq!(problems(&compat), vec!["schema"]);
    assert!(compat[0].detail.contains("compatibility mode"), "{:?}", compat[0]);
    let old = diagnose(vec![], &healthy_facts(), Some(1));
    assert!(old[0].detail.contains("this binary needs 5: run mcs-admin migrate"), "{:?}", old[0]);
    let two = diagnose(vec![], &healthy_facts(), Some(2));
    assert!(two[0].detail.contains("renewals still move changed_at_ms"), "{:?}", two[0]);
}

#[test]
fn records_are_checked_and_named() {
    let spec = |at, p| mk_export_spec(at, vec![port("http", p)]);
    let records = vec![
        with_ttl(at(mk_cluster("c1", 1, "inc", NOW + 30_000), NOW), None),
        with_ttl(at(mk_cluster("c2", 1, "inc", NOW + 30_000), NOW), None),
        with_ttl(at(mk_export("c1", "web", 1, spec(1, 80)), NOW), None),
        with_ttl(at(mk_export("c2", "web", 1, spec(2, 81)), NOW), None),
        with_ttl(at(mk_export("c9", "api", 1, spec(1, 80)), NOW), None),
        with_ttl(at(mk_pool("future", 1, "w9", None, Some(NOW + 30_000)), NOW + 60_000), None),
        with_ttl(
            at(mk_pool("stale", 1, "w", None, Some(NOW - 10 * 86_400_000)), NOW - 10 * 86_400_000),
            Some(NOW / 1000 - 7_200),
        ),
        with_ttl(
            at(mk_pool("due", 1, "w", None, Some(NOW - 10 * 86_400_000)), NOW - 10 * 86_400_000),
            Some(NOW / 1000 - 60),
        ),
    ];
    let checks = diagnose(records, &healthy_facts(), Some(SCHEMA_VERSION));
    assert_eq!(
        problems(&checks),
        vec!["orphaned exports", "conflicts", "clock skew", "ttl backlog"]
    );
    let named = |name: &str| check(&checks, name).items.clone();
    assert_eq!(
        named("orphaned exports"),
        vec!["export/c9/llm/api: no cluster record; mcs-admin gc collects it in 2d"]
    );
    let conflicts = named("conflicts");
    assert_eq!(conflicts.len(), 2, "{conflicts:?}");
    assert!(conflicts[0].starts_with("export/c1/llm/web: PortConflict"), "{conflicts:?}");
    let skewed = named("clock skew");
    assert_eq!(skewed.len(), 1);
    assert!(skewed[0].contains("written by w9 60s ahead"), "{skewed:?}");
    let backlog = named("ttl backlog");
    assert_eq!(backlog.len(), 1, "the one within the grace is not named: {backlog:?}");
    assert!(backlog[0].ends_with("(item of ?): ttl passed 2h ago"), "{backlog:?}");
}

#[test]
fn orphaned_exports_are_a_problem_until_gc_can_and_does_collect_them() {
    const DAY: u64 = 86_400_000;
    let spec = || mk_export_spec(0, vec![port("http", 80)]);
    let withdrawn = |cluster: &str, ago| {
        let mut t = at(mcs_core::fixtures::mk_tombstone("x", 1, "w"), NOW - ago);
        t.key = Key::Cluster { cluster_id: mcs_core::fixtures::label(cluster) };
        with_ttl(t, None)
    };
    // Withdrawn an hour ago: its exports are expected, left for gc.
    let expected = vec![
        withdrawn("gone", 3_600_000),
        with_ttl(at(mk_export("gone", "web", 1, spec()), NOW - 5 * DAY), None),
    ];
    let checks = diagnose(expected.clone(), &healthy_facts(), Some(SCHEMA_VERSION));
    let check = checks.iter().find(|c| c.name == "orphaned exports").unwrap();
    assert_eq!(check.status, Status::Ok, "{check:?}");
    assert_eq!(
        check.items,
        vec!["export/gone/llm/web: cluster withdrawn 60m ago; mcs-admin gc collects it in 47h"]
    );
    // Withdrawn past the retention, within the grace: still no problem.
    let due = vec![
        withdrawn("due", 2 * DAY + 60_000),
        with_ttl(at(mk_export("due", "web", 1, spec()), NOW - 5 * DAY), None),
    ];
    let checks = diagnose(due, &healthy_facts(), Some(SCHEMA_VERSION));
    assert_eq!(problems(&checks), Vec::<&str>::new(), "{checks:#?}");
    // Past the retention by more than the grace: gc has not run.
    let forgotten = vec![
        withdrawn("old", 3 * DAY),
        with_ttl(at(mk_export("old", "web", 1, spec()), NOW - 5 * DAY), None),
    ];
    let checks = diagnose(forgotten, &healthy_facts(), Some(SCHEMA_VERSION));
    let check = checks.iter().find(|c| c.name == "orphaned exports").unwrap();
    assert_eq!(check.status, Status::Problem);
    assert_eq!(
        check.items,
        vec![
            "export/old/llm/web: cluster withdrawn 3d ago; past the retention 24h ago: \
              mcs-admin gc collects it"
        ]
    );
    // A lease that ended without a withdrawal: a problem, as before.
    let ended = vec![
        with_ttl(at(mk_cluster("down", 1, "inc", NOW - 600_000), NOW - 600_000), None),
        with_ttl(at(mk_export("down", "web", 1, spec()), NOW - DAY), None),
    ];
    let checks = diagnose(ended, &healthy_facts(), Some(SCHEMA_VERSION));
    let check = checks.iter().find(|c| c.name == "orphaned exports").unwrap();
    assert_eq!(check.status, Status::Problem);
    assert!(check.detail.contains("withdraw the cluster"), "{check:?}");
}

#[test]
fn garbage_of_other_regions_is_counted_per_origin_and_is_no_problem() {
    const DAY: u64 = 86_400_000;
    let item_of = |record: Record, from: &str| {
        let item = mcs_store::dynamo::raw::primary_key(&record.key, from);
        (record, item)
    };
    let tomb = |name, generation, ago| {
        at(mcs_core::fixtures::mk_tombstone(name, generation, "w"), NOW - ago)
    };
    let records = vec![
        // Past the retention: one item of ours, two of eu-west-1, one of
        // ap-south-1.
        item_of(tomb("a", 2, 3 * DAY), "eu-west-1"),
        item_of(at(mk_pool("a", 1, "w", None, Some(NOW - 4 * DAY)), NOW - 4 * DAY), "us-east-1"),
        item_of(tomb("b", 1, 3 * DAY), "eu-west-1"),
        item_of(tomb("c", 1, 3 * DAY), "ap-south-1"),
        // Within the retention: nobody's garbage yet.
        item_of(tomb("d", 1, DAY), "eu-west-1"),
    ];
    let checks = diagnose(records, &healthy_facts(), Some(SCHEMA_VERSION));
    assert_eq!(problems(&checks), Vec::<&str>::new(), "{checks:#?}");
    let check = checks.iter().find(|c| c.name == "foreign garbage").unwrap();
    assert_eq!(
        check.detail,
        "3 items of other regions past the retention, left alone by gc here: gc in their \
         region collects them"
    );
    assert_eq!(
        check.items,
        vec![
            "ap-south-1: 1 item past the retention: run mcs-admin gc --region ap-south-1",
            "eu-west-1: 2 items past the retention: run mcs-admin gc --region eu-west-1",
        ]
    );
    let none = diagnose(vec![], &healthy_facts(), Some(SCHEMA_VERSION));
    assert_eq!(none.last().unwrap().detail, "no item of another region past the retention");
}

#[test]
fn the_report_lists_named_items_under_the_table() {
    let d = Diagnosis {
        table: "t".into(),
        region: "us-east-1".into(),
        endpoint: None,
        healthy: false,
        checks: vec![
            Check::ok("schema", "version 1"),
            Check::of_items(
                "conflicts",
                vec!["export/a/b/c: X".into()],
                "none",
                "1 conflict".into(),
            ),
        ],
    };
    let text = render(&d, Format::Table).unwrap();
    assert!(text.contains("conflicts  problem  1 conflict\n"), "{text}");
    assert!(text.contains("\nconflicts:\n  export/a/b/c: X\n"), "{text}");
    assert!(text.ends_with("problems found\n"));
    let json: serde_json::Value = serde_json::from_str(&render(&d, Format::Json).unwrap()).unwrap();
    assert_eq!(json["checks"][1]["status"], "problem");
    assert_eq!(json["healthy"], false);
    assert_eq!((json["table"].as_str(), json["region"].as_str()), (Some("t"), Some("us-east-1")));
}
