//! ServiceImports merged from live exports by the rules of KEP-1645.
//!
//! The conflict reasons are those of the mcs-api (`pkg/apis/v1beta1`,
//! `serviceexport.go`), each raised as its comment there defines it
//! (docs/design.md §13 has the table):
//!
//! - Exports are ranked oldest first: by `exported_at` (the ServiceExport's
//!   creation), then cluster id. The oldest decides the import's type,
//!   session affinity and its config, traffic policy and distribution, IP
//!   families, labels and annotations (its maps whole).
//! - Ports are merged by name first (the oldest definition of a name kept),
//!   then by protocol and number: a port whose protocol and number a kept
//!   port of another name already has is left out, so the import is always
//!   a valid Service spec. `PortConflict` whenever the ports are not
//!   identical in all the exports; the import still carries the merge.
//! - Any other property that differs from the oldest export's is a conflict
//!   of its own reason. Every export of the service reports `Conflict=True`
//!   with the reasons, comma-joined, the winning one included. Conflicting
//!   exports still contribute endpoints.
//!
//! An export stored while its cluster holds no live lease is not part of any
//! import; [`unserved_export_conditions`] says so to its writer.

use mcs_api::{
    Condition, ConditionStatus, ExportSpec, ImportCluster, Label, Protocol, ServiceImport,
    ServiceName, ServicePort,
};
use std::collections::{BTreeMap, BTreeSet};

/// Reason for exports whose ports are not identical.
pub const PORT_CONFLICT: &str = "PortConflict";
/// Reason for exports that disagree on ClusterSetIP vs Headless.
pub const TYPE_CONFLICT: &str = "TypeConflict";
/// Reason for exports that disagree on session affinity.
pub const SESSION_AFFINITY_CONFLICT: &str = "SessionAffinityConflict";
/// Reason for exports of the same session affinity whose config (the
/// ClientIP timeout) differs.
pub const SESSION_AFFINITY_CONFIG_CONFLICT: &str = "SessionAffinityConfigConflict";
/// Reason for exports whose exported labels differ.
pub const LABELS_CONFLICT: &str = "LabelsConflict";
/// Reason for exports whose exported annotations differ.
pub const ANNOTATIONS_CONFLICT: &str = "AnnotationsConflict";
/// Reason for exports whose internal traffic policy differs.
pub const INTERNAL_TRAFFIC_POLICY_CONFLICT: &str = "InternalTrafficPolicyConflict";
/// Reason for exports whose traffic distribution differs.
pub const TRAFFIC_DISTRIBUTION_CONFLICT: &str = "TrafficDistributionConflict";
/// Reason for exports whose IP families differ (as sets: a family some
/// exports lack reaches only part of the backends).
pub const IP_FAMILY_CONFLICT: &str = "IPFamilyConflict";

/// Reason of an export's `Ready=False` while its cluster holds no live lease.
pub const NO_CLUSTER_LEASE: &str = "NoClusterLease";

/// The import of one service and the conditions of each of its exports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The merged import.
    pub import: ServiceImport,
    /// `Valid`, `Ready` and `Conflict` for each exporting cluster.
    pub export_conditions: BTreeMap<Label, Vec<Condition>>,
}

/// Merges the live exports of `service`; `None` when there are none.
pub fn merge(service: &ServiceName, exports: &[(&Label, &ExportSpec)]) -> Option<Merged> {
    let mut ranked: Vec<&(&Label, &ExportSpec)> = exports.iter().collect();
    ranked.sort_by(|a, b| (a.1.exported_at, a.0).cmp(&(b.1.exported_at, b.0)));
    let (winner_cluster, winner) = **ranked.first()?;

    let mut reasons: Vec<&str> = Vec::new();
    let mut details: Vec<String> = Vec::new();
    let ports = merge_ports(&ranked, &mut details);
    let definitions = |s: &ExportSpec| -> Vec<ServicePort> {
        let mut defs: Vec<ServicePort> = s.ports.iter().map(ServicePort::definition).collect();
        defs.sort();
        defs
    };
    let winners_ports = definitions(winner);
    let port_losers = losers(&ranked, |s| definitions(s) != winners_ports);
    if !port_losers.is_empty() {
        reasons.push(PORT_CONFLICT);
        details.insert(
            0,
            format!(
                "the ports of {} are not those of cluster {winner_cluster}",
                port_losers.join(", ")
            ),
        );
    }
    let families = |s: &ExportSpec| s.ip_families.iter().copied().collect::<BTreeSet<_>>();
    // Each other property: its reason, what it is called, and whether an
    // export's differs from the oldest's (whose value the import carries).
    type Differs<'a> = Box<dyn Fn(&ExportSpec) -> bool + 'a>;
    let rules: [(&str, &str, Differs); 8] = [
        (TYPE_CONFLICT, "type", Box::new(|s| s.service_type != winner.service_type)),
        (
            SESSION_AFFINITY_CONFLICT,
            "session affinity",
            Box::new(|s| s.session_affinity != winner.session_affinity),
        ),
        (
            SESSION_AFFINITY_CONFIG_CONFLICT,
            "session affinity config",
            Box::new(|s| {
                s.session_affinity == winner.session_affinity
                    && s.session_affinity_timeout_secs != winner.session_affinity_timeout_secs
            }),
        ),
        (LABELS_CONFLICT, "exported labels", Box::new(|s| s.labels != winner.labels)),
        (
            ANNOTATIONS_CONFLICT,
            "exported annotations",
            Box::new(|s| s.annotations != winner.annotations),
        ),
        (
            INTERNAL_TRAFFIC_POLICY_CONFLICT,
            "internal traffic policy",
            Box::new(|s| s.internal_traffic_policy != winner.internal_traffic_policy),
        ),
        (
            TRAFFIC_DISTRIBUTION_CONFLICT,
            "traffic distribution",
            Box::new(|s| s.traffic_distribution != winner.traffic_distribution),
        ),
        (IP_FAMILY_CONFLICT, "IP families", Box::new(|s| families(s) != families(winner))),
    ];
    for (reason, what, differs) in &rules {
        let differing = losers(&ranked, differs);
        if !differing.is_empty() {
            reasons.push(reason);
            details.push(format!(
                "{what}: cluster {winner_cluster}'s (the oldest export) is used; {} differ",
                differing.join(", ")
            ));
        }
    }

    let conflict = if reasons.is_empty() {
        condition("Conflict", ConditionStatus::False, "NoConflicts", "no conflicting exports")
    } else {
        condition("Conflict", ConditionStatus::True, &reasons.join(","), &details.join("; "))
    };
    let export_conditions = ranked
        .iter()
        .map(|(cluster, _)| {
            let conditions = vec![
                valid(),
                condition(
                    "Ready",
                    ConditionStatus::True,
                    "Exported",
                    "export is part of the import",
                ),
                conflict.clone(),
            ];
            ((*cluster).clone(), conditions)
        })
        .collect();

    let mut clusters: Vec<ImportCluster> = ranked
        .iter()
        .map(|(cluster, spec)| ImportCluster {
            cluster_id: (*cluster).clone(),
            endpoints: spec.endpoints.clone(),
            ports: spec
                .ports
                .iter()
                .filter(|p| {
                    ports.get(p.name.as_str()).is_some_and(|(kept, _)| *kept == p.definition())
                })
                .cloned()
                .collect(),
        })
        .collect();
    clusters.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    let ready = clusters.iter().flat_map(|c| &c.endpoints).any(|e| e.ready);
    let ready_condition = if ready {
        condition("Ready", ConditionStatus::True, "EndpointsReady", "ready endpoints exist")
    } else {
        condition(
            "Ready",
            ConditionStatus::False,
            "NoReadyEndpoints",
            "no ready endpoint in any cluster",
        )
    };

    Some(Merged {
        import: ServiceImport {
            namespace: service.namespace.clone(),
            name: service.name.clone(),
            service_type: winner.service_type,
            ports: ports.into_values().map(|(p, _)| p).collect(),
            session_affinity: winner.session_affinity,
            session_affinity_timeout_secs: winner.session_affinity_timeout_secs,
            ip_families: winner.ip_families.clone(),
            internal_traffic_policy: winner.internal_traffic_policy,
            traffic_distribution: winner.traffic_distribution.clone(),
            labels: winner.labels.clone(),
            annotations: winner.annotations.clone(),
            clusters,
            conditions: vec![ready_condition],
        },
        export_conditions,
    })
}

/// The conditions of an export of `cluster_id` stored while that cluster
/// holds no live lease: valid, but not ready until the cluster registers.
pub fn unserved_export_conditions(cluster_id: &Label) -> Vec<Condition> {
    vec![
        valid(),
        condition(
            "Ready",
            ConditionStatus::False,
            NO_CLUSTER_LEASE,
            &format!(
                "cluster {cluster_id} holds no live lease; the export is served once it registers"
            ),
        ),
    ]
}

fn valid() -> Condition {
    condition("Valid", ConditionStatus::True, "Valid", "export is valid")
}

/// The import's ports by name, each with the cluster whose definition it
/// is: merged by name (the oldest definition of a name kept), then by
/// protocol and number (a port whose protocol and number a kept port of
/// another name has is left out: a Service refuses two such ports).
/// Explains every port left out in `details`.
fn merge_ports<'a>(
    ranked: &[&(&'a Label, &'a ExportSpec)],
    details: &mut Vec<String>,
) -> BTreeMap<&'a str, (ServicePort, &'a Label)> {
    let mut ports: BTreeMap<&str, (ServicePort, &Label)> = BTreeMap::new();
    let mut numbers: BTreeMap<(Protocol, u16), &str> = BTreeMap::new();
    for (cluster, spec) in ranked {
        for port in &spec.ports {
            let number = (port.protocol, port.port);
            match (ports.get(port.name.as_str()), numbers.get(&number)) {
                (None, None) => {
                    numbers.insert(number, port.name.as_str());
                    ports.insert(port.name.as_str(), (port.definition(), cluster));
                }
                (None, Some(other)) => details.push(format!(
                    "port {:?} of cluster {cluster} has the protocol and number of port {other:?}",
                    port.name
                )),
                (Some((kept, from)), _) if *kept != port.definition() => details.push(format!(
                    "port {:?} of cluster {cluster} differs from cluster {from}'s",
                    port.name
                )),
                (Some(_), _) => {}
            }
        }
    }
    ports
}

fn losers(ranked: &[&(&Label, &ExportSpec)], differs: impl Fn(&ExportSpec) -> bool) -> Vec<String> {
    ranked.iter().filter(|(_, s)| differs(s)).map(|(c, _)| c.to_string()).collect()
}

fn condition(kind: &str, status: ConditionStatus, reason: &str, message: &str) -> Condition {
    Condition {
        condition_type: kind.into(),
        status,
        reason: reason.into(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{label, mk_export_spec, port};
    use mcs_api::{ServiceType, SessionAffinity};

    fn svc() -> ServiceName {
        ServiceName { namespace: label("llm"), name: label("web") }
    }

    fn conflict_of(m: &Merged, cluster: &str) -> (ConditionStatus, String) {
        let c = m.export_conditions[&label(cluster)]
            .iter()
            .find(|c| c.condition_type == "Conflict")
            .expect("conflict condition");
        (c.status, c.reason.clone())
    }

    #[test]
    fn no_exports_no_import() {
        assert_eq!(merge(&svc(), &[]), None);
    }

    #[test]
    fn kep_conflict_table() {
        let (a, b, c) = (label("a"), label("b"), label("c"));
        let base = mk_export_spec(100, vec![port("http", 80)]);
        let later = |f: &dyn Fn(&mut ExportSpec)| {
            let mut s = mk_export_spec(200, vec![port("http", 80)]);
            f(&mut s);
            s
        };
        struct Case {
            name: &'static str,
            other: ExportSpec,
            reasons: &'static str,
            want_ports: Vec<(&'static str, u16)>,
            want_type: ServiceType,
        }
        let cases = vec![
            Case {
                name: "identical",
                other: later(&|_| {}),
                reasons: "NoConflicts",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                // Issue 27: "if the ports are not identical in all the
                // constituent Services"; the import still has the union.
                name: "port sets that differ conflict, and are unioned by name",
                other: later(&|s| s.ports.push(port("grpc", 90))),
                reasons: "PortConflict",
                want_ports: vec![("grpc", 90), ("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                // Issue 27: no two ports of one protocol and number.
                name: "a port of another name on a kept protocol and number is left out",
                other: later(&|s| s.ports[0].name = "80-80".into()),
                reasons: "PortConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "port conflict keeps the oldest",
                other: later(&|s| s.ports[0].port = 8080),
                reasons: "PortConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "protocol conflict",
                other: later(&|s| s.ports[0].protocol = mcs_api::Protocol::UDP),
                reasons: "PortConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "type conflict keeps the oldest",
                other: later(&|s| s.service_type = ServiceType::Headless),
                reasons: "TypeConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "affinity conflict",
                other: later(&|s| {
                    s.session_affinity = SessionAffinity::ClientIP;
                }),
                reasons: "SessionAffinityConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "affinity config conflict",
                other: later(&|s| s.session_affinity_timeout_secs = Some(5)),
                reasons: "SessionAffinityConfigConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "internal traffic policy conflict",
                other: later(&|s| s.internal_traffic_policy = Some(mcs_api::TrafficPolicy::Local)),
                reasons: "InternalTrafficPolicyConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "traffic distribution conflict",
                other: later(&|s| s.traffic_distribution = Some("PreferClose".into())),
                reasons: "TrafficDistributionConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "ip family conflict",
                other: later(&|s| s.ip_families = vec![mcs_api::IpFamily::IPv6]),
                reasons: "IPFamilyConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "affinity and its timeout: the affinity conflict alone",
                other: {
                    let mut s = later(&|s| {
                        s.session_affinity = SessionAffinity::ClientIP;
                        s.session_affinity_timeout_secs = Some(5)
                    });
                    s.exported_at = jiff::Timestamp::from_second(200).unwrap();
                    s
                },
                reasons: "SessionAffinityConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
            Case {
                name: "several reasons joined",
                other: later(&|s| {
                    s.ports[0].port = 1;
                    s.service_type = ServiceType::Headless;
                    s.session_affinity = SessionAffinity::ClientIP
                }),
                reasons: "PortConflict,TypeConflict,SessionAffinityConflict",
                want_ports: vec![("http", 80)],
                want_type: ServiceType::ClusterSetIP,
            },
        ];
        for case in cases {
            // The older export is on cluster "b" so that age, not id, decides.
            let m = merge(&svc(), &[(&a, &case.other), (&b, &base)]).expect(case.name);
            let ports: Vec<(&str, u16)> =
                m.import.ports.iter().map(|p| (p.name.as_str(), p.port)).collect();
            assert_eq!(ports, case.want_ports, "{}", case.name);
            assert_eq!(m.import.service_type, case.want_type, "{}", case.name);
            let want_status = if case.reasons == "NoConflicts" {
                ConditionStatus::False
            } else {
                ConditionStatus::True
            };
            assert_eq!(
                conflict_of(&m, "a"),
                (want_status, case.reasons.to_string()),
                "{}",
                case.name
            );
            assert_eq!(
                conflict_of(&m, "b"),
                (want_status, case.reasons.to_string()),
                "{}: the winner reports it too",
                case.name
            );
            assert_eq!(
                m.import.clusters.len(),
                2,
                "{}: conflicting exports keep their endpoints",
                case.name
            );
        }
        // Equal age: the cluster id decides.
        let same_age = mk_export_spec(100, vec![port("http", 81)]);
        let m = merge(&svc(), &[(&c, &same_age), (&b, &base)]).unwrap();
        assert_eq!(m.import.ports[0].port, 80, "cluster b sorts before c");
    }

    #[test]
    fn import_ready_follows_endpoints() {
        let a = label("a");
        let mut spec = mk_export_spec(1, vec![port("http", 80)]);
        let m = merge(&svc(), &[(&a, &spec)]).unwrap();
        assert_eq!(m.import.conditions[0].status, ConditionStatus::True);
        spec.endpoints[0].ready = false;
        let m = merge(&svc(), &[(&a, &spec)]).unwrap();
        assert_eq!(m.import.conditions[0].status, ConditionStatus::False);
    }

    #[test]
    fn an_unserved_export_is_valid_but_not_ready() {
        let conditions = unserved_export_conditions(&label("c1"));
        let summary: Vec<(&str, ConditionStatus, &str)> = conditions
            .iter()
            .map(|c| (c.condition_type.as_str(), c.status, c.reason.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("Valid", ConditionStatus::True, "Valid"),
                ("Ready", ConditionStatus::False, NO_CLUSTER_LEASE),
            ]
        );
        assert_eq!(
            conditions[1].message,
            "cluster c1 holds no live lease; the export is served once it registers"
        );
    }

    #[test]
    fn merge_does_not_depend_on_input_order() {
        let (a, b) = (label("a"), label("b"));
        let x = mk_export_spec(1, vec![port("http", 80)]);
        let y = mk_export_spec(2, vec![port("http", 81), port("grpc", 9)]);
        assert_eq!(merge(&svc(), &[(&a, &x), (&b, &y)]), merge(&svc(), &[(&b, &y), (&a, &x)]));
    }

    #[test]
    fn target_ports_are_local_and_a_losing_port_is_left_out_of_its_cluster() {
        let (a, b) = (label("a"), label("b"));
        let with_target = |p: ServicePort, t: u16| ServicePort { target_port: Some(t), ..p };
        let x = mk_export_spec(1, vec![with_target(port("http", 80), 8080), port("dns", 53)]);
        let y = mk_export_spec(2, vec![with_target(port("http", 80), 9090), port("dns", 54)]);
        let m = merge(&svc(), &[(&a, &x), (&b, &y)]).unwrap();
        assert_eq!(conflict_of(&m, "b"), (ConditionStatus::True, PORT_CONFLICT.into()));
        // The import's ports are definitions: no cluster's target port.
        assert_eq!(m.import.ports, vec![port("dns", 53), port("http", 80)]);
        let ports_of = |c: &str| {
            let cluster = m.import.clusters.iter().find(|x| x.cluster_id == label(c)).unwrap();
            cluster.ports.iter().map(|p| (p.name.clone(), p.endpoint_port())).collect::<Vec<_>>()
        };
        assert_eq!(ports_of("a"), vec![("http".to_owned(), 8080), ("dns".to_owned(), 53)]);
        // b's dns 54 lost to a's dns 53; its http keeps its own target port.
        assert_eq!(ports_of("b"), vec![("http".to_owned(), 9090)]);
    }

    /// Issue 27: any difference of the exported maps is a conflict, and the
    /// import carries the oldest export's maps whole, none of the others'
    /// keys (they were unioned key by key, a conflict only on one key's
    /// values).
    #[test]
    fn labels_and_annotations_are_the_oldest_exports_maps_whole() {
        let (a, b) = (label("a"), label("b"));
        let mut x = mk_export_spec(1, vec![port("http", 80)]);
        let mut y = mk_export_spec(2, vec![port("http", 80)]);
        x.labels = [("tier".into(), "gold".into())].into();
        y.labels = [("tier".into(), "gold".into()), ("team".into(), "ml".into())].into();
        x.annotations = [("mcs-registry.io/model".into(), "m1".into())].into();
        y.annotations = [("mcs-registry.io/model".into(), "m2".into())].into();
        x.ip_families = vec![mcs_api::IpFamily::IPv6, mcs_api::IpFamily::IPv4];
        y.ip_families = vec![mcs_api::IpFamily::IPv4, mcs_api::IpFamily::IPv6];
        let m = merge(&svc(), &[(&b, &y), (&a, &x)]).unwrap();
        assert_eq!(m.import.labels, x.labels, "the oldest's labels, not the union");
        assert_eq!(m.import.annotations, x.annotations);
        assert_eq!(m.import.ip_families, x.ip_families, "the oldest's family order");
        let both = format!("{LABELS_CONFLICT},{ANNOTATIONS_CONFLICT}");
        assert_eq!(conflict_of(&m, "a"), (ConditionStatus::True, both.clone()));
        assert_eq!(conflict_of(&m, "b"), (ConditionStatus::True, both));
        y.annotations = x.annotations.clone();
        let m = merge(&svc(), &[(&b, &y), (&a, &x)]).unwrap();
        assert_eq!(conflict_of(&m, "b"), (ConditionStatus::True, LABELS_CONFLICT.into()));
        y.labels = x.labels.clone();
        let m = merge(&svc(), &[(&b, &y), (&a, &x)]).unwrap();
        assert_eq!(conflict_of(&m, "b").0, ConditionStatus::False, "families in another order");
    }

    #[test]
    fn a_port_left_out_is_explained_in_the_message() {
        let (a, b) = (label("a"), label("b"));
        let x = mk_export_spec(1, vec![port("http", 80)]);
        let y = mk_export_spec(2, vec![port("http", 81), port("web", 80)]);
        let m = merge(&svc(), &[(&b, &y), (&a, &x)]).unwrap();
        let c = m.export_conditions[&b].iter().find(|c| c.condition_type == "Conflict").unwrap();
        assert_eq!(
            c.message,
            "the ports of b are not those of cluster a; \
             port \"http\" of cluster b differs from cluster a's; \
             port \"web\" of cluster b has the protocol and number of port \"http\""
        );
        assert_eq!(m.import.ports, vec![port("http", 80)]);
    }

    #[test]
    fn a_conflict_message_names_the_clusters_and_what_differs() {
        let (a, b) = (label("a"), label("b"));
        let x = mk_export_spec(1, vec![port("http", 80)]);
        let mut y = mk_export_spec(2, vec![port("http", 80), port("grpc", 90)]);
        y.service_type = ServiceType::Headless;
        let m = merge(&svc(), &[(&b, &y), (&a, &x)]).unwrap();
        let c = m.export_conditions[&b].iter().find(|c| c.condition_type == "Conflict").unwrap();
        assert_eq!(c.reason, "PortConflict,TypeConflict");
        assert_eq!(
            c.message,
            "the ports of b are not those of cluster a; \
             type: cluster a's (the oldest export) is used; b differ"
        );
    }
}
