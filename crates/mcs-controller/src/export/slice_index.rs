//! Which Service each EndpointSlice named when last seen, so that a slice
//! that moves to another Service (its `kubernetes.io/service-name` label
//! changed), loses the label or goes wakes the export of the Service it
//! left as well as of the one it joined. A watch event carries only the
//! slice as it is now; without this the old Service's export kept the
//! slice's endpoints until the next periodic resync.
//!
//! ```text
//!  slice watch event ─▶ SliceIndex::on_event ─▶ services (namespace, name) to reconcile
//!    Apply / InitApply: the service it names now, and the one it named before if another
//!    Delete:            the service it named
//!    Init … InitDone:   a re-list; slices not listed again are gone (their services)
//! ```

use super::build::SERVICE_NAME_LABEL;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::runtime::watcher::Event;
use std::collections::{BTreeSet, HashMap, HashSet};

/// A namespace and a name (of a slice or of a Service).
pub type Named = (String, String);

/// The Service each known slice names, and the slices of each Service.
#[derive(Debug, Default)]
pub struct SliceIndex {
    services: HashMap<Named, String>,
    /// The other way round: the slices naming each Service (namespace,
    /// Service name), so that an export's reconcile finds its slices
    /// without a pass over every slice.
    slices: HashMap<Named, BTreeSet<String>>,
    /// The slices listed so far by a re-list in progress.
    relisted: Option<HashSet<Named>>,
}

impl SliceIndex {
    /// Takes in one watch event; the Services whose exports it touches,
    /// sorted.
    pub fn on_event(&mut self, event: Event<EndpointSlice>) -> Vec<Named> {
        let mut touched = BTreeSet::new();
        match event {
            Event::Apply(slice) => self.applied(&slice, &mut touched),
            Event::InitApply(slice) => {
                if let (Some(relisted), Some(id)) = (self.relisted.as_mut(), id_of(&slice)) {
                    relisted.insert(id);
                }
                self.applied(&slice, &mut touched);
            }
            Event::Delete(slice) => {
                if let Some(id) = id_of(&slice) {
                    touched.extend(self.forget(&id));
                }
            }
            Event::Init => self.relisted = Some(HashSet::new()),
            Event::InitDone => {
                let relisted = self.relisted.take().unwrap_or_default();
                let gone: Vec<Named> =
                    self.services.keys().filter(|id| !relisted.contains(*id)).cloned().collect();
                for id in gone {
                    touched.extend(self.forget(&id));
                }
            }
        }
        touched.into_iter().collect()
    }

    /// The names of the slices that name Service `namespace/service`,
    /// sorted.
    pub fn slices_of(&self, namespace: &str, service: &str) -> Vec<String> {
        let key = (namespace.to_owned(), service.to_owned());
        self.slices.get(&key).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// How many slices are known.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// Whether no slice is known.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    fn applied(&mut self, slice: &EndpointSlice, touched: &mut BTreeSet<Named>) {
        let Some(id) = id_of(slice) else { return };
        let Some(service) = slice.labels().get(SERVICE_NAME_LABEL).cloned() else {
            touched.extend(self.forget(&id));
            return;
        };
        if let Some(old) = self.services.insert(id.clone(), service.clone())
            && old != service
        {
            self.unlink(&id, &old);
            touched.insert((id.0.clone(), old));
        }
        self.slices.entry((id.0.clone(), service.clone())).or_default().insert(id.1);
        touched.insert((id.0, service));
    }

    /// Forgets slice `id`; the Service it named.
    fn forget(&mut self, id: &Named) -> Option<Named> {
        let service = self.services.remove(id)?;
        self.unlink(id, &service);
        Some((id.0.clone(), service))
    }

    /// Takes slice `id` out of `service`'s slices.
    fn unlink(&mut self, id: &Named, service: &str) {
        let key = (id.0.clone(), service.to_owned());
        if let Some(names) = self.slices.get_mut(&key) {
            names.remove(&id.1);
            if names.is_empty() {
                self.slices.remove(&key);
            }
        }
    }
}

fn id_of(slice: &EndpointSlice) -> Option<Named> {
    Some((slice.namespace()?, slice.metadata.name.clone()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, service: Option<&str>) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.namespace = Some("demo".into());
        s.metadata.name = Some(name.into());
        s.metadata.labels =
            service.map(|svc| [(SERVICE_NAME_LABEL.to_owned(), svc.to_owned())].into());
        s
    }

    fn services(names: &[&str]) -> Vec<Named> {
        names.iter().map(|n| ("demo".to_owned(), (*n).to_owned())).collect()
    }

    #[test]
    fn a_relabelled_slice_touches_the_service_it_left_and_the_one_it_joined() {
        let mut index = SliceIndex::default();
        assert_eq!(index.on_event(Event::Apply(slice("s1", Some("a")))), services(&["a"]));
        assert_eq!(index.on_event(Event::Apply(slice("s1", Some("a")))), services(&["a"]));
        assert_eq!(index.on_event(Event::Apply(slice("s1", Some("b")))), services(&["a", "b"]));
        // Moved once: the next change touches b alone.
        assert_eq!(index.on_event(Event::Apply(slice("s1", Some("b")))), services(&["b"]));
        assert_eq!(index.len(), 1);
        assert!(index.slices_of("demo", "a").is_empty(), "s1 left a");
        assert_eq!(index.slices_of("demo", "b"), vec!["s1"]);
    }

    #[test]
    fn each_service_has_its_own_slices_sorted_and_no_others() {
        let mut index = SliceIndex::default();
        for (name, service) in [("s2", "a"), ("s1", "a"), ("s3", "b")] {
            index.on_event(Event::Apply(slice(name, Some(service))));
        }
        let mut elsewhere = slice("s1", Some("a"));
        elsewhere.metadata.namespace = Some("other".into());
        index.on_event(Event::Apply(elsewhere));
        assert_eq!(index.slices_of("demo", "a"), vec!["s1", "s2"]);
        assert_eq!(index.slices_of("demo", "b"), vec!["s3"]);
        assert_eq!(index.slices_of("other", "a"), vec!["s1"]);
        assert!(index.slices_of("demo", "c").is_empty());
        index.on_event(Event::Delete(slice("s2", Some("a"))));
        index.on_event(Event::Apply(slice("s3", None)));
        assert_eq!(index.slices_of("demo", "a"), vec!["s1"]);
        assert!(index.slices_of("demo", "b").is_empty(), "unlabelled: no longer b's");
        // A re-list that no longer sees s1 takes it out of a's slices.
        index.on_event(Event::Init);
        index.on_event(Event::InitDone);
        assert!(index.slices_of("demo", "a").is_empty());
        assert_eq!(index.slices_of("other", "a"), Vec::<String>::new());
    }

    #[test]
    fn a_deleted_or_unlabelled_slice_touches_the_service_it_named_and_is_forgotten() {
        let mut index = SliceIndex::default();
        index.on_event(Event::Apply(slice("s1", Some("a"))));
        index.on_event(Event::Apply(slice("s2", Some("b"))));
        assert_eq!(index.on_event(Event::Delete(slice("s1", Some("a")))), services(&["a"]));
        assert_eq!(index.on_event(Event::Apply(slice("s2", None))), services(&["b"]));
        assert!(index.is_empty());
        assert!(index.on_event(Event::Delete(slice("s9", Some("c")))).is_empty(), "unknown");
        assert!(index.slices_of("demo", "a").is_empty() && index.slices_of("demo", "b").is_empty());
    }

    #[test]
    fn a_relist_finds_the_slices_that_went_and_those_that_moved_meanwhile() {
        let mut index = SliceIndex::default();
        for (name, service) in [("s1", "a"), ("s2", "b"), ("s3", "c")] {
            index.on_event(Event::Apply(slice(name, Some(service))));
        }
        assert!(index.on_event(Event::Init).is_empty());
        assert_eq!(index.on_event(Event::InitApply(slice("s1", Some("a")))), services(&["a"]));
        // s2 moved to c while the watch was down; s3 went.
        assert_eq!(index.on_event(Event::InitApply(slice("s2", Some("c")))), services(&["b", "c"]));
        assert_eq!(index.on_event(Event::InitDone), services(&["c"]));
        assert_eq!(index.len(), 2);
        // A later re-list that sees everything finds nothing gone.
        index.on_event(Event::Init);
        index.on_event(Event::InitApply(slice("s1", Some("a"))));
        index.on_event(Event::InitApply(slice("s2", Some("c"))));
        assert!(index.on_event(Event::InitDone).is_empty());
    }
}
