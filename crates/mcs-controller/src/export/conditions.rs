//! A ServiceExport's status conditions, as in the MCS API: `Valid`, `Ready`
//! and `Conflict`; `Conflict` is copied from the registry's merged view, so
//! every exporting cluster (the winner too) shows a conflict.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mcs_api::ConditionStatus;

/// `Valid`: the ServiceExport names an exportable Service.
pub const VALID: &str = "Valid";
/// `Ready`: the registry has the export.
pub const READY: &str = "Ready";
/// `Conflict`: the clusterset's exports of the service disagree.
pub const CONFLICT: &str = "Conflict";
/// Reason of `Ready=True`.
pub const EXPORTED: &str = "Exported";
/// Reason of `Ready=False` before the export is part of the clusterset.
pub const PENDING: &str = "Pending";
/// Reason of `Ready=False` when the registry refused the export or could
/// not be reached.
pub const FAILED: &str = "Failed";

/// Where the export stands, as the reconciler found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// Not exportable: `Valid=False` with this reason.
    Invalid {
        /// One of `build`'s reasons (`NoService`, `InvalidServiceType`, ...).
        reason: &'static str,
        /// A human sentence.
        message: String,
    },
    /// Valid and not (yet) accepted by the registry, for this reason.
    Pending(String),
    /// Valid and accepted; the export's conditions as the registry serves
    /// them (its `Ready` and `Conflict`).
    Accepted(Vec<mcs_api::Condition>),
    /// Valid, but the registry refused it or was unreachable (the message
    /// says which).
    Failed(String),
}

/// The conditions for `observed` at `generation`, keeping each
/// condition's `lastTransitionTime` from `previous` while its status holds.
pub fn conditions(
    previous: &[Condition],
    observed: &Observed,
    generation: Option<i64>,
    now: Time,
) -> Vec<Condition> {
    let mut wanted: Vec<(&str, &str, String, String)> = Vec::new();
    match observed {
        Observed::Invalid { reason, message } => {
            wanted.push((VALID, "False", (*reason).into(), message.clone()));
            wanted.push((
                READY,
                "False",
                PENDING.into(),
                format!("not exported: the ServiceExport is not valid ({reason})"),
            ));
        }
        Observed::Pending(message) => {
            wanted.push(valid());
            wanted.push((READY, "False", PENDING.into(), message.clone()));
        }
        Observed::Failed(message) => {
            wanted.push(valid());
            wanted.push((READY, "False", FAILED.into(), message.clone()));
        }
        Observed::Accepted(registry) => {
            wanted.push(valid());
            let find = |t: &str| registry.iter().find(|c| c.condition_type == t);
            match find(READY) {
                Some(r) if r.status != ConditionStatus::True => wanted.push((
                    READY,
                    "False",
                    PENDING.into(),
                    format!(
                        "accepted by the registry, not yet served: {}: {}",
                        r.reason, r.message
                    ),
                )),
                _ => wanted.push((
                    READY,
                    "True",
                    EXPORTED.into(),
                    "exported to the clusterset registry".into(),
                )),
            }
            if let Some(c) = find(CONFLICT) {
                wanted.push((CONFLICT, status(c.status), c.reason.clone(), c.message.clone()));
            }
        }
    }
    wanted
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let last_transition_time = previous
                .iter()
                .find(|p| p.type_ == type_ && p.status == status)
                .map_or_else(|| now.clone(), |p| p.last_transition_time.clone());
            Condition {
                type_: type_.into(),
                status: status.into(),
                reason,
                message,
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// Whether `new` differs from `old` in anything but timestamps (so that a
/// status write would change something).
pub fn differs(old: &[Condition], new: &[Condition]) -> bool {
    let strip = |c: &[Condition]| -> Vec<Condition> {
        c.iter()
            .map(|c| Condition {
                last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
                ..c.clone()
            })
            .collect()
    };
    strip(old) != strip(new)
}

fn valid() -> (&'static str, &'static str, String, String) {
    (VALID, "True", VALID.into(), "the Service can be exported".into())
}

fn status(s: ConditionStatus) -> &'static str {
    match s {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap())
    }

    fn registry(conflict: Option<(ConditionStatus, &str)>) -> Vec<mcs_api::Condition> {
        let c = |t: &str, s, r: &str| mcs_api::Condition {
            condition_type: t.into(),
            status: s,
            reason: r.into(),
            message: format!("{r} message"),
        };
        let mut v = vec![
            c("Valid", ConditionStatus::True, "Valid"),
            c("Ready", ConditionStatus::True, "Exported"),
        ];
        if let Some((s, r)) = conflict {
            v.push(c("Conflict", s, r));
        }
        v
    }

    fn summary(c: &[Condition]) -> Vec<(&str, &str, &str)> {
        c.iter().map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str())).collect()
    }

    #[test]
    fn each_outcome_has_the_standard_types_and_reasons() {
        let invalid = Observed::Invalid { reason: "NoService", message: "m".into() };
        assert_eq!(
            summary(&conditions(&[], &invalid, Some(1), at(1))),
            vec![("Valid", "False", "NoService"), ("Ready", "False", "Pending")]
        );
        assert_eq!(
            summary(&conditions(&[], &Observed::Pending("m".into()), None, at(1))),
            vec![("Valid", "True", "Valid"), ("Ready", "False", "Pending")]
        );
        let failed =
            conditions(&[], &Observed::Failed("registry unreachable: x".into()), None, at(1));
        assert_eq!(
            summary(&failed),
            vec![("Valid", "True", "Valid"), ("Ready", "False", "Failed")]
        );
        assert_eq!(failed[1].message, "registry unreachable: x");
        let accepted = Observed::Accepted(registry(Some((
            ConditionStatus::True,
            "PortConflict,TypeConflict",
        ))));
        let got = conditions(&[], &accepted, Some(3), at(1));
        assert_eq!(
            summary(&got),
            vec![
                ("Valid", "True", "Valid"),
                ("Ready", "True", "Exported"),
                ("Conflict", "True", "PortConflict,TypeConflict"),
            ]
        );
        assert_eq!(got[2].message, "PortConflict,TypeConflict message");
        assert!(got.iter().all(|c| c.observed_generation == Some(3)));
        // The registry holds the export but does not serve it yet.
        let mut unserved = registry(None);
        unserved[1].status = ConditionStatus::False;
        unserved[1].reason = "NoClusterLease".into();
        let got = conditions(&[], &Observed::Accepted(unserved), None, at(1));
        assert_eq!(summary(&got), vec![("Valid", "True", "Valid"), ("Ready", "False", "Pending")]);
        assert!(got[1].message.contains("NoClusterLease"), "{}", got[1].message);
    }

    #[test]
    fn last_transition_time_is_kept_while_the_status_holds() {
        let first = conditions(
            &[],
            &Observed::Accepted(registry(Some((ConditionStatus::False, "NoConflicts")))),
            Some(1),
            at(100),
        );
        let second = conditions(
            &first,
            &Observed::Accepted(registry(Some((ConditionStatus::True, "PortConflict")))),
            Some(2),
            at(200),
        );
        let times: Vec<_> = second.iter().map(|c| c.last_transition_time.clone()).collect();
        // Valid and Ready held; Conflict turned True.
        assert_eq!(times, vec![at(100), at(100), at(200)]);
        // Ready going False (same type, new status) gets a new time.
        let third = conditions(&second, &Observed::Failed("down".into()), Some(2), at(300));
        assert_eq!(third[0].last_transition_time, at(100));
        assert_eq!(third[1].last_transition_time, at(300));
    }

    #[test]
    fn only_a_change_beyond_timestamps_differs() {
        let observed = Observed::Accepted(registry(Some((ConditionStatus::False, "NoConflicts"))));
        let old = conditions(&[], &observed, Some(1), at(100));
        let same_later = conditions(&[], &observed, Some(1), at(500));
        assert!(!differs(&old, &same_later));
        assert!(differs(&old, &conditions(&[], &observed, Some(2), at(100))), "observedGeneration");
        let failed = conditions(&old, &Observed::Failed("x".into()), Some(1), at(100));
        assert!(differs(&old, &failed));
        let mut message = old.clone();
        message[1].message = "other".into();
        assert!(differs(&old, &message));
        assert!(differs(&old, &old[..2]), "a condition gone");
        assert!(differs(&[], &old));
    }
}
