use super::*;
use mcs_api::{ConditionStatus, Export, ExportSpec};

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

/// How a view is taken in: whole lists, or (after a complete one) the
/// changes between lists, as `mcs_client::Client::watch_changes` gives
/// them. The tests of the view run both ways and must agree.
#[derive(Clone, Copy, Debug)]
enum Via {
    Lists,
    Changes,
}

/// A [`State`] fed with east's view through `via`.
struct Fed {
    st: State,
    via: Via,
    last: Option<ExportList>,
}

impl Fed {
    fn both() -> [Fed; 2] {
        [Via::Lists, Via::Changes].map(|via| Fed { st: State::default(), via, last: None })
    }

    fn take(&mut self, list: ExportList) -> Vec<Id> {
        let last = self.last.replace(list.clone());
        match (self.via, last) {
            (Via::Changes, Some(last)) if last.complete => {
                self.st.take_changes(&east(), changes_between(&last, &list))
            }
            _ => self.st.take_view(&east(), list),
        }
    }
}

impl std::ops::Deref for Fed {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for Fed {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

/// What changed from `old` to `new`, by cluster, namespace and name.
fn changes_between(old: &ExportList, new: &ExportList) -> Changes<Export> {
    let key = |e: &Export| (e.cluster_id.to_string(), e.namespace.to_string(), e.name.to_string());
    let by_key = |l: &ExportList| -> std::collections::BTreeMap<_, Export> {
        l.exports.iter().map(|e| (key(e), e.clone())).collect()
    };
    let (old, new_items) = (by_key(old), by_key(new));
    Changes {
        upserted: new_items
            .iter()
            .filter(|(k, e)| old.get(*k) != Some(*e))
            .map(|(_, e)| e.clone())
            .collect(),
        deleted: old
            .iter()
            .filter(|(k, _)| !new_items.contains_key(*k))
            .map(|(_, e)| e.clone())
            .collect(),
        complete: new.complete,
        fingerprint: new.fingerprint.clone(),
    }
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
    for mut st in Fed::both() {
        let (web, api) = (id("web"), id("api"));
        let h80 = content_hash(&spec(80));
        st.sent(web.clone(), h80.clone(), 1, vec![]);
        st.sent(api.clone(), h80.clone(), 1, vec![]);
        // The registry holds web as sent, and api differently (edited, or an
        // older write).
        st.take(list(
            true,
            vec![export("east", "web", spec(80), vec![]), export("east", "api", spec(81), vec![])],
        ));
        assert!(!st.needs_send(&web, &h80, 1), "no resync yet");
        assert!(!st.needs_send(&api, &h80, 1), "no resync yet");
        st.next_epoch();
        assert!(!st.needs_send(&web, &h80, 1), "the registry's copy matches");
        assert!(st.needs_send(&api, &h80, 1), "the registry's copy differs");
        // Missing from the registry: re-sent on the next resync, once.
        st.take(list(true, vec![export("east", "api", spec(80), vec![])]));
        st.next_epoch();
        assert!(st.needs_send(&web, &h80, 1));
        st.sent(web.clone(), h80.clone(), 1, vec![]);
        assert!(!st.needs_send(&web, &h80, 1), "checked once per resync");
        // Without a complete view, a resync re-sends, even one that holds
        // the copy as sent: an incomplete list proves nothing.
        st.take(list(false, vec![export("east", "api", spec(80), vec![])]));
        st.next_epoch();
        assert!(st.needs_send(&api, &h80, 1));
    }
}

#[test]
fn the_view_reports_the_exports_whose_registry_conditions_changed() {
    for mut st in Fed::both() {
        let (web, api) = (id("web"), id("api"));
        let none = conflict(ConditionStatus::False, "NoConflicts");
        let port = conflict(ConditionStatus::True, "PortConflict");
        let h80 = content_hash(&spec(80));
        st.sent(web.clone(), h80.clone(), 1, vec![none.clone()]);
        st.sent(api.clone(), h80.clone(), 1, vec![none.clone()]);
        let both = |web: Vec<Condition>, api: Vec<Condition>| {
            list(
                true,
                vec![export("east", "web", spec(80), web), export("east", "api", spec(80), api)],
            )
        };
        // The first view confirms what the sends' replies said: nothing to do.
        assert!(st.take(both(vec![none.clone()], vec![none.clone()])).is_empty());
        assert!(st.take(both(vec![none.clone()], vec![none.clone()])).is_empty());
        // Another cluster's export changing is not this cluster's business...
        let mut with_west = both(vec![none.clone()], vec![none.clone()]);
        with_west.exports.push(export("west", "web", spec(81), vec![none.clone()]));
        assert!(st.take(with_west).is_empty());
        // ...until it makes one of this cluster's exports conflict: that one.
        let mut conflicting = both(vec![port.clone()], vec![none.clone()]);
        conflicting.exports.push(export("west", "web", spec(81), vec![port.clone()]));
        assert_eq!(st.take(conflicting), vec![web.clone()]);
        // An export of this cluster appearing in or leaving the view with
        // the conditions the send's reply gave changes nothing.
        assert!(
            st.take(list(true, vec![export("east", "web", spec(80), vec![port.clone()])]))
                .is_empty()
        );
        // The view holding other content than was sent (an older write) does
        // not count: the reply's conditions hold until it catches up.
        assert_eq!(
            st.take(list(true, vec![export("east", "web", spec(81), vec![port.clone()])])),
            vec![web.clone()],
            "back to the reply's NoConflicts"
        );
        // A new send whose reply the view already repeats: no second look.
        let h81 = content_hash(&spec(81));
        st.sent(web.clone(), h81, 1, vec![port.clone()]);
        assert!(
            st.take(list(true, vec![export("east", "web", spec(81), vec![port.clone()])]))
                .is_empty()
        );
        // An export not sent (its send failed or timed out) is looked at again
        // when its copy in the registry appears or changes: the send may have
        // landed, and the registry answers again.
        st.forget(&web);
        let landed = list(true, vec![export("east", "web", spec(82), vec![port.clone()])]);
        assert_eq!(st.take(landed.clone()), vec![web.clone()]);
        assert!(st.take(landed).is_empty(), "unchanged");
        assert!(st.take(list(true, vec![])).is_empty(), "gone: nothing to send");
    }
}

#[test]
fn the_status_written_stands_until_the_store_moves_past_the_version_it_was_written_over() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition as Shown;
    let shown = |status: &str| Shown {
        type_: "Ready".into(),
        status: status.into(),
        reason: "R".into(),
        message: "m".into(),
        observed_generation: None,
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::UNIX_EPOCH,
        ),
    };
    let mut st = State::default();
    let web = id("web");
    let stored = vec![shown("False")];
    assert_eq!(st.status_shown(&web, Some("5"), &stored), stored, "nothing written");
    st.status_written(web.clone(), Some("5".into()), vec![shown("True")]);
    // The store still at version 5: it has not seen the write yet.
    assert_eq!(st.status_shown(&web, Some("5"), &stored), vec![shown("True")]);
    // Version 6 (the write, or anyone's later change): the store's again,
    // and the memory of the write is gone.
    let changed = vec![shown("Unknown")];
    assert_eq!(st.status_shown(&web, Some("6"), &changed), changed);
    assert_eq!(st.status_shown(&web, Some("5"), &stored), stored);
    // No version known: nothing remembered.
    st.status_written(web.clone(), None, vec![shown("True")]);
    assert_eq!(st.status_shown(&web, Some("5"), &stored), stored);
    st.status_written(web.clone(), Some("7".into()), vec![shown("True")]);
    st.remove(&web);
    assert_eq!(st.status_shown(&web, Some("7"), &stored), stored, "removed");
}

#[test]
fn the_registrys_conditions_come_from_the_view_once_it_holds_what_was_sent() {
    for mut st in Fed::both() {
        let web = id("web");
        let reply = vec![conflict(ConditionStatus::False, "NoConflicts")];
        let later = vec![conflict(ConditionStatus::True, "PortConflict")];
        assert!(st.registry_conditions(&web).is_empty());
        st.take(list(true, vec![export("east", "web", spec(81), later.clone())]));
        st.sent(web.clone(), content_hash(&spec(80)), 1, reply.clone());
        assert_eq!(st.registry_conditions(&web), reply, "the view is older than the send");
        st.take(list(true, vec![export("east", "web", spec(80), later.clone())]));
        assert_eq!(st.registry_conditions(&web), later);
    }
}

#[test]
fn withdrawals_are_needed_only_where_the_registry_may_hold_the_export() {
    for mut st in Fed::both() {
        let (web, api, gone) = (id("web"), id("api"), id("gone"));
        assert!(st.registry_may_hold(&web), "no view yet: maybe");
        st.take(list(false, vec![]));
        assert!(st.registry_may_hold(&web), "an incomplete view without it: maybe");
        st.take(list(true, vec![export("east", "api", spec(80), vec![])]));
        assert!(!st.registry_may_hold(&web));
        assert!(st.registry_may_hold(&api));
        st.sent(web.clone(), "h".into(), 1, vec![]);
        assert!(st.registry_may_hold(&web), "sent, the view not caught up");
        // Orphans: in the registry, no ServiceExport (web's was sent: a
        // tombstone that a re-list dropped before its withdrawal).
        st.take(list(
            true,
            vec![
                export("east", "api", spec(80), vec![]),
                export("east", "gone", spec(80), vec![]),
                export("east", "web", spec(80), vec![]),
            ],
        ));
        assert!(st.orphans(|id| id.1 == "api").is_empty(), "an unfilled store proves nothing");
        st.synced();
        assert_eq!(st.orphans(|id| id.1 == "api"), vec![gone.clone(), web.clone()]);
        assert_eq!(st.orphans(|id| id.1 != "gone"), vec![gone.clone()]);
        st.take(list(false, vec![]));
        assert!(st.orphans(|_| false).is_empty(), "an incomplete view proves nothing");
    }
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
    // Shown again with other conditions: counted once, as shown now.
    st.shown(web.clone(), vec![("Valid".into(), "False".into())]);
    assert_eq!((st.count("Valid", "True"), st.count("Valid", "False")), (1, 1));
    st.shown(web.clone(), vec![("Valid".into(), "False".into())]);
    assert_eq!(st.count("Valid", "False"), 1, "the same again");
    st.remove(&web);
    assert_eq!((st.count("Valid", "True"), st.count("Valid", "False")), (1, 0));
    st.remove(&web);
    assert_eq!(st.count("Valid", "True"), 1, "removed twice");
}

#[test]
fn changes_without_a_list_before_them_make_no_complete_view() {
    let mut st = State::default();
    let changes = changes_between(
        &list(true, vec![]),
        &list(true, vec![export("east", "api", spec(80), vec![])]),
    );
    assert_eq!(st.take_changes(&east(), changes), vec![id("api")], "appeared, not sent");
    assert!(st.registry_may_hold(&id("web")), "a view of changes alone proves nothing");
    st.synced();
    assert!(st.orphans(|_| false).is_empty());
}
