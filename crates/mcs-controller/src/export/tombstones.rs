//! The export reconciler's store of ServiceExports, in which a deleted one
//! stays as a tombstone until its export is withdrawn.
//!
//! The controller puts no finalizer on ServiceExports (one patch per export
//! saved, and no deletion held while the registry is away: design §13).
//! `kube::runtime::Controller` reconciles only objects in its store, so the
//! watch's `Delete` is turned into an `Apply` of the object marked deleted
//! ([`is_tombstone`]): the deletion is reconciled like any change, one at a
//! time with the object's other reconciles, and the reconcile that
//! withdrew the export [`forget`](Tombstones::forget)s it. A tombstone the
//! watch's re-list drops before that is the resync's sweep's to withdraw
//! (`State::orphans`).
//!
//! ```text
//!  watch ─▶ Apply ──────────────────────▶ store ─▶ reconcile: send
//!        └▶ Delete ─▶ Apply(tombstone) ─▶ store ─▶ reconcile: withdraw ─▶ forget
//! ```

use crate::crd::ServiceExport;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::Event;
use std::sync::Mutex;

/// The annotation that marks a tombstone: on the copy in the controller's
/// store only, never written to the cluster.
pub const TOMBSTONE: &str = "mcs-registry.io/deleted";

/// Whether `se` is a tombstone: deleted from the cluster, its export not
/// yet withdrawn.
pub fn is_tombstone(se: &ServiceExport) -> bool {
    se.annotations().contains_key(TOMBSTONE)
}

/// The store, and its writer for the watch and for [`Tombstones::forget`].
pub struct Tombstones {
    writer: Mutex<reflector::store::Writer<ServiceExport>>,
    store: Store<ServiceExport>,
}

impl std::fmt::Debug for Tombstones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tombstones").field("objects", &self.store.state().len()).finish()
    }
}

impl Default for Tombstones {
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Self { writer: Mutex::new(writer), store }
    }
}

impl Tombstones {
    /// The store the controller reads.
    pub fn store(&self) -> Store<ServiceExport> {
        self.store.clone()
    }

    /// Applies a watch event to the store, a `Delete` as the tombstone it
    /// becomes; returns the event as applied.
    pub fn apply(&self, event: Event<ServiceExport>) -> Event<ServiceExport> {
        let event = match event {
            Event::Delete(mut se) => {
                let now = Time(jiff::Timestamp::now());
                se.metadata.deletion_timestamp.get_or_insert(now);
                se.annotations_mut().insert(TOMBSTONE.into(), "true".into());
                Event::Apply(se)
            }
            event => event,
        };
        self.writer().apply_watcher_event(&event);
        event
    }

    /// Drops the tombstone `se` from the store, unless a ServiceExport of
    /// the same name has come since (another uid, or not a tombstone).
    pub fn forget(&self, se: &ServiceExport) {
        let mut writer = self.writer();
        let key = ObjectRef::from_obj(se);
        let same = self
            .store
            .get(&key)
            .is_some_and(|stored| is_tombstone(&stored) && stored.uid() == se.uid());
        if same {
            writer.apply_watcher_event(&Event::Delete(se.clone()));
        }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, reflector::store::Writer<ServiceExport>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ServiceExportSpec;

    fn export(name: &str, uid: &str) -> ServiceExport {
        let mut se = ServiceExport::new(name, ServiceExportSpec::default());
        se.metadata.namespace = Some("demo".into());
        se.metadata.uid = Some(uid.into());
        se
    }

    fn stored(t: &Tombstones, name: &str) -> Option<std::sync::Arc<ServiceExport>> {
        t.store().get(&ObjectRef::new(name).within("demo"))
    }

    #[test]
    fn a_deleted_export_stays_marked_until_forgotten() {
        let t = Tombstones::default();
        let applied = t.apply(Event::Apply(export("web", "u1")));
        assert!(matches!(&applied, Event::Apply(se) if !is_tombstone(se)));
        assert!(!is_tombstone(&stored(&t, "web").unwrap()));

        let applied = t.apply(Event::Delete(export("web", "u1")));
        let Event::Apply(tomb) = applied else { panic!("a deletion is applied as a tombstone") };
        assert!(is_tombstone(&tomb) && tomb.metadata.deletion_timestamp.is_some());
        let kept = stored(&t, "web").unwrap();
        assert!(is_tombstone(&kept), "kept until its export is withdrawn");

        t.forget(&tomb);
        assert!(stored(&t, "web").is_none());
    }

    #[test]
    fn forgetting_spares_an_export_of_the_same_name_that_came_since() {
        let t = Tombstones::default();
        let Event::Apply(tomb) = t.apply(Event::Delete(export("web", "u1"))) else { panic!() };
        t.apply(Event::Apply(export("web", "u2")));
        t.forget(&tomb);
        assert_eq!(stored(&t, "web").unwrap().uid().as_deref(), Some("u2"), "recreated");

        // A tombstone of the same uid as one already replaced by a newer
        // tombstone of another uid is not this one either.
        let Event::Apply(second) = t.apply(Event::Delete(export("web", "u2"))) else { panic!() };
        t.forget(&tomb);
        assert!(stored(&t, "web").is_some_and(|s| is_tombstone(&s)));
        t.forget(&second);
        assert!(stored(&t, "web").is_none());
    }

    #[test]
    fn a_deletion_already_under_way_keeps_its_time() {
        let t = Tombstones::default();
        let mut se = export("web", "u1");
        let then = Time("2026-12-01T00:00:00Z".parse().unwrap());
        se.metadata.deletion_timestamp = Some(then.clone());
        let Event::Apply(tomb) = t.apply(Event::Delete(se)) else { panic!() };
        assert_eq!(tomb.metadata.deletion_timestamp, Some(then));
    }

    #[test]
    fn a_relist_drops_tombstones() {
        let t = Tombstones::default();
        t.apply(Event::Delete(export("gone", "u1")));
        for event in [Event::Init, Event::InitApply(export("web", "u2")), Event::InitDone] {
            t.apply(event);
        }
        assert!(stored(&t, "gone").is_none(), "left to the sweep");
        assert!(stored(&t, "web").is_some());
    }
}
