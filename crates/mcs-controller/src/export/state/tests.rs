use super::*;
use mcs_api::{ConditionStatus, Export, ExportSpec, ServiceType};

fn id(name: &str) -> Id {
    ("llm".into(), name.into())
}

fn spec(port: u16) -> ExportSpec {
    serde_json::from_value(serde_json::json!({
        "type": "ClusterSetIP",
        "ports": [{"name": "http", "port": port}],
        "exported_at": "2026-12-02T08:00:00Z"
    }))
    .unwrap()
}

fn conflict(status: ConditionStatus, reason: &str) -> Condition {
    Condition {
        condition_type: "Conflict".into(),
        status,
        reason: reason.into(),
        message: "m".into(),
    }
}

fn export(cluster: &str, name: &str, spec: ExportSpec, conditions: Vec<Condition>) -> Export {
    Export {
        cluster_id: Label::new(cluster).unwrap(),
        namespace: Label::new("llm").unwrap(),
        name: Label::new(name).unwrap(),
        spec,
        conditions,
    }
}

fn list(complete: bool, exports: Vec<Export>) -> ExportList {
    ExportList { exports, complete, fingerprint: "f".into() }
}

fn east() -> Label {
    Label::new("east").unwrap()
}

#[test]
fn an_export_is_sent_when_new_changed_or_after_a_registration_and_not_otherwise() {
    let mut st = State::default();
    let web = id("web");
    assert!(st.needs_send(&web, "h1", 1), "never sent");
    st.sent(web.clone(), "h1".into(), 1, vec![]);
    assert!(!st.needs_send(&web, "h1", 1), "nothing changed: no write");
    assert!(st.needs_send(&web, "h2", 1), "new content");
    assert!(st.needs_send(&web, "h1", 2), "re-registered since");
    st.forget(&web);
    assert!(st.needs_send(&web, "h1", 1), "a failed send is sent again");
}

#[test]
fn a_resync_resends_only_what_the_registry_lacks_or_holds_differently() {
    let mut st = State::default();
    let (web, api) = (id("web"), id("api"));
    let h80 = content_hash(&spec(80));
    st.sent(web.clone(), h80.clone(), 1, vec![]);
    st.sent(api.clone(), h80.clone(), 1, vec![]);
    // The registry holds web as sent, and api differently (edited, or an
    // older write).
    st.take_view(
        &east(),
        list(
            true,
            vec![export("east", "web", spec(80), vec![]), export("east", "api", spec(81), vec![])],
        ),
    );
    assert!(!st.needs_send(&web, &h80, 1), "no resync yet");
    assert!(!st.needs_send(&api, &h80, 1), "no resync yet");
    st.next_epoch();
    assert!(!st.needs_send(&web, &h80, 1), "the registry's copy matches");
    assert!(st.needs_send(&api, &h80, 1), "the registry's copy differs");
    // Missing from the registry: re-sent on the next resync, once.
    st.take_view(&east(), list(true, vec![export("east", "api", spec(80), vec![])]));
    st.next_epoch();
    assert!(st.needs_send(&web, &h80, 1));
    st.sent(web.clone(), h80.clone(), 1, vec![]);
    assert!(!st.needs_send(&web, &h80, 1), "checked once per resync");
    // Without a complete view, a resync re-sends.
    st.take_view(&east(), list(false, vec![]));
    st.next_epoch();
    assert!(st.needs_send(&api, &h80, 1));
}

#[test]
fn the_view_keeps_this_clusters_exports_and_reports_condition_changes() {
    let mut st = State::default();
    let none = conflict(ConditionStatus::False, "NoConflicts");
    let port = conflict(ConditionStatus::True, "PortConflict");
    let first = list(true, vec![export("east", "web", spec(80), vec![none.clone()])]);
    assert!(st.take_view(&east(), first.clone()), "the first view");
    assert!(!st.take_view(&east(), first), "the same view");
    // Another cluster's export changing is not this cluster's business...
    assert!(!st.take_view(
        &east(),
        list(
            true,
            vec![
                export("east", "web", spec(80), vec![none.clone()]),
                export("west", "web", spec(81), vec![none.clone()])
            ]
        )
    ));
    // ...until it makes this cluster's export conflict.
    assert!(st.take_view(
        &east(),
        list(
            true,
            vec![
                export("east", "web", spec(80), vec![port.clone()]),
                export("west", "web", spec(81), vec![port.clone()])
            ]
        )
    ));
    // An endpoint change of this cluster's export (new content, same
    // conditions) needs no look at every export.
    let mut moved = spec(80);
    moved.service_type = ServiceType::Headless;
    assert!(
        !st.take_view(&east(), list(true, vec![export("east", "web", moved, vec![port.clone()])]))
    );
    assert!(st.take_view(&east(), list(true, vec![])), "gone from the registry");
}

#[test]
fn the_registrys_conditions_come_from_the_view_once_it_holds_what_was_sent() {
    let mut st = State::default();
    let web = id("web");
    let reply = vec![conflict(ConditionStatus::False, "NoConflicts")];
    let later = vec![conflict(ConditionStatus::True, "PortConflict")];
    assert!(st.registry_conditions(&web).is_empty());
    st.take_view(&east(), list(true, vec![export("east", "web", spec(81), later.clone())]));
    st.sent(web.clone(), content_hash(&spec(80)), 1, reply.clone());
    assert_eq!(st.registry_conditions(&web), reply, "the view is older than the send");
    st.take_view(&east(), list(true, vec![export("east", "web", spec(80), later.clone())]));
    assert_eq!(st.registry_conditions(&web), later);
}

#[test]
fn withdrawals_are_needed_only_where_the_registry_may_hold_the_export() {
    let mut st = State::default();
    let (web, api, gone) = (id("web"), id("api"), id("gone"));
    assert!(st.registry_may_hold(&web), "no view yet: maybe");
    st.take_view(&east(), list(true, vec![export("east", "api", spec(80), vec![])]));
    assert!(!st.registry_may_hold(&web));
    assert!(st.registry_may_hold(&api));
    st.sent(web.clone(), "h".into(), 1, vec![]);
    assert!(st.registry_may_hold(&web), "sent, the view not caught up");
    // Orphans: in the registry, not sent, no ServiceExport.
    st.take_view(
        &east(),
        list(
            true,
            vec![
                export("east", "api", spec(80), vec![]),
                export("east", "gone", spec(80), vec![]),
                export("east", "web", spec(80), vec![]),
            ],
        ),
    );
    assert!(st.orphans(|id| id.1 == "api").is_empty(), "an unfilled store proves nothing");
    st.synced();
    assert_eq!(st.orphans(|id| id.1 == "api"), vec![gone.clone()]);
    st.take_view(&east(), list(false, vec![]));
    assert!(st.orphans(|_| false).is_empty(), "an incomplete view proves nothing");
}

#[test]
fn generations_are_in_registry_units_and_always_increase() {
    let mut st = State::default();
    let first = st.next_generation(1_000);
    assert_eq!(first, 1_000 << 16);
    assert_eq!(st.next_generation(1_000), first + 1, "same millisecond");
    assert_eq!(st.next_generation(999), first + 2, "clock went back");
    st.observe_generation(5_000 << 16);
    assert_eq!(st.next_generation(1_001), (5_000 << 16) + 1, "past a stored one");
}

#[test]
fn failures_and_shown_conditions_are_counted() {
    let mut st = State::default();
    let web = id("web");
    assert_eq!((st.failed(&web), st.failed(&web)), (1, 2));
    st.succeeded(&web);
    assert_eq!(st.failed(&web), 1);
    st.shown(web.clone(), vec![("Valid".into(), "True".into()), ("Ready".into(), "False".into())]);
    st.shown(id("api"), vec![("Valid".into(), "True".into())]);
    assert_eq!(
        (st.count("Valid", "True"), st.count("Ready", "False"), st.count("Ready", "True")),
        (2, 1, 0)
    );
    st.remove(&web);
    assert_eq!(st.count("Valid", "True"), 1);
}
