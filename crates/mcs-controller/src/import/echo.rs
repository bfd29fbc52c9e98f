//! The echoes of the importer's own writes: the watch event of an object
//! at the version a sync of ours wrote is no change to reconcile.
//!
//! ```text
//!  sync(key) writes objects ─▶ their versions (kind, name, resourceVersion) ─▶ Echoes[key]
//!  watch event (key, version) ─▶ in Echoes[key]? taken: nothing to do
//!                               └─ not (another writer, a deletion): reconcile key
//! ```
//!
//! The importer's loop records a sync's versions when the sync returns, and
//! reads a watch event only after it (the events wait in its queue), so an
//! echo cannot arrive before its record. A key's record is replaced by its
//! next sync and dropped when its objects are removed, so what is kept is
//! bounded by the services imported. See docs/design.md §13.

use super::plan::Key;
use kube::Resource;
use std::collections::BTreeMap;

/// One version of an object: what a watch event and a write's answer both
/// carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    kind: String,
    name: String,
    resource_version: String,
}

impl Version {
    /// The version of `object`, if it has a name and a resourceVersion (every
    /// object the API server sends does).
    pub fn of<K: Resource<DynamicType = ()>>(object: &K) -> Option<Self> {
        let meta = object.meta();
        Some(Self {
            kind: K::kind(&()).into_owned(),
            name: meta.name.clone()?,
            resource_version: meta.resource_version.clone()?,
        })
    }
}

/// The versions the last sync of each service wrote, until their echoes come.
#[derive(Debug, Default)]
pub struct Echoes(BTreeMap<Key, Vec<Version>>);

impl Echoes {
    /// What the latest sync of `key` wrote, in place of what an earlier one did.
    pub fn record(&mut self, key: &Key, written: Vec<Version>) {
        if written.is_empty() {
            self.0.remove(key);
        } else {
            self.0.insert(key.clone(), written);
        }
    }

    /// Whether `version` is the echo of a write of `key`'s last sync; an
    /// echo is taken once.
    pub fn take(&mut self, key: &Key, version: &Version) -> bool {
        let Some(versions) = self.0.get_mut(key) else { return false };
        let Some(i) = versions.iter().position(|v| v == version) else { return false };
        versions.swap_remove(i);
        if versions.is_empty() {
            self.0.remove(key);
        }
        true
    }

    /// Forgets `key` (its objects removed).
    pub fn forget(&mut self, key: &Key) {
        self.0.remove(key);
    }

    /// How many services have echoes awaited.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn service(name: &str, version: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn key(name: &str) -> Key {
        ("demo".into(), name.into())
    }

    #[test]
    fn a_written_version_is_an_echo_once_and_any_other_version_is_a_change() {
        let mut echoes = Echoes::default();
        let written = Version::of(&service("derived-web", "7")).unwrap();
        let other = Version::of(&service("derived-api", "8")).unwrap();
        echoes.record(&key("web"), vec![written.clone(), other.clone()]);
        // Another writer's version of the same object, or another key: changes.
        assert!(!echoes.take(&key("web"), &Version::of(&service("derived-web", "9")).unwrap()));
        assert!(!echoes.take(&key("api"), &written));
        assert!(echoes.take(&key("web"), &written));
        assert!(!echoes.take(&key("web"), &written), "an echo is taken once");
        assert_eq!(echoes.len(), 1, "the other write's echo is still awaited");
        assert!(echoes.take(&key("web"), &other));
        assert_eq!(echoes.len(), 0, "a key with no echo left is dropped");
    }

    #[test]
    fn a_new_sync_replaces_the_record_and_a_removal_forgets_it() {
        let mut echoes = Echoes::default();
        let first = Version::of(&service("derived-web", "7")).unwrap();
        let second = Version::of(&service("derived-web", "8")).unwrap();
        echoes.record(&key("web"), vec![first.clone()]);
        echoes.record(&key("web"), vec![second.clone()]);
        assert!(!echoes.take(&key("web"), &first));
        echoes.record(&key("web"), Vec::new());
        assert!(!echoes.take(&key("web"), &second), "a sync that wrote nothing awaits nothing");
        echoes.record(&key("web"), vec![second.clone()]);
        echoes.forget(&key("web"));
        assert!(!echoes.take(&key("web"), &second));
        assert_eq!(echoes.len(), 0);
    }

    #[test]
    fn an_object_without_a_name_or_version_has_none() {
        assert!(Version::of(&Service::default()).is_none());
        let unversioned = Service {
            metadata: ObjectMeta { name: Some("x".into()), ..Default::default() },
            ..Default::default()
        };
        assert!(Version::of(&unversioned).is_none());
        assert_eq!(
            Version::of(&service("x", "1")).unwrap().kind,
            "Service",
            "the kind tells a Service from a ServiceImport of the same name"
        );
    }
}
