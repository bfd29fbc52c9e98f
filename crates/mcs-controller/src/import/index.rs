//! Which of the importer's Services and EndpointSlices belong to each
//! imported service, kept beside their reflectors' stores, so that a sync
//! finds a service's objects without a pass over every object of ours
//! (each sync made two: issue 27 item 9).
//!
//! An object belongs to the service its `multicluster.kubernetes.io/service-name`
//! label names, in its namespace; one without the label belongs to none
//! (apply.rs's `unlabelled` finds those by a pass, on the rare change that
//! concerns them). The index follows its store: each watch event is
//! applied to the store first, then here, then the importer is told of it,
//! so a sync that reads the index between those two steps misses at most
//! the object whose event is about to wake it again.

use super::plan::{Key, SERVICE_NAME_LABEL};
use kube::{Resource, ResourceExt};
use std::collections::{BTreeSet, HashMap};

/// Object names per service, for one kind.
#[derive(Debug, Default)]
pub struct ByService {
    names: HashMap<Key, BTreeSet<String>>,
    /// (namespace, name) of each object indexed → its service.
    key_of: HashMap<(String, String), Key>,
}

/// The service `obj` belongs to: its label's, in its namespace.
pub fn key_by_label<K: Resource>(obj: &K) -> Option<Key> {
    let name = obj.labels().get(SERVICE_NAME_LABEL)?;
    Some((obj.meta().namespace.clone()?, name.clone()))
}

/// Whether `obj` belongs to the service `key`: what [`key_by_label`] says,
/// without allocating a key.
pub fn belongs<K: Resource>(obj: &K, key: &Key) -> bool {
    obj.meta().namespace.as_deref() == Some(key.0.as_str())
        && obj.labels().get(SERVICE_NAME_LABEL).is_some_and(|n| *n == key.1)
}

/// `(namespace, name)` of `obj`, if it has both.
fn id<K: Resource>(obj: &K) -> Option<(String, String)> {
    Some((obj.meta().namespace.clone()?, obj.meta().name.clone()?))
}

impl ByService {
    /// Records `obj` as it is now (its label may have moved it).
    pub fn apply<K: Resource>(&mut self, obj: &K) {
        let Some(id) = id(obj) else { return };
        let key = key_by_label(obj);
        if self.key_of.get(&id) == key.as_ref() {
            return;
        }
        self.forget(&id);
        if let Some(key) = key {
            self.names.entry(key.clone()).or_default().insert(id.1.clone());
            self.key_of.insert(id, key);
        }
    }

    /// Forgets `obj` (deleted).
    pub fn delete<K: Resource>(&mut self, obj: &K) {
        if let Some(id) = id(obj) {
            self.forget(&id);
        }
    }

    /// Starts again from `objs` (a re-list).
    pub fn rebuild<'a, K: Resource + 'a>(&mut self, objs: impl IntoIterator<Item = &'a K>) {
        *self = Self::default();
        for obj in objs {
            self.apply(obj);
        }
    }

    /// The names of the objects of service `key`.
    pub fn names(&self, key: &Key) -> Vec<String> {
        self.names.get(key).map(|n| n.iter().cloned().collect()).unwrap_or_default()
    }

    /// The services that have an object.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.names.keys()
    }

    fn forget(&mut self, id: &(String, String)) {
        let Some(old) = self.key_of.remove(id) else { return };
        if let Some(names) = self.names.get_mut(&old) {
            names.remove(&id.1);
            if names.is_empty() {
                self.names.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::EndpointSlice;

    fn slice(namespace: &str, name: &str, service: Option<&str>) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.namespace = Some(namespace.into());
        s.metadata.name = Some(name.into());
        s.metadata.labels =
            service.map(|svc| [(SERVICE_NAME_LABEL.to_owned(), svc.to_owned())].into());
        s
    }

    fn key(namespace: &str, name: &str) -> Key {
        (namespace.to_owned(), name.to_owned())
    }

    fn keys(index: &ByService) -> BTreeSet<Key> {
        index.keys().cloned().collect()
    }

    #[test]
    fn objects_belong_to_the_service_their_label_names() {
        let mut s = slice("llm", "web-0", None);
        assert_eq!(key_by_label(&s), None);
        s.metadata.labels = Some([(SERVICE_NAME_LABEL.to_owned(), "web".to_owned())].into());
        assert_eq!(key_by_label(&s), Some(key("llm", "web")));
        assert!(belongs(&s, &key("llm", "web")));
        assert!(!belongs(&s, &key("llm", "api")), "another service");
        assert!(!belongs(&s, &key("other", "web")), "another namespace");
        s.metadata.namespace = None;
        assert!(!belongs(&s, &key("llm", "web")), "no namespace");
        assert_eq!(key_by_label(&s), None);
    }

    #[test]
    fn objects_are_found_by_the_service_their_label_names_in_their_namespace() {
        let mut index = ByService::default();
        index.apply(&slice("llm", "web-1", Some("web")));
        index.apply(&slice("llm", "web-0", Some("web")));
        index.apply(&slice("llm", "api-0", Some("api")));
        index.apply(&slice("other", "web-0", Some("web")));
        index.apply(&slice("llm", "stray", None));
        assert_eq!(index.names(&key("llm", "web")), ["web-0", "web-1"]);
        assert_eq!(index.names(&key("llm", "api")), ["api-0"]);
        assert_eq!(index.names(&key("other", "web")), ["web-0"]);
        assert!(index.names(&key("llm", "stray")).is_empty(), "no label, no service");
        let all = [key("llm", "api"), key("llm", "web"), key("other", "web")];
        assert_eq!(keys(&index), BTreeSet::from(all));
        // Without a name or namespace nothing is indexed.
        index.apply(&EndpointSlice::default());
        assert_eq!(keys(&index).len(), 3);
    }

    #[test]
    fn a_relabelled_object_moves_and_a_deleted_one_goes_with_its_empty_service() {
        let mut index = ByService::default();
        index.apply(&slice("llm", "s", Some("web")));
        index.apply(&slice("llm", "s", Some("web")));
        assert_eq!(index.names(&key("llm", "web")), ["s"], "applied twice, indexed once");
        index.apply(&slice("llm", "s", Some("api")));
        assert!(index.names(&key("llm", "web")).is_empty());
        assert_eq!(index.names(&key("llm", "api")), ["s"]);
        assert_eq!(keys(&index), BTreeSet::from([key("llm", "api")]), "web has none left");
        index.apply(&slice("llm", "s", None));
        assert!(keys(&index).is_empty(), "label removed");
        index.apply(&slice("llm", "s", Some("api")));
        index.apply(&slice("llm", "t", Some("api")));
        index.delete(&slice("llm", "s", Some("whatever it said")));
        assert_eq!(index.names(&key("llm", "api")), ["t"]);
        index.delete(&slice("llm", "t", None));
        assert!(keys(&index).is_empty());
    }

    #[test]
    fn a_relist_starts_again() {
        let mut index = ByService::default();
        index.apply(&slice("llm", "gone", Some("web")));
        let listed = [slice("llm", "kept", Some("web")), slice("llm", "new", Some("api"))];
        index.rebuild(&listed);
        assert_eq!(index.names(&key("llm", "web")), ["kept"]);
        assert_eq!(index.names(&key("llm", "api")), ["new"]);
    }
}
