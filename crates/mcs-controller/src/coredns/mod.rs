//! `mcs-controller coredns configure|unconfigure`: the cluster's CoreDNS
//! answers the clusterset zone from ServiceImports (its `kubernetes`
//! plugin's `multicluster` option, CoreDNS ≥ 1.12.2), or no longer does.
//! What the chart's hook Jobs run with `coredns.configure=true`, and what
//! docs/deployment.md ("ClusterSet DNS") otherwise has done by hand.
//!
//! ```text
//!  ConfigMap <namespace>/<configmap>    GET
//!    data[<key>]                        corefile::configure / unconfigure (pure)
//!    annotation RECORD_ANNOTATION       what an earlier configure added (JSON)
//!  changed? ── no ──▶ nothing written
//!     └─ yes ─▶ PUT with the resourceVersion read (409: read again, at most CONFLICT_ATTEMPTS)
//! ```
//!
//! CoreDNS's `reload` plugin picks the new Corefile up; nothing is
//! restarted here. Reading ServiceImports is CoreDNS's own grant
//! ([`SERVICEIMPORT_RULES`], a ClusterRole the chart binds to its
//! ServiceAccount); this command needs only [`CONFIGMAP_VERBS`] on the one
//! ConfigMap.

pub mod corefile;

use crate::FIELD_MANAGER;
use corefile::{Additions, CorefileError};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use std::fmt;

/// The annotation of the ConfigMap recording what `configure` added
/// ([`Additions`] as JSON), so that `unconfigure` removes that and only that.
pub const RECORD_ANNOTATION: &str = "mcs-registry.io/coredns-clusterset";

/// CoreDNS's grant for the `multicluster` option, `(API group, resource,
/// verbs)`: the chart's ClusterRole `<fullname>-coredns-serviceimports`.
pub const SERVICEIMPORT_RULES: &[(&str, &str, &[&str])] =
    &[("multicluster.x-k8s.io", "serviceimports", &["list", "watch"])];

/// What `configure` and `unconfigure` call on the ConfigMap (the chart's
/// hook Role grants them on it by name).
pub const CONFIGMAP_VERBS: &[&str] = &["get", "update"];

/// How many times a write refused for a newer resourceVersion is tried
/// again, each after reading the ConfigMap anew.
pub const CONFLICT_ATTEMPTS: usize = 5;

/// The ConfigMap holding the Corefile, and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The ConfigMap's namespace.
    pub namespace: String,
    /// The ConfigMap's name.
    pub name: String,
    /// The key of the Corefile in its data.
    pub key: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why the Corefile could not be edited. [`Error::is_usage`] tells the
/// ones of the target itself (exit 2) from failures to reach it (exit 1).
/// (The target is boxed: it would double the size of every `Result`.)
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ConfigMap does not exist.
    #[error("ConfigMap {0} not found (--namespace, --configmap)")]
    NotFound(Box<Target>),
    /// It has no such key.
    #[error("ConfigMap {0} has no key {key:?} (--key)", key = .0.key)]
    NoKey(Box<Target>),
    /// Its Corefile cannot be edited.
    #[error("ConfigMap {target} key {key:?}: {source}", key = target.key)]
    Corefile {
        /// The ConfigMap.
        target: Box<Target>,
        /// What is wrong with its Corefile.
        source: CorefileError,
    },
    /// The record annotation is not what `configure` writes.
    #[error(
        "ConfigMap {target}: annotation {RECORD_ANNOTATION} is not what mcs-controller writes \
         ({reason}); remove it once the Corefile is as it should be"
    )]
    Record {
        /// The ConfigMap.
        target: Box<Target>,
        /// The parse error.
        reason: String,
    },
    /// The API server refused or could not be reached.
    #[error("ConfigMap {target}: {}", crate::shared_kube::kube_error(source))]
    Kube {
        /// The ConfigMap.
        target: Box<Target>,
        /// The client's error.
        source: kube::Error,
    },
    /// Every write met a newer version.
    #[error("ConfigMap {0}: changed by someone else {CONFLICT_ATTEMPTS} times while being written")]
    Conflict(Box<Target>),
}

impl Error {
    /// Whether the error is about the target as the flags name it (the
    /// ConfigMap, its key, its Corefile), rather than about reaching it.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NotFound(_) | Self::NoKey(_) | Self::Corefile { .. } | Self::Record { .. }
        )
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to write: the Corefile and the record were already so.
    Unchanged {
        /// What the ConfigMap records (after `configure`) or recorded
        /// (`unconfigure` of a Corefile left as it was).
        recorded: Option<Additions>,
    },
    /// The ConfigMap was written.
    Written {
        /// What it recorded before.
        before: Option<Additions>,
        /// What it records now.
        after: Option<Additions>,
    },
    /// There is no ConfigMap (`unconfigure` only: nothing to undo).
    Absent,
}

/// Adds `zone` to the Corefile of `target` ([`corefile::configure`]) and
/// records what was added; writes nothing when it is already so.
pub async fn configure(
    api: &Api<ConfigMap>,
    target: &Target,
    zone: &str,
) -> Result<Outcome, Error> {
    edit(api, target, |corefile, recorded| {
        let Some(corefile) = corefile else { return Err(Error::NoKey(Box::new(target.clone()))) };
        let plan = corefile::configure(corefile, recorded, zone)
            .map_err(|source| Error::Corefile { target: Box::new(target.clone()), source })?;
        Ok((Some(plan.corefile), plan.recorded))
    })
    .await
}

/// Takes away what `configure` recorded in `target` (the Corefile's
/// additions and the annotation); writes nothing when nothing is recorded,
/// and does nothing when the ConfigMap does not exist.
pub async fn unconfigure(api: &Api<ConfigMap>, target: &Target) -> Result<Outcome, Error> {
    match edit(api, target, |corefile, recorded| {
        Ok((corefile.map(|c| corefile::unconfigure(c, recorded)), None))
    })
    .await
    {
        Err(Error::NotFound(_)) => Ok(Outcome::Absent),
        other => other,
    }
}

/// The Corefile (`None`: the key stays absent) and the record an edit
/// wants, planned from the Corefile (if the key is there) and the record.
type Planned = Result<(Option<String>, Option<Additions>), Error>;

/// Reads `target`, plans, and writes the plan unless it changes nothing,
/// reading again after a conflict.
async fn edit(
    api: &Api<ConfigMap>,
    target: &Target,
    plan: impl Fn(Option<&str>, Option<&Additions>) -> Planned,
) -> Result<Outcome, Error> {
    let kube = |source| Error::Kube { target: Box::new(target.clone()), source };
    for _ in 0..CONFLICT_ATTEMPTS {
        let Some(mut map) = api.get_opt(&target.name).await.map_err(kube)? else {
            return Err(Error::NotFound(Box::new(target.clone())));
        };
        let before = recorded(&map, target)?;
        let corefile = map.data.as_ref().and_then(|d| d.get(&target.key)).cloned();
        let (new_corefile, after) = plan(corefile.as_deref(), before.as_ref())?;
        if new_corefile == corefile && after == before {
            return Ok(Outcome::Unchanged { recorded: after });
        }
        if let Some(text) = new_corefile {
            map.data.get_or_insert_default().insert(target.key.clone(), text);
        }
        let annotations = map.metadata.annotations.get_or_insert_default();
        match &after {
            Some(additions) => {
                let json = serde_json::to_string(additions).expect("a record serializes");
                annotations.insert(RECORD_ANNOTATION.to_owned(), json);
            }
            None => {
                annotations.remove(RECORD_ANNOTATION);
            }
        }
        // The resourceVersion read stays in the object: the API server
        // refuses the write (409) if the ConfigMap changed since.
        map.metadata.managed_fields = None;
        let params =
            PostParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PostParams::default() };
        match api.replace(&target.name, &params, &map).await {
            Ok(_) => return Ok(Outcome::Written { before, after }),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                tracing::info!(configmap = %target, "changed while being written: reading it again");
            }
            Err(e) => return Err(kube(e)),
        }
    }
    Err(Error::Conflict(Box::new(target.clone())))
}

/// The record of `map`, if any.
fn recorded(map: &ConfigMap, target: &Target) -> Result<Option<Additions>, Error> {
    let Some(json) = map.metadata.annotations.as_ref().and_then(|a| a.get(RECORD_ANNOTATION))
    else {
        return Ok(None);
    };
    serde_json::from_str(json)
        .map(Some)
        .map_err(|e| Error::Record { target: Box::new(target.clone()), reason: e.to_string() })
}

/// Whether `zone` can be added to a Corefile as one zone: a DNS name of
/// letters, digits, `-` and `.`, labels of 1 to 63 characters.
pub fn zone_problem(zone: &str) -> Option<String> {
    let name = zone.strip_suffix('.').unwrap_or(zone);
    if name.is_empty() || name.len() > 253 {
        return Some("must be a DNS name of 1 to 253 characters".into());
    }
    for label in name.split('.') {
        let ok_chars = label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if label.is_empty()
            || label.len() > 63
            || !ok_chars
            || label.starts_with('-')
            || label.ends_with('-')
        {
            return Some(format!(
                "label {label:?} is not a DNS label (letters, digits and `-`, 1 to 63 characters)"
            ));
        }
    }
    None
}

/// Logs what `outcome` of `action` on `target` was.
pub fn log(action: &str, target: &Target, outcome: &Outcome) {
    let describe = |a: &Option<Additions>| match a {
        None => "nothing".to_owned(),
        Some(a) => {
            let mut parts = Vec::new();
            if a.zone_added {
                parts.push(format!("zone {}", a.zone));
            }
            if a.multicluster_line_added {
                parts.push(format!("line `multicluster {}`", a.zone));
            }
            parts.join(" and ")
        }
    };
    match outcome {
        Outcome::Unchanged { recorded } => tracing::info!(
            configmap = %target,
            key = %target.key,
            ours = %describe(recorded),
            "{action}: the Corefile is as it should be, nothing written"
        ),
        Outcome::Written { before, after } => tracing::info!(
            configmap = %target,
            key = %target.key,
            before = %describe(before),
            after = %describe(after),
            "{action}: Corefile written (CoreDNS's reload plugin picks it up)"
        ),
        Outcome::Absent => {
            tracing::warn!(configmap = %target, "{action}: no such ConfigMap, nothing to undo");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_are_dns_names() {
        for ok in ["clusterset.local", "clusterset.local.", "a-b.example", "x"] {
            assert_eq!(zone_problem(ok), None, "{ok}");
        }
        for bad in ["", ".", "clusterset..local", "-a.local", "a b", "a{", &"a".repeat(64)] {
            assert!(zone_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn errors_of_the_target_are_usage_errors_and_name_the_configmap() {
        let target = Target {
            namespace: "kube-system".into(),
            name: "coredns".into(),
            key: "Corefile".into(),
        };
        let err = Error::Corefile {
            target: Box::new(target.clone()),
            source: CorefileError::NoKubernetesBlock,
        };
        assert!(err.is_usage());
        let message = err.to_string();
        assert!(
            message.starts_with("ConfigMap kube-system/coredns key \"Corefile\": no `kubernetes`"),
            "{message}"
        );
        assert!(
            Error::NotFound(Box::new(target.clone()))
                .to_string()
                .contains("kube-system/coredns not found")
        );
        assert!(!Error::Conflict(Box::new(target)).is_usage());
    }
}
